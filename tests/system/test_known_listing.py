"""Listings answered by the mount (src/fuse/ops_dir.c, serve_known;
docs/consistency.md, "Listings"): a directory this mount made and holds the
lease of is listed from what the mount knows, without the bricks. These
tests check that such a listing is exactly what the bricks would list (names,
types, inode numbers, through many reads and seekdir), that it is really
answered by the mount, and that another client's change ends it.

One cairnd on 127.0.0.158, a replica 3 volume, two mounts."""

import ctypes
import os
import re
import stat
import struct

import pytest

from cairn_cluster import Cluster, fsync_dir

HOST = "127.0.0.158"
PORT = 24996
STATS = "trusted.cairn.io-stats"

libc = ctypes.CDLL("libc.so.6", use_errno=True)
libc.getdents64.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
libc.getdents64.restype = ctypes.c_ssize_t
libc.opendir.argtypes = [ctypes.c_char_p]
libc.opendir.restype = ctypes.c_void_p
libc.readdir.argtypes = [ctypes.c_void_p]
libc.readdir.restype = ctypes.c_void_p
libc.telldir.argtypes = [ctypes.c_void_p]
libc.telldir.restype = ctypes.c_long
libc.seekdir.argtypes = [ctypes.c_void_p, ctypes.c_long]
libc.closedir.argtypes = [ctypes.c_void_p]
libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                           ctypes.c_uint]
AT_FDCWD, RENAME_EXCHANGE = -100, 2

DTYPE = {stat.S_IFREG: 8, stat.S_IFDIR: 4, stat.S_IFLNK: 10, stat.S_IFIFO: 1}


@pytest.fixture
def two():
    with Cluster(host=HOST, port=PORT, prefix="kls-") as c:
        _, (a, b) = c.replica3("kv")
        yield c, a.path, b.path


def listing(d, bufsize=1024):
    """{name: (d_ino, d_type)} by getdents64 with a small buffer (many
    READDIRs), "." and ".." left out; asserts no name comes twice."""
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    out = {}
    try:
        buf = ctypes.create_string_buffer(bufsize)
        while True:
            n = libc.getdents64(fd, buf, bufsize)
            assert n >= 0, os.strerror(ctypes.get_errno())
            if n == 0:
                return out
            raw, pos = buf.raw[:n], 0
            while pos < n:
                ino, _off, reclen, dtype = struct.unpack_from("<QqHB", raw, pos)
                name = raw[pos + 19:pos + reclen].split(b"\0", 1)[0].decode()
                pos += reclen
                if name in (".", ".."):
                    continue
                assert name not in out, f"{name} listed twice"
                out[name] = (ino, dtype)
    finally:
        os.close(fd)


def expected(d):
    """What lstat says of every entry of d, as listing() shows it."""
    out = {}
    for name in os.listdir(d):
        st = os.lstat(os.path.join(d, name))
        out[name] = (st.st_ino, DTYPE[stat.S_IFMT(st.st_mode)])
    return out


def brick_readdirs(mnt):
    """READDIRs this mount sent to the bricks (its io-stats)."""
    text = os.getxattr(mnt, STATS).decode()
    m = re.search(r"^READDIR\s+(\d+)", text, re.M)
    return int(m.group(1)) if m else 0


def seek_walk(d, per):
    """Lists d reading `per` entries per opendir, each new stream going on
    with seekdir from the last telldir of the one before."""
    names, pos = [], 0
    while True:
        dp = libc.opendir(d.encode())
        assert dp, os.strerror(ctypes.get_errno())
        libc.seekdir(dp, pos)
        got = 0
        while got < per:
            p = libc.readdir(dp)
            if not p:
                break
            names.append(ctypes.string_at(p + 19).decode())
            got += 1
            pos = libc.telldir(dp)
        libc.closedir(dp)
        if got < per:
            return names


def populate(d):
    os.mkdir(d)
    for i in range(700):
        with open(os.path.join(d, f"file-{i:04d}-with-a-longer-name"), "wb") as fh:
            fh.write(b"x" * (i % 7))
    os.mkdir(os.path.join(d, "sub"))
    os.symlink("file-0001-with-a-longer-name", os.path.join(d, "link"))
    os.mkfifo(os.path.join(d, "fifo"))
    os.link(os.path.join(d, "file-0002-with-a-longer-name"), os.path.join(d, "hard"))


def test_listing_answered_here_is_exact(two):
    c, a, b = two
    d = os.path.join(a, "d")
    populate(d)
    # renames in, out, over an entry and an exchange of a file and a directory
    os.rename(os.path.join(d, "file-0003-with-a-longer-name"), os.path.join(a, "out"))
    os.rename(os.path.join(a, "out"), os.path.join(d, "back"))
    os.rename(os.path.join(d, "file-0004-with-a-longer-name"),
              os.path.join(d, "file-0005-with-a-longer-name"))
    os.unlink(os.path.join(d, "file-0006-with-a-longer-name"))
    rc = libc.renameat2(AT_FDCWD, os.path.join(d, "sub").encode(), AT_FDCWD,
                        os.path.join(d, "file-0007-with-a-longer-name").encode(), RENAME_EXCHANGE)
    assert rc == 0, os.strerror(ctypes.get_errno())
    before = brick_readdirs(a)
    got = listing(d)
    assert brick_readdirs(a) == before, "the listing went to the bricks"
    want = expected(d)
    assert got == want
    assert len(got) == 700 + 4 - 2
    assert got["sub"][1] == 8 and got["file-0007-with-a-longer-name"][1] == 4
    assert got["link"][1] == 10 and got["fifo"][1] == 1
    assert got["hard"][0] == got["file-0002-with-a-longer-name"][0]
    # the other mount, listing from the bricks, sees the same
    fsync_dir(d)
    assert listing(os.path.join(b, "d")) == want


def test_seekdir_across_streams(two):
    c, a, b = two
    d = os.path.join(a, "s")
    populate(d)
    names = seek_walk(d, 7)
    assert len(names) == len(set(names))
    assert sorted(n for n in names if n not in (".", "..")) == sorted(os.listdir(d))


def test_entries_change_between_reads_of_one_stream(two):
    """Removing what was listed while the stream goes on (rm -rf's way)
    lists every entry that stayed, once."""
    c, a, b = two
    d = os.path.join(a, "r")
    populate(d)
    keep = set(os.listdir(d))
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    seen = []
    try:
        buf = ctypes.create_string_buffer(1024)
        while True:
            n = libc.getdents64(fd, buf, 1024)
            assert n >= 0
            if n == 0:
                break
            raw, pos = buf.raw[:n], 0
            while pos < n:
                _ino, _off, reclen, _t = struct.unpack_from("<QqHB", raw, pos)
                name = raw[pos + 19:pos + reclen].split(b"\0", 1)[0].decode()
                pos += reclen
                if name not in (".", ".."):
                    seen.append(name)
                    if name.startswith("file-"):
                        os.unlink(os.path.join(d, name))
                        keep.discard(name)
    finally:
        os.close(fd)
    assert len(seen) == len(set(seen))
    assert keep <= set(seen)
    assert sorted(os.listdir(d)) == sorted(keep)


def test_other_clients_change_ends_it(two):
    c, a, b = two
    d = os.path.join(a, "o")
    populate(d)
    assert "new" not in listing(d)
    with open(os.path.join(b, "o", "new"), "wb") as fh:
        fh.write(b"from b")
    os.unlink(os.path.join(b, "o", "file-0000-with-a-longer-name"))
    got = listing(d)
    assert "new" in got and "file-0000-with-a-longer-name" not in got
    assert got == expected(d)
