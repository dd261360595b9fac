"""A write that reaches fewer than k bricks of a disperse set (issue 44,
docs/disperse.md, "Quorum and a brick down"): on disperse 3 redundancy 1,
two bricks stop (SIGSTOP: the client's connections still look up, so the
write is sent to all three), the one brick left applies its fragment of
the new version and the write fails. That fragment belongs to a version
no k bricks hold: the brick that took it must accuse itself, so that once
the two others are back (killed while stopped, so that they never apply
the write, and started again) a fresh mount reads the old bytes from them,
and `volume heal V` rebuilds the first brick's fragment from them; then
every fragment is checked against an encode of the old bytes and another
brick is killed: the healed fragment is read and decodes right.

cairnd on 127.0.0.132. Run inside a private network namespace.
"""

import errno
import os
import random
import signal
import time

import pytest

from cairn_cluster import Cluster, alive, kill_pid
from test_disperse import CHUNK, check_fragments, read_back, restart
from test_disperse_heal import brick_pid, entries

HOST = "127.0.0.132"


@pytest.fixture(scope="module")
def ec():
    c = Cluster(host=HOST, prefix="st-ebk-")
    try:
        c.start()
        c.bricks = [c.brick_path(f"a{i}") for i in range(3)]
        for b in c.bricks:
            os.makedirs(b)
        c.cli("volume", "create", "bk", "disperse", "3", "redundancy", "1",
              *[f"{HOST}:{b}" for b in c.bricks], "force")
        c.cli("volume", "set", "bk", "network.ping-timeout", "2")
        c.cli("volume", "set", "bk", "cluster.self-heal-daemon", "off")
        c.cli("volume", "start", "bk")
        yield c
    finally:
        c.close()


def fresh_read(c, rel):
    m = c.mount("bk", os.path.join(c.root, f"bk-f{random.randrange(1 << 30)}"))
    try:
        return read_back(os.path.join(m.path, rel))
    finally:
        m.stop()


def test_write_below_k_keeps_old_version(ec):
    c = ec
    bricks = c.bricks
    rng = random.Random(44)
    old = rng.randbytes(8 * 2 * CHUNK + 300)  # eight stripes and a partial one
    m = c.mount("bk", os.path.join(c.root, "bk-m"))
    with open(os.path.join(m.path, "f"), "wb") as f:
        f.write(old)
    check_fragments(bricks, 2, 1, "f", old)
    fd = os.open(os.path.join(m.path, "f"), os.O_RDWR | os.O_DIRECT)
    # bricks 1 and 2 stop answering; the mount still counts them up
    stopped = [brick_pid(c, "bk", b) for b in bricks[1:]]
    for pid in stopped:
        c.stop_signal(pid)
    with pytest.raises(OSError) as e:  # whole stripes: no read before it
        os.pwrite(fd, rng.randbytes(4 * 2 * CHUNK), 0)
        os.fsync(fd)
    assert e.value.errno in (errno.EIO, errno.ENOTCONN)
    os.close(fd)
    m.stop()
    # killed while stopped: they never see the write queued to them
    for pid in stopped:
        os.kill(pid, signal.SIGKILL)
        end = time.time() + 10
        while alive(pid) and time.time() < end:
            time.sleep(0.05)
        c.cont(pid)
    restart(c, "bk")
    assert fresh_read(c, "f") == old  # from bricks 1 and 2: brick 0 accused itself
    end = time.time() + 30
    while True:  # the CLI's mount may meet a brick not listening yet
        r = c.cli("volume", "heal", "bk", check=False)
        if r.returncode == 0 or time.time() > end:
            break
        time.sleep(0.5)
    assert r.returncode == 0, r.stdout + r.stderr
    end = time.time() + 30
    while True:
        n = entries(c, "bk")
        if n and all(x == 0 for x in n):
            break
        assert time.time() < end, f"heal info not at 0: {n}"
        time.sleep(0.5)
    check_fragments(bricks, 2, 1, "f", old)
    kill_pid(brick_pid(c, "bk", bricks[1]))  # the rebuilt fragment is read
    try:
        assert fresh_read(c, "f") == old
    finally:
        restart(c, "bk")
