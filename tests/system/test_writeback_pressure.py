"""Back-pressure of the write-back queue (docs/consistency.md, "Write-back").

client.write-back-files and client.write-back-size bound what a mount holds
written back and not yet on the bricks. A create that finds the queue full
waits while the files closed or in flight reach the bricks, then goes on
written back; only when none of the pending files can leave (the
application keeps them all open) is it made on the bricks at once, without
waiting. The io-stats line "FUSE write-back" counts both.

Address: 127.0.0.49."""

import os
import re
import time

import pytest

from cairn_cluster import Cluster
from test_writeback import fsync_dir

STATS = "trusted.cairn.io-stats"


@pytest.fixture
def pc():
    with Cluster(host="127.0.0.49", prefix="wbp-") as c:
        yield c


def counters(mnt):
    text = os.getxattr(mnt, STATS).decode()
    m = re.search(r"^FUSE write-back: (\d+) files made here, (\d+) waits for room \((\d+) ms\), "
                  r"(\d+) made on the bricks at once with the queue full, (\d+) files and (\d+) "
                  r"bytes pending$", text, re.M)
    assert m, text
    made, waits, _, full, files, size = (int(x) for x in m.groups())
    return made, waits, full, files, size


def create_round_trips(mnt):
    """Round trips to the bricks that this mount's CREATEs took."""
    text = os.getxattr(mnt, STATS).decode()
    m = re.search(r"^CREATE +\d+ +(\d+) ", text, re.M)
    return int(m.group(1)) if m else 0


def data(i):
    return (b"%05d" % i) * (200 + i % 7)


def on_every_brick(bricks, rel, want):
    for b in bricks:
        d = os.path.join(b, rel)
        assert sorted(os.listdir(d)) == sorted(want), b
        for name, body in want.items():
            with open(os.path.join(d, name), "rb") as fh:
                assert fh.read() == body, (b, name)


def test_a_full_queue_holds_creates_back_instead_of_going_synchronous(pc):
    bricks, (m,) = pc.replica3("pv", {"client.write-back-files": "8"}, mounts=1)
    d = os.path.join(m.path, "d")
    os.mkdir(d)
    want = {}
    for i in range(300):
        want[f"f{i}"] = data(i)
        with open(os.path.join(d, f"f{i}"), "wb") as fh:
            fh.write(want[f"f{i}"])
    made, waits, full, _, _ = counters(m.path)
    # every file was written back: the creates waited for room, none went
    # to the bricks on its own
    assert (made, full) == (300, 0)
    assert waits > 0
    assert create_round_trips(m.path) == 0
    fsync_dir(d)
    assert counters(m.path)[3:] == (0, 0)
    on_every_brick(bricks, "d", want)


def test_the_size_bound_holds_creates_back_too(pc):
    bricks, (m,) = pc.replica3("pv", {"client.write-back-size": "1MB"}, mounts=1)
    d = os.path.join(m.path, "d")
    os.mkdir(d)
    want = {f"g{i}": os.urandom(60_000) for i in range(80)}  # 4.8 MB in all
    for name, body in want.items():
        with open(os.path.join(d, name), "wb") as fh:
            fh.write(body)
    made, waits, full, _, _ = counters(m.path)
    assert (made, full) == (80, 0)
    assert waits > 0
    assert create_round_trips(m.path) == 0
    fsync_dir(d)
    on_every_brick(bricks, "d", want)


def test_files_kept_open_make_the_next_create_go_to_the_bricks_at_once(pc):
    bricks, (m,) = pc.replica3("pv", {"client.write-back-files": "4"}, mounts=1)
    d = os.path.join(m.path, "d")
    os.mkdir(d)
    handles, want = [], {}
    try:
        for i in range(7):
            t = time.monotonic()
            handles.append(open(os.path.join(d, f"h{i}"), "wb"))
            # nothing can leave the queue: no create waits for room
            assert time.monotonic() - t < 0.5, i
            want[f"h{i}"] = data(i)
            handles[-1].write(want[f"h{i}"])
        made, waits, full, files, _ = counters(m.path)
        assert (made, waits, full, files) == (4, 0, 3, 4)
        assert create_round_trips(m.path) == 3
    finally:
        for fh in handles:
            fh.close()
    fsync_dir(d)
    on_every_brick(bricks, "d", want)
    # once they are closed, the queue drains and creates are written back again
    with open(os.path.join(d, "after"), "wb") as fh:
        fh.write(b"after")
    assert counters(m.path)[0] == 5
