"""Exclusive leases on files (docs/consistency.md, "Data: write-behind").

A mount that opens a file for writing while no other client has it open
or holds a lease on it gets the file exclusively from the bricks, and its
writes are written behind even though the file is not in a directory the
mount made: a file in the volume's root, one made by another client, an
existing image. These tests check that another client still sees every
write at its next access (a stat, an open, a listing of the directory),
that a file another client has open is written through, that fsync means
on the bricks when the writer is killed right after, and that the lease is
shared again once the writer closes the file.

Addresses: 127.0.0.190."""

import os
import time

import pytest

from cairn_cluster import Cluster
from test_writebehind import PAGE, behind, fsync_then_kill, read_all, scatter


@pytest.fixture
def fc():
    c = Cluster(host="127.0.0.190", prefix="fxl-")
    try:
        c.start()
        yield c
    finally:
        c.close()


def volume(c, mounts=2, opts=None):
    return c.replica3("fx", opts, mounts)


def made_by(mount, name, size):
    """A file of size bytes made (and closed) through mount, in the root."""
    path = os.path.join(mount.path, name)
    with open(path, "wb") as fh:
        fh.write(bytes(size))
        os.fsync(fh.fileno())
    # the kernel releases the handle in the background; while the bricks
    # see it open, no other client is given the file exclusively
    time.sleep(0.3)
    return path


def test_file_in_the_root_is_written_behind_and_seen_by_another_client(fc):
    bricks, (m1, m2) = volume(fc)
    made_by(m2, "img", 256 * PAGE)  # not made by m1, in a directory it shares
    model = bytearray(256 * PAGE)
    fd = os.open(os.path.join(m1.path, "img"), os.O_RDWR)
    try:
        before = behind(m1.path)[0]
        scatter(fd, model, 1500, 11, 512)  # it grows, too
        assert behind(m1.path)[0] - before >= 1000, "writes were not written behind"
        # no fsync, no close: the other client's stat and read bring it
        other = os.path.join(m2.path, "img")
        assert os.stat(other).st_size == len(model)
        assert read_all(other) == bytes(model)
        # the other client holds a lease on it now: written through
        before = behind(m1.path)[0]
        for i in range(20):
            data = os.urandom(PAGE)
            os.pwrite(fd, data, i * 5 * PAGE)
            model[i * 5 * PAGE:(i * 5 + 1) * PAGE] = data
            assert read_all(other) == bytes(model), i
        assert behind(m1.path)[0] == before
    finally:
        os.close(fd)
    for b in bricks:
        assert read_all(os.path.join(b, "img")) == bytes(model), b


def test_listing_the_directory_shows_what_was_written_behind(fc):
    # each file's last write stays pending (it waits to be aggregated)
    _, (m1, m2) = volume(fc, opts={"performance.write-behind-trickling-writes": "off"})
    d2 = os.path.join(m2.path, "shared")
    os.mkdir(d2)
    for i in range(5):
        made_by(m2, f"shared/f{i}", PAGE)
    # both clients know the directory; past the cool-down of that conflict
    # the listing below is granted leases on its entries
    assert len(os.listdir(os.path.join(m1.path, "shared"))) == 5
    time.sleep(1.5)
    fds = [os.open(os.path.join(m1.path, "shared", f"f{i}"), os.O_RDWR) for i in range(5)]
    try:
        before = behind(m1.path)[0]
        for i, fd in enumerate(fds):
            os.pwrite(fd, b"x" * PAGE, (i + 1) * 10 * PAGE)  # each grows
        assert behind(m1.path)[0] - before == 5, "writes were not written behind"
        # a listing with attributes (readdirplus) is the other client's
        # first access to the files
        sizes = {e.name: e.stat().st_size for e in os.scandir(d2)}
        assert sizes == {f"f{i}": (i + 1) * 10 * PAGE + PAGE for i in range(5)}
    finally:
        for fd in fds:
            os.close(fd)


def test_file_open_on_another_client_is_written_through(fc):
    _, (m1, m2) = volume(fc)
    made_by(m1, "busy", PAGE)
    other = os.open(os.path.join(m2.path, "busy"), os.O_RDONLY)
    fd = os.open(os.path.join(m1.path, "busy"), os.O_RDWR)
    try:
        before = behind(m1.path)[0]
        for i in range(50):
            data = os.urandom(PAGE)
            os.pwrite(fd, data, (i % 7) * PAGE)
            # through the handle the other client already had
            assert os.pread(other, PAGE, (i % 7) * PAGE) == data, i
        assert behind(m1.path)[0] == before
    finally:
        os.close(fd)
        os.close(other)


def test_lease_is_shared_again_after_close(fc):
    _, (m1, m2) = volume(fc)
    made_by(m2, "again", PAGE)
    path = os.path.join(m1.path, "again")
    before = behind(m1.path)[0]
    with open(path, "r+b", buffering=0) as fh:
        fh.write(b"a" * PAGE)
    assert behind(m1.path)[0] - before == 1
    assert read_all(os.path.join(m2.path, "again")) == b"a" * PAGE
    # the other client now has it open: m1's next writes go through, and
    # m1 sees the other client's writes
    other = os.open(os.path.join(m2.path, "again"), os.O_RDWR)
    try:
        before = behind(m1.path)[0]
        with open(path, "r+b", buffering=0) as fh:
            fh.write(b"b" * PAGE)
            assert os.pread(other, PAGE, 0) == b"b" * PAGE
            os.pwrite(other, b"c" * PAGE, 0)
            fh.seek(0)
            assert fh.read() == b"c" * PAGE
        assert behind(m1.path)[0] == before
    finally:
        os.close(other)


def stat_read_while_hung(fc, holder, path):
    """Seconds another client's stat and read of path take while the
    holder's mount is stopped (it cannot answer a recall), and the data."""
    fc.stop_signal(holder.proc.pid)
    try:
        t0 = time.monotonic()
        os.stat(path)
        data = read_all(path)
        return time.monotonic() - t0, data
    finally:
        fc.cont(holder.proc.pid)


@pytest.mark.parametrize("closed", [True, False])
def test_lease_is_shared_again_when_the_last_handle_closes(fc, closed):
    # Held exclusively, the file's lease must be recalled before another
    # client reads it: with its holder hung, that read waits for the recall
    # timeout. Shared again, it does not.
    _, (m1, m2) = volume(fc, opts={"features.lease-recall-timeout": "2"})
    made_by(m2, "s", PAGE)
    path = os.path.join(m1.path, "s")
    w = os.open(path, os.O_RDWR)
    os.pwrite(w, b"a" * PAGE, 0)
    os.fsync(w)
    assert behind(m1.path)[0] >= 1
    r = os.open(path, os.O_RDONLY)  # a second handle, not asking for it
    os.close(w)
    if closed:
        os.close(r)
        time.sleep(0.5)  # the kernel sends the release in the background
    try:
        took, data = stat_read_while_hung(fc, m1, os.path.join(m2.path, "s"))
    finally:
        if not closed:
            os.close(r)
    assert data == b"a" * PAGE
    if closed:
        assert took < 1.5, f"a shared lease was recalled ({took:.1f}s)"
    else:
        assert took >= 1.5, f"an exclusive lease was not recalled ({took:.1f}s)"


def test_fsync_then_kill_keeps_what_was_fsynced(fc):
    bricks, (m1,) = volume(fc, mounts=1)
    made_by(m1, "k", 0)
    model = bytearray()
    fd = os.open(os.path.join(m1.path, "k"), os.O_RDWR)
    before = behind(m1.path)[0]
    scatter(fd, model, 1500, 13, 1024)
    assert behind(m1.path)[0] - before >= 1000
    fsync_then_kill(m1, fd, model, bricks, "k")
