"""The read cache: a small read of a file the mount holds a lease on
fetches the 128 KiB window around it, and later reads inside the window are
answered from memory. What it answers must always be what a brick would:
after another client's write (which recalls the lease), after this mount's
own write through another handle, after a truncate."""

import os
import re
import time

import pytest

from cairn_cluster import Cluster

STATS = "trusted.cairn.io-stats"
WIN = 128 * 1024
PAGE = 4096


def cache_line(mount):
    text = os.getxattr(mount, STATS).decode()
    m = re.search(r"^FUSE read cache: (\d+) reads answered, (\d+) bytes fetched", text, re.M)
    assert m, text
    return int(m.group(1)), int(m.group(2))


class Vol:
    """A replica 3 volume of its own. Files are written through a writer
    mount that is then unmounted, and read through a reader mounted after
    it (so the reader's leases are not contended, as when a file written
    yesterday is read today); other_client() mounts another writer."""

    def __init__(self, c):
        self.cluster, self.name = c, "rc"
        self.writer = c.mount("rc", os.path.join(c.root, "mw"))
        self.m1 = self.writer.path
        self.m2 = os.path.join(c.root, "mr")
        self.n = 0

    def reader(self):
        self.writer.stop()
        return self.cluster.mount("rc", self.m2).path

    def other_client(self):
        self.n += 1
        return self.cluster.mount("rc", os.path.join(self.cluster.root, f"mo{self.n}")).path


@pytest.fixture
def vol():
    c = Cluster(host="127.0.0.37", prefix="rcache-")
    try:
        c.start()
        bricks = [os.path.join(c.root, f"b{i}") for i in range(3)]
        for b in bricks:
            os.makedirs(b)
        c.cli("volume", "create", "rc", "replica", "3", *[f"{c.host}:{b}" for b in bricks],
              "force")
        c.cli("volume", "start", "rc")
        yield Vol(c)
    finally:
        c.close()


def make(vol, size):
    """Writes size random bytes to file f through the writer, then mounts
    the reader; returns the data and f's path on the reader."""
    data = bytearray(os.urandom(size))
    with open(os.path.join(vol.m1, "f"), "wb") as f:
        f.write(data)
    return data, os.path.join(vol.reader(), "f")


def cached_reads(fd, mount, data, offs):
    """Reads offs through fd and returns how many the cache answered."""
    h0, _ = cache_line(mount)
    for off in offs:
        assert pread(fd, off) == data[off:off + PAGE]
    return cache_line(mount)[0] - h0


def pread(fd, off, n=PAGE):
    return os.pread(fd, n, off)


def test_random_reads_come_from_windows(vol):
    data, p = make(vol, 4 * WIN)
    fd = os.open(p, os.O_RDONLY)
    try:
        hits0, fetched0 = cache_line(vol.m2)
        offs = [WIN + 5 * PAGE, WIN + 9 * PAGE, WIN + 1 * PAGE, 3 * WIN + 30 * PAGE,
                3 * WIN + 2 * PAGE]
        for off in offs:
            assert pread(fd, off) == data[off:off + PAGE]
        hits, fetched = cache_line(vol.m2)
        assert fetched - fetched0 == 2 * WIN  # two windows fetched
        assert hits - hits0 == 3  # the other three reads came from them
    finally:
        os.close(fd)


def test_other_clients_write_is_seen(vol):
    data, p = make(vol, 2 * WIN)
    fd = os.open(p, os.O_RDONLY)
    try:
        assert cached_reads(fd, vol.m2, data, [3 * PAGE, 9 * PAGE, 5 * PAGE]) == 2
        new = os.urandom(PAGE)
        with open(os.path.join(vol.other_client(), "f"), "r+b") as f:
            f.seek(7 * PAGE)
            f.write(new)
        # same handle: a page the reader never read but its cache held
        assert pread(fd, 7 * PAGE) == new
        assert pread(fd, 12 * PAGE) == data[12 * PAGE:13 * PAGE]
    finally:
        os.close(fd)


def test_own_write_through_another_handle_is_seen(vol):
    data, p = make(vol, 2 * WIN)
    r = os.open(p, os.O_RDONLY)
    w = None
    try:
        assert cached_reads(r, vol.m2, data, [2 * PAGE, 3 * PAGE]) == 1
        w = os.open(p, os.O_WRONLY)
        new = os.urandom(PAGE)
        os.pwrite(w, new, 11 * PAGE)
        assert pread(r, 11 * PAGE) == new
        for off in range(0, 2 * WIN, 16 * PAGE):  # the rest is intact
            if off != 11 * PAGE:
                assert pread(r, off) == data[off:off + PAGE]
    finally:
        os.close(r)
        if w is not None:
            os.close(w)


def test_truncate_then_read(vol):
    data, p = make(vol, 2 * WIN)
    r = os.open(p, os.O_RDONLY)
    try:
        assert cached_reads(r, vol.m2, data, [5 * PAGE, 20 * PAGE]) == 1
        os.truncate(p, 6 * PAGE)
        assert pread(r, 5 * PAGE) == data[5 * PAGE:6 * PAGE]
        assert pread(r, 20 * PAGE) == b""
        os.truncate(p, 30 * PAGE)  # the hole reads as zeros, not old data
        assert pread(r, 20 * PAGE) == bytes(PAGE)
    finally:
        os.close(r)


def test_off_by_volume_option(vol):
    data, p = make(vol, WIN)
    vol.cluster.cli("volume", "set", vol.name, "performance.read-ahead", "off")
    end = time.time() + 10
    while "window 0 KiB" not in os.getxattr(vol.m2, STATS).decode():
        assert time.time() < end, "the mount did not apply performance.read-ahead off"
        time.sleep(0.1)
    fd = os.open(p, os.O_RDONLY)
    try:
        h0, f0 = cache_line(vol.m2)
        for off in (PAGE, 3 * PAGE, 2 * PAGE):
            assert pread(fd, off) == data[off:off + PAGE]
        assert cache_line(vol.m2) == (h0, f0)
    finally:
        os.close(fd)
