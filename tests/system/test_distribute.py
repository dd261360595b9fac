"""Distributed volumes: a pure distribute volume of 3 bricks and a 2 x 3
distributed-replicate volume, on a real mount. Files spread over the bricks
by name hash; listings are complete and without duplicates; renames across
hash ranges leave link-to files that lookups follow; mkdir/rmdir reach every
brick; a second mount sees the same; a brick killed during a copy loses
nothing after heal. One cairnd per volume on 127.0.0.150-.159 (force)."""

import ctypes
import fcntl
import os
import re
import stat
import struct
import subprocess
import threading
import time

import pytest

from cairn_cluster import Cluster, fsync_dir, made_here, start_copy

HOST = "127.0.0.150"
HOST2 = "127.0.0.151"
PORT = 24990


def brick_files(brick, sub=""):
    """{name: ('file'|'linkto'|'dir', data)} of one brick directory."""
    out = {}
    d = os.path.join(brick, sub)
    for name in os.listdir(d):
        if name == ".cairn":
            continue
        p = os.path.join(d, name)
        st = os.lstat(p)
        if stat.S_ISDIR(st.st_mode):
            out[name] = ("dir", None)
        elif stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o1000 and st.st_size == 0:
            assert os.getxattr(p, "trusted.cairn.linkto")
            out[name] = ("linkto", None)
        else:
            with open(p, "rb") as f:
                out[name] = ("file", f.read())
    return out


def real_files(bricks, sub=""):
    """name -> list of brick indexes holding its data."""
    where = {}
    for i, b in enumerate(bricks):
        for name, (kind, _) in brick_files(b, sub).items():
            if kind == "file":
                where.setdefault(name, []).append(i)
    return where


def tree_diff(a, b):
    r = subprocess.run(["diff", "-r", "--no-dereference", "--exclude=.cairn", a, b],
                       capture_output=True, text=True)
    return r.returncode, r.stdout[-2000:]


@pytest.fixture
def dist3():
    with Cluster(host=HOST, port=PORT, prefix="dht-") as c:
        bricks = [c.brick_path(f"b{i}") for i in range(3)]
        for b in bricks:
            os.makedirs(b)
        c.cli("volume", "create", "dv", *[f"{HOST}:{b}" for b in bricks], "force")
        out = c.cli("volume", "info", "dv").stdout
        assert "Type: Distribute" in out and "Number of Bricks: 3\n" in out, out
        c.cli("volume", "start", "dv")
        m = c.mount("dv", os.path.join(c.root, "mnt"))
        yield c, bricks, m.path


def test_spread_listing_and_second_mount(dist3):
    c, bricks, mnt = dist3
    names = [f"file{i:03d}" for i in range(300)]
    for n in names:
        with open(os.path.join(mnt, n), "w") as f:
            f.write("content of " + n)
    where = real_files(bricks)
    assert sorted(where) == names
    assert all(len(v) == 1 for v in where.values()), "a file on two bricks"
    counts = [sum(1 for v in where.values() if v[0] == i) for i in range(3)]
    assert all(n > 50 for n in counts), counts
    # the root got its layout on first use, on every brick
    for b in bricks:
        assert len(os.getxattr(b, "trusted.cairn.layout")) == 8 + 8 * 3
    listing = os.listdir(mnt)
    assert len(listing) == len(set(listing)) == 300
    assert sorted(listing) == names
    # small readdir buffers: `ls` through getdents of 1 KiB pages
    r = subprocess.run(["python3", "-c", "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY);"
                        "print(len(list(os.scandir(sys.argv[1]))))", mnt],
                       capture_output=True, text=True)
    assert r.stdout.strip() == "300"
    for n in names[::7]:
        with open(os.path.join(mnt, n)) as f:
            assert f.read() == "content of " + n
    m2 = c.mount("dv", os.path.join(c.root, "mnt2"))
    assert sorted(os.listdir(m2.path)) == names
    for n in names[::11]:
        with open(os.path.join(m2.path, n)) as f:
            assert f.read() == "content of " + n
    st = os.statvfs(mnt)
    one = os.statvfs(bricks[0])
    # the bricks share one file system here: the sum is three times it
    assert st.f_blocks * st.f_frsize >= 2.9 * one.f_blocks * one.f_frsize


def test_rename_across_hashes_then_lookup_read_unlink(dist3):
    c, bricks, mnt = dist3
    for i in range(40):
        with open(os.path.join(mnt, f"src{i}"), "w") as f:
            f.write(f"payload {i}")
    before = real_files(bricks)
    for i in range(40):
        os.rename(os.path.join(mnt, f"src{i}"), os.path.join(mnt, f"dst{i}"))
    after = real_files(bricks)
    # the data did not move; names whose hash changed brick have link-tos
    for i in range(40):
        assert after[f"dst{i}"] == before[f"src{i}"]
    linktos = [n for b in bricks for n, (k, _) in brick_files(b).items() if k == "linkto"]
    assert len(linktos) > 10, linktos  # 2/3 of 40 renames change brick
    assert all(n.startswith("dst") for n in linktos)
    assert sorted(os.listdir(mnt)) == sorted(f"dst{i}" for i in range(40))
    m2 = c.mount("dv", os.path.join(c.root, "mnt2"))
    for i in range(40):
        for root in (mnt, m2.path):
            with open(os.path.join(root, f"dst{i}")) as f:
                assert f.read() == f"payload {i}"
        assert not os.path.exists(os.path.join(m2.path, f"src{i}"))
    # rename again (onto an existing name, and back to a name on its brick)
    os.rename(os.path.join(mnt, "dst0"), os.path.join(mnt, "dst1"))
    with open(os.path.join(m2.path, "dst1")) as f:
        assert f.read() == "payload 0"
    assert not os.path.exists(os.path.join(m2.path, "dst0"))
    # hard link across ranges
    os.link(os.path.join(mnt, "dst2"), os.path.join(mnt, "hard2"))
    with open(os.path.join(m2.path, "hard2")) as f:
        assert f.read() == "payload 2"
    assert os.stat(os.path.join(mnt, "dst2")).st_nlink == 2
    os.unlink(os.path.join(mnt, "hard2"))
    for i in range(1, 40):
        os.unlink(os.path.join(mnt, f"dst{i}"))
    assert os.listdir(mnt) == [] and os.listdir(m2.path) == []
    for b in bricks:  # no data and no link-to left behind
        assert brick_files(b) == {}, (b, brick_files(b))


def renameat2(old, new, flags):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(-100, os.fsencode(old), -100, os.fsencode(new), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), old)


def test_rename_exchange_across_bricks(dist3):
    c, bricks, mnt = dist3
    for i in range(12):
        for n in (f"p{i}", f"q{i}"):
            with open(os.path.join(mnt, n), "w") as f:
                f.write(n)
    os.mkdir(os.path.join(mnt, "dir"))
    with open(os.path.join(mnt, "dir", "inner"), "w") as f:
        f.write("inner")
    where = real_files(bricks)
    assert any(where[f"p{i}"] != where[f"q{i}"] for i in range(12))
    for i in range(12):
        renameat2(os.path.join(mnt, f"p{i}"), os.path.join(mnt, f"q{i}"), 2)  # EXCHANGE
    renameat2(os.path.join(mnt, "p0"), os.path.join(mnt, "dir"), 2)
    m2 = c.mount("dv", os.path.join(c.root, "mnt2")).path
    for root in (mnt, m2):
        with open(os.path.join(root, "dir")) as f:
            assert f.read() == "q0"
        with open(os.path.join(root, "p0", "inner")) as f:
            assert f.read() == "inner"
        for i in range(1, 12):
            with open(os.path.join(root, f"p{i}")) as f:
                assert f.read() == f"q{i}"
            with open(os.path.join(root, f"q{i}")) as f:
                assert f.read() == f"p{i}"
    for b in bricks:
        assert os.path.isdir(os.path.join(b, "p0"))
    os.unlink(os.path.join(mnt, "p0", "inner"))
    os.rmdir(os.path.join(mnt, "p0"))
    for n in os.listdir(mnt):
        os.unlink(os.path.join(mnt, n))
    for b in bricks:  # no data and no link-to left behind
        assert brick_files(b) == {}, (b, brick_files(b))


def test_user_file_that_looks_like_a_linkto(dist3):
    """An empty file whose mode is ---------T is a user's file, not a
    link-to: listed, looked up and removable."""
    c, bricks, mnt = dist3
    for i in range(6):
        p = os.path.join(mnt, f"sticky{i}")
        open(p, "w").close()
        os.chmod(p, 0o1000)
    m2 = c.mount("dv", os.path.join(c.root, "mnt2")).path
    assert sorted(os.listdir(m2)) == [f"sticky{i}" for i in range(6)]
    for i in range(6):
        st = os.stat(os.path.join(m2, f"sticky{i}"))
        assert stat.S_IMODE(st.st_mode) == 0o1000 and st.st_size == 0
        os.unlink(os.path.join(m2, f"sticky{i}"))
    assert os.listdir(mnt) == []


def test_mkdir_rmdir_nested(dist3):
    c, bricks, mnt = dist3
    os.makedirs(os.path.join(mnt, "a", "b", "c"))
    fsync_dir(mnt)  # a/b and a/b/c may be written back (a/ is this mount's)
    for b in bricks:
        assert os.path.isdir(os.path.join(b, "a", "b", "c"))
        assert len(os.getxattr(os.path.join(b, "a", "b"), "trusted.cairn.layout")) == 32
    d = os.path.join(mnt, "a", "b")
    for i in range(60):
        with open(os.path.join(d, f"n{i}"), "w") as f:
            f.write(str(i))
    os.chmod(d, 0o750)
    fsync_dir(mnt)  # written back: a/ is this mount's (test_writeback_on_distribute)
    for b in bricks:
        assert stat.S_IMODE(os.stat(os.path.join(b, "a", "b")).st_mode) == 0o750
    assert sorted(os.listdir(d)) == sorted(["c"] + [f"n{i}" for i in range(60)])
    assert len(real_files(bricks, "a/b")) == 60
    with pytest.raises(OSError) as e:
        os.rmdir(d)
    assert e.value.errno == 39  # ENOTEMPTY, and the directory is still everywhere
    for b in bricks:
        assert os.path.isdir(os.path.join(b, "a", "b", "c"))
    for i in range(60):
        os.unlink(os.path.join(d, f"n{i}"))
    os.rmdir(os.path.join(d, "c"))
    os.rename(d, os.path.join(mnt, "a", "moved"))
    fsync_dir(mnt)
    for b in bricks:
        assert os.path.isdir(os.path.join(b, "a", "moved"))
    os.rmdir(os.path.join(mnt, "a", "moved"))
    os.rmdir(os.path.join(mnt, "a"))
    assert os.listdir(mnt) == []
    fsync_dir(mnt)
    for b in bricks:
        assert brick_files(b) == {}


def test_concurrent_mkdir_two_mounts(dist3):
    """Two clients make the same directories at once: each name ends up on
    every brick, with one gfid everywhere, and exactly one mkdir of each name
    succeeds."""
    c, bricks, mnt = dist3
    m2 = c.mount("dv", os.path.join(c.root, "mnt2")).path
    names = [f"race{i}" for i in range(60)]
    wins, errors = {}, []
    both = threading.Barrier(2)  # the two mounts start each name's mkdir together

    def run(root, tag):
        for n in names:
            both.wait()
            try:
                os.mkdir(os.path.join(root, n))
                wins.setdefault(n, []).append(tag)
            except FileExistsError:
                pass
            except OSError as e:  # e.g. ENOENT: a copy half-made by one met the other
                errors.append((n, tag, e))

    ts = [threading.Thread(target=run, args=(r, t)) for r, t in ((mnt, 1), (m2, 2))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    assert sorted(wins) == sorted(names) and all(len(v) == 1 for v in wins.values()), wins
    for n in names:
        ids = {os.getxattr(os.path.join(b, n), "trusted.cairn.gfid") for b in bricks}
        assert len(ids) == 1, (n, ids)
        with open(os.path.join(m2, n, "f"), "w") as f:
            f.write(n)
    for n in names:
        with open(os.path.join(mnt, n, "f")) as f:
            assert f.read() == n


def test_stored_layout_is_used(dist3):
    """Placement follows the layout stored on the directory, not a formula:
    a directory whose layout gives every hash to brick 2 gets every file
    there (seen by a client that had not cached the directory)."""
    c, bricks, mnt = dist3
    os.mkdir(os.path.join(mnt, "skew"))
    lay = struct.pack("<8I", 1, 3, 1, 0, 1, 0, 0, 0xFFFFFFFF)
    for b in bricks:
        os.setxattr(os.path.join(b, "skew"), "trusted.cairn.layout", lay)
    m2 = c.mount("dv", os.path.join(c.root, "mnt2")).path
    for i in range(30):
        with open(os.path.join(m2, "skew", f"s{i}"), "w") as f:
            f.write(str(i))
    where = real_files(bricks, "skew")
    assert len(where) == 30 and all(v == [2] for v in where.values()), where
    assert sorted(os.listdir(os.path.join(mnt, "skew"))) == sorted(f"s{i}" for i in range(30))
    # a directory renamed onto a file is refused without touching any copy
    with open(os.path.join(mnt, "afile"), "w") as f:
        f.write("x")
    with pytest.raises(OSError) as e:
        os.rename(os.path.join(mnt, "skew"), os.path.join(mnt, "afile"))
    assert e.value.errno == 20  # ENOTDIR
    for b in bricks:
        assert os.path.isdir(os.path.join(b, "skew"))


def test_directory_times_from_every_copy(dist3):
    """A file created on any brick makes its directory's mtime move, although
    only that brick's copy of the directory changed. The directory is made
    by another mount, so this one's creates in it are not written back."""
    c, bricks, mnt = dist3
    d = os.path.join(mnt, "t")
    m2 = c.mount("dv", os.path.join(c.root, "mnt2")).path
    os.mkdir(os.path.join(m2, "t"))
    for i in range(12):
        old = time.time() - 1000
        os.utime(d, (old, old))
        with open(os.path.join(d, f"x{i}"), "w") as f:
            f.write("x")
        copies = [os.stat(os.path.join(b, "t")).st_mtime_ns for b in bricks]
        assert os.stat(d).st_mtime_ns == max(copies), (i, copies)
        assert os.stat(d).st_mtime > old + 500
    assert len({v[0] for v in real_files(bricks, "t").values()}) == 3


def test_directory_lock_waits_do_not_block(dist3):
    """Lock waits on a directory handle never hold the layer's workers:
    namespace operations go on while many wait."""
    c, bricks, mnt = dist3
    os.mkdir(os.path.join(mnt, "d"))
    fd = os.open(os.path.join(mnt, "d"), os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    waiters = [subprocess.Popen(["flock", os.path.join(mnt, "d"), "true"]) for _ in range(6)]
    try:
        time.sleep(0.5)
        t0 = time.time()
        os.mkdir(os.path.join(mnt, "e"))
        assert sorted(os.listdir(mnt)) == ["d", "e"]
        assert time.time() - t0 < 2
        assert all(w.poll() is None for w in waiters)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        for w in waiters:
            w.wait(timeout=20)
    assert all(w.returncode == 0 for w in waiters)


def io_stats(mnt):
    return os.getxattr(mnt, "trusted.cairn.io-stats").decode()


def fetched_bytes(mnt):
    m = re.search(r"^FUSE read cache: \d+ reads answered, (\d+) bytes fetched", io_stats(mnt), re.M)
    assert m, io_stats(mnt)
    return int(m.group(1))


def test_files_cached_under_their_own_lease(dist3):
    """A file lives on one brick, whose lease on it the layer passes up:
    another mount caches its reads (windows), and sees every change the
    first mount makes to it at once (write, truncate, chmod, rename,
    removal), whichever brick the names hash to."""
    c, bricks, mnt = dist3
    win, page = 128 * 1024, 4096
    data = {}
    for k in range(6):
        data[f"f{k}"] = bytearray(os.urandom(4 * win))
        with open(os.path.join(mnt, f"f{k}"), "wb") as f:
            f.write(data[f"f{k}"])
    other = c.mount("dv", os.path.join(c.root, "mnt2")).path
    fds = {n: os.open(os.path.join(other, n), os.O_RDONLY) for n in data}
    try:
        before = fetched_bytes(other)
        for n, fd in fds.items():
            for off in (win + page, win + 5 * page, 2 * win + 3 * page):
                assert os.pread(fd, page, off) == data[n][off:off + page]
        assert fetched_bytes(other) - before >= 6 * win, io_stats(other)
        # a write through the first mount is seen through the cached file
        new = os.urandom(page)
        with open(os.path.join(mnt, "f0"), "r+b", buffering=0) as w:
            w.seek(win + 5 * page)
            w.write(new)
        assert os.pread(fds["f0"], page, win + 5 * page) == new
        os.truncate(os.path.join(mnt, "f1"), win)
        assert os.fstat(fds["f1"]).st_size == win
        assert os.stat(os.path.join(other, "f1")).st_size == win
        os.chmod(os.path.join(mnt, "f2"), 0o600)
        assert stat.S_IMODE(os.stat(os.path.join(other, "f2")).st_mode) == 0o600
        os.rename(os.path.join(mnt, "f3"), os.path.join(mnt, "moved3"))
        assert not os.path.exists(os.path.join(other, "f3"))
        with open(os.path.join(other, "moved3"), "rb") as f:
            assert f.read() == data["f3"]
        with open(os.path.join(mnt, "moved3"), "r+b", buffering=0) as w:
            w.seek(win + page)
            w.write(new)
        assert os.pread(fds["f3"], page, win + page) == new
        os.unlink(os.path.join(mnt, "f4"))
        assert not os.path.exists(os.path.join(other, "f4"))
        # a file replaced by another under its name
        with open(os.path.join(mnt, "tmp5"), "wb") as f:
            f.write(b"replacement")
        os.rename(os.path.join(mnt, "tmp5"), os.path.join(mnt, "f5"))
        with open(os.path.join(other, "f5"), "rb") as f:
            assert f.read() == b"replacement"
    finally:
        for fd in fds.values():
            os.close(fd)


def behind(mnt):
    m = re.search(r"^FUSE write-behind: (\d+) writes answered early", io_stats(mnt), re.M)
    assert m, io_stats(mnt)
    return int(m.group(1))


def test_existing_files_written_behind(dist3):
    """An existing file opened for writing is granted exclusively by the
    brick holding it, so its writes are written behind; another mount sees
    each one once the write returned (its stat, listing and reads wait for
    the lease to come back)."""
    c, bricks, mnt = dist3
    size = 1 << 20
    names = [f"w{k}" for k in range(4)]
    for n in names:
        with open(os.path.join(mnt, n), "wb") as f:
            f.write(b"\0" * size)
    other = c.mount("dv", os.path.join(c.root, "mnt2")).path
    model = {n: bytearray(size) for n in names}
    rnd = __import__("random").Random(7)
    before = behind(mnt)
    for n in names:
        fd = os.open(os.path.join(mnt, n), os.O_WRONLY)
        try:
            for i in range(200):
                off = rnd.randrange(size // 4096) * 4096
                buf = os.urandom(512)
                os.pwrite(fd, buf, off)
                model[n][off:off + 512] = buf
            with open(os.path.join(other, n), "rb") as f:
                assert f.read() == model[n], n
            assert os.stat(os.path.join(other, n)).st_size == size
            tail = os.urandom(100)
            os.pwrite(fd, tail, size)
            model[n] += tail
            assert os.stat(os.path.join(other, n)).st_size == size + 100
            listed = {e.name: e.stat().st_size for e in os.scandir(other)}
            assert listed[n] == size + 100
        finally:
            os.close(fd)
    assert behind(mnt) - before >= 100, io_stats(mnt)
    for n in names:
        with open(os.path.join(other, n), "rb") as f:
            assert f.read() == model[n], n


def test_writeback_on_distribute(dist3):
    """A directory this mount made holds every brick's exclusive lease, so
    files and directories made in it are answered here and written back to
    the bricks their names hash to. Another mount's create in one of them,
    whichever brick the name hashes to, is seen at once by the first mount
    (which had the name's absence cached), and the other mount sees every
    file the first made."""
    c, bricks, mnt = dist3
    before = made_here(mnt)
    top = os.path.join(mnt, "top")
    os.mkdir(top)
    made = {}
    for i in range(12):
        d = os.path.join(top, f"d{i}")
        os.mkdir(d)
        made[i] = {f"f{k}": os.urandom(100 + 37 * k + i) for k in range(5)}
        for n, data in made[i].items():
            with open(os.path.join(d, n), "wb") as f:
                f.write(data)
        assert not os.path.exists(os.path.join(d, f"x{i}"))  # answered here
    assert made_here(mnt) - before == 60, io_stats(mnt)
    other = c.mount("dv", os.path.join(c.root, "mnt2")).path
    landed = set()
    for i, mine in made.items():
        with open(os.path.join(other, "top", f"d{i}", f"x{i}"), "wb") as f:
            f.write(b"from the other mount")
        d = os.path.join(top, f"d{i}")
        with open(os.path.join(d, f"x{i}"), "rb") as f:
            assert f.read() == b"from the other mount"
        assert sorted(os.listdir(d)) == sorted([*mine, f"x{i}"])
        for n, data in mine.items():
            with open(os.path.join(other, "top", f"d{i}", n), "rb") as f:
                assert f.read() == data, (i, n)
        landed |= {k for k, b in enumerate(bricks)
                   if os.path.exists(os.path.join(b, "top", f"d{i}", f"x{i}"))}
    assert landed == {0, 1, 2}, landed
    fsync_dir(mnt)
    for i, mine in made.items():
        where = real_files(bricks, f"top/d{i}")
        assert sorted(where) == sorted([*mine, f"x{i}"]), (i, where)
        for n, data in mine.items():
            assert len(where[n]) == 1
            with open(os.path.join(bricks[where[n][0]], "top", f"d{i}", n), "rb") as f:
                assert f.read() == data, (i, n)


def test_fsync_then_kill_on_distribute(dist3):
    """Files fsynced in a written-back directory are on the brick their
    name hashes to when the client is killed -9 right after; whatever else
    reached a brick is whole."""
    c, bricks, mnt = dist3
    d = os.path.join(mnt, "d")
    os.mkdir(d)
    want = {}
    for i in range(60):
        want[f"s{i}"] = os.urandom(200 + 41 * i)
        fd = os.open(os.path.join(d, f"s{i}"), os.O_CREAT | os.O_WRONLY, 0o644)
        os.write(fd, want[f"s{i}"])
        if i < 30:
            os.fsync(fd)
        os.close(fd)
    proc = c.mounts[0].proc
    proc.send_signal(9)
    proc.wait(timeout=10)
    where = real_files(bricks, "d")
    for i in range(30):
        assert len(where.get(f"s{i}", [])) == 1, (i, where.get(f"s{i}"))
    for n, at in where.items():
        for k in at:
            with open(os.path.join(bricks[k], "d", n), "rb") as f:
                assert f.read() == want[n], (k, n)


def test_brick_down_others_work(dist3):
    """A stopped brick of a pure distribute volume: after one ping-timeout the
    names on the other bricks list, read and get created at full speed; names
    hashed to the stopped brick fail with ENOTCONN; all is back after."""
    c, bricks, mnt = dist3
    c.cli("volume", "set", "dv", "network.ping-timeout", "2")
    names = [f"g{i}" for i in range(60)]
    for n in names:
        with open(os.path.join(mnt, n), "w") as f:
            f.write(n)
    where = real_files(bricks)
    pid = [s[3] for s in c.brick_status("dv") if s[1] == bricks[2]][0]
    c.stop_signal(pid)
    time.sleep(3.5)  # one ping-timeout, then the brick is skipped
    t0 = time.time()
    listing = os.listdir(mnt)
    assert sorted(listing) == sorted(n for n in names if where[n] != [2])
    for n in names:
        if where[n] != [2]:
            with open(os.path.join(mnt, n)) as f:
                assert f.read() == n
    os.statvfs(mnt)
    made, refused = 0, 0
    for i in range(30):
        try:
            with open(os.path.join(mnt, f"new{i}"), "w") as f:
                f.write("x")
            made += 1
        except OSError as e:
            assert e.errno == 107, e  # ENOTCONN
            refused += 1
    assert made > 10 and refused > 3, (made, refused)
    with pytest.raises(OSError) as e:
        os.mkdir(os.path.join(mnt, "nodir"))
    assert e.value.errno == 107
    assert time.time() - t0 < 5, "operations waited for the stopped brick"
    c.cont(pid)
    end = time.time() + 20
    while len(os.listdir(mnt)) != 60 + made:
        assert time.time() < end, len(os.listdir(mnt))
        time.sleep(0.5)
    os.mkdir(os.path.join(mnt, "nodir"))


def make_source(root, n):
    src = os.path.join(root, "src")
    for i in range(n):
        d = os.path.join(src, f"d{i // 100}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i}"), "wb") as f:
            f.write(os.urandom(200 + (i * 37) % 3000))
    return src


def test_distributed_replicate_kill_brick_then_heal():
    with Cluster(host=HOST2, port=PORT, prefix="dht-") as c:
        bricks = [c.brick_path(f"r{i}") for i in range(6)]
        for b in bricks:
            os.makedirs(b)
        c.cli("volume", "create", "drv", "replica", "3", *[f"{HOST2}:{b}" for b in bricks],
              "force")
        out = c.cli("volume", "info", "drv").stdout
        assert "Type: Distributed-Replicate" in out and "Number of Bricks: 2 x 3 = 6" in out
        c.cli("volume", "set", "drv", "network.ping-timeout", "2")
        c.cli("volume", "start", "drv")
        mnt = c.mount("drv", os.path.join(c.root, "mnt")).path
        src = make_source(c.root, 4000)
        pid = c.brick_status("drv")[1][3]  # second brick of the first set
        cp = start_copy(src, os.path.join(mnt, "copy"))
        os.kill(pid, 9)  # cairnd restarts it; it comes back stale
        _, err = cp.communicate(timeout=120)
        assert cp.returncode == 0, err
        rc, out = tree_diff(src, os.path.join(mnt, "copy"))
        assert rc == 0, out
        fsync_dir(mnt)
        # both sets hold data, each file in one set only
        sets = [bricks[0:3], bricks[3:6]]
        total = 0
        for sub in sorted(os.listdir(src)):
            where = real_files([sets[0][0], sets[1][0]], f"copy/{sub}")
            assert sorted(where) == sorted(os.listdir(os.path.join(src, sub)))
            assert all(len(v) == 1 for v in where.values())
            total += len(where)
        assert total == 4000
        first = sum(len(real_files([sets[0][0]], f"copy/{s}")) for s in os.listdir(src))
        assert 1000 < first < 3000, first
        # after heal every replica of a set is identical
        end = time.time() + 60
        while True:
            c.cli("volume", "heal", "drv", check=False)
            diffs = [tree_diff(s[0], s[k]) for s in sets for k in (1, 2)]
            if all(d[0] == 0 for d in diffs):
                break
            assert time.time() < end, [d[1] for d in diffs if d[0]]
            time.sleep(1)
        info = c.cli("volume", "heal", "drv", "info").stdout
        assert info.count("Number of entries: 0") == 6, info
        m2 = c.mount("drv", os.path.join(c.root, "mnt2")).path
        rc, out = tree_diff(src, os.path.join(m2, "copy"))
        assert rc == 0, out
        # renames across hash ranges while a brick of the second set hangs:
        # heal brings its link-to files (and their xattr) in line
        pid = c.brick_status("drv")[4][3]
        c.stop_signal(pid)
        time.sleep(3)  # one ping-timeout
        d0 = os.path.join(mnt, "copy", "d0")
        for i in range(40):
            os.rename(os.path.join(d0, f"f{i}"), os.path.join(d0, f"r{i}"))
        c.cont(pid)
        end = time.time() + 60
        while True:
            c.cli("volume", "heal", "drv", check=False)
            views = [[brick_files(b, "copy/d0") for b in s] for s in sets]
            if all(v[0] == v[1] == v[2] for v in views):
                break
            assert time.time() < end, "replicas of a set differ after heal"
            time.sleep(1)
        n_link = 0
        for s in sets:
            for name, (kind, _) in brick_files(s[0], "copy/d0").items():
                if kind == "linkto":
                    n_link += 1
                    vals = {os.getxattr(os.path.join(b, "copy/d0", name),
                                        "trusted.cairn.linkto") for b in s}
                    assert len(vals) == 1, (name, vals)
        assert n_link > 5, n_link
        m3 = c.mount("drv", os.path.join(c.root, "mnt3")).path
        for i in range(40):
            with open(os.path.join(m3, "copy", "d0", f"r{i}"), "rb") as f, \
                    open(os.path.join(src, "d0", f"f{i}"), "rb") as g:
                assert f.read() == g.read()
