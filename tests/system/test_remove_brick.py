"""remove-brick lowering the replica count of a live volume (docs/elastic.md),
on a pool of three cairnd (127.0.0.100-.102, formed by peer probe):

- replica 3 -> 2 while a writer appends to a file and a reader holds it
  open: neither sees an error, the mount drops the brick without a
  remount, the removed brick's process is gone and its directory is left
  as it was; every byte is compared on the two bricks left and through a
  fresh mount;
- refused while the set has something to heal (a brick SIGSTOPped while
  files were written), accepted once healed;
- 2 + arbiter -> 2, then 2 -> 1 (a plain volume);
- every refused input, with its message.

Run inside a private network namespace (tests/system/README).
"""

import os
import time

import pytest

import replica_pool
from cairn_cluster import pids_with_arg
from test_elastic import Appender, Vol, fill, out, read_all
from test_faults import diff_sums, tree_sums
from test_libcairn import Shell

HOSTS = ["127.0.0.100", "127.0.0.101", "127.0.0.102"]
SUCCESS = "volume remove-brick commit force: success"


@pytest.fixture(scope="module")
def pool():
    p = replica_pool.Pool(HOSTS, "st-shrink-")
    try:
        yield p.start()
    finally:
        p.close()


class ArbVol(Vol):
    """A replica 3 arbiter 1 volume (Vol makes plain replicas)."""

    def __init__(self, pool, nodes):
        Vol.count += 1
        self.pool = pool
        self.name = f"sv{Vol.count}"
        self.bricks = [(pool.nodes[i], os.path.join(pool.nodes[i].root, f"{self.name}-b{i}"))
                       for i in nodes]
        for n, b in self.bricks:
            os.makedirs(b)
            n.volumes.setdefault(self.name, []).append(b)
        self.cli("create", self.name, "replica", "3", "arbiter", "1",
                 *[f"{n.host}:{b}" for n, b in self.bricks], "force", check=True)
        self.cli("set", self.name, "network.ping-timeout", "3", check=True)
        self.cli("start", self.name, check=True)
        self.wait_online(len(self.bricks))
        self.mnt = self.mount("mnt")


@pytest.fixture
def vols(pool):
    made = []

    def make(nodes, replica, arbiter=False):
        v = ArbVol(pool, nodes) if arbiter else Vol(pool, nodes, replica)
        made.append(v)
        return v

    yield make
    for v in made:
        v.close()


def brick(v, i):
    n, p = v.bricks[i]
    return f"{n.host}:{p}"


def wait_log(m, text, timeout=20):
    end = time.time() + timeout
    while text not in m.tail(1 << 20) and time.time() < end:
        time.sleep(0.2)
    assert text in m.tail(1 << 20), m.tail(1 << 20)


def wait_gone(path, timeout=15):
    end = time.time() + timeout
    while pids_with_arg("--brick-path", path) and time.time() < end:
        time.sleep(0.1)
    assert not pids_with_arg("--brick-path", path), f"the brick process of {path} still runs"


def same_on(bricks, want_files, fresh):
    """Every brick of bricks holds what the first does; fresh reads want_files."""
    sums = tree_sums(bricks[0])
    for b in bricks[1:]:
        bad, k = diff_sums(sums, tree_sums(b))
        assert not k, f"{b}: {k} differences, e.g. {bad}"
    assert read_all(fresh.path, want_files) == []


def test_remove_brick_3_to_2_live(pool, vols):
    v = vols([0, 1, 2], 3)
    want = fill(v.mnt.path, 40, 7)
    app = Appender(v.mnt.path)
    # a libcairn client with a file open across the change
    lib = Shell(f"{pool.nodes[0].remote}:/{v.name}")
    fd = lib.ok("open /lib rwc")
    lib.ok(f"pwrite {fd} 0 before,")
    time.sleep(1)
    gone = v.bricks[2][1]
    r = v.cli("remove-brick", v.name, "replica", "2", brick(v, 2), "force")
    assert r.returncode == 0, out(r)
    assert r.stdout.startswith(SUCCESS + "\n"), out(r)
    assert "their files left on disk" in r.stdout and brick(v, 2) in r.stdout, out(r)
    info = v.cli("info", v.name).stdout
    assert "Type: Replicate" in info and "Number of Bricks: 1 x 2 = 2" in info, info
    assert gone not in info, info
    assert gone not in v.cli("status", v.name).stdout
    # the mount drops the brick from its running stack; its process ends
    wait_log(v.mnt, "replica set loses member 2")
    wait_gone(gone)
    left = tree_sums(gone)
    time.sleep(2)  # writes and reads go on with two copies
    assert lib.ok(f"pwrite {fd} 7 after") == "5"
    assert lib.call(f"fsync {fd}") == "ok"
    assert lib.call(f"pread {fd} 0 100") == "ok 12 before,after"
    lib.ok(f"close {fd}")
    lib.close()
    want["lib"] = b"before,after"
    more = fill(os.path.join(v.mnt.path, "after"), 20, 8)
    log = app.finish()
    assert not app.errors, app.errors
    assert app.reads > 10 and log
    want["log"] = log
    want.update({os.path.join("after", k): d for k, d in more.items()})
    v.wait_heal_info_clean()
    same_on([v.bricks[0][1], v.bricks[1][1]], want, v.mount("fresh"))
    # the removed brick's directory: as the brick left it, with what was
    # written before the removal
    assert tree_sums(gone) == left
    with open(os.path.join(gone, "d0", "f0"), "rb") as f:
        assert f.read() == want["d0/f0"]
    assert not os.path.exists(os.path.join(gone, "after"))


def test_a_client_that_hears_late(pool, vols):
    """A client whose cairnd tells it of the removal only after the brick
    stopped: meanwhile the brick is down for it, and what it writes is
    marked as missed there. Once it drops the brick, those marks name no
    member of the set; heal clears them."""
    v = vols([0, 1, 2], 3)
    v.cli("heal", v.name, "disable", check=True)
    want = fill(v.mnt.path, 5, 13)
    c1 = pool.nodes[1]  # not the pool's leader: the others commit without it
    m = c1.mount(v.name, os.path.join(c1.root, f"{v.name}-late-{time.time_ns()}"))
    c1.stop_signal(c1.proc.pid)
    try:
        r = v.cli("remove-brick", v.name, "replica", "2", brick(v, 2), "force")
        assert r.returncode == 0 and SUCCESS in r.stdout, out(r)
        wait_gone(v.bricks[2][1])
        with open(os.path.join(m.path, "late"), "wb") as f:
            f.write(b"l" * 30000)
        want["late"] = b"l" * 30000
    finally:
        c1.cont(c1.proc.pid)
    wait_log(m, "replica set loses member 2", timeout=60)
    info = v.cli("heal", v.name, "info").stdout
    assert "/late" in info, info  # marked against the brick that left
    v.wait_heal_info_clean()
    same_on([v.bricks[0][1], v.bricks[1][1]], want, v.mount("fresh"))


def test_remove_the_first_brick(pool, vols):
    """A member other than the last: the running mount keeps its stack (the
    removed brick is down for it) and says to remount; nothing fails, and
    heal brings the two bricks left in line."""
    v = vols([0, 1, 2], 3)
    want = fill(v.mnt.path, 20, 11)
    with open(os.path.join(v.mnt.path, "held"), "wb") as held:
        held.write(b"one,")
        r = v.cli("remove-brick", v.name, "replica", "2", brick(v, 0), "force")
        assert r.returncode == 0 and SUCCESS in r.stdout, out(r)
        info = v.cli("info", v.name).stdout
        assert f"Brick1: {brick(v, 1)}" in info and f"Brick2: {brick(v, 2)}" in info, info
        wait_log(v.mnt, "remount to use it")
        wait_gone(v.bricks[0][1])
        held.write(b"two")
        held.flush()
        os.fsync(held.fileno())
        more = fill(os.path.join(v.mnt.path, "after"), 10, 12)
    want["held"] = b"one,two"
    want.update({os.path.join("after", k): d for k, d in more.items()})
    v.wait_heal_info_clean()
    same_on([v.bricks[1][1], v.bricks[2][1]], want, v.mount("fresh"))


def test_refused_while_something_is_to_heal(pool, vols):
    v = vols([0, 1, 2], 3)
    v.cli("heal", v.name, "disable", check=True)
    want = fill(v.mnt.path, 10, 9)
    n, b = v.bricks[1]
    pid = pids_with_arg("--brick-path", b)[0]
    n.stop_signal(pid)
    try:
        with open(os.path.join(v.mnt.path, "missed"), "wb") as f:
            f.write(b"m" * 50000)
        want["missed"] = b"m" * 50000
    finally:
        # no client left to heal it on its own (the daemon is off)
        v.mnt.stop()
        n.cont(pid)
    r = v.cli("remove-brick", v.name, "replica", "2", brick(v, 2), "force")
    assert r.returncode == 1, out(r)
    assert "volume remove-brick commit force: failed:" in out(r), out(r)
    assert "entries to heal" in out(r) and f"cairn volume heal {v.name}" in out(r), out(r)
    r = pool.nodes[0].cli("--xml", "volume", "remove-brick", v.name, "replica", "2",
                          brick(v, 2), "force", check=False)
    assert r.returncode == 1 and "<cliOutput>" in r.stdout, out(r)
    assert "entries to heal" in r.stdout, out(r)
    assert "Number of Bricks: 1 x 3 = 3" in v.cli("info", v.name).stdout
    assert pids_with_arg("--brick-path", v.bricks[2][1])
    v.wait_heal_info_clean()
    r = v.cli("remove-brick", v.name, "replica", "2", brick(v, 2), "force")
    assert r.returncode == 0 and SUCCESS in r.stdout, out(r)
    wait_gone(v.bricks[2][1])
    same_on([v.bricks[0][1], v.bricks[1][1]], want, v.mount("fresh"))


def test_remove_the_arbiter_then_a_copy(pool, vols):
    v = vols([0, 1, 2], 3, arbiter=True)
    want = fill(v.mnt.path, 20, 10)
    with open(os.path.join(v.mnt.path, "held"), "wb") as held:
        held.write(b"before")
        # a data brick cannot go while the arbiter stays
        r = v.cli("remove-brick", v.name, "replica", "2", brick(v, 0), "force")
        assert r.returncode == 1 and "only the arbiters" in out(r), out(r)
        r = v.cli("remove-brick", v.name, "replica", "2", brick(v, 2), "force")
        assert r.returncode == 0 and SUCCESS in r.stdout, out(r)
        info = v.cli("info", v.name).stdout
        assert "Number of Bricks: 1 x 2 = 2" in info and "Type: Replicate" in info, info
        wait_log(v.mnt, "replica set loses member 2")
        wait_gone(v.bricks[2][1])
        held.write(b" and after the arbiter left")
        held.flush()
        os.fsync(held.fileno())
        # 2 -> 1: a plain volume of one brick
        r = v.cli("remove-brick", v.name, "replica", "1", brick(v, 1), "force")
        assert r.returncode == 0 and SUCCESS in r.stdout, out(r)
        info = v.cli("info", v.name).stdout
        assert "Type: Distribute" in info and "Number of Bricks: 1\n" in info, info
        wait_log(v.mnt, "replica set loses member 1")
        wait_gone(v.bricks[1][1])
        held.write(b", and on one brick")
    want["held"] = b"before and after the arbiter left, and on one brick"
    with open(os.path.join(v.mnt.path, "one"), "wb") as f:
        f.write(b"1" * 40000)
    want["one"] = b"1" * 40000
    assert read_all(v.mnt.path, want) == []
    assert read_all(v.mount("fresh").path, want) == []
    with open(os.path.join(v.bricks[0][1], "one"), "rb") as f:
        assert f.read() == want["one"]


def test_refused_inputs(pool, vols):
    v = vols([0, 1, 2], 3)
    c = pool.nodes[0]
    a, b, d = brick(v, 0), brick(v, 1), brick(v, 2)

    def refused(*args, text):
        r = v.cli("remove-brick", *args)
        assert r.returncode != 0 and text in out(r), (args, out(r))

    refused(v.name, "replica", "3", a, "force", text="remove-brick can only lower it")
    refused(v.name, "replica", "4", a, "force", text="remove-brick can only lower it")
    refused(v.name, "replica", "0", a, "force",
            text="replica count must be a number from 1 to 16")
    refused(v.name, "replica", "1", a, b, "force", text="one at a time")
    refused(v.name, "replica", "2", a, b, "force",
            text="Incorrect number of bricks supplied 2 with count 2")
    refused(v.name, "replica", "2", f"{c.host}:/nowhere", "force",
            text=f"Incorrect brick {c.host}:/nowhere for volume {v.name}")
    refused(v.name, a, "force", text="rebalance")
    refused(v.name, "replica", "2", a, "start", text="only 'force' is supported")
    refused(v.name, "replica", "2", a, "commit", text="only 'force' is supported")
    refused("nosuchvol", "replica", "2", a, "force", text="Volume nosuchvol does not exist")
    # a brick that is down may hold the only good copy: refused
    pid = pids_with_arg("--brick-path", v.bricks[2][1])[0]
    v.bricks[2][0].stop_signal(pid)
    try:
        refused(v.name, "replica", "2", d, "force", text=f"Brick {d} is not connected")
    finally:
        v.bricks[2][0].cont(pid)
    info = v.cli("info", v.name).stdout
    assert "Number of Bricks: 1 x 3 = 3" in info and all(x in info for x in (a, b, d)), info
