"""rename(2) and renameat2(2) on a cairn-fuse mount."""

import ctypes
import errno
import os
import stat

import pytest

libc = ctypes.CDLL("libc.so.6", use_errno=True)
AT_FDCWD = -100
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2


def renameat2(old, new, flags):
    libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                               ctypes.c_uint]
    r = libc.renameat2(AT_FDCWD, os.fsencode(old), AT_FDCWD, os.fsencode(new), flags)
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), old)


def put(path, data):
    with open(path, "wb") as f:
        f.write(data)


def get(path):
    with open(path, "rb") as f:
        return f.read()


def test_rename_within_directory(tdir):
    put(os.path.join(tdir.a, "old"), b"content")
    ino = os.stat(os.path.join(tdir.a, "old")).st_ino
    os.rename(os.path.join(tdir.a, "old"), os.path.join(tdir.a, "new"))
    assert sorted(os.listdir(tdir.a)) == ["new"]
    assert get(os.path.join(tdir.a, "new")) == b"content"
    assert os.stat(os.path.join(tdir.a, "new")).st_ino == ino
    assert sorted(os.listdir(tdir.b)) == ["new"]
    assert get(os.path.join(tdir.b, "new")) == b"content"


def test_rename_across_directories(tdir):
    os.mkdir(os.path.join(tdir.a, "d1"))
    os.mkdir(os.path.join(tdir.a, "d2"))
    put(os.path.join(tdir.a, "d1", "f"), b"moved")
    os.rename(os.path.join(tdir.a, "d1", "f"), os.path.join(tdir.a, "d2", "g"))
    assert os.listdir(os.path.join(tdir.a, "d1")) == []
    assert os.listdir(os.path.join(tdir.a, "d2")) == ["g"]
    assert get(os.path.join(tdir.b, "d2", "g")) == b"moved"
    assert not os.path.exists(os.path.join(tdir.b, "d1", "f"))


def test_rename_file_over_file(tdir):
    a, b = os.path.join(tdir.a, "a"), os.path.join(tdir.a, "b")
    put(a, b"AAA")
    put(b, b"BBBBBB")
    ino = os.stat(a).st_ino
    os.rename(a, b)
    assert os.listdir(tdir.a) == ["b"]
    assert get(b) == b"AAA"
    assert os.stat(b).st_ino == ino
    assert get(os.path.join(tdir.b, "b")) == b"AAA"


def test_rename_over_file_keeps_open_fd_of_replaced(tdir):
    a, b = os.path.join(tdir.a, "a"), os.path.join(tdir.a, "b")
    put(a, b"new")
    put(b, b"old contents")
    fd = os.open(b, os.O_RDONLY)
    try:
        os.rename(a, b)
        assert os.pread(fd, 100, 0) == b"old contents"
    finally:
        os.close(fd)
    assert get(b) == b"new"


def test_rename_empty_dir_over_empty_dir(tdir):
    a, b = os.path.join(tdir.a, "da"), os.path.join(tdir.a, "db")
    os.mkdir(a)
    os.mkdir(b)
    os.rename(a, b)
    assert os.listdir(tdir.a) == ["db"]
    assert stat.S_ISDIR(os.stat(b).st_mode)


def test_rename_dir_over_nonempty_dir_enotempty(tdir):
    a, b = os.path.join(tdir.a, "da"), os.path.join(tdir.a, "db")
    os.mkdir(a)
    os.mkdir(b)
    put(os.path.join(b, "x"), b"x")
    with pytest.raises(OSError) as e:
        os.rename(a, b)
    assert e.value.errno in (errno.ENOTEMPTY, errno.EEXIST)
    assert sorted(os.listdir(tdir.a)) == ["da", "db"]
    assert os.listdir(b) == ["x"]


def test_rename_file_over_dir_eisdir(tdir):
    f, d = os.path.join(tdir.a, "f"), os.path.join(tdir.a, "d")
    put(f, b"x")
    os.mkdir(d)
    with pytest.raises(IsADirectoryError):
        os.rename(f, d)
    assert stat.S_ISREG(os.stat(f).st_mode) and stat.S_ISDIR(os.stat(d).st_mode)


def test_rename_dir_over_file_enotdir(tdir):
    f, d = os.path.join(tdir.a, "f"), os.path.join(tdir.a, "d")
    put(f, b"x")
    os.mkdir(d)
    with pytest.raises(NotADirectoryError):
        os.rename(d, f)
    assert stat.S_ISREG(os.stat(f).st_mode) and stat.S_ISDIR(os.stat(d).st_mode)


def test_rename_dir_into_own_subdir_einval(tdir):
    d = os.path.join(tdir.a, "d")
    os.makedirs(os.path.join(d, "sub"))
    with pytest.raises(OSError) as e:
        os.rename(d, os.path.join(d, "sub", "d"))
    assert e.value.errno == errno.EINVAL


def test_rename_directory_with_contents(tdir):
    src = os.path.join(tdir.a, "tree")
    os.makedirs(os.path.join(src, "x", "y"))
    put(os.path.join(src, "x", "y", "leaf"), b"leaf data")
    put(os.path.join(src, "top"), b"top data")
    os.mkdir(os.path.join(tdir.a, "elsewhere"))
    dst = os.path.join(tdir.a, "elsewhere", "tree2")
    os.rename(src, dst)
    assert not os.path.exists(src)
    assert get(os.path.join(dst, "x", "y", "leaf")) == b"leaf data"
    assert get(os.path.join(dst, "top")) == b"top data"
    # new objects inside the renamed tree land in the right place
    put(os.path.join(dst, "x", "after"), b"after")
    assert get(os.path.join(tdir.b, "elsewhere", "tree2", "x", "after")) == b"after"
    assert get(os.path.join(tdir.b, "elsewhere", "tree2", "x", "y", "leaf")) == b"leaf data"
    assert not os.path.exists(os.path.join(tdir.b, "tree"))
    # and the brick mirrors the namespace
    assert get(os.path.join(tdir.brick, "elsewhere", "tree2", "x", "y", "leaf")) == b"leaf data"


def test_rename_directory_parent_link_count(tdir):
    os.mkdir(os.path.join(tdir.a, "p1"))
    os.mkdir(os.path.join(tdir.a, "p2"))
    os.mkdir(os.path.join(tdir.a, "p1", "c"))
    assert os.stat(os.path.join(tdir.a, "p1")).st_nlink == 3
    os.rename(os.path.join(tdir.a, "p1", "c"), os.path.join(tdir.a, "p2", "c"))
    assert os.stat(os.path.join(tdir.a, "p1")).st_nlink == 2
    assert os.stat(os.path.join(tdir.a, "p2")).st_nlink == 3


def test_rename_same_name_noop(tdir):
    a = os.path.join(tdir.a, "a")
    put(a, b"same")
    os.rename(a, a)
    assert get(a) == b"same"


def test_rename_hardlinks_of_same_inode_noop(tdir):
    a, b = os.path.join(tdir.a, "a"), os.path.join(tdir.a, "b")
    put(a, b"x")
    os.link(a, b)
    os.rename(a, b)  # POSIX: both names remain
    assert sorted(os.listdir(tdir.a)) == ["a", "b"]


def test_rename_missing_source_enoent(tdir):
    with pytest.raises(FileNotFoundError):
        os.rename(os.path.join(tdir.a, "nope"), os.path.join(tdir.a, "x"))


def test_rename_noreplace(tdir):
    a, b = os.path.join(tdir.a, "a"), os.path.join(tdir.a, "b")
    put(a, b"A")
    put(b, b"B")
    with pytest.raises(FileExistsError):
        renameat2(a, b, RENAME_NOREPLACE)
    assert get(a) == b"A" and get(b) == b"B"
    renameat2(a, os.path.join(tdir.a, "c"), RENAME_NOREPLACE)
    assert sorted(os.listdir(tdir.a)) == ["b", "c"]


def test_rename_exchange(tdir):
    a, d = os.path.join(tdir.a, "a"), os.path.join(tdir.a, "d")
    put(a, b"file")
    os.mkdir(d)
    put(os.path.join(d, "in"), b"inside")
    renameat2(a, d, RENAME_EXCHANGE)
    assert get(d) == b"file"
    assert get(os.path.join(a, "in")) == b"inside"
    assert get(os.path.join(tdir.b, "d")) == b"file"
    assert get(os.path.join(tdir.b, "a", "in")) == b"inside"
