"""Coherence between two mounts of one volume: once an operation has
returned on m1, m2 sees its effect at its next access, even when m2 looked
at the object just before (so stale kernel caches on m2 would show).

The requirement is strict: no sleeping for cache timeouts. A failure here
that goes away with client.leases off (nothing cached in the kernel) is a
client cache-invalidation bug, not a test bug.

Every test runs on a one-brick volume and on a distribute volume of three
bricks, where a directory's lease is every brick's and a name's is the
brick it hashes to (docs/replication.md, "Distribute")."""

import errno
import os
import stat

import pytest


@pytest.fixture
def tdir(tdir_on_each_volume):
    return tdir_on_each_volume


def put(path, data):
    with open(path, "wb") as f:
        f.write(data)


def get(path):
    with open(path, "rb") as f:
        return f.read()


def test_create_seen_after_negative_lookup(tdir):
    a, b = os.path.join(tdir.a, "f"), os.path.join(tdir.b, "f")
    assert not os.path.exists(b)  # m2 caches the negative lookup
    put(a, b"x")
    assert os.path.exists(b)
    assert get(b) == b"x"


def test_create_seen_in_listing(tdir):
    assert os.listdir(tdir.b) == []
    put(os.path.join(tdir.a, "f"), b"x")
    assert os.listdir(tdir.b) == ["f"]


def test_mkdir_seen(tdir):
    b = os.path.join(tdir.b, "d")
    assert not os.path.exists(b)
    os.mkdir(os.path.join(tdir.a, "d"))
    assert os.path.isdir(b)


def test_write_content_seen(tdir):
    a, b = os.path.join(tdir.a, "f"), os.path.join(tdir.b, "f")
    put(a, b"version one")
    assert get(b) == b"version one"  # m2 now has pages and size cached
    put(a, b"version two, longer")
    assert get(b) == b"version two, longer"


def test_write_same_size_seen(tdir):
    a, b = os.path.join(tdir.a, "f"), os.path.join(tdir.b, "f")
    put(a, b"A" * 8192)
    assert get(b) == b"A" * 8192
    with open(a, "r+b") as f:
        f.write(b"B" * 8192)
    assert get(b) == b"B" * 8192


def test_write_seen_through_open_fd(tdir):
    a, b = os.path.join(tdir.a, "f"), os.path.join(tdir.b, "f")
    put(a, b"1111")
    fd = os.open(b, os.O_RDONLY)
    try:
        assert os.pread(fd, 4, 0) == b"1111"
        with open(a, "r+b") as f:
            f.write(b"2222")
        assert os.pread(fd, 4, 0) == b"2222"
    finally:
        os.close(fd)


def test_size_seen_after_append(tdir):
    a, b = os.path.join(tdir.a, "f"), os.path.join(tdir.b, "f")
    put(a, b"12345")
    assert os.stat(b).st_size == 5
    with open(a, "ab") as f:
        f.write(b"678")
    assert os.stat(b).st_size == 8


def test_rename_seen(tdir):
    put(os.path.join(tdir.a, "old"), b"x")
    bo, bn = os.path.join(tdir.b, "old"), os.path.join(tdir.b, "new")
    assert os.path.exists(bo) and not os.path.exists(bn)
    os.rename(os.path.join(tdir.a, "old"), os.path.join(tdir.a, "new"))
    assert not os.path.exists(bo)
    assert get(bn) == b"x"
    assert os.listdir(tdir.b) == ["new"]


def test_rename_over_seen(tdir):
    put(os.path.join(tdir.a, "src"), b"source")
    put(os.path.join(tdir.a, "dst"), b"old target")
    assert get(os.path.join(tdir.b, "dst")) == b"old target"
    os.rename(os.path.join(tdir.a, "src"), os.path.join(tdir.a, "dst"))
    assert get(os.path.join(tdir.b, "dst")) == b"source"


def test_unlink_seen(tdir):
    put(os.path.join(tdir.a, "f"), b"x")
    b = os.path.join(tdir.b, "f")
    assert os.path.exists(b)
    os.unlink(os.path.join(tdir.a, "f"))
    assert not os.path.exists(b)
    with pytest.raises(FileNotFoundError):
        open(b, "rb")
    assert os.listdir(tdir.b) == []


def test_rmdir_seen(tdir):
    os.mkdir(os.path.join(tdir.a, "d"))
    b = os.path.join(tdir.b, "d")
    assert os.path.isdir(b)
    os.rmdir(os.path.join(tdir.a, "d"))
    assert not os.path.exists(b)


def test_unlink_then_recreate_seen(tdir):
    a, b = os.path.join(tdir.a, "f"), os.path.join(tdir.b, "f")
    put(a, b"first")
    assert get(b) == b"first"
    os.unlink(a)
    put(a, b"second object")
    assert get(b) == b"second object"
    assert os.stat(b).st_size == len(b"second object")


def test_chmod_seen(tdir):
    put(os.path.join(tdir.a, "f"), b"x")
    b = os.path.join(tdir.b, "f")
    os.chmod(os.path.join(tdir.a, "f"), 0o644)
    assert stat.S_IMODE(os.stat(b).st_mode) == 0o644
    os.chmod(os.path.join(tdir.a, "f"), 0o600)
    assert stat.S_IMODE(os.stat(b).st_mode) == 0o600


def test_chown_seen(tdir):
    put(os.path.join(tdir.a, "f"), b"x")
    b = os.path.join(tdir.b, "f")
    assert os.stat(b).st_uid == 0
    os.chown(os.path.join(tdir.a, "f"), 1000, 1000)
    st = os.stat(b)
    assert (st.st_uid, st.st_gid) == (1000, 1000)


def test_truncate_seen(tdir):
    put(os.path.join(tdir.a, "f"), b"x" * 10000)
    b = os.path.join(tdir.b, "f")
    assert os.stat(b).st_size == 10000
    os.truncate(os.path.join(tdir.a, "f"), 10)
    assert os.stat(b).st_size == 10
    assert get(b) == b"x" * 10


def test_utime_seen(tdir):
    put(os.path.join(tdir.a, "f"), b"x")
    b = os.path.join(tdir.b, "f")
    os.stat(b)
    os.utime(os.path.join(tdir.a, "f"), ns=(123_000_000_001, 456_000_000_002))
    assert os.stat(b).st_mtime_ns == 456_000_000_002


def test_xattr_set_seen(tdir):
    put(os.path.join(tdir.a, "f"), b"x")
    b = os.path.join(tdir.b, "f")
    with pytest.raises(OSError) as e:
        os.getxattr(b, "user.k")
    assert e.value.errno == errno.ENODATA
    os.setxattr(os.path.join(tdir.a, "f"), "user.k", b"v")
    assert os.getxattr(b, "user.k") == b"v"


def test_symlink_and_link_seen(tdir):
    put(os.path.join(tdir.a, "f"), b"x")
    b = os.path.join(tdir.b, "f")
    assert os.stat(b).st_nlink == 1
    os.link(os.path.join(tdir.a, "f"), os.path.join(tdir.a, "g"))
    os.symlink("f", os.path.join(tdir.a, "s"))
    assert os.stat(b).st_nlink == 2
    assert os.readlink(os.path.join(tdir.b, "s")) == "f"


def test_ping_pong_writes(tdir):
    """Alternating writers on both mounts, each reading the other's last
    write before writing: a stale read shows at once."""
    a, b = os.path.join(tdir.a, "pp"), os.path.join(tdir.b, "pp")
    put(a, b"0")
    for i in range(1, 40):
        w, r = (a, b) if i % 2 else (b, a)
        put(w, str(i).encode())
        assert get(r) == str(i).encode(), f"round {i}"
