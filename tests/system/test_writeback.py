"""Write-back of new small files (docs/consistency.md, "Write-back").

Files created in a directory the mount made itself are answered locally and
sent to the bricks, one MAKE_FILE each, when closed. These tests check that
every byte and attribute reaches every replica, that another client sees
the files at once (its access recalls the directory's exclusive lease),
that fsync means on the bricks even when the client is killed right after,
that errors of the background work are reported, and that
client.write-back off makes every close synchronous.

Addresses: 127.0.0.36-.39."""

import errno
import hashlib
import mmap
import os
import select
import shutil
import signal
import stat
import struct
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cairn_cluster import Cluster, as_user, fsync_dir, made_here  # noqa: E402


@pytest.fixture
def wc():
    c = Cluster(host="127.0.0.36", prefix="wb-")
    try:
        c.start()
        yield c
    finally:
        c.close()


def replica3(c, opts=None, mounts=2):
    return c.replica3("wv", opts, mounts)


def content(i):
    return hashlib.sha256(str(i).encode()).digest() * (1 + (i * 37) % 300)


def test_every_byte_and_attribute_reaches_every_replica(wc):
    bricks, (m1, m2) = replica3(wc)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    want = {}
    for i in range(200):
        p = os.path.join(d, f"f{i}")
        with open(p, "wb") as fh:
            fh.write(content(i))
        os.chmod(p, 0o600 + (i % 8) * 0o10)
        os.utime(p, ns=(1_600_000_000_000_000_000 + i, 1_500_000_000_000_000_000 + i * 1000))
        if i % 10 == 0:
            os.setxattr(p, "user.i", str(i).encode())
        want[f"f{i}"] = (content(i), 0o600 + (i % 8) * 0o10, 1_500_000_000_000_000_000 + i * 1000)
    fsync_dir(d)
    for b in bricks:
        got = sorted(os.listdir(os.path.join(b, "d")))
        assert got == sorted(want), b
        for name, (data, mode, mtime) in want.items():
            p = os.path.join(b, "d", name)
            st = os.stat(p)
            with open(p, "rb") as fh:
                assert fh.read() == data, p
            assert stat.S_IMODE(st.st_mode) == mode, p
            assert st.st_mtime_ns == mtime, p
            if name in ("f0", "f10", "f190"):
                assert os.getxattr(p, "user.i") == name[1:].encode()
    # and the other mount sees the same
    for name, (data, mode, mtime) in want.items():
        p = os.path.join(m2.path, "d", name)
        with open(p, "rb") as fh:
            assert fh.read() == data
        assert os.stat(p).st_mtime_ns == mtime


def test_other_client_sees_a_file_still_open(wc):
    _, (m1, m2) = replica3(wc)
    os.mkdir(os.path.join(m1.path, "d"))
    fh = open(os.path.join(m1.path, "d", "open"), "wb")
    try:
        fh.write(b"first part")
        fh.flush()
        with open(os.path.join(m2.path, "d", "open"), "rb") as g:
            assert g.read() == b"first part"
        fh.write(b", second part")
        fh.flush()
    finally:
        fh.close()
    with open(os.path.join(m2.path, "d", "open"), "rb") as g:
        assert g.read() == b"first part, second part"
    assert sorted(os.listdir(os.path.join(m2.path, "d"))) == ["open"]


def test_listing_by_another_client_while_files_are_written(wc):
    _, (m1, m2) = replica3(wc)
    os.mkdir(os.path.join(m1.path, "d"))
    for i in range(50):
        with open(os.path.join(m1.path, "d", f"x{i}"), "wb") as fh:
            fh.write(content(i))
    assert sorted(os.listdir(os.path.join(m2.path, "d"))) == sorted(f"x{i}" for i in range(50))
    # m1 keeps working in it: now through the bricks, and both agree
    for i in range(50, 60):
        with open(os.path.join(m1.path, "d", f"x{i}"), "wb") as fh:
            fh.write(content(i))
    assert len(os.listdir(os.path.join(m2.path, "d"))) == 60
    with open(os.path.join(m2.path, "d", "x55"), "rb") as fh:
        assert fh.read() == content(55)


def test_fsync_then_kill_keeps_what_was_fsynced(wc):
    bricks, (m1,) = replica3(wc, mounts=1)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    for i in range(40):
        fd = os.open(os.path.join(d, f"s{i}"), os.O_CREAT | os.O_WRONLY, 0o644)
        os.write(fd, content(i))
        if i < 20:
            os.fsync(fd)
        os.close(fd)
    m1.proc.send_signal(signal.SIGKILL)
    m1.proc.wait(timeout=10)
    for b in bricks:
        names = set(os.listdir(os.path.join(b, "d")))
        for i in range(20):
            assert f"s{i}" in names, (b, i)
        # whatever reached a brick is whole: nothing is half made
        for n in names:
            with open(os.path.join(b, "d", n), "rb") as fh:
                assert fh.read() == content(int(n[1:])), (b, n)


def test_write_back_off_makes_every_close_synchronous(wc):
    bricks, (m1,) = replica3(wc, opts={"client.write-back": "off"}, mounts=1)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    for i in range(20):
        with open(os.path.join(d, f"n{i}"), "wb") as fh:
            fh.write(content(i))
    m1.proc.send_signal(signal.SIGKILL)
    m1.proc.wait(timeout=10)
    for b in bricks:
        for i in range(20):
            with open(os.path.join(b, "d", f"n{i}"), "rb") as fh:
                assert fh.read() == content(i)


def test_big_file_rename_unlink_and_truncate(wc):
    bricks, (m1, m2) = replica3(wc)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    big = os.urandom(3 << 20)
    with open(os.path.join(d, "big"), "wb") as fh:
        for off in range(0, len(big), 65536):
            fh.write(big[off:off + 65536])
    with open(os.path.join(d, "a"), "wb") as fh:
        fh.write(b"a" * 1000)
    os.rename(os.path.join(d, "a"), os.path.join(d, "b"))
    with open(os.path.join(d, "gone"), "wb") as fh:
        fh.write(b"x")
    os.unlink(os.path.join(d, "gone"))
    with open(os.path.join(d, "t"), "wb") as fh:
        fh.write(b"0123456789")
        fh.truncate(4)
    fsync_dir(d)
    for b in bricks:
        assert sorted(os.listdir(os.path.join(b, "d"))) == ["b", "big", "t"]
        with open(os.path.join(b, "d", "big"), "rb") as fh:
            assert fh.read() == big
        with open(os.path.join(b, "d", "b"), "rb") as fh:
            assert fh.read() == b"a" * 1000
        with open(os.path.join(b, "d", "t"), "rb") as fh:
            assert fh.read() == b"0123"
    with open(os.path.join(m2.path, "d", "big"), "rb") as fh:
        assert fh.read() == big


def test_failed_background_create_is_reported(wc):
    bricks, (m1,) = replica3(wc, mounts=1)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    with open(os.path.join(d, "first"), "wb") as fh:
        fh.write(b"1")  # the directory is written back from here on
    # A name made behind the client's back (on every brick): the client's
    # own view says it is free, the bricks refuse it.
    for b in bricks:
        with open(os.path.join(b, "d", "clash"), "wb") as fh:
            fh.write(b"brick's")
    with open(os.path.join(d, "clash"), "wb") as fh:
        fh.write(b"client's")
    with pytest.raises(OSError):
        fsync_dir(d)
    for b in bricks:
        with open(os.path.join(b, "d", "clash"), "rb") as fh:
            assert fh.read() == b"brick's"
    assert "write-back of clash" in m1.tail(1 << 20)


def brick_pids(c, vol):
    return [p for (_, _, _, p) in c.brick_status(vol) if p]


def start_child(code):
    """Runs code in a child Python, once it printed "ready"."""
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def removals_in_child(d, names, dirs):
    """A child that holds d open, and on a line on stdin removes names and
    then dirs (relative to d), printing "done". Started while the bricks
    run: the path walk to d may ask them, the removals must not."""
    code = f"""
import os, sys
fd = os.open({d!r}, os.O_RDONLY | os.O_DIRECTORY)
print("ready", flush=True)
sys.stdin.readline()
for n in {names!r}:
    os.unlink(n, dir_fd=fd)
for n in {dirs!r}:
    os.rmdir(n, dir_fd=fd)
print("done", flush=True)
"""
    return start_child(code)


def go_while_bricks_stopped(c, child):
    """Stops every brick of wv, tells child to go, and says whether it
    printed "done" within 5 s; the bricks run again afterwards."""
    pids = brick_pids(c, "wv")
    for p in pids:
        c.stop_signal(p)
    try:
        child.stdin.write("go\n")
        child.stdin.flush()
        ready, _, _ = select.select([child.stdout], [], [], 5)
        ok = bool(ready) and child.stdout.readline().strip() == "done"
    finally:
        for p in pids:
            c.cont(p)
    child.wait(timeout=60)
    return ok


def test_removals_are_answered_here_and_reach_every_brick(wc):
    bricks, (m1, m2) = replica3(wc)
    d = os.path.join(m1.path, "d")
    os.makedirs(os.path.join(d, "sub"))
    for i in range(60):
        with open(os.path.join(d, f"r{i}"), "wb") as fh:
            fh.write(content(i))
    with open(os.path.join(d, "sub", "inner"), "wb") as fh:
        fh.write(b"inner")
    fsync_dir(d)  # every file is on the bricks
    child = removals_in_child(d, [f"r{i}" for i in range(0, 60, 2)] + ["sub/inner"], ["sub"])
    # with every brick stopped, the removals are still answered
    assert go_while_bricks_stopped(wc, child), \
        "removals in a written-back directory waited for the bricks"
    want = sorted(f"r{i}" for i in range(1, 60, 2))
    assert sorted(os.listdir(d)) == want
    # another client sees them gone at its next access (its access recalls
    # the lease, and the queue reaches the bricks first)
    assert sorted(os.listdir(os.path.join(m2.path, "d"))) == want
    for b in bricks:
        assert sorted(os.listdir(os.path.join(b, "d"))) == want, b


def test_file_removed_before_it_was_sent_never_reaches_the_bricks(wc):
    bricks, (m1,) = replica3(wc, mounts=1)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    for i in range(30):
        p = os.path.join(d, f"t{i}")
        with open(p, "wb") as fh:
            fh.write(content(i))
        os.unlink(p)
        # a new file under the same name after the removal
        if i % 3 == 0:
            with open(p, "wb") as fh:
                fh.write(b"again %d" % i)
    fsync_dir(d)
    want = sorted(f"t{i}" for i in range(0, 30, 3))
    assert sorted(os.listdir(d)) == want
    for b in bricks:
        assert sorted(os.listdir(os.path.join(b, "d"))) == want, b
        for n in want:
            with open(os.path.join(b, "d", n), "rb") as fh:
                assert fh.read() == b"again %d" % int(n[1:])


def test_rmdir_of_a_directory_not_known_empty_asks_the_bricks(wc):
    bricks, (m1, m2) = replica3(wc)
    d = os.path.join(m1.path, "d")
    os.makedirs(os.path.join(d, "full"))
    with open(os.path.join(d, "full", "x"), "wb") as fh:
        fh.write(b"x")
    with pytest.raises(OSError) as e:
        os.rmdir(os.path.join(d, "full"))
    assert e.value.errno == 39  # ENOTEMPTY
    with pytest.raises(OSError) as e:
        os.unlink(os.path.join(d, "missing"))
    assert e.value.errno == 2
    fsync_dir(d)
    for b in bricks:
        assert os.listdir(os.path.join(b, "d", "full")) == ["x"], b


def test_fsync_of_directory_then_kill_keeps_the_removals(wc):
    bricks, (m1,) = replica3(wc, mounts=1)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    for i in range(40):
        with open(os.path.join(d, f"k{i}"), "wb") as fh:
            fh.write(content(i))
    fsync_dir(d)
    for i in range(20):
        os.unlink(os.path.join(d, f"k{i}"))
    fsync_dir(d)
    m1.proc.send_signal(signal.SIGKILL)
    m1.proc.wait(timeout=10)
    want = sorted(f"k{i}" for i in range(20, 40))
    for b in bricks:
        assert sorted(os.listdir(os.path.join(b, "d"))) == want, b


def test_directory_made_again_under_a_removed_name_is_written_back(wc):
    bricks, (m1,) = replica3(wc, mounts=1)
    d = os.path.join(m1.path, "d")
    for rnd in range(2):
        os.makedirs(os.path.join(d, "sub"))
        fsync_dir(d)
        child = subprocess.Popen([sys.executable, "-c", f"""
import os, sys
fd = os.open({os.path.join(d, "sub")!r}, os.O_RDONLY | os.O_DIRECTORY)
print("ready", flush=True)
sys.stdin.readline()
for i in range(20):
    f = os.open(f"n{{i}}", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd)
    os.write(f, b"round {rnd} file %d" % i)
    os.close(f)
print("done", flush=True)
"""], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "ready"
        assert go_while_bricks_stopped(wc, child), \
            f"round {rnd}: creates in a new directory waited for the bricks"
        fsync_dir(d)
        for b in bricks:
            for i in range(20):
                with open(os.path.join(b, "d", "sub", f"n{i}"), "rb") as fh:
                    assert fh.read() == b"round %d file %d" % (rnd, i)
        subprocess.run(["rm", "-rf", d], check=True)
        fsync_dir(m1.path)
    for b in bricks:
        assert not os.path.exists(os.path.join(b, "d")), b


def rename_calls(mnt):
    """RENAME requests the mount sent to the bricks (its io-stats)."""
    for line in os.getxattr(mnt, "trusted.cairn.io-stats").decode().splitlines()[2:]:
        f = line.split()
        if f[0] == "RENAME":
            return int(f[1])
    return 0


def test_rsync_pattern_stays_written_back(wc):
    """rsync: create a temporary file, close it, open it again to set its
    times, close, rename; then nothing but the MAKE_FILE reaches a brick."""
    bricks, (m1,) = replica3(wc, mounts=1)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    before = rename_calls(m1.path)
    for i in range(20):
        tmp = os.path.join(d, f".s{i}.XXXX")
        with open(tmp, "wb") as fh:
            fh.write(content(i))
        fd = os.open(tmp, os.O_RDONLY)
        os.utime(fd, ns=(1_400_000_000_000_000_000, 1_300_000_000_000_000_000 + i))
        os.close(fd)
        os.chmod(tmp, 0o640)
        os.rename(tmp, os.path.join(d, f"s{i}"))
    local = rename_calls(m1.path) - before
    assert local <= 2, f"{local} of 20 renames of unsent files went to the bricks"
    # over an existing name the bricks replace it
    fsync_dir(d)
    with open(os.path.join(d, "x.tmp"), "wb") as fh:
        fh.write(b"new s0")
    os.rename(os.path.join(d, "x.tmp"), os.path.join(d, "s0"))
    fsync_dir(d)
    assert sorted(os.listdir(d)) == sorted(f"s{i}" for i in range(20))
    for b in bricks:
        assert sorted(os.listdir(os.path.join(b, "d"))) == sorted(f"s{i}" for i in range(20)), b
        with open(os.path.join(b, "d", "s0"), "rb") as fh:
            assert fh.read() == b"new s0"
        for i in range(1, 20):
            p = os.path.join(b, "d", f"s{i}")
            st = os.stat(p)
            assert st.st_mtime_ns == 1_300_000_000_000_000_000 + i and stat.S_IMODE(st.st_mode) == 0o640
            with open(p, "rb") as fh:
                assert fh.read() == content(i)


def test_acl_set_on_a_written_back_file_sets_its_mode(wc):
    """setfacl on files still written back (not yet on the bricks): the
    ACL's mask becomes the group bits at once, as on a local file system,
    and the bricks end with the same ACL and mode; a chmod after the ACL
    makes its group bits the mask. (MAKE_FILE sets the xattrs before the
    mode: without the mode following the ACL, the brick's chmod turned the
    mask to the old group bits.)"""
    bricks, (m1, m2) = replica3(wc)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    for name in ("f", "g"):
        p = os.path.join(d, name)
        with open(p, "wb") as fh:
            fh.write(b"secret")
        os.chmod(p, 0o600)
        subprocess.run(["setfacl", "-m", "u:1001:r", p], check=True)
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o640
    os.chmod(os.path.join(d, "g"), 0o600)
    fsync_dir(d)
    for name, mode, mask in (("f", 0o640, "mask::r--"), ("g", 0o600, "mask::---")):
        for where in [os.path.join(b, "d") for b in bricks] + [os.path.join(m2.path, "d")]:
            p = os.path.join(where, name)
            assert stat.S_IMODE(os.stat(p).st_mode) == mode, (p, oct(os.stat(p).st_mode))
            out = subprocess.run(["getfacl", "-n", p], capture_output=True, text=True).stdout
            assert "user:1001:r--" in out and mask in out, (p, out)


# ---- directory attributes (wb_dir.c) ----

def dir_attrs_in_child(d, name, mode, uid, gid, ns):
    """A child that holds d open, and on a line on stdin sets the times,
    owner and mode of d/name in the order tar does at the end of a
    directory (three SETATTRs), printing "done". (A chmod of a directory
    makes the kernel look its name up again before the next call, and a
    lookup of a name asks the bricks.)"""
    code = f"""
import os, sys
fd = os.open({d!r}, os.O_RDONLY | os.O_DIRECTORY)
os.stat({name!r}, dir_fd=fd)
print("ready", flush=True)
sys.stdin.readline()
os.utime({name!r}, ns={ns!r}, dir_fd=fd)
os.chown({name!r}, {uid}, {gid}, dir_fd=fd, follow_symlinks=False)
os.chmod({name!r}, {mode}, dir_fd=fd)
print("done", flush=True)
"""
    return start_child(code)


def test_directory_attributes_are_answered_here_and_reach_every_brick(wc):
    """chown, chmod and utimes of a directory this mount made, in one it
    made, are answered without the bricks and reach them after the files
    written back into the directory (whose arrival would otherwise move the
    directory's mtime past the one set)."""
    bricks, (m1, m2) = replica3(wc)
    d = os.path.join(m1.path, "d")
    os.makedirs(os.path.join(d, "sub"))
    with open(os.path.join(d, "first"), "wb") as fh:
        fh.write(b"1")
    for i in range(40):
        with open(os.path.join(d, "sub", f"s{i}"), "wb") as fh:
            fh.write(content(i))
    ns = (1_400_000_000_123_456_789, 1_300_000_000_987_654_321)
    child = dir_attrs_in_child(d, "sub", 0o2751, 1234, 5678, ns)
    assert go_while_bricks_stopped(wc, child), \
        "the attributes of a written-back directory waited for the bricks"
    st = os.stat(os.path.join(d, "sub"))
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o2751, 1234, 5678)
    assert st.st_mtime_ns == ns[1]
    fsync_dir(d)
    for where in [os.path.join(b, "d", "sub") for b in bricks] + [os.path.join(m2.path, "d", "sub")]:
        st = os.stat(where)
        assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o2751, 1234, 5678), where
        assert st.st_mtime_ns == ns[1], where
        assert sorted(os.listdir(where)) == sorted(f"s{i}" for i in range(40)), where


NOID = 0xFFFFFFFF  # the id of owner, group, mask and other entries


def acl_bytes(entries):
    """A system.posix_acl_access value: (tag, perm, id) entries."""
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, i) for t, p, i in entries)


def test_directory_acl_calls_of_cp_a_are_answered_here(wc):
    """cp -a sets each directory's access ACL (one saying only what a mode
    says) and removes its default ACL: answered without the bricks for a
    directory this mount made, as a chmod and "no such attribute"; they
    reach the bricks as the mode, with no ACL stored. An ACL naming a user
    still goes to the bricks and is kept there."""
    bricks, (m1, m2) = replica3(wc)
    d = os.path.join(m1.path, "d")
    os.makedirs(os.path.join(d, "sub"))
    os.makedirs(os.path.join(d, "ext"))
    for i in range(20):
        with open(os.path.join(d, "sub", f"s{i}"), "wb") as fh:
            fh.write(content(i))
    minimal = acl_bytes([(0x01, 7, NOID), (0x04, 5, NOID), (0x20, 0, NOID)])  # 0750
    code = f"""
import os, sys
fd = os.open({d!r}, os.O_RDONLY | os.O_DIRECTORY)
os.stat("sub", dir_fd=fd)
print("ready", flush=True)
sys.stdin.readline()
sub = "/proc/self/fd/%d/sub" % fd  # from d: a lookup of d itself would ask the bricks
os.setxattr(sub, "system.posix_acl_access", {minimal!r})
try:
    os.removexattr(sub, "system.posix_acl_default")
    print("removed", flush=True)
except OSError as e:
    print("done" if e.errno == 61 else "errno %d" % e.errno, flush=True)
"""
    assert go_while_bricks_stopped(wc, start_child(code)), \
        "the ACL calls on a written-back directory waited for the bricks"
    assert stat.S_IMODE(os.stat(os.path.join(d, "sub")).st_mode) == 0o750
    named = acl_bytes([(0x01, 7, NOID), (0x02, 5, 1001), (0x04, 5, NOID), (0x10, 5, NOID),
                       (0x20, 0, NOID)])
    os.setxattr(os.path.join(d, "ext"), "system.posix_acl_access", named)
    fsync_dir(d)
    for b in bricks:
        p = os.path.join(b, "d", "sub")
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o750, b
        assert "system.posix_acl_access" not in os.listxattr(p), b
        assert sorted(os.listdir(p)) == sorted(f"s{i}" for i in range(20)), b
        out = subprocess.run(["getfacl", "-n", os.path.join(b, "d", "ext")],
                             capture_output=True, text=True).stdout
        assert "user:1001:r-x" in out, (b, out)
    assert stat.S_IMODE(os.stat(os.path.join(m2.path, "d", "sub")).st_mode) == 0o750


def test_directory_attributes_seen_by_another_client_at_once(wc):
    """Another client sees a directory's new attributes at its next access,
    by stat or by listing the parent, while they are still queued here."""
    _, (m1, m2) = replica3(wc)
    top = os.path.join(m1.path, "top")
    os.mkdir(top)
    for k in range(3):
        sub = os.path.join(top, f"sub{k}")
        os.mkdir(sub)
        with open(os.path.join(sub, "f"), "wb") as fh:
            fh.write(content(k))
        os.chmod(sub, 0o700 + k)
        os.utime(sub, ns=(1_000_000_000 * (k + 1), 2_000_000_000 * (k + 1)))
    # by stat of the directory
    st = os.stat(os.path.join(m2.path, "top", "sub0"))
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_mtime_ns == 2_000_000_000
    # by listing the parent (the attributes come with the entries)
    seen = {e.name: e.stat(follow_symlinks=False) for e in os.scandir(os.path.join(m2.path, "top"))}
    for k in range(3):
        assert stat.S_IMODE(seen[f"sub{k}"].st_mode) == 0o700 + k
        assert seen[f"sub{k}"].st_mtime_ns == 2_000_000_000 * (k + 1)
    # and back: m2 changes one, m1 sees it
    os.chmod(os.path.join(m2.path, "top", "sub1"), 0o755)
    assert stat.S_IMODE(os.stat(os.path.join(top, "sub1")).st_mode) == 0o755


def test_create_after_directory_utime_moves_its_mtime_on_the_bricks(wc):
    """The order of a directory's SETATTR and a create in it holds on the
    bricks: a file made after the utime moves the mtime on, as locally."""
    bricks, (m1, m2) = replica3(wc)
    d = os.path.join(m1.path, "d")
    os.makedirs(os.path.join(d, "sub"))
    with open(os.path.join(d, "sub", "a"), "wb") as fh:
        fh.write(b"a")
    os.utime(os.path.join(d, "sub"), ns=(946_684_800_000_000_000, 946_684_800_000_000_000))
    with open(os.path.join(d, "sub", "b"), "wb") as fh:
        fh.write(b"b")
    fsync_dir(d)
    here = os.stat(os.path.join(d, "sub")).st_mtime
    assert here > time.time() - 600
    for where in [os.path.join(b, "d", "sub") for b in bricks] + [os.path.join(m2.path, "d", "sub")]:
        st = os.stat(where)
        assert st.st_mtime > time.time() - 600, where
        assert sorted(os.listdir(where)) == ["a", "b"], where


def test_failed_directory_attributes_are_reported(wc):
    """A directory's SETATTR written back that the bricks refuse is logged
    and returned by the next fsync of its parent."""
    bricks, (m1,) = replica3(wc, mounts=1)
    d = os.path.join(m1.path, "d")
    os.makedirs(os.path.join(d, "gone"))
    with open(os.path.join(d, "first"), "wb") as fh:
        fh.write(b"1")
    fsync_dir(d)
    # removed behind the client's back, on every brick
    for b in bricks:
        os.rmdir(os.path.join(b, "d", "gone"))
    os.chmod(os.path.join(d, "gone"), 0o700)
    with pytest.raises(OSError):
        fsync_dir(d)
    assert "attributes of /d/gone written back" in m1.tail(1 << 20)


# ---- mkdir (wb_mkdir.c) ----

def tree_in_child(d):
    """A child that holds d open, and on a line on stdin makes a/b/c below
    it with a file in each level, printing "done"."""
    code = f"""
import os, sys
fd = os.open({d!r}, os.O_RDONLY | os.O_DIRECTORY)
print("ready", flush=True)
sys.stdin.readline()
p = ""
for n in ("a", "b", "c"):
    p = p + n
    os.mkdir(p, 0o750, dir_fd=fd)
    f = os.open(p + "/file", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640, dir_fd=fd)
    os.write(f, p.encode() * 100)
    os.close(f)
    p = p + "/"
print("done", flush=True)
"""
    return start_child(code)


def test_mkdir_is_answered_here_and_reaches_every_brick(wc):
    """mkdir in a directory this mount made is answered without the bricks,
    files are written back into the new directory at once, and all of it
    reaches every brick with the id this mount gave it."""
    bricks, (m1, m2) = replica3(wc)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    with open(os.path.join(d, "first"), "wb") as fh:
        fh.write(b"1")
    child = tree_in_child(d)
    assert go_while_bricks_stopped(wc, child), "mkdir in a written-back directory waited for the bricks"
    fsync_dir(d)
    want = {"a/file": b"a" * 100, "a/b/file": b"a/b" * 100, "a/b/c/file": b"a/b/c" * 100}
    for root in [os.path.join(b, "d") for b in bricks] + [os.path.join(m2.path, "d")]:
        for rel, data in want.items():
            with open(os.path.join(root, rel), "rb") as fh:
                assert fh.read() == data, (root, rel)
            assert stat.S_IMODE(os.stat(os.path.join(root, rel)).st_mode) == 0o640
        for rel in ("a", "a/b", "a/b/c"):
            st = os.stat(os.path.join(root, rel))
            assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o750, (root, rel)
    for rel in ("a", "a/b", "a/b/c"):
        ids = {os.getxattr(os.path.join(b, "d", rel), "trusted.cairn.gfid") for b in bricks}
        assert len(ids) == 1, rel
    # the mount and the bricks agree on the directory's identity
    assert os.stat(os.path.join(d, "a", "b")).st_ino == os.stat(os.path.join(m2.path, "d", "a", "b")).st_ino


def test_mkdir_seen_by_another_client_at_once(wc):
    _, (m1, m2) = replica3(wc)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    os.makedirs(os.path.join(d, "x", "y", "z"))
    with open(os.path.join(d, "x", "y", "z", "f"), "wb") as fh:
        fh.write(b"deep")
    with open(os.path.join(m2.path, "d", "x", "y", "z", "f"), "rb") as fh:
        assert fh.read() == b"deep"
    os.mkdir(os.path.join(d, "w"))
    assert sorted(os.listdir(os.path.join(m2.path, "d"))) == ["w", "x"]
    # the other client works in them, and the first sees it
    with open(os.path.join(m2.path, "d", "w", "g"), "wb") as fh:
        fh.write(b"from m2")
    with open(os.path.join(d, "w", "g"), "rb") as fh:
        assert fh.read() == b"from m2"
    os.unlink(os.path.join(d, "w", "g"))
    # a directory made and removed here never bothers anyone
    os.mkdir(os.path.join(d, "gone"))
    os.rmdir(os.path.join(d, "gone"))
    assert sorted(os.listdir(os.path.join(m2.path, "d"))) == ["w", "x"]


def test_directory_made_in_a_shared_parent_is_written_back(wc):
    """Another client has just listed the parent: the parent is shared and
    cools down, so its lease (the new name's) is refused or recalled, but
    the new directory is still this mount's alone and what is made in it is
    answered here. The other client sees all of it."""
    _, (m1, m2) = replica3(wc)
    for k in range(3):
        os.listdir(m2.path)  # m2 holds the root's lease
        d = os.path.join(m1.path, f"d{k}")
        before = made_here(m1.path)
        os.mkdir(d)
        for i in range(20):
            with open(os.path.join(d, f"f{i}"), "wb") as fh:
                fh.write(content(i))
        assert made_here(m1.path) - before == 20, k
        for i in range(20):
            with open(os.path.join(m2.path, f"d{k}", f"f{i}"), "rb") as fh:
                assert fh.read() == content(i)
    assert sorted(os.listdir(m2.path)) == ["d0", "d1", "d2"]


def symlink_dir_and_child(wc, body):
    """A replica 3 volume with two mounts, a directory d made on the first
    (holding a file "first"), and a child that holds d open and, on a line
    on stdin, runs body (statements using fd, d's descriptor) and prints
    "done"."""
    bricks, mounts = replica3(wc)
    d = os.path.join(mounts[0].path, "d")
    os.mkdir(d)
    with open(os.path.join(d, "first"), "wb") as fh:
        fh.write(b"1")
    code = f"""
import os, sys
fd = os.open({d!r}, os.O_RDONLY | os.O_DIRECTORY)
print("ready", flush=True)
sys.stdin.readline()
{body}
print("done", flush=True)
"""
    return bricks, mounts, d, start_child(code)


def test_symlink_is_answered_here_and_reaches_every_brick(wc):
    """symlink in a directory this mount made is answered without the
    bricks (queued with the MKDIRs), and reaches every brick with its
    target and the id this mount gave it; another client sees it."""
    bricks, (m1, m2), d, child = symlink_dir_and_child(wc, """
os.mkdir("sub", dir_fd=fd)
os.symlink("../first", "sub/up", dir_fd=fd)
os.symlink("/an/absolute/target", "abs", dir_fd=fd)
""")
    assert go_while_bricks_stopped(wc, child), "symlink in a written-back directory waited for the bricks"
    # read here right away (the READLINK sends the SYMLINK first)
    assert os.readlink(os.path.join(d, "sub", "up")) == "../first"
    with open(os.path.join(d, "sub", "up"), "rb") as fh:
        assert fh.read() == b"1"
    # seen by another client at once
    assert os.readlink(os.path.join(m2.path, "d", "abs")) == "/an/absolute/target"
    assert os.lstat(os.path.join(m2.path, "d", "sub", "up")).st_size == len("../first")
    fsync_dir(d)
    for b in bricks:
        assert os.readlink(os.path.join(b, "d", "sub", "up")) == "../first", b
        assert os.readlink(os.path.join(b, "d", "abs")) == "/an/absolute/target", b
    ids = {os.getxattr(os.path.join(b, "d", "abs"), "trusted.cairn.gfid", follow_symlinks=False)
           for b in bricks}
    assert len(ids) == 1
    assert os.lstat(os.path.join(d, "abs")).st_ino == os.lstat(os.path.join(m2.path, "d", "abs")).st_ino


def test_symlink_times_and_owner_set_before_it_was_sent(wc):
    """tar sets a symlink's times (and owner) right after making it: with
    the SYMLINK still queued, that is answered here too (no wait for the
    bricks), and the bricks and another client end up with the symlink
    and its times and owner."""
    bricks, (m1, m2), d, child = symlink_dir_and_child(wc, """
os.symlink("first", "l", dir_fd=fd)
os.utime("l", ns=(1_000_000_123, 2_000_000_456), dir_fd=fd, follow_symlinks=False)
os.chown("l", 1234, 5678, dir_fd=fd, follow_symlinks=False)
os.symlink("elsewhere", "m", dir_fd=fd)
os.utime("m", ns=(3_000_000_000, 4_000_000_000), dir_fd=fd, follow_symlinks=False)
os.utime("m", ns=(5_000_000_000, 6_000_000_789), dir_fd=fd, follow_symlinks=False)
""")
    assert go_while_bricks_stopped(wc, child), "a new symlink's times waited for the bricks"
    want = {"l": (2_000_000_456, 1234, 5678, "first"), "m": (6_000_000_789, 0, 0, "elsewhere")}
    for n, (mtime, uid, gid, target) in want.items():
        st = os.lstat(os.path.join(d, n))
        assert (st.st_mtime_ns, st.st_uid, st.st_gid) == (mtime, uid, gid), n
    # another client: its lookup recalls the directory, which sends the
    # SYMLINKs and their SETATTRs first
    for n, (mtime, uid, gid, target) in want.items():
        st = os.lstat(os.path.join(m2.path, "d", n))
        assert (st.st_mtime_ns, st.st_uid, st.st_gid) == (mtime, uid, gid), n
        assert os.readlink(os.path.join(m2.path, "d", n)) == target
    fsync_dir(d)
    for b in bricks:
        for n, (mtime, uid, gid, target) in want.items():
            st = os.lstat(os.path.join(b, "d", n))
            assert (st.st_mtime_ns, st.st_uid, st.st_gid) == (mtime, uid, gid), (b, n)
            assert os.readlink(os.path.join(b, "d", n)) == target, (b, n)


def test_symlink_renamed_or_removed_before_it_was_sent(wc):
    """A symlink still queued goes to the bricks before its rename or
    removal: the bricks end up with the renamed one only."""
    bricks, (m1, m2) = replica3(wc)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    for i in range(20):
        os.symlink(f"t{i}", os.path.join(d, f"l{i}"))
        if i % 2:
            os.rename(os.path.join(d, f"l{i}"), os.path.join(d, f"r{i}"))
        else:
            os.unlink(os.path.join(d, f"l{i}"))
    os.makedirs(os.path.join(d, "tree", "deep"))
    os.symlink("x", os.path.join(d, "tree", "deep", "s"))
    shutil.rmtree(os.path.join(d, "tree"))
    fsync_dir(d)
    want = {f"r{i}": f"t{i}" for i in range(1, 20, 2)}
    for root in [os.path.join(b, "d") for b in bricks] + [os.path.join(m2.path, "d")]:
        assert sorted(os.listdir(root)) == sorted(want), root
        for n, t in want.items():
            assert os.readlink(os.path.join(root, n)) == t, (root, n)
    with open(m1.log, errors="replace") as fh:
        assert "write-back of symlink" not in fh.read()


def clash_setup(wc):
    """A written-back directory d on one mount, and a directory d/clash the
    bricks have behind the mount's back: (bricks, mount, d)."""
    bricks, (m1,) = replica3(wc, mounts=1)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    with open(os.path.join(d, "first"), "wb") as fh:
        fh.write(b"1")
    fsync_dir(d)
    for b in bricks:
        os.mkdir(os.path.join(b, "d", "clash"))
    return bricks, m1, d


def while_bricks_stopped(c, fn):
    """Runs fn with every brick of wv stopped."""
    pids = brick_pids(c, "wv")
    for p in pids:
        c.stop_signal(p)
    try:
        fn()
    finally:
        for p in pids:
            c.cont(p)


def test_failed_mkdir_is_reported_and_its_files_not_sent(wc):
    """A MKDIR written back that the bricks refuse (the name was taken
    behind the client's back) is logged, returned by the next fsync of the
    parent, and what was written into the directory is not sent into
    somebody else's directory."""
    bricks, m1, d = clash_setup(wc)

    def client():
        os.mkdir(os.path.join(d, "clash"))
        os.mkdir(os.path.join(d, "clash", "inner"))
        with open(os.path.join(d, "clash", "inner", "f"), "wb") as fh:
            fh.write(b"client's")

    while_bricks_stopped(wc, client)
    with pytest.raises(OSError):
        fsync_dir(d)
    for b in bricks:
        assert os.listdir(os.path.join(b, "d", "clash")) == [], b
    log = m1.tail(1 << 20)
    assert "write-back of directory /d/clash failed" in log


def test_failed_symlink_is_reported(wc):
    """A SYMLINK written back that the bricks refuse (the name was taken
    behind the client's back) is logged and returned by the next fsync of
    the parent; the bricks keep what they had."""
    bricks, m1, d = clash_setup(wc)
    while_bricks_stopped(wc, lambda: os.symlink("mine", os.path.join(d, "clash")))
    with pytest.raises(OSError):
        fsync_dir(d)
    for b in bricks:
        assert os.path.isdir(os.path.join(b, "d", "clash")), b
    assert "write-back of symlink /d/clash failed" in m1.tail(1 << 20)
    # the mount forgets what it showed (after waking the fsync, so it may
    # take a moment): the name is the bricks' directory
    end = time.time() + 10
    while not os.path.isdir(os.path.join(d, "clash")) and time.time() < end:
        time.sleep(0.05)
    assert os.path.isdir(os.path.join(d, "clash"))


def test_files_of_a_failed_mkdir_are_not_sent_open_or_closing(wc):
    """Files of a directory whose written-back MKDIR fails that were still
    open, or closed and waiting for the MKDIR's answer to be sent, are not
    sent by their path either: it names somebody else's directory."""
    bricks, m1, d = clash_setup(wc)
    opened = []

    def client():
        os.mkdir(os.path.join(d, "clash"))
        opened.append(open(os.path.join(d, "clash", "open"), "wb", buffering=0))
        opened[0].write(b"client's, open")
        with open(os.path.join(d, "clash", "closed"), "wb") as fh:
            fh.write(b"client's, closed")
        time.sleep(0.3)  # the closed one is on its way, waiting for the MKDIR

    while_bricks_stopped(wc, client)
    still_open = opened[0]
    with pytest.raises(OSError):
        fsync_dir(d)
    # the open file cannot reach the bricks any more, and says so
    with pytest.raises(OSError) as e:
        still_open.write(b" and more")
        os.fsync(still_open.fileno())
    assert e.value.errno == errno.EIO
    try:
        still_open.close()
    except OSError as e:
        assert e.errno == errno.EIO
    time.sleep(0.3)
    for b in bricks:
        assert os.listdir(os.path.join(b, "d", "clash")) == [], b
    assert "write-back of directory /d/clash failed" in m1.tail(1 << 20)


def test_default_acl_set_on_a_written_back_directory_is_inherited(wc):
    """A default ACL set on a directory this mount made (and knew to have
    none) shapes the files made in it afterwards, as seen by this mount,
    another one and the bricks."""
    bricks, (m1, m2) = replica3(wc)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    os.mkdir(os.path.join(d, "acl"))
    subprocess.run(["setfacl", "-d", "-m", "u:1001:rw", os.path.join(d, "acl")], check=True)
    for n in ("a", "b"):
        with open(os.path.join(d, "acl", n), "wb") as fh:
            fh.write(b"inherits")
    for root in (m1.path, m2.path, *bricks):
        for n in ("a", "b"):
            out = subprocess.run(["getfacl", "-n", os.path.join(root, "d", "acl", n)],
                                 capture_output=True, text=True, check=True).stdout
            assert "user:1001:rw-" in out, (root, n, out)


def renames_in_child(d, pairs):
    """A child that holds d open, and on a line on stdin renames each
    (old, new) pair (relative to d), printing "done"."""
    code = f"""
import os, sys
fd = os.open({d!r}, os.O_RDONLY | os.O_DIRECTORY)
print("ready", flush=True)
sys.stdin.readline()
for old, new in {pairs!r}:
    os.rename(old, new, src_dir_fd=fd, dst_dir_fd=fd)
print("done", flush=True)
"""
    return start_child(code)


def test_renames_are_answered_here_and_reach_every_brick(wc):
    """A rename of a file already on the bricks, within a written-back
    directory or between two, to a free name, is answered without the
    bricks; the bricks get them in order, and another client sees them."""
    bricks, (m1, m2) = replica3(wc)
    d = os.path.join(m1.path, "d")
    os.makedirs(os.path.join(d, "e"))
    for n in ("a", "b", "c"):
        with open(os.path.join(d, n), "wb") as fh:
            fh.write(n.encode() * 100)
    fsync_dir(d)  # on the bricks
    ids = {n: os.getxattr(os.path.join(bricks[0], "d", n), "trusted.cairn.gfid")
           for n in ("a", "b", "c")}
    # a chain the bricks must apply in order: c takes b's old name after b
    # moved away, and a moves twice
    child = renames_in_child(d, [("a", "a1"), ("b", "e/b1"), ("c", "b"), ("a1", "e/a2")])
    assert go_while_bricks_stopped(wc, child), "renames in written-back directories waited for the bricks"
    assert sorted(os.listdir(d)) == ["b", "e"]
    assert sorted(os.listdir(os.path.join(d, "e"))) == ["a2", "b1"]
    # the old name is free here at once: a new file takes it
    with open(os.path.join(d, "a"), "wb") as fh:
        fh.write(b"new a")
    want = {"a": b"new a", "b": b"c" * 100, "e/b1": b"b" * 100, "e/a2": b"a" * 100}
    for root in [os.path.join(m2.path, "d")] + [os.path.join(b, "d") for b in bricks]:
        assert sorted(os.listdir(root)) == ["a", "b", "e"], root
        assert sorted(os.listdir(os.path.join(root, "e"))) == ["a2", "b1"], root
        for rel, data in want.items():
            with open(os.path.join(root, rel), "rb") as fh:
                assert fh.read() == data, (root, rel)
    for b in bricks:
        for rel, was in (("b", "c"), ("e/b1", "b"), ("e/a2", "a")):
            assert os.getxattr(os.path.join(b, "d", rel), "trusted.cairn.gfid") == ids[was], (b, rel)


def test_rename_then_removal_and_failed_rename(wc):
    """A removal after a written-back rename removes the new name on the
    bricks; a rename the bricks refuse is logged and reported, and the
    mount shows the bricks' names again."""
    bricks, (m1,) = replica3(wc, mounts=1)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    for n in ("x", "y"):
        with open(os.path.join(d, n), "wb") as fh:
            fh.write(n.encode())
    fsync_dir(d)
    os.rename(os.path.join(d, "x"), os.path.join(d, "x2"))
    os.unlink(os.path.join(d, "x2"))
    fsync_dir(d)
    for b in bricks:
        assert sorted(os.listdir(os.path.join(b, "d"))) == ["y"], b
    # the bricks lose y behind the mount's back: the rename fails there
    for b in bricks:
        os.unlink(os.path.join(b, "d", "y"))
    os.rename(os.path.join(d, "y"), os.path.join(d, "y2"))
    with pytest.raises(OSError):
        fsync_dir(d)
    assert "write-back of the rename of /d/y to /d/y2 failed" in m1.tail(1 << 20)
    assert os.listdir(d) == []


def test_chown_of_a_written_back_file_drops_set_id_bits(wc):
    """chown of a file not yet sent drops set-user-ID, and set-group-ID
    when group-executable, as the bricks' kernel does for one sent."""
    bricks, (m1,) = replica3(wc, mounts=1)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    want = {"suid": (0o4755, 0o755), "sgid_x": (0o2755, 0o755), "sgid": (0o2744, 0o2744)}
    for n, (mode, _) in want.items():
        p = os.path.join(d, n)
        with open(p, "wb") as fh:
            fh.write(b"#!")
        os.chmod(p, mode)
        os.chown(p, 1001, 1001)
    for n, (_, after) in want.items():
        assert stat.S_IMODE(os.stat(os.path.join(d, n)).st_mode) == after, n
    fsync_dir(d)
    for b in bricks:
        for n, (_, after) in want.items():
            st = os.stat(os.path.join(b, "d", n))
            assert (stat.S_IMODE(st.st_mode), st.st_uid) == (after, 1001), (b, n)


@pytest.mark.parametrize("how", ["create", "reopen"])
def test_o_append_file_written_back_appends_at_the_bricks_end(wc, how):
    """An O_APPEND handle on a file written back (made O_APPEND, or closed
    and opened again O_APPEND before it was sent): once its fsync has put
    the file on the bricks, its writes land at the end the bricks have, not
    at the end this mount's kernel last knew (the kernel takes an append's
    offset from its cached size, which another client's appends leave
    stale)."""
    bricks, (m1, m2) = replica3(wc)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    with open(os.path.join(d, "first"), "wb") as fh:
        fh.write(b"1")  # the directory is written back from here on
    p = os.path.join(d, "log")
    if how == "create":
        f1 = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    else:
        os.close(os.open(p, os.O_WRONLY | os.O_CREAT, 0o644))
        f1 = os.open(p, os.O_WRONLY | os.O_APPEND)
    expect = b""
    try:
        for i in range(5):
            assert os.write(f1, b"1%03d\n" % i) == 5
            os.fsync(f1)
            expect += b"1%03d\n" % i
            f2 = os.open(os.path.join(m2.path, "d", "log"), os.O_WRONLY | os.O_APPEND)
            try:
                assert os.write(f2, b"2%03d\n" % i) == 5
                os.fsync(f2)
            finally:
                os.close(f2)
            expect += b"2%03d\n" % i
    finally:
        os.close(f1)
    for m in (m1, m2):
        with open(os.path.join(m.path, "d", "log"), "rb") as fh:
            assert fh.read() == expect, m.path
    for b in bricks:
        with open(os.path.join(b, "d", "log"), "rb") as fh:
            assert fh.read() == expect, b


@pytest.mark.parametrize("write_back", ["on", "off"])
def test_reader_sees_writes_to_a_new_write_only_file(wc, write_back):
    """A file created write-only bypasses the kernel's page cache (direct
    I/O: no check for security.capability before its first write). Another
    process of the same mount that reads it, by read or by a shared
    mapping, still sees every write at once: in the write-back buffer,
    past it (the file goes to the bricks once it outgrows it) and after
    the reader opened it (which sends the file first). A write by a user
    without CAP_FSETID still clears set-id bits. The same with write-back
    off (the file is created on the bricks)."""
    bricks, _ = replica3(wc, opts={"client.write-back": write_back}, mounts=0)
    m1, m2 = (wc.mount("wv", os.path.join(wc.root, f"m{i}"), opts=["allow_other"])
              for i in range(2))
    os.chmod(m1.path, 0o755)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)
    os.chmod(d, 0o1777)
    p = os.path.join(d, "f")
    w = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(w, b"a" * 8192)
    r = os.open(p, os.O_RDONLY)
    assert os.pread(r, 8192, 0) == b"a" * 8192
    mp = mmap.mmap(r, 8192, mmap.MAP_SHARED, mmap.PROT_READ)
    assert mp[:4] == b"aaaa"
    os.pwrite(w, b"b" * 4096, 0)
    assert os.pread(r, 8192, 0) == b"b" * 4096 + b"a" * 4096
    assert mp[:4] == b"bbbb" and mp[4096:4100] == b"aaaa"
    big = b"c" * (3 << 20)  # past the write-back buffer of a file
    os.pwrite(w, big, 4096)
    assert os.pread(r, 8192, 0) == b"b" * 4096 + b"c" * 4096
    assert os.fstat(r).st_size == 4096 + len(big)
    os.pwrite(w, b"d" * 10, 0)
    assert mp[:10] == b"d" * 10
    mp.close()
    os.close(r)
    os.close(w)
    want = b"d" * 10 + b"b" * 4086 + big
    with open(os.path.join(m2.path, "d", "f"), "rb") as fh:
        assert fh.read() == want
    fsync_dir(d)
    for b in bricks:
        with open(os.path.join(b, "d", "f"), "rb") as fh:
            assert fh.read() == want, b
    code = """
fd = os.open(os.environ['P'], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o6775)
os.fchmod(fd, 0o6775)
os.write(fd, b'x' * 10)
os.close(fd)
print(oct(os.stat(os.environ['P']).st_mode & 0o7777))
"""
    last, out = as_user(code, P=os.path.join(d, "s"))
    assert last == "OK" and out.splitlines()[0] == "0o775", out


def test_minimal_acl_on_a_written_back_file_is_a_chmod(wc):
    """cp -a sets every copied file's access ACL, which for an ordinary file
    holds only user::, group:: and other::. That says no more than the mode:
    a file system stores no xattr for it (setting it is a chmod), and the
    mount does the same for a file still written back, so the bricks get a
    mode and no ACL to set. An extended ACL set before it goes too."""
    bricks, (m1, m2) = replica3(wc)
    d = os.path.join(m1.path, "d")
    os.mkdir(d)

    def acl(*entries):
        return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, 0xFFFFFFFF)
                                               for t, p in entries)
    minimal = acl((0x01, 6), (0x04, 4), (0x20, 0))  # u::rw- g::r-- o::---
    for name in ("plain", "was_extended"):
        p = os.path.join(d, name)
        with open(p, "wb") as fh:
            fh.write(b"data")
        os.chmod(p, 0o777)
        if name == "was_extended":
            subprocess.run(["setfacl", "-m", "u:1001:r", p], check=True)
        os.setxattr(p, "system.posix_acl_access", minimal)
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o640
        with pytest.raises(OSError) as e:
            os.getxattr(p, "system.posix_acl_access")
        assert e.value.errno == errno.ENODATA
    fsync_dir(d)
    for name in ("plain", "was_extended"):
        for where in [os.path.join(b, "d") for b in bricks] + [os.path.join(m2.path, "d")]:
            p = os.path.join(where, name)
            assert stat.S_IMODE(os.stat(p).st_mode) == 0o640, (p, oct(os.stat(p).st_mode))
            assert "system.posix_acl_access" not in os.listxattr(p), p
            with open(p, "rb") as fh:
                assert fh.read() == b"data"
