"""Quorum: client quorum (cluster.quorum-type none|auto|fixed with
cluster.quorum-count, read by every client's replicate layer, live) and
server quorum (cluster.server-quorum-type server, cluster.server-quorum-ratio
set with `volume set all`: cairnd stops its bricks while it reaches too few
servers of the pool). docs/replication.md "Quorum", docs/cluster.md "Server
quorum".

Client quorum: one cairnd on 127.0.0.66 with a replica 3 volume of three
bricks; a brick is down when SIGSTOPped (cairnd restarts only dead ones),
which a client sees after network.ping-timeout (2 s). Server quorum: three
cairnd on 127.0.0.221-223 in one pool; two are SIGSTOPped.

Run: unshare -n sh -c 'ip link set lo up; CAIRN_BUILD=$PWD/build \
     /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/system/test_quorum.py'
"""

import errno
import os

import pytest

import replica_pool
from replica_pool import tree as sums, wait_until
from cairn_cluster import Cluster, alive, pids_with_arg

HOST = "127.0.0.66"
POOL_HOSTS = ["127.0.0.221", "127.0.0.222", "127.0.0.223"]


def out(r):
    return r.stdout + r.stderr


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def write_errno(path, data=b"x"):
    """0 when the write (create, write, fsync, close) went through, else the errno."""
    try:
        write(path, data)
    except OSError as e:
        return e.errno
    return 0


@pytest.fixture
def rep3():
    with Cluster(host=HOST, prefix="quorum-") as c:
        bricks = [c.brick_path(f"b{i}") for i in range(3)]
        for b in bricks:
            os.makedirs(b)
        c.cli("volume", "create", "qv", "replica", "3", *[f"{HOST}:{b}" for b in bricks], "force")
        c.cli("volume", "set", "qv", "network.ping-timeout", "2")
        c.cli("volume", "start", "qv")
        m = c.mount("qv", os.path.join(c.root, "mnt"))
        yield c, bricks, m.path


def stop_bricks(c, which):
    st = c.brick_status("qv")
    pids = [st[i][3] for i in which]
    for p in pids:
        c.stop_signal(p)
    return pids


def test_quorum_options_checked(rep3):
    c, _, _ = rep3
    for args, why in [
        (("cluster.quorum-count", "4"), "must be 1 to its replica count, 3"),
        (("cluster.quorum-count", "0"), "must be 1 to its replica count, 3"),
        (("cluster.quorum-type", "fixed"), "fixed needs cluster.quorum-count"),
        (("cluster.quorum-type", "most"), "most"),
        (("cluster.server-quorum-ratio", "51%"), "Not a valid option for single volume"),
    ]:
        r = c.cli("volume", "set", "qv", *args, check=False)
        assert r.returncode == 1 and why in out(r), out(r)
    r = c.cli("volume", "set", "all", "cluster.quorum-type", "none", check=False)
    assert r.returncode == 1 and "Not a valid option for all volumes" in out(r), out(r)
    c.cli("volume", "set", "qv", "cluster.quorum-type", "fixed", "cluster.quorum-count", "2")
    get = c.cli("volume", "get", "qv", "all").stdout
    assert "cluster.quorum-type" in get and "fixed" in get, get
    c.cli("volume", "set", "all", "cluster.server-quorum-ratio", "51")
    r = c.cli("volume", "get", "all", "cluster.server-quorum-ratio")
    assert "51%" in r.stdout, r.stdout
    c.cli("volume", "reset", "all", "cluster.server-quorum-ratio")
    assert "51%" not in c.cli("volume", "get", "all", "cluster.server-quorum-ratio").stdout
    assert "Scope: the whole pool" in c.cli("volume", "set", "help").stdout


def test_fixed_count(rep3):
    """fixed 2 of 3: one brick down is fine, two are not (ENOTCONN, as
    GlusterFS 10); a live change to count 3 refuses with one down, which
    auto would allow."""
    c, bricks, mnt = rep3
    c.cli("volume", "set", "qv", "cluster.quorum-type", "fixed", "cluster.quorum-count", "2")
    write(os.path.join(mnt, "keep"), b"intact")
    stop_bricks(c, [2])
    assert write_errno(os.path.join(mnt, "one-down")) == 0
    c.cli("volume", "set", "qv", "cluster.quorum-count", "3")
    wait_until(lambda: write_errno(os.path.join(mnt, "count3")) == errno.ENOTCONN, 20,
               "quorum-count 3 to reach the mount")
    c.cli("volume", "set", "qv", "cluster.quorum-count", "2")
    wait_until(lambda: write_errno(os.path.join(mnt, "count2")) == 0, 20,
               "quorum-count 2 to reach the mount")
    stop_bricks(c, [1])
    assert write_errno(os.path.join(mnt, "two-down")) == errno.ENOTCONN
    with open(os.path.join(mnt, "keep"), "rb") as f:  # reads need no quorum
        assert f.read() == b"intact"


def test_none_two_down_then_heal(rep3):
    """Two of three bricks down: auto refuses; a live switch to none lets
    changes through on the one copy, which marks them against the others;
    heal brings those up to date, byte for byte, on every brick and through
    a fresh mount."""
    c, bricks, mnt = rep3
    os.makedirs(os.path.join(mnt, "d"))
    write(os.path.join(mnt, "d", "old"), os.urandom(300000))
    write(os.path.join(mnt, "d", "gone"), b"to be removed")
    pids = stop_bricks(c, [1, 2])
    assert write_errno(os.path.join(mnt, "d", "auto")) == errno.ENOTCONN
    c.cli("volume", "set", "qv", "cluster.quorum-type", "none")
    wait_until(lambda: write_errno(os.path.join(mnt, "d", "first"), b"first") == 0, 20,
               "quorum-type none to reach the mount")
    for i in range(20):
        write(os.path.join(mnt, "d", f"f{i}"), os.urandom(5000 * (i + 1)))
    with open(os.path.join(mnt, "d", "old"), "r+b") as f:
        f.seek(100000)
        f.write(os.urandom(70000))
    os.unlink(os.path.join(mnt, "d", "gone"))
    os.makedirs(os.path.join(mnt, "d", "sub"))
    os.rename(os.path.join(mnt, "d", "f0"), os.path.join(mnt, "d", "sub", "moved"))
    os.chmod(os.path.join(mnt, "d", "f1"), 0o600)
    want = sums(os.path.join(mnt, "d"))
    assert sums(os.path.join(bricks[0], "d")) == want
    assert sums(os.path.join(bricks[1], "d")) != want  # missed every change
    for p in pids:
        c.cont(p)

    def healed():
        c.cli("volume", "heal", "qv", check=False)
        return all(sums(os.path.join(b, "d")) == want for b in bricks)
    wait_until(healed, 90, "heal of the two bricks that were down")
    info = wait_until(lambda: (lambda t: t if t.count("Number of entries: 0") == 3 else None)(
        c.cli("volume", "heal", "qv", "info").stdout), 30, "heal info to empty")
    assert "Split" not in info
    fresh = c.mount("qv", os.path.join(c.root, "fresh"))
    assert sums(os.path.join(fresh.path, "d")) == want


# ---- server quorum ----

class Pool(replica_pool.Pool):
    def __init__(self):
        super().__init__(POOL_HOSTS, "st-squorum-")


def test_server_quorum_stops_and_restarts_bricks():
    pool = Pool().start()
    try:
        v = replica_pool.Vol(pool, options={"network.ping-timeout": "2"})
        a = pool.nodes[0]
        a.cli("volume", "set", "all", "cluster.server-quorum-ratio", "51%")
        a.cli("volume", "set", v.name, "cluster.server-quorum-type", "server")
        mnt = v.mounts[0].path
        os.makedirs(os.path.join(mnt, "d"))
        for i in range(10):
            write(os.path.join(mnt, "d", f"f{i}"), os.urandom(20000 * (i + 1)))
        want = sums(os.path.join(mnt, "d"))
        pid0 = v.brick_pid(0)
        assert pid0
        # Two servers stop answering (their processes, bricks included, are
        # left as they are): the first one reaches only itself.
        for n in pool.nodes[1:]:
            n.stop_signal(n.proc.pid)
        wait_until(lambda: not alive(pid0), 30, "server quorum loss to stop the brick")
        assert not pids_with_arg("--brick-path", v.bricks[0])
        st = a.brick_status(v.name)
        assert st[0][3] is None, st  # offline in `volume status`, from that server
        log = a.tail(a.logfile, 20000)
        assert "server quorum lost" in log, log
        r = a.cli("volume", "set", v.name, "network.ping-timeout", "3", check=False)
        assert r.returncode == 1 and "Quorum not met" in out(r), out(r)
        for n in pool.nodes[1:]:
            n.cont(n.proc.pid)
        wait_until(lambda: v.brick_pid(0), 30, "server quorum regained to start the brick")
        assert "server quorum regained" in a.tail(a.logfile, 20000)
        v.wait_bricks()
        for b in v.bricks:
            assert sums(os.path.join(b, "d")) == want, b
        fresh = v.mount("fresh")
        assert sums(os.path.join(fresh.path, "d")) == want
    finally:
        pool.close()
