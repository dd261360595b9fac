"""Directory quota (docs/quota.md): `cairn volume quota`, EDQUOT through a
real mount with write-back on and off, object limits, df of a limited
directory, renames between limited directories, the soft limit in the
brick log, usage kept equal on every brick of a replica set across a
brick's death and heal, and a distributed volume's limit over its sets.

One cairnd on 127.0.0.240 (127.0.0.240-244 are this module's).

Run:
  unshare -n sh -c 'ip link set lo up; CAIRN_BUILD=$PWD/build \\
      /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/system/test_quota.py'
"""

import ctypes
import errno
import glob
import hashlib
import os
import re
import signal
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cairn_cluster import Cluster, alive, fsync_dir, made_here  # noqa: E402

HOST = "127.0.0.240"
KB = 1024
MB = 1 << 20


@pytest.fixture(scope="module")
def c():
    cl = Cluster(host=HOST, prefix="st-quota-")
    try:
        cl.start()
        cl.dumps = os.path.join(cl.root, "dumps")
        yield cl
    finally:
        cl.close()


def quota(c, vol, *args, check=True):
    return c.cli("volume", "quota", vol, *args, check=check)


def listing(c, vol, kind="list"):
    """{path: row} of `volume quota VOL list|list-objects`, each row the
    columns after the path."""
    out = quota(c, vol, kind).stdout.splitlines()
    assert "Hard-limit" in out[0] and "Soft-limit" in out[0] and set(out[1]) == {"-"}, out
    rows = {}
    for line in out[2:]:
        parts = line.split()
        rows[parts[0]] = parts[1:]
    return rows


def size_of(text):
    """Bytes of a quota list size ("1.5MB", "512Bytes")."""
    m = re.fullmatch(r"([\d.]+)(Bytes|KB|MB|GB|TB|PB)", text)
    assert m, text
    units = {"Bytes": 1, "KB": KB, "MB": MB, "GB": 1 << 30, "TB": 1 << 40, "PB": 1 << 50}
    return float(m.group(1)) * units[m.group(2)]


def used(c, vol, path):
    """Used bytes of path in `quota list`, exactly, from the XML form."""
    out = c.cli("--xml", "volume", "quota", vol, "list", path).stdout
    m = re.search(r"<used_space>(\d+)</used_space>", out)
    assert m, out
    return int(m.group(1))


def new_volume(c, name, n=1, replica=None, options=None):
    bricks = [os.path.join(c.root, f"{name}-b{i}") for i in range(n)]
    c.create_volume(name, bricks, replica=replica, options=options)
    m = c.mount(name, os.path.join(c.root, f"{name}-m"))
    return bricks, m


def brick_logs(c):
    return [p for p in glob.glob(os.path.join(c.root, "**", "*.log"), recursive=True)
            if "brick" in os.path.basename(p) or "bricks" in p]


def tree_sums(root):
    out = {}
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if not (d == root and x == ".cairn")]
        for f in files:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def test_bad_input_gets_clear_errors(c):
    new_volume(c, "qbad")
    r = quota(c, "qbad", "limit-usage", "/", "1MB", check=False)
    assert r.returncode != 0 and "Quota is disabled, please enable quota" in r.stderr + r.stdout
    r = quota(c, "qbad", "list", check=False)
    assert r.returncode != 0 and "Quota is disabled" in r.stderr + r.stdout
    r = quota(c, "nosuchvol", "enable", check=False)
    assert r.returncode != 0 and "does not exist" in r.stderr + r.stdout
    assert quota(c, "qbad", "enable").stdout.strip() == "volume quota : success"
    r = quota(c, "qbad", "enable", check=False)
    assert r.returncode != 0 and "already enabled" in r.stderr + r.stdout
    r = quota(c, "qbad", "limit-usage", "/missing", "1MB", check=False)
    assert r.returncode != 0 and "/missing" in r.stderr and "No such file or directory" in r.stderr
    for bad in ("10XB", "-5MB", "0", "MB", "1.5.2GB"):
        r = quota(c, "qbad", "limit-usage", "/", bad, check=False)
        assert r.returncode != 0 and "is not a size" in r.stderr, (bad, r.stderr)
    for bad in ("-3", "0", "ten", "2.5"):
        r = quota(c, "qbad", "limit-objects", "/", bad, check=False)
        assert r.returncode != 0 and "is not a number of objects" in r.stderr, (bad, r.stderr)
    for bad in ("0", "101", "80x"):
        r = quota(c, "qbad", "limit-usage", "/", "1MB", bad, check=False)
        assert r.returncode != 0 and "is not a soft limit" in r.stderr, (bad, r.stderr)
    r = quota(c, "qbad", "limit-usage", "relative", "1MB", check=False)
    assert r.returncode != 0 and "is not a path of the volume" in r.stderr
    r = quota(c, "qbad", "remove", "/", check=False)
    assert r.returncode != 0 and "No usage limit is set on /" in r.stderr
    r = quota(c, "qbad", "frobnicate", check=False)
    assert r.returncode != 0 and "Usage" in r.stdout + r.stderr
    # nothing of the above left a limit behind
    assert listing(c, "qbad") == {}
    quota(c, "qbad", "disable")
    assert c.cli("volume", "get", "qbad", "features.quota-limits").stdout.split()[-1] != "/"


def write_until_refused(d, prefix, size, count, fsync_every=4):
    """Writes count files of size bytes in d, fsyncing the directory every
    few files; stops at the first error. Returns (confirmed {name: data},
    the error)."""
    confirmed, pending, err = {}, {}, None
    for i in range(count):
        name = f"{prefix}{i}"
        data = os.urandom(size)
        try:
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
            pending[name] = data
            if len(pending) >= fsync_every:
                fsync_dir(d)
                confirmed.update(pending)
                pending = {}
        except OSError as e:
            err = e
            break
    if err is None:
        try:
            fsync_dir(d)
            confirmed.update(pending)
        except OSError as e:
            err = e
    return confirmed, err


@pytest.mark.parametrize("write_back,replica", [("on", None), ("off", None), ("on", 3)])
def test_hard_limit_gives_edquot_and_loses_nothing(c, write_back, replica):
    vol = f"qwb{write_back}{replica or ''}"
    opts = {} if write_back == "on" else {"client.write-back": "off",
                                           "performance.write-behind": "off"}
    bricks, m = new_volume(c, vol, n=replica or 1, replica=replica, options=opts)
    d = os.path.join(m.path, "lim")
    os.mkdir(d)
    fsync_dir(m.path)
    quota(c, vol, "enable")
    quota(c, vol, "limit-usage", "/lim", "1MB")
    # small files through write-back (or not), then one big file
    confirmed, err = write_until_refused(d, "f", 40 * KB, 60)
    assert err is not None and err.errno == errno.EDQUOT, err
    assert len(confirmed) >= 8, len(confirmed)
    # write-back answered the files here (or, off, none)
    assert (made_here(m.path) > 0) == (write_back == "on")
    big_err = None
    try:
        with open(os.path.join(d, "big"), "wb") as f:
            for _ in range(40):
                f.write(os.urandom(64 * KB))
                f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        big_err = e
    assert big_err is not None and big_err.errno == errno.EDQUOT, big_err
    # the limit holds exactly on a single brick
    on_brick = sum(os.path.getsize(os.path.join(bricks[0], "lim", f))
                   for f in os.listdir(os.path.join(bricks[0], "lim")))
    assert on_brick <= MB
    assert used(c, vol, "/lim") == on_brick
    # every file the application was told is stored is whole, through a
    # fresh mount and on the brick
    time.sleep(0.5)
    m2 = c.mount(vol, os.path.join(c.root, f"{vol}-m2"))
    for name, data in confirmed.items():
        with open(os.path.join(m2.path, "lim", name), "rb") as f:
            assert f.read() == data, name
        for b in bricks:
            with open(os.path.join(b, "lim", name), "rb") as f:
                assert f.read() == data, (b, name)
    # the copies of a replica set took the same decisions
    assert len({tuple(sorted(tree_sums(os.path.join(b, "lim")).items())) for b in bricks}) == 1
    # room made again: writes pass (after the mount's 5 s pause)
    for name in list(confirmed)[:6]:
        os.unlink(os.path.join(d, name))
    fsync_dir(d)
    end = time.time() + 15
    while True:
        try:
            with open(os.path.join(d, "again"), "wb") as f:
                f.write(b"x" * 1000)
            fsync_dir(d)
            break
        except OSError as e:
            assert e.errno == errno.EDQUOT and time.time() < end, e
            time.sleep(0.5)
    assert used(c, vol, "/lim") == sum(
        os.path.getsize(os.path.join(bricks[0], "lim", f))
        for f in os.listdir(os.path.join(bricks[0], "lim")))


def test_limit_objects_refuses_the_create_over_the_count(c):
    bricks, m = new_volume(c, "qobj", options={"client.write-back": "off"})
    d = os.path.join(m.path, "o")
    os.mkdir(d)
    open(os.path.join(d, "before"), "w").close()
    quota(c, "qobj", "enable")
    quota(c, "qobj", "limit-objects", "/o", "5")
    rows = listing(c, "qobj", "list-objects")
    # hard, soft, files, dirs, available, sl, hl (the directory counts)
    assert rows["/o"][0] == "5" and rows["/o"][2:5] == ["1", "1", "3"], rows
    made = 0
    with pytest.raises(OSError) as e:
        for i in range(10):
            open(os.path.join(d, f"n{i}"), "w").close()
            made += 1
    assert e.value.errno == errno.EDQUOT
    assert made == 3
    with pytest.raises(OSError) as e:
        os.mkdir(os.path.join(d, "sub"))
    assert e.value.errno == errno.EDQUOT
    assert sorted(os.listdir(os.path.join(bricks[0], "o"))) == ["before", "n0", "n1", "n2"]
    rows = listing(c, "qobj", "list-objects")
    assert rows["/o"][2:5] == ["4", "1", "0"] and rows["/o"][5:] == ["Yes", "Yes"], rows
    quota(c, "qobj", "remove-objects", "/o")
    open(os.path.join(d, "n9"), "w").close()


def test_df_shows_the_limit_with_deem_statfs(c):
    bricks, m = new_volume(c, "qdf")
    d = os.path.join(m.path, "d")
    os.makedirs(os.path.join(d, "deeper"))
    with open(os.path.join(d, "deeper", "f"), "wb") as f:
        f.write(b"z" * (3 * MB))
    fsync_dir(os.path.join(d, "deeper"))
    quota(c, "qdf", "enable")
    quota(c, "qdf", "limit-usage", "/d", "10MB")
    whole = os.statvfs(m.path)
    for where in (d, os.path.join(d, "deeper")):
        st = os.statvfs(where)
        assert st.f_blocks * st.f_frsize == 10 * MB, where
        assert (st.f_blocks - st.f_bfree) * st.f_frsize == pytest.approx(3 * MB, abs=8 * KB)
    # outside the limit, and with deem-statfs off: the volume's size
    assert os.statvfs(m.path).f_blocks == whole.f_blocks != os.statvfs(d).f_blocks
    c.cli("volume", "set", "qdf", "features.quota-deem-statfs", "off")
    st = os.statvfs(d)
    assert st.f_blocks * st.f_frsize == whole.f_blocks * whole.f_frsize


def test_rename_moves_usage_and_refuses_over_the_target_limit(c):
    bricks, m = new_volume(c, "qren", options={"client.write-back": "off"})
    a, b = os.path.join(m.path, "a"), os.path.join(m.path, "b")
    os.mkdir(a)
    os.mkdir(b)
    quota(c, "qren", "enable")
    quota(c, "qren", "limit-usage", "/a", "2MB")
    quota(c, "qren", "limit-usage", "/b", "1MB")
    with open(os.path.join(a, "f"), "wb") as f:
        f.write(b"1" * (600 * KB))
    os.makedirs(os.path.join(a, "sub"))
    with open(os.path.join(a, "sub", "g"), "wb") as f:
        f.write(b"2" * (300 * KB))
    assert used(c, "qren", "/a") == 900 * KB and used(c, "qren", "/b") == 0
    os.rename(os.path.join(a, "f"), os.path.join(b, "f"))
    assert used(c, "qren", "/a") == 300 * KB and used(c, "qren", "/b") == 600 * KB
    # a directory moves with its contents
    os.rename(os.path.join(a, "sub"), os.path.join(b, "sub"))
    assert used(c, "qren", "/a") == 0 and used(c, "qren", "/b") == 900 * KB
    # back: fits
    os.rename(os.path.join(b, "sub"), os.path.join(a, "sub"))
    with open(os.path.join(a, "big"), "wb") as f:
        f.write(b"3" * (500 * KB))
    # 600 KB + 500 KB > 1 MB: refused, nothing moved
    with pytest.raises(OSError) as e:
        os.rename(os.path.join(a, "big"), os.path.join(b, "big"))
    assert e.value.errno == errno.EDQUOT
    assert os.path.exists(os.path.join(bricks[0], "a", "big"))
    assert not os.path.exists(os.path.join(bricks[0], "b", "big"))
    assert used(c, "qren", "/a") == 800 * KB and used(c, "qren", "/b") == 600 * KB
    # within one limited directory: no change
    os.rename(os.path.join(a, "big"), os.path.join(a, "sub", "big"))
    assert used(c, "qren", "/a") == 800 * KB
    # an exchange (renameat2 RENAME_EXCHANGE) trades the two sides' usage
    with open(os.path.join(b, "small"), "wb") as f:
        f.write(b"4" * (100 * KB))
    libc = ctypes.CDLL(None, use_errno=True)
    at_fdcwd, rename_exchange = -100, 2
    rc = libc.renameat2(at_fdcwd, os.path.join(a, "sub", "g").encode(), at_fdcwd,
                        os.path.join(b, "small").encode(), rename_exchange)
    assert rc == 0, os.strerror(ctypes.get_errno())
    assert used(c, "qren", "/a") == 600 * KB and used(c, "qren", "/b") == 900 * KB
    rc = libc.renameat2(at_fdcwd, os.path.join(a, "sub", "g").encode(), at_fdcwd,
                        os.path.join(b, "small").encode(), rename_exchange)
    assert rc == 0, os.strerror(ctypes.get_errno())
    os.unlink(os.path.join(b, "small"))
    assert used(c, "qren", "/a") == 800 * KB and used(c, "qren", "/b") == 600 * KB
    # the counts match a fresh count (quota off and on again crawls)
    quota(c, "qren", "disable")
    quota(c, "qren", "enable")
    quota(c, "qren", "limit-usage", "/a", "2MB")
    quota(c, "qren", "limit-usage", "/b", "1MB")
    assert used(c, "qren", "/a") == 800 * KB and used(c, "qren", "/b") == 600 * KB


def test_soft_limit_crossing_is_logged(c):
    bricks, m = new_volume(c, "qsoft", options={"client.write-back": "off"})
    d = os.path.join(m.path, "soft-dir")
    os.mkdir(d)
    quota(c, "qsoft", "enable")
    quota(c, "qsoft", "limit-usage", "/soft-dir", "1MB", "50%")
    with open(os.path.join(d, "f"), "wb") as f:
        f.write(b"s" * (400 * KB))
    def said():
        return [line for p in brick_logs(c) for line in open(p, errors="replace")
                if "crossed the soft limit" in line and "/soft-dir" in line]
    assert said() == []
    with open(os.path.join(d, "g"), "wb") as f:
        f.write(b"s" * (200 * KB))
    end = time.time() + 15
    while not said() and time.time() < end:
        time.sleep(0.1)
    assert len(said()) == 1, brick_logs(c)
    rows = listing(c, "qsoft")
    assert rows["/soft-dir"][-2:] == ["Yes", "No"], rows


def test_existing_data_is_counted_when_enabled(c):
    bricks, m = new_volume(c, "qold", n=1)
    d = os.path.join(m.path, "old", "x", "y")
    os.makedirs(d)
    for i in range(5):
        with open(os.path.join(d, f"f{i}"), "wb") as f:
            f.write(b"o" * (100 * KB + i))
    os.symlink("f0", os.path.join(d, "link"))
    fsync_dir(d)
    quota(c, "qold", "enable")
    quota(c, "qold", "limit-usage", "/old", "100MB")
    quota(c, "qold", "limit-objects", "/old", "100")
    assert used(c, "qold", "/old") == 5 * 100 * KB + 10
    rows = listing(c, "qold", "list-objects")
    assert rows["/old"][2:4] == ["6", "3"], rows  # 5 files + a symlink; old, x, y
    # the default soft limit applies to limits set without one
    assert listing(c, "qold")["/old"][1] == "80%(80.0MB)"
    quota(c, "qold", "default-soft-limit", "70")
    assert listing(c, "qold")["/old"][1] == "70%(70.0MB)"
    r = quota(c, "qold", "default-soft-limit", "0", check=False)
    assert r.returncode != 0 and "is not a soft limit" in r.stderr


def statedump_usage(c, vol, bricks):
    """{brick: bytes of limit 0} from each brick's statedump."""
    before = set(glob.glob(os.path.join(c.dumps, "*")))
    assert c.cli("volume", "statedump", vol).stdout.strip() == "volume statedump: success"
    out = {}
    end = time.time() + 15
    while len(out) < len(bricks) and time.time() < end:
        for p in set(glob.glob(os.path.join(c.dumps, "*"))) - before:
            text = open(p, errors="replace").read()
            if "DUMP-END" not in text and not text.rstrip().endswith("]"):
                pass
            mb = re.search(r"^limit\.0\.bytes=(\d+)$", text, re.M)
            for b in bricks:
                if os.path.basename(p).startswith(b.strip("/").replace("/", "-") + ".") and mb:
                    out[b] = int(mb.group(1))
        time.sleep(0.2)
    assert len(out) == len(bricks), (out, os.listdir(c.dumps))
    return out


def test_replica_usage_agrees_after_a_brick_is_killed_and_healed(c):
    bricks, m = new_volume(c, "qrep", n=3, replica=3,
                           options={"server.statedump-path": c.dumps,
                                    "cluster.heal-timeout": "2"})
    d = os.path.join(m.path, "r")
    os.mkdir(d)
    with open(os.path.join(d, "first"), "wb") as f:
        f.write(os.urandom(200 * KB))
    fsync_dir(d)
    quota(c, "qrep", "enable")
    quota(c, "qrep", "limit-usage", "/r", "4MB")
    before = listing(c, "qrep")
    # brick 2 dies; data is written and removed meanwhile
    pid = [p for h, path, port, p in c.brick_status("qrep") if path == bricks[2]][0]
    os.kill(pid, signal.SIGKILL)
    end = time.time() + 5
    while alive(pid) and time.time() < end:
        time.sleep(0.05)
    for i in range(6):
        with open(os.path.join(d, f"w{i}"), "wb") as f:
            f.write(os.urandom(150 * KB + i))
    os.truncate(os.path.join(d, "w0"), 10)
    os.unlink(os.path.join(d, "w1"))
    os.makedirs(os.path.join(d, "sub"))
    with open(os.path.join(d, "sub", "s"), "wb") as f:
        f.write(os.urandom(70 * KB))
    fsync_dir(d)
    fsync_dir(os.path.join(d, "sub"))
    during = listing(c, "qrep")
    assert during != before
    expect = 200 * KB + 10 + sum(150 * KB + i for i in range(2, 6)) + 70 * KB
    assert used(c, "qrep", "/r") == expect
    c.cli("volume", "start", "qrep", "force")
    c.cli("volume", "heal", "qrep", check=False)
    end = time.time() + 60
    while time.time() < end:
        if tree_sums(bricks[2]) == tree_sums(bricks[0]) == tree_sums(bricks[1]):
            break
        time.sleep(0.5)
    sums = [tree_sums(b) for b in bricks]
    assert sums[0] == sums[1] == sums[2], "heal did not make the bricks equal"
    assert listing(c, "qrep") == during
    assert used(c, "qrep", "/r") == expect
    assert statedump_usage(c, "qrep", bricks) == {b: expect for b in bricks}
    # and a fresh mount reads the same bytes
    m2 = c.mount("qrep", os.path.join(c.root, "qrep-m2"))
    assert tree_sums(os.path.join(m2.path, "r")) == {
        k[2:]: v for k, v in sums[0].items() if k.startswith("r/")}


def test_distributed_limit_holds_over_the_sets(c):
    bricks, m = new_volume(c, "qdist", n=2,
                           options={"client.write-back": "off",
                                    "performance.write-behind": "off"})
    d = os.path.join(m.path, "dd")
    os.mkdir(d)
    quota(c, "qdist", "enable")
    quota(c, "qdist", "hard-timeout", "1")
    quota(c, "qdist", "soft-timeout", "1")
    quota(c, "qdist", "limit-usage", "/dd", "2MB")
    # df of the directory: the limit once, not once per set
    st = os.statvfs(d)
    assert st.f_blocks * st.f_frsize == 2 * MB
    err = None
    for i in range(200):
        try:
            with open(os.path.join(d, f"f{i:03d}"), "wb") as f:
                f.write(b"d" * (50 * KB))
        except OSError as e:
            err = e
            break
        time.sleep(0.03)
    assert err is not None and err.errno == errno.EDQUOT
    on_bricks = [sum(os.path.getsize(os.path.join(b, "dd", f))
                     for f in os.listdir(os.path.join(b, "dd"))
                     if os.stat(os.path.join(b, "dd", f)).st_mode & 0o7777 != 0o1000)
                 for b in bricks]
    assert all(on_bricks), on_bricks  # files went to both sets
    # docs/quota.md: at most (sets - 1) x the room of the last sum over
    assert sum(on_bricks) <= 2 * 2 * MB
    assert used(c, "qdist", "/dd") == sum(on_bricks)

    def kept():
        """What each brick keeps of the other set's part (for a restart),
        from cairnd's sums (every second here)."""
        out = []
        for b in bricks:
            try:
                with open(os.path.join(b, ".cairn", "quota-others")) as f:
                    ob, of, path = f.read().split()
                out.append((int(ob), path))
            except (OSError, ValueError):
                out.append(None)
        return out
    want = [(on_bricks[1], "/dd"), (on_bricks[0], "/dd")]
    end = time.time() + 15
    while kept() != want and time.time() < end:
        time.sleep(0.2)
    assert kept() == want
    st = os.statvfs(d)
    assert (st.f_blocks - st.f_bfree) * st.f_frsize >= min(sum(on_bricks), 2 * MB) - 8 * KB
