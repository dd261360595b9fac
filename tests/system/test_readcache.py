"""The read cache: a small read of a file the mount holds a lease on
fetches the 128 KiB window around it, and later reads inside the window are
answered from memory, the mount's and the kernel's page cache (the window
is stored there too). What they answer must always be what a brick would:
after another client's write (which recalls the lease), after this mount's
own write through another handle or a shared mapping, after a truncate."""

import mmap
import os
import random
import re
import signal
import threading
import time

import pytest

from cairn_cluster import Cluster, pids_with_arg

STATS = "trusted.cairn.io-stats"
WIN = 128 * 1024
PAGE = 4096


def stats(mount, pattern):
    """The numbers pattern captures in the mount's io-stats."""
    text = os.getxattr(mount, STATS).decode()
    m = re.search(pattern, text, re.M)
    assert m, text
    return tuple(int(g) for g in m.groups())


def cache_line(mount):
    return stats(mount, r"^FUSE read cache: (\d+) reads answered, (\d+) bytes fetched")


def held(mount):
    """Bytes of windows the mount holds, and at most."""
    return stats(mount, r"^FUSE read cache: .* (\d+) of (\d+) bytes held")


def read_ahead(mount):
    return stats(mount, r"^FUSE read cache: .*, (\d+) windows read ahead, \d+ reads waited")[0]


def fetched(mount):
    return cache_line(mount)[1]


def stored(mount):
    """Windows stored into the kernel's page cache so far, and those
    invalidated again because the file changed meanwhile."""
    return stats(mount, r"^FUSE page-cache fill: (\d+) windows stored \(\d+ bytes\), (\d+) "
                 r"invalidated")


def brick_reads(mount):
    text = os.getxattr(mount, STATS).decode()
    m = re.search(r"^READ\s+(\d+)", text, re.M)
    return int(m.group(1)) if m else 0


def wait_stored(mount, n):
    """Waits until n windows are in the kernel's page cache (stored
    asynchronously, after the read that fetched them was answered)."""
    end = time.time() + 10
    while stored(mount)[0] < n:
        assert time.time() < end, f"fewer than {n} windows stored: {stored(mount)}"
        time.sleep(0.02)


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
    with Cluster(host="127.0.0.37", prefix="rcache-") as c:
        c.replica3("rc", mounts=0)
        yield Vol(c)


def make(vol, size):
    """Writes size random bytes to file f through the writer, then mounts
    the reader; returns the data and f's path on the reader."""
    data = bytearray(os.urandom(size))
    with open(os.path.join(vol.m1, "f"), "wb") as f:
        f.write(data)
    return data, os.path.join(vol.reader(), "f")


def assert_whole(p, data):
    """A fresh open of p reads data, all of it in one read."""
    fd = os.open(p, os.O_RDONLY)
    try:
        assert os.pread(fd, len(data), 0) == data
    finally:
        os.close(fd)


def windows_read(fd, mount, data, offs):
    """Reads offs through fd and returns how many windows that fetched
    from the bricks (the other reads were answered from a cache)."""
    f0 = fetched(mount)
    for off in offs:
        assert pread(fd, off) == data[off:off + PAGE]
    got = fetched(mount) - f0
    assert got % WIN == 0, got
    return got // WIN


def pread(fd, off, n=PAGE):
    return os.pread(fd, n, off)


def test_random_reads_come_from_windows(vol):
    data, p = make(vol, 4 * WIN)
    fd = os.open(p, os.O_RDONLY)
    try:
        fetched0 = fetched(vol.m2)
        reads0 = brick_reads(vol.m2)
        offs = [WIN + 5 * PAGE, WIN + 9 * PAGE, WIN + 1 * PAGE, 3 * WIN + 30 * PAGE,
                3 * WIN + 2 * PAGE]
        for off in offs:
            assert pread(fd, off) == data[off:off + PAGE]
        fetched1 = fetched(vol.m2)
        assert fetched1 - fetched0 == 2 * WIN  # two windows fetched
        # the other three reads came from them, in the mount or the kernel
        assert brick_reads(vol.m2) - reads0 == 2
        # once stored in the kernel's page cache, the windows' other pages
        # are read without a FUSE request at all
        wait_stored(vol.m2, 2)
        answered = cache_line(vol.m2)[0]
        for off in list(range(WIN, 2 * WIN, PAGE)) + list(range(3 * WIN, 4 * WIN, PAGE)):
            assert pread(fd, off) == data[off:off + PAGE]
        assert cache_line(vol.m2)[0] == answered
        assert brick_reads(vol.m2) - reads0 == 2
    finally:
        os.close(fd)


def test_dense_random_reads_read_ahead(vol):
    """A file read at random all over fetches windows next to the misses in
    the background; a sparse read (windows far apart) does not. Closing the
    file while windows are being read ahead through its handle is safe."""
    n = 64
    data, p = make(vol, n * WIN)
    fd = os.open(p, os.O_RDONLY)
    try:
        for k in range(0, n, 4):  # sparse: no miss lands next to a held window
            off = k * WIN + 7 * PAGE
            assert pread(fd, off) == data[off:off + PAGE]
        assert read_ahead(vol.m2) == 0
    finally:
        os.close(fd)
    rnd = random.Random(5)
    for _ in range(3):
        fd = os.open(p, os.O_RDONLY)
        pages = list(range(n * WIN // PAGE))
        rnd.shuffle(pages)
        try:
            for pg in pages[:len(pages) // 2]:
                assert pread(fd, pg * PAGE) == data[pg * PAGE:(pg + 1) * PAGE], pg
        finally:
            os.close(fd)  # windows may still be on their way through this handle
    assert read_ahead(vol.m2) > 0
    assert_whole(p, data)


def brick_reads_each(vol):
    """READs each brick served since the profile was cleared."""
    r = vol.cluster.cli("volume", "profile", vol.name, "info", "cumulative")
    res, cur = {}, None
    for line in r.stdout.splitlines():
        m = re.match(r"^Brick: (\S+)$", line)
        if m:
            cur = m.group(1)
            res[cur] = 0
        m = re.match(r"^\s+[\d.]+\s+[\d.]+ us\s+[\d.]+ us\s+(\d+)\s+READ$", line)
        if m and cur is not None:
            res[cur] = int(m.group(1))
    assert len(res) == 3, r.stdout
    return res


def test_dense_reader_sweeps_the_file_once(vol):
    """A file read at random all over is read ahead window after window (a
    sweep) until it is covered, and each window is fetched once: windows the
    mount's own cache had no room for are in the kernel's page cache, and
    are not fetched again. The copies other than the one the reader's own
    reads go to serve the sweep between them."""
    n = 96
    vol.cluster.cli("volume", "set", vol.name, "performance.cache-size", "1MB")  # 8 windows
    data, p = make(vol, n * WIN)
    vol.cluster.cli("volume", "profile", vol.name, "start")
    vol.cluster.cli("volume", "profile", vol.name, "info", "clear")
    f0 = fetched(vol.m2)
    pages = list(range(n * WIN // PAGE))
    random.Random(11).shuffle(pages)
    fd = os.open(p, os.O_RDONLY)
    try:
        for pg in pages:
            assert pread(fd, pg * PAGE) == data[pg * PAGE:(pg + 1) * PAGE], pg
    finally:
        os.close(fd)
    got = (fetched(vol.m2) - f0) // WIN
    # a miss on a window already on its way is fetched twice; little else is
    assert n <= got <= n + n // 8, (got, n)
    assert read_ahead(vol.m2) >= n // 2, read_ahead(vol.m2)
    reads = brick_reads_each(vol)
    assert sum(reads.values()) >= got, reads
    assert sum(1 for v in reads.values() if v > n // 8) >= 2, reads
    assert_whole(p, data)


def waited(mount):
    return stats(mount, r"^FUSE read cache: .* (\d+) reads waited for one$")[0]


def test_read_inside_a_window_on_its_way_waits_for_it(vol):
    """A read that misses inside a window being read ahead waits for that
    window instead of asking a brick again. The copies the sweep reads from
    are stopped while its windows are on their way; every page is then read
    (those of the stopped windows wait), and the copies go on a second
    later: each read returns the file's bytes and no window is fetched
    twice."""
    n = 64
    data, p = make(vol, n * WIN)
    vol.cluster.cli("volume", "profile", vol.name, "start")
    vol.cluster.cli("volume", "profile", vol.name, "info", "clear")
    fd = os.open(p, os.O_RDONLY)
    stopped = []
    try:
        for k in range(0, n, 4):  # sparse misses: the handle's read child alone
            off = k * WIN + 7 * PAGE
            assert pread(fd, off) == data[off:off + PAGE]
        assert read_ahead(vol.m2) == 0
        reads = brick_reads_each(vol)
        assert sorted(reads.values()) == [0, 0, n // 4], reads
        for brick, v in reads.items():
            if v == 0:
                pids = pids_with_arg("--brick-path", brick.split(":", 1)[1])
                assert len(pids) == 1, (brick, pids)
                stopped += pids
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        # misses next to held windows start the sweep, on the stopped copies
        k = 1
        while read_ahead(vol.m2) == 0:
            assert k < n, "no window was read ahead"
            off = k * WIN + 5 * PAGE
            assert pread(fd, off) == data[off:off + PAGE]
            k += 4
        f0, w0 = fetched(vol.m2), waited(vol.m2)
        go = threading.Timer(1.0, lambda: [os.kill(q, signal.SIGCONT) for q in stopped])
        go.start()
        t = time.time()
        for pg in range(n * WIN // PAGE):
            assert pread(fd, pg * PAGE) == data[pg * PAGE:(pg + 1) * PAGE], pg
        go.join()
        stopped = []
        assert time.time() - t >= 0.5  # the waiting reads waited
        assert waited(vol.m2) > w0
        assert fetched(vol.m2) - f0 <= n * WIN - (n // 4 + 1) * WIN + WIN, fetched(vol.m2) - f0
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
        os.close(fd)
    assert_whole(p, data)


def test_brick_killed_amid_read_ahead(vol):
    """Bricks die while windows are being read ahead and stored: reads go
    on from the copy left with the right bytes, and closing the file (which
    waits for the reads ahead through its handle) does not hang."""
    n = 64
    data, p = make(vol, n * WIN)
    fd = os.open(p, os.O_RDONLY)
    pages = list(range(n * WIN // PAGE))
    random.Random(7).shuffle(pages)
    try:
        for i, pg in enumerate(pages):
            for k, b in ((1, "b1"), (2, "b2")):  # the bricks with processes of their own
                if i == k * len(pages) // 4:
                    victim = pids_with_arg("--brick-path", os.path.join(vol.cluster.root, b))
                    assert victim
                    os.kill(victim[0], signal.SIGKILL)
            assert pread(fd, pg * PAGE) == data[pg * PAGE:(pg + 1) * PAGE], pg
        assert read_ahead(vol.m2) > 0
    finally:
        t = time.time()
        os.close(fd)
        assert time.time() - t < 10
    assert_whole(p, data)


def test_other_clients_write_is_seen(vol):
    data, p = make(vol, 2 * WIN)
    fd = os.open(p, os.O_RDONLY)
    try:
        assert windows_read(fd, vol.m2, data, [3 * PAGE, 9 * PAGE, 5 * PAGE]) == 1
        wait_stored(vol.m2, 1)
        new = os.urandom(PAGE)
        with open(os.path.join(vol.other_client(), "f"), "r+b") as f:
            f.seek(7 * PAGE)
            f.write(new)
        # same handle: a page the reader never read but its cache held
        assert pread(fd, 7 * PAGE) == new
        assert pread(fd, 12 * PAGE) == data[12 * PAGE:13 * PAGE]
    finally:
        os.close(fd)


def test_other_clients_write_lands_amid_stores(vol):
    """Another client's write while this mount is fetching windows and
    storing them in the kernel's page cache: once the write returns, this
    mount reads the new bytes, never a window stored from before it. Each
    round uses a new file, so the reader holds a lease (and stores) when
    the write comes."""
    big = 16 * WIN  # the largest window: stores take longest
    vol.cluster.cli("volume", "set", vol.name, "performance.read-ahead-page-count", "16")
    reader = vol.reader()
    end = time.time() + 10
    while "window 2048 KiB" not in os.getxattr(reader, STATS).decode():
        assert time.time() < end, "the reader did not take the larger window"
        time.sleep(0.1)
    other = vol.other_client()
    rnd = random.Random(3)
    for r in range(12):
        data = bytearray(os.urandom(4 * big))
        with open(os.path.join(other, f"g{r}"), "wb") as f:
            f.write(data)
        fd = os.open(os.path.join(reader, f"g{r}"), os.O_RDONLY)
        stop = threading.Event()
        errors = []

        def churn(seed):
            g = random.Random(seed)
            try:
                while not stop.is_set():
                    os.pread(fd, PAGE, g.randrange(len(data) // PAGE) * PAGE)
            except OSError as e:
                errors.append(e)

        threads = [threading.Thread(target=churn, args=(r * 2 + k,)) for k in (0, 1)]
        for t in threads:
            t.start()
        try:
            if r % 2:
                # a write amid stores: on a loaded machine the write can
                # come before any window is stored, so every other round
                # lets one store land first (bounded)
                before = stored(reader)[0]
                end = time.time() + 5
                while stored(reader)[0] == before and time.time() < end:
                    time.sleep(0.005)
            else:
                time.sleep(rnd.uniform(0, 0.01))
            off = rnd.randrange(len(data) // PAGE) * PAGE
            new = os.urandom(PAGE)
            with open(os.path.join(other, f"g{r}"), "r+b", buffering=0) as w:
                w.seek(off)
                w.write(new)
            data[off:off + PAGE] = new
            assert pread(fd, off) == new, f"round {r}: the write at {off} not seen"
        finally:
            stop.set()
            for t in threads:
                t.join()
        try:
            assert not errors
            for o in range(0, len(data), PAGE):
                assert pread(fd, o) == data[o:o + PAGE], f"round {r}: page at {o}"
        finally:
            os.close(fd)
    # stores did run (how many rounds had one varies; the odd rounds
    # waited for one)
    assert stored(reader)[0] > 0, os.getxattr(reader, STATS).decode()


def lookups(mount):
    text = os.getxattr(mount, STATS).decode()
    m = re.search(r"^LOOKUP\s+(\d+)", text, re.M)
    return int(m.group(1)) if m else 0


def test_file_keeps_its_lease_while_its_directory_cools_down(vol):
    """Another client's create in a directory whose lease this mount holds
    makes the bricks lease no names in it for a while (the directory cools
    down), but a file first opened there meanwhile still gets its own
    lease: its reads come from windows. Each attempt checks that the open
    did fall in the cool-down (its name was not cached); a slow machine may
    need a few."""
    tries = 8
    files = [bytearray(os.urandom(4 * WIN)) for _ in range(tries)]
    for k, data in enumerate(files):
        with open(os.path.join(vol.m1, f"f{k}"), "wb") as f:
            f.write(data)
    open(os.path.join(vol.m1, "h"), "wb").close()
    reader = vol.reader()
    other = vol.other_client()
    for k, data in enumerate(files):
        os.stat(os.path.join(reader, "h"))  # this mount leases the directory
        open(os.path.join(other, f"n{k}"), "wb").close()  # recalls it: cool-down
        p = os.path.join(reader, f"f{k}")
        fd = os.open(p, os.O_RDONLY)
        try:
            before = lookups(reader)
            os.stat(p)
            if lookups(reader) == before:
                continue  # the name was leased: the cool-down had passed
            offs = [WIN + 3 * PAGE, WIN + 7 * PAGE, WIN + 20 * PAGE, 2 * WIN + 5 * PAGE]
            reads0 = brick_reads(reader)
            got = windows_read(fd, reader, data, offs)
            assert got >= 1, os.getxattr(reader, STATS).decode()
            assert brick_reads(reader) - reads0 <= got, os.getxattr(reader, STATS).decode()
            return
        finally:
            os.close(fd)
    pytest.fail(f"no open fell in the directory's cool-down in {tries} attempts")


def test_other_clients_write_through_another_name_is_seen(vol):
    """A file with two names: another client's write through one recalls
    the leases on that name only, so this mount caches nothing of the file
    it reads through the other (its reads go to the bricks)."""
    data = bytearray(os.urandom(4 * WIN))
    with open(os.path.join(vol.m1, "a"), "wb") as f:
        f.write(data)
    os.link(os.path.join(vol.m1, "a"), os.path.join(vol.m1, "b"))
    reader = vol.reader()
    other = vol.other_client()
    fd = os.open(os.path.join(reader, "b"), os.O_RDONLY)
    try:
        assert windows_read(fd, reader, data, [WIN + PAGE, WIN + 3 * PAGE, WIN + 9 * PAGE]) == 0
        new = os.urandom(PAGE)
        with open(os.path.join(other, "a"), "r+b", buffering=0) as w:
            w.seek(WIN + 5 * PAGE)
            w.write(new)
        assert pread(fd, WIN + 5 * PAGE) == new
    finally:
        os.close(fd)


def test_own_write_through_another_handle_is_seen(vol):
    data, p = make(vol, 2 * WIN)
    r = os.open(p, os.O_RDONLY)
    w = None
    try:
        assert windows_read(r, vol.m2, data, [2 * PAGE, 3 * PAGE]) == 1
        wait_stored(vol.m2, 1)
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


def test_shared_mapping_write_is_kept(vol):
    """A page dirtied through a shared mapping is newer than the brick
    until writeback: a window read meanwhile must not be stored over it."""
    data, p = make(vol, 2 * WIN)
    r = os.open(p, os.O_RDONLY)
    w = os.open(p, os.O_RDWR)
    try:
        n0 = stored(vol.m2)[0]
        new = os.urandom(PAGE)
        with mmap.mmap(w, 2 * WIN) as m:
            m[5 * PAGE:6 * PAGE] = new  # faults the page in: a window is read
            for off in (2 * PAGE, 9 * PAGE, WIN + 3 * PAGE):
                assert pread(r, off) == data[off:off + PAGE]
            assert pread(r, 5 * PAGE) == new
            time.sleep(0.2)
            assert pread(r, 5 * PAGE) == new
            assert m[5 * PAGE:6 * PAGE] == new
        # a file open for writing on this mount is never stored into
        assert stored(vol.m2)[0] == n0
    finally:
        os.close(w)
        os.close(r)
    data[5 * PAGE:6 * PAGE] = new
    with open(os.path.join(vol.other_client(), "f"), "rb") as f:
        assert f.read() == data


def test_truncate_then_read(vol):
    data, p = make(vol, 2 * WIN)
    r = os.open(p, os.O_RDONLY)
    try:
        assert windows_read(r, vol.m2, data, [5 * PAGE, 20 * PAGE]) == 1
        wait_stored(vol.m2, 1)
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


def test_a_change_frees_the_files_windows(vol):
    """The cache holds only what it may answer from: a write drops the
    file's windows at once, not when they reach the end of the LRU. The
    default size is GlusterFS's, 32 MB."""
    data, p = make(vol, 4 * WIN)
    assert held(vol.m2) == (0, 32 << 20)
    fd = os.open(p, os.O_RDWR)
    try:
        assert windows_read(fd, vol.m2, data, [PAGE, 2 * WIN + PAGE]) == 2
        assert held(vol.m2)[0] == 2 * WIN
        os.pwrite(fd, b"x" * 10, 3 * WIN)
        data[3 * WIN:3 * WIN + 10] = b"x" * 10
        assert held(vol.m2)[0] == 0
        assert pread(fd, 2 * WIN + PAGE) == data[2 * WIN + PAGE:2 * WIN + 2 * PAGE]
    finally:
        os.close(fd)
    assert_whole(p, data)
