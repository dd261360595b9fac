"""Write-back of new small files (docs/consistency.md, "Write-back").

Files created in a directory the mount made itself are answered locally and
sent to the bricks, one MAKE_FILE each, when closed. These tests check that
every byte and attribute reaches every replica, that another client sees
the files at once (its access recalls the directory's exclusive lease),
that fsync means on the bricks even when the client is killed right after,
that errors of the background work are reported, and that
client.write-back off makes every close synchronous.

Addresses: 127.0.0.36-.39."""

import hashlib
import os
import signal
import stat
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cairn_cluster import Cluster  # noqa: E402


@pytest.fixture
def wc():
    c = Cluster(host="127.0.0.36", prefix="wb-")
    try:
        c.start()
        yield c
    finally:
        c.close()


def replica3(c, opts=None, mounts=2):
    bricks = [os.path.join(c.root, f"b{i}") for i in range(3)]
    for b in bricks:
        os.makedirs(b)
    c.volumes["wv"] = bricks
    c.cli("volume", "create", "wv", "replica", "3", *[f"{c.host}:{b}" for b in bricks], "force")
    for k, v in (opts or {}).items():
        c.cli("volume", "set", "wv", k, v)
    c.cli("volume", "start", "wv")
    ms = [c.mount("wv", os.path.join(c.root, f"m{i}")) for i in range(mounts)]
    return bricks, ms


def content(i):
    return hashlib.sha256(str(i).encode()).digest() * (1 + (i * 37) % 300)


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def test_every_byte_and_attribute_reaches_every_replica(wc):
    bricks, (m1, m2) = replica3(wc)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    want = {}
    for i in range(200):
        p = os.path.join(d, f"f{i}")
        with open(p, "wb") as fh:
            fh.write(content(i))
        os.chmod(p, 0o600 + (i % 8) * 0o10)
        os.utime(p, ns=(1_600_000_000_000_000_000 + i, 1_500_000_000_000_000_000 + i * 1000))
        if i % 10 == 0:
            os.setxattr(p, "user.i", str(i).encode())
        want[f"f{i}"] = (content(i), 0o600 + (i % 8) * 0o10, 1_500_000_000_000_000_000 + i * 1000)
    fsync_dir(d)
    for b in bricks:
        got = sorted(os.listdir(os.path.join(b, "d")))
        assert got == sorted(want), b
        for name, (data, mode, mtime) in want.items():
            p = os.path.join(b, "d", name)
            st = os.stat(p)
            with open(p, "rb") as fh:
                assert fh.read() == data, p
            assert stat.S_IMODE(st.st_mode) == mode, p
            assert st.st_mtime_ns == mtime, p
            if name in ("f0", "f10", "f190"):
                assert os.getxattr(p, "user.i") == name[1:].encode()
    # and the other mount sees the same
    for name, (data, mode, mtime) in want.items():
        p = os.path.join(m2.path, "d", name)
        with open(p, "rb") as fh:
            assert fh.read() == data
        assert os.stat(p).st_mtime_ns == mtime


def test_other_client_sees_a_file_still_open(wc):
    _, (m1, m2) = replica3(wc)
    os.mkdir(os.path.join(m1.path, "d"))
    fh = open(os.path.join(m1.path, "d", "open"), "wb")
    try:
        fh.write(b"first part")
        fh.flush()
        with open(os.path.join(m2.path, "d", "open"), "rb") as g:
            assert g.read() == b"first part"
        fh.write(b", second part")
        fh.flush()
    finally:
        fh.close()
    with open(os.path.join(m2.path, "d", "open"), "rb") as g:
        assert g.read() == b"first part, second part"
    assert sorted(os.listdir(os.path.join(m2.path, "d"))) == ["open"]


def test_listing_by_another_client_while_files_are_written(wc):
    _, (m1, m2) = replica3(wc)
    os.mkdir(os.path.join(m1.path, "d"))
    for i in range(50):
        with open(os.path.join(m1.path, "d", f"x{i}"), "wb") as fh:
            fh.write(content(i))
    assert sorted(os.listdir(os.path.join(m2.path, "d"))) == sorted(f"x{i}" for i in range(50))
    # m1 keeps working in it: now through the bricks, and both agree
    for i in range(50, 60):
        with open(os.path.join(m1.path, "d", f"x{i}"), "wb") as fh:
            fh.write(content(i))
    assert len(os.listdir(os.path.join(m2.path, "d"))) == 60
    with open(os.path.join(m2.path, "d", "x55"), "rb") as fh:
        assert fh.read() == content(55)


def test_fsync_then_kill_keeps_what_was_fsynced(wc):
    bricks, (m1,) = replica3(wc, mounts=1)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    for i in range(40):
        fd = os.open(os.path.join(d, f"s{i}"), os.O_CREAT | os.O_WRONLY, 0o644)
        os.write(fd, content(i))
        if i < 20:
            os.fsync(fd)
        os.close(fd)
    m1.proc.send_signal(signal.SIGKILL)
    m1.proc.wait(timeout=10)
    for b in bricks:
        names = set(os.listdir(os.path.join(b, "d")))
        for i in range(20):
            assert f"s{i}" in names, (b, i)
        # whatever reached a brick is whole: nothing is half made
        for n in names:
            with open(os.path.join(b, "d", n), "rb") as fh:
                assert fh.read() == content(int(n[1:])), (b, n)


def test_write_back_off_makes_every_close_synchronous(wc):
    bricks, (m1,) = replica3(wc, opts={"client.write-back": "off"}, mounts=1)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    for i in range(20):
        with open(os.path.join(d, f"n{i}"), "wb") as fh:
            fh.write(content(i))
    m1.proc.send_signal(signal.SIGKILL)
    m1.proc.wait(timeout=10)
    for b in bricks:
        for i in range(20):
            with open(os.path.join(b, "d", f"n{i}"), "rb") as fh:
                assert fh.read() == content(i)


def test_big_file_rename_unlink_and_truncate(wc):
    bricks, (m1, m2) = replica3(wc)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    big = os.urandom(3 << 20)
    with open(os.path.join(d, "big"), "wb") as fh:
        for off in range(0, len(big), 65536):
            fh.write(big[off:off + 65536])
    with open(os.path.join(d, "a"), "wb") as fh:
        fh.write(b"a" * 1000)
    os.rename(os.path.join(d, "a"), os.path.join(d, "b"))
    with open(os.path.join(d, "gone"), "wb") as fh:
        fh.write(b"x")
    os.unlink(os.path.join(d, "gone"))
    with open(os.path.join(d, "t"), "wb") as fh:
        fh.write(b"0123456789")
        fh.truncate(4)
    fsync_dir(d)
    for b in bricks:
        assert sorted(os.listdir(os.path.join(b, "d"))) == ["b", "big", "t"]
        with open(os.path.join(b, "d", "big"), "rb") as fh:
            assert fh.read() == big
        with open(os.path.join(b, "d", "b"), "rb") as fh:
            assert fh.read() == b"a" * 1000
        with open(os.path.join(b, "d", "t"), "rb") as fh:
            assert fh.read() == b"0123"
    with open(os.path.join(m2.path, "d", "big"), "rb") as fh:
        assert fh.read() == big


def test_failed_background_create_is_reported(wc):
    bricks, (m1,) = replica3(wc, mounts=1)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    with open(os.path.join(d, "first"), "wb") as fh:
        fh.write(b"1")  # the directory is written back from here on
    # A name made behind the client's back (on every brick): the client's
    # own view says it is free, the bricks refuse it.
    for b in bricks:
        with open(os.path.join(b, "d", "clash"), "wb") as fh:
            fh.write(b"brick's")
    with open(os.path.join(d, "clash"), "wb") as fh:
        fh.write(b"client's")
    with pytest.raises(OSError):
        fsync_dir(d)
    for b in bricks:
        with open(os.path.join(b, "d", "clash"), "rb") as fh:
            assert fh.read() == b"brick's"
    assert "write-back of clash" in m1.tail(1 << 20)
