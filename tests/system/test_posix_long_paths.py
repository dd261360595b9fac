"""Long volume paths (docs/consistency.md, "Path length").

A Linux client names at most PATH_MAX - 1 = 4,095 bytes at once, but an
application working relative to a deep directory (openat, chdir) goes
deeper. Every volume path up to 4,095 bytes works for every operation,
wherever the bricks are mounted; a name that would make a longer one is
refused with ENAMETOOLONG by the call that makes it, write-back on or
off, never accepted and lost later. Checked on the replica 3 and the
2 x 3 volume, on bricks whose own paths are short and over 2,000 bytes
long, through both mounts, a fresh mount and every brick's bytes; and a
file at such a path written while a brick is killed heals.

The tests reach deep directories by chdir and *at() calls: no absolute
path of 4,096 bytes or more can be passed to the kernel.

Run: unshare -n sh -c 'ip link set lo up; CAIRN_BUILD=$PWD/build \
     /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/system/test_posix_long_paths.py'
"""

import contextlib
import errno
import os
import re
import signal
import stat
import time
import uuid

import pytest

from cairn_cluster import Cluster, alive, fsync_dir, made_here

LIMIT = 4095  # bytes of the longest volume path
FIRST = LIMIT - 5  # the tests use every length from FIRST to LIMIT
LONG_HOST = "127.0.0.120"  # the cluster with deep bricks


# ---- a deep directory, reached one component at a time ----

class Deep:
    """Directories below a test directory whose volume path is `dlen`
    bytes: the components, and fds of the deepest one through any base
    (a mount's or a brick's copy of the test directory)."""

    def __init__(self, top, dlen, last=None):
        """last: the length of the deepest component (any when None)."""
        self.top = top  # the test directory's volume path, "/name"
        self.dlen = dlen
        self.comps = []
        left = dlen - len(top) - (last + 1 if last else 0)
        i = 0
        while left:
            n = left - 1 if left <= 256 else 200 if left - 201 >= 2 else 100
            self.comps.append((f"d{i:02d}-" + "c" * 255)[:n])
            left -= n + 1
            i += 1
        if last:
            self.comps.append(("last-" + "c" * 255)[:last])
        assert len(self.path()) == dlen

    def path(self, name=None):
        p = self.top + "".join("/" + c for c in self.comps)
        return p + "/" + name if name else p

    def open(self, base, create=False):
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for c in self.comps:
                if create:
                    os.mkdir(c, 0o755, dir_fd=fd)
                nfd = os.open(c, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd = nfd
        except BaseException:
            os.close(fd)
            raise
        return fd


@contextlib.contextmanager
def inside(fd):
    """The working directory is fd's for the block: relative names reach
    what no absolute path can."""
    old = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    os.chdir(fd)
    try:
        yield
    finally:
        os.chdir(old)
        os.close(old)


def name_of(kind, total, deep):
    """A name of kind in deep's directory whose volume path is total bytes."""
    n = total - deep.dlen - 1
    assert 1 <= n <= 255
    return (f"{kind}{total}-" + "n" * 255)[:n]


def enametoolong(fn, *args, **kw):
    with pytest.raises(OSError) as e:
        fn(*args, **kw)
    assert e.value.errno == errno.ENAMETOOLONG, f"{fn.__name__}: {e.value}"


def read_at(name):
    fd = os.open(name, os.O_RDONLY)
    try:
        out = b""
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return out
            out += chunk
    finally:
        os.close(fd)


def write_at(name, data, flags=os.O_CREAT | os.O_WRONLY | os.O_EXCL):
    fd = os.open(name, flags, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


# ---- what every length up to the limit must do ----

KINDS = "fdspchr"  # file, directory, symlink, FIFO, char device, hard link, renamed


def make_all(a, deep, totals):
    """Every operation at every length, through the mount at a (the test
    directory there); returns what each name must hold."""
    want = {}
    fd = deep.open(a, create=True)
    try:
        with inside(fd):
            for t in totals:
                f, d, s, p, c, h, r = (name_of(k, t, deep) for k in KINDS)
                data = os.urandom(1000 + t)
                write_at(f, data)
                assert os.stat(f).st_size == len(data)
                assert read_at(f) == data
                os.setxattr(f, "user.long", f"v{t}".encode(), follow_symlinks=False)
                os.lchown(f, 1234, 5678)
                os.mkdir(d, 0o750)
                os.symlink(f"target-{t}", s)
                os.lchown(s, 2345, 6789)
                os.mkfifo(p, 0o640)
                os.mknod(c, stat.S_IFCHR | 0o600, os.makedev(1, 3))
                os.link(f, h)
                assert os.stat(h).st_nlink == 2
                # rename: from a short name, then between two long ones
                write_at(f"o{t}", b"renamed %d" % t)
                os.rename(f"o{t}", r)
                r2 = name_of("q", t, deep)
                os.rename(r, r2)
                os.rename(r2, r)
                assert not os.path.lexists(r2) and not os.path.lexists(f"o{t}")
                # made and removed: a file, a directory
                u, e = name_of("u", t, deep), name_of("e", t, deep)
                write_at(u, b"gone")
                os.unlink(u)
                os.mkdir(e)
                os.rmdir(e)
                assert not os.path.lexists(u) and not os.path.lexists(e)
                linked = dict(kind="f", data=data, xattr=f"v{t}".encode(),
                              owner=(1234, 5678), nlink=2)
                want[f] = want[h] = linked
                want[d] = dict(kind="d")
                want[s] = dict(kind="s", target=f"target-{t}", owner=(2345, 6789))
                want[p] = dict(kind="p")
                want[c] = dict(kind="c", rdev=os.makedev(1, 3))
                want[r] = dict(kind="f", data=b"renamed %d" % t)
        os.fsync(fd)  # what was written back is on the bricks
    finally:
        os.close(fd)
    return want


def check_object(name, st, w, where):
    """The object name (in the cwd, lstat st) is what w says."""
    what = (where, name[:12])
    if w["kind"] == "f":
        assert stat.S_ISREG(st.st_mode) and read_at(name) == w["data"], what
        assert st.st_nlink == w.get("nlink", 1), what
        if "xattr" in w:
            assert os.getxattr(name, "user.long", follow_symlinks=False) == w["xattr"], what
    elif w["kind"] == "d":
        assert stat.S_ISDIR(st.st_mode) and os.listdir(name) == [], what
    elif w["kind"] == "s":
        assert stat.S_ISLNK(st.st_mode) and os.readlink(name) == w["target"], what
    elif w["kind"] == "p":
        assert stat.S_ISFIFO(st.st_mode), what
    else:
        assert stat.S_ISCHR(st.st_mode) and st.st_rdev == w["rdev"], what
    assert (st.st_uid, st.st_gid) == w.get("owner", (0, 0)), what


def check_view(base, deep, want, where):
    """The mount at base (the test directory there) shows want exactly."""
    fd = deep.open(base)
    try:
        with inside(fd):
            assert sorted(os.listdir(".")) == sorted(want), where
            for name, w in want.items():
                check_object(name, os.lstat(name), w, where)
    finally:
        os.close(fd)


def is_linkto(name, st):
    """A distribute link-to file (docs/brick-format.md), in the cwd."""
    if not stat.S_ISREG(st.st_mode) or stat.S_IMODE(st.st_mode) != stat.S_ISVTX or st.st_size:
        return False
    try:
        os.getxattr(name, "trusted.cairn.linkto", follow_symlinks=False)
        return True
    except OSError:
        return False


def check_bricks(bricks, tname, deep, want, sets):
    """Every brick holds what the mount shows: each directory on every
    brick, every other object on all bricks of exactly one replica set,
    with the same bytes, ids and attributes; nothing else."""
    held = {name: [] for name in want}
    for i, b in enumerate(bricks):
        fd = deep.open(os.path.join(b, tname))
        try:
            with inside(fd):
                for name in os.listdir("."):
                    st = os.lstat(name)
                    if is_linkto(name, st):
                        continue
                    assert name in want, f"brick {b}: {name[:12]}... is not on the mount"
                    check_object(name, st, want[name], b)
                    gfid = os.getxattr(name, "trusted.cairn.gfid", follow_symlinks=False)
                    held[name].append((i, gfid))
        finally:
            os.close(fd)
    per_set = len(bricks) // sets
    for name, h in held.items():
        where, gfids = [i for i, _ in h], {g for _, g in h}
        assert len(gfids) == 1, f"{name[:12]}...: copies with different ids"
        if want[name]["kind"] == "d":
            assert where == list(range(len(bricks))), (name[:12], where)
        else:
            assert len(where) == per_set and where[0] % per_set == 0 and \
                where == list(range(where[0], where[0] + per_set)), (name[:12], where)


def heal_info_clean(cluster, vol, n_bricks):
    out = cluster.cli("volume", "heal", vol, "info").stdout
    return out.count("Number of entries: 0") == n_bricks, out


def fresh_mount(cluster, vol):
    return cluster.mount(vol, os.path.join(cluster.root, f"fresh-{uuid.uuid4().hex[:8]}"))


def drop_mount(cluster, m):
    m.stop()
    cluster.mounts.remove(m)


def every_length(cluster, vol, a, b, bricks, sets, tname, deep):
    """All of it on one volume: through mount a, seen through b, a fresh
    mount and the bricks."""
    totals = range(FIRST, LIMIT + 1)
    want = make_all(a, deep, totals)
    check_view(b, deep, want, "the other mount")
    m = fresh_mount(cluster, vol)
    try:
        check_view(os.path.join(m.path, tname), deep, want, "a fresh mount")
    finally:
        drop_mount(cluster, m)
    check_bricks(bricks, tname, deep, want, sets)
    ok, out = heal_info_clean(cluster, vol, len(bricks))
    assert ok, out


def test_every_operation_up_to_the_limit(tdir_replicated):
    t = tdir_replicated
    v = t.vol
    deep = Deep("/" + t.name, FIRST - 101)  # names of 100 to 105 bytes
    every_length(v.cluster, v.name, t.a, t.b, v.bricks, len(v.bricks) // 3, t.name, deep)


# ---- one byte more ----

@contextlib.contextmanager
def write_back(v, on, probe_dir):
    """client.write-back set on the volume for the block (back on after),
    once mount m1 behaves so: a create in probe_dir (a directory m1 made
    and holds) is written back, or not."""
    if not on:
        v.cluster.cli("volume", "set", v.name, "client.write-back", "off")
    try:
        end = time.time() + 20
        i = 0
        while True:
            before = made_here(v.m1)
            write_at(os.path.join(probe_dir, f"probe{i}"), b"p")
            if (made_here(v.m1) > before) == on:
                break
            assert time.time() < end, f"mount m1 did not take client.write-back {on}"
            i += 1
            time.sleep(0.2)
        yield
    finally:
        if not on:
            v.cluster.cli("volume", "set", v.name, "client.write-back", "on")


def refuse_past_the_limit(a, deep):
    """Every call that would make a path past the limit fails with
    ENAMETOOLONG; the longest one is made. Returns what the directory
    must hold."""
    want = {}
    fd = deep.open(a, create=True)
    try:
        with inside(fd):
            ok = name_of("f", LIMIT, deep)
            write_at(ok, b"the longest")
            want[ok] = dict(kind="f", data=b"the longest")
            top = name_of("d", LIMIT, deep)
            os.mkdir(top)  # a directory of the longest path: nothing fits in it
            want[top] = dict(kind="d")
            over = [LIMIT + 1, LIMIT + 2, LIMIT + 10, deep.dlen + 1 + 255]
            for t in over:
                f, d, s, p, c, h, r = (name_of(k, t, deep) for k in KINDS)
                enametoolong(write_at, f, b"lost?")
                enametoolong(os.open, f, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
                enametoolong(os.mkdir, d)
                enametoolong(os.symlink, "x", s)
                enametoolong(os.mkfifo, p)
                enametoolong(os.mknod, c, stat.S_IFCHR | 0o600, os.makedev(1, 3))
                enametoolong(os.link, ok, h)
                enametoolong(os.rename, ok, r)
            for maker in (lambda n: write_at(n, b"x"), os.mkdir, os.mkfifo,
                          lambda n: os.symlink("x", n)):
                enametoolong(maker, os.path.join(top, "x"))
            assert sorted(os.listdir(".")) == sorted(want)
        os.fsync(fd)  # nothing written back fails late
    finally:
        os.close(fd)
    return want


@pytest.mark.parametrize("wb", ["write_back_on", "write_back_off"])
def test_past_the_limit_is_refused_at_once(tdir_replicated, wb):
    t = tdir_replicated
    v = t.vol
    deep = Deep("/" + t.name, LIMIT - 1 - 60)
    log = v.m1.rstrip("/") + ".log"
    start = os.path.getsize(log)
    probe = os.path.join(t.a, "probe")
    os.mkdir(probe)
    with write_back(v, wb == "write_back_on", probe):
        want = refuse_past_the_limit(t.a, deep)
        check_view(t.a, deep, want, "mount m1")
        check_view(t.b, deep, want, "mount m2")
        fsync_dir(t.a)
    check_bricks(v.bricks, t.name, deep, want, len(v.bricks) // 3)
    with open(log, "rb") as f:
        f.seek(start)
        text = f.read().decode(errors="replace")
    assert not re.search(r"write-back of .* failed", text), text[-3000:]


def test_rename_of_a_directory_past_the_limit_loses_nothing(tdir_replicated):
    """A directory renamed so that a file below it passes the limit: the
    file stays listed, every call naming it answers ENAMETOOLONG, and a
    rename back finds it whole (docs/consistency.md, "Path length")."""
    t = tdir_replicated
    v = t.vol
    deep = Deep("/" + t.name, LIMIT - 1 - 60, last=100)
    up = Deep("/" + t.name, deep.dlen - 101)  # its parent
    assert up.comps == deep.comps[:-1]
    last = deep.comps[-1]
    name, data = "f" * 60, os.urandom(5000)
    fd = deep.open(t.a, create=True)
    try:
        with inside(fd):
            write_at(name, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    gp = up.open(t.a)
    try:
        os.rename(last, last + "z" * 5, src_dir_fd=gp, dst_dir_fd=gp)
        for base in (t.a, t.b):
            ufd = up.open(base)
            try:
                dfd = os.open(last + "z" * 5, os.O_RDONLY | os.O_DIRECTORY, dir_fd=ufd)
                try:
                    assert os.listdir(dfd) == [name]
                    enametoolong(os.stat, name, dir_fd=dfd)
                    enametoolong(os.open, name, os.O_RDONLY, dir_fd=dfd)
                    enametoolong(os.unlink, name, dir_fd=dfd)
                    enametoolong(os.mkdir, "x" * 57, dir_fd=dfd)  # 4,097 bytes
                finally:
                    os.close(dfd)
            finally:
                os.close(ufd)
        enametoolong(os.rename, last + "z" * 5, last + "z" * 70, src_dir_fd=gp, dst_dir_fd=gp)
        os.rename(last + "z" * 5, last, src_dir_fd=gp, dst_dir_fd=gp)
    finally:
        os.close(gp)
    want = {name: dict(kind="f", data=data)}
    check_view(t.a, deep, want, "mount m1")
    check_view(t.b, deep, want, "mount m2")
    check_bricks(v.bricks, t.name, deep, want, len(v.bricks) // 3)


# ---- bricks deep in their file system ----

def deep_dir(top, total):
    """A directory below top whose absolute path is about total bytes."""
    d = top
    while len(d) < total:
        d = os.path.join(d, "r" * min(250, max(1, total - len(d) - 1)))
    os.makedirs(d, exist_ok=True)
    return d


@pytest.fixture(scope="module")
def long_cluster():
    """A replica 3 volume whose bricks' own paths are short, about 1,100
    and about 2,100 bytes long. Each test mounts it itself."""
    c = Cluster(host=LONG_HOST, prefix="st-lp-")
    try:
        c.start()
        bricks = [os.path.join(c.root, "b0"), os.path.join(deep_dir(c.root, 1100), "b1"),
                  os.path.join(deep_dir(c.root, 2100), "b2")]
        c.create_volume("lpv", bricks, replica=3)
        yield c, bricks
    finally:
        c.close()


def test_bricks_with_long_own_paths(long_cluster):
    c, bricks = long_cluster
    assert len(bricks[1]) > 1000 and len(bricks[2]) > 2000
    m1, m2 = fresh_mount(c, "lpv"), fresh_mount(c, "lpv")
    try:
        tname = "every"
        os.mkdir(os.path.join(m1.path, tname))
        deep = Deep("/" + tname, FIRST - 101)
        every_length(c, "lpv", os.path.join(m1.path, tname), os.path.join(m2.path, tname),
                     bricks, 1, tname, deep)
        tname = "refused"
        os.mkdir(os.path.join(m1.path, tname))
        deep = Deep("/" + tname, LIMIT - 1 - 60)
        want = refuse_past_the_limit(os.path.join(m1.path, tname), deep)
        check_view(os.path.join(m2.path, tname), deep, want, "mount m2")
        check_bricks(bricks, tname, deep, want, 1)
    finally:
        drop_mount(c, m1)
        drop_mount(c, m2)


def brick_pid(c, vol, path):
    for _, p, _, pid in c.brick_status(vol):
        if p == path:
            return pid
    return None


def wait_for(pred, timeout, what):
    end = time.time() + timeout
    while not pred():
        if time.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_heal_of_a_file_at_a_long_path(long_cluster):
    """A file at a 4,090-byte path written while the deepest brick is
    killed: heal info names it on the other bricks, `volume heal` copies
    it, and every brick ends equal."""
    c, bricks = long_cluster
    m1 = fresh_mount(c, "lpv")
    tname = "heal"
    os.mkdir(os.path.join(m1.path, tname))
    deep = Deep("/" + tname, FIRST - 101)
    name = name_of("f", FIRST, deep)
    vpath = deep.path(name)
    assert len(vpath) == FIRST
    first, second = os.urandom(300_000), os.urandom(200_000)
    c.cli("volume", "set", "lpv", "cluster.self-heal-daemon", "off")
    try:
        dfd = deep.open(os.path.join(m1.path, tname), create=True)
        try:
            fd = os.open(name, os.O_CREAT | os.O_RDWR, 0o644, dir_fd=dfd)
            try:
                os.write(fd, first)
                os.fsync(fd)
                pid = brick_pid(c, "lpv", bricks[2])
                os.kill(pid, signal.SIGKILL)  # cairnd starts it again
                wait_for(lambda: not alive(pid), 10, "the brick to die")
                os.pwrite(fd, second, 100_000)
                os.fsync(fd)
            finally:
                os.close(fd)
        finally:
            os.close(dfd)
        # No mount may heal it behind the test's back (cairnd restarts
        # the brick a second after it died, at the earliest).
        drop_mount(c, m1)
        wait_for(lambda: brick_pid(c, "lpv", bricks[2]) not in (None, pid), 30,
                 "cairnd to restart the brick")

        def info():
            return c.cli("volume", "heal", "lpv", "info").stdout

        wait_for(lambda: info().count("Status: Connected") == 3, 30, "every brick to answer")
        out = info()
        listed = [ln for ln in out.splitlines() if ln.startswith("/")]
        assert listed == [vpath, vpath], out[-2000:]  # on the two bricks that took the write
        assert "<gfid:" not in out, out[-2000:]
        end = time.time() + 60
        while True:
            r = c.cli("volume", "heal", "lpv", check=False)
            ok, out = heal_info_clean(c, "lpv", 3)
            if ok:
                break
            assert time.time() < end, r.stdout + r.stderr + out[-2000:]
            time.sleep(1)
        assert "has been successful" in r.stdout, r.stdout + r.stderr
    finally:
        c.cli("volume", "set", "lpv", "cluster.self-heal-daemon", "on")
    data = first[:100_000] + second
    for b in bricks:
        fd = deep.open(os.path.join(b, tname))
        try:
            with inside(fd):
                assert read_at(name) == data, f"brick {b[-40:]}"
                with pytest.raises(OSError) as e:
                    os.getxattr(name, "trusted.cairn.pending", follow_symlinks=False)
                assert e.value.errno == errno.ENODATA, f"brick {b[-40:]} still marked"
        finally:
            os.close(fd)
    m = fresh_mount(c, "lpv")
    try:
        fd = deep.open(os.path.join(m.path, tname))
        try:
            with inside(fd):
                assert read_at(name) == data
        finally:
            os.close(fd)
    finally:
        drop_mount(c, m)
