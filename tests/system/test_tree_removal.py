"""Removal of whole trees (docs/consistency.md, "Write-back"; brick side in
src/brick/trash.c).

`rm -rf` of a tree the mount wrote back reaches the bricks as a few RMDIRs
that list what goes with them, not as an UNLINK per file; a brick removes a
tree only when it holds nothing the list does not name, and gives the space
back in the background.

Addresses: 127.0.0.40."""

import errno
import os
import re
import shutil
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cairn_cluster import Cluster, fsync_dir  # noqa: E402


@pytest.fixture
def tc():
    c = Cluster(host="127.0.0.40", prefix="tree-")
    try:
        c.start()
        yield c
    finally:
        c.close()


def replica3(c):
    # no spares made ahead: the tests count the ones removals leave
    return c.replica3("tv", {"network.ping-timeout": "2", "storage.spare-inodes": "0"})


def make_tree(top):
    """Four directories of 50 files and one deeper file; returns the files."""
    files = []
    for a in range(4):
        os.makedirs(os.path.join(top, f"a{a}"))
        for i in range(50):
            files.append(os.path.join(f"a{a}", f"f{i}"))
    os.makedirs(os.path.join(top, "a0", "deep", "er"))
    files.append(os.path.join("a0", "deep", "er", "g"))
    for f in files:
        with open(os.path.join(top, f), "wb") as fh:
            fh.write(f.encode() * 20)
    return files


def sync_mount(m):
    """Waits until what the mount wrote back is on the bricks (`sync -f`
    does not reach a FUSE file system: docs/consistency.md)."""
    fsync_dir(m.path)


def brick_calls(c):
    """{brick path: {FOP: calls}} from `volume profile tv info`."""
    out = c.cli("volume", "profile", "tv", "info").stdout
    res, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"^Brick: \S+?:(\S+)$", line)
        if m:
            cur = res.setdefault(m.group(1), {})
            continue
        m = re.match(r"^\s+[\d.]+\s+[\d.]+ us\s+[\d.]+ us\s+(\d+)\s+(\w+)$", line)
        if m and cur is not None and m.group(2) not in cur:
            cur[m.group(2)] = int(m.group(1))
    return res


def trash_empty(b, wait=20):
    t = os.path.join(b, ".cairn", "trash")
    end = time.time() + wait
    while os.listdir(t) and time.time() < end:
        time.sleep(0.05)
    return not os.listdir(t)


def tree_on_bricks(tc):
    """A replica 3 volume with two mounts and make_tree's tree at d, on the
    bricks."""
    bricks, (m1, m2) = replica3(tc)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    files = make_tree(d)
    sync_mount(m1)
    return bricks, m1, m2, d, files


def test_rm_rf_reaches_the_bricks_as_whole_trees(tc):
    bricks, m1, m2, d, files = tree_on_bricks(tc)
    tc.cli("volume", "profile", "tv", "start")
    shutil.rmtree(d)
    sync_mount(m1)
    calls = brick_calls(tc)
    for b in bricks:
        assert not os.path.exists(os.path.join(b, "d")), b
        # one request per tree, not one per file (a removal the queue sent
        # before its directory's RMDIR came still goes alone)
        assert calls[b].get("UNLINK", 0) < len(files) // 2, calls[b]
        assert 1 <= calls[b].get("RMDIR", 0) <= 7, calls[b]
        assert trash_empty(b), os.listdir(os.path.join(b, ".cairn", "trash"))
    assert not os.path.exists(os.path.join(m2.path, "d"))
    # the name is free again, on every brick
    os.makedirs(os.path.join(m1.path, "d", "a0"))
    with open(os.path.join(m1.path, "d", "a0", "f0"), "wb") as fh:
        fh.write(b"again")
    sync_mount(m1)
    for b in bricks:
        with open(os.path.join(b, "d", "a0", "f0"), "rb") as fh:
            assert fh.read() == b"again", b


def test_tree_holding_an_entry_not_listed_is_left_whole(tc):
    bricks, m1, m2, d, files = tree_on_bricks(tc)
    # a file the mount never saw, on every brick (as an administrator or a
    # client without leases would leave it)
    for b in bricks:
        with open(os.path.join(b, "d", "a1", "stranger"), "wb") as fh:
            fh.write(b"keep me")
    # removed by name, as the mount knows the tree (a listing would ask
    # the bricks for a1, which the mount knows complete, and show it)
    for f in files:
        os.unlink(os.path.join(d, f))
    for sub in ("a0/deep/er", "a0/deep", "a0", "a1", "a2", "a3"):
        os.rmdir(os.path.join(d, sub))
    # The refusal comes back: at d's own rmdir when a1's RMDIR was refused
    # before it (the mount then asks the bricks), else at the next fsync of
    # the directory above.
    with pytest.raises(OSError) as e:
        os.rmdir(d)
        fd = os.open(m1.path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    assert e.value.errno == errno.ENOTEMPTY
    # no brick removed the directory holding it, nor the stranger (files
    # of a1 the queue sent on their own before a1's RMDIR may be gone)
    for b in bricks:
        with open(os.path.join(b, "d", "a1", "stranger"), "rb") as fh:
            assert fh.read() == b"keep me", b
    # both mounts see what is left, the stranger too
    for m in (m2, m1):
        left = os.listdir(os.path.join(m.path, "d", "a1"))
        assert "stranger" in left and set(left) <= {f"f{i}" for i in range(50)} | {"stranger"}
    assert len(files) == 201


def test_tree_removed_while_a_brick_was_stopped_goes_there_by_heal(tc):
    bricks, m1, m2, d, files = tree_on_bricks(tc)
    pid = tc.brick_status("tv")[2][3]
    tc.stop_signal(pid)
    try:
        # A change first, which waits out the ping timeout: the mount drops
        # the stopped brick's connection, so the removal is never sent there
        # (a request sent before the timeout would wait in the stopped
        # brick's socket and be done when it runs again).
        with open(os.path.join(m1.path, "probe"), "wb") as fh:
            fh.write(b"x")
        sync_mount(m1)
        shutil.rmtree(d)  # answered by the mount (it lists d itself)
        sync_mount(m1)  # on the two running bricks
        for b in bricks[:2]:
            assert not os.path.exists(os.path.join(b, "d")), b
        # stale, looked at before the brick runs again: the self-heal
        # daemons heal it as soon as it is back
        assert os.path.isdir(os.path.join(bricks[2], "d", "a1"))
    finally:
        tc.cont(pid)
    end = time.time() + 60
    while os.path.exists(os.path.join(bricks[2], "d")) and time.time() < end:
        tc.cli("volume", "heal", "tv", check=False)
        time.sleep(0.5)
    assert not os.path.exists(os.path.join(bricks[2], "d")), os.listdir(bricks[2])
    assert not os.path.exists(os.path.join(m2.path, "d"))


def spare_paths(b):
    """The spare inodes' paths on brick b (in the subdirectories of
    .cairn/spare, none beside them)."""
    top = os.path.join(b, ".cairn", "spare")
    out = []
    for s in os.listdir(top):
        d = os.path.join(top, s)
        assert os.path.isdir(d), d
        out += [os.path.join(d, n) for n in os.listdir(d)]
    return out


def spares(b):
    return len(spare_paths(b))


def gfid(b, rel):
    return os.getxattr(os.path.join(b, rel), "trusted.cairn.gfid", follow_symlinks=False)


def test_new_files_made_from_a_removed_trees_files_show_nothing_of_them(tc):
    """The purge keeps a removed tree's files as spare inodes and new files
    are made from them (src/brick/spare.c): the new files hold their own
    bytes, mode and attributes only, and a file still open through the
    removal keeps its data."""
    bricks, m1, m2, d, files = tree_on_bricks(tc)
    for f in files[:20]:
        p = os.path.join(d, f)
        os.setxattr(p, "user.old", b"old")
        os.chmod(p, 0o600)
    for top, _, names in os.walk(d):
        if names:
            fsync_dir(top)
    old_ids = {gfid(bricks[0], os.path.join("d", f)) for f in files}
    keep = os.path.join(d, files[7])
    with open(keep, "rb") as fh:
        expected = fh.read()
    held = open(keep, "rb")
    try:
        sync_mount(m1)
        shutil.rmtree(d)
        sync_mount(m1)
        kept = []
        for b in bricks:
            assert trash_empty(b), b
            kept.append(spares(b))
            # most files became spares (a removal the queue sent before its
            # directory's RMDIR goes alone); never the one held open
            assert len(files) // 2 <= kept[-1] <= len(files) - 1, (b, kept[-1])
        # new files, shorter than the old ones, with other content
        d2 = os.path.join(m1.path, "n")
        os.mkdir(d2)
        for f in files:
            os.makedirs(os.path.dirname(os.path.join(d2, f)), exist_ok=True)
            with open(os.path.join(d2, f), "wb") as fh:
                fh.write(b"new " + f.encode())
        # on the bricks
        for top, _, names in os.walk(d2):
            if names:
                fsync_dir(top)
        assert held.read() == expected
    finally:
        held.close()
    for i, b in enumerate(bricks):
        assert spares(b) < kept[i], b
        for f in files:
            p = os.path.join(b, "n", f)
            with open(p, "rb") as fh:
                assert fh.read() == b"new " + f.encode(), p
            assert os.stat(p).st_mode & 0o7777 == 0o644, p
            assert "user.old" not in os.listxattr(p), p
            # a spare's old id is replaced by the new file's, the same on
            # every brick
            assert gfid(b, os.path.join("n", f)) == gfid(bricks[0], os.path.join("n", f)), p
            assert gfid(b, os.path.join("n", f)) not in old_ids, p
    for f in files:
        p = os.path.join(m2.path, "n", f)
        with open(p, "rb") as fh:
            assert fh.read() == b"new " + f.encode(), p
        assert os.stat(p).st_mode & 0o7777 == 0o644, p
        assert "user.old" not in os.listxattr(p), p


def test_files_removed_one_by_one_become_spares(tc):
    """An UNLINK of a small file with one link goes through the trash, so
    files removed one at a time leave their inodes for new files too; a
    large file, a file with another link and a file still open are handled
    as unlinks: space back at once, the other name intact, the open file
    readable."""
    bricks, (m1, m2) = replica3(tc)
    d = os.path.join(m1.path, "one")
    os.mkdir(d)
    small = [os.path.join(d, f"s{i}") for i in range(40)]
    for p in small:
        with open(p, "wb") as fh:
            fh.write(b"x" * 100)
    big = os.path.join(d, "big")
    with open(big, "wb") as fh:
        fh.write(os.urandom(300 << 10))
    linked = os.path.join(d, "linked")
    with open(linked, "wb") as fh:
        fh.write(b"two names")
    os.link(linked, os.path.join(d, "other"))
    held_path = os.path.join(d, "held")
    with open(held_path, "wb") as fh:
        fh.write(b"still open")
    fsync_dir(d)
    before = [spares(b) for b in bricks]
    held = open(held_path, "rb")
    try:
        # removed one at a time, the directory stays: an UNLINK each
        for p in small + [big, linked, held_path]:
            os.unlink(p)
        fsync_dir(d)
        for b in bricks:
            assert trash_empty(b), b
        assert held.read() == b"still open"
    finally:
        held.close()
    for i, b in enumerate(bricks):
        # the small files; not the large, linked or open one
        assert spares(b) == before[i] + len(small), (b, before[i], spares(b))
        with open(os.path.join(b, "one", "other"), "rb") as fh:
            assert fh.read() == b"two names", b
        assert os.stat(os.path.join(b, "one", "other")).st_nlink == 1, b
        assert sorted(os.listdir(os.path.join(b, "one"))) == ["other"], b
    assert sorted(os.listdir(os.path.join(m2.path, "one"))) == ["other"]
    # and new files are made from them
    for i in range(40):
        with open(os.path.join(d, f"n{i}"), "wb") as fh:
            fh.write(b"new %d" % i)
    fsync_dir(d)
    for i, b in enumerate(bricks):
        assert spares(b) == before[i], (b, before[i], spares(b))
        for n in range(40):
            with open(os.path.join(b, "one", f"n{n}"), "rb") as fh:
                assert fh.read() == b"new %d" % n


def spare_inodes(b):
    return {os.lstat(p).st_ino for p in spare_paths(b)}


def wait_spares(bricks, n, wait=30):
    end = time.time() + wait
    while time.time() < end and any(spares(b) != n for b in bricks):
        time.sleep(0.1)
    return [spares(b) for b in bricks]


def test_spares_made_ahead_in_idle_time(tc):
    """storage.spare-inodes: an idle brick makes that many empty inodes
    ahead, and new files are made from them; 0 makes none."""
    bricks, (m1, m2) = replica3(tc)
    r = tc.cli("volume", "set", "tv", "storage.spare-inodes", "65537", check=False)
    assert r.returncode != 0 and "storage.spare-inodes" in (r.stdout + r.stderr)
    tc.cli("volume", "set", "tv", "storage.spare-inodes", "300")
    assert wait_spares(bricks, 300) == [300] * 3
    ahead = [spare_inodes(b) for b in bricks]
    d = os.path.join(m1.path, "ahead")
    os.mkdir(d)
    for i in range(100):
        with open(os.path.join(d, f"f{i}"), "wb") as fh:
            fh.write(b"made ahead %d" % i)
    fsync_dir(d)
    for i, b in enumerate(bricks):
        for n in range(100):
            p = os.path.join(b, "ahead", f"f{n}")
            assert os.lstat(p).st_ino in ahead[i], p
            with open(p, "rb") as fh:
                assert fh.read() == b"made ahead %d" % n, p
            assert os.stat(p).st_mode & 0o7777 == 0o644, p
    for n in range(100):
        with open(os.path.join(m2.path, "ahead", f"f{n}"), "rb") as fh:
            assert fh.read() == b"made ahead %d" % n
    # made again once idle, up to the number and no further
    assert wait_spares(bricks, 300) == [300] * 3
    time.sleep(1.5)
    assert [spares(b) for b in bricks] == [300] * 3
    tc.cli("volume", "set", "tv", "storage.spare-inodes", "0")
    for i in range(50):
        with open(os.path.join(d, f"g{i}"), "wb") as fh:
            fh.write(b"x")
    fsync_dir(d)
    time.sleep(1.5)
    assert [spares(b) for b in bricks] == [250] * 3


def test_no_spares_made_while_clients_change_things(tc):
    """Spares are made ahead only in idle time: not while a client keeps
    writing (no new file among its requests), and once no change came for
    3 seconds."""
    bricks, (m1, _m2) = replica3(tc)
    p = os.path.join(m1.path, "busy")
    with open(p, "wb") as fh:
        fh.write(b"0")
    fsync_dir(m1.path)
    start = [spares(b) for b in bricks]
    fd = os.open(p, os.O_WRONLY)
    try:
        tc.cli("volume", "set", "tv", "storage.spare-inodes", str(max(start) + 200))
        end = time.time() + 5
        i = 0
        while time.time() < end:
            os.pwrite(fd, b"%d" % i, 0)
            os.fsync(fd)  # each write reaches the bricks
            i += 1
            time.sleep(0.2)
        assert [spares(b) for b in bricks] == start
    finally:
        os.close(fd)
    assert wait_spares(bricks, max(start) + 200) == [max(start) + 200] * 3
    tc.cli("volume", "set", "tv", "storage.spare-inodes", "0")


def trash_entries(b):
    n = 0
    for _top, dirs, files in os.walk(os.path.join(b, ".cairn", "trash")):
        n += len(dirs) + len(files)
    return n


def test_purge_paces_itself_while_clients_change_things(tc):
    """A removed tree leaves the trash at most 640 entries a second while a
    client keeps changing things (the purge takes the locks the requests
    need), and at full speed once no change came for half a second."""
    bricks, (m1, _m2) = replica3(tc)
    d = os.path.join(m1.path, "big")
    for a in range(10):
        os.makedirs(os.path.join(d, f"a{a}"))
        for i in range(300):
            with open(os.path.join(d, f"a{a}", f"f{i}"), "wb") as fh:
                fh.write(b"x")
    fsync_dir(d)
    busy = os.path.join(m1.path, "busy")
    fd = os.open(busy, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.fsync(fd)
        shutil.rmtree(d)
        fsync_dir(m1.path)  # the removal is on the bricks: the purge begins
        t0 = time.time()
        i = 0
        while time.time() - t0 < 1.5:
            os.pwrite(fd, b"%d" % i, 0)
            os.fsync(fd)  # each write reaches the bricks
            i += 1
            time.sleep(0.05)
        left = [trash_entries(b) for b in bricks]
    finally:
        os.close(fd)
    # 3,010 entries; paced, two seconds remove about 1,300 of them
    assert all(n >= 1000 for n in left), left
    for b in bricks:
        assert trash_empty(b, wait=10), b
