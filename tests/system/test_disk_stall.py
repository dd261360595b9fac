"""A brick whose disk stalls (issue 42, part 2): replica 3 over three
cairnd (127.0.0.170-.172, the pool of test_faults.py) whose bricks run on
the fault-injecting storage table (CAIRN_TEST_FAULTS=1, a test-only
switch: storage.h, brick_fault_watch). One write on one brick is held by
its disk for several ping-timeouts while its network threads keep
answering pings.

The defined outcome (docs/replication.md, Failures): once a request has
run for network.ping-timeout the brick closes its connections and refuses
handshakes until the disk has completed it, so the writer goes on with the
two other bricks after about one ping-timeout instead of waiting for the
disk; `volume status` shows the brick offline meanwhile; the late write
lands before any client is back, and after heal every brick, and a fresh
mount, hold what the application wrote. The brick process is never
restarted.

Run inside a private network namespace (docs: the system tests' README).
"""

import hashlib
import os
import time

import pytest

from cairn_cluster import alive
from test_faults import PING, Pool, heal_until_equal, tree_sums, vol_factory  # noqa: F401
from test_faults import wait_heal_info_clean
from replica_pool import arm
from test_hung_brick import crash_lines, wait_row

STALL_S = 5 * PING  # how long the disk holds the write


@pytest.fixture(scope="module")
def pool():
    """The pool of test_faults.py, its bricks taking faults on demand."""
    p = Pool()
    try:
        yield p.start(faults=True)
    finally:
        p.close()


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
        os.fsync(f.fileno())


def test_disk_stall_routes_around(pool, vol_factory):  # noqa: F811
    v = vol_factory()
    node = pool.nodes[2]
    pid = v.brick_pids()[2][0]
    port = [r for r in node.brick_status(v.name) if r[1] == v.bricks[2]][0][2]
    want = {f"before{i}": os.urandom(5000 + i) for i in range(5)}
    for name, data in want.items():
        write(os.path.join(v.mnt, name), data)
    # the next write to brick 2's disk waits STALL_S seconds
    arm(v.bricks[2], f"stall pwrite {STALL_S * 1000}")
    t0 = time.time()
    big = bytearray(os.urandom(1 << 20))
    write(os.path.join(v.mnt, "big"), big)
    took = time.time() - t0
    assert took < STALL_S - PING, f"the write waited for the stalled disk ({took:.1f} s)"
    # later changes do not wait for it either
    for i in range(10):
        want[f"during{i}"] = os.urandom(3000 + i)
        write(os.path.join(v.mnt, f"during{i}"), want[f"during{i}"])
    with open(os.path.join(v.mnt, "big"), "r+b") as f:
        patch = os.urandom(200000)
        f.seek(0)
        f.write(patch)
        os.fsync(f.fileno())
    big[:len(patch)] = patch
    want["big"] = bytes(big)
    assert time.time() - t0 < STALL_S, "changes waited for the stalled disk"
    rows = wait_row(pool, v.name, v.bricks[2], (None, None), timeout=STALL_S - (time.time() - t0))
    assert rows == [(None, None)] * 3, f"a brick whose disk stalls is shown online: {rows}"
    assert alive(pid)
    # the disk completes the write; the brick serves again
    rows = wait_row(pool, v.name, v.bricks[2], (port, pid), timeout=STALL_S + 30)
    assert rows == [(port, pid)] * 3, f"the brick is not shown online again: {rows}"
    log = open(os.path.join(node.workdir, "logs", "bricks",
                            v.bricks[2].strip("/").replace("/", "-") + ".log")).read()
    assert "the disk stalls" in log and "serving clients again" in log, log[-3000:]
    for name, data in want.items():
        with open(os.path.join(v.mnt, name), "rb") as f:
            assert f.read() == data, name
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
