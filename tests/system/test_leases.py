"""Leases and kernel caching under them (docs/consistency.md).

A client that holds a lease answers stats and lookups from the kernel's
caches; a change by another client recalls the lease first, so the change is
seen at the next access. These tests show both halves: that the cache is
really used (it keeps answering while the brick is stopped), and that
recalls keep two mounts coherent, also when the holder is hung, when both
change one directory at once, and when the brick restarts.

Addresses: 127.0.0.31-.35."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cairn_cluster import Cluster  # noqa: E402


@pytest.fixture
def lc():
    c = Cluster(host="127.0.0.31", prefix="lease-")
    try:
        c.start()
        yield c
    finally:
        c.close()


def brick_pid(c, vol):
    pids = [p for (_, _, _, p) in c.brick_status(vol) if p]
    assert pids, "brick not running"
    return pids[0]


def make_volume(c, opts=None, mounts=2):
    c.create_volume("lv", options=opts or {})
    ms = [c.mount("lv", os.path.join(c.root, f"m{i}")) for i in range(mounts)]
    return ms


def stat_in_child(path, timeout):
    """Runs stat(path) in a child process; True when it returned within
    timeout. A child stuck on a stopped brick is left to finish later."""
    p = subprocess.Popen([sys.executable, "-c", f"import os; os.stat({path!r})"])
    try:
        p.wait(timeout=timeout)
        return p.returncode == 0, p
    except subprocess.TimeoutExpired:
        return False, p


def test_cached_attributes_answer_while_brick_stopped(lc):
    (m,) = make_volume(lc, mounts=1)
    f = os.path.join(m.path, "f")
    with open(f, "wb") as fh:
        fh.write(b"x" * 100)
    os.mkdir(os.path.join(m.path, "d"))
    os.stat(f)
    os.stat(os.path.join(m.path, "d"))
    pid = brick_pid(lc, "lv")
    lc.stop_signal(pid)
    try:
        ok, _ = stat_in_child(f, 3)
        assert ok, "stat under a lease went to the (stopped) brick"
        ok, _ = stat_in_child(os.path.join(m.path, "d"), 3)
        assert ok
    finally:
        lc.cont(pid)


def test_without_leases_every_stat_asks_the_brick(lc):
    (m,) = make_volume(lc, opts={"client.leases": "off"}, mounts=1)
    f = os.path.join(m.path, "f")
    with open(f, "wb") as fh:
        fh.write(b"x")
    os.stat(f)
    pid = brick_pid(lc, "lv")
    lc.stop_signal(pid)
    try:
        ok, child = stat_in_child(f, 1.5)
        assert not ok, "stat was answered without the brick although leases are off"
    finally:
        lc.cont(pid)
    child.wait(timeout=30)


def test_change_recalls_other_clients_cache(lc):
    m1, m2 = make_volume(lc)
    a, b = os.path.join(m1.path, "f"), os.path.join(m2.path, "f")
    with open(a, "wb") as fh:
        fh.write(b"one")
    assert os.stat(b).st_size == 3  # m2 caches under a lease
    os.chmod(a, 0o600)
    assert os.stat(b).st_mode & 0o777 == 0o600
    with open(a, "ab") as fh:
        fh.write(b"two")
    assert os.stat(b).st_size == 6
    with open(b, "rb") as fh:
        assert fh.read() == b"onetwo"
    os.setxattr(a, "user.k", b"v")
    assert os.getxattr(b, "user.k") == b"v"
    os.unlink(a)
    assert not os.path.exists(b)


def test_rename_of_directory_by_other_client(lc):
    m1, m2 = make_volume(lc)
    os.makedirs(os.path.join(m1.path, "d", "sub"))
    with open(os.path.join(m1.path, "d", "sub", "x"), "wb") as fh:
        fh.write(b"x")
    assert os.path.exists(os.path.join(m2.path, "d", "sub", "x"))
    os.rename(os.path.join(m1.path, "d"), os.path.join(m1.path, "e"))
    assert not os.path.exists(os.path.join(m2.path, "d"))
    assert not os.path.exists(os.path.join(m2.path, "d", "sub", "x"))
    with open(os.path.join(m2.path, "e", "sub", "x"), "rb") as fh:
        assert fh.read() == b"x"
    # and back, through the other mount
    os.rename(os.path.join(m2.path, "e"), os.path.join(m2.path, "d"))
    assert os.listdir(os.path.join(m1.path, "d", "sub")) == ["x"]
    assert not os.path.exists(os.path.join(m1.path, "e"))


def test_hung_holder_delays_a_change_by_at_most_the_recall_timeout(lc):
    m1, m2 = make_volume(lc, opts={"features.lease-recall-timeout": "2"})
    a, b = os.path.join(m1.path, "f"), os.path.join(m2.path, "f")
    with open(a, "wb") as fh:
        fh.write(b"x")
    os.stat(b)  # m2 holds a lease on f
    lc.stop_signal(m2.proc.pid)
    try:
        t0 = time.monotonic()
        os.chmod(a, 0o640)
        took = time.monotonic() - t0
        assert took < 8, f"chmod waited {took:.1f}s for a hung lease holder"
        assert os.stat(a).st_mode & 0o777 == 0o640
    finally:
        lc.cont(m2.proc.pid)
    # the revoked holder must not keep serving its old cache
    deadline = time.monotonic() + 10
    while os.stat(b).st_mode & 0o777 != 0o640:
        assert time.monotonic() < deadline, "m2 kept stale attributes after losing its lease"
        time.sleep(0.1)


def test_two_clients_creating_in_one_directory_do_not_stall(lc):
    m1, m2 = make_volume(lc)
    os.mkdir(os.path.join(m1.path, "shared"))
    errors = []

    def work(m, tag):
        try:
            for i in range(150):
                p = os.path.join(m.path, "shared", f"{tag}{i}")
                with open(p, "wb") as fh:
                    fh.write(tag.encode() * 10)
                os.stat(p)
                if i % 3 == 0:
                    os.listdir(os.path.join(m.path, "shared"))
        except OSError as e:
            errors.append(e)

    t0 = time.monotonic()
    ts = [threading.Thread(target=work, args=(m, tag)) for m, tag in ((m1, "a"), (m2, "b"))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120)
    took = time.monotonic() - t0
    assert not errors, errors
    # each recall waited for would cost up to the recall timeout (5 s)
    assert took < 60, f"300 creates from two clients took {took:.1f}s"
    want = sorted([f"a{i}" for i in range(150)] + [f"b{i}" for i in range(150)])
    assert sorted(os.listdir(os.path.join(m1.path, "shared"))) == want
    assert sorted(os.listdir(os.path.join(m2.path, "shared"))) == want
    for name in ("a7", "b9"):
        with open(os.path.join(m1.path, "shared", name), "rb") as fh:
            assert fh.read() == name[0].encode() * 10


def test_brick_restart_drops_cached_state(lc):
    (m,) = make_volume(lc, mounts=1)
    f = os.path.join(m.path, "f")
    with open(f, "wb") as fh:
        fh.write(b"x")
    assert os.stat(f).st_mode & 0o777 != 0o604
    pid = brick_pid(lc, "lv")
    os.kill(pid, signal.SIGKILL)
    # a change made while the client cannot hear of it
    os.chmod(os.path.join(lc.root, "lv-brick", "f"), 0o604)
    lc.cli("volume", "start", "lv", "force")
    deadline = time.monotonic() + 20
    while True:
        try:
            if os.stat(f).st_mode & 0o777 == 0o604:
                break
        except OSError:
            pass
        assert time.monotonic() < deadline, "cached attributes survived the lost connection"
        time.sleep(0.2)


def test_new_directory_answers_absent_names_itself(lc):
    (m,) = make_volume(lc, mounts=1)
    d = os.path.join(m.path, "new")
    os.mkdir(d)
    with open(os.path.join(d, "present"), "wb") as fh:
        fh.write(b"p")
    # the creates made the kernel drop its own copy of the parents' attributes
    os.stat(m.path)
    os.stat(d)
    pid = brick_pid(lc, "lv")
    lc.stop_signal(pid)
    try:
        p = subprocess.Popen([sys.executable, "-c",
                              f"import os; print(os.path.exists({os.path.join(d, 'absent')!r}))"],
                             stdout=subprocess.PIPE, text=True)
        out, _ = p.communicate(timeout=3)
        assert out.strip() == "False"
    finally:
        lc.cont(pid)


def test_new_directory_sees_other_clients_names(lc):
    m1, m2 = make_volume(lc)
    d1, d2 = os.path.join(m1.path, "new"), os.path.join(m2.path, "new")
    os.mkdir(d1)
    assert not os.path.exists(os.path.join(d1, "x"))  # answered by m1 itself
    with open(os.path.join(d2, "x"), "wb") as fh:
        fh.write(b"from m2")
    assert os.path.exists(os.path.join(d1, "x"))
    with open(os.path.join(d1, "x"), "rb") as fh:
        assert fh.read() == b"from m2"
    os.unlink(os.path.join(d2, "x"))
    assert not os.path.exists(os.path.join(d1, "x"))
    os.mkdir(os.path.join(d2, "sub"))
    assert os.listdir(d1) == ["sub"]


def test_capability_set_by_other_client_is_seen(lc):
    m1, m2 = make_volume(lc)
    a, b = os.path.join(m1.path, "f"), os.path.join(m2.path, "f")
    with open(a, "wb") as fh:
        fh.write(b"x")  # m1 made f: it knows f has no capability
    # VFS_CAP_REVISION_2 with no capabilities set
    cap = (0x02000000).to_bytes(4, "little") + bytes(16)
    os.setxattr(b, "security.capability", cap)
    assert os.getxattr(a, "security.capability") == cap


def test_absent_xattr_cached_then_set_by_other_client(lc):
    m1, m2 = make_volume(lc)
    a, b = os.path.join(m1.path, "f"), os.path.join(m2.path, "f")
    with open(a, "wb") as fh:
        fh.write(b"x")
    # m1's create recalled m2's lease on the root, which is then not leased
    # again for a second (the conflict cooldown): let it pass, so that m2's
    # path walk below is cached too
    time.sleep(1.2)
    os.stat(b)
    for _ in range(2):
        with pytest.raises(OSError):
            os.getxattr(b, "user.k")  # the second answer comes from m2's cache
    pid = brick_pid(lc, "lv")
    lc.stop_signal(pid)
    try:
        p = subprocess.Popen([sys.executable, "-c", f"""
import os
try:
    os.getxattr({b!r}, "user.k")
except OSError as e:
    print(e.errno)
"""], stdout=subprocess.PIPE, text=True)
        out, _ = p.communicate(timeout=3)
        assert out.strip() == "61"  # ENODATA, without the brick
    finally:
        lc.cont(pid)
    os.setxattr(a, "user.k", b"now")
    assert os.getxattr(b, "user.k") == b"now"
    os.removexattr(a, "user.k")
    with pytest.raises(OSError):
        os.getxattr(b, "user.k")


STATS = "trusted.cairn.io-stats"


def brick_calls(mnt, fop):
    """fop requests the mount sent to the bricks (its io-stats)."""
    for line in os.getxattr(mnt, STATS).decode().splitlines()[2:]:
        f = line.split()
        if f[0] == fop:
            return int(f[1])
    return 0


def getxattr_calls(mnt):
    return brick_calls(mnt, "GETXATTR")


def errno_in_child(code, timeout=3):
    """Runs code (which prints a result) in a child; its output, or None
    when it did not finish within timeout (it went to a stopped brick)."""
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        return out.strip()
    except subprocess.TimeoutExpired:
        return None


def test_listing_reports_entries_without_extended_attributes(lc):
    m1, m2 = make_volume(lc)
    d1, d2 = os.path.join(m1.path, "d"), os.path.join(m2.path, "d")
    os.mkdir(d1)
    for i in range(40):
        with open(os.path.join(d1, f"f{i}"), "wb") as fh:
            fh.write(b"x")
    os.setxattr(os.path.join(d1, "f7"), "user.k", b"seven")
    os.mkdir(os.path.join(d1, "sub"))
    os.fsync(os.open(d1, os.O_RDONLY))  # written back files reach the bricks
    os.stat(d2)  # recalls m1's exclusive lease on d
    time.sleep(1.2)  # after a recall no lease is granted on d for a second
    before = getxattr_calls(m2.path)
    out = subprocess.run(["ls", "-l", d2], check=True, capture_output=True, text=True).stdout
    assert out.count("\n") == 42  # "total" and 41 entries
    asked = getxattr_calls(m2.path) - before
    # ls -l asks two extended attributes per entry; only f7 has any, and only
    # its two go to a brick (not 82)
    assert asked <= 4, f"ls -l sent {asked} GETXATTR to the bricks"
    assert os.getxattr(os.path.join(d2, "f7"), "user.k") == b"seven"
    pid = brick_pid(lc, "lv")
    lc.stop_signal(pid)
    try:
        f3 = os.path.join(d2, "f3")
        out = errno_in_child(f"""
import os
try:
    os.getxattr({f3!r}, "user.k")
except OSError as e:
    print(e.errno, os.listxattr({f3!r}))
""")
        assert out == "61 []", f"answer without the brick: {out!r}"
    finally:
        lc.cont(pid)
    # a change by the other client is seen at the next access
    os.setxattr(os.path.join(d1, "f3"), "user.k", b"three")
    assert os.getxattr(os.path.join(d2, "f3"), "user.k") == b"three"
    assert os.listxattr(os.path.join(d2, "f3")) == ["user.k"]
    os.removexattr(os.path.join(d1, "f7"), "user.k")
    with pytest.raises(OSError):
        os.getxattr(os.path.join(d2, "f7"), "user.k")


def test_directory_opened_without_the_brick(lc):
    """A directory whose listing the kernel keeps under the lease is opened
    without a request to the brick; the brick handle is made only when one
    is needed. Reading the handle again after another client changed the
    directory (the recall drops the kernel's copy), fsync and flock on it
    must all work, and the listing must be the new one."""
    import fcntl

    a, b = make_volume(lc)
    d = os.path.join(a.path, "d")
    os.mkdir(d)
    for i in range(5):
        with open(os.path.join(d, f"f{i}"), "wb") as fh:
            fh.write(b"x")
    # the first listing settles the files written back; a later one fills
    # the kernel's copy under the lease
    for _ in range(2):
        assert sorted(os.listdir(d)) == [f"f{i}" for i in range(5)]
    before = opendir_calls(a.path)
    assert sorted(os.listdir(d)) == [f"f{i}" for i in range(5)]  # kept listing
    assert opendir_calls(a.path) == before, "the kept listing opened the brick"
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with open(os.path.join(b.path, "d", "new"), "wb") as fh:
            fh.write(b"y")  # recalls a's lease: a's kernel drops its listing
        os.lseek(fd, 0, os.SEEK_SET)
        names = sorted(os.listdir(fd))
        assert names == sorted([f"f{i}" for i in range(5)] + ["new"])
        # the handle was opened on the brick only now, once
        assert opendir_calls(a.path) == before + 1
        os.fsync(fd)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.fstat(fd)
    finally:
        os.close(fd)


def opendir_calls(mnt):
    return brick_calls(mnt, "OPENDIR")
