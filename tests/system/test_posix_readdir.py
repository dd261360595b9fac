"""readdir: big directories, and directory offsets that stay valid while
entries are added and removed between reads."""

import collections
import ctypes
import os
import stat
import struct
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

libc = ctypes.CDLL("libc.so.6", use_errno=True)
libc.getdents64.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
libc.getdents64.restype = ctypes.c_ssize_t


def getdents(fd, bufsize=2048):
    """One getdents64 call: [(name, d_type)], [] at the end."""
    buf = ctypes.create_string_buffer(bufsize)
    n = libc.getdents64(fd, buf, bufsize)
    if n < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    raw = buf.raw[:n]
    out, pos = [], 0
    while pos < n:
        _ino, _off, reclen, dtype = struct.unpack_from("<QqHB", raw, pos)
        name = raw[pos + 19:pos + reclen].split(b"\0", 1)[0].decode()
        out.append((name, dtype))
        pos += reclen
    return out


def create_many(d, names, workers=4):
    def mk(chunk):
        for n in chunk:
            os.mknod(os.path.join(d, n), 0o644 | stat.S_IFREG)

    chunks = [names[i::workers] for i in range(workers)]
    with ThreadPoolExecutor(workers) as ex:
        list(ex.map(mk, chunks))


def test_readdir_small_lists_exact_set_with_types(tdir):
    os.mkdir(os.path.join(tdir.a, "sub"))
    os.symlink("x", os.path.join(tdir.a, "ln"))
    open(os.path.join(tdir.a, "f"), "w").close()
    fd = os.open(tdir.a, os.O_RDONLY | os.O_DIRECTORY)
    try:
        ents = []
        while True:
            chunk = getdents(fd)
            if not chunk:
                break
            ents += chunk
    finally:
        os.close(fd)
    d = dict(ents)
    assert sorted(d) == [".", "..", "f", "ln", "sub"]
    assert d["f"] == 8 and d["sub"] == 4 and d["ln"] == 10  # DT_REG, DT_DIR, DT_LNK


def test_scandir_attrs_match_stat(tdir):
    for i in range(50):
        with open(os.path.join(tdir.a, f"f{i}"), "wb") as f:
            f.write(b"x" * i)
    with os.scandir(tdir.b) as it:
        for e in it:
            st = e.stat(follow_symlinks=False)
            assert st.st_size == int(e.name[1:])
            assert e.is_file()


def _offsets_stable(tdir, mutate_dir):
    n = 3000
    initial = [f"e{i:05d}" for i in range(n)]
    create_many(tdir.a, initial)
    seen = []
    fd = os.open(tdir.a, os.O_RDONLY | os.O_DIRECTORY)
    try:
        while len(seen) < n // 2:
            chunk = getdents(fd, 1024)
            assert chunk, "directory ended early"
            seen += [e[0] for e in chunk]
        seen_set = set(seen)
        unseen = [x for x in initial if x not in seen_set]
        deleted = set(list(seen_set - {".", ".."})[:150] + unseen[:150])
        for x in deleted:
            os.unlink(os.path.join(mutate_dir, x))
        for i in range(300):
            open(os.path.join(mutate_dir, f"new{i:04d}"), "w").close()
        while True:
            chunk = getdents(fd, 1024)
            if not chunk:
                break
            seen += [e[0] for e in chunk]
    finally:
        os.close(fd)
    dups = sorted(x for x, k in collections.Counter(seen).items() if k > 1)
    assert dups == [], f"duplicated entries: {dups[:20]}"
    survivors = set(initial) - deleted
    missing = sorted(survivors - set(seen))
    assert missing == [], f"{len(missing)} surviving entries never returned: {missing[:20]}"
    assert set(seen) <= set(initial) | {f"new{i:04d}" for i in range(300)} | {".", ".."}


def test_readdir_offsets_stable_under_changes_same_mount(tdir):
    _offsets_stable(tdir, tdir.a)


def test_readdir_offsets_stable_under_changes_other_mount(tdir):
    _offsets_stable(tdir, tdir.b)


def test_readdir_seekdir_telldir_resume(tdir):
    names = [f"s{i:04d}" for i in range(500)]
    create_many(tdir.a, names, workers=2)
    fd = os.open(tdir.a, os.O_RDONLY | os.O_DIRECTORY)
    try:
        first = getdents(fd, 1024)
        pos = os.lseek(fd, 0, os.SEEK_CUR)
        rest1 = []
        while (c := getdents(fd, 1024)):
            rest1 += c
        os.lseek(fd, pos, os.SEEK_SET)
        rest2 = []
        while (c := getdents(fd, 1024)):
            rest2 += c
        assert rest1 == rest2
        assert sorted(n for n, _ in first + rest1 if not n.startswith(".")) == names
        os.lseek(fd, 0, os.SEEK_SET)
        again = []
        while (c := getdents(fd, 1024)):
            again += c
        assert sorted(again) == sorted(first + rest1)
    finally:
        os.close(fd)


@pytest.mark.slow
def test_readdir_100k_entries(tdir):
    n = 100_000
    names = [f"file-{i:06d}" for i in range(n)]
    d = os.path.join(tdir.a, "big")
    os.mkdir(d)
    t0 = time.time()
    create_many(d, names)
    took = time.time() - t0
    assert took < 180, f"creating {n} files took {took:.0f}s"
    t0 = time.time()
    listed = os.listdir(d)
    assert len(listed) == n
    assert set(listed) == set(names)
    assert time.time() - t0 < 60
    listed_b = os.listdir(os.path.join(tdir.b, "big"))
    assert len(listed_b) == n and set(listed_b) == set(names)
