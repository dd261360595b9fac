"""Heal of dispersed volumes (issue 44, docs/disperse.md, "Heal"): a brick
killed while files are written, overwritten, truncated, grown, created
(a partial stripe, a sparse file, inside a new directory), chmod-ed and
unlinked; back again, healed (disperse 3 redundancy 1 by `volume heal V`,
2 x (2 + 1) by the self-heal daemon alone) until heal info shows no entry;
then every fragment on every brick checked against an encode of the file
made here (test_disperse.py's code), and a different brick of each set
killed and every file read through a fresh mount: the healed fragments
are read and decode right.

cairnd on 127.0.0.131. Run inside a private network namespace.
"""

import errno
import os
import random
import re
import stat
import time

import pytest

from cairn_cluster import Cluster, kill_pid
from test_disperse import brick_pid, check_fragments, restart
from test_disperse import read_back as ec_read_back

HOST = "127.0.0.131"


def read_back(path, timeout=10):
    """The file's bytes, once the mount reaches k bricks."""
    return ec_read_back(path, timeout, retry=(errno.ENOTCONN, errno.EIO))


def entries(c, vol):
    """heal info's counts, one per brick (None for a brick it cannot read)."""
    out = c.cli("volume", "heal", vol, "info").stdout
    return [None if n == "-" else int(n) for n in re.findall(r"Number of entries: (\S+)", out)]


@pytest.fixture(scope="module")
def ec():
    c = Cluster(host=HOST, prefix="st-ech-")
    try:
        c.start()
        c.vols = {"h1": [c.brick_path(f"a{i}") for i in range(3)],
                  "h2": [c.brick_path(f"b{i}") for i in range(6)]}
        for v, bricks, shape in (("h1", c.vols["h1"], ("disperse", "3", "redundancy", "1")),
                                 ("h2", c.vols["h2"], ("disperse-data", "2", "redundancy", "1"))):
            for b in bricks:
                os.makedirs(b)
            c.cli("volume", "create", v, *shape, *[f"{HOST}:{b}" for b in bricks], "force")
            c.cli("volume", "set", v, "network.ping-timeout", "2")
        # h1 is healed by the CLI alone, h2 by the daemon alone
        c.cli("volume", "set", "h1", "cluster.self-heal-daemon", "off")
        c.cli("volume", "set", "h2", "cluster.heal-timeout", "2")
        for v in c.vols:
            c.cli("volume", "start", v)
        yield c
    finally:
        c.close()


def work_while_down(mnt, rng):
    """The files there before the outage: {relative path: bytes}."""
    p = lambda rel: os.path.join(mnt, rel)  # noqa: E731
    model = {}
    for name, size in (("keep", 20000), ("over", 70000), ("trunc", 50000), ("grow", 3000),
                       ("gone", 9000), ("olddir/f", 4000)):
        os.makedirs(os.path.dirname(p(name)) or mnt, exist_ok=True)
        model[name] = rng.randbytes(size)
        with open(p(name), "wb") as f:
            f.write(model[name])
    os.mkdir(p("rmdir"))
    with open(p("rmdir/x"), "wb") as f:
        f.write(b"x" * 700)
    return model


def change(mnt, rng, model):
    """Changes of every kind, made with a brick down, into model; returns
    the paths that must be gone."""
    p = lambda rel: os.path.join(mnt, rel)  # noqa: E731
    over = bytearray(model["over"])
    fd = os.open(p("over"), os.O_RDWR)
    for _ in range(12):
        off, data = rng.randrange(0, 72000), rng.randbytes(rng.randrange(1, 2500))
        os.pwrite(fd, data, off)
        if off > len(over):
            over.extend(bytes(off - len(over)))
        over[off:off + len(data)] = data
    os.close(fd)
    model["over"] = bytes(over)
    os.truncate(p("trunc"), 1234)  # inside the first stripe: a partial stripe
    model["trunc"] = model["trunc"][:1234]
    with open(p("grow"), "ab") as f:
        tail = rng.randbytes(5000)
        f.write(tail)
    model["grow"] += tail
    os.unlink(p("gone"))
    del model["gone"]
    for rel, data in (("new", rng.randbytes(1000)), ("newdir/a", rng.randbytes(3333)),
                      ("newdir/sub/b", rng.randbytes(1536))):
        os.makedirs(os.path.dirname(p(rel)) or mnt, exist_ok=True)
        with open(p(rel), "wb") as f:
            f.write(data)
        model[rel] = data
    sparse = rng.randbytes(3000)
    with open(p("sparse"), "wb") as f:
        f.seek(1 << 20)
        f.write(sparse)
    model["sparse"] = bytes(1 << 20) + sparse
    os.unlink(p("rmdir/x"))
    os.rmdir(p("rmdir"))
    os.chmod(p("keep"), 0o600)
    return ["gone", "rmdir"]


@pytest.mark.parametrize("vol,victims,second", [("h1", (1,), (0,)), ("h2", (0, 5), (1, 4))])
def test_heal_rebuilds_fragments(ec, vol, victims, second):
    c = ec
    bricks = c.vols[vol]
    rng = random.Random(hash(vol) & 0xFFFF)
    m = c.mount(vol, os.path.join(c.root, f"{vol}-m"))
    model = work_while_down(m.path, rng)
    for v in victims:
        kill_pid(brick_pid(c, vol, bricks[v]))
    gone = change(m.path, rng, model)
    m.stop()
    restart(c, vol)
    if vol == "h1":
        end = time.time() + 30
        while True:  # the CLI's mount of the set may meet a brick not listening yet
            r = c.cli("volume", "heal", vol, check=False)
            if r.returncode == 0 or time.time() > end:
                break
            time.sleep(0.5)
        assert r.returncode == 0, r.stdout + r.stderr
        # no fragment is a copy of another to choose
        r = c.cli("volume", "heal", vol, "split-brain", "bigger-file", "/keep", check=False)
        assert r.returncode != 0 and "does not apply" in r.stderr, r.stderr
    end = time.time() + 40
    while True:
        n = entries(c, vol)
        if n and all(x == 0 for x in n):
            break
        assert time.time() < end, f"heal info of {vol} not at 0: {n}"
        time.sleep(0.5)
    # every fragment of every file, the healed bricks' too
    for rel, data in model.items():
        check_fragments(bricks, 2, 1, rel, data)  # both are 2 + 1 sets
    for rel in gone:
        for b in bricks:
            assert not os.path.lexists(os.path.join(b, rel)), f"{rel} left on {b}"
    for v in victims:  # the rebuilt sparse fragment keeps its hole
        f = os.path.join(bricks[v], "sparse")
        if os.path.exists(f):
            assert os.stat(f).st_blocks * 512 < (64 << 10), os.stat(f)
    for b in bricks:
        if os.path.lexists(os.path.join(b, "keep")):
            assert stat.S_IMODE(os.stat(os.path.join(b, "keep")).st_mode) == 0o600, b
    # the healed bricks are read again: another brick of each set goes
    for v in second:
        kill_pid(brick_pid(c, vol, bricks[v]))
    try:
        fm = c.mount(vol, os.path.join(c.root, f"{vol}-f"))
        for rel, data in model.items():
            assert read_back(os.path.join(fm.path, rel)) == data, rel
        for rel in gone:
            assert not os.path.lexists(os.path.join(fm.path, rel)), rel
        assert stat.S_IMODE(os.stat(os.path.join(fm.path, "keep")).st_mode) == 0o600
        fm.stop()
    finally:
        restart(c, vol)
