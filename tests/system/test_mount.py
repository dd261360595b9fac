"""Mounting: errors at mount time, mount -t cairn, fstab lines, and what a
mount does when its server dies or hangs."""

import itertools
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from cairn_cluster import alive, bin_dir, detach, exe, kill_pid, mounted, pids_with_arg

FAIL_FAST = 5.0


@pytest.fixture
def mnt(cluster):
    p = tempfile.mkdtemp(prefix="mnt-", dir=cluster.root)
    os.chmod(p, 0o755)
    yield p
    if mounted(p):
        detach(p)
    # a daemonized cairn-fuse serving p is ours: end it by pid
    for pid in pids_with_arg(p):
        kill_pid(pid)
    shutil.rmtree(p, ignore_errors=True)


def run_fuse(spec, mountpoint, *extra, timeout=30):
    t0 = time.time()
    try:
        r = subprocess.run([exe("cairn-fuse"), spec, mountpoint, *extra], capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"cairn-fuse {spec} {mountpoint} still running after {timeout}s")
    return r, time.time() - t0


def test_mount_unknown_volume_fails_fast(cluster, mnt):
    r, took = run_fuse(f"{cluster.remote}:/nosuchvolume", mnt)
    assert r.returncode != 0
    assert took < FAIL_FAST, f"took {took:.1f}s"
    assert "nosuchvolume" in r.stdout + r.stderr
    assert not mounted(mnt)


def test_mount_unknown_volume_fails_fast_foreground(cluster, mnt):
    r, took = run_fuse(f"{cluster.remote}:/nosuchvolume", mnt, "-f")
    assert r.returncode != 0
    assert took < FAIL_FAST
    assert "nosuchvolume" in r.stdout + r.stderr
    assert not mounted(mnt)


def test_mount_stopped_volume_fails_fast(cluster, mnt):
    cluster.create_volume("ststopped", start=False)
    r, took = run_fuse(f"{cluster.remote}:/ststopped", mnt)
    assert r.returncode != 0
    assert took < FAIL_FAST
    out = r.stdout + r.stderr
    assert "ststopped" in out
    assert "not started" in out or "stopped" in out, out
    assert not mounted(mnt)


def test_mount_no_server_fails_fast(cluster, mnt):
    # nothing listens on 127.0.0.11
    r, took = run_fuse("127.0.0.11:/stvol", mnt)
    assert r.returncode != 0
    assert took < FAIL_FAST
    assert not mounted(mnt)
    assert (r.stdout + r.stderr).strip(), "no error message"


@pytest.mark.parametrize("spec", ["no-colon-at-all", "127.0.0.10:novolslash", "127.0.0.10:/",
                                  ":/stvol", "127.0.0.10:99999:/stvol"])
def test_mount_bad_spec(cluster, mnt, spec):
    r, took = run_fuse(spec, mnt)
    assert r.returncode != 0
    assert took < FAIL_FAST
    assert not mounted(mnt)
    assert (r.stdout + r.stderr).strip()


@pytest.mark.parametrize("opt", ["ping-timeout=0", "ping-timeout=soon", "attribute-timeout=nan",
                                 "attribute-timeout=-1", "entry-timeout=1e9", "io-uring=maybe",
                                 "direct-io-mode=sometimes", "log-level=loud", "log-file=",
                                 "backup-servers=", "transport=udp", "use-readdirp=maybe",
                                 "reader-thread-count=many", "acl=1", "xlator-option=nodot",
                                 "xlator-option=*client*.ping-timeout=0"])
def test_mount_bad_option_value(cluster, vol, mnt, opt):
    r, took = run_fuse(f"{cluster.remote}:/{vol.name}", mnt, "-o", opt)
    assert r.returncode == 1
    assert took < FAIL_FAST
    assert f"invalid mount option '{opt}'" in r.stderr
    assert not mounted(mnt)


# What a GlusterFS fstab line carries (mount.glusterfs's options).
GLUSTER_OPTS = ("acl,transport=tcp,use-readdirp=yes,backup-volfile-servers=127.0.0.11:127.0.0.12,"
                "log-level=INFO,reader-thread-count=4,xlator-option=*replicate*.data-self-heal=off,"
                "xlator-option=*client*.ping-timeout=7")


def test_mount_gluster_options(cluster, vol, mnt):
    log = os.path.join(cluster.root, "gluster-opts.log")
    r, took = run_fuse(f"{cluster.remote}:/{vol.name}", mnt, "-o",
                       f"{GLUSTER_OPTS},log-file={log}")
    assert r.returncode == 0, r.stderr
    assert mounted(mnt)
    with open(os.path.join(mnt, "gluster-opts"), "wb") as f:
        f.write(b"ok")
    with open(os.path.join(vol.m1, "gluster-opts"), "rb") as f:
        assert f.read() == b"ok"
    os.unlink(os.path.join(mnt, "gluster-opts"))
    with open(log) as f:
        text = f.read()
    assert "mount option use-readdirp has no effect in Cairn" in text
    assert "mount option acl has no effect in Cairn: POSIX ACLs are always enforced" in text
    # an xlator option naming nothing of Cairn's is a warning naming it; one
    # with a Cairn mount option of the same meaning is taken as that option
    assert "xlator-option=*replicate*.data-self-heal=off names nothing Cairn has" in text
    assert "ping-timeout=7 names nothing" not in text


def test_mount_t_cairn_gluster_fstab_options(cluster, vol, mnt, mount_helper):
    mount_fstab_line(cluster, vol, mnt, mount_helper, f"defaults,_netdev,{GLUSTER_OPTS}")


def test_mount_transport_rdma_refused(cluster, vol, mnt):
    r, took = run_fuse(f"{cluster.remote}:/{vol.name}", mnt, "-o", "transport=rdma")
    assert r.returncode == 1
    assert took < FAIL_FAST
    assert "transport=rdma: Cairn speaks TCP only" in r.stderr
    assert not mounted(mnt)


@pytest.mark.parametrize("opt", ["nosuchoption", "worm", "nosuch=1"])
def test_mount_unknown_option_refused(cluster, vol, mnt, opt):
    r, took = run_fuse(f"{cluster.remote}:/{vol.name}", mnt, "-o", f"acl,{opt}")
    assert r.returncode == 1
    assert took < FAIL_FAST
    assert f"unknown mount option '{opt}'" in r.stderr
    assert not mounted(mnt)


def test_mount_missing_mountpoint(cluster, vol, mnt):
    missing = os.path.join(mnt, "does", "not", "exist")
    r, took = run_fuse(f"{cluster.remote}:/{vol.name}", missing)
    assert r.returncode != 0
    assert took < FAIL_FAST
    assert not mounted(missing)


def test_mount_daemonizes_and_unmounts(cluster, vol, mnt):
    r, took = run_fuse(f"{cluster.remote}:/{vol.name}", mnt)
    assert r.returncode == 0, r.stderr
    assert mounted(mnt)
    with open(os.path.join(mnt, "daemon-probe"), "wb") as f:
        f.write(b"ok")
    with open(os.path.join(vol.m1, "daemon-probe"), "rb") as f:
        assert f.read() == b"ok"
    pids = pids_with_arg(mnt)
    assert pids, "no cairn-fuse process for the mount"
    assert subprocess.run(["fusermount3", "-u", mnt]).returncode == 0
    assert not mounted(mnt)
    end = time.time() + 10
    while time.time() < end and any(alive(p) for p in pids):
        time.sleep(0.1)
    assert not any(alive(p) for p in pids), "cairn-fuse kept running after unmount"
    os.unlink(os.path.join(vol.m1, "daemon-probe"))


@pytest.fixture(scope="module")
def mount_helper():
    """Installs mount.cairn into /sbin for `mount -t cairn`, and cairn-fuse
    where mount.cairn looks for it (mount(8) resets PATH for helpers, so the
    build dir cannot be reached through PATH): /usr/local/sbin, as `make
    install` puts it. Previous files are restored afterwards."""
    src = os.path.join(bin_dir(), "mount.cairn")
    if not os.path.exists(src):
        src = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))), "src", "fuse", "mount.cairn")
    assert os.path.exists(src), "mount.cairn is not built"
    installed = []
    try:
        for s, dst in ((src, "/sbin/mount.cairn"), (exe("cairn-fuse"), "/usr/local/sbin/cairn-fuse")):
            backup = None
            if os.path.lexists(dst):
                backup = dst + ".systest-backup"
                os.replace(dst, backup)
            installed.append((dst, backup))
            subprocess.run(["install", "-m755", s, dst], check=True)
        env = dict(os.environ)
        env["PATH"] = bin_dir() + ":" + env.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        yield env
    finally:
        for dst, backup in reversed(installed):
            if backup:
                os.replace(backup, dst)
            elif os.path.lexists(dst):
                os.unlink(dst)


def test_mount_t_cairn_and_umount(cluster, vol, mnt, mount_helper):
    r = subprocess.run(["mount", "-t", "cairn", f"{cluster.host}:/{vol.name}", mnt],
                       capture_output=True, text=True, timeout=30, env=mount_helper)
    assert r.returncode == 0, r.stdout + r.stderr
    assert mounted(mnt)
    with open(os.path.join(mnt, "via-mount-t"), "wb") as f:
        f.write(b"hello")
    with open(os.path.join(vol.m2, "via-mount-t"), "rb") as f:
        assert f.read() == b"hello"
    os.unlink(os.path.join(mnt, "via-mount-t"))
    r = subprocess.run(["umount", mnt], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert not mounted(mnt)


def test_mount_t_cairn_unknown_volume_fails(cluster, vol, mnt, mount_helper):
    t0 = time.time()
    r = subprocess.run(["mount", "-t", "cairn", f"{cluster.host}:/nosuchvolume", mnt],
                       capture_output=True, text=True, timeout=30, env=mount_helper)
    assert r.returncode != 0
    assert time.time() - t0 < FAIL_FAST
    assert "nosuchvolume" in r.stdout + r.stderr
    assert not mounted(mnt)


def mount_fstab_line(cluster, vol, mnt, env, opts):
    """Mounts mnt from an fstab line with opts, looks in, and unmounts."""
    fstab = os.path.join(cluster.root, "fstab")
    with open(fstab, "w") as f:
        f.write(f"{cluster.host}:/{vol.name} {mnt} cairn {opts} 0 0\n")
    r = subprocess.run(["mount", "-T", fstab, mnt], capture_output=True, text=True, timeout=30,
                       env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert mounted(mnt)
    assert os.path.isdir(os.path.join(mnt, "."))
    os.listdir(mnt)
    r = subprocess.run(["umount", mnt], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert not mounted(mnt)


def test_mount_fstab_line(cluster, vol, mnt, mount_helper):
    mount_fstab_line(cluster, vol, mnt, mount_helper, "defaults,_netdev")


def test_mount_fstab_line_of_a_directory(cluster, vol, mnt, mount_helper):
    """HOST:/VOLUME/DIR in fstab mounts DIR as the root (test_subdir_mount.py
    has the rest)."""
    d = os.path.join(vol.m1, "fstab-dir")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f"), "wb") as f:
        f.write(b"in the directory")
    fstab = os.path.join(cluster.root, "fstab")
    with open(fstab, "w") as f:
        f.write(f"{cluster.host}:/{vol.name}/fstab-dir/ {mnt} cairn defaults,_netdev 0 0\n")
    r = subprocess.run(["mount", "-T", fstab, mnt], capture_output=True, text=True, timeout=30,
                       env=mount_helper)
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        assert os.listdir(mnt) == ["f"]
        with open(os.path.join(mnt, "f"), "rb") as f:
            assert f.read() == b"in the directory"
    finally:
        r = subprocess.run(["umount", mnt], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    os.unlink(os.path.join(d, "f"))
    os.rmdir(d)


def test_mount_read_only_option(cluster, vol, mnt):
    r, _ = run_fuse(f"{cluster.remote}:/{vol.name}", mnt, "-o", "ro")
    assert r.returncode == 0, r.stderr
    with pytest.raises(OSError) as e:
        open(os.path.join(mnt, "ro-probe"), "wb")
    assert e.value.errno == 30  # EROFS
    assert not os.path.exists(os.path.join(vol.m1, "ro-probe"))


# ---- server death ----

PING_TIMEOUT = 3
DEAD_ERRNOS = {"ENOTCONN", "EIO", "ETIMEDOUT", "EHOSTDOWN", "ECONNRESET", "ECONNREFUSED",
               "EHOSTUNREACH"}

PROBE = r'''
import errno, os, sys, time
p = sys.argv[1]
t0 = time.time()
try:
    os.stat(os.path.join(p, "never-seen-before"))
    print("ERR stat-succeeded")
except FileNotFoundError:
    try:
        fd = os.open(os.path.join(p, "probe-new"), os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"x")
        os.fsync(fd)
        os.close(fd)
        print("OK", time.time() - t0)
    except OSError as e:
        print("ERR", errno.errorcode.get(e.errno, e.errno), time.time() - t0)
except OSError as e:
    print("ERR", errno.errorcode.get(e.errno, e.errno), time.time() - t0)
'''


def probe(path, limit):
    """Runs PROBE against path in a separate process; returns (result, errno
    name, seconds). A hang past `limit` fails the test."""
    p = subprocess.Popen(["/usr/bin/python3", "-c", PROBE, path], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate(timeout=30)
        pytest.fail(f"operation on {path} hung for more than {limit}s")
    parts = out.split()
    assert parts, err
    return parts


_deadvol_seq = itertools.count(1)


@pytest.fixture
def deadvol(cluster, mnt, request):
    name = "stdeath%d" % next(_deadvol_seq)
    cluster.create_volume(name, start=False, options={"network.ping-timeout": PING_TIMEOUT})
    cluster.cli("volume", "start", name)
    m = cluster.mount(name, mnt)
    (host, path, port, pid), = cluster.brick_status(name)
    os.mkdir(os.path.join(m.path, "d"))
    with open(os.path.join(m.path, "d", "f"), "wb") as f:
        f.write(b"before")
    yield cluster, name, m, pid
    for p in list(cluster.stopped_pids):
        cluster.cont(p)
    m.stop()
    cluster.stop_volume(name, check=False)


def test_hung_brick_errors_within_ping_timeout(deadvol):
    cluster, name, m, pid = deadvol
    cluster.stop_signal(pid)  # a hung server: the socket stays open
    t0 = time.time()
    res = probe(os.path.join(m.path, "d"), limit=PING_TIMEOUT + 30)
    took = time.time() - t0
    assert res[0] == "ERR" and res[1] in DEAD_ERRNOS, res
    assert took < PING_TIMEOUT + 7, f"error after {took:.1f}s"


def test_killed_brick_errors_quickly(deadvol):
    cluster, name, m, pid = deadvol
    cluster.stop_signal(cluster.proc.pid)  # keep cairnd from restarting the brick
    os.kill(pid, 9)
    t0 = time.time()
    res = probe(os.path.join(m.path, "d"), limit=PING_TIMEOUT + 30)
    took = time.time() - t0
    cluster.cont(cluster.proc.pid)
    assert res[0] == "ERR" and res[1] in DEAD_ERRNOS, res
    assert took < PING_TIMEOUT + 7, f"error after {took:.1f}s"


def test_mount_recovers_after_hung_brick_resumes(deadvol):
    cluster, name, m, pid = deadvol
    cluster.stop_signal(pid)
    probe(os.path.join(m.path, "d"), limit=PING_TIMEOUT + 30)
    cluster.cont(pid)
    end = time.time() + 20
    last = None
    while time.time() < end:
        try:
            with open(os.path.join(m.path, "d", "f"), "rb") as f:
                if f.read() == b"before":
                    return
        except OSError as e:
            last = e
        time.sleep(0.5)
    pytest.fail(f"mount did not recover within 20s after the brick resumed: {last}")


def test_unmount_with_dead_brick_does_not_hang(deadvol):
    cluster, name, m, pid = deadvol
    cluster.stop_signal(pid)
    r = subprocess.run(["fusermount3", "-u", m.path], capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert not mounted(m.path)
