"""Hard links, and renames that involve them, on replicated volumes seen
through two mounts (m1 makes the changes, m2 looks).

Every case runs on the replica 3 volume and on the 2 x 3 volume, with
client.write-back on (the default) and off, in three places: the volume
root, a directory the other mount made, and a directory this mount made
(with write-back, one it holds alone: m2 looks only after m1's changes).
What must hold is what a local file system does: after one name of a file
goes, every other name of it still answers at once, on both mounts, with
the link count one lower, the same inode number and a newer ctime; the
removed name is gone on both (m2 looked at every name, and listed the
directories, just before). After each iteration every brick holding the
file agrees on its gfid (`trusted.cairn.gfid`, docs/brick-format.md) and
link count, and a name the 2 x 3 volume hashes elsewhere than the data is
a link-to there.

Each case repeats ITERATIONS times, each time with new names (some of the
failures fixed showed in 1 to 20 of 40 tries). An iteration that goes
wrong is recorded and the next one runs, so a failure says in how many
iterations each check went wrong."""

import collections
import errno
import os
import stat
import struct
import time

import pytest

from cairn_cluster import fsync_dir

ITERATIONS = 40
# A brick's file system may take ctime from a clock that ticks every few
# milliseconds (HZ 100: 10 ms): a change made this long after another has a
# later ctime.
CTIME_TICK = 0.012
GFID = "trusted.cairn.gfid"
LINKTO = "trusted.cairn.linkto"


class Fail(Exception):
    pass


# ---- the volume's option ----

_WRITE_BACK = {}  # volume name -> (Vol, "on" | "off") as set by this module


def _log_count(mount, line):
    try:
        with open(mount.log, "rb") as f:
            return f.read().decode(errors="replace").count(line)
    except OSError:
        return 0


def set_live(vol, option, value, line):
    """Sets a live option and waits until both mounts logged line."""
    mounts = [m for m in vol.cluster.mounts if m.path in (vol.m1, vol.m2)]
    before = [_log_count(m, line) for m in mounts]
    vol.cluster.cli("volume", "set", vol.name, option, value)
    end = time.time() + 30
    for m, n in zip(mounts, before):
        while _log_count(m, line) <= n:
            assert time.time() < end, f"{m.path} did not log {line!r}"
            time.sleep(0.05)


def set_write_back(vol, want):
    if _WRITE_BACK.get(vol.name, (vol, "on"))[1] == want:
        return
    _WRITE_BACK[vol.name] = (vol, want)
    set_live(vol, "client.write-back", want, f"write-back now {want}")


@pytest.fixture(scope="module", autouse=True)
def _write_back_restored():
    yield
    for vol, _ in list(_WRITE_BACK.values()):
        set_write_back(vol, "on")


@pytest.fixture(params=["write-back", "no-write-back"])
def tdir(request, tdir_replicated):
    set_write_back(tdir_replicated.vol, "on" if request.param == "write-back" else "off")
    return tdir_replicated


# ---- where an iteration's names live ----

PLACES = ["root", "other-mount-dir", "own-dir"]


class Iteration:
    """Names of one iteration, through m1 (side "a") and m2 (side "b"). A
    label is "name" (in the first directory) or "k/name" (in directory k).
    In the root, names carry a prefix of the test's own and listings are
    filtered by it; elsewhere each iteration has new directories: made by
    m2 (other-mount-dir) or by m1 (own-dir, which m2 must not look at before
    m1's changes, or it would no longer be written back)."""

    def __init__(self, tdir, place, i, ndirs):
        self.vol, self.place, self.index = tdir.vol, place, i
        self.made = ()  # labels to remove afterwards (in the root)
        self.prefix = ""
        self.dirs = []
        if place == "root":
            self.prefix = f"{tdir.name[-40:]}-{i}-"
            self.dirs.append((self.vol.m1, self.vol.m2))
            for k in range(1, ndirs):
                os.mkdir(os.path.join(self.vol.m2, f"{self.prefix}d{k}"))
                self.dirs.append(tuple(os.path.join(m, f"{self.prefix}d{k}")
                                       for m in (self.vol.m1, self.vol.m2)))
        else:
            maker = tdir.b if place == "other-mount-dir" else tdir.a
            for k in range(ndirs):
                os.mkdir(os.path.join(maker, f"i{i}d{k}"))
                self.dirs.append((os.path.join(tdir.a, f"i{i}d{k}"),
                                  os.path.join(tdir.b, f"i{i}d{k}")))
        self.warm = place != "own-dir"
        self.problems = []

    def split(self, label):
        k, _, name = label.rpartition("/")
        return int(k or 0), self.prefix + name

    def p(self, side, label):
        k, name = self.split(label)
        return os.path.join(self.dirs[k][0 if side == "a" else 1], name)

    def fail(self, what):
        """Records what went wrong; the iteration goes on."""
        if what not in self.problems:
            self.problems.append(what)

    def rel(self, label):
        return os.path.relpath(self.p("a", label), self.vol.m1)

    def cleanup(self):
        if self.place != "root":
            return
        for label in self.made:
            try:
                os.unlink(self.p("a", label))
            except FileNotFoundError:
                pass
        for k in range(1, len(self.dirs)):
            for n in os.listdir(self.dirs[k][0]):
                os.unlink(os.path.join(self.dirs[k][0], n))
            os.rmdir(self.dirs[k][0])


def errname(e):
    return errno.errorcode.get(e.errno, str(e.errno))


def stat_of(it, side, label):
    try:
        return os.lstat(it.p(side, label))
    except OSError as e:
        it.fail(f"{side}: stat {label}: {errname(e)}")
        return None


def read_of(it, side, label, symlink=False):
    """A file's contents, a symlink's target."""
    try:
        if symlink:
            return os.fsencode(os.readlink(it.p(side, label)))
        with open(it.p(side, label), "rb") as f:
            return f.read()
    except OSError as e:
        it.fail(f"{side}: read {label}: {errname(e)}")
        return None


def expect_file(it, side, labels, nlink, data, ino=None, ctime_after=None):
    """Every name in labels is one file with nlink links, contents data,
    inode number ino (when given) and a ctime later than ctime_after (ns,
    when given). Returns the inode number (None when a name is missing)."""
    for label in labels:
        st = stat_of(it, side, label)
        if st is None:
            continue
        if st.st_nlink != nlink:
            it.fail(f"{side}: {label} has {st.st_nlink} links, not {nlink}")
        if ino is not None and st.st_ino != ino:
            it.fail(f"{side}: {label} is another inode")
        ino = st.st_ino
        if ctime_after is not None and st.st_ctime_ns <= ctime_after:
            it.fail(f"{side}: ctime of {label} did not move on")
        got = read_of(it, side, label, stat.S_ISLNK(st.st_mode))
        if got is not None and got != data:
            it.fail(f"{side}: contents of {label} differ")
    return ino


def expect_gone(it, side, *labels):
    for label in labels:
        try:
            os.lstat(it.p(side, label))
        except FileNotFoundError:
            continue
        except OSError as e:
            it.fail(f"{side}: stat of removed {label}: {errname(e)}")
            continue
        it.fail(f"{side}: removed {label} still there")


def expect_listing(it, side, k, names):
    own = {os.path.basename(d[0]) for d in it.dirs[1:]}  # the root's iteration directories
    got = sorted(n[len(it.prefix):] for n in os.listdir(it.dirs[k][0 if side == "a" else 1])
                 if n.startswith(it.prefix) and n not in own)
    if got != sorted(names):
        it.fail(f"{side}: directory {k} lists {got}, not {sorted(names)}")


def ctime_of(it, label):
    time.sleep(CTIME_TICK)
    st = stat_of(it, "a", label)
    return st.st_ctime_ns if st else None


def put(it, label, data):
    with open(it.p("a", label), "wb") as f:
        f.write(data)


def warm(it, *labels):
    """m2 lists the directories and looks at the names (when it may), so
    stale caches would show."""
    if it.warm:
        for d in it.dirs:
            os.listdir(d[1])
        for label in labels:
            st = stat_of(it, "b", label)
            if st:
                read_of(it, "b", label, stat.S_ISLNK(st.st_mode))


# ---- the bricks ----

def dht_hash(name):
    """cl_dht_hash (docs/replication.md, "Distribute")."""
    h = 2166136261
    for c in os.fsencode(name):
        h = ((h ^ c) * 16777619) & 0xFFFFFFFF
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h


def gfid_ino(g):
    a, b = struct.unpack("<QQ", g)
    return a ^ b


def is_linkto(path, st):
    if not stat.S_ISREG(st.st_mode) or stat.S_IMODE(st.st_mode) != 0o1000 or st.st_size:
        return False
    try:
        os.getxattr(path, LINKTO)
        return True
    except OSError:
        return False


def check_bricks(it, groups, gone, ino=None):
    try:
        bricks_agree(it, groups, gone, ino)
    except Fail as e:
        it.fail(str(e))


def bricks_agree(it, groups, gone, ino):
    """groups: the names of each file still there. Every brick holding a
    name's data holds every name of that file, with one gfid and as many
    links as names; they are one replica set; a brick of another set has
    at most a link-to (on a 2 x 3 volume, where the name hashes there).
    gone: names no brick may hold."""
    for d in it.dirs:
        fsync_dir(d[0])
    bricks = it.vol.bricks
    for group in groups:
        gfids, holders = set(), None
        for label in group:
            rel = it.rel(label)
            have = set()
            for i, b in enumerate(bricks):
                path = os.path.join(b, rel)
                try:
                    st = os.lstat(path)
                except FileNotFoundError:
                    continue
                if is_linkto(path, st):
                    continue
                have.add(i)
                if st.st_nlink != len(group):
                    raise Fail(f"brick {i}: {label} has {st.st_nlink} links, not {len(group)}")
                gfids.add(os.getxattr(path, GFID, follow_symlinks=False))
            if holders is None:
                holders = have
            if have != holders:
                raise Fail(f"bricks {sorted(have)} hold {label}, {sorted(holders)} {group[0]}")
        if not holders:
            raise Fail(f"no brick holds {group[0]}")
        if len(holders) != 3 or len({i // 3 for i in holders}) != 1:
            raise Fail(f"bricks {sorted(holders)} hold {group[0]}: not one replica set")
        if len(gfids) != 1:
            raise Fail(f"{group[0]}: the bricks hold {len(gfids)} gfids")
        g = gfids.pop()
        if ino is not None and gfid_ino(g) != ino:
            raise Fail(f"{group[0]}: the mount's inode number is not the bricks' gfid")
        for label in group:  # elsewhere: nothing, or a link-to on the name's hashed set
            rel = it.rel(label)
            hashed = dht_hash(os.path.basename(rel)) >> 31 if len(bricks) == 6 else 0
            data_set = min(holders) // 3
            for i, b in enumerate(bricks):
                if i in holders:
                    continue
                path = os.path.join(b, rel)
                try:
                    st = os.lstat(path)
                except FileNotFoundError:
                    if i // 3 == hashed and hashed != data_set:
                        raise Fail(f"brick {i}: no link-to for {label}")
                    continue
                if not is_linkto(path, st):
                    raise Fail(f"brick {i}: {label} is another file")
                if i // 3 != hashed or os.getxattr(path, LINKTO) != str(data_set).encode():
                    raise Fail(f"brick {i}: a stray link-to for {label}")
    for label in gone:
        rel = it.rel(label)
        for i, b in enumerate(bricks):
            if os.path.lexists(os.path.join(b, rel)):
                raise Fail(f"brick {i}: removed {label} is still there")


# ---- the cases ----

def case_unlink_sibling(it):
    """link g h; unlink h: g answers at once, one link fewer, newer ctime."""
    it.made = ("g", "h")
    data = b"g's data " * 50
    put(it, "g", data)
    warm(it, "g")
    os.link(it.p("a", "g"), it.p("a", "h"))
    ino = expect_file(it, "a", ["g", "h"], 2, data)
    warm(it, "g", "h")
    c0 = ctime_of(it, "g")
    os.unlink(it.p("a", "h"))
    expect_file(it, "a", ["g"], 1, data, ino, c0)
    expect_gone(it, "a", "h")
    expect_listing(it, "a", 0, ["g"])
    expect_gone(it, "b", "h")
    expect_file(it, "b", ["g"], 1, data, ino, c0)
    expect_listing(it, "b", 0, ["g"])
    check_bricks(it, [["g"]], ["h"], ino)


def case_rename_over_linked(it):
    """x has a second name y; rename z over x: y is x's old file, intact."""
    it.made = ("x", "y", "z")
    put(it, "x", b"the old x")
    os.link(it.p("a", "x"), it.p("a", "y"))
    put(it, "z", b"the new x, longer")
    old = expect_file(it, "a", ["x", "y"], 2, b"the old x")
    new = expect_file(it, "a", ["z"], 1, b"the new x, longer")
    warm(it, "x", "y", "z")
    c0 = ctime_of(it, "y")
    os.rename(it.p("a", "z"), it.p("a", "x"))
    for side in "ab":
        expect_file(it, side, ["y"], 1, b"the old x", old, c0)
        expect_file(it, side, ["x"], 1, b"the new x, longer", new)
        expect_gone(it, side, "z")
        expect_listing(it, side, 0, ["x", "y"])
    check_bricks(it, [["x"], ["y"]], ["z"])


def case_three_links(it):
    """Three names; two removed one after the other."""
    it.made = ("g", "h", "i")
    put(it, "g", b"three")
    os.link(it.p("a", "g"), it.p("a", "h"))
    os.link(it.p("a", "h"), it.p("a", "i"))
    ino = expect_file(it, "a", ["g", "h", "i"], 3, b"three")
    warm(it, "g", "h", "i")
    c0 = ctime_of(it, "i")
    os.unlink(it.p("a", "h"))
    for side in "ab":
        expect_file(it, side, ["i", "g"], 2, b"three", ino, c0)
        expect_gone(it, side, "h")
    c1 = ctime_of(it, "g")
    os.unlink(it.p("a", "i"))
    for side in "ab":
        expect_file(it, side, ["g"], 1, b"three", ino, c1)
        expect_gone(it, side, "h", "i")
        expect_listing(it, side, 0, ["g"])
    check_bricks(it, [["g"]], ["h", "i"], ino)


def case_link_then_rename(it):
    """link g h; rename h k; rename k g (two names of one file: nothing
    happens); unlink g."""
    it.made = ("g", "h", "k")
    put(it, "g", b"renamed link")
    os.link(it.p("a", "g"), it.p("a", "h"))
    ino = expect_file(it, "a", ["g", "h"], 2, b"renamed link")
    warm(it, "g", "h")
    c0 = ctime_of(it, "g")
    os.rename(it.p("a", "h"), it.p("a", "k"))
    for side in "ab":
        expect_file(it, side, ["g", "k"], 2, b"renamed link", ino, c0)
        expect_gone(it, side, "h")
        expect_listing(it, side, 0, ["g", "k"])
    os.rename(it.p("a", "k"), it.p("a", "g"))
    for side in "ab":
        expect_file(it, side, ["k", "g"], 2, b"renamed link", ino)
    c1 = ctime_of(it, "k")
    os.unlink(it.p("a", "g"))
    for side in "ab":
        expect_file(it, side, ["k"], 1, b"renamed link", ino, c1)
        expect_gone(it, side, "g", "h")
        expect_listing(it, side, 0, ["k"])
    check_bricks(it, [["k"]], ["g", "h"], ino)


def case_link_across_directories(it):
    """A link in another directory (on the 2 x 3 volume, every other
    iteration under a name that hashes elsewhere than the file's data);
    then the first name goes, then the file is linked back and the second
    goes."""
    # h's hash in the same half of the hash space as g's, or in the other
    # (the 2 x 3 volume's two subvolumes)
    g = it.prefix + "g"
    want_other = it.index % 2 == 0
    n = 0
    while True:
        h = f"h{n}"
        if ((dht_hash(g) >> 31) != (dht_hash(it.prefix + h) >> 31)) == want_other:
            break
        n += 1
    it.made = ("g", f"1/{h}", "g2")
    put(it, "g", b"across")
    warm(it, "g")
    os.link(it.p("a", "g"), it.p("a", f"1/{h}"))
    ino = expect_file(it, "a", ["g", f"1/{h}"], 2, b"across")
    warm(it, "g", f"1/{h}")
    c0 = ctime_of(it, f"1/{h}")
    os.unlink(it.p("a", "g"))
    for side in "ab":
        expect_file(it, side, [f"1/{h}"], 1, b"across", ino, c0)
        expect_gone(it, side, "g")
        expect_listing(it, side, 0, [])
        expect_listing(it, side, 1, [h])
    check_bricks(it, [[f"1/{h}"]], ["g"], ino)
    os.link(it.p("a", f"1/{h}"), it.p("a", "g2"))
    for side in "ab":
        expect_file(it, side, [f"1/{h}", "g2"], 2, b"across", ino)
    c1 = ctime_of(it, "g2")
    os.unlink(it.p("a", f"1/{h}"))
    for side in "ab":
        expect_file(it, side, ["g2"], 1, b"across", ino, c1)
        expect_gone(it, side, f"1/{h}")
        expect_listing(it, side, 1, [])
    check_bricks(it, [["g2"]], ["g", f"1/{h}"], ino)


def case_unlink_open_file(it):
    """g open, linked to h, then unlinked: the handle and h are one file."""
    it.made = ("g", "h")
    put(it, "g", b"0123456789")
    fd = os.open(it.p("a", "g"), os.O_RDWR)
    try:
        os.link(it.p("a", "g"), it.p("a", "h"))
        ino = expect_file(it, "a", ["g", "h"], 2, b"0123456789")
        warm(it, "g", "h")
        c0 = ctime_of(it, "h")
        os.unlink(it.p("a", "g"))
        st = os.fstat(fd)
        if st.st_nlink != 1 or st.st_ino != ino:
            it.fail(f"a: the open handle shows {st.st_nlink} links, not 1")
        expect_file(it, "a", ["h"], 1, b"0123456789", ino, c0)
        os.pwrite(fd, b"abc", 0)
        if read_of(it, "a", "h") not in (None, b"abc3456789"):
            it.fail("a: a write through the handle is not in h")
    finally:
        os.close(fd)
    for side in "ab":
        expect_file(it, side, ["h"], 1, b"abc3456789", ino)
        expect_gone(it, side, "g")
        expect_listing(it, side, 0, ["h"])
    check_bricks(it, [["h"]], ["g"], ino)


def case_remove_last_link(it):
    """Both names of an open file removed: gone everywhere, the handle
    still reads it."""
    it.made = ("g", "h")
    put(it, "g", b"last")
    os.link(it.p("a", "g"), it.p("a", "h"))
    fd = os.open(it.p("a", "h"), os.O_RDONLY)
    try:
        expect_file(it, "a", ["g", "h"], 2, b"last")
        warm(it, "g", "h")
        os.unlink(it.p("a", "h"))
        expect_file(it, "a", ["g"], 1, b"last")
        os.unlink(it.p("a", "g"))
        if os.fstat(fd).st_nlink != 0:
            it.fail(f"a: the open handle shows {os.fstat(fd).st_nlink} links, not 0")
        if os.pread(fd, 100, 0) != b"last":
            it.fail("a: the open handle no longer reads the file")
    finally:
        os.close(fd)
    for side in "ab":
        expect_gone(it, side, "g", "h")
        expect_listing(it, side, 0, [])
    check_bricks(it, [], ["g", "h"])


def case_symlink_links(it):
    """A symlink with two names (link(2) does not follow it); one goes."""
    it.made = ("s", "t")
    os.symlink("target-of-s", it.p("a", "s"))
    warm(it, "s")
    os.link(it.p("a", "s"), it.p("a", "t"), follow_symlinks=False)
    ino = expect_file(it, "a", ["s", "t"], 2, b"target-of-s")
    warm(it, "s", "t")
    c0 = ctime_of(it, "t")
    os.unlink(it.p("a", "s"))
    for side in "ab":
        expect_file(it, side, ["t"], 1, b"target-of-s", ino, c0)
        expect_gone(it, side, "s")
        expect_listing(it, side, 0, ["t"])
    check_bricks(it, [["t"]], ["s"], ino)


CASES = {
    "unlink_sibling": (case_unlink_sibling, 1),
    "rename_over_linked": (case_rename_over_linked, 1),
    "three_links": (case_three_links, 1),
    "link_then_rename": (case_link_then_rename, 1),
    "link_across_directories": (case_link_across_directories, 2),
    "unlink_open_file": (case_unlink_open_file, 1),
    "remove_last_link": (case_remove_last_link, 1),
    "symlink_links": (case_symlink_links, 1),
}


@pytest.mark.slow
@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("case", list(CASES))
def test_links(tdir, case, place):
    fn, ndirs = CASES[case]
    failures = collections.Counter()
    first = {}
    for i in range(ITERATIONS):
        it = Iteration(tdir, place, i, ndirs)
        try:
            fn(it)
        except OSError as e:  # a change itself failed: the iteration ends
            name = os.path.basename(e.filename or "")[len(it.prefix):]
            it.fail(f"{errname(e)} from {name}")
        finally:
            try:
                it.cleanup()
            except OSError:
                pass
        for what in it.problems:
            failures[what] += 1
            first.setdefault(what, i)
    assert not failures, (f"{ITERATIONS} iterations; went wrong: " +
                          "; ".join(f"{w} in {n} (first in #{first[w]})"
                                    for w, n in failures.most_common()))


def test_write_through_a_name_moved_into_a_directory_made_here(tdir_replicated):
    """A file with a second name (both made by the other mount), moved into
    a directory this mount made and holds alone: the other mount reading
    the second name reaches the file without recalling anything on that
    directory, so writes through the moved name must not wait in this
    mount (write-behind)."""
    t = tdir_replicated
    set_write_back(t.vol, "on")
    # a write then waits in the mount (else it often reached the bricks
    # before the other mount's read, by chance)
    set_live(t.vol, "performance.write-behind-trickling-writes", "off", "trickling off")
    try:
        wrong = write_through_moved_name(t)
    finally:
        set_live(t.vol, "performance.write-behind-trickling-writes", "on", "trickling on")
    assert not wrong, f"the write was not there in {len(wrong)} of {ITERATIONS} iterations"


def write_through_moved_name(t):
    os.mkdir(os.path.join(t.a, "own"))
    wrong = []
    for i in range(ITERATIONS):
        x, y = os.path.join(t.b, f"x{i}"), os.path.join(t.b, f"y{i}")
        with open(x, "wb") as f:
            f.write(b"0123456789")
        os.link(x, y)
        moved = os.path.join(t.a, "own", f"x{i}")
        os.rename(os.path.join(t.a, f"x{i}"), moved)
        fd = os.open(moved, os.O_WRONLY)
        try:
            os.pwrite(fd, b"abc", 0)
            with open(y, "rb") as f:
                if f.read() != b"abc3456789":
                    wrong.append(i)
        finally:
            os.close(fd)
    return wrong
