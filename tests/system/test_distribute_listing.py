"""Listings of a distribute volume (3 bricks) under leases: a merged
listing carries each entry's lease (from the brick that listed it) and a
lease on the whole listing (every brick's copy of the directory granted
one), so a second look asks no brick, and another client's change on any
brick is seen at the next look; and its cookies, which name a (brick,
brick cookie) pair in a table of the layer, resume on any handle. One
cairnd on 127.0.0.152."""

import ctypes
import os
import re
import stat
import subprocess

import pytest

from cairn_cluster import Cluster, fsync_dir

HOST = "127.0.0.152"
PORT = 24992


@pytest.fixture
def dvol():
    with Cluster(host=HOST, port=PORT, prefix="dhl-") as c:
        bricks = [c.brick_path(f"b{i}") for i in range(3)]
        for b in bricks:
            os.makedirs(b)
        c.cli("volume", "create", "lv", *[f"{HOST}:{b}" for b in bricks], "force")
        c.cli("volume", "start", "lv")
        m = c.mount("lv", os.path.join(c.root, "mnt"))
        yield c, bricks, m.path


NAMESPACE_READS = ("LOOKUP", "GETATTR", "GETXATTR", "OPENDIR", "READDIR", "RELEASEDIR")


def brick_reads(c, vol):
    """Lookups, attribute reads and listings every brick has answered
    (the cumulative counters of `volume profile info`)."""
    r = c.cli("volume", "profile", vol, "info", "cumulative")
    total = 0
    for line in r.stdout.splitlines():
        m = re.match(r"^\s+[\d.]+\s+[\d.]+ us\s+[\d.]+ us\s+(\d+)\s+(\w+)$", line)
        if m and m.group(2) in NAMESPACE_READS:
            total += int(m.group(1))
    return total


def on_brick(bricks, sub):
    """{name: index of the brick holding its data} below sub."""
    out = {}
    for i, b in enumerate(bricks):
        for name in os.listdir(os.path.join(b, sub)):
            st = os.lstat(os.path.join(b, sub, name))
            if stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) != 0o1000:
                out[name] = i
    return out


def look(d):
    """What `ls -ln` shows of d's entries, as a listing and its stats:
    name, type and mode, links, owner, size and a file's mtime."""
    out = []
    with os.scandir(d) as it:
        for e in it:
            st = e.stat(follow_symlinks=False)
            mtime = None if stat.S_ISDIR(st.st_mode) else st.st_mtime_ns
            out.append((e.name, st.st_mode, st.st_nlink, st.st_uid, st.st_size, mtime))
    return sorted(out)


def test_listing_cached_under_every_bricks_lease(dvol):
    c, bricks, mnt = dvol
    d = os.path.join(mnt, "d")
    os.mkdir(d)
    for k in range(30):
        with open(os.path.join(d, f"f{k}"), "wb") as f:
            f.write(b"x" * (k + 1))
    os.mkdir(os.path.join(d, "sub"))
    fsync_dir(d)
    where = on_brick(bricks, "d")
    assert set(where.values()) == {0, 1, 2}, where
    other = c.mount("lv", os.path.join(c.root, "mnt2")).path
    od = os.path.join(other, "d")
    # the first look is cold, the second fills the kernel's listing cache
    assert look(od) == look(d)
    subprocess.run(["ls", "-lR", od], check=True, capture_output=True)
    names = sorted(os.listdir(d))
    before = brick_reads(c, "lv")
    assert before > 0
    for _ in range(3):
        assert sorted(os.listdir(od)) == names
        for n in os.listdir(od):
            os.lstat(os.path.join(od, n))
        subprocess.run(["ls", "-lR", od], check=True, capture_output=True)
    assert brick_reads(c, "lv") == before
    # a change through the first mount, on each brick, is seen at the next look
    first = {}
    for name, i in sorted(where.items()):
        first.setdefault(i, name)
    changes = [
        lambda: os.chmod(os.path.join(d, first[0]), 0o600),
        lambda: os.unlink(os.path.join(d, first[1])),
        lambda: os.rename(os.path.join(d, first[2]), os.path.join(d, "renamed")),
        lambda: os.truncate(os.path.join(d, "f20"), 7000),
        lambda: os.mkdir(os.path.join(d, "newdir")),
        lambda: os.rmdir(os.path.join(d, "sub")),
        lambda: os.link(os.path.join(d, "f21"), os.path.join(d, "hard")),
        lambda: os.symlink("f22", os.path.join(d, "sym")),
    ]
    for k in range(9):  # new names hash to every brick
        changes.append(lambda k=k: open(os.path.join(d, f"new{k}"), "wb").close())
    for change in changes:
        change()
        assert look(od) == look(d)
    assert set(on_brick(bricks, "d").values()) == {0, 1, 2}


def brick_calls(c, vol, fop):
    """Calls of fop every brick has answered (cumulative)."""
    r = c.cli("volume", "profile", vol, "info", "cumulative")
    return sum(int(m.group(1)) for m in re.finditer(
        rf"^\s+[\d.]+\s+[\d.]+ us\s+[\d.]+ us\s+(\d+)\s+{fop}$", r.stdout, re.M))


def test_directories_listed_with_every_copys_times(dvol):
    """A directory has a copy on every brick, and a file made in it changes
    only its brick's copy's mtime. A listing shows each subdirectory with
    the latest times of all copies, under a lease: stat asks no brick
    (neither a GETATTR nor a LOOKUP)."""
    c, bricks, mnt = dvol
    d = os.path.join(mnt, "d")
    os.mkdir(d)
    subs = [f"s{k}" for k in range(8)]
    for s in subs:
        os.mkdir(os.path.join(d, s))
    fsync_dir(d)
    for s in subs:
        open(os.path.join(d, s, "f"), "wb").close()
        fsync_dir(os.path.join(d, s))
    want = {}
    for s in subs:
        times = [os.stat(os.path.join(b, "d", s)).st_mtime_ns for b in bricks]
        want[s] = max(times)
    assert any(len({os.stat(os.path.join(b, "d", s)).st_mtime_ns for b in bricks}) > 1
               for s in subs), "every copy has the same mtime: nothing to merge"
    other = c.mount("lv", os.path.join(c.root, "mnt2")).path
    with os.scandir(os.path.join(other, "d")) as it:
        entries = list(it)
    before = brick_calls(c, "lv", "GETATTR") + brick_calls(c, "lv", "LOOKUP")
    got = {e.name: e.stat(follow_symlinks=False).st_mtime_ns for e in entries}
    got.update({s: os.lstat(os.path.join(other, "d", s)).st_mtime_ns for s in subs})
    assert got == want
    assert brick_calls(c, "lv", "GETATTR") + brick_calls(c, "lv", "LOOKUP") == before


class Dirent64(ctypes.Structure):
    _fields_ = [("d_ino", ctypes.c_uint64), ("d_off", ctypes.c_int64),
                ("d_reclen", ctypes.c_ushort), ("d_type", ctypes.c_ubyte)]


libc = ctypes.CDLL(None, use_errno=True)
SYS_getdents64 = 217  # x86_64


def getdents(fd, size):
    """[(name, d_off)] of one getdents64 call with a size-byte buffer."""
    buf = ctypes.create_string_buffer(size)
    n = libc.syscall(SYS_getdents64, fd, buf, size)
    if n < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    out, pos = [], 0
    while pos < n:
        ent = Dirent64.from_buffer(buf, pos)
        name = buf.raw[pos + 19:pos + ent.d_reclen].split(b"\0", 1)[0].decode()
        out.append((name, ent.d_off))
        pos += ent.d_reclen
    return out


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="getdents64 number")
def test_listing_resumes_on_another_handle(dvol):
    """A listing read part way, its directory closed, and the rest read from
    the last offset on a new handle: every entry once. On ext4 bricks the
    brick cookies are too large for the layer's direct form, so the offsets
    name slots of its cookie table, which a new handle reads as well."""
    c, bricks, mnt = dvol
    other = c.mount("lv", os.path.join(c.root, "mnt2")).path
    d = os.path.join(mnt, "big")
    os.mkdir(d)
    names = {f"entry-with-a-longer-name-{k:04d}" for k in range(600)}
    for n in names:
        open(os.path.join(d, n), "wb").close()
    fsync_dir(d)
    od = os.path.join(other, "big")
    for resume_after in (1, 2, 5):
        seen = []
        fd = os.open(od, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for _ in range(resume_after):
                part = getdents(fd, 4096)
                assert part
                seen += part
        finally:
            os.close(fd)
        fd = os.open(od, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.lseek(fd, seen[-1][1], os.SEEK_SET)
            while True:
                part = getdents(fd, 4096)
                if not part:
                    break
                seen += part
        finally:
            os.close(fd)
        got = [n for n, _ in seen if n not in (".", "..")]
        assert len(got) == len(set(got)), "an entry listed twice"
        assert set(got) == names


def io_rounds(mnt, fop):
    """(calls, round trips) of fop in the mount's io-stats."""
    text = os.getxattr(mnt, "trusted.cairn.io-stats").decode()
    m = re.search(rf"^{fop}\s+(\d+)\s+(\d+)\s", text, re.M)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def test_round_trips_counted_through_the_layer(dvol):
    """The mount's io-stats count the round trips of what the layer asked
    the bricks for an operation: a listing of three small copies is one
    page read from each in turn, a file's first lookup at least one."""
    c, bricks, mnt = dvol
    d = os.path.join(mnt, "d")
    os.mkdir(d)
    for k in range(12):
        open(os.path.join(d, f"f{k}"), "wb").close()
    fsync_dir(d)
    assert set(on_brick(bricks, "d").values()) == {0, 1, 2}
    other = c.mount("lv", os.path.join(c.root, "mnt2")).path
    os.stat(os.path.join(other, "d", "f0"))
    calls, rounds = io_rounds(other, "LOOKUP")
    assert calls >= 2 and rounds >= calls
    os.listdir(os.path.join(other, "d"))
    calls, rounds = io_rounds(other, "READDIR")
    assert calls >= 1 and rounds >= 3
