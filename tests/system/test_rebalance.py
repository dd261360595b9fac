"""System test of growing a volume by whole sets (docs/elastic.md, "Growing
by whole sets"): one cairnd on 127.0.0.124, a 1 x 2 volume with a
placement (cluster.placement rendezvous), files, add-brick of a second set
while a mount is in use. The mount made before the add-brick sees every
file throughout and adopts the new set live (new files go where the new
placement says, checked against this file's own copy of the placement
rule through the bricks' directories); a fresh mount sees every byte.

Run: /usr/bin/python3 -m pytest tests/system/test_rebalance.py
Binaries: $CAIRN_BUILD (default <repo>/build).
"""

import os
import time

import pytest

from cairn_cluster import Cluster

HOST = "127.0.0.124"
MASK = (1 << 64) - 1


def mix64(x):
    x ^= x >> 33
    x = (x * 0xff51afd7ed558ccd) & MASK
    x ^= x >> 33
    x = (x * 0xc4ceb9fe1a85ec53) & MASK
    x ^= x >> 33
    return x


def place_key(parent, name):
    """cl_place_key (src/client/dht_place.c), written again from the note."""
    h = 14695981039346656037
    for b in parent + name.encode():
        h = ((h ^ b) * 1099511628211) & MASK
    return mix64(h)


def pick(ids, key):
    """cl_place_pick with equal weights: the set with the highest draw."""
    draws = [mix64(key ^ ((i * 0x9e3779b97f4a7c15) & MASK)) for i in ids]
    return draws.index(max(draws))


def gfid(path):
    return os.getxattr(path, "trusted.cairn.gfid")


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())  # on the bricks before they are looked at


def content(name):
    return (name * 50).encode()[: 100 + len(name) * 7]


@pytest.fixture(scope="module")
def pool():
    with Cluster(host=HOST, prefix="st-rebal-") as c:
        yield c


def files_on(bricks, d):
    out = set()
    for b in bricks:
        p = os.path.join(b, d)
        if os.path.isdir(p):
            out |= {n for n in os.listdir(p) if os.path.isfile(os.path.join(p, n))}
    return out


def test_grow_by_whole_sets(pool):
    c = pool
    r = c.cli("volume", "set", "all", "cluster.placement", "rendezvous")
    set0 = [c.brick_path("s0a"), c.brick_path("s0b")]
    set1 = [c.brick_path("s1a"), c.brick_path("s1b")]
    c.create_volume("gv", set0, replica=2)
    info = open(os.path.join(c.workdir, "vols", "gv", "info")).read()
    assert "placement=1 1:1:active\n" in info, info
    # a volume of ranges refuses to grow by sets
    c.create_volume("rv", [c.brick_path("r0")], start=False)
    r = c.cli("volume", "set", "all", "cluster.placement", "ranges")
    c.create_volume("rv2", [c.brick_path("r1")], start=False)
    assert "placement=" not in open(os.path.join(c.workdir, "vols", "rv2", "info")).read()
    r = c.cli("volume", "add-brick", "rv2", f"{HOST}:{c.brick_path('r2')}", "force", check=False)
    assert r.returncode != 0 and "hash ranges" in r.stdout + r.stderr

    m1 = c.mount("gv", os.path.join(c.root, "m1"))
    for d in ("d", "d2", "e"):
        os.mkdir(os.path.join(m1.path, d))
    write(os.path.join(m1.path, "d2", "x"), b"x")
    old = [f"f{i:03d}" for i in range(40)]
    for d in ("", "d"):
        for n in old:
            write(os.path.join(m1.path, d, n), content(n))
    # one set: every file on both of its bricks
    for b in set0:
        assert files_on([b], "") == set(old) and files_on([b], "d") == set(old)

    r = c.cli("volume", "add-brick", "gv", f"{HOST}:{set1[0]}", "force", check=False)
    assert r.returncode != 0 and "multiple" in r.stdout + r.stderr
    c.cli("volume", "add-brick", "gv", *[f"{HOST}:{b}" for b in set1], "force")
    c.volumes["gv"] += set1
    info = open(os.path.join(c.workdir, "vols", "gv", "info")).read()
    assert "placement=2 1:1:active 2:1:active\n" in info, info
    assert "placement-prev=1 1:1:active\n" in info, info
    r = c.cli("volume", "add-brick", "gv", f"{HOST}:{c.brick_path('s2a')}",
              f"{HOST}:{c.brick_path('s2b')}", "force", check=False)
    assert r.returncode != 0 and "rebalance" in r.stdout + r.stderr

    # m1 adopts the new set live: new files go where generation 2 says
    new = [f"n{i:03d}" for i in range(40)]
    deadline = time.time() + 20
    while True:
        probe = os.path.join(m1.path, "probe-%d" % int(time.time() * 1000))
        try:
            open(probe, "w").close()
        except OSError as e:
            raise AssertionError(f"{e}: {m1.tail()}")
        name = os.path.basename(probe)
        # on both bricks: the new set's replicate layer reaches both
        on1 = all(os.path.exists(os.path.join(b, name)) for b in set1)
        os.unlink(probe)
        if on1 or time.time() > deadline:
            break
        time.sleep(0.1)
    assert on1, "the mount made before add-brick never used the new set: " + m1.tail()
    for d in ("", "d"):
        for n in new:
            write(os.path.join(m1.path, d, n), content(n))
    for d in ("", "d"):
        parent = gfid(os.path.join(set0[0], d))
        for n in new:
            want = pick([1, 2], place_key(parent, n))
            where = [s for s, bricks in enumerate((set0, set1))
                     if all(os.path.isfile(os.path.join(b, d, n)) for b in bricks)]
            assert where == [want], (d, n, where, want)
        # old files stay where generation 1 put them until a rebalance
        assert files_on(set0, d) >= set(old)
        assert not files_on(set1, d) & set(old)
    # the new set got about half of the new names, and the directory d
    assert 8 <= len(files_on(set1, "d")) <= 32
    for b in set1:
        assert gfid(os.path.join(b, "d")) == gfid(os.path.join(set0[0], "d"))

    # directories made before the new set: changes reach the sets that have them
    os.mkdir(os.path.join(m1.path, "d2", "sub"))  # d2 is not on set 1 yet
    write(os.path.join(m1.path, "d2", "sub", "y"), b"y")
    for b in set0 + set1:
        assert os.path.isdir(os.path.join(b, "d2", "sub"))
    os.chmod(os.path.join(m1.path, "d2"), 0o750)
    os.rmdir(os.path.join(m1.path, "e"))
    for b in set0 + set1:
        assert not os.path.exists(os.path.join(b, "e"))
    os.rename(os.path.join(m1.path, "d", "f000"), os.path.join(m1.path, "d", "g000"))
    old.remove("f000")

    m2 = c.mount("gv", os.path.join(c.root, "m2"))
    with open(os.path.join(m2.path, "d", "g000"), "rb") as f:
        assert f.read() == content("f000")
    with open(os.path.join(m2.path, "d2", "sub", "y"), "rb") as f:
        assert f.read() == b"y"
    assert os.stat(os.path.join(m2.path, "d2")).st_mode & 0o777 == 0o750
    assert not os.path.exists(os.path.join(m2.path, "e"))
    for m in (m1, m2):
        for d in ("", "d"):
            names = set(os.listdir(os.path.join(m.path, d)))
            assert names >= set(old) | set(new)
            for n in old + new:
                with open(os.path.join(m.path, d, n), "rb") as f:
                    assert f.read() == content(n), (m.path, d, n)
    # both copies of each set agree
    for s in (set0, set1):
        for d in ("", "d", "d2", "d2/sub"):
            for n in files_on(s, d):
                data = {open(os.path.join(b, d, n), "rb").read() for b in s}
                assert len(data) == 1, (d, n)
