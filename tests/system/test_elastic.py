"""Elastic volumes (docs/elastic.md): bricks replaced, reset and added while
a volume is mounted and in use, on a pool of three cairnd
(127.0.0.245-.247, formed by peer probe).

- replace-brick of a brick whose server (cairnd and brick) was killed,
  while a writer appends to a file and a reader holds it open: neither sees
  an error, heal fills the new brick, and every byte is compared on every
  brick and through a fresh mount;
- add-brick replica 2 -> 3 (and 2 -> 2 + arbiter) under a live mount and a
  libcairn client: both adopt the new brick without a remount, every file
  read through the mount while the new copy is empty and while heal fills
  it returns the right bytes, and both write to it afterwards;
- reset-brick start / commit of a brick whose directory was wiped;
- every refused input, with its message.

Run inside a private network namespace (tests/system/README).
"""

import os
import shutil
import threading
import time

import pytest

import replica_pool
from cairn_cluster import kill_pid, pids_with_arg
from test_faults import diff_sums, tree_sums
from test_libcairn import Shell

HOSTS = ["127.0.0.245", "127.0.0.246", "127.0.0.247"]
PING = 3


def out(r):
    return r.stdout + r.stderr


@pytest.fixture(scope="module")
def pool():
    p = replica_pool.Pool(HOSTS, "st-elastic-")
    try:
        yield p.start()
    finally:
        p.close()


class Vol:
    count = 0

    def __init__(self, pool, nodes, replica):
        Vol.count += 1
        self.pool = pool
        self.name = f"ev{Vol.count}"
        self.bricks = [(pool.nodes[i], os.path.join(pool.nodes[i].root, f"{self.name}-b{i}"))
                       for i in nodes]
        for n, b in self.bricks:
            os.makedirs(b)
            n.volumes.setdefault(self.name, []).append(b)
        c = pool.nodes[0]
        rep = ["replica", str(replica)] if replica > 1 else []
        c.cli("volume", "create", self.name, *rep, *[f"{n.host}:{b}" for n, b in self.bricks],
              "force")
        c.cli("volume", "set", self.name, "network.ping-timeout", str(PING))
        c.cli("volume", "start", self.name)
        self.wait_online(len(self.bricks))
        self.mnt = self.mount("mnt")

    def mount(self, what):
        c = self.pool.nodes[0]
        return c.mount(self.name, os.path.join(c.root, f"{self.name}-{what}-{time.time_ns()}"))

    def cli(self, *args, check=False):
        return self.pool.nodes[0].cli("volume", *args, check=check, timeout=120)

    def wait_online(self, n, timeout=30):
        end = time.time() + timeout
        st = ""
        while time.time() < end:
            st = self.cli("status", self.name).stdout
            if st.count(" Y ") >= n:
                return
            time.sleep(0.2)
        raise AssertionError(f"{n} bricks of {self.name} not online:\n{st}")

    def add(self, node, tag):
        """A new brick directory (not made: the command makes it)."""
        n = self.pool.nodes[node]
        b = os.path.join(n.root, f"{self.name}-{tag}")
        n.volumes.setdefault(self.name, []).append(b)
        return n, b

    def heal_until_equal(self, bricks, want, timeout=180):
        """Runs index heals until every brick of bricks holds want."""
        end = time.time() + timeout
        why = ""
        while time.time() < end:
            self.cli("heal", self.name)
            why = ""
            for b in bricks:
                bad, n = diff_sums(want, tree_sums(b))
                if n:
                    why = f"{b}: {n} differences, e.g. {bad}"
                    break
            if not why:
                return
            time.sleep(1)
        raise AssertionError("bricks differ after heal: " + why)

    def wait_heal_info_clean(self, timeout=60):
        end = time.time() + timeout
        info = ""
        while time.time() < end:
            info = self.cli("heal", self.name, "info").stdout
            n = [ln for ln in info.splitlines() if ln.startswith("Number of entries:")]
            if n and all(ln.endswith(": 0") for ln in n):
                return
            self.cli("heal", self.name)
            time.sleep(1)
        raise AssertionError("heal info not clean:\n" + info[-3000:])

    def close(self):
        for n in self.pool.nodes:
            for m in list(n.mounts):
                if os.path.basename(m.path).startswith(self.name + "-"):
                    m.stop()
                    n.mounts.remove(m)
        c = self.pool.nodes[0]
        c.stop_volume(self.name, check=False)
        c.cli("volume", "delete", self.name, check=False)
        for n in self.pool.nodes:
            for b in n.volumes.pop(self.name, []):
                for p in pids_with_arg("--brick-path", b):
                    kill_pid(p)


@pytest.fixture
def vols(pool):
    made = []

    def make(nodes, replica):
        v = Vol(pool, nodes, replica)
        made.append(v)
        return v

    yield make
    pool.revive()
    for v in made:
        v.close()


def fill(root, n, seed):
    """n files of assorted sizes in two directories, and a symlink."""
    want = {}
    for i in range(n):
        d = os.path.join(root, f"d{i % 2}")
        os.makedirs(d, exist_ok=True)
        data = os.urandom((i * 7919 + seed) % 150000)
        with open(os.path.join(d, f"f{i}"), "wb") as f:
            f.write(data)
        want[os.path.join(f"d{i % 2}", f"f{i}")] = data
    os.symlink("d0/f0", os.path.join(root, "link"))
    return want


def read_all(mnt, want):
    """The files whose bytes through mnt differ from want."""
    bad = []
    for rel, data in want.items():
        with open(os.path.join(mnt, rel), "rb") as f:
            if f.read() != data:
                bad.append(rel)
    return bad


class Appender:
    """Appends to mnt/log through one open handle, and reads it through
    another held open, until stopped; records every error and every wrong
    byte read."""

    def __init__(self, mnt):
        self.path = os.path.join(mnt, "log")
        self.data = bytearray()
        self.errors = []
        self.reads = 0
        self.stop = threading.Event()
        self.w = open(self.path, "wb", buffering=0)
        self.r = open(self.path, "rb", buffering=0)
        self.threads = [threading.Thread(target=self.write), threading.Thread(target=self.read)]
        self.lock = threading.Lock()
        for t in self.threads:
            t.start()

    def write(self):
        i = 0
        while not self.stop.is_set():
            chunk = (b"%08d" % i) * 512
            try:
                self.w.write(chunk)
                if i % 8 == 0:
                    os.fsync(self.w.fileno())
            except OSError as e:
                self.errors.append(f"write {i}: {e}")
                return
            with self.lock:
                self.data += chunk
            i += 1
            time.sleep(0.01)

    def read(self):
        while not self.stop.is_set():
            with self.lock:
                have = bytes(self.data)
            try:
                got = os.pread(self.r.fileno(), len(have), 0)
            except OSError as e:
                self.errors.append(f"read: {e}")
                return
            if got != have[:len(got)] or len(got) < len(have):
                self.errors.append(f"read {len(got)} bytes, {len(have)} written; "
                                   f"first difference at {next((k for k in range(len(got)) if got[k] != have[k]), len(got))}")
            self.reads += 1
            time.sleep(0.05)

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join()
        try:
            os.fsync(self.w.fileno())
        except OSError as e:
            self.errors.append(f"final fsync: {e}")
        self.w.close()
        self.r.close()
        return bytes(self.data)


def test_replace_brick_of_a_dead_server(pool, vols):
    v = vols([0, 1, 2], 3)
    want = fill(v.mnt.path, 60, 1)
    app = Appender(v.mnt.path)
    time.sleep(1)
    dead = pool.nodes[2]
    pool.kill_server(dead)
    time.sleep(1)
    old = f"{dead.host}:{v.bricks[2][1]}"
    n, nb = v.add(0, "new")
    r = v.cli("replace-brick", v.name, old, f"{n.host}:{nb}", "commit", "force")
    assert r.returncode == 0, out(r)
    assert r.stdout.strip() == ("volume replace-brick: success: replace-brick commit force "
                                "operation successful"), out(r)
    info = v.cli("info", v.name).stdout
    assert f"Brick3: {n.host}:{nb}" in info, info
    assert old not in info, info
    # the mount moved its third brick connection without a remount
    end = time.time() + 20
    while "now on the bricks of generation" not in v.mnt.tail(1 << 20) and time.time() < end:
        time.sleep(0.2)
    assert "now on the bricks of generation" in v.mnt.tail(1 << 20), v.mnt.tail(1 << 20)
    assert "not read from until heal has filled it" in pool.brick_logs()
    # files opened anew while heal fills the new brick: never a wrong byte
    healer = threading.Thread(target=lambda: [v.cli("heal", v.name) for _ in range(2)])
    healer.start()
    rounds = 0
    while healer.is_alive() or rounds < 2:
        assert read_all(v.mnt.path, want) == []
        rounds += 1
    healer.join()
    time.sleep(2)  # writes and reads go on with the new brick in the set
    log = app.finish()
    assert not app.errors, app.errors
    assert app.reads > 10 and len(log) > 0
    want["log"] = log
    sums = tree_sums(v.bricks[0][1])
    bricks = [v.bricks[0][1], v.bricks[1][1], nb]
    v.heal_until_equal(bricks, sums)
    v.wait_heal_info_clean()
    for b in bricks:
        bad, k = diff_sums(sums, tree_sums(b))
        assert not k, f"{b}: {bad}"
    fresh = v.mount("fresh")
    assert read_all(fresh.path, want) == []
    assert os.readlink(os.path.join(fresh.path, "link")) == "d0/f0"
    # the dead server comes back: it learns its brick left the volume and
    # does not start it
    dead.start()
    time.sleep(2)
    assert not pids_with_arg("--brick-path", v.bricks[2][1])
    v.bricks[2] = (n, nb)


def arbiter_equal(arb, sums):
    """None when arb holds sums' names with empty files, else why."""
    names = {k: x[:2] for k, x in sums.items()}
    got = tree_sums(arb, data=False)
    bad, k = diff_sums(names, got)
    if k:
        return f"arbiter {arb}: {k} differences, e.g. {bad}"
    if any(os.path.getsize(os.path.join(arb, p)) for p, x in got.items() if x[0] == "f"):
        return "the arbiter holds file data"
    return None


@pytest.mark.parametrize("arbiter", [False, True], ids=["rep3", "arb"])
def test_add_brick_raises_the_replica_count_live(pool, vols, arbiter):
    v = vols([0, 1], 2)
    want = fill(v.mnt.path, 120, 2)
    # no self-heal daemon: the new copy stays empty until the CLI heals it
    v.cli("heal", v.name, "disable", check=True)
    lib = Shell(f"{pool.nodes[0].remote}:/{v.name}")
    n, nb = v.add(2, "added")
    r = v.cli("add-brick", v.name, "replica", "3", *(["arbiter", "1"] if arbiter else []),
              f"{n.host}:{nb}")
    assert r.returncode == 0 and "volume add-brick: success" in r.stdout, out(r)
    info = v.cli("info", v.name).stdout
    shape = "1 x (2 + 1) = 3" if arbiter else "1 x 3 = 3"
    assert f"Number of Bricks: {shape}" in info, info
    assert f"Brick3: {n.host}:{nb}" in info, info
    end = time.time() + 20
    while "now on the bricks of generation" not in v.mnt.tail(1 << 20) and time.time() < end:
        time.sleep(0.2)
    assert "now on the bricks of generation" in v.mnt.tail(1 << 20), v.mnt.tail(1 << 20)
    # heal info names what is left (the whole tree, from its root), and the
    # mount reads every file right although the new copy holds none
    info = v.cli("heal", v.name, "info").stdout
    assert f"Brick {n.host}:{nb}\n/\n" in info, info
    assert not os.path.exists(os.path.join(nb, "d0"))
    assert read_all(v.mnt.path, want) == []
    with open(os.path.join(v.mnt.path, "d0", "f0"), "rb") as f:
        assert f.read() == want["d0/f0"]
    # reads while heal fills the new copy: never a wrong byte
    healer = threading.Thread(target=lambda: [v.cli("heal", v.name) for _ in range(3)])
    healer.start()
    rounds = 0
    while healer.is_alive() or rounds < 3:
        assert read_all(v.mnt.path, want) == []
        rounds += 1
    healer.join()
    # a file written through the live mount after the change reaches all three
    with open(os.path.join(v.mnt.path, "after"), "wb") as f:
        f.write(b"x" * 70000)
    want["after"] = b"x" * 70000
    sums = tree_sums(v.bricks[0][1])
    v.heal_until_equal([v.bricks[0][1], v.bricks[1][1]] + ([] if arbiter else [nb]), sums)
    end = time.time() + 120
    while arbiter and arbiter_equal(nb, sums) and time.time() < end:
        v.cli("heal", v.name)
        time.sleep(1)
    v.wait_heal_info_clean()
    sums = tree_sums(v.bricks[0][1])
    for b in (v.bricks[1][1],) + (() if arbiter else (nb,)):
        bad, k = diff_sums(sums, tree_sums(b))
        assert not k, f"{b}: {bad}"
    if arbiter:
        assert arbiter_equal(nb, sums) is None, arbiter_equal(nb, sums)
    assert read_all(v.mount("fresh").path, want) == []
    # the mount and a libcairn client opened before the change now write to
    # the new copy themselves (the self-heal daemon is off, no heal runs)
    with open(os.path.join(v.mnt.path, "late"), "wb") as f:
        f.write(b"late write")
        os.fsync(f.fileno())
    assert lib.call("write /lib-late 0123456789") == "ok"
    lib.close()
    expect = {"late": b"late write", "lib-late": b"0123456789"}
    for name, data in expect.items():
        p = os.path.join(nb, name)
        end = time.time() + 10
        while not os.path.exists(p) and time.time() < end:
            time.sleep(0.1)
        with open(p, "rb") as f:
            assert f.read() == (b"" if arbiter else data), name


def test_reset_brick_of_a_wiped_directory(pool, vols):
    v = vols([0, 1, 2], 3)
    want = fill(v.mnt.path, 40, 3)
    n, b = v.bricks[1]
    brick = f"{n.host}:{b}"
    r = v.cli("reset-brick", v.name, brick, brick, "commit", "force")
    assert r.returncode == 1 and "reset-brick start" in out(r), out(r)
    r = v.cli("reset-brick", v.name, brick, "start")
    assert r.returncode == 0, out(r)
    assert "volume reset-brick: success: reset-brick start operation successful" in r.stdout
    end = time.time() + 10
    while pids_with_arg("--brick-path", b) and time.time() < end:
        time.sleep(0.1)
    assert not pids_with_arg("--brick-path", b), "reset-brick start left the brick running"
    # the disk is replaced: the directory comes back empty
    shutil.rmtree(b)
    os.makedirs(b)
    with open(os.path.join(v.mnt.path, "during"), "wb") as f:
        f.write(b"written while the brick was out")
    want["during"] = b"written while the brick was out"
    r = v.cli("reset-brick", v.name, brick, brick, "commit", "force")
    assert r.returncode == 0, out(r)
    assert "volume reset-brick: success: reset-brick commit force operation successful" in r.stdout
    v.wait_online(3)
    sums = tree_sums(v.bricks[0][1])
    v.heal_until_equal([x[1] for x in v.bricks], sums)
    v.wait_heal_info_clean()
    assert read_all(v.mount("fresh").path, want) == []


def test_refused_inputs(pool, vols):
    v = vols([0, 1], 2)
    c = pool.nodes[0]
    a, b = (f"{n.host}:{p}" for n, p in v.bricks)
    free = f"{c.host}:{os.path.join(c.root, 'ev-free')}"

    def refused(*args, text):
        r = v.cli(*args)
        assert r.returncode != 0 and text in out(r), (args, out(r))

    refused("replace-brick", v.name, f"{c.host}:/nowhere", free, "commit", "force",
            text=f"brick: {c.host}:/nowhere does not exist in volume: {v.name}")
    refused("replace-brick", v.name, a, b, "commit", "force",
            text=f"Brick: {b} not available. Brick may be containing or be contained by an "
                 "existing brick.")
    refused("replace-brick", v.name, a, "127.0.0.249:/x", "commit", "force",
            text="Host 127.0.0.249 is not in 'Peer in Cluster' state")
    refused("replace-brick", "nosuchvol", a, free, "commit", "force",
            text="Volume nosuchvol does not exist")
    refused("add-brick", v.name, "replica", "2", free,
            text="add-brick can only raise it")
    refused("add-brick", v.name, "replica", "3", free, free + "2",
            text="Incorrect number of bricks supplied 2 with count 3")
    refused("add-brick", v.name, free, text="needs a rebalance")
    refused("reset-brick", v.name, a, a, "commit", text="reset-brick start")
    refused("reset-brick", v.name, a, free, "commit", "force",
            text="please use gluster volume replace-brick")
    busy = os.path.join(c.root, "ev-busy")
    os.makedirs(busy, exist_ok=True)
    with open(os.path.join(busy, "x"), "w") as f:
        f.write("x")
    refused("replace-brick", v.name, a, f"{c.host}:{busy}", "commit", "force",
            text="is not empty")
    d = Vol(pool, [2], 1)  # a plain distribute volume of one brick
    try:
        (dn, dp), = d.bricks
        refused("replace-brick", d.name, f"{dn.host}:{dp}", free, "commit", "force",
                text="no other copy to heal the new brick from")
    finally:
        d.close()
    # nothing changed
    info = v.cli("info", v.name).stdout
    assert "Number of Bricks: 1 x 2 = 2" in info and a in info and b in info, info
