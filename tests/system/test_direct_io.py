"""Handles that skip the kernel's page cache (-o direct-io-mode).

By default a handle opened for writing is a direct one (FOPEN_DIRECT_IO):
what it writes goes to the mount without a copy in the kernel's page cache.
These tests look at the page cache itself, through mincore() on a shared
mapping made by a read-only (cached) handle, and check that every reader
still sees every write: through the same handle, another handle of the
same mount (read or mapping), a shared mapping of the writing handle and
another mount."""
import ctypes
import os
import random
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cairn_cluster import Cluster, ClusterError, as_user, fsync_dir  # noqa: E402

SIZE = 16384
STATS = "trusted.cairn.io-stats"
PAGES = SIZE // 4096

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
PROT_READ, PROT_WRITE, MAP_SHARED = 1, 2, 1


class Mapping:
    """A shared mapping of SIZE bytes of fd, read through ctypes, with
    mincore() to tell which of its pages the page cache holds."""

    def __init__(self, fd, prot=PROT_READ):
        self.addr = _libc.mmap(None, SIZE, prot, MAP_SHARED, fd, 0)
        if self.addr in (None, ctypes.c_void_p(-1).value):
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))

    def read(self):
        return ctypes.string_at(self.addr, SIZE)

    def write(self, off, data):
        ctypes.memmove(self.addr + off, data, len(data))

    def cached(self):
        vec = (ctypes.c_ubyte * PAGES)()
        assert _libc.mincore(ctypes.c_void_p(self.addr), SIZE, vec) == 0
        return sum(v & 1 for v in vec)

    def close(self):
        _libc.munmap(ctypes.c_void_p(self.addr), SIZE)


@pytest.fixture
def dc():
    c = Cluster(host="127.0.0.52", prefix="dio-")
    try:
        c.start()
        yield c
    finally:
        c.close()


def two_mounts(c, opts=()):
    bricks, _ = c.replica3("dv", None, 0)
    m1, m2 = (c.mount("dv", os.path.join(c.root, f"m{i}"), opts=["allow_other", *opts])
              for i in range(2))
    return bricks, m1, m2


def brick_bytes(bricks, name):
    out = []
    for b in bricks:
        with open(os.path.join(b, name), "rb") as fh:
            out.append(fh.read())
    return out


@pytest.mark.parametrize("how", ["rdwr-new", "rdwr-existing", "wronly-existing"])
def test_a_handle_opened_for_writing_leaves_no_pages_and_every_reader_sees_it(dc, how):
    """Writes through a handle opened for writing (new or existing file,
    read-write or write-only) leave none of their pages in the kernel's page
    cache: a read-only handle's mapping had them cached, and after the
    write they are gone, and its next look shows the new bytes. The
    writing handle reads back what it wrote, a shared mapping of a
    read-write handle writes, and another mount sees it all."""
    bricks, m1, m2 = two_mounts(dc)
    p = os.path.join(m1.path, "f")
    old = b"o" * SIZE
    if how != "rdwr-new":
        with open(p, "wb") as fh:
            fh.write(old)
    flags = os.O_WRONLY if how == "wronly-existing" else os.O_RDWR
    w = os.open(p, flags | os.O_CREAT, 0o644)
    if how == "rdwr-new":
        os.pwrite(w, old, 0)
    r = os.open(p, os.O_RDONLY)
    view = Mapping(r)
    assert view.read() == old
    assert view.cached() == PAGES
    new = b"n" * SIZE
    os.pwrite(w, new, 0)
    assert view.cached() == 0, "a write through the handle left pages in the page cache"
    assert view.read() == new
    assert os.pread(r, SIZE, 0) == new
    if flags == os.O_RDWR:
        assert os.pread(w, SIZE, 0) == new
        wmap = Mapping(w, PROT_READ | PROT_WRITE)
        wmap.write(0, b"mmap")
        wmap.close()
        assert os.pread(w, 4, 0) == b"mmap"
        new = b"mmap" + new[4:]
    view.close()
    os.close(r)
    os.fsync(w)
    os.close(w)
    with open(os.path.join(m2.path, "f"), "rb") as fh:
        assert fh.read() == new
    assert brick_bytes(bricks, "f") == [new] * 3


def test_a_new_files_read_write_handle_reads_back_from_the_mount(dc):
    """mkstemp's pattern: a file created read-write in a directory this
    mount made, written, read back through the same handle. The file is
    still written back, and its reads are answered from what the mount
    holds: nothing reaches a brick before the close (no CREATE, WRITE or
    READ), and afterwards every brick and another mount hold it."""
    bricks, m1, m2 = two_mounts(dc)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    os.setxattr(m1.path, STATS, b"clear")
    data = os.urandom(16 * 4096)
    fd = os.open(os.path.join(d, "t"), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    for k in range(16):
        os.write(fd, data[k * 4096:(k + 1) * 4096])
    os.lseek(fd, 0, os.SEEK_SET)
    assert os.read(fd, 100000) == data
    assert os.pread(fd, 10, len(data) - 6) == data[-6:]
    assert os.pread(fd, 10, len(data) + 100) == b""
    stats = os.getxattr(m1.path, STATS).decode()
    assert not re.search(r"^(CREATE|WRITE|READ) ", stats, re.M), stats
    os.close(fd)
    fsync_dir(d)
    with open(os.path.join(m2.path, "d", "t"), "rb") as fh:
        assert fh.read() == data
    assert brick_bytes(bricks, "d/t") == [data] * 3


def test_a_read_write_handle_still_clears_set_id_bits(dc):
    """A write through a direct read-write handle by a user without
    CAP_FSETID clears the file's set-id bits, as any write does."""
    _, m1, _ = two_mounts(dc)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    os.chmod(m1.path, 0o755)
    os.chmod(d, 0o1777)
    code = """
p = os.environ['P']
fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o6775)
os.fchmod(fd, 0o6775)
os.close(fd)
fd = os.open(p, os.O_RDWR)
os.write(fd, b'x' * 10)
os.close(fd)
print(oct(os.stat(p).st_mode & 0o7777))
"""
    last, out = as_user(code, P=os.path.join(d, "s"))
    assert last == "OK" and out.splitlines()[0] == "0o775", out


@pytest.mark.parametrize("opts,written_cached,read_cached", [
    (["direct-io-mode=disable"], PAGES, PAGES),
    (["direct-io-mode=enable"], 0, 0),
    (["io-uring=off"], PAGES, PAGES),
])
def test_direct_io_mode_option(dc, opts, written_cached, read_cached):
    """-o direct-io-mode=disable puts every handle but an O_DIRECT one back
    on the page cache, so writes stay cached; =enable makes every handle a
    direct one, so not even a read leaves pages behind. With io-uring=off the
    client does not ask the kernel to let direct handles be mapped shared,
    so a read-write handle keeps the page cache (and a shared mapping of it
    works, below). All keep a mapping's view of writes current."""
    _, m1, _ = two_mounts(dc, opts=opts)
    p = os.path.join(m1.path, "f")
    with open(p, "wb") as fh:
        fh.write(b"o" * SIZE)
    view_fd = os.open(p, os.O_RDONLY)
    view = Mapping(view_fd)
    assert view.read() == b"o" * SIZE
    w = os.open(p, os.O_RDWR)
    os.pwrite(w, b"n" * SIZE, 0)
    assert view.cached() == written_cached
    assert view.read() == b"n" * SIZE
    wmap = Mapping(w, PROT_READ | PROT_WRITE)
    wmap.write(SIZE - 4, b"mmap")
    wmap.close()
    assert os.pread(w, 4, SIZE - 4) == b"mmap"
    os.pwrite(w, b"n" * 4, SIZE - 4)
    os.close(w)
    # A new handle drops the file's cached pages (no keep_cache); a read
    # through it caches them again unless the handle is direct.
    r = os.open(p, os.O_RDONLY)
    assert os.pread(r, SIZE, 0) == b"n" * SIZE
    assert view.cached() == read_cached
    assert view.read() == b"n" * SIZE
    os.close(r)
    view.close()
    os.close(view_fd)


def test_a_bad_direct_io_mode_is_refused(dc):
    """An unknown mode is a usage error that names the option."""
    dc.replica3("dv", None, 0)
    with pytest.raises(ClusterError) as e:
        dc.mount("dv", os.path.join(dc.root, "bad"), opts=["direct-io-mode=sometimes"])
    assert "direct-io-mode=sometimes" in str(e.value)


def test_random_mix_of_direct_writes_cached_reads_and_mappings_agrees(dc):
    """A seeded random mix on one file, checked against a model after every
    step: writes, reads and truncates through a direct read-write handle,
    writes through its shared mapping, reads through a read-only (cached)
    handle and its mapping. Then another mount and every brick hold the
    model's bytes."""
    seed = int.from_bytes(os.urandom(4), "little")
    rnd = random.Random(seed)
    bricks, m1, m2 = two_mounts(dc)
    p = os.path.join(m1.path, "mix")
    limit, mapped = 256 * 1024, SIZE
    model = bytearray(rnd.randbytes(64 * 1024))
    with open(p, "wb") as fh:
        fh.write(model)
    w = os.open(p, os.O_RDWR)
    r = os.open(p, os.O_RDONLY)
    wmap = Mapping(w, PROT_READ | PROT_WRITE)
    view = Mapping(r)
    try:
        for step in range(2000):
            what = rnd.choice(["write", "write", "read_w", "read_r", "map_write",
                               "view", "truncate", "stat"])
            ctx = f"seed {seed}, step {step}: {what}"
            if what == "write":
                off = rnd.randrange(0, limit)
                data = rnd.randbytes(rnd.randrange(1, 20000))
                assert os.pwrite(w, data, off) == len(data), ctx
                if off > len(model):
                    model.extend(bytes(off - len(model)))
                model[off:off + len(data)] = data
            elif what in ("read_w", "read_r"):
                off = rnd.randrange(0, limit)
                n = rnd.randrange(1, 40000)
                got = os.pread(w if what == "read_w" else r, n, off)
                assert got == bytes(model[off:off + n]), ctx
            elif what == "map_write":
                off = rnd.randrange(0, mapped - 1)
                data = rnd.randbytes(rnd.randrange(1, mapped - off))
                wmap.write(off, data)
                model[off:off + len(data)] = data
            elif what == "view":
                assert view.read() == bytes(model[:mapped]), ctx
            elif what == "truncate":
                size = rnd.randrange(mapped, limit)  # the mappings stay inside
                os.ftruncate(w, size)
                if size < len(model):
                    del model[size:]
                else:
                    model.extend(bytes(size - len(model)))
            else:
                assert os.fstat(r).st_size == len(model), ctx
    finally:
        wmap.close()
        view.close()
        os.close(r)
    os.fsync(w)
    os.close(w)
    want = bytes(model)
    with open(os.path.join(m2.path, "mix"), "rb") as fh:
        assert fh.read() == want, f"seed {seed}: another mount"
    assert brick_bytes(bricks, "mix") == [want] * 3, f"seed {seed}: the bricks"
