"""A brick that hangs (issue 42, part 2): replica 3 over three cairnd
(127.0.0.170-.172, the pool of test_faults.py), one brick stopped with
SIGSTOP while a mount keeps working, then woken.

- A brick woken with a backlog of requests on connections its client had
  already dropped (ping-timeout) and reconnected past must not crash: it
  keeps its pid, no log says "died with signal" or carries a sanitizer
  report, and after heal every brick, and a fresh mount, hold exactly what
  the application wrote. Before the fix the brick died with SIGSEGV in
  about half the rounds (a lease granted to a connection after its
  teardown, then recalled once the connection was freed).

Rounds: CAIRN_HUNG_ROUNDS (default 4); it is a race.
Run inside a private network namespace (docs: the system tests' README).
"""

import glob
import hashlib
import os
import subprocess
import time

from cairn_cluster import alive
from test_faults import (PING, heal_until_equal, pool, tree_sums,  # noqa: F401
                         vol_factory, wait_heal_info_clean)

ROUNDS = int(os.environ.get("CAIRN_HUNG_ROUNDS", "4"))


def logs_of(pool):
    """{path: text} of every cairnd's log and every brick's log."""
    res = {}
    for n in pool.nodes:
        paths = [n.logfile, n.logfile + ".out"]
        paths += glob.glob(os.path.join(n.workdir, "logs", "bricks", "*.log"))
        for p in paths:
            try:
                with open(p, errors="replace") as f:
                    res[p] = f.read()
            except OSError:
                pass
    return res


def crash_lines(pool):
    bad = []
    for p, text in logs_of(pool).items():
        for line in text.splitlines():
            if "died with signal" in line or "Sanitizer" in line or "runtime error" in line:
                bad.append(f"{p}: {line}")
    return bad


def seed_loop(mnt, least_s):
    """The reported workload: 300 x (dd of 10 KiB + rm) through the mount,
    and on until least_s seconds have passed."""
    t0 = time.time()
    i = 0
    while i < 300 or time.time() - t0 < least_s:
        subprocess.run(["dd", "if=/dev/zero", f"of={mnt}/f", "bs=10k", "count=1"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.unlink(os.path.join(mnt, "f"))
        i += 1
    return i


def test_stopped_brick_wakes_without_crashing(pool, vol_factory):  # noqa: F811
    v = vol_factory()
    node = pool.nodes[2]
    pid = v.brick_pids()[2][0]
    want = {}
    for rnd in range(ROUNDS):
        node.stop_signal(pid)
        try:
            name = f"w{rnd}"
            data = os.urandom(100000 + rnd * 4099)
            with open(os.path.join(v.mnt, name), "wb") as f:
                f.write(data)
            want[name] = data
            # long enough for the mount to give up on the brick (one
            # ping-timeout) and to try to reconnect a few times
            seed_loop(v.mnt, 3 * PING)
        finally:
            node.cont(pid)
        # the brick runs the backlog of its dead connections; the mount
        # reconnects
        time.sleep(PING)
        assert alive(pid) and v.brick_pids()[2] == [pid], \
            f"round {rnd}: the brick did not survive its wake-up: {crash_lines(pool)}"
    assert crash_lines(pool) == []
    for name, data in want.items():
        with open(os.path.join(v.mnt, name), "rb") as f:
            assert f.read() == data, name
    assert not os.path.exists(os.path.join(v.mnt, "f"))
    src = {n: ("f", os.stat(os.path.join(v.mnt, n)).st_mode & 0o7777,
               hashlib.sha256(d).hexdigest()) for n, d in want.items()}
    heal_until_equal(v, src, "")
    wait_heal_info_clean(v)
    fresh = pool.nodes[1].mount(v.name, os.path.join(pool.nodes[1].root, f"{v.name}-fresh"))
    try:
        assert tree_sums(fresh.path) == src
    finally:
        fresh.stop()
        pool.nodes[1].mounts.remove(fresh)
    assert v.brick_pids()[2] == [pid]
    assert crash_lines(pool) == []


def brick_row(node, vol, brick):
    """(port, pid) of brick in `volume status` asked of node."""
    for host, path, port, pid in node.brick_status(vol):
        if path == brick:
            return port, pid
    raise AssertionError(f"{brick} not in `volume status {vol}`")


def wait_row(pool, vol, brick, want, timeout=20):
    """Polls `volume status` on every server until brick's (port, pid) is
    want there; returns the rows seen last otherwise."""
    end = time.time() + timeout
    while True:
        rows = [brick_row(n, vol, brick) for n in pool.nodes]
        if all(r == want for r in rows) or time.time() > end:
            return rows
        time.sleep(0.3)


def test_stopped_brick_shows_offline(pool, vol_factory):  # noqa: F811
    v = vol_factory()
    node = pool.nodes[2]
    pid = v.brick_pids()[2][0]
    port = brick_row(node, v.name, v.bricks[2])[0]
    assert port and brick_row(pool.nodes[0], v.name, v.bricks[2]) == (port, pid)
    node.stop_signal(pid)
    try:
        rows = wait_row(pool, v.name, v.bricks[2], (None, None))
        assert rows == [(None, None)] * 3, f"a stopped brick still shown online: {rows}"
        for b in v.bricks[:2]:
            assert all(brick_row(n, v.name, b)[1] for n in pool.nodes), b
        st = pool.nodes[0].cli("volume", "status", v.name).stdout
        line = next(x for x in st.splitlines() if x.strip().endswith("N/A") and " N " in x)
        assert "N/A" in line
        # silent, not dead: cairnd leaves it alone
        time.sleep(3)
        assert alive(pid) and v.brick_pids()[2] == [pid]
    finally:
        node.cont(pid)
    rows = wait_row(pool, v.name, v.bricks[2], (port, pid))
    assert rows == [(port, pid)] * 3, f"the brick is not shown online again: {rows}"
    assert v.brick_pids()[2] == [pid]
    # the probe logs the change on its pass after the one that saw it
    end = time.time() + 5
    while True:
        log = open(node.logfile).read()
        if f"(pid {pid}) answers again" in log or time.time() > end:
            break
        time.sleep(0.2)
    assert f"(pid {pid}) has not answered" in log and f"(pid {pid}) answers again" in log
    assert crash_lines(pool) == []
