"""Dispersed volumes (issue 44, docs/disperse.md): `volume create ...
disperse N redundancy M` and its checks, `volume info`, and the disperse
layer's data path through real mounts: files of sizes around the chunk and
stripe, random pwrite/truncate against a model, every fragment on every
brick checked against an encode of the file made here (GF(2^8) Reed-Solomon
with ISA-L's Cauchy matrix, written out below), a brick killed in the
middle of writing and brought back, two mounts writing overlapping
partial stripes in turn, every change recalling the other mount's lease,
and features.shard on a 2 x (2 + 1) volume (each block's file checked
fragment by fragment).

cairnd on 127.0.0.103. Run inside a private network namespace.
"""

import errno
import os
import random
import re
import stat
import time
import uuid

import pytest

from cairn_cluster import Cluster, kill_pid, port_open
from opcheck import FALLOC_FL_ZERO_RANGE, check_file, fallocate

HOST = "127.0.0.103"
CHUNK = 512
SIZES = [0, 1, 511, 512, 1023, 1024, 1025, 1536, 4096, (1 << 20) + 3]


# ---- the code, as the bricks must hold it ----

def _gf_tables():
    exp, log = [0] * 512, [0] * 256
    x = 1
    for i in range(255):
        exp[i] = x
        log[x] = i
        x <<= 1
        if x & 0x100:
            x ^= 0x11D
    for i in range(255, 512):
        exp[i] = exp[i - 255]
    return exp, log


EXP, LOG = _gf_tables()


def gf_mul(a, b):
    return 0 if a == 0 or b == 0 else EXP[LOG[a] + LOG[b]]


def gf_inv(a):
    return EXP[255 - LOG[a]]


def encode(data, k, m):
    """The k + m fragments of data (zero-padded to whole stripes)."""
    sw = k * CHUNK
    stripes = (len(data) + sw - 1) // sw
    padded = data + bytes(stripes * sw - len(data))
    frags = [b"".join(padded[s * sw + j * CHUNK:s * sw + (j + 1) * CHUNK] for s in range(stripes))
             for j in range(k)]
    n = len(frags[0]) if frags else 0
    for i in range(k, k + m):
        acc = 0
        for j in range(k):
            c = gf_inv(i ^ j)
            table = bytes(gf_mul(c, x) for x in range(256))
            acc ^= int.from_bytes(frags[j].translate(table), "little")
        frags.append(acc.to_bytes(n, "little"))
    return frags


def frag_used(k, j, size):
    """Bytes at the start of fragment j that may be non-zero."""
    if size == 0:
        return 0
    sw = k * CHUNK
    full = (size - 1) // sw
    r = size - full * sw
    mine = min(r, CHUNK) if j >= k else max(0, min(r - j * CHUNK, CHUNK))
    return full * CHUNK + mine


def check_fragments(bricks, k, m, rel, data):
    """Every fragment of rel on the set holding it matches data's encode:
    its bytes, then zeros up to the file's real size (its own size)."""
    n = k + m
    sets = [bricks[i:i + n] for i in range(0, len(bricks), n)]
    holders = []
    for s in sets:
        p = os.path.join(s[0], rel)
        try:
            os.getxattr(p, "trusted.cairn.linkto")
            continue  # distribute's pointer, not the file
        except OSError:
            pass
        if os.path.exists(p):
            holders.append(s)
    assert len(holders) == 1, f"{rel} is on {len(holders)} sets"
    want = encode(data, k, m)
    for j, b in enumerate(holders[0]):
        with open(os.path.join(b, rel), "rb") as f:
            got = f.read()
        assert len(got) == len(data), f"fragment {j} of {rel}: size {len(got)} != {len(data)}"
        used = frag_used(k, j, len(data))
        assert got[:used] == want[j][:used], f"fragment {j} of {rel} differs from the encode"
        assert got[used:].count(0) == len(got) - used, f"fragment {j} of {rel}: bytes past its data"


def read(path):
    with open(path, "rb") as f:
        return f.read()


def restart(c, vol):
    """Starts vol's dead bricks and waits until each answers."""
    c.cli("volume", "start", vol, "force")
    end = time.time() + 20
    while time.time() < end:
        if all(pid and port_open(c.host, port) for _, _, port, pid in c.brick_status(vol)):
            return
        time.sleep(0.1)
    raise AssertionError(f"bricks of {vol} not back")


def read_back(path, timeout=10, retry=(errno.ENOTCONN,)):
    """read(), once the mount has reconnected to bricks just restarted
    (retrying the errors in retry until timeout)."""
    end = time.time() + timeout
    while True:
        try:
            return read(path)
        except OSError as e:
            if e.errno not in retry or time.time() > end:
                raise
            time.sleep(0.2)


def brick_pid(c, vol, path):
    for _, p, _, pid in c.brick_status(vol):
        if p == path:
            return pid
    raise AssertionError(f"no brick {path}")


@pytest.fixture(scope="module")
def ec():
    c = Cluster(host=HOST, prefix="st-ec-")
    try:
        c.start()
        b1 = [c.brick_path(f"a{i}") for i in range(3)]
        b2 = [c.brick_path(f"b{i}") for i in range(6)]
        for b in b1 + b2:
            os.makedirs(b)
        c.cli("volume", "create", "ec1", "disperse", "3", "redundancy", "1",
              *[f"{HOST}:{b}" for b in b1], "force")
        c.cli("volume", "create", "ec2", "disperse-data", "2", "redundancy", "1",
              *[f"{HOST}:{b}" for b in b2], "force")
        for v in ("ec1", "ec2"):
            c.cli("volume", "set", v, "network.ping-timeout", "2")
            c.cli("volume", "start", v)
        c.vols = {"ec1": b1, "ec2": b2}
        c.m = {v: [c.mount(v, os.path.join(c.root, f"{v}-m{i}")) for i in range(2)]
               for v in ("ec1", "ec2")}
        yield c
    finally:
        c.close()


def fresh(c, vol):
    """A new mount of vol (no cache of the others)."""
    return c.mount(vol, os.path.join(c.root, f"{vol}-f{random.randrange(1 << 30)}"))


def test_create_checks_and_info(ec):
    c = ec
    d = [c.brick_path(f"x{i}") for i in range(4)]
    for b in d:
        os.makedirs(b, exist_ok=True)
    bricks = [f"{HOST}:{b}" for b in d]

    def create(*words, n=3):
        return c.cli("volume", "create", "bad", *words, *bricks[:n], "force", check=False)

    r = create("disperse", "4", "redundancy", "2", n=4)
    assert r.returncode != 0 and "redundancy must be less than 2" in r.stdout + r.stderr
    r = create("disperse", "3", n=4)
    assert r.returncode != 0 and "Incorrect number of bricks supplied 4 with count 3" in \
        r.stdout + r.stderr
    r = create("replica", "3", "disperse", "3")
    assert r.returncode != 0 and "cannot be combined" in r.stdout + r.stderr
    r = create("disperse", "2", n=2)
    assert r.returncode != 0 and "greater than 2" in r.stdout + r.stderr
    r = create("disperse", "3", "disperse-data", "3")
    assert r.returncode != 0
    r = create("disperse", n=4)  # no optimal redundancy for 4: 1, said so
    assert r.returncode == 0, r.stdout + r.stderr
    assert "optimal redundancy" in r.stdout
    info = c.cli("volume", "info", "bad").stdout
    assert "Type: Disperse" in info and "Number of Bricks: 1 x (3 + 1) = 4" in info
    c.cli("volume", "delete", "bad", check=False)
    r = c.cli("volume", "delete", "bad", check=False)
    info = c.cli("volume", "info", "ec1").stdout
    assert "Type: Disperse\n" in info and "Number of Bricks: 1 x (2 + 1) = 3" in info
    info = c.cli("volume", "info", "ec2").stdout
    assert "Type: Distributed-Disperse" in info and "Number of Bricks: 2 x (2 + 1) = 6" in info
    xml = c.cli("--xml", "volume", "info", "ec2").stdout
    assert "<disperseCount>3</disperseCount>" in xml and "<redundancyCount>1</redundancyCount>" \
        in xml
    r = c.cli("volume", "add-brick", "ec2", *bricks[:3], check=False)
    assert r.returncode != 0 and "dispersed" in r.stdout + r.stderr


@pytest.mark.parametrize("vol", ["ec1", "ec2"])
def test_sizes_round_trip(ec, vol):
    c = ec
    m0, m1 = c.m[vol]
    d = f"sizes-{vol}"
    os.mkdir(os.path.join(m0.path, d))
    rng = random.Random(44)
    want = {}
    for size in SIZES:
        data = rng.randbytes(size)
        name = f"f{size}"
        with open(os.path.join(m0.path, d, name), "wb") as f:
            f.write(data)
        want[name] = data
    # a file grown by appends of odd sizes, through the page cache
    grown = b""
    with open(os.path.join(m0.path, d, "appended"), "ab") as f:
        for n in (100, 700, 1, 3000, 513):
            piece = rng.randbytes(n)
            f.write(piece)
            f.flush()
            grown += piece
    want["appended"] = grown
    fm = fresh(c, vol)
    for mnt in (m0, m1, fm):
        for name, data in want.items():
            p = os.path.join(mnt.path, d, name)
            assert os.stat(p).st_size == len(data), (mnt.path, name)
            assert read(p) == data, (mnt.path, name)
        listed = {e.name: e.stat().st_size for e in os.scandir(os.path.join(mnt.path, d))}
        assert listed == {n: len(v) for n, v in want.items()}
    for name, data in want.items():
        check_fragments(c.vols[vol], 2, 1, os.path.join(d, name), data)
    # df: k bricks' worth of space per set (the bricks share one file system)
    vfs, bfs = os.statvfs(m0.path), os.statvfs(c.vols[vol][0])
    sets = len(c.vols[vol]) // 3
    assert abs(vfs.f_blocks * vfs.f_frsize - 2 * sets * bfs.f_blocks * bfs.f_frsize) <= \
        0.01 * vfs.f_blocks * vfs.f_frsize


def test_random_writes_and_truncates(ec):
    c = ec
    m0 = c.m["ec1"][0]
    p = os.path.join(m0.path, "random")
    rng = random.Random(4444)
    model = bytearray()
    fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        for i in range(150):
            r = rng.random()
            if r < 0.6:
                off = rng.randrange(0, len(model) + 3000)
                data = rng.randbytes(rng.choice([1, 7, 511, 512, 513, 1024, 1500, 4096, 9000]))
                os.pwrite(fd, data, off)
                if off > len(model):
                    model.extend(bytes(off - len(model)))
                model[off:off + len(data)] = data
            elif r < 0.8:
                n = rng.randrange(0, len(model) + 2000)
                os.ftruncate(fd, n)
                if n < len(model):
                    del model[n:]
                else:
                    model.extend(bytes(n - len(model)))
            else:
                off = rng.randrange(0, len(model) + 10)
                n = rng.randrange(1, 5000)
                assert os.pread(fd, n, off) == bytes(model[off:off + n]), f"step {i}"
        os.fsync(fd)
    finally:
        os.close(fd)
    os.truncate(p, len(model) + 777)  # by path, growing
    model.extend(bytes(777))
    os.truncate(p, len(model) - 1300)  # by path, shrinking mid-stripe
    del model[len(model) - 1300:]
    fm = fresh(c, "ec1")
    assert read(os.path.join(fm.path, "random")) == bytes(model)
    check_fragments(c.vols["ec1"], 2, 1, "random", bytes(model))


@pytest.mark.parametrize("vol", ["ec1", "ec2"])
def test_random_operations_match_a_model(ec, vol):
    """opcheck's random writes, truncates, punched holes, zeroed ranges,
    fallocates, fsyncs, reopens and seeks, every read compared with a model
    and the file read through the second mount at checkpoints; then every
    fragment on every brick checked against a fresh encode."""
    c = ec
    name = f"opcheck-{vol}"
    size = check_file(os.path.join(c.m[vol][0].path, name), seed=45, n_ops=600,
                      max_size=1 << 20, max_io=64 << 10,
                      also=os.path.join(c.m[vol][1].path, name))
    data = read(os.path.join(fresh(c, vol).path, name))
    assert len(data) == size
    check_fragments(c.vols[vol], 2, 1, name, data)


def test_changes_recall_the_other_mounts_lease(ec):
    """Each change of the disperse layer recalls the other mounts' leases:
    a second mount that read an empty file (and cached its size under a
    lease, taken once the cool-downs after the writer's open passed) sees
    the file grown by a write, a truncate (by handle and by path), a plain
    fallocate and a zeroed range. Its changes went to the bricks without
    the file's path, the key of the recall, and that mount read 0 bytes."""
    c = ec
    a, b = c.m["ec1"]
    names = ["rc-write", "rc-ftruncate", "rc-truncate", "rc-alloc", "rc-zero"]
    fds = {n: os.open(os.path.join(a.path, n), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
           for n in names}
    try:
        for fd in fds.values():
            os.fsync(fd)
        time.sleep(1.2)  # past the cool-downs of the opens: b gets leases
        for n in names:
            assert read(os.path.join(b.path, n)) == b""
        data = random.Random(5).randbytes(5000)
        os.pwrite(fds["rc-write"], data, 0)
        os.ftruncate(fds["rc-ftruncate"], 3000)
        os.truncate(os.path.join(a.path, "rc-truncate"), 2500)
        fallocate(fds["rc-alloc"], 0, 0, 7000)
        fallocate(fds["rc-zero"], FALLOC_FL_ZERO_RANGE, 100, 4000)
        for fd in fds.values():
            os.fsync(fd)
    finally:
        for fd in fds.values():
            os.close(fd)
    want = {"rc-write": data, "rc-ftruncate": bytes(3000), "rc-truncate": bytes(2500),
            "rc-alloc": bytes(7000), "rc-zero": bytes(4100)}
    stale = [n for n in names if read(os.path.join(b.path, n)) != want[n]]
    assert stale == []
    for n in names:
        assert os.stat(os.path.join(b.path, n)).st_size == len(want[n]), n
        check_fragments(c.vols["ec1"], 2, 1, n, want[n])


def test_two_mounts_overlapping_partial_stripes(ec):
    """Writes through two mounts, in turn, over the same partial stripes:
    the file ends as the writes in their order define."""
    c = ec
    a, b = c.m["ec2"]
    rng = random.Random(7)
    model = bytearray(rng.randbytes(5000))
    with open(os.path.join(a.path, "shared"), "wb") as f:
        f.write(model)
    for i in range(12):
        mnt = (a, b)[i % 2]
        off, data = rng.randrange(0, 5200), rng.randbytes(rng.randrange(1, 900))
        fd = os.open(os.path.join(mnt.path, "shared"), os.O_RDWR)
        try:
            os.pwrite(fd, data, off)
            os.fsync(fd)
        finally:
            os.close(fd)
        if off > len(model):
            model.extend(bytes(off - len(model)))
        model[off:off + len(data)] = data
    for mnt in (a, b, fresh(c, "ec2")):
        assert read(os.path.join(mnt.path, "shared")) == bytes(model), mnt.path
    check_fragments(c.vols["ec2"], 2, 1, "shared", bytes(model))


@pytest.mark.parametrize("vol,victims", [("ec1", (0,)), ("ec2", (2, 5))])
def test_brick_killed_and_back(ec, vol, victims):
    """One brick of each set killed mid-work (ec1: a data fragment's brick;
    ec2: the redundancy brick of both sets): no error to the application,
    reads decode from the others, writes go on; with the bricks back every
    file reads right through a fresh mount (the stale fragments are marked
    and not read until healed), and the
    files written before the outage still check fragment by fragment; the
    self-heal daemon rebuilds the fragments the bricks missed."""
    c = ec
    m0 = c.m[vol][0]
    bricks = c.vols[vol]
    rng = random.Random(99)
    before = rng.randbytes(300000)
    with open(os.path.join(m0.path, "deg-before"), "wb") as f:
        f.write(before)
    model = bytearray(rng.randbytes(70000))
    with open(os.path.join(m0.path, "deg"), "wb") as f:
        f.write(model)
    for v in victims:
        kill_pid(brick_pid(c, vol, bricks[v]))
    fd = os.open(os.path.join(m0.path, "deg"), os.O_RDWR)
    try:
        for i in range(30):
            off, data = rng.randrange(0, 80000), rng.randbytes(rng.randrange(1, 3000))
            os.pwrite(fd, data, off)
            if off > len(model):
                model.extend(bytes(off - len(model)))
            model[off:off + len(data)] = data
            if i % 10 == 9:
                assert os.pread(fd, len(model), 0) == bytes(model)
        os.ftruncate(fd, len(model) - 555)
        del model[len(model) - 555:]
        os.fsync(fd)
    finally:
        os.close(fd)
    made = b"made with a brick down" * 100
    with open(os.path.join(m0.path, "deg-new"), "wb") as f:
        f.write(made)
    os.mkdir(os.path.join(m0.path, "deg-dir"))
    os.rename(os.path.join(m0.path, "deg-new"), os.path.join(m0.path, "deg-dir", "new"))
    fm = fresh(c, vol)  # nothing cached: every byte decoded from the others
    assert read(os.path.join(fm.path, "deg")) == bytes(model)
    assert read(os.path.join(fm.path, "deg-before")) == before
    assert read(os.path.join(fm.path, "deg-dir", "new")) == made
    restart(c, vol)
    fm2 = fresh(c, vol)
    assert read_back(os.path.join(fm2.path, "deg")) == bytes(model)
    assert read(os.path.join(fm2.path, "deg-dir", "new")) == made
    assert os.stat(os.path.join(fm2.path, "deg")).st_size == len(model)
    assert read(os.path.join(fm2.path, "deg-before")) == before
    check_fragments(bricks, 2, 1, "deg-before", before)
    # the self-heal daemon rebuilds what the bricks missed
    # (test_disperse_heal.py tests heal through and through)
    end = time.time() + 30
    while True:
        info = c.cli("volume", "heal", vol, "info").stdout
        counts = re.findall(r"Number of entries: (\S+)", info)
        if counts and all(n == "0" for n in counts):
            break
        assert time.time() < end, info
        time.sleep(0.5)
    check_fragments(bricks, 2, 1, "deg", bytes(model))
    check_fragments(bricks, 2, 1, "deg-dir/new", made)


def test_two_bricks_down_fails_at_once(ec):
    c = ec
    m0 = c.m["ec1"][0]
    bricks = c.vols["ec1"]
    data = os.urandom(5000)
    with open(os.path.join(m0.path, "two-down"), "wb") as f:
        f.write(data)
    # a file written with all bricks up was checked above; now two go
    for b in bricks[1:]:
        kill_pid(brick_pid(c, "ec1", b))
    fm = None
    try:
        fd = os.open(os.path.join(m0.path, "two-down"), os.O_RDWR | os.O_DIRECT)
        with pytest.raises(OSError) as e:
            os.pwrite(fd, os.urandom(4096), 0)
            os.fsync(fd)
        assert e.value.errno in (5, 107)  # EIO, ENOTCONN
        os.close(fd)
    finally:
        restart(c, "ec1")
    fm = fresh(c, "ec1")
    got = read_back(os.path.join(fm.path, "two-down"))
    assert got == data
    assert stat.S_ISREG(os.stat(os.path.join(fm.path, "two-down")).st_mode)


def check_sharded(bricks, k, m, rel, data, bs):
    """A sharded file on a dispersed volume: its base file (block 0) and
    every shard /.shard/GFID.N, each a file of its own on the set
    distribute placed it on, checked fragment by fragment against the
    bytes of its block; a block with no shard, and a block's part past its
    shard's end, must read as zeros."""
    def holder(r):
        for b in bricks:
            p = os.path.join(b, r)
            if os.path.exists(p):
                try:
                    os.getxattr(p, "trusted.cairn.linkto")
                except OSError:
                    return p
        return None

    base = holder(rel)
    g = str(uuid.UUID(bytes=os.getxattr(base, "trusted.cairn.gfid")))
    blocks = (len(data) + bs - 1) // bs
    for n in range(max(blocks, 1)):
        r = rel if n == 0 else f".shard/{g}.{n}"
        p = holder(r)
        lo, hi = n * bs, min((n + 1) * bs, len(data))
        have = os.path.getsize(p) if p else 0
        assert have <= hi - lo, f"{r}: {have} bytes, the block holds {hi - lo}"
        if p:
            check_fragments(bricks, k, m, r, data[lo:lo + have])
        assert data[lo + have:hi].count(0) == hi - lo - have, f"{r}: data past its end"
    extra = [e for b in bricks if os.path.isdir(os.path.join(b, ".shard"))
             for e in os.listdir(os.path.join(b, ".shard"))
             if e.startswith(g + ".") and int(e.rsplit(".", 1)[1]) >= blocks]
    assert extra == [], f"shards past the end of {rel}: {extra}"


def test_shard_on_a_dispersed_volume(ec):
    """features.shard on a 2 x (2 + 1) volume (the VM image store's
    shape): a file crossing two 4 MiB block boundaries, a sparse one,
    opcheck's random operations over three blocks; every byte read through a fresh
    mount, every block (base file and shards) checked fragment by fragment
    on the set holding it."""
    c = ec
    bs = 4 << 20
    bricks = [c.brick_path(f"s{i}") for i in range(6)]
    for b in bricks:
        os.makedirs(b)
    c.cli("volume", "create", "ecs", "disperse-data", "2", "redundancy", "1",
          *[f"{HOST}:{b}" for b in bricks], "force")
    for key, value in (("network.ping-timeout", "2"), ("features.shard", "on"),
                       ("features.shard-block-size", "4MB")):
        c.cli("volume", "set", "ecs", key, value)
    c.cli("volume", "start", "ecs")
    m0, m1 = (c.mount("ecs", os.path.join(c.root, f"ecs-m{i}")) for i in range(2))
    rng = random.Random(3)
    want = {"s-three": rng.randbytes(2 * bs + 777)}
    for name, data in want.items():
        with open(os.path.join(m0.path, name), "wb") as f:
            f.write(data)
    tail = rng.randbytes(5000)
    with open(os.path.join(m0.path, "s-sparse"), "wb") as f:
        f.seek(3 * bs + 100)
        f.write(tail)
    want["s-sparse"] = bytes(3 * bs + 100) + tail
    size = check_file(os.path.join(m0.path, "s-op"), seed=47, n_ops=150, max_size=9 << 20,
                      max_io=256 << 10, also=os.path.join(m1.path, "s-op"))
    fm = fresh(c, "ecs")
    want["s-op"] = read(os.path.join(fm.path, "s-op"))
    assert len(want["s-op"]) == size
    assert read(os.path.join(m1.path, "s-op")) == want["s-op"]
    for name, data in want.items():
        assert os.stat(os.path.join(fm.path, name)).st_size == len(data), name
        assert read(os.path.join(fm.path, name)) == data, name
        check_sharded(bricks, 2, 1, name, data, bs)
    assert ".shard" not in os.listdir(fm.path)
