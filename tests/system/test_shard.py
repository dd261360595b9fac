"""Sharding (features.shard, docs/shard.md) on a replica 3 and a 2 x 3
volume with 4MB blocks: bytes and sizes through two mounts and a fresh
one, the shard files on the bricks (their count, sparse blocks absent,
the base file's xattr), truncation, punch-hole and zero-range with
SEEK_DATA / SEEK_HOLE across block boundaries, removal and rename over a
sharded file, /.shard hidden, files made before sharding left whole, the
random checker on a file of many blocks, and a brick killed during writes
then healed shard by shard.

Its own cairnd on 127.0.0.111 (other tests use the session's volumes,
which must not be sharded)."""

import ctypes
import errno
import os
import shutil
import signal
import struct
import time
import uuid

import pytest

from cairn_cluster import Cluster
from opcheck import check_file

MB = 1 << 20
BS = 4 * MB
XATTR = "trusted.cairn.shard"
FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_ZERO_RANGE = 0x10

_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]


def fallocate(fd, mode, off, length):
    if _libc.fallocate(fd, mode, off, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


class SVol:
    def __init__(self, c, name, bricks, mounts):
        self.c, self.name, self.bricks = c, name, bricks
        self.a, self.b = mounts[0].path, mounts[1].path

    def fresh(self, sub):
        """A new mount of the volume (nothing cached), stopped by the caller."""
        m = self.c.mount(self.name, os.path.join(self.c.root, f"{self.name}-{sub}"))
        return m


@pytest.fixture(scope="module")
def shard_cluster():
    c = Cluster(host="127.0.0.111", prefix="st-shard-")
    try:
        c.start()
        yield c
    finally:
        c.close()


def _volume(c, name, sets):
    bricks = [os.path.join(c.root, f"{name}-b{i}") for i in range(3 * sets)]
    c.create_volume(name, bricks, replica=3,
                    options={"features.shard": "on", "features.shard-block-size": "4MB"})
    mounts = [c.mount(name, os.path.join(c.root, f"{name}-m{i}")) for i in range(2)]
    return SVol(c, name, bricks, mounts)


@pytest.fixture(scope="module")
def volumes(shard_cluster):
    return {"replica3": _volume(shard_cluster, "shr3", 1),
            "2x3": _volume(shard_cluster, "shdr3", 2)}


@pytest.fixture(params=["replica3", "2x3"])
def sv(request, volumes):
    v = volumes[request.param]
    v.dir = request.node.name.replace("[", "_").replace("]", "")
    os.mkdir(os.path.join(v.a, v.dir))
    return v


def pattern(n, seed):
    """n bytes that differ at every 4 KiB and between seeds."""
    out = bytearray()
    i = 0
    while len(out) < n:
        out += struct.pack("<QQ", seed, i) * 256
        i += 1
    return bytes(out[:n])


def write(path, data, mode=0o644, sync=False):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        assert os.write(fd, data) == len(data)
        if sync:  # a small new file may wait in the mount (write-back)
            os.fsync(fd)
    finally:
        os.close(fd)


def first_difference(got, want):
    for k in range(0, max(len(got), len(want)), 4096):
        if got[k:k + 4096] != want[k:k + 4096]:
            return f"first difference in the 4 KiB at {k} (block {k // BS}), " \
                   f"{len(got)} bytes read, {len(want)} expected"
    return "no difference"


def read(path):
    with open(path, "rb") as f:
        return f.read()


def base_copies(sv, rel):
    """The base file's copies on the bricks (one set holds them)."""
    return [os.path.join(b, rel) for b in sv.bricks if os.path.exists(os.path.join(b, rel))]


def gfid(path):
    return str(uuid.UUID(bytes=os.getxattr(path, "trusted.cairn.gfid")))


def shards(sv, g):
    """{block number: [paths of its copies]} of file g on every brick."""
    out = {}
    for b in sv.bricks:
        d = os.path.join(b, ".shard")
        if not os.path.isdir(d):
            continue
        for n in os.listdir(d):
            if n.startswith(g + "."):
                out.setdefault(int(n.rsplit(".", 1)[1]), []).append(os.path.join(d, n))
    return out


def wait_for(pred, timeout, what):
    """Removals may be written back, and a close's release is not waited
    for: the shards of a file go a little after its last name."""
    end = time.time() + timeout
    while not pred():
        if time.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def meta(path):
    v = os.getxattr(path, XATTR)
    version, _flags, bs, size, blocks = struct.unpack("<IIQQQ", v)
    assert version == 1
    return bs, size, blocks


def test_sizes_across_block_boundaries(sv):
    sizes = [BS - 1, BS, BS + 1, 3 * BS + 5]
    for i, n in enumerate(sizes):
        rel = f"{sv.dir}/f{i}"
        data = pattern(n, i)
        write(os.path.join(sv.a, rel), data, sync=True)
        assert os.stat(os.path.join(sv.a, rel)).st_size == n
        assert read(os.path.join(sv.b, rel)) == data
        copies = base_copies(sv, rel)
        assert len(copies) == 3
        g = gfid(copies[0])
        for p in copies:
            assert meta(p)[:2] == (BS, n)
            assert os.path.getsize(p) == min(n, BS)
            assert os.stat(p).st_mode & 0o1777 == 0o1644  # the sticky bit marks it
        sh = shards(sv, g)
        want = (n + BS - 1) // BS - 1
        assert sorted(sh) == list(range(1, want + 1)), (n, sorted(sh))
        for k, paths in sh.items():
            assert len(paths) == 3  # every copy of the shard's set
            part = data[k * BS:(k + 1) * BS]
            for p in paths:
                assert read(p) == part
    # the sticky bit and the first block's size never show through a mount
    st = os.stat(os.path.join(sv.a, f"{sv.dir}/f3"))
    assert st.st_mode & 0o7777 == 0o644 and st.st_size == 3 * BS + 5
    # the shards' blocks count (the base file alone takes at most BS); a
    # brick's count taken while its file system still allocates may be short
    assert 2 * BS < st.st_blocks * 512 <= 3 * BS + 5 + 8 * 4096
    listed = {e.name: e.stat().st_size for e in os.scandir(os.path.join(sv.b, sv.dir))}
    assert listed == {f"f{i}": n for i, n in enumerate(sizes)}
    m = sv.fresh("fresh1")
    try:
        for i, n in enumerate(sizes):
            assert read(os.path.join(m.path, f"{sv.dir}/f{i}")) == pattern(n, i)
    finally:
        m.stop()
        sv.c.mounts.remove(m)


def test_sparse_and_seek(sv):
    rel = f"{sv.dir}/sparse"
    p = os.path.join(sv.a, rel)
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, b"x" * 10, 10 * BS + 3)
        os.fsync(fd)
        assert os.fstat(fd).st_size == 10 * BS + 13
        assert os.lseek(fd, 0, os.SEEK_HOLE) == 0
        d = os.lseek(fd, 0, os.SEEK_DATA)
        assert 9 * BS < d <= 10 * BS + 3
        assert os.lseek(fd, 10 * BS + 3, os.SEEK_HOLE) == 10 * BS + 13
        with pytest.raises(OSError) as e:
            os.lseek(fd, 10 * BS + 13, os.SEEK_DATA)
        assert e.value.errno == errno.ENXIO
    finally:
        os.close(fd)
    g = gfid(base_copies(sv, rel)[0])
    assert sorted(shards(sv, g)) == [10]  # the blocks never written have no shard
    data = read(os.path.join(sv.b, rel))
    assert data == bytes(10 * BS + 3) + b"x" * 10
    assert os.stat(os.path.join(sv.b, rel)).st_blocks * 512 < 2 * BS


def test_truncate_down_and_up(sv):
    rel = f"{sv.dir}/t"
    p = os.path.join(sv.a, rel)
    data = pattern(3 * BS + 5, 7)
    write(p, data)
    g = gfid(base_copies(sv, rel)[0])
    assert sorted(shards(sv, g)) == [1, 2, 3]
    os.truncate(p, BS + 1)
    assert os.stat(os.path.join(sv.b, rel)).st_size == BS + 1
    assert read(os.path.join(sv.b, rel)) == data[:BS + 1]
    sh = shards(sv, g)
    assert sorted(sh) == [1] and all(os.path.getsize(x) == 1 for x in sh[1])
    os.truncate(p, 5 * BS)  # up: zeros, no new shard
    assert read(p) == data[:BS + 1] + bytes(5 * BS - BS - 1)
    assert sorted(shards(sv, g)) == [1]
    fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
    os.close(fd)
    assert os.stat(p).st_size == 0 and shards(sv, g) == {}
    assert all(meta(x)[1] == 0 for x in base_copies(sv, rel))


def test_punch_and_zero_range(sv):
    rel = f"{sv.dir}/holes"
    p = os.path.join(sv.a, rel)
    data = bytearray(pattern(3 * BS, 9))
    write(p, bytes(data))
    g = gfid(base_copies(sv, rel)[0])
    fd = os.open(p, os.O_RDWR)
    try:
        # from the end of block 0 over all of block 1 into block 2
        fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, BS - 8192, BS + 8192 + 8192)
        data[BS - 8192:2 * BS + 8192] = bytes(BS + 16384)
        assert sorted(shards(sv, g)) == [2]  # block 1 wholly a hole: its shard went
        assert os.lseek(fd, 0, os.SEEK_HOLE) == BS - 8192
        assert os.lseek(fd, BS - 8192, os.SEEK_DATA) == 2 * BS + 8192
        # zeros over the boundary of blocks 2 and 3, growing the file
        fallocate(fd, FALLOC_FL_ZERO_RANGE, 3 * BS - 100, 200)
        data[3 * BS - 100:] = bytes(100)
        data += bytes(100)
        assert os.fstat(fd).st_size == 3 * BS + 100
        os.fsync(fd)
    finally:
        os.close(fd)
    assert read(os.path.join(sv.b, rel)) == bytes(data)
    assert os.stat(os.path.join(sv.b, rel)).st_size == 3 * BS + 100


def test_unlink_rename_and_links(sv):
    d = os.path.join(sv.a, sv.dir)
    write(f"{d}/a", pattern(2 * BS + 1, 1))
    write(f"{d}/b", pattern(3 * BS + 1, 2))
    write(f"{d}/c", pattern(BS + 1, 3))
    ga, gb, gc = (gfid(base_copies(sv, f"{sv.dir}/{n}")[0]) for n in "abc")
    os.unlink(f"{d}/a")
    wait_for(lambda: shards(sv, ga) == {}, 10, "the shards of a removed file to go")
    os.rename(f"{d}/c", f"{d}/b")  # over a sharded file: its shards go
    wait_for(lambda: shards(sv, gb) == {}, 10, "the shards of a file renamed over to go")
    assert sorted(shards(sv, gc)) == [1]
    assert read(os.path.join(sv.b, sv.dir, "b")) == pattern(BS + 1, 3)
    os.link(f"{d}/b", f"{d}/b2")
    os.unlink(f"{d}/b")  # not the last name: the shards stay
    assert sorted(shards(sv, gc)) == [1]
    assert read(f"{d}/b2") == pattern(BS + 1, 3)
    fd = os.open(f"{d}/b2", os.O_RDONLY)
    os.unlink(f"{d}/b2")  # the last name, but open: the data stays until closed
    assert os.pread(fd, 10, BS) == pattern(BS + 1, 3)[BS:BS + 1]
    os.close(fd)
    wait_for(lambda: shards(sv, gc) == {}, 10, "the shards of a closed removed file to go")


def test_tree_removed_whole(sv):
    """rm -rf of a tree this mount made (write-back may remove it in one
    RMDIR that takes the tree along): the shards of its files go too."""
    top = os.path.join(sv.a, sv.dir, "tree")
    os.makedirs(os.path.join(top, "sub"))
    write(os.path.join(top, "sub", "big"), pattern(2 * BS + 3, 41))
    write(os.path.join(top, "small"), b"s")
    g = gfid(base_copies(sv, f"{sv.dir}/tree/sub/big")[0])
    assert sorted(shards(sv, g)) == [1, 2]
    shutil.rmtree(top)
    wait_for(lambda: shards(sv, g) == {}, 10, "the shards of a removed tree's file to go")


def test_second_mount_sees_changes(sv):
    """No lease covers a sharded file (a change to one of its shards does
    not touch the file a lease is on): the other mount reads it anew."""
    pa, pb = (os.path.join(m, sv.dir, "shared") for m in (sv.a, sv.b))
    data = bytearray(pattern(2 * BS + 10, 31))
    write(pa, bytes(data))
    assert read(pb) == data and os.stat(pb).st_size == len(data)
    assert [e.stat().st_size for e in os.scandir(os.path.dirname(pb))] == [len(data)]
    before = os.stat(pb).st_mtime_ns
    time.sleep(0.02)
    fd = os.open(pa, os.O_RDWR)
    try:
        os.pwrite(fd, b"Z" * 100, BS + 5)  # within block 1 only
        os.pwrite(fd, b"E", 2 * BS + 100)
    finally:
        os.close(fd)
    data[BS + 5:BS + 105] = b"Z" * 100
    data += bytes(2 * BS + 100 - len(data)) + b"E"
    st = os.stat(pb)
    assert st.st_size == len(data)
    assert st.st_mtime_ns > before  # a change to a shard is one to the file
    assert read(pb) == data


def test_shard_directory_hidden(sv):
    write(os.path.join(sv.a, sv.dir, "big"), pattern(BS + 1, 4))
    for m in (sv.a, sv.b):
        assert ".shard" not in os.listdir(m)
        for op in (os.stat, os.listdir):
            with pytest.raises(OSError) as e:
                op(os.path.join(m, ".shard"))
            assert e.value.errno == errno.ENOENT
        with pytest.raises(OSError):
            os.mkdir(os.path.join(m, ".shard"))


def test_random_operations_over_many_blocks(sv):
    size = check_file(os.path.join(sv.a, sv.dir, "f"), seed=45, n_ops=300, max_size=7 * BS,
                      max_io=2 * MB, also=os.path.join(sv.b, sv.dir, "f"))
    assert size > 0


def sharded_copy(path):
    try:
        os.getxattr(path, XATTR)
        return True
    except OSError as e:
        if e.errno != errno.ENODATA:
            raise
        return False


def option_reached(sv, value, tag):
    """Whether a file made now through mount a is sharded (value "on") or
    not: the mounts take a changed option a little after `volume set`."""
    i = [0]

    def probe():
        i[0] += 1
        rel = f"{sv.dir}/probe-{tag}-{i[0]}"
        write(os.path.join(sv.a, rel), b"p", sync=True)
        return sharded_copy(base_copies(sv, rel)[0]) == (value == "on")
    wait_for(probe, 20, f"features.shard {value} to reach the mount")


def test_files_made_before_stay_whole_and_option_is_live(volumes):
    sv = volumes["2x3"]
    sv.dir = "live"
    os.mkdir(os.path.join(sv.a, sv.dir))
    c = sv.c
    try:
        c.cli("volume", "set", sv.name, "features.shard", "off")
        option_reached(sv, "off", "off")
        old = pattern(2 * BS + 1, 21)
        write(os.path.join(sv.a, sv.dir, "old"), old)
        copies = base_copies(sv, f"{sv.dir}/old")
        assert all(os.path.getsize(p) == len(old) and not sharded_copy(p) for p in copies)
        c.cli("volume", "set", sv.name, "features.shard", "on")
        option_reached(sv, "on", "on")
        with open(os.path.join(sv.a, sv.dir, "old"), "ab") as f:
            f.write(b"tail")  # a file made before stays whole
        assert all(os.path.getsize(p) == len(old) + 4 and not sharded_copy(p) for p in copies)
        assert shards(sv, gfid(copies[0])) == {}
        # a new block size applies to new files; a file keeps its own
        c.cli("volume", "set", sv.name, "features.shard-block-size", "8MB")
        wait_for(lambda: (write(os.path.join(sv.a, sv.dir, "eight"), pattern(BS + 1, 22),
                                sync=True) or
                          meta(base_copies(sv, f"{sv.dir}/eight")[0])[0] == 2 * BS),
                 20, "the new block size to reach the mount")
        assert shards(sv, gfid(base_copies(sv, f"{sv.dir}/eight")[0])) == {}
        write(os.path.join(sv.a, sv.dir, "four"), b"")
    finally:
        c.cli("volume", "set", sv.name, "features.shard-block-size", "4MB")
        c.cli("volume", "set", sv.name, "features.shard", "on")
    for name, data in (("old", old + b"tail"), ("eight", pattern(BS + 1, 22))):
        assert read(os.path.join(sv.b, sv.dir, name)) == data
    r = c.cli("volume", "set", sv.name, "features.shard-block-size", "1MB", check=False)
    assert r.returncode != 0


def test_brick_killed_during_writes_heals_every_shard(volumes):
    """Last: it kills a brick of the replica 3 volume, which cairnd
    restarts stale; heal must bring every shard to every copy."""
    sv = volumes["replica3"]
    c = sv.c
    os.mkdir(os.path.join(sv.a, "heal"))
    rel = "heal/f"
    p = os.path.join(sv.a, rel)
    data = bytearray(pattern(3 * BS + 100, 11))
    write(p, bytes(data))
    pid = c.brick_status(sv.name)[1][3]
    fd = os.open(p, os.O_RDWR)
    try:
        # blocks 0 and 2 before the kill; 0, a new block 4 and 3 after it
        for i, off in enumerate([10, 2 * BS + 5, BS - 3, 4 * BS + 7, 3 * BS + 50]):
            if i == 2:
                os.kill(pid, signal.SIGKILL)
            chunk = pattern(64 << 10, 100 + i)
            assert os.pwrite(fd, chunk, off) == len(chunk)
            if off + len(chunk) > len(data):
                data += bytes(off + len(chunk) - len(data))
            data[off:off + len(chunk)] = chunk
        os.fsync(fd)
    finally:
        os.close(fd)
    got = read(p)
    assert got == bytes(data), first_difference(got, data)
    g = gfid(base_copies(sv, rel)[0])

    def healed():
        c.cli("volume", "heal", sv.name, check=False)
        copies = [os.path.join(b, rel) for b in sv.bricks]
        if not all(os.path.exists(x) for x in copies):
            return False
        if len({read(x) for x in copies}) != 1 or len({meta(x) for x in copies}) != 1:
            return False
        sh = shards(sv, g)
        if sorted(sh) != [1, 2, 3, 4] or any(len(v) != 3 for v in sh.values()):
            return False
        return all(len({read(x) for x in v}) == 1 for v in sh.values())
    wait_for(healed, 60, "heal to bring every shard to every copy")
    assert meta(os.path.join(sv.bricks[0], rel))[1] == len(data)
    sh = shards(sv, g)
    for k, v in sh.items():  # a shard may end early: the rest of its block reads as zeros
        got, part = read(v[0]), bytes(data[k * BS:(k + 1) * BS])
        assert got == part[:len(got)] and not any(part[len(got):]), k
    m = sv.fresh("after-heal")
    try:
        assert read(os.path.join(m.path, rel)) == bytes(data)
    finally:
        m.stop()
        c.mounts.remove(m)
