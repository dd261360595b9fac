"""Fault tests of replicated volumes (issue 5): bricks on three cairnd
(127.0.0.170-.172, a pool formed by peer probe), replica 3 and replica 3
arbiter 1, real processes killed with SIGKILL or stopped with SIGSTOP, and
every replica compared byte for byte with the source afterwards.

- kill -9 one brick, and separately one whole server (its cairnd and its
  bricks), in the middle of `cp -a` of a tree and of a fio random-write run
  with verification: the workload ends without errors; once the brick or
  server is back and heal has run, every data brick holds exactly the
  source (the arbiter: the same names, no data);
- kill -9 of the client in the middle of writes: after heal no replica
  differs from another;
- one brick on a full loop-mounted XFS: the two others take the writes and
  the writer hears nothing, the full brick is marked and never read from,
  heal completes once space is freed (tests/system/test_full_brick.py has
  the rest);
- two bricks of the set down: writes fail with ENOTCONN, intact data reads;
- SIGSTOP of a brick: operations go on after at most one ping-timeout.

Sizes: CAIRN_FAULT_FILES (default 4000) files are copied, CAIRN_FAULT_FIO_MB
(default 48) MiB are written by fio, so the set stays short under ASan. The
issue's full size:
  CAIRN_FAULT_FILES=5000 CAIRN_FAULT_FIO_MB=64 python3 -m pytest tests/system/test_faults.py
Run inside a private network namespace (docs: the system tests' README).
"""

import errno
import hashlib
import os
import shutil
import signal
import subprocess
import time

import pytest

import replica_pool
from cairn_cluster import kill_pid, pids_with_arg

HOSTS = ["127.0.0.170", "127.0.0.171", "127.0.0.172"]
PING = 3  # network.ping-timeout of the test volumes, seconds
N_FILES = int(os.environ.get("CAIRN_FAULT_FILES", "4000"))
FIO_MB = int(os.environ.get("CAIRN_FAULT_FIO_MB", "48"))


def out(r):
    return r.stdout + r.stderr


class Pool(replica_pool.Pool):
    def __init__(self):
        super().__init__(HOSTS, "st-fault-")


@pytest.fixture(scope="module")
def pool():
    p = Pool()
    try:
        yield p.start()
    finally:
        p.close()


class Vol:
    """A replica 3 (or 3 arbiter 1) volume, one brick per server, mounted
    through the first server."""

    count = 0

    def __init__(self, pool, arbiter=False, bricks=None):
        Vol.count += 1
        self.pool = pool
        self.name = f"fv{Vol.count}"
        self.arbiter = arbiter
        self.bricks = bricks or [os.path.join(n.root, f"{self.name}-brick") for n in pool.nodes]
        for n, b in zip(pool.nodes, self.bricks):
            os.makedirs(b, exist_ok=True)
            n.volumes[self.name] = [b]
        c = pool.nodes[0]
        args = ["volume", "create", self.name, "replica", "3"]
        if arbiter:
            args += ["arbiter", "1"]
        args += [f"{n.host}:{b}" for n, b in zip(pool.nodes, self.bricks)] + ["force"]
        c.cli(*args)
        c.cli("volume", "set", self.name, "network.ping-timeout", str(PING))
        c.cli("volume", "start", self.name)
        self.wait_bricks()
        self.mnt = c.mount(self.name, os.path.join(c.root, f"{self.name}-mnt")).path

    @property
    def data_bricks(self):
        return self.bricks[:2] if self.arbiter else self.bricks

    def brick_pids(self):
        return [pids_with_arg("--brick-path", b) for b in self.bricks]

    def wait_bricks(self, timeout=30):
        end = time.time() + timeout
        while time.time() < end:
            if all(self.brick_pids()):
                st = self.pool.nodes[0].cli("volume", "status", self.name, check=False).stdout
                if st.count(" Y ") >= 3:
                    return
            time.sleep(0.2)
        raise AssertionError(f"bricks of {self.name} not all up: {self.brick_pids()}")

    def heal(self, what=()):
        return self.pool.nodes[0].cli("volume", "heal", self.name, *what, check=False,
                                      timeout=300)

    def close(self):
        c = self.pool.nodes[0]
        for m in list(c.mounts):
            if m.path == self.mnt:
                m.stop()
                c.mounts.remove(m)
        c.stop_volume(self.name, check=False)
        c.cli("volume", "delete", self.name, check=False)
        for b in self.bricks:
            for p in pids_with_arg("--brick-path", b):
                kill_pid(p)


@pytest.fixture
def vol_factory(pool):
    made = []

    def make(**kw):
        v = Vol(pool, **kw)
        made.append(v)
        return v

    yield make
    pool.revive()
    for v in made:
        v.close()


# ---- comparing trees ----

def tree_sums(root, data=True):
    """{relative path: (type, mode, sha256 or target)} of a tree, .cairn excluded."""
    res = {}
    for d, dirs, files in os.walk(root):
        rel_d = os.path.relpath(d, root)
        if rel_d == ".":
            dirs[:] = [x for x in dirs if x != ".cairn"]
        for name in dirs + files:
            p = os.path.join(d, name)
            rel = os.path.normpath(os.path.join(rel_d, name))
            st = os.lstat(p)
            if os.path.islink(p):
                res[rel] = ("l", os.readlink(p))
            elif os.path.isdir(p):
                res[rel] = ("d", st.st_mode & 0o7777)
            elif data:
                with open(p, "rb") as f:
                    res[rel] = ("f", st.st_mode & 0o7777, hashlib.sha256(f.read()).hexdigest())
            else:
                res[rel] = ("f", st.st_mode & 0o7777)
    return res


def diff_sums(a, b, limit=8):
    keys = sorted(set(a) | set(b))
    bad = [(k, a.get(k), b.get(k)) for k in keys if a.get(k) != b.get(k)]
    return bad[:limit], len(bad)


def replicas_equal(v, src_sums, sub):
    """None when every data brick's sub-tree equals src_sums and the arbiter
    has the same names with empty files; else a description."""
    for b in v.data_bricks:
        got = tree_sums(os.path.join(b, sub))
        bad, n = diff_sums(src_sums, got)
        if n:
            return f"{b}: {n} differences, e.g. {bad}"
    if v.arbiter:
        names = {k: x[:2] for k, x in src_sums.items()}
        arb = os.path.join(v.bricks[2], sub)
        got = tree_sums(arb, data=False)
        bad, n = diff_sums(names, got)
        if n:
            return f"arbiter {arb}: {n} differences, e.g. {bad}"
        sizes = [os.path.getsize(os.path.join(arb, k)) for k, x in got.items() if x[0] == "f"]
        if any(sizes):
            return "arbiter holds file data"
    return None


def heal_until_equal(v, src_sums, sub, timeout=120):
    end = time.time() + timeout
    why = "not checked"
    while time.time() < end:
        v.heal()
        why = replicas_equal(v, src_sums, sub)
        if why is None:
            return
        time.sleep(1)
    v.heal(("full",))
    why = replicas_equal(v, src_sums, sub)
    assert why is None, "replicas differ after heal: " + why


def wait_heal_info_clean(v, timeout=60):
    end = time.time() + timeout
    while True:
        info = v.heal(("info",)).stdout
        if info.count("Number of entries: 0") == 3:
            return
        if time.time() > end:
            raise AssertionError("heal info not clean:\n" + info[-3000:])
        v.heal()
        time.sleep(1)


def make_source(root, n):
    src = os.path.join(root, "src")
    if os.path.isdir(src):
        return src
    os.makedirs(src)
    for i in range(n):
        d = os.path.join(src, f"d{i // 250}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i}"), "wb") as f:
            f.write(os.urandom(i % 7000))
        if i % 500 == 0:
            os.symlink(f"f{i}", os.path.join(d, f"l{i}"))
    os.chmod(os.path.join(src, "d0"), 0o750)
    return src


# ---- the faults ----

def fault_kill(pool, v, what):
    """Kills one brick (cairnd restarts it) or one whole server (restarted
    here after a while). Returns a function that brings it back."""
    if what == "brick":
        pids = v.brick_pids()[1]
        for p in pids:
            os.kill(p, signal.SIGKILL)
        return lambda: v.wait_bricks()
    victim = pool.nodes[1]
    pool.kill_server(victim)

    def back():
        victim.start()
        v.wait_bricks(timeout=60)
    return back


@pytest.mark.slow  # a server's whole copy heals afterwards: over a minute under ASan
@pytest.mark.parametrize("arbiter", [False, True], ids=["rep3", "arb"])
@pytest.mark.parametrize("what", ["brick", "server"])
def test_kill_during_cp(pool, vol_factory, arbiter, what):
    v = vol_factory(arbiter=arbiter)
    src = make_source(pool.nodes[0].root, N_FILES)
    src_sums = tree_sums(src)
    t0 = time.time()
    cp = subprocess.Popen(["cp", "-a", src, os.path.join(v.mnt, "copy")],
                          stderr=subprocess.PIPE, text=True)
    # the kill lands once part of the tree is there
    while time.time() - t0 < 60 and cp.poll() is None and \
            len(os.listdir(os.path.join(v.bricks[0]))) < 2:
        time.sleep(0.02)
    time.sleep(0.1)
    if cp.poll() is not None:
        err = cp.stderr.read()
        assert cp.returncode == 0, f"cp failed before the fault: {err[-3000:]}"
        pytest.fail("cp ended before the fault: raise CAIRN_FAULT_FILES")
    back = fault_kill(pool, v, what)
    _, err = cp.communicate(timeout=300)
    assert cp.returncode == 0, err
    bad, n = diff_sums(src_sums, tree_sums(os.path.join(v.mnt, "copy")))
    assert n == 0, f"copy through the mount differs: {bad}"
    back()
    heal_until_equal(v, src_sums, "copy")
    wait_heal_info_clean(v)


FIO_ARGS = ["--name=rw", "--verify_state_save=0", "--ioengine=psync", "--rw=randwrite", "--bs=4k",
            "--verify=crc32c", "--do_verify=1", "--verify_fatal=1", "--randrepeat=0",
            "--group_reporting", "--fsync=64"]


@pytest.mark.slow  # a server's whole copy heals afterwards: over a minute under ASan
@pytest.mark.parametrize("arbiter", [False, True], ids=["rep3", "arb"])
@pytest.mark.parametrize("what", ["brick", "server"])
def test_kill_during_fio(pool, vol_factory, arbiter, what):
    if not shutil.which("fio"):
        pytest.skip("fio is not installed (scripts/deps.sh --test)")
    v = vol_factory(arbiter=arbiter)
    target = os.path.join(v.mnt, "fio.dat")
    fio = subprocess.Popen(["fio", *FIO_ARGS, f"--filename={target}", f"--size={FIO_MB}m"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # the fault lands once fio is writing (a fixed 1.5 s outlived a fast run)
    t0 = time.time()
    while time.time() - t0 < 30 and fio.poll() is None and \
            (not os.path.exists(target) or os.path.getsize(target) < (1 << 20)):
        time.sleep(0.02)
    time.sleep(0.3)
    assert fio.poll() is None, "fio ended before the fault: raise CAIRN_FAULT_FIO_MB"
    back = fault_kill(pool, v, what)
    o, _ = fio.communicate(timeout=600)
    assert fio.returncode == 0 and "err= 0" in o, o[-3000:]
    with open(target, "rb") as f:
        want = hashlib.sha256(f.read()).hexdigest()
    back()
    src_sums = {"fio.dat": ("f", os.stat(target).st_mode & 0o7777, want)}
    end = time.time() + 120
    while True:
        v.heal()
        why = None
        for b in v.data_bricks:
            p = os.path.join(b, "fio.dat")
            with open(p, "rb") as f:
                h = hashlib.sha256(f.read()).hexdigest()
            if h != want:
                why = f"{p} differs from what fio wrote"
        if v.arbiter and os.path.getsize(os.path.join(v.bricks[2], "fio.dat")):
            why = "arbiter holds data"
        if why is None:
            break
        assert time.time() < end, why
        time.sleep(1)
    del src_sums
    wait_heal_info_clean(v)


@pytest.mark.parametrize("hung", [False, True], ids=["plain", "hung-brick"])
def test_kill_client_during_writes(pool, vol_factory, hung):
    """hung: a brick is SIGSTOPped (shorter than a ping-timeout) when the
    client dies, so its socket holds writes the others have applied."""
    v = vol_factory()
    c = pool.nodes[0]
    m = next(m for m in c.mounts if m.path == v.mnt)
    # four writers of 1 MiB blocks at random offsets: a frame larger than a
    # socket buffer is what a killed client leaves half sent
    code = ("import os, random, sys\n"
            "buf = os.urandom(1 << 20)\n"
            "p = os.path.join(%r, 'w' + sys.argv[1])\n"
            "with open(p, 'wb') as f:\n"
            "    f.truncate(16 << 20)\n"
            "with open(p, 'r+b', buffering=0) as f:\n"
            "    while True:\n"
            "        f.seek(random.randrange(16) << 20)\n"
            "        f.write(buf)\n") % v.mnt
    ws = [subprocess.Popen(["/usr/bin/python3", "-c", code, str(i)], stderr=subprocess.DEVNULL)
          for i in range(4)]
    time.sleep(2)
    assert all(w.poll() is None for w in ws)
    if hung:
        pid = v.brick_pids()[2][0]
        pool.nodes[2].stop_signal(pid)
        time.sleep(1)
    m.proc.send_signal(signal.SIGKILL)
    m.proc.wait()
    if hung:
        time.sleep(0.5)
        pool.nodes[2].cont(pid)
    for w in ws:
        w.wait(timeout=30)
    m.stop()  # detach the dead mount
    c.mounts.remove(m)
    v.heal()
    v.heal(("full",))
    want = tree_sums(v.bricks[0])
    for b in v.bricks[1:]:
        bad, n = diff_sums(want, tree_sums(b))
        assert n == 0, f"{b} differs from {v.bricks[0]} after heal: {bad}"
    wait_heal_info_clean(v)


def test_disk_full_brick(pool, vol_factory, tmp_path):
    if os.geteuid() != 0 or not shutil.which("mkfs.xfs"):
        pytest.skip("needs root and mkfs.xfs (xfsprogs)")
    img = os.path.join(pool.nodes[2].root, "xfs.img")
    xmnt = os.path.join(pool.nodes[2].root, "xfs")
    os.makedirs(xmnt)
    with open(img, "wb") as f:
        f.truncate(300 << 20)
    subprocess.run(["mkfs.xfs", "-q", img], check=True)
    r = subprocess.run(["mount", "-o", "loop", img, xmnt], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("cannot loop-mount: " + r.stderr)
    pool.nodes[2].extra_mounts.append(xmnt)
    try:
        bricks = [os.path.join(n.root, "full-brick") for n in pool.nodes[:2]]
        bricks.append(os.path.join(xmnt, "brick"))
        v = vol_factory(bricks=bricks)
        # leave ~20 MB free on the XFS brick
        ballast = os.path.join(xmnt, "ballast")
        st = os.statvfs(xmnt)
        subprocess.run(["fallocate", "-l", str(st.f_bavail * st.f_frsize - (20 << 20)), ballast],
                       check=True)
        before = os.urandom(1 << 20)
        with open(os.path.join(v.mnt, "before"), "wb") as f:
            f.write(before)
        # more than the XFS brick can take: the two others (a quorum) take
        # it all, the full brick is marked, and the writer hears nothing
        big = os.urandom(80 << 20)
        with open(os.path.join(v.mnt, "big"), "wb") as f:
            for off in range(0, len(big), 1 << 20):
                f.write(big[off:off + (1 << 20)])
                f.flush()
            os.fsync(f.fileno())
        with open(os.path.join(v.mnt, "before"), "rb") as f:
            assert f.read() == before
        for b in bricks:
            with open(os.path.join(b, "before"), "rb") as f:
                assert f.read() == before, b
        for b in bricks[:2]:
            with open(os.path.join(b, "big"), "rb") as f:
                assert f.read() == big, b
        with open(os.path.join(bricks[2], "big"), "rb") as f:
            assert f.read() != big, "the full brick took 80 MiB in 20 MB of space"
        # a fresh mount reads it whole (never from the full brick)
        c = pool.nodes[0]
        fresh = c.mount(v.name, os.path.join(c.root, f"{v.name}-fresh"))
        with open(os.path.join(fresh.path, "big"), "rb") as f:
            assert f.read() == big
        fresh.stop()
        c.mounts.remove(fresh)
        a, b2 = (tree_sums(x) for x in bricks[:2])
        assert diff_sums(a, b2)[1] == 0
        os.unlink(ballast)
        heal_until_equal(v, a, "")
        wait_heal_info_clean(v)
    finally:
        for m in list(pool.nodes[0].mounts):
            m.stop()
        pool.nodes[0].mounts = []
        for p in pids_with_arg("--brick-path", os.path.join(xmnt, "brick")):
            kill_pid(p)
        subprocess.run(["umount", "-l", xmnt], check=False)


def test_two_bricks_down(pool, vol_factory):
    v = vol_factory()
    data = os.urandom(200000)
    with open(os.path.join(v.mnt, "keep"), "wb") as f:
        f.write(data)
    victims = pool.nodes[1:]
    for n in victims:
        pool.kill_server(n)
    t = time.time()
    with pytest.raises(OSError) as e:
        with open(os.path.join(v.mnt, "new"), "wb") as f:
            f.write(b"x")
    assert e.value.errno == errno.ENOTCONN, e.value
    with pytest.raises(OSError) as e:
        with open(os.path.join(v.mnt, "keep"), "r+b") as f:
            f.write(b"y")
    assert e.value.errno == errno.ENOTCONN, e.value
    assert time.time() - t < 2 * PING + 2
    with open(os.path.join(v.mnt, "keep"), "rb") as f:
        assert f.read() == data
    assert sorted(os.listdir(v.mnt)) == ["keep"]
    for n in victims:
        n.start()
    v.wait_bricks(timeout=60)
    for b in v.bricks:
        with open(os.path.join(b, "keep"), "rb") as f:
            assert f.read() == data
        assert not os.path.exists(os.path.join(b, "new"))
    wait_heal_info_clean(v)


def test_sigstop_brick(pool, vol_factory):
    v = vol_factory()
    os.makedirs(os.path.join(v.mnt, "d"))
    pid = v.brick_pids()[2][0]
    pool.nodes[2].stop_signal(pid)
    try:
        t = time.time()
        with open(os.path.join(v.mnt, "d/first"), "wb") as f:
            f.write(b"1" * 5000)
        first = time.time() - t
        assert first <= PING + 1.5, f"first operation took {first:.1f}s"
        t = time.time()
        for i in range(100):
            with open(os.path.join(v.mnt, f"d/f{i}"), "wb") as f:
                f.write(b"z" * 1000)
        rest = time.time() - t
        assert rest < 10, f"100 creates took {rest:.1f}s with a hung brick"
    finally:
        pool.nodes[2].cont(pid)
    # files written back are sent shortly after their close: wait for them
    fd = os.open(os.path.join(v.mnt, "d"), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    src = tree_sums(v.bricks[0])
    heal_until_equal(v, src, "")
    wait_heal_info_clean(v)


def test_crawl_with_a_server_down_skips_what_waits_for_it(pool, vol_factory):
    """Seed 004: with a server down, every change the survivors take adds a
    heal-index entry that only the down server's return can clear. A heal
    crawl meanwhile must not look each of them up on the survivors (that
    made a copy onto a degraded volume several times slower); once the
    server is back they all heal, byte for byte."""
    v = vol_factory()
    down = pool.nodes[2]
    pool.kill_server(down)
    src = {}
    os.makedirs(os.path.join(v.mnt, "deg"))
    for i in range(150):
        data = os.urandom(1000 + i)
        src[f"deg/f{i}"] = data
        with open(os.path.join(v.mnt, "deg", f"f{i}"), "wb") as f:
            f.write(data)

    def indexed():  # by both survivors (the write-back window may still be open)
        info = v.heal(("info",)).stdout
        return sum(int(x) for x in
                   [ln.split(":")[1] for ln in info.splitlines()
                    if ln.startswith("Number of entries:") and ln.split(":")[1].strip() != "-"]
                   ) >= 2 * 150
    replica_pool.wait_until(indexed, 30, "index entries on both survivors")
    v.pool.nodes[0].cli("volume", "profile", v.name, "start", check=False)
    before = replica_pool.brick_calls(pool.nodes[0], v.name, v.bricks, "LOOKUP")
    for _ in range(3):
        v.heal()  # an index heal from the CLI: the crawl a daemon runs
    time.sleep(3)  # and the daemons' own crawls (heal-timeout, backed off)
    after = replica_pool.brick_calls(pool.nodes[0], v.name, v.bricks, "LOOKUP")
    looked = [a - b for a, b in zip(after, before)][:2]
    assert max(looked) < 30, f"heal crawls looked up {looked} objects on the survivors"
    down.start()
    v.wait_bricks(timeout=60)
    end = time.time() + 120
    while True:
        v.heal()
        missing = [(b, k) for b in v.bricks
                   for k, s in replica_pool.file_sums(b, list(src)).items()
                   if s != replica_pool.sha(src[k])]
        if not missing:
            break
        assert time.time() < end, f"not healed: {missing[:5]} ({len(missing)})"
        time.sleep(1)
    wait_heal_info_clean(v)
    c = pool.nodes[0]
    fresh = c.mount(v.name, os.path.join(c.root, f"{v.name}-fresh"))
    try:
        assert replica_pool.file_sums(fresh.path, list(src)) == \
            {k: replica_pool.sha(d) for k, d in src.items()}
    finally:
        fresh.stop()
        c.mounts.remove(fresh)
