"""Write-behind of file data (docs/consistency.md, "Data: write-behind").

Writes to a file in a directory the mount made itself are answered at once
and reach the bricks in the background. These tests check that every byte
reaches every replica in the order it was written, that another client sees
all of it at its next access while the file is still open (its access
recalls the directory's lease, and the recall sends what is pending first),
that fsync means on the bricks even when the client is killed right after,
that a full brick's error comes back from a later write, fsync or close
instead of being dropped, and that performance.write-behind off turns it
off, live.

Addresses: 127.0.0.38."""

import errno
import os
import random
import re
import signal
import stat
import time

import pytest

from cairn_cluster import Cluster, as_user

STATS = "trusted.cairn.io-stats"
PAGE = 4096


def behind(mount_path):
    """(writes answered early, background writes that failed) of a mount."""
    text = os.getxattr(mount_path, STATS).decode()
    m = re.search(r"^FUSE write-behind: (\d+) writes answered early .*?(\d+) failed", text, re.M)
    assert m, text
    return int(m.group(1)), int(m.group(2))


def sent(mount_path):
    """(extents sent, WRITE requests that carried them) of a mount."""
    text = os.getxattr(mount_path, STATS).decode()
    m = re.search(r"^FUSE write-behind: .* sent in (\d+) extents by (\d+) writes", text, re.M)
    assert m, text
    return int(m.group(1)), int(m.group(2))


@pytest.fixture
def wc():
    c = Cluster(host="127.0.0.38", prefix="wbh-")
    try:
        c.start()
        yield c
    finally:
        c.close()


def volume(c, opts=None, mounts=2, brick_size=None):
    return c.replica3("wh", opts, mounts, brick_size)


def scatter(fd, model, count, seed, span_pages):
    """count 4 KiB writes at random pages of the file (some twice), mirrored
    into model (a bytearray)."""
    rnd = random.Random(seed)
    for i in range(count):
        off = rnd.randrange(span_pages) * PAGE
        data = rnd.randbytes(PAGE)
        os.pwrite(fd, data, off)
        end = off + PAGE
        if end > len(model):
            model.extend(bytes(end - len(model)))
        model[off:end] = data


def read_all(path):
    with open(path, "rb") as fh:
        return fh.read()


def test_every_write_reaches_every_replica_in_order(wc):
    bricks, (m1, m2) = volume(wc)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    before = behind(m1.path)[0]
    model = bytearray()
    fd = os.open(os.path.join(d, "f"), os.O_CREAT | os.O_RDWR, 0o644)
    try:
        ext0, wr0 = sent(m1.path)
        scatter(fd, model, 3000, 1, 1024)
        # scattered pages written while others are in flight go out
        # together, several to a WRITE
        ext1, wr1 = sent(m1.path)
        assert ext1 - ext0 > 2 * (wr1 - wr0) > 0, (ext1 - ext0, wr1 - wr0)
        # the same page over and over: the last write must win everywhere
        for i in range(300):
            data = bytes([i % 251]) * PAGE
            os.pwrite(fd, data, 8 * PAGE)
            model[8 * PAGE:9 * PAGE] = data
        # small appends that aggregate
        for i in range(500):
            data = os.urandom(1000)
            os.pwrite(fd, data, len(model))
            model.extend(data)
        assert behind(m1.path)[0] - before > 3000
        # this mount reads its own writes
        assert os.pread(fd, PAGE, 8 * PAGE) == bytes(model[8 * PAGE:9 * PAGE])
        os.fsync(fd)
    finally:
        os.close(fd)
    for b in bricks:
        assert read_all(os.path.join(b, "d", "f")) == bytes(model), b
    assert read_all(os.path.join(m2.path, "d", "f")) == bytes(model)


def test_other_client_sees_writes_of_a_file_still_open(wc):
    _, (m1, m2) = volume(wc)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    model = bytearray()
    fd = os.open(os.path.join(d, "open"), os.O_CREAT | os.O_RDWR, 0o644)
    try:
        before = behind(m1.path)[0]
        scatter(fd, model, 2000, 2, 512)
        assert behind(m1.path)[0] - before >= 1000  # most of it answered early
        # no fsync, no close: the other client's access alone must bring it
        other = os.path.join(m2.path, "d", "open")
        assert os.stat(other).st_size == len(model)
        assert read_all(other) == bytes(model)
        # and it keeps holding while both use the file
        for i in range(20):
            data = os.urandom(PAGE)
            os.pwrite(fd, data, i * 3 * PAGE)
            model[i * 3 * PAGE:(i * 3 + 1) * PAGE] = data
            assert read_all(other) == bytes(model), i
    finally:
        os.close(fd)


def test_truncate_and_rename_wait_for_what_is_behind(wc):
    bricks, (m1, m2) = volume(wc)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    fd = os.open(os.path.join(d, "t"), os.O_CREAT | os.O_RDWR, 0o644)
    try:
        for i in range(256):
            os.pwrite(fd, bytes([i]) * PAGE, i * PAGE)
        os.ftruncate(fd, 100 * PAGE + 17)
        os.pwrite(fd, b"tail", 200 * PAGE)
    finally:
        os.close(fd)
    os.rename(os.path.join(d, "t"), os.path.join(d, "u"))
    want = b"".join(bytes([i]) * PAGE for i in range(100)) + bytes([100]) * 17
    want += bytes(200 * PAGE - len(want)) + b"tail"
    assert read_all(os.path.join(m2.path, "d", "u")) == want
    for b in bricks:
        assert read_all(os.path.join(b, "d", "u")) == want, b


def held_tail(fd, model):
    """2 MiB at once (past what a new file keeps written back, wb.c), then
    100 small appends: with trickling off they gather in one extent that
    nothing sends until something needs it."""
    first = os.urandom(2 << 20)
    os.pwrite(fd, first, 0)
    model.extend(first)
    for i in range(100):
        data = os.urandom(1000)
        os.pwrite(fd, data, len(model))
        model.extend(data)


def test_held_extent_goes_out_for_another_client(wc):
    _, (m1, m2) = volume(wc, opts={"performance.write-behind-trickling-writes": "off"})
    os.mkdir(os.path.join(m1.path, "d"))
    model = bytearray()
    fd = os.open(os.path.join(m1.path, "d", "f"), os.O_CREAT | os.O_RDWR, 0o644)
    try:
        held_tail(fd, model)
        time.sleep(0.5)  # nothing sends the last extent by itself
        assert read_all(os.path.join(m2.path, "d", "f")) == bytes(model)
    finally:
        os.close(fd)


def test_moving_the_directory_sends_what_is_behind_below_it(wc):
    _, (m1, m2) = volume(wc, opts={"performance.write-behind-trickling-writes": "off"})
    os.makedirs(os.path.join(m1.path, "d", "sub"))
    model = bytearray()
    fd = os.open(os.path.join(m1.path, "d", "sub", "f"), os.O_CREAT | os.O_RDWR, 0o644)
    try:
        held_tail(fd, model)
        os.rename(os.path.join(m1.path, "d"), os.path.join(m1.path, "e"))
        # the file is still open on m1, nothing fsynced
        assert read_all(os.path.join(m2.path, "e", "sub", "f")) == bytes(model)
    finally:
        os.close(fd)


def fsync_then_kill(mount, fd, model, bricks, rel):
    """fsync fd, write more past the end of model, kill the mount -9; then
    every brick's copy of rel holds what was fsynced, and after it only
    zeros or the later writes."""
    os.fsync(fd)
    synced = bytes(model)
    first = -(-len(model) // PAGE)
    for i in range(200):  # after the fsync: may or may not arrive
        os.pwrite(fd, b"\xff" * PAGE, (first + i) * PAGE)
    mount.proc.send_signal(signal.SIGKILL)
    mount.proc.wait(timeout=10)
    try:
        os.close(fd)
    except OSError:
        pass
    for b in bricks:
        got = read_all(os.path.join(b, rel))
        assert got[:len(synced)] == synced, b
        assert set(got[len(synced):]) <= {0, 0xff}, b


def test_fsync_then_kill_keeps_what_was_fsynced(wc):
    bricks, (m1,) = volume(wc, mounts=1)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    model = bytearray()
    fd = os.open(os.path.join(d, "k"), os.O_CREAT | os.O_RDWR, 0o644)
    scatter(fd, model, 2000, 3, 2048)
    fsync_then_kill(m1, fd, model, bricks, "d/k")


@pytest.mark.parametrize("order", ["sequential", "scattered"])
def test_full_brick_error_is_returned_not_dropped(wc, order):
    # 4 MiB bricks: the file below cannot fit
    _, (m1,) = volume(wc, mounts=1, brick_size="4m")
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    fd = os.open(os.path.join(d, "big"), os.O_CREAT | os.O_WRONLY, 0o644)
    seen = []
    pages = list(range(2048))  # 8 MiB in 4 KiB writes
    if order == "scattered":  # several pages to a WRITE
        random.Random(5).shuffle(pages)
    try:
        for i in pages:
            try:
                os.pwrite(fd, b"x" * PAGE, i * PAGE)
            except OSError as e:
                seen.append(("write", e.errno))
                break
        try:
            os.fsync(fd)
        except OSError as e:
            seen.append(("fsync", e.errno))
    finally:
        try:
            os.close(fd)
        except OSError as e:
            seen.append(("close", e.errno))
    early, failed = behind(m1.path)
    assert early > 0 and failed > 0, (early, failed)
    assert seen, "a full brick went unreported"
    assert all(err == errno.ENOSPC for _, err in seen), seen
    assert "background write" in m1.tail(1 << 20)
    # the mount still works once there is room again
    os.unlink(os.path.join(d, "big"))
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)  # the removal is on the bricks: the space is free
    finally:
        os.close(dfd)
    with open(os.path.join(d, "small"), "wb") as fh:
        fh.write(b"fits")
    assert read_all(os.path.join(d, "small")) == b"fits"


def test_write_behind_off_and_on_again_live(wc):
    bricks, (m1,) = volume(wc, opts={"performance.write-behind": "off"}, mounts=1)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    fd = os.open(os.path.join(d, "s"), os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        # 2 MiB at once: past what a new file keeps written back (wb.c)
        model = bytearray(os.urandom(2 << 20))
        os.pwrite(fd, model, 0)
        for i in range(100):
            data = os.urandom(PAGE)
            os.pwrite(fd, data, i * 5 * PAGE)
            model[i * 5 * PAGE:(i * 5 + 1) * PAGE] = data
        assert behind(m1.path)[0] == 0
        # nothing was held back: the bricks have it before any fsync
        for b in bricks:
            assert read_all(os.path.join(b, "d", "s")) == bytes(model), b
        wc.cli("volume", "set", "wh", "performance.write-behind", "on")
        deadline = 100
        while behind(m1.path)[0] == 0 and deadline > 0:
            os.pwrite(fd, os.urandom(PAGE), 0)
            deadline -= 1
            if deadline % 10 == 0:
                time.sleep(0.1)
        assert behind(m1.path)[0] > 0
    finally:
        os.close(fd)


def test_o_sync_writes_are_never_behind(wc):
    bricks, (m1,) = volume(wc, mounts=1)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    fd = os.open(os.path.join(d, "s"), os.O_CREAT | os.O_WRONLY | os.O_SYNC, 0o644)
    try:
        before = behind(m1.path)[0]
        for i in range(50):
            os.pwrite(fd, b"s" * PAGE, i * PAGE)
        assert behind(m1.path)[0] == before
        for b in bricks:
            assert os.path.getsize(os.path.join(b, "d", "s")) == 50 * PAGE
    finally:
        os.close(fd)


def test_unprivileged_writer_is_written_behind_unless_set_id(wc):
    # A caller without CAP_FSETID asks the bricks to clear set-id bits on
    # each write; a file this mount made without them needs none of that
    # and stays written behind. One that has them waits for the bricks.
    bricks, (m1,) = volume(wc, mounts=1)
    m1.stop()
    m1 = wc.mount("wh", os.path.join(wc.root, "mu"), opts=("allow_other",))
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    os.chown(d, 1000, 1000)
    body = ('fd = os.open(os.environ["P"], os.O_CREAT | os.O_WRONLY, 0o755)\n'
            'os.write(fd, b"z" * (2 << 20))\n'
            'for i in range(200):\n'
            '    os.pwrite(fd, b"y" * 4096, i * 8192)\n'
            'os.close(fd)')
    before = behind(m1.path)[0]
    assert as_user(body, P=os.path.join(d, "plain"))[0] == "OK"
    assert behind(m1.path)[0] - before >= 200
    p = os.path.join(d, "sid")
    assert as_user('os.close(os.open(os.environ["P"], os.O_CREAT | os.O_WRONLY, 0o755))\n'
                   'os.chmod(os.environ["P"], 0o6755)', P=p)[0] == "OK"
    before = behind(m1.path)[0]
    assert as_user(body, P=p)[0] == "OK"
    assert behind(m1.path)[0] == before
    for b in bricks:
        assert stat.S_IMODE(os.stat(os.path.join(b, "d", "sid")).st_mode) == 0o755, b
