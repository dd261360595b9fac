"""Listings fetched ahead (src/fuse/lsahead.c, docs/consistency.md,
"Listings"): a listing under the lease that shows subdirectories makes the
mount fetch their listings before they are asked for. These tests check
that a walk is answered from them and that one is never served after the
directory changed: by another client (the recall) or through this mount.

Address: 127.0.0.192."""

import os
import re
import subprocess
import time

import pytest

from cairn_cluster import Cluster

STATS = "trusted.cairn.io-stats"


@pytest.fixture
def two():
    with Cluster(host="127.0.0.192", prefix="lsa-") as c:
        c.create_volume("av")
        a = c.mount("av", os.path.join(c.root, "a"))
        b = c.mount("av", os.path.join(c.root, "b"))
        yield c, a.path, b.path


def ahead(mnt):
    """(fetched, served) from the mount's io-stats."""
    text = os.getxattr(mnt, STATS).decode()
    m = re.search(r"FUSE listing-ahead: (\d+) listings fetched, (\d+) served", text)
    assert m, text
    return int(m.group(1)), int(m.group(2))


def make_tree(c, top, dirs=4, subs=3, files=5):
    """A tree made through one mount (top is in it), which is then mounted
    again: its write-back reaches the bricks and its leases end with its
    connections, so the other mount's first look at the tree is leased at
    once and nothing of it is cached anywhere yet."""
    os.mkdir(top)
    for i in range(dirs):
        for j in range(subs):
            d = os.path.join(top, f"d{i}", f"s{j}")
            os.makedirs(d)
            for k in range(files):
                with open(os.path.join(d, f"f{k}"), "wb") as fh:
                    fh.write(b"x" * (k + 1))
    maker = next(m for m in c.mounts if top.startswith(m.path + os.sep))
    maker.stop()
    maker.start()


def walk(top):
    """Every entry below top with its type, size and mode, as os.walk and
    lstat see them."""
    out = []
    for root, dirs, files in os.walk(top):
        for n in sorted(dirs + files):
            st = os.lstat(os.path.join(root, n))
            out.append((os.path.relpath(os.path.join(root, n), top), st.st_mode, st.st_size))
    return sorted(out)


def wait_fetched(mnt, at_least, timeout=10):
    end = time.time() + timeout
    while ahead(mnt)[0] < at_least:
        assert time.time() < end, f"only {ahead(mnt)} listings fetched ahead"
        time.sleep(0.05)


def apply_change(change, d, k, mode):
    """One change in directory d, to its file f<k> where it needs one."""
    f = os.path.join(d, f"f{k}")
    if change == "create":
        open(os.path.join(d, "new"), "wb").close()
    elif change == "unlink":
        os.unlink(f)
    elif change == "rename":
        os.rename(f, os.path.join(d, f"g{k}"))
    elif change == "write":
        with open(f, "ab") as fh:
            fh.write(b"y" * 1000)
    elif change == "truncate":
        os.truncate(f, 4000)
    elif change == "chmod":
        os.chmod(f, mode)
    elif change == "mkdir":
        os.mkdir(os.path.join(d, "newdir"))


def test_a_walk_is_answered_from_listings_fetched_ahead(two):
    c, a, b = two
    make_tree(c, os.path.join(b, "t"))
    want = walk(os.path.join(b, "t"))
    got = walk(os.path.join(a, "t"))
    assert got == want
    fetched, served = ahead(a)
    assert served > 0 and fetched > 0, (fetched, served)
    out_a = subprocess.run(["ls", "-lR", "--time-style=+%s"], cwd=os.path.join(a, "t"),
                           check=True, capture_output=True, text=True).stdout
    out_b = subprocess.run(["ls", "-lR", "--time-style=+%s"], cwd=os.path.join(b, "t"),
                           check=True, capture_output=True, text=True).stdout
    assert out_a == out_b


@pytest.mark.parametrize("change", ["create", "unlink", "rename", "write", "chmod", "mkdir"])
def test_another_clients_change_is_seen_after_listing_ahead(two, change):
    """a lists the top, so the listings below are fetched; b then changes one
    of those directories; a's next listing of it shows the change."""
    c, a, b = two
    make_tree(c, os.path.join(b, "t"), dirs=1, subs=4)
    top_a = os.path.join(a, "t", "d0")
    before = ahead(a)[0]
    os.listdir(os.path.join(a, "t"))
    os.listdir(top_a)  # shows s0..s3: their listings are fetched
    wait_fetched(a, before + 4)
    d_b = os.path.join(b, "t", "d0", "s2")
    apply_change(change, d_b, "1", 0o600)
    assert walk(os.path.join(a, "t", "d0", "s2")) == walk(d_b)


@pytest.mark.parametrize("change", ["create", "unlink", "rename", "truncate", "chmod"])
def test_own_change_is_seen_after_listing_ahead(two, change):
    """The same through the mount that fetched the listings: its own change
    makes them stale."""
    c, a, b = two
    make_tree(c, os.path.join(b, "t"), dirs=1, subs=4)
    before = ahead(a)[0]
    os.listdir(os.path.join(a, "t"))
    os.listdir(os.path.join(a, "t", "d0"))
    wait_fetched(a, before + 4)
    d = os.path.join(a, "t", "d0", "s1")
    apply_change(change, d, "2", 0o640)
    # readdirplus: names with their attributes, as listed
    out_a = subprocess.run(["ls", "-l", "--time-style=+%s", d], check=True,
                           capture_output=True, text=True).stdout
    out_b = subprocess.run(["ls", "-l", "--time-style=+%s", os.path.join(b, "t", "d0", "s1")],
                           check=True, capture_output=True, text=True).stdout
    assert out_a == out_b


def test_directories_made_here_are_not_fetched(two):
    """A directory this mount made (held exclusively, its files written
    back) is listed by the mount's own requests, never ahead."""
    c, a, b = two
    top = os.path.join(a, "mine")
    os.makedirs(os.path.join(top, "x"))
    for k in range(3):
        open(os.path.join(top, "x", f"f{k}"), "wb").close()
    before = ahead(a)[0]
    os.listdir(top)
    time.sleep(0.5)
    assert ahead(a)[0] == before
    assert sorted(os.listdir(os.path.join(top, "x"))) == ["f0", "f1", "f2"]
    assert sorted(os.listdir(os.path.join(b, "mine", "x"))) == ["f0", "f1", "f2"]
