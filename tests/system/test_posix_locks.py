"""fcntl (POSIX record) and flock locks, seen across two mounts.

Locks belong to processes, so each lock holder is a separate process (an
"agent") driven over pipes: one line per command, one line per answer."""

import os
import select
import subprocess
import time

import pytest

AGENT = r'''
import errno, fcntl, os, struct, sys
fd = None
def flock_struct(t, start, length):
    return struct.pack("hhqqi4x", t, 0, start, length, 0)
types = {"rd": fcntl.F_RDLCK, "wr": fcntl.F_WRLCK, "un": fcntl.F_UNLCK}
names = {v: k for k, v in types.items()}
for line in sys.stdin:
    a = line.split()
    try:
        if a[0] == "open":
            fd = os.open(a[1], os.O_RDWR)
            out = "OK"
        elif a[0] in ("setlk", "setlkw"):
            cmd = fcntl.F_SETLK if a[0] == "setlk" else fcntl.F_SETLKW
            fcntl.fcntl(fd, cmd, flock_struct(types[a[1]], int(a[2]), int(a[3])))
            out = "OK"
        elif a[0] == "getlk":
            r = fcntl.fcntl(fd, fcntl.F_GETLK, flock_struct(types[a[1]], int(a[2]), int(a[3])))
            t, w, s, l, p = struct.unpack("hhqqi4x", r)
            out = f"OK {names[t]} {s} {l} {p}"
        elif a[0] == "flock":
            op = {"ex": fcntl.LOCK_EX, "sh": fcntl.LOCK_SH, "un": fcntl.LOCK_UN,
                  "exnb": fcntl.LOCK_EX | fcntl.LOCK_NB,
                  "shnb": fcntl.LOCK_SH | fcntl.LOCK_NB}[a[1]]
            fcntl.flock(fd, op)
            out = "OK"
        elif a[0] == "close":
            os.close(fd)
            fd = None
            out = "OK"
        elif a[0] == "open2":
            fd2 = os.open(a[1], os.O_RDONLY)
            out = "OK"
        elif a[0] == "close2":
            os.close(fd2)
            out = "OK"
        elif a[0] == "pid":
            out = f"OK {os.getpid()}"
        elif a[0] == "exit":
            print("OK", flush=True)
            break
        else:
            out = "ERR bad command"
    except OSError as e:
        out = "ERR " + errno.errorcode.get(e.errno, str(e.errno))
    print(out, flush=True)
'''


class Agent:
    def __init__(self, path):
        self.p = subprocess.Popen(["/usr/bin/python3", "-c", AGENT], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, bufsize=1)
        assert self.cmd("open " + path) == "OK"

    def send(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def answer(self, timeout=15.0):
        """The next answer line, or None if none came within timeout."""
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        if not r:
            return None
        return self.p.stdout.readline().strip()

    def cmd(self, line, timeout=15.0):
        self.send(line)
        a = self.answer(timeout)
        if a is None:
            raise AssertionError(f"agent hung on {line!r} for {timeout}s")
        return a

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(10)

    def close(self):
        if self.p.poll() is None:
            try:
                self.send("exit")
                self.p.wait(5)
            except Exception:
                pass
        self.kill()


@pytest.fixture
def agents():
    made = []

    def make(path):
        a = Agent(path)
        made.append(a)
        return a

    yield make
    for a in made:
        a.close()


CONFLICT = ("ERR EAGAIN", "ERR EACCES")


@pytest.fixture
def lockfile(tdir):
    with open(os.path.join(tdir.a, "lk"), "wb") as f:
        f.write(b"\0" * 4096)
    return os.path.join(tdir.a, "lk"), os.path.join(tdir.b, "lk")


def test_fcntl_wrlck_conflicts_across_mounts(agents, lockfile):
    h = agents(lockfile[0])
    c = agents(lockfile[1])
    assert h.cmd("setlk wr 100 50") == "OK"
    assert c.cmd("setlk wr 120 10") in CONFLICT
    assert c.cmd("setlk rd 100 1") in CONFLICT


def test_fcntl_conflict_same_mount(agents, lockfile):
    h = agents(lockfile[0])
    c = agents(lockfile[0])
    assert h.cmd("setlk wr 0 10") == "OK"
    assert c.cmd("setlk wr 5 1") in CONFLICT


def test_fcntl_getlk_reports_conflict(agents, lockfile):
    h = agents(lockfile[0])
    c = agents(lockfile[1])
    hpid = int(h.cmd("pid").split()[1])
    assert h.cmd("setlk wr 100 50") == "OK"
    ans = c.cmd("getlk wr 0 1000").split()
    assert ans[:4] == ["OK", "wr", "100", "50"], ans
    # the pid of a holder on another client is not meaningful locally, but on
    # the same mount it must be the holder's
    c2 = agents(lockfile[0])
    ans2 = c2.cmd("getlk rd 120 1").split()
    assert ans2[:4] == ["OK", "wr", "100", "50"] and int(ans2[4]) == hpid, ans2
    assert c.cmd("getlk wr 0 100").split()[:2] == ["OK", "un"]


def test_fcntl_non_overlapping_ranges(agents, lockfile):
    h = agents(lockfile[0])
    c = agents(lockfile[1])
    assert h.cmd("setlk wr 0 100") == "OK"
    assert c.cmd("setlk wr 100 100") == "OK"
    assert h.cmd("setlk wr 200 0") == "OK"  # [200, EOF) touches [100, 200) without overlap
    assert c.cmd("setlk wr 99 1") in CONFLICT


def test_fcntl_read_locks_share(agents, lockfile):
    h = agents(lockfile[0])
    c = agents(lockfile[1])
    assert h.cmd("setlk rd 0 100") == "OK"
    assert c.cmd("setlk rd 50 100") == "OK"
    assert c.cmd("setlk wr 50 10") in CONFLICT


def test_fcntl_unlock_releases(agents, lockfile):
    h = agents(lockfile[0])
    c = agents(lockfile[1])
    assert h.cmd("setlk wr 0 0") == "OK"
    assert c.cmd("setlk wr 10 10") in CONFLICT
    assert h.cmd("setlk un 0 0") == "OK"
    assert c.cmd("setlk wr 10 10") == "OK"


def test_fcntl_released_on_close(agents, lockfile):
    h = agents(lockfile[0])
    c = agents(lockfile[1])
    assert h.cmd("setlk wr 0 0") == "OK"
    assert c.cmd("setlk wr 0 1") in CONFLICT
    assert h.cmd("close") == "OK"
    assert c.cmd("setlk wr 0 1") == "OK"


def test_fcntl_released_by_close_of_another_fd(agents, lockfile):
    # POSIX: closing any descriptor of the file drops the process's locks on
    # it, also one that never took a lock (the mount answers FLUSH of files
    # without locks itself, so this checks it tracks the file, not the fd)
    h = agents(lockfile[0])
    c = agents(lockfile[1])
    assert h.cmd("setlk wr 0 0") == "OK"
    assert h.cmd("open2 " + lockfile[0]) == "OK"
    assert c.cmd("setlk wr 0 1") in CONFLICT
    assert h.cmd("close2") == "OK"
    assert c.cmd("setlk wr 0 1") == "OK"


def test_fcntl_close_without_locks_keeps_other_mounts_lock(agents, lockfile):
    h = agents(lockfile[0])
    c = agents(lockfile[1])
    assert h.cmd("setlk wr 0 0") == "OK"
    assert c.cmd("close") == "OK"
    assert c.cmd("open " + lockfile[1]) == "OK"
    assert c.cmd("setlk wr 0 1") in CONFLICT


def test_fcntl_released_when_holder_dies(agents, lockfile):
    h = agents(lockfile[0])
    c = agents(lockfile[1])
    assert h.cmd("setlk wr 0 0") == "OK"
    assert c.cmd("setlk wr 0 1") in CONFLICT
    h.kill()
    # release is part of the holder's exit (close of its last fd), so the
    # very next attempt after the process is gone must succeed
    assert c.cmd("setlk wr 0 1") == "OK"


def test_fcntl_setlkw_waits_then_succeeds(agents, lockfile):
    h = agents(lockfile[0])
    c = agents(lockfile[1])
    assert h.cmd("setlk wr 0 10") == "OK"
    c.send("setlkw wr 5 1")
    assert c.answer(timeout=1.5) is None, "F_SETLKW returned while the lock was held"
    t0 = time.time()
    assert h.cmd("setlk un 0 10") == "OK"
    assert c.answer(timeout=10) == "OK"
    assert time.time() - t0 < 5


def test_fcntl_setlkw_waiter_killed_does_not_leak(agents, lockfile):
    h = agents(lockfile[0])
    w = agents(lockfile[1])
    c = agents(lockfile[1])
    assert h.cmd("setlk wr 0 10") == "OK"
    w.send("setlkw wr 0 10")
    assert w.answer(timeout=1.0) is None
    w.kill()
    assert h.cmd("setlk un 0 10") == "OK"
    assert c.cmd("setlk wr 0 10") == "OK"


def test_flock_ex_blocks_other_mount(agents, lockfile):
    h = agents(lockfile[0])
    c = agents(lockfile[1])
    assert h.cmd("flock ex") == "OK"
    assert c.cmd("flock exnb") == "ERR EAGAIN"  # EWOULDBLOCK
    assert c.cmd("flock shnb") == "ERR EAGAIN"
    assert h.cmd("flock un") == "OK"
    assert c.cmd("flock exnb") == "OK"


def test_flock_shared_locks_coexist(agents, lockfile):
    h = agents(lockfile[0])
    c = agents(lockfile[1])
    assert h.cmd("flock sh") == "OK"
    assert c.cmd("flock shnb") == "OK"
    third = agents(lockfile[0])
    assert third.cmd("flock exnb") == "ERR EAGAIN"


def test_flock_blocking_waits_for_release(agents, lockfile):
    h = agents(lockfile[0])
    c = agents(lockfile[1])
    assert h.cmd("flock ex") == "OK"
    c.send("flock ex")
    assert c.answer(timeout=1.5) is None, "LOCK_EX returned while the other mount held it"
    h.kill()
    assert c.answer(timeout=10) == "OK"
