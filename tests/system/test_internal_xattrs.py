"""The volume's own extended attributes (trusted.cairn.*: a directory's
layout on a distributed volume, link-to targets, replication's pending
marks, ids) on a mount: never listed, a get answers ENODATA, a set or a
removal EPERM, and what the bricks hold is unchanged by the attempts. A
directory whose only attributes are the volume's own counts as having none,
so a cold `ls -l` answers its ACL questions without asking a brick. One
cairnd on 127.0.0.153, a distribute volume of three bricks."""

import errno
import os
import re
import subprocess

import pytest

from cairn_cluster import Cluster, fsync_dir

HOST = "127.0.0.153"
PORT = 24994
LAYOUT = "trusted.cairn.layout"
OWN_NAMES = (LAYOUT, "trusted.cairn.linkto", "trusted.cairn.pending", "trusted.cairn.gfid",
             "trusted.cairn.version", "trusted.cairn.anything")


@pytest.fixture
def dvol():
    with Cluster(host=HOST, port=PORT, prefix="ixa-") as c:
        bricks = [c.brick_path(f"b{i}") for i in range(3)]
        for b in bricks:
            os.makedirs(b)
        c.cli("volume", "create", "xv", *[f"{HOST}:{b}" for b in bricks], "force")
        c.cli("volume", "start", "xv")
        m = c.mount("xv", os.path.join(c.root, "mnt"))
        yield c, bricks, m


def brick_layouts(bricks, sub):
    return [os.getxattr(os.path.join(b, sub), LAYOUT) for b in bricks]


def test_own_names_hidden_and_refused(dvol):
    c, bricks, m = dvol
    d = os.path.join(m.path, "d")
    os.mkdir(d)
    os.setxattr(d, "user.mine", b"1")
    os.setxattr(d, "trusted.mine", b"2")
    before = brick_layouts(bricks, "d")
    assert all(len(v) > 8 for v in before)  # the bricks do hold a layout

    # listed: the user's names only, and the size query agrees with the list
    names = os.listxattr(d)
    assert sorted(names) == ["trusted.mine", "user.mine"], names
    out = subprocess.run(["getfattr", "-d", "-m", "-", d], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "trusted.cairn" not in out.stdout, out.stdout
    assert "user.mine" in out.stdout

    for name in OWN_NAMES:
        with pytest.raises(OSError) as e:
            os.getxattr(d, name)
        assert e.value.errno == errno.ENODATA, name
        with pytest.raises(OSError) as e:
            os.setxattr(d, name, b"\x01\x02")
        assert e.value.errno == errno.EPERM, name
        with pytest.raises(OSError) as e:
            os.removexattr(d, name)
        assert e.value.errno == errno.EPERM, name
    assert brick_layouts(bricks, "d") == before

    # the layout still places new files on every brick
    for k in range(60):
        with open(os.path.join(d, f"f{k}"), "wb") as f:
            f.write(b"x")
    fsync_dir(d)
    held = [len([n for n in os.listdir(os.path.join(b, "d")) if n.startswith("f")]) for b in bricks]
    assert sum(held) == 60 and all(n > 0 for n in held), held
    assert sorted(os.listdir(d)) == sorted(f"f{k}" for k in range(60))


def test_own_names_refused_on_files_written_back(dvol):
    c, bricks, m = dvol
    d = os.path.join(m.path, "w")
    os.mkdir(d)
    p = os.path.join(d, "f")
    fd = os.open(p, os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.write(fd, b"data")
        # the file may still be only on this mount: refused all the same
        with pytest.raises(OSError) as e:
            os.setxattr(fd, "trusted.cairn.linkto", b"0")
        assert e.value.errno == errno.EPERM
        os.setxattr(fd, "user.ok", b"1")
    finally:
        os.close(fd)
    fsync_dir(d)
    assert os.listxattr(p) == ["user.ok"]
    with open(p, "rb") as f:
        assert f.read() == b"data"
    holders = [b for b in bricks if os.path.exists(os.path.join(b, "w", "f"))]
    assert len(holders) == 1
    assert os.getxattr(os.path.join(holders[0], "w", "f"), "user.ok") == b"1"
    with pytest.raises(OSError):
        os.getxattr(os.path.join(holders[0], "w", "f"), "trusted.cairn.linkto")


def getxattr_round_trips(mnt):
    text = os.getxattr(mnt, "trusted.cairn.io-stats").decode()
    for line in text.splitlines():
        f = line.split()
        if f and f[0] == "GETXATTR":
            return int(f[2])
    return 0


def test_cold_listing_asks_no_acl_of_directories(dvol):
    c, bricks, m = dvol
    top = os.path.join(m.path, "t")
    os.mkdir(top)
    for i in range(20):
        sub = os.path.join(top, f"d{i}")
        os.mkdir(sub)
        with open(os.path.join(sub, "f"), "wb") as f:
            f.write(b"y")
    fsync_dir(top)
    m.stop()  # a fresh mount knows nothing of them
    m.start()
    os.setxattr(m.path, "trusted.cairn.io-stats", b"clear")
    out = subprocess.run(["ls", "-lR", m.path], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert len(re.findall(r"^d", out.stdout, re.M)) == 21
    # every directory holds a layout, none an ACL: the listing's leases say
    # so, and `ls -l` asking for each directory's ACLs costs no round trip
    assert getxattr_round_trips(m.path) < 5
