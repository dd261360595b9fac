"""Concurrent random I/O on one sharded file (issue 44, docs/shard.md,
"Reads and writes side by side"): the shard layer runs a file's reads and
writes in parallel, so several threads write and read one file at once,
each its own interleaved 4 KiB slots (O_DIRECT, so each write reaches the
layer as it is made) or unaligned 3000-byte slots (two threads sharing a
stripe of the dispersed volume), on both sides of a block boundary, into
a block no one made yet. Every byte is then compared through a second,
fresh mount (a write lost or misplaced by the layer shows there), and
the new block's shard must carry one gfid on every brick.

Run on a 2 x (2 + 1) dispersed volume (both slot kinds) and on replica 3 (4 KiB), both with
features.shard on and 4 MB blocks. cairnd on 127.0.0.135. Run inside a
private network namespace.
"""

import mmap
import os
import random
import struct
import threading

import pytest

from cairn_cluster import Cluster

HOST = "127.0.0.135"
BS = 4 << 20
# the threads write the last 512 KiB of block 0 and the first of block 1
# (before them: a hole)
START, SIZE = BS - (512 << 10), BS + (512 << 10)
THREADS = 8


@pytest.fixture(scope="module")
def cc():
    c = Cluster(host=HOST, prefix="st-shcc-")
    try:
        c.start()
        opts = (("network.ping-timeout", "2"), ("features.shard", "on"),
                ("features.shard-block-size", "4MB"))
        ec = [c.brick_path(f"e{i}") for i in range(6)]
        r3 = [c.brick_path(f"r{i}") for i in range(3)]
        for b in ec + r3:
            os.makedirs(b)
        c.cli("volume", "create", "ccec", "disperse-data", "2", "redundancy", "1",
              *[f"{HOST}:{b}" for b in ec], "force")
        c.cli("volume", "create", "ccr3", "replica", "3", *[f"{HOST}:{b}" for b in r3], "force")
        for v in ("ccec", "ccr3"):
            for key, value in opts:
                c.cli("volume", "set", v, key, value)
            c.cli("volume", "start", v)
        c.m = {v: c.mount(v, os.path.join(c.root, f"{v}-m")) for v in ("ccec", "ccr3")}
        c.bricks = {"ccec": ec, "ccr3": r3}
        yield c
    finally:
        c.close()


def slot_data(t, i, n):
    """n bytes naming thread t's i-th write (differs for every write)."""
    return (struct.pack("<II", t + 1, i) * (n // 8 + 1))[:n]


def hammer(path, slots, direct, rounds=2):
    """THREADS threads write their slots of path in random order, `rounds`
    times (later rounds overwrite, and read back a slot written before);
    returns the bytes the file must hold, and the errors seen."""
    want = bytearray(SIZE)
    errors = []

    def worker(t):
        rng = random.Random(t)
        mine = [s for k, s in enumerate(slots) if k % THREADS == t]
        fd = os.open(path, os.O_RDWR | (os.O_DIRECT if direct else 0))
        buf = mmap.mmap(-1, 1 << 16)  # page-aligned, for O_DIRECT
        try:
            for r in range(rounds):
                order = mine[:]
                rng.shuffle(order)
                for k, (off, n) in enumerate(order):
                    data = slot_data(t, r * len(mine) + k, n)
                    buf.seek(0)
                    buf.write(data)
                    got = os.pwritev(fd, [memoryview(buf)[:n]], off)
                    if got != n:
                        errors.append(f"thread {t}: short write {got} of {n} at {off}")
                    want[off:off + n] = data
                    if k % 7 == 3:  # a read among the writes: this thread's last write
                        got = os.preadv(fd, [memoryview(buf)[:n]], off)
                        if got != n or bytes(buf[:n]) != data:
                            errors.append(f"thread {t}: read back at {off} differs")
        except OSError as e:
            errors.append(f"thread {t}: {e}")
        finally:
            buf.close()
            os.close(fd)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return bytes(want), errors


def shard_ids(bricks):
    """{shard file name: the set of gfids its copies (fragments) carry}."""
    out = {}
    for b in bricks:
        d = os.path.join(b, ".shard")
        for n in os.listdir(d) if os.path.isdir(d) else []:
            g = os.getxattr(os.path.join(d, n), "trusted.cairn.gfid")
            out.setdefault(n, set()).add(g)
    return out


def first_difference(got, want):
    for i in range(0, max(len(got), len(want)), 4096):
        if got[i:i + 4096] != want[i:i + 4096]:
            for j in range(i, i + 4096):
                if j >= len(got) or j >= len(want) or got[j] != want[j]:
                    return j
    return None


# unaligned slots share stripes on the dispersed volume only: replica 3
# runs the O_DIRECT case alone (CI time)
@pytest.mark.parametrize("vol,direct", [("ccec", True), ("ccec", False), ("ccr3", True)],
                         ids=["ec-direct4k", "ec-buffered3000", "r3-direct4k"])
def test_concurrent_random_io_on_one_sharded_file(cc, vol, direct):
    c = cc
    name = f"cc-{'d' if direct else 'b'}"
    path = os.path.join(c.m[vol].path, name)
    # an empty sharded file, grown by the threads themselves: block 1's
    # shard is made by whichever writer comes first, the size recorded by
    # writers racing to extend it
    # kept open throughout: no last close, no fsync before the check, so
    # the record each write left is what the second mount reads (not one
    # counted anew at the close)
    keep = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    step = 4096 if direct else 3000
    slots = [(off, min(step, SIZE - off)) for off in range(START, SIZE, step)]
    want, errors = hammer(path, slots, direct)
    assert not errors, errors[:5]
    fm = c.mount(vol, os.path.join(c.root, f"{vol}-{name}-fresh"))
    try:
        p2 = os.path.join(fm.path, name)
        assert os.stat(p2).st_size == SIZE
        with open(p2, "rb") as f:
            got = f.read()
        at = first_difference(got, want)
        assert at is None, f"{vol}: byte {at} differs (got {len(got)} bytes)"
        # block 1's shard, made by racing writers, is one file on every
        # brick (two CREATEs at once could each win on some bricks)
        ids = shard_ids(c.bricks[vol])
        assert ids and all(len(g) == 1 for g in ids.values()), ids
    finally:
        fm.stop()
        os.close(keep)
