"""Disk errors beyond a full disk (issue 42, docs/replication.md "Failure
behaviour"): a brick whose file system turns read-only under it (ext4's
errors=remount-ro, triggered for real through sysfs) refuses every change
with EROFS; a brick whose disk fails writes (EIO) or stores one only in
part (the fault-injecting storage table, CAIRN_TEST_FAULTS=1: storage.h)
the same. A quorum takes the changes, the brick is marked and never read
from, and after the disk is repaired heal makes it identical to the
others.

Three cairnd on 127.0.0.156-158. Run:
  unshare -n sh -c 'ip link set lo up; CAIRN_BUILD=$PWD/build \\
      /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/system/test_disk_errors.py'
"""

import os
import shutil
import signal
import subprocess
import time

import pytest

from cairn_cluster import alive
from replica_pool import Pool, Vol, arm, file_sums, sha, tree, wait_until

HOSTS = ["127.0.0.156", "127.0.0.157", "127.0.0.158"]


@pytest.fixture(scope="module")
def pool():
    if os.geteuid() != 0 or not shutil.which("mkfs.ext4") or not shutil.which("e2fsck"):
        pytest.skip("needs root, mkfs.ext4 and e2fsck")
    p = Pool(HOSTS, "st-diskerr-")
    try:
        yield p.start(faults=True)
    finally:
        p.close()


def device_of(mnt):
    return os.path.basename(subprocess.run(["findmnt", "-no", "SOURCE", mnt], check=True,
                                           capture_output=True, text=True).stdout.strip())



def test_brick_file_system_turns_read_only(pool):
    node = pool.nodes[2]
    disk = pool.small_disk(2, "rodisk", 100)
    subprocess.run(["mount", "-o", "remount,errors=remount-ro", disk], check=True)
    bricks = [os.path.join(pool.nodes[0].root, "ro-b0"), os.path.join(pool.nodes[1].root, "ro-b1"),
              os.path.join(disk, "brick")]
    v = Vol(pool, bricks=bricks, options={"cluster.self-heal-daemon": "off"})
    try:
        m = v.mounts[0].path
        os.makedirs(os.path.join(m, "d/sub"))
        before = {f"d/f{i}": os.urandom(20000 + i) for i in range(20)}
        for n, data in before.items():
            with open(os.path.join(m, n), "wb") as f:
                f.write(data)
        with open(f"/sys/fs/ext4/{device_of(disk)}/trigger_fs_error", "w") as f:
            f.write("1")
        # every kind of change, while brick 2 refuses them all
        after = dict(before)
        for i in range(0, 20, 2):
            n = f"d/f{i}"
            after[n] = os.urandom(30000)
            with open(os.path.join(m, n), "r+b") as f:
                f.write(after[n])
        for i in range(20, 30):
            n = f"d/sub/g{i}"
            after[n] = os.urandom(5000)
            with open(os.path.join(m, n), "wb") as f:
                f.write(after[n])
        os.rename(os.path.join(m, "d/f1"), os.path.join(m, "d/sub/moved"))
        after["d/sub/moved"] = after.pop("d/f1")
        os.unlink(os.path.join(m, "d/f3"))
        del after["d/f3"]
        os.chmod(os.path.join(m, "d/f5"), 0o600)
        os.mkdir(os.path.join(m, "d/newdir"))
        log = open(v.mounts[0].log).read()
        assert "Read-only file system" in log, "the mount does not say which brick failed"
        # a fresh mount reads the changes, never the read-only copy's
        fresh = v.mount("fresh")
        want = {n: sha(d) for n, d in after.items()}
        assert file_sums(fresh.path, list(want)) == want
        assert os.stat(os.path.join(fresh.path, "d/f5")).st_mode & 0o777 == 0o600
        assert not os.path.exists(os.path.join(fresh.path, "d/f3"))
        v.unmount(fresh)
        assert v.heal_entries() > 0
        # repair: the brick stops, the file system is checked and mounted
        # again, cairnd starts the brick
        node.stop_signal(node.proc.pid)
        pid = v.brick_pid(2)
        os.kill(pid, signal.SIGKILL)
        end = time.time() + 10
        while alive(pid) and time.time() < end:
            time.sleep(0.05)
        # The killed brick's leader shows as gone while its other threads
        # may still be closing their files (more so under ASan): the file
        # system is busy for a moment longer.
        end = time.time() + 20
        while subprocess.run(["umount", disk], stderr=subprocess.DEVNULL).returncode != 0:
            assert time.time() < end, "the brick's file system stays busy"
            time.sleep(0.2)
        img = disk + ".img"
        subprocess.run(["e2fsck", "-fy", img], capture_output=True)
        subprocess.run(["mount", "-o", "loop", img, disk], check=True)
        node.cont(node.proc.pid)
        v.wait_bricks(timeout=60)
        wait_until(lambda: v.heal().returncode == 0 and v.heal_entries() == 0, 120,
                   "heal to finish")
        trees = [tree(b) for b in bricks]
        assert trees[0] == trees[1] == trees[2]
        assert {k: x[2] for k, x in trees[0].items() if x[0] == "f"} == want
    finally:
        if node.proc.pid in node.stopped_pids:
            node.cont(node.proc.pid)  # the next tests need this server
        v.close()


def test_failing_disk_writes_eio_with_two_writers(pool):
    """Brick 2's disk fails every write with EIO while two clients write
    (write-back on, write-behind into a file of the other client, and
    write-back off for the second): every write stands, a fresh mount
    reads what the applications wrote, heal info lists the brick's misses,
    and once the disk works again heal makes the bricks identical."""
    v = Vol(pool, options={"cluster.self-heal-daemon": "off"}, mounts=2)
    try:
        a, b = v.mounts
        with open(os.path.join(b.path, "shared"), "wb"):
            pass
        arm(v.bricks[2], "fail pwrite EIO 0 sticky")
        want = {}
        os.makedirs(os.path.join(a.path, "wa"))
        for i in range(10):
            data = os.urandom(100000 + i)
            with open(os.path.join(a.path, "wa", f"f{i}"), "wb") as f:
                f.write(data)
            want[f"wa/f{i}"] = sha(data)
        data = os.urandom(3 << 20)
        with open(os.path.join(a.path, "shared"), "r+b") as f:
            for off in range(0, len(data), 64 << 10):
                f.write(data[off:off + (64 << 10)])
            os.fsync(f.fileno())
        want["shared"] = sha(data)
        for i in range(10):
            data = os.urandom(50000 + i)
            p = os.path.join(b.path, f"b{i}")
            with open(p, "wb") as f:
                f.write(data)
                os.fsync(f.fileno())
            want[f"b{i}"] = sha(data)
        fd = os.open(os.path.join(a.path, "wa"), os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(fd)
        os.close(fd)
        assert "Input/output error" in open(a.log).read() + open(b.log).read()
        fresh = v.mount("fresh")
        assert file_sums(fresh.path, list(want)) == want
        v.unmount(fresh)
        assert v.heal_entries() > 0
        arm(v.bricks[2], "reset")
        wait_until(lambda: v.heal().returncode == 0 and v.heal_entries() == 0, 120,
                   "heal to finish")
        for brick in v.bricks:
            assert file_sums(brick, list(want)) == want, brick
    finally:
        v.close()


def test_failing_fsync_is_marked(pool):
    """Brick 2's disk fails fsync with EIO (a write-back error: what it took
    may be gone): fsync on the mount still succeeds, two copies are
    durable, and brick 2's copy is marked for heal, never trusted as it is;
    heal then makes every copy what the application wrote."""
    v = Vol(pool, options={"cluster.self-heal-daemon": "off"})
    try:
        a = v.mounts[0]
        arm(v.bricks[2], "fail fsync EIO 0 sticky")
        want = {}
        for i in range(3):
            data = os.urandom(200000 + i)
            with open(os.path.join(a.path, f"s{i}"), "wb") as f:
                f.write(data)
                os.fsync(f.fileno())
            want[f"s{i}"] = sha(data)
        info = v.heal("info").stdout
        for name in want:
            assert f"/{name}" in info, info
        arm(v.bricks[2], "reset")
        wait_until(lambda: v.heal().returncode == 0 and v.heal_entries() == 0, 120,
                   "heal to finish")
        for brick in v.bricks:
            assert file_sums(brick, list(want)) == want, brick
        fresh = v.mount("fresh")
        assert file_sums(fresh.path, list(want)) == want
        v.unmount(fresh)
    finally:
        v.close()


def test_write_stored_in_part_is_marked(pool):
    """Brick 2's disk takes only the first 4 KiB of a write, then says
    ENOSPC (a disk filling up during the write): the brick answers a short
    write. The others stored it whole, so it stands, and the short copy is
    marked and healed: never a copy that differs without a mark."""
    v = Vol(pool, options={"cluster.self-heal-daemon": "off",
                           "client.write-back": "off"})
    try:
        m = v.mounts[0].path
        with open(os.path.join(m, "f"), "wb") as f:
            f.write(b"x" * 100)
            f.flush()
            os.fsync(f.fileno())
        arm(v.bricks[2], "short pwrite 4096", "fail pwrite ENOSPC 1")
        data = os.urandom(64 << 10)
        fd = os.open(os.path.join(m, "f"), os.O_WRONLY)
        try:
            assert os.pwrite(fd, data, 0) == len(data)
        finally:
            os.close(fd)
        arm(v.bricks[2], "reset")
        want = {"f": sha(data)}
        assert file_sums(v.bricks[2], ["f"]) != want, "the fault did not fire"
        fresh = v.mount("fresh")
        assert file_sums(fresh.path, ["f"]) == want
        v.unmount(fresh)
        assert v.heal_entries() > 0, "the short copy is not marked"
        wait_until(lambda: v.heal().returncode == 0 and v.heal_entries() == 0, 60,
                   "heal to finish")
        for brick in v.bricks:
            assert file_sums(brick, ["f"]) == want, brick
    finally:
        v.close()
