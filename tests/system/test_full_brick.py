"""Full bricks lose nothing (issue 42, docs/replication.md "A full brick").

Replica 3 volumes of three cairnd (127.0.0.153-155), one brick each, one
or two of them on a small loop-mounted ext4. Clients write more than the
small disk holds; afterwards every file the application was told is
written is compared byte for byte through a fresh mount and on every
brick that has room, `heal info` lists what the full brick lacks, and once
space is freed heal makes every brick identical without filling a brick
past storage.reserve.

Run:
  unshare -n sh -c 'ip link set lo up; CAIRN_BUILD=$PWD/build \\
      /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/system/test_full_brick.py'
"""

import errno
import os
import shutil
import subprocess
import threading

import pytest

from replica_pool import Pool, Vol, file_sums, sha, wait_until

HOSTS = ["127.0.0.153", "127.0.0.154", "127.0.0.155"]
MB = 1 << 20


@pytest.fixture(scope="module")
def pool():
    if os.geteuid() != 0 or not shutil.which("mkfs.ext4"):
        pytest.skip("needs root and mkfs.ext4")
    p = Pool(HOSTS, "st-full-")
    try:
        yield p.start()
    finally:
        p.close()


@pytest.fixture
def make_vol(pool):
    made = []

    def make(small=(2,), mb=100, **kw):
        """A volume whose bricks in `small` live on an ext4 of mb MiB; the
        others on the large disk."""
        bricks = []
        for i, n in enumerate(pool.nodes):
            if i in small:
                disk = pool.small_disk(i, f"disk{Vol.count + 1}-{i}", mb)
                bricks.append(os.path.join(disk, "brick"))
            else:
                bricks.append(os.path.join(n.root, f"gv{Vol.count + 1}-brick"))
        v = Vol(pool, bricks=bricks, **kw)
        made.append(v)
        return v

    yield make
    pool.revive()
    for v in made:
        v.close()


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def total_bytes(path):
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize


def ballast(brick, leave):
    """Fills brick's file system (outside the brick) to leave `leave` bytes."""
    path = os.path.join(os.path.dirname(brick), "ballast")
    size = free_bytes(brick) - leave
    if size > 0:
        subprocess.run(["fallocate", "-l", str(size), path], check=True)
    return path


def writer(root, prefix, count, size, got, errors, sync_dir=True, fsync=False):
    """Writes count files of size random bytes in root (open, write,
    [fsync,] close); got[name] = sha of what the application was told is
    written."""
    os.makedirs(root, exist_ok=True)
    for i in range(count):
        name = f"{prefix}{i}"
        data = os.urandom(size)
        try:
            fd = os.open(os.path.join(root, name), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
            try:
                assert os.write(fd, data) == len(data)
                if fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            got[name] = sha(data)
        except OSError as e:
            errors.append((name, e.errno))
    if sync_dir:
        try:
            fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            errors.append(("fsync " + root, e.errno))


def check_everywhere(v, sub, want, bricks):
    """Every file of want reads back through a fresh mount and from each of
    bricks (paths) byte for byte."""
    m = v.mount(f"check{len(v.pool.nodes[0].mounts)}")
    try:
        got = file_sums(os.path.join(m.path, sub), want)
        bad = [n for n in want if got[n] != want[n]]
        assert not bad, f"{len(bad)} files read back wrong through a fresh mount: {bad[:5]}"
    finally:
        v.unmount(m)
    for b in bricks:
        got = file_sums(os.path.join(b, sub), want)
        bad = [n for n in want if got[n] != want[n]]
        assert not bad, f"{b}: {len(bad)} files differ: {bad[:5]}"


def heal_and_compare(v, sub, want):
    """Frees the ballast of every small disk, heals, and compares every
    brick; heal info is clean afterwards."""
    for b in v.bricks:
        bl = os.path.join(os.path.dirname(b), "ballast")
        if os.path.exists(bl):
            os.unlink(bl)
    wait_until(lambda: v.heal().returncode == 0 and v.heal_entries() == 0, 120,
               "heal to finish after space was freed")
    check_everywhere(v, sub, want, v.bricks)
    # and nothing else differs: every brick holds the same names and bytes
    trees = []
    for b in v.bricks:
        d = os.path.join(b, sub)
        names = sorted(x for x in os.listdir(d) if x != ".cairn")
        trees.append(file_sums(d, names))
    assert trees[0] == trees[1] == trees[2], "bricks differ after heal"


@pytest.mark.parametrize("writeback", ["on", "off"])
def test_one_full_brick_two_writers(make_vol, writeback):
    """One brick of three fills up while two clients write 1 MiB files at
    once: every write stands (a quorum took it), nothing is read from the
    full brick, heal info lists what it lacks, and heal fills it once space
    is freed, never past storage.reserve."""
    v = make_vol(mounts=2, options={"client.write-back": writeback,
                                    "cluster.self-heal-daemon": "off"})
    small = v.bricks[2]
    ballast(small, 24 * MB)
    want, errors = {}, []
    ts = [threading.Thread(target=writer, args=(os.path.join(m.path, "d"), f"c{i}-", 30, MB,
                                                want, errors))
          for i, m in enumerate(v.mounts)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    assert len(want) == 60
    assert "did not confirm" not in v.pool.brick_logs()
    # the full brick kept its reserve (1% of its file system)
    assert free_bytes(small) >= total_bytes(small) // 100 - MB
    there = file_sums(os.path.join(small, "d"), want)
    whole = [n for n in want if there[n] == want[n]]
    assert len(whole) < 60, "the small brick took everything: make it smaller"
    check_everywhere(v, "d", want, v.bricks[:2])
    assert v.heal_entries() >= 60 - len(whole)
    # a little space back: heal copies what fits and leaves the reserve
    bl = os.path.join(os.path.dirname(small), "ballast")
    os.truncate(bl, os.path.getsize(bl) - 8 * MB)
    v.heal()
    assert free_bytes(small) >= total_bytes(small) // 100 - MB
    assert v.heal_entries() > 0
    check_everywhere(v, "d", want, v.bricks[:2])
    heal_and_compare(v, "d", want)


def test_full_brick_write_behind(make_vol):
    """Writes behind into files another client made (the file's own lease)
    while the brick fills: close and fsync succeed, the data is whole on the
    others and through a fresh mount, and heal fills the brick later."""
    v = make_vol(mounts=2, options={"cluster.self-heal-daemon": "off"})
    a, b = v.mounts
    names = [f"vm{i}" for i in range(4)]
    for n in names:
        with open(os.path.join(b.path, n), "wb"):
            pass
    ballast(v.bricks[2], 20 * MB)
    want = {}
    for n in names:
        data = os.urandom(12 * MB)
        with open(os.path.join(a.path, n), "r+b") as f:
            for off in range(0, len(data), 64 << 10):
                f.write(data[off:off + (64 << 10)])
            f.flush()
            os.fsync(f.fileno())
        want[n] = sha(data)
    check_everywhere(v, "", want, v.bricks[:2])
    assert v.heal_entries() > 0
    heal_and_compare(v, "", want)


def test_two_full_bricks_fail_the_write(make_vol):
    """Two bricks of three full: a quorum cannot take the data, so the
    application hears ENOSPC (each file is fsynced: what it was told is
    written is what fsync and close accepted), and from the first refusal
    on creates and writes wait for the bricks, so a file written without
    fsync gets its ENOSPC at its own write or close. Whatever the
    application was told is written reads back whole, and after space is
    freed and heal ran the bricks are identical: no copy differed without a
    mark."""
    v = make_vol(small=(1, 2), options={"cluster.self-heal-daemon": "off"})
    for b in v.bricks[1:]:
        ballast(b, 12 * MB)
    want, errors = {}, []
    d = os.path.join(v.mounts[0].path, "d")
    writer(d, "f", 40, MB, want, errors, fsync=True)
    assert errors, "no error although two of three bricks are full"
    assert all(e == errno.ENOSPC for _, e in errors), errors
    assert len(want) < 40
    log = open(v.mounts[0].log).read()
    assert "a brick is out of space" in log
    late, late_errors = {}, []
    writer(d, "late", 3, MB, late, late_errors, sync_dir=False)
    assert [e for _, e in late_errors] == [errno.ENOSPC] * 3, (late, late_errors)
    check_everywhere(v, "d", want, [v.bricks[0]])
    heal_and_compare(v, "d", want)


def test_min_free_disk_steers_new_files(pool):
    """A distribute volume of three bricks, one of them with less free
    space than cluster.min-free-disk (10%): new files whose names hash to
    it are made on the others, with a link-to under their name on it; they
    read, list, rename and unlink as any file."""
    c = pool.nodes[0]
    disk = pool.small_disk(0, "mfd", 100)
    bricks = [os.path.join(c.root, "mfd-b0"), os.path.join(c.root, "mfd-b1"),
              os.path.join(disk, "brick")]
    try:
        c.create_volume("mfd", bricks)
        ballast(bricks[2], 5 * MB)
        m = c.mount("mfd", os.path.join(c.root, "mfd-m"))
        want = {}
        for i in range(60):
            data = os.urandom(4096 + i)
            with open(os.path.join(m.path, f"f{i}"), "wb") as f:
                f.write(data)
            want[f"f{i}"] = sha(data)
        names_small = [n for n in os.listdir(bricks[2]) if n.startswith("f")]
        assert names_small, "no name hashed to the full brick: use more files"
        for n in names_small:
            st = os.lstat(os.path.join(bricks[2], n))
            assert st.st_size == 0 and (st.st_mode & 0o7777) == 0o1000, (n, oct(st.st_mode))
        on_big = set(os.listdir(bricks[0])) | set(os.listdir(bricks[1]))
        assert all(n in on_big for n in names_small)
        assert sorted(os.listdir(m.path)) == sorted(want)
        fresh = c.mount("mfd", os.path.join(c.root, "mfd-m2"))
        assert file_sums(fresh.path, want) == want
        n0 = names_small[0]
        os.rename(os.path.join(fresh.path, n0), os.path.join(fresh.path, "renamed"))
        assert file_sums(m.path, ["renamed"])["renamed"] == want[n0]
        os.unlink(os.path.join(m.path, "renamed"))
        for n in names_small[1:]:
            os.unlink(os.path.join(fresh.path, n))
        left = [n for n in os.listdir(bricks[2]) if n.startswith("f") or n == "renamed"]
        assert not left, f"link-to files left behind: {left}"
    finally:
        for mm in list(c.mounts):
            if "mfd-m" in mm.path:
                mm.stop()
                c.mounts.remove(mm)
        c.stop_volume("mfd", check=False)
        c.cli("volume", "delete", "mfd", check=False)
