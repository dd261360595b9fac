"""POSIX semantics of files, directories, links and special files on a real
cairn-fuse mount. Each test works in its own directory (fixture tdir); `a`
is the path through mount m1, `b` the same directory through mount m2."""

import ctypes
import errno
import mmap
import os
import stat
import threading
import time

import pytest

from opcheck import check_file

libc = ctypes.CDLL("libc.so.6", use_errno=True)
libc.fallocate64.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
GiB = 1 << 30


def write_file(path, data, mode=0o644):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def pread_all(fd, n, off):
    out = b""
    while len(out) < n:
        chunk = os.pread(fd, n - len(out), off + len(out))
        if not chunk:
            break
        out += chunk
    return out


# ---- regular files and directories ----

def test_regular_file_create_write_read(tdir):
    p = os.path.join(tdir.a, "f")
    data = os.urandom(200_000)
    write_file(p, data, 0o640)
    st = os.stat(p)
    assert stat.S_ISREG(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o640 & ~current_umask()
    assert st.st_size == len(data)
    assert read_file(p) == data


def current_umask():
    m = os.umask(0)
    os.umask(m)
    return m


def test_regular_file_visible_on_other_mount(tdir):
    data = os.urandom(70_000)
    write_file(os.path.join(tdir.a, "f"), data)
    assert read_file(os.path.join(tdir.b, "f")) == data
    assert os.stat(os.path.join(tdir.b, "f")).st_size == len(data)


def test_overwrite_middle_of_file(tdir):
    p = os.path.join(tdir.a, "f")
    write_file(p, b"a" * 10000)
    fd = os.open(p, os.O_WRONLY)
    os.pwrite(fd, b"XYZ", 5000)
    os.close(fd)
    assert read_file(p) == b"a" * 5000 + b"XYZ" + b"a" * 4997


def test_directory_mkdir_rmdir(tdir):
    d = os.path.join(tdir.a, "d")
    os.mkdir(d, 0o750)
    st = os.stat(d)
    assert stat.S_ISDIR(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o750 & ~current_umask()
    os.mkdir(os.path.join(d, "sub"))
    assert os.listdir(d) == ["sub"]
    with pytest.raises(OSError) as e:
        os.rmdir(d)
    assert e.value.errno == errno.ENOTEMPTY
    os.rmdir(os.path.join(d, "sub"))
    os.rmdir(d)
    assert not os.path.exists(d)
    assert not os.path.exists(os.path.join(tdir.b, "d"))


def test_directory_nlink_counts_subdirs(tdir):
    d = os.path.join(tdir.a, "d")
    os.mkdir(d)
    assert os.stat(d).st_nlink == 2
    os.mkdir(os.path.join(d, "x"))
    os.mkdir(os.path.join(d, "y"))
    assert os.stat(d).st_nlink == 4


def test_mkdir_existing_eexist(tdir):
    d = os.path.join(tdir.a, "d")
    os.mkdir(d)
    with pytest.raises(FileExistsError):
        os.mkdir(d)


def test_unlink_missing_enoent(tdir):
    with pytest.raises(FileNotFoundError):
        os.unlink(os.path.join(tdir.a, "nope"))


def test_rmdir_on_file_enotdir_and_unlink_on_dir_eisdir(tdir):
    f = os.path.join(tdir.a, "f")
    write_file(f, b"x")
    with pytest.raises(NotADirectoryError):
        os.rmdir(f)
    d = os.path.join(tdir.a, "d")
    os.mkdir(d)
    with pytest.raises(OSError) as e:
        os.unlink(d)
    assert e.value.errno in (errno.EISDIR, errno.EPERM)


def test_long_name_255_ok_256_enametoolong(tdir):
    ok = os.path.join(tdir.a, "n" * 255)
    write_file(ok, b"x")
    assert os.path.exists(os.path.join(tdir.b, "n" * 255))
    with pytest.raises(OSError) as e:
        write_file(os.path.join(tdir.a, "n" * 256), b"x")
    assert e.value.errno == errno.ENAMETOOLONG


# ---- symlinks ----

def test_symlink_readlink_lstat_stat(tdir):
    target = os.path.join(tdir.a, "target")
    write_file(target, b"hello")
    link = os.path.join(tdir.a, "link")
    os.symlink("target", link)
    assert os.readlink(link) == "target"
    lst = os.lstat(link)
    assert stat.S_ISLNK(lst.st_mode)
    assert lst.st_size == len("target")
    st = os.stat(link)
    assert stat.S_ISREG(st.st_mode)
    assert st.st_ino == os.stat(target).st_ino
    assert read_file(link) == b"hello"
    # through the other mount too
    assert os.readlink(os.path.join(tdir.b, "link")) == "target"


def test_symlink_dangling_and_absolute(tdir):
    link = os.path.join(tdir.a, "dangling")
    os.symlink("/nonexistent/x/y", link)
    assert os.readlink(link) == "/nonexistent/x/y"
    with pytest.raises(FileNotFoundError):
        os.stat(link)
    assert stat.S_ISLNK(os.lstat(link).st_mode)


def test_symlink_long_target(tdir):
    target = "/".join(["abcdefgh" * 3] * 100)[:4000]
    link = os.path.join(tdir.a, "long")
    os.symlink(target, link)
    assert os.readlink(os.path.join(tdir.b, "long")) == target


def test_symlink_to_directory_traversal(tdir):
    os.mkdir(os.path.join(tdir.a, "realdir"))
    write_file(os.path.join(tdir.a, "realdir", "inner"), b"in")
    os.symlink("realdir", os.path.join(tdir.a, "dl"))
    assert read_file(os.path.join(tdir.a, "dl", "inner")) == b"in"
    assert os.listdir(os.path.join(tdir.b, "dl")) == ["inner"]


# ---- hard links ----

def test_hardlink_nlink_ino_content(tdir):
    a = os.path.join(tdir.a, "one")
    b = os.path.join(tdir.a, "two")
    write_file(a, b"shared")
    os.link(a, b)
    sa, sb = os.stat(a), os.stat(b)
    assert sa.st_ino == sb.st_ino
    assert sa.st_nlink == 2 and sb.st_nlink == 2
    with open(b, "r+b") as f:
        f.write(b"SH")
    assert read_file(a) == b"SHared"
    # the other mount agrees
    assert os.stat(os.path.join(tdir.b, "one")).st_ino == os.stat(os.path.join(tdir.b, "two")).st_ino
    assert os.stat(os.path.join(tdir.b, "two")).st_nlink == 2


def test_hardlink_unlink_one_keeps_other(tdir):
    a = os.path.join(tdir.a, "one")
    b = os.path.join(tdir.a, "two")
    write_file(a, b"keep me")
    os.link(a, b)
    os.unlink(a)
    assert not os.path.exists(a)
    assert read_file(b) == b"keep me"
    assert os.stat(b).st_nlink == 1
    assert read_file(os.path.join(tdir.b, "two")) == b"keep me"
    assert os.stat(os.path.join(tdir.b, "two")).st_nlink == 1


def test_hardlink_across_directories(tdir):
    os.mkdir(os.path.join(tdir.a, "d1"))
    os.mkdir(os.path.join(tdir.a, "d2"))
    a = os.path.join(tdir.a, "d1", "f")
    write_file(a, b"x")
    os.link(a, os.path.join(tdir.a, "d2", "g"))
    assert os.stat(os.path.join(tdir.a, "d2", "g")).st_ino == os.stat(a).st_ino


def test_hardlink_to_directory_eperm(tdir):
    d = os.path.join(tdir.a, "d")
    os.mkdir(d)
    with pytest.raises(PermissionError):
        os.link(d, os.path.join(tdir.a, "dl"))


def test_hardlink_existing_target_eexist(tdir):
    a = os.path.join(tdir.a, "a")
    b = os.path.join(tdir.a, "b")
    write_file(a, b"1")
    write_file(b, b"2")
    with pytest.raises(FileExistsError):
        os.link(a, b)


# ---- unlink of open files ----

def test_unlink_open_file_read_write_still_work(tdir):
    p = os.path.join(tdir.a, "f")
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"before unlink")
        os.unlink(p)
        assert not os.path.exists(p)
        assert "f" not in os.listdir(tdir.a)
        assert "f" not in os.listdir(tdir.b)
        os.pwrite(fd, b"AFTER", 0)
        os.write(fd, b"+more")
        assert os.pread(fd, 100, 0) == b"AFTERe unlink+more"
        assert os.fstat(fd).st_nlink == 0
    finally:
        os.close(fd)


def test_unlink_open_file_on_other_mount(tdir):
    p = os.path.join(tdir.a, "f")
    write_file(p, b"data on m1")
    fd = os.open(p, os.O_RDONLY)
    try:
        os.unlink(os.path.join(tdir.b, "f"))
        assert os.pread(fd, 100, 0) == b"data on m1"
    finally:
        os.close(fd)
    assert not os.path.exists(p)


# ---- truncate / ftruncate ----

def test_truncate_grow_zero_filled(tdir):
    p = os.path.join(tdir.a, "f")
    write_file(p, b"abc")
    os.truncate(p, 100_000)
    assert os.stat(p).st_size == 100_000
    assert read_file(p) == b"abc" + b"\0" * (100_000 - 3)


def test_truncate_shrink(tdir):
    p = os.path.join(tdir.a, "f")
    write_file(p, b"0123456789" * 1000)
    os.truncate(p, 5)
    assert os.stat(p).st_size == 5
    assert read_file(p) == b"01234"
    assert read_file(os.path.join(tdir.b, "f")) == b"01234"


def test_ftruncate_shrink_then_grow(tdir):
    p = os.path.join(tdir.a, "f")
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"x" * 8192)
        os.ftruncate(fd, 10)
        assert os.fstat(fd).st_size == 10
        os.ftruncate(fd, 20)
        assert os.fstat(fd).st_size == 20
        assert os.pread(fd, 100, 0) == b"x" * 10 + b"\0" * 10
    finally:
        os.close(fd)


# ---- fallocate, sparse files, big files ----

def test_posix_fallocate_extends_and_allocates(tdir):
    p = os.path.join(tdir.a, "f")
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, 1 << 20)
        st = os.fstat(fd)
        assert st.st_size == 1 << 20
        assert st.st_blocks * 512 >= 1 << 20
        assert os.pread(fd, 4096, 4096) == b"\0" * 4096
    finally:
        os.close(fd)


def test_punch_hole_keep_size(tdir):
    p = os.path.join(tdir.a, "f")
    size = 1 << 20
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"y" * size)
        os.fsync(fd)
        before = os.fstat(fd).st_blocks
        assert before * 512 >= size
        r = libc.fallocate64(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096, 512 * 1024)
        assert r == 0, os.strerror(ctypes.get_errno())
        os.fsync(fd)
        st = os.fstat(fd)
        assert st.st_size == size
        assert st.st_blocks < before
        assert pread_all(fd, 512 * 1024, 4096) == b"\0" * (512 * 1024)
        assert os.pread(fd, 4096, 0) == b"y" * 4096
        assert os.pread(fd, 4096, 4096 + 512 * 1024) == b"y" * 4096
    finally:
        os.close(fd)
    # the other mount reads the hole too
    with open(os.path.join(tdir.b, "f"), "rb") as f:
        f.seek(8192)
        assert f.read(4096) == b"\0" * 4096


def test_sparse_file_at_1gib(tdir):
    p = os.path.join(tdir.a, "sparse")
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, b"end", GiB)
        os.fsync(fd)
        st = os.fstat(fd)
        assert st.st_size == GiB + 3
        assert st.st_blocks * 512 < 1 << 20, "a 1 GiB hole must not be allocated"
        assert os.pread(fd, 65536, 0) == b"\0" * 65536
        assert os.pread(fd, 4096, GiB // 2) == b"\0" * 4096
        assert os.pread(fd, 10, GiB) == b"end"
    finally:
        os.close(fd)
    st = os.stat(os.path.join(tdir.b, "sparse"))
    assert st.st_size == GiB + 3


def test_random_operations_match_a_model(tdir):
    """1,500 random writes, truncates, punched holes, zeroed ranges,
    fallocates, fsyncs, reopens and seeks on one file, every read and
    seek answer checked against a model of its bytes, and the whole file
    through the second mount every 100 operations."""
    size = check_file(os.path.join(tdir.a, "f"), seed=43, n_ops=1500, max_size=3 << 20,
                      also=os.path.join(tdir.b, "f"))
    assert size > 0


def test_random_operations_on_replicas_match_a_model(tdir_replicated):
    size = check_file(os.path.join(tdir_replicated.a, "f"), seed=44, n_ops=1000,
                      max_size=3 << 20, also=os.path.join(tdir_replicated.b, "f"))
    assert size > 0


def test_seek_data_and_seek_hole(tdir):
    p = os.path.join(tdir.a, "sparse")
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, b"d" * 4096, GiB)
        os.pwrite(fd, b"e" * 10, 2 * GiB)
        os.fsync(fd)
        assert os.lseek(fd, 0, os.SEEK_HOLE) == 0
        assert os.lseek(fd, 0, os.SEEK_DATA) == GiB
        assert os.lseek(fd, GiB, os.SEEK_HOLE) == GiB + 4096
        assert os.lseek(fd, GiB + 4096, os.SEEK_DATA) == 2 * GiB
        with pytest.raises(OSError) as e:
            os.lseek(fd, 2 * GiB + 10, os.SEEK_DATA)
        assert e.value.errno == errno.ENXIO
    finally:
        os.close(fd)


def test_file_over_4gib(tdir):
    p = os.path.join(tdir.a, "big")
    off = 5 * GiB
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        assert os.pwrite(fd, b"tail-bytes", off) == 10
        assert os.pwrite(fd, b"head", 0) == 4
        os.fsync(fd)
        assert os.fstat(fd).st_size == off + 10
        assert os.pread(fd, 100, off) == b"tail-bytes"
        assert os.pread(fd, 4, 0) == b"head"
        assert os.pread(fd, 4, 4 * GiB) == b"\0" * 4
    finally:
        os.close(fd)
    pb = os.path.join(tdir.b, "big")
    assert os.stat(pb).st_size == off + 10
    with open(pb, "rb") as f:
        f.seek(off)
        assert f.read() == b"tail-bytes"


# ---- open flags ----

def test_o_append_two_fds_interleave(tdir):
    p = os.path.join(tdir.a, "log")
    write_file(p, b"")
    f1 = os.open(p, os.O_WRONLY | os.O_APPEND)
    f2 = os.open(p, os.O_WRONLY | os.O_APPEND)
    expect = b""
    try:
        for i in range(50):
            for fd, tag in ((f1, b"A"), (f2, b"B")):
                rec = tag + b"%03d" % i + b"." * 60 + b"\n"
                assert os.write(fd, rec) == len(rec)
                expect += rec
    finally:
        os.close(f1)
        os.close(f2)
    assert read_file(p) == expect
    assert read_file(os.path.join(tdir.b, "log")) == expect


def test_o_append_across_mounts(tdir):
    p1 = os.path.join(tdir.a, "log")
    write_file(p1, b"")
    f1 = os.open(p1, os.O_WRONLY | os.O_APPEND)
    f2 = os.open(os.path.join(tdir.b, "log"), os.O_WRONLY | os.O_APPEND)
    expect = b""
    try:
        for i in range(10):
            for fd, tag in ((f1, b"1"), (f2, b"2")):
                rec = tag + b"%03d\n" % i
                os.write(fd, rec)
                os.fsync(fd)
                expect += rec
    finally:
        os.close(f1)
        os.close(f2)
    assert read_file(p1) == expect


def test_o_excl_eexist(tdir):
    p = os.path.join(tdir.a, "f")
    os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    with pytest.raises(FileExistsError):
        os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with pytest.raises(FileExistsError):
        os.open(os.path.join(tdir.b, "f"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)


def test_o_excl_on_symlink_eexist(tdir):
    link = os.path.join(tdir.a, "l")
    os.symlink("nowhere", link)
    with pytest.raises(FileExistsError):
        os.open(link, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    assert not os.path.exists(os.path.join(tdir.a, "nowhere"))


def test_o_trunc(tdir):
    p = os.path.join(tdir.a, "f")
    write_file(p, b"z" * 50000)
    fd = os.open(p, os.O_RDWR | os.O_TRUNC)
    try:
        assert os.fstat(fd).st_size == 0
        os.write(fd, b"new")
    finally:
        os.close(fd)
    assert read_file(p) == b"new"
    assert read_file(os.path.join(tdir.b, "f")) == b"new"


def test_o_direct_aligned(tdir):
    p = os.path.join(tdir.a, "direct")
    n = 1 << 20
    buf = mmap.mmap(-1, n)
    pattern = os.urandom(4096) * (n // 4096)
    buf.write(pattern)
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    try:
        assert os.write(fd, buf) == n
        rbuf = mmap.mmap(-1, n)
        assert os.preadv(fd, [rbuf], 0) == n
        assert bytes(rbuf) == pattern
    finally:
        os.close(fd)
    assert read_file(os.path.join(tdir.b, "direct")) == pattern


def test_read_beyond_eof_returns_empty(tdir):
    p = os.path.join(tdir.a, "f")
    write_file(p, b"short")
    fd = os.open(p, os.O_RDONLY)
    try:
        assert os.pread(fd, 100, 3) == b"rt"
        assert os.pread(fd, 100, 1000) == b""
    finally:
        os.close(fd)


def test_open_missing_without_creat_enoent(tdir):
    with pytest.raises(FileNotFoundError):
        os.open(os.path.join(tdir.a, "missing"), os.O_RDONLY)


def test_open_directory_for_write_eisdir(tdir):
    with pytest.raises(IsADirectoryError):
        os.open(tdir.a, os.O_WRONLY)


# ---- fsync / fdatasync ----

def test_fsync_then_other_mount_sees_data(tdir):
    data = os.urandom(300_000)
    fd = os.open(os.path.join(tdir.a, "f"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
        assert read_file(os.path.join(tdir.b, "f")) == data
    finally:
        os.close(fd)


def test_fdatasync_then_other_mount_sees_data(tdir):
    data = os.urandom(100_000)
    fd = os.open(os.path.join(tdir.a, "f"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        os.fdatasync(fd)
        assert read_file(os.path.join(tdir.b, "f")) == data
    finally:
        os.close(fd)


def test_fsync_directory(tdir):
    write_file(os.path.join(tdir.a, "f"), b"x")
    fd = os.open(tdir.a, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    assert os.path.exists(os.path.join(tdir.b, "f"))


def test_data_reaches_brick_after_fsync(tdir):
    data = b"on the brick in plain files"
    fd = os.open(os.path.join(tdir.a, "f"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    assert read_file(os.path.join(tdir.brick, "f")) == data


# ---- statfs ----

def test_statvfs_sensible(vol, tdir):
    sv = os.statvfs(tdir.a)
    assert sv.f_bsize >= 512 and sv.f_bsize & (sv.f_bsize - 1) == 0
    assert sv.f_blocks > 0
    assert 0 < sv.f_bfree <= sv.f_blocks
    assert sv.f_bavail <= sv.f_bfree
    assert sv.f_namemax == 255
    # the volume's size is the brick file system's size
    bs = os.statvfs(vol.brick)
    assert abs(sv.f_blocks * sv.f_frsize - bs.f_blocks * bs.f_frsize) <= 0.01 * bs.f_blocks * bs.f_frsize


# ---- times ----

def test_utime_nanoseconds(tdir):
    p = os.path.join(tdir.a, "f")
    write_file(p, b"x")
    at = 1_600_000_000_123_456_789
    mt = 1_500_000_000_987_654_321
    os.utime(p, ns=(at, mt))
    st = os.stat(p)
    assert st.st_mtime_ns == mt
    assert st.st_atime_ns == at
    st2 = os.stat(os.path.join(tdir.b, "f"))
    assert st2.st_mtime_ns == mt
    assert st2.st_atime_ns == at


def test_utime_now(tdir):
    p = os.path.join(tdir.a, "f")
    write_file(p, b"x")
    os.utime(p, ns=(10**9, 10**9))
    t0 = time.time()
    os.utime(p)  # UTIME_NOW for both
    st = os.stat(p)
    assert abs(st.st_mtime - t0) < 5
    assert abs(st.st_atime - t0) < 5


def test_utime_symlink_nofollow(tdir):
    target = os.path.join(tdir.a, "t")
    write_file(target, b"x")
    link = os.path.join(tdir.a, "l")
    os.symlink("t", link)
    tmt = os.stat(target).st_mtime_ns
    os.utime(link, ns=(2 * 10**9 + 5, 3 * 10**9 + 7), follow_symlinks=False)
    assert os.lstat(link).st_mtime_ns == 3 * 10**9 + 7
    assert os.stat(target).st_mtime_ns == tmt


def test_write_updates_mtime(tdir):
    p = os.path.join(tdir.a, "f")
    write_file(p, b"x")
    os.utime(p, ns=(10**9, 10**9))
    with open(p, "ab") as f:
        f.write(b"more")
    assert os.stat(p).st_mtime > 1000
    assert os.stat(os.path.join(tdir.b, "f")).st_mtime > 1000


# ---- special files ----

def test_fifo_passes_data(tdir):
    p = os.path.join(tdir.a, "fifo")
    os.mkfifo(p, 0o644)
    assert stat.S_ISFIFO(os.stat(p).st_mode)
    assert stat.S_ISFIFO(os.stat(os.path.join(tdir.b, "fifo")).st_mode)
    got = []

    def reader():
        with open(p, "rb") as f:
            got.append(f.read())

    t = threading.Thread(target=reader)
    t.start()
    with open(p, "wb") as f:
        f.write(b"through the fifo")
    t.join(10)
    assert not t.is_alive()
    assert got == [b"through the fifo"]


def test_mknod_char_device(tdir):
    p = os.path.join(tdir.a, "null")
    os.mknod(p, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    for q in (p, os.path.join(tdir.b, "null")):
        st = os.stat(q)
        assert stat.S_ISCHR(st.st_mode)
        assert os.major(st.st_rdev) == 1 and os.minor(st.st_rdev) == 3


def test_mknod_block_device(tdir):
    p = os.path.join(tdir.a, "blk")
    os.mknod(p, 0o600 | stat.S_IFBLK, os.makedev(7, 200))
    st = os.stat(os.path.join(tdir.b, "blk"))
    assert stat.S_ISBLK(st.st_mode)
    assert (os.major(st.st_rdev), os.minor(st.st_rdev)) == (7, 200)


def test_mknod_regular_file(tdir):
    p = os.path.join(tdir.a, "reg")
    os.mknod(p, 0o644 | stat.S_IFREG)
    st = os.stat(p)
    assert stat.S_ISREG(st.st_mode) and st.st_size == 0
    write_file(p, b"ok")
    assert read_file(os.path.join(tdir.b, "reg")) == b"ok"


def test_mknod_socket(tdir):
    p = os.path.join(tdir.a, "sock")
    os.mknod(p, 0o644 | stat.S_IFSOCK)
    assert stat.S_ISSOCK(os.stat(os.path.join(tdir.b, "sock")).st_mode)


def test_ino_stable_and_distinct(tdir):
    names = [os.path.join(tdir.a, f"f{i}") for i in range(20)]
    for n in names:
        write_file(n, b"")
    inos = [os.stat(n).st_ino for n in names]
    assert len(set(inos)) == len(inos)
    assert [os.stat(n).st_ino for n in names] == inos
