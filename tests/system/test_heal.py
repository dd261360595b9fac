"""Self-heal: the self-heal daemon (cairn-shd) that every cairnd runs for a
started replicated volume, the heal commands, split brain and its
resolution, range heal of a big file.

Three cairnd in one pool on 127.0.0.160-162, one brick of each volume on
each server. A brick is kept down by SIGSTOP while a client writes (the
client fails over after network.ping-timeout); then the client unmounts,
so that no client can heal, and the brick is killed with -9: its cairnd
restarts it and the daemons must heal it on their own. Split brains are
made on purpose by writing different data on the bricks directly and
setting the pending marks so that every copy is blamed by another (the
layout of docs/brick-format.md and docs/replication.md).

Run: unshare -n sh -c 'ip link set lo up; CAIRN_BUILD=$PWD/build \
     /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/system/test_heal.py'
"""

import os
import re
import signal
import struct
import subprocess
import threading
import time
import uuid

import pytest

import replica_pool
from cairn_cluster import alive, pids_with_arg, port_open

HOSTS = ["127.0.0.160", "127.0.0.161", "127.0.0.162"]


def out(r):
    return r.stdout + r.stderr


class Pool(replica_pool.Pool):
    def __init__(self):
        super().__init__(HOSTS, "st-heal-")

    def volume(self, name, replica=3, options=None):
        bricks = []
        for n in self.nodes[:replica]:
            path = os.path.join(n.root, f"{name}-brick")
            os.makedirs(path, exist_ok=True)
            bricks.append(path)
            n.volumes[name] = [path]
        a = self.nodes[0]
        a.cli("volume", "create", name, "replica", str(replica),
              *[f"{n.host}:{p}" for n, p in zip(self.nodes, bricks)], "force")
        opts = {"network.ping-timeout": "2", "cluster.heal-timeout": "1"}
        opts.update(options or {})
        for k, v in opts.items():
            a.cli("volume", "set", name, k, v)
        a.cli("volume", "start", name)
        return bricks


@pytest.fixture(scope="module")
def pool():
    p = Pool()
    try:
        yield p.start()
    finally:
        p.close()


def shd_pids(node, vol):
    return [p for p in pids_with_arg("--volume", vol, "--stats-file")
            if f"{node.workdir}/run/shd-{vol}.stats" in open(f"/proc/{p}/cmdline").read()]


def wait_for(pred, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def same_tree(a, b):
    r = subprocess.run(["diff", "-r", "--no-dereference", "--exclude=.cairn", a, b],
                       capture_output=True, text=True)
    return r.returncode == 0


def brick_pid(node, vol, path):
    for host, p, port, pid in node.brick_status(vol):
        if p == path and host == node.host:
            return pid
    return None


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


# ---- the daemon ----

def test_shd_lifecycle(pool):
    """One daemon per server for a started replicated volume; restarted after
    kill -9; heal disable/enable stop and start it; volume stop stops it."""
    pool.volume("lv")
    for n in pool.nodes:
        wait_for(lambda: len(shd_pids(n, "lv")) == 1, 10, f"the shd of lv on {n.host}")
    a = pool.nodes[0]
    old = shd_pids(a, "lv")[0]
    st = a.cli("volume", "status", "lv").stdout
    assert re.search(rf"Self-heal Daemon on localhost\s+N/A\s+N/A\s+Y\s+{old}\b", st), st
    os.kill(old, signal.SIGKILL)
    wait_for(lambda: [p for p in shd_pids(a, "lv") if p != old], 10, "a restarted shd")
    r = a.cli("volume", "heal", "lv", "disable")
    assert "Disable heal on volume lv has been successful" in r.stdout
    for n in pool.nodes:
        wait_for(lambda: not shd_pids(n, "lv"), 10, f"no shd of lv on {n.host}")
    r = a.cli("volume", "heal", "lv", "enable")
    assert "Enable heal on volume lv has been successful" in r.stdout
    for n in pool.nodes:
        wait_for(lambda: len(shd_pids(n, "lv")) == 1, 10, f"the shd of lv on {n.host} again")
    r = a.cli("volume", "heal", "lv", "statistics")
    assert "Gathering crawl statistics on volume lv has been successful" in r.stdout
    pool.nodes[1].stop_volume("lv")
    for n in pool.nodes:
        wait_for(lambda: not shd_pids(n, "lv"), 10, f"no shd of stopped lv on {n.host}")
    r = a.cli("volume", "heal", "lv", "bogus", check=False)
    assert r.returncode != 0 and "Usage" in out(r)


def test_shd_heals_without_client(pool):
    bricks = pool.volume("hv")
    a, b = pool.nodes[0], pool.nodes[1]
    mnt = os.path.join(a.root, "hv-mnt")
    m = a.mount("hv", mnt)
    os.makedirs(f"{mnt}/d/e")
    for i in range(20):
        write(f"{mnt}/d/f{i}", os.urandom(3000 + i))
    write(f"{mnt}/keep", b"old")
    pid = brick_pid(b, "hv", bricks[1])
    b.stop_signal(pid)  # down, as far as clients can tell, after ping-timeout
    for i in range(20, 40):
        write(f"{mnt}/d/e/g{i}", os.urandom(5000))
    write(f"{mnt}/keep", b"new contents")
    os.unlink(f"{mnt}/d/f3")
    os.rename(f"{mnt}/d/f4", f"{mnt}/d/e/f4-renamed")
    os.chmod(f"{mnt}/d/f5", 0o600)
    m.stop()
    a.mounts.remove(m)
    # heal info while brick 1 is stopped: entries on the others, brick 1 unreachable
    r = a.cli("volume", "heal", "hv", "info", check=False)
    assert f"Brick {b.host}:{bricks[1]}\nStatus: Transport endpoint is not connected" in r.stdout
    counts = [int(x) for x in re.findall(r"Number of entries: (\d+)", r.stdout)]
    assert len(counts) == 2 and all(c > 0 for c in counts), r.stdout
    assert "/keep" in r.stdout and "split-brain" not in r.stdout
    r = a.cli("volume", "heal", "hv", "info", "summary", check=False)
    assert re.search(r"Total Number of entries: [1-9]", r.stdout), r.stdout
    assert "Number of entries in split-brain: 0" in r.stdout
    # kill -9: cairnd restarts the brick; only the daemons can heal it
    os.kill(pid, signal.SIGKILL)
    b.stopped_pids.discard(pid)
    # diff -r compares contents only: the mode heal of d/f5, whose data
    # never differed, may come after every content is equal
    def healed():
        return (same_tree(bricks[0], bricks[1]) and same_tree(bricks[0], bricks[2]) and
                os.stat(f"{bricks[1]}/d/f5").st_mode & 0o777 == 0o600)
    wait_for(healed, 40, "the daemons to heal brick 1")
    assert read(f"{bricks[1]}/keep") == b"new contents"
    assert not os.path.exists(f"{bricks[1]}/d/f3")
    wait_for(lambda: "Number of entries: 0" in a.cli("volume", "heal", "hv", "info").stdout
             and not re.search(r"Number of entries: [1-9]",
                               a.cli("volume", "heal", "hv", "info").stdout), 20,
             "empty heal indexes")
    stats = "".join(n.cli("volume", "heal", "hv", "statistics").stdout for n in pool.nodes)
    healed = [int(x) for x in re.findall(r"entries healed (\d+)", stats)]
    assert sum(healed) > 0, stats
    assert "Type of crawl: INDEX" in stats and "Crawl statistics for brick no" in stats


# ---- split brain ----

def gfid_of(path):
    return str(uuid.UUID(bytes=os.getxattr(path, "trusted.cairn.gfid")))


def blame(brick, rel, bits):
    """Marks brick's copy of rel as blaming the members in bits, with its
    heal index entry (what a brick writes for a change others missed)."""
    p = os.path.join(brick, rel.lstrip("/"))
    os.setxattr(p, "trusted.cairn.pending", struct.pack("<I", bits))
    idx = os.path.join(brick, ".cairn", "index")
    os.makedirs(idx, exist_ok=True)
    write(os.path.join(idx, gfid_of(p)), rel.encode())


def make_split(bricks, rel, contents, mtimes=None):
    """Gives each brick its own contents for rel and makes each copy blame
    all the others: a split brain."""
    n = len(bricks)
    for i, (b, data) in enumerate(zip(bricks, contents)):
        p = os.path.join(b, rel.lstrip("/"))
        with open(p, "r+b") as f:
            f.truncate(0)
            f.write(data)
        if mtimes:
            os.utime(p, ns=(mtimes[i], mtimes[i]))
        blame(b, rel, ((1 << n) - 1) & ~(1 << i))


class shd_off:
    """The volume's self-heal daemons stopped for the block: a split brain
    made by hand is built one copy at a time, and a daemon crawling in
    between would heal the half-made one from its first blaming copy."""

    def __init__(self, pool, vol):
        self.pool, self.vol = pool, vol

    def __enter__(self):
        a = self.pool.nodes[0]
        a.cli("volume", "set", self.vol, "cluster.self-heal-daemon", "off")
        for n in self.pool.nodes:
            wait_for(lambda: not shd_pids(n, self.vol), 20, f"no shd of {self.vol} on {n.host}")

    def __exit__(self, *exc):
        self.pool.nodes[0].cli("volume", "set", self.vol, "cluster.self-heal-daemon", "on")


def healed_to(bricks, rel, data):
    return all(os.path.exists(os.path.join(b, rel.lstrip("/"))) and
               read(os.path.join(b, rel.lstrip("/"))) == data for b in bricks)


def marks_and_logs(pool, bricks, rel):
    """What each copy of rel says and what every daemon logged about it:
    the message of a failed split-brain step."""
    lines = []
    for b in bricks:
        p = os.path.join(b, rel.lstrip("/"))
        try:
            pend = os.getxattr(p, "trusted.cairn.pending").hex()
        except OSError as e:
            pend = f"({e.strerror})"
        size = os.stat(p).st_size if os.path.exists(p) else None
        lines.append(f"{b}: pending {pend}, size {size}")
    for n in pool.nodes:
        logs = os.path.join(n.workdir, "logs")
        for top, _, files in sorted(os.walk(logs)):  # the bricks' logs are in logs/bricks
            for name in sorted(files):
                with open(os.path.join(top, name), "rb") as f:
                    hits = [ln for ln in f.read().decode(errors="replace").splitlines()
                            if rel in ln or "marked for heal" in ln]
                lines += [f"{n.host} {name}: {ln}" for ln in hits[-20:]]
    return "\n" + "\n".join(lines)


def split_heal(pool, bricks, *args):
    """`volume heal VOL split-brain ARGS...`, which must heal its file."""
    a = pool.nodes[0]
    r = a.cli("volume", "heal", "sv", "split-brain", *args, check=False)
    rel = args[-1]
    assert r.returncode == 0 and f"Healed {rel}." in r.stdout, \
        out(r) + marks_and_logs(pool, bricks, rel)


def split_listed(node, vol):
    r = node.cli("volume", "heal", vol, "info", check=False)
    return set(re.findall(r"^(/\S+) - Is in split-brain$", r.stdout, re.M))


def test_split_brain(pool):
    bricks = pool.volume("sv")
    a = pool.nodes[0]
    mnt = os.path.join(a.root, "sv-mnt")
    m = a.mount("sv", mnt)
    names = ["cli_big", "cli_mtime", "cli_src", "all1", "all2",
             "pol_size", "pol_mtime", "pol_major", "pol_ctime"]
    for nm in names + ["kept"]:
        write(f"{mnt}/{nm}", b"same everywhere\n")
    m.stop()
    a.mounts.remove(m)
    t = 1_700_000_000 * 10**9
    k = 4096
    with shd_off(pool, "sv"):
        make_split(bricks, "/cli_big", [b"a" * k, b"b" * (3 * k), b"c" * (2 * k)])
        make_split(bricks, "/cli_mtime", [b"a" * k, b"b" * k, b"c" * k], [t + 5, t + 9, t + 1])
        make_split(bricks, "/cli_src", [b"A" * k, b"B" * k, b"C" * k])
        make_split(bricks, "/all1", [b"1" * k, b"2" * k, b"3" * k], [t, t, t])
        make_split(bricks, "/all2", [b"x" * k, b"y" * k, b"z" * k], [t, t, t])
        # each policy's file can be decided by that policy only (ties elsewhere)
        make_split(bricks, "/pol_size", [b"s" * k, b"S" * k, b"Z" * (2 * k)], [t, t, t])
        make_split(bricks, "/pol_mtime", [b"m" * k, b"M" * k, b"N" * k], [t + 1, t + 2, t])
        make_split(bricks, "/pol_major", [b"j" * k, b"j" * k, b"J" * k], [t + 3, t + 3, t])
        make_split(bricks, "/pol_ctime", [b"c" * k, b"C" * k, b"d" * (k // 2)],
                   [t + 2, t + 1, t + 2])
        # brick 1's copy of pol_ctime is changed last: the latest ctime
        time.sleep(0.05)
        p1 = os.path.join(bricks[1], "pol_ctime")
        os.chmod(p1, os.stat(p1).st_mode & 0o7777)  # same mode, new ctime

    listed = split_listed(a, "sv")
    assert listed == {"/" + nm for nm in names}, listed
    r = a.cli("volume", "heal", "sv", "info", "summary")
    assert r.stdout.count(f"Number of entries in split-brain: {len(names)}") == 3, r.stdout
    r = a.cli("volume", "heal", "sv", "info", "split-brain")
    assert "/cli_big\n" in r.stdout and f"Number of entries in split-brain: {len(names)}" in r.stdout
    r = a.cli("volume", "heal", "sv", check=False)  # index heal cannot decide
    assert r.returncode != 0 and "split brain" in out(r)

    # the CLI forms
    split_heal(pool, bricks, "bigger-file", "/cli_big")
    assert healed_to(bricks, "/cli_big", b"b" * (3 * k))
    split_heal(pool, bricks, "latest-mtime", "/cli_mtime")
    assert healed_to(bricks, "/cli_mtime", b"b" * k)
    src = f"{pool.nodes[2].host}:{bricks[2]}"
    split_heal(pool, bricks, "source-brick", src, "/cli_src")
    assert healed_to(bricks, "/cli_src", b"C" * k)
    r = a.cli("volume", "heal", "sv", "split-brain", "bigger-file", "/cli_src", check=False)
    assert r.returncode != 0 and "File not in split-brain" in out(r)
    r = a.cli("volume", "heal", "sv", "split-brain", "bigger-file", "/all1", check=False)
    assert r.returncode != 0 and "tie" in out(r)  # equal sizes: the policy cannot decide
    r = a.cli("volume", "heal", "sv", "split-brain", "source-brick", "127.0.0.99:/nope",
              check=False)
    assert r.returncode != 0 and "no such brick" in out(r)
    # source-brick without a file: the remaining split brains take brick 0's copy,
    # except the policy files, which are set aside first (they have their own test)
    r = a.cli("volume", "heal", "sv", "split-brain", "source-brick",
              f"{pool.nodes[0].host}:{bricks[0]}", "/all1")
    assert healed_to(bricks, "/all1", b"1" * k)
    assert split_listed(a, "sv") == {"/all2", "/pol_size", "/pol_mtime", "/pol_major",
                                     "/pol_ctime"}

    # the policies, applied by the self-heal daemons
    for pol, rel, want in [("size", "/pol_size", b"Z" * (2 * k)),
                           ("mtime", "/pol_mtime", b"M" * k),
                           ("majority", "/pol_major", b"j" * k),
                           ("ctime", "/pol_ctime", b"C" * k)]:
        a.cli("volume", "set", "sv", "cluster.favorite-child-policy", pol)
        try:
            wait_for(lambda: healed_to(bricks, rel, want), 30, f"policy {pol} to heal {rel}")
        except AssertionError:
            raise AssertionError(f"{pol}: " + repr([(read(os.path.join(b, rel[1:]))[:8],
                                                     os.stat(os.path.join(b, rel[1:])))
                                                    for b in bricks]) +
                                 a.tail(f"{a.workdir}/logs/shd-sv.log"))
        if pol != "ctime":  # ctime decides every remaining one
            assert rel not in split_listed(a, "sv")
            assert "/all2" in split_listed(a, "sv") or pol == "majority"
    a.cli("volume", "set", "sv", "cluster.favorite-child-policy", "none")
    wait_for(lambda: not split_listed(a, "sv"), 20, "no split brain left")
    for nm in names:
        data = read(os.path.join(bricks[0], nm))
        assert all(read(os.path.join(b, nm)) == data for b in bricks), nm
    # only the owner (server 0's daemon: brick 0 is the lowest marked)
    # resolved them, although the others had long skipped these entries
    # and took entries over
    for n in pool.nodes[1:]:
        log = n.tail(f"{n.workdir}/logs/shd-sv.log", 1 << 20)
        assert "was in split brain" not in log, log[-3000:]

    # A CLI resolution cut short after it recorded its choice (brick 1's
    # copy: the others stopped blaming it) and before it copied: the
    # command again finishes from that copy, although latest-mtime alone
    # would now pick brick 2's, and says it healed the file.
    with shd_off(pool, "sv"):
        make_split(bricks, "/kept", [b"k" * k, b"K" * k, b"q" * k], [t + 1, t + 2, t + 3])
        blame(bricks[0], "/kept", 0b100)
        blame(bricks[2], "/kept", 0b001)
        split_heal(pool, bricks, "latest-mtime", "/kept")
        assert healed_to(bricks, "/kept", b"K" * k)


def test_interrupted_split_brain_heal_keeps_its_source(pool):
    """The daemon resolving a split brain by policy is killed -9 while it
    copies the chosen copy onto a sink. The half-copied sink now has the
    newest mtime; the restarted daemon must finish the copy from the copy
    first chosen, not ask the policy again and spread the half copy."""
    bricks = pool.volume("iv", options={"cluster.heal-rate-limit": "1"})
    a = pool.nodes[0]
    mnt = os.path.join(a.root, "iv-mnt")
    m = a.mount("iv", mnt)
    write(f"{mnt}/img", b"same everywhere\n")
    m.stop()
    a.mounts.remove(m)
    size = 4 << 20  # 4 s of copy at the 1 MB/s rate limit
    t = 1_700_000_000 * 10**9
    copies = [bytes([0x41 + i]) * size for i in range(3)]
    with shd_off(pool, "iv"):
        make_split(bricks, "/img", copies, [t + 1, t + 9, t + 5])
    sink = os.path.join(bricks[0], "img")
    wait_for(lambda: len(shd_pids(a, "iv")) == 1, 20, "the shd of iv")
    shd = shd_pids(a, "iv")
    a.cli("volume", "set", "iv", "cluster.favorite-child-policy", "mtime")
    # the daemon of brick 0 (the lowest marked) heals brick 0 first: kill it
    # as soon as its first block lands there
    wait_for(lambda: read(sink)[:1] == b"B", 30, "the heal of brick 0 to start")
    os.kill(shd[0], signal.SIGKILL)
    half = read(sink)
    assert half != copies[0] and half != copies[1], "the copy was not interrupted"
    assert os.stat(sink).st_mtime_ns > t + 9  # the newest copy now, by mtime
    a.cli("volume", "set", "iv", "cluster.heal-rate-limit", "0")

    # the heal sets a sink's times after its data
    def mtimes():
        return [os.stat(os.path.join(b, "img")).st_mtime_ns for b in bricks]
    try:
        wait_for(lambda: healed_to(bricks, "/img", copies[1]) and mtimes() == [t + 9] * 3, 60,
                 "the restarted daemon to finish the heal from brick 1, times included")
    except AssertionError:
        held = [sorted(set(read(os.path.join(b, "img")))) for b in bricks]
        raise AssertionError(f"bytes each brick holds: {held}, mtimes {mtimes()}, "
                             f"want {t + 9}" + a.tail(f"{a.workdir}/logs/shd-iv.log"))
    assert not split_listed(a, "iv")

# ---- range heal ----

def test_range_heal(pool):
    bricks = pool.volume("rv")
    a, c = pool.nodes[0], pool.nodes[2]
    mnt = os.path.join(a.root, "rv-mnt")
    m = a.mount("rv", mnt)
    size = 64 << 20
    with open(f"{mnt}/vm.img", "wb") as f:
        for _ in range(64):
            f.write(os.urandom(1 << 20))
    pid = brick_pid(c, "rv", bricks[2])
    c.stop_signal(pid)
    patch = os.urandom(1 << 20)
    with open(f"{mnt}/vm.img", "r+b") as f:
        f.seek(20 << 20)
        f.write(patch)
    m.stop()
    a.mounts.remove(m)
    os.kill(pid, signal.SIGKILL)
    c.stopped_pids.discard(pid)
    wait_for(lambda: all(read(os.path.join(b, "vm.img")) == read(os.path.join(bricks[0],
                                                                              "vm.img"))
                         for b in bricks), 60, "the image to heal")
    assert read(os.path.join(bricks[2], "vm.img"))[20 << 20:21 << 20] == patch
    assert os.path.getsize(os.path.join(bricks[2], "vm.img")) == size
    stats = "".join(n.cli("volume", "heal", "rv", "statistics").stdout for n in pool.nodes)
    copied = sum(int(x) for x in re.findall(r"bytes copied (\d+)", stats))
    same = sum(int(x) for x in re.findall(r"bytes found equal (\d+)", stats))
    # the 1 MiB changed (block-aligned here), not the 64 MiB file
    assert (1 << 20) <= copied <= (2 << 20), stats
    assert same >= 62 << 20, stats


def test_heal_throttled_file_stays_writable(pool):
    """cluster.heal-rate-limit slows the daemon's copy; a client keeps writing
    the file being healed without waiting for the heal, and the replicas end
    identical."""
    bricks = pool.volume("wv", options={"cluster.heal-rate-limit": "1",
                                        "cluster.shd-max-threads": "4"})
    a, c = pool.nodes[0], pool.nodes[2]
    mnt = os.path.join(a.root, "wv-mnt")
    m = a.mount("wv", mnt)
    with open(f"{mnt}/vm.img", "wb") as f:
        for _ in range(16):
            f.write(os.urandom(1 << 20))
    pid = brick_pid(c, "wv", bricks[2])
    c.stop_signal(pid)
    with open(f"{mnt}/vm.img", "r+b") as f:
        f.seek(4 << 20)
        f.write(os.urandom(6 << 20))  # 6 MiB at 1 MB/s: about 6 s of heal
    m.stop()
    a.mounts.remove(m)
    os.kill(pid, signal.SIGKILL)
    c.stopped_pids.discard(pid)
    # a new client (it saw no brick down, so it does not heal) writes meanwhile
    wait_for(lambda: brick_pid(c, "wv", bricks[2]), 60, "brick 2 back")
    # the port is read again each time: a restarted brick may get another
    wait_for(lambda: any(s[2] and port_open(c.host, s[2])
                         for s in c.brick_status("wv") if s[1] == bricks[2]),
             60, "brick 2 listening")
    m2 = a.mount("wv", mnt)
    worst = 0.0
    t0 = time.time()
    with open(f"{mnt}/vm.img", "r+b") as f:
        for i in range(15):
            t = time.time()
            f.seek((12 << 20) + i * 4096)
            f.write(os.urandom(4096))
            f.flush()
            os.fsync(f.fileno())
            worst = max(worst, time.time() - t)
            time.sleep(0.1)
    # a write waiting for the heal would wait seconds; a loaded machine
    # (CI under ASan) takes a few hundred milliseconds at worst
    assert worst < 1.5, f"a write waited {worst:.2f}s"
    img = [os.path.join(b, "vm.img") for b in bricks]
    # well within the 6 s the throttled copy of 6 MiB takes (unthrottled, it
    # takes a tenth of a second)
    assert time.time() - t0 < 4.5
    assert read(img[2])[4 << 20:10 << 20] != read(img[0])[4 << 20:10 << 20]
    wait_for(lambda: read(img[0]) == read(img[1]) == read(img[2]), 60, "the image to heal")
    assert read(img[0]) == read(os.path.join(mnt, "vm.img"))
    stats = "".join(n.cli("volume", "heal", "wv", "statistics").stdout for n in pool.nodes)
    copied = sum(int(x) for x in re.findall(r"bytes copied (\d+)", stats))
    # the daemons copied what changed (the writing client's own heal may
    # have taken a part of it), never the whole 16 MiB image
    assert (1 << 20) <= copied < (14 << 20), stats + "".join(
        n.tail(f"{n.workdir}/logs/shd-wv.log") for n in pool.nodes) + m2.tail()
    m2.stop()
    a.mounts.remove(m2)


def test_object_changed_while_its_directory_heals_is_healed_again(pool):
    """A directory's heal copies the objects its sink lacks; a client that
    changes one of them meanwhile reaches the sink's new copy too, and the
    copy must not then put back what it read before (here the file's mode,
    set after its throttled data copy). The heal marks such an object for
    a heal of its own, so every brick ends with the client's change and the
    heal index ends empty."""
    bricks = pool.volume("cv", options={"cluster.self-heal-daemon": "off",
                                        "cluster.heal-rate-limit": "1"})
    a = pool.nodes[0]
    mnt = os.path.join(a.root, "cv-mnt")
    m = a.mount("cv", mnt)
    os.makedirs(f"{mnt}/d")
    write(f"{mnt}/d/big", os.urandom(4 << 20))  # 4 MiB at 1 MB/s: seconds of copy
    os.chmod(f"{mnt}/d/big", 0o640)
    os.sync()
    assert all(os.stat(f"{b}/d/big").st_mode & 0o777 == 0o640 for b in bricks)
    # brick 2 lost d/big and d's other copies blame it: the directory's heal
    # makes the file there (the file itself carries no mark)
    os.unlink(f"{bricks[2]}/d/big")
    for b in bricks[:2]:
        blame(b, "/d", 1 << 2)
    done = []
    heal = threading.Thread(target=lambda: done.append(a.cli("volume", "heal", "cv",
                                                             check=False, timeout=120)))
    heal.start()
    try:
        wait_for(lambda: os.path.exists(f"{bricks[2]}/d/big"), 30, "the heal to make d/big")
        os.chmod(f"{mnt}/d/big", 0o600)
        fd = os.open(f"{mnt}/d/big", os.O_RDONLY)
        try:
            os.fsync(fd)  # the change is on the bricks, brick 2's new copy included
        finally:
            os.close(fd)
        assert os.stat(f"{bricks[2]}/d/big").st_size < (4 << 20), \
            "the copy ended before the change: the heal was not throttled"
    finally:
        heal.join()
    assert done and done[0].returncode == 0, out(done[0]) if done else "no heal"
    modes = [oct(os.stat(f"{b}/d/big").st_mode & 0o777) for b in bricks]
    assert modes == [oct(0o600)] * 3, f"modes after the heal: {modes}"
    assert read(f"{bricks[2]}/d/big") == read(f"{bricks[0]}/d/big")
    info = a.cli("volume", "heal", "cv", "info").stdout
    assert info.count("Number of entries: 0") == 3, info
    m.stop()
    a.mounts.remove(m)


PROGRESS_DONE = re.compile(r"^(heal(?: full| info)?): done in [^:]+: (.*)$", re.M)


def progress_done(r, what):
    """The counts of the last progress line of `what` on stderr."""
    found = [rest for w, rest in PROGRESS_DONE.findall(r.stderr) if w == what]
    assert len(found) == 1, f"one '{what}: done' line wanted:\n{out(r)}"
    counts = {}
    for num, name in re.findall(r"(\d+) (objects walked|healed)", found[0]):
        counts[name] = int(num)
    m = re.search(r"(\d+) of (\d+) entries", found[0])
    assert m, found[0]
    counts["done"], counts["found"] = int(m.group(1)), int(m.group(2))
    return counts


def test_heal_progress_lines(pool):
    """--progress: heal info, heal and heal full end with a line of what they
    did on stderr, whose counts are those of the volume (entries listed,
    objects healed, objects walked); stdout stays GlusterFS's."""
    bricks = pool.volume("pg", options={"cluster.self-heal-daemon": "off"})
    a, c = pool.nodes[0], pool.nodes[2]
    mnt = os.path.join(a.root, "pg-mnt")
    m = a.mount("pg", mnt)
    for d in range(3):
        os.makedirs(f"{mnt}/before{d}")
        for i in range(20):
            write(f"{mnt}/before{d}/f{i}", b"x" * 100)
    pid = brick_pid(c, "pg", bricks[2])
    c.stop_signal(pid)
    missed = 0
    for d in range(4):
        os.makedirs(f"{mnt}/d{d}")
        missed += 1
        for i in range(50):
            write(f"{mnt}/d{d}/f{i}", os.urandom(1000))
            missed += 1
    m.stop()
    a.mounts.remove(m)
    os.kill(pid, signal.SIGKILL)
    c.stopped_pids.discard(pid)
    wait_for(lambda: brick_pid(c, "pg", bricks[2]) not in (None, pid), 30, "brick 2 again")

    r = a.cli("--progress", "volume", "heal", "pg", "info", "summary", check=False)
    assert r.returncode == 0, out(r)
    listed = sum(int(x) for x in re.findall(r"^Total Number of entries: (\d+)$", r.stdout, re.M))
    got = progress_done(r, "heal info")
    assert got["done"] == got["found"] == listed, (got, r.stdout)
    assert listed >= missed, r.stdout  # each good copy lists what brick 2 missed

    r = a.cli("volume", "heal", "pg", "--progress", check=False, timeout=120)
    assert r.returncode == 0, out(r)
    assert "Launching heal operation to perform index self heal on volume pg has been " \
           "successful" in r.stdout, out(r)
    got = progress_done(r, "heal")
    assert got["done"] == got["found"] >= missed, out(r)
    assert got["healed"] >= missed, out(r)
    assert "copied" in r.stderr, out(r)
    for b in bricks[1:]:
        assert same_tree(bricks[0], b), b

    # Every object of the volume, walked once: the root, 7 directories and
    # 260 files; nothing left to heal.
    r = a.cli("--progress", "volume", "heal", "pg", "full", check=False, timeout=120)
    assert r.returncode == 0, out(r)
    got = progress_done(r, "heal full")
    assert got["objects walked"] == 1 + 7 + 260, out(r)
    assert "healed" not in got, out(r)
    # without --progress and with stderr not a terminal: no progress lines
    r = a.cli("volume", "heal", "pg", "full", check=False, timeout=120)
    assert r.returncode == 0 and r.stderr == "", out(r)


def test_takeover_when_a_daemon_is_gone(pool):
    """The daemon that owns an entry (the server of the lowest marked brick)
    is gone with its cairnd (killed -9; its brick runs on): another server's
    daemon takes the entry over after three heal-timeouts. Runs last: it
    leaves server 0 without its cairnd."""
    bricks = pool.volume("ov")
    z, b = pool.nodes[0], pool.nodes[1]
    mnt = os.path.join(b.root, "ov-mnt")
    m = b.mount("ov", mnt)
    write(f"{mnt}/f", b"before")
    pid = brick_pid(b, "ov", bricks[1])
    b.stop_signal(pid)
    write(f"{mnt}/f", b"after, while brick 1 was down")
    os.makedirs(f"{mnt}/newdir")
    m.stop()
    b.mounts.remove(m)
    shd0 = shd_pids(z, "ov")
    assert len(shd0) == 1
    z.proc.kill()
    z.proc.wait()
    wait_for(lambda: not alive(shd0[0]), 10, "server 0's daemon to go with its cairnd")
    os.kill(pid, signal.SIGKILL)
    b.stopped_pids.discard(pid)
    wait_for(lambda: same_tree(bricks[0], bricks[1]) and same_tree(bricks[0], bricks[2]), 40,
             "another daemon to take over")
    assert read(os.path.join(bricks[1], "f")) == b"after, while brick 1 was down"
    c = pool.nodes[2]
    # the daemon logs the takeover once its crawl returns, just after the heal
    wait_for(lambda: "took over entries" in c.tail(f"{c.workdir}/logs/shd-ov.log", 20000), 10,
             "server 2's daemon to log the takeover")
