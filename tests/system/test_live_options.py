"""Live volume options on a mounted client, and backup management servers.

A mount keeps its management connection to cairnd and applies the options
cairnd notifies (docs/cluster.md, "Clients"), without remounting and with
files kept open: network.ping-timeout, client.leases,
client.lease-cache-timeout, diagnostics.client-log-level. With
`-o backup-servers=H2:H3` a mount is made, and keeps hearing about changes,
while the spec's server is down.

Addresses: 127.0.0.81 (one server), 127.0.0.82-84 (a pool of three).
Run: /usr/bin/python3 -m pytest tests/system/test_live_options.py
Binaries: $CAIRN_BUILD (default <repo>/build).
"""

import os
import subprocess
import time

import pytest

from cairn_cluster import Cluster, Mount, exe, kill_pid, mounted, pids_with_arg

HOST = "127.0.0.81"
POOL = ["127.0.0.82", "127.0.0.83", "127.0.0.84"]


def wait_log(m, needle, timeout=10):
    """Waits until the mount's log has needle; returns the log."""
    end = time.time() + timeout
    while True:
        text = m.tail(1 << 20) if isinstance(m, Mount) else Cluster.tail(m, 1 << 20)
        if needle in text:
            return text
        if time.time() > end:
            raise AssertionError(f"{needle!r} not in the client log:\n{text[-3000:]}")
        time.sleep(0.05)


PROBE = r'''
import errno, os, sys, time
t0 = time.time()
try:
    os.stat(sys.argv[1])
    print("OK", time.time() - t0)
except OSError as e:
    print("ERR", errno.errorcode.get(e.errno, e.errno), time.time() - t0)
'''


def probe(path, limit):
    """stat(path) in another process: (result, errno name or '', seconds)."""
    p = subprocess.Popen(["/usr/bin/python3", "-c", PROBE, path], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate(timeout=30)
        pytest.fail(f"stat of {path} hung for more than {limit}s")
    parts = out.split()
    assert parts, err
    return parts


def test_live_options_without_remount():
    with Cluster(host=HOST, prefix="live-") as c:
        # Changes are made behind the mount's back (on the brick), which no
        # lease recalls: leases off first, so nothing is cached.
        c.create_volume("lv", options={"client.leases": "off"})
        m = c.mount("lv", os.path.join(c.root, "m"))
        brick_file = os.path.join(c.volumes["lv"][0], "f")
        path = os.path.join(m.path, "f")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.write(fd, b"before")
            # no lease, nothing cached: a change made behind the mount's
            # back shows at once
            assert os.fstat(fd).st_size == 6
            with open(brick_file, "ab") as f:
                f.write(b"1")
            assert os.fstat(fd).st_size == 7

            c.cli("volume", "set", "lv", "diagnostics.client-log-level", "DEBUG")
            wait_log(m, "option diagnostics.client-log-level now DEBUG")
            c.cli("volume", "set", "lv", "network.ping-timeout", "3")
            log = wait_log(m, "option network.ping-timeout now 3 s")
            # a DEBUG line of the protocol client layer: the level is live, and
            # the layer got the new timeout
            log = wait_log(m, "ping timeout 3000 ms (was 10000 ms)")
            assert " D cairn-fuse[" in log
            c.cli("volume", "set", "lv", "client.leases", "on", "client.lease-cache-timeout", "2")
            wait_log(m, "leases now on, cache timeout 2 s")

            # the kernel now keeps attributes under a lease for 2 s: a change
            # on the brick, which recalls nothing, is not seen until they
            # expire
            g, brick_g = os.path.join(m.path, "g"), os.path.join(c.volumes["lv"][0], "g")
            with open(brick_g, "wb") as f:
                f.write(b"1")
            assert os.stat(g).st_size == 1
            with open(brick_g, "ab") as f:
                f.write(b"2")
            assert os.stat(g).st_size == 1
            time.sleep(2.3)
            assert os.stat(g).st_size == 2
            with open(brick_file, "ab") as f:
                f.write(b"2")

            # the descriptor opened before the changes still works
            assert os.pwrite(fd, b"after!", 0) == 6
            assert os.pread(fd, 8, 0) == b"after!12"
            with open(path, "rb") as f:
                assert f.read() == b"after!12"
            assert m.proc.poll() is None  # the same process: no remount
            assert "lost the management connection" not in m.tail(1 << 20)
        finally:
            os.close(fd)

        # behaviour of the live ping-timeout: a hung brick fails an operation
        # after ~3 s, not after the 10 s default
        (_, _, _, pid), = c.brick_status("lv")
        c.stop_signal(pid)
        t0 = time.time()
        res = probe(os.path.join(m.path, "never-seen"), limit=40)
        took = time.time() - t0
        c.cont(pid)
        assert res[0] == "ERR" and res[1] in ("ENOTCONN", "ETIMEDOUT", "EIO"), res
        assert took < 8, f"error after {took:.1f}s with network.ping-timeout 3"

        # levels go down live too: INFO lines stop with ERROR
        c.cli("volume", "set", "lv", "diagnostics.client-log-level", "ERROR")
        wait_log(m, "option diagnostics.client-log-level now ERROR")
        c.cli("volume", "set", "lv", "client.lease-cache-timeout", "3")
        time.sleep(1)
        assert "cache timeout 3 s" not in m.tail(1 << 20)


def test_mount_option_precedence_and_volume_restart():
    with Cluster(host=HOST, prefix="live-") as c:
        c.create_volume("pv")
        m = c.mount("pv", os.path.join(c.root, "m"),
                    opts=["attribute-timeout=0", "ping-timeout=5"])
        c.cli("volume", "set", "pv", "network.ping-timeout", "30")
        wait_log(m, "option network.ping-timeout is now 30 s on the volume; this mount keeps 5 s")
        c.cli("volume", "set", "pv", "client.lease-cache-timeout", "30")
        wait_log(m, "cache timeout 30 s")
        with open(os.path.join(m.path, "g"), "wb") as f:
            f.write(b"x")
        with open(os.path.join(m.path, "g"), "rb") as f:
            assert os.fstat(f.fileno()).st_size == 1
            with open(os.path.join(c.volumes["pv"][0], "g"), "ab") as b:
                b.write(b"y")
            # the mount's attribute-timeout=0 holds under leases too: not
            # cached for 30 s
            assert os.fstat(f.fileno()).st_size == 2
        # stop and start: reported, and the mount works again afterwards
        c.stop_volume("pv")
        wait_log(m, "cairnd says: Volume pv is not started")
        c.cli("volume", "start", "pv")
        wait_log(m, "volume pv is started again")
        end = time.time() + 15
        while True:
            try:
                with open(os.path.join(m.path, "g"), "rb") as f:
                    assert f.read() == b"xy"
                break
            except OSError:
                if time.time() > end:
                    raise
                time.sleep(0.2)
        assert "layout changed" not in m.tail(1 << 20)


@pytest.fixture(scope="module")
def pool():
    nodes = [Cluster(host=h, prefix="live-pool-") for h in POOL]
    try:
        for n in nodes:
            n.start()
        for n in nodes[1:]:
            r = nodes[0].cli("peer", "probe", n.host, check=False)
            assert r.returncode == 0 and "peer probe: success" in r.stdout, r.stdout + r.stderr
        yield nodes
    finally:
        for n in nodes:  # mounts first (their bricks still up), then the daemons
            for mt in n.mounts:
                mt.stop()
            n.mounts = []
            for p in n.extra_mounts:
                subprocess.run(["fusermount3", "-uz", p], check=False,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for n in nodes:
            if n.proc and n.proc.poll() is None:
                kill_pid(n.proc.pid)
                n.proc.wait()
        for n in nodes:
            n.close()


def test_backup_servers(pool):
    a, b, c = pool
    brick = os.path.join(b.root, "bv-brick")
    os.makedirs(brick)
    b.volumes["bv"] = [brick]
    a.cli("volume", "create", "bv", f"{b.host}:{brick}", "force")
    a.cli("volume", "start", "bv")
    m = Mount(a, f"{a.host}:/bv", os.path.join(a.root, "m"),
              opts=[f"backup-servers={b.host}:{c.host}:24810"])
    a.mounts.append(m)
    m.start()
    wait_log(m, f"management connection to cairnd at {a.host}:24810")
    fd = os.open(os.path.join(m.path, "f"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"one")
        a.proc.kill()  # kill -9: host1's cairnd is gone, the brick on host2 stays
        a.proc.wait()
        wait_log(m, "lost the management connection")
        wait_log(m, f"management connection to cairnd at {b.host}:24810")
        r = b.cli("volume", "set", "bv", "client.lease-cache-timeout", "7", check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        wait_log(m, "leases now on, cache timeout 7 s")
        assert os.pwrite(fd, b"two", 3) == 3
        with open(os.path.join(m.path, "f"), "rb") as f:
            assert f.read() == b"onetwo"
    finally:
        os.close(fd)

    # a new mount with host1 down: through mount(8)'s helper, daemonized,
    # with GlusterFS's option name
    mnt2 = os.path.join(a.root, "m2")
    log2 = os.path.join(a.root, "m2.log")
    os.makedirs(mnt2)
    a.extra_mounts.append(mnt2)
    r = subprocess.run([exe("mount.cairn"), f"{a.host}:/bv", mnt2, "-o",
                        f"_netdev,backup-volfile-servers={b.host}:{c.host},log-file={log2}"],
                       capture_output=True, text=True, timeout=60)
    a.extra_pids += pids_with_arg(mnt2)
    assert r.returncode == 0, r.stdout + r.stderr
    assert mounted(mnt2)
    with open(os.path.join(mnt2, "f"), "rb") as f:
        assert f.read() == b"onetwo"
    r = c.cli("volume", "set", "bv", "client.lease-cache-timeout", "9", check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    wait_log(log2, "leases now on, cache timeout 9 s")
    wait_log(m, "leases now on, cache timeout 9 s")
    subprocess.run(["fusermount3", "-u", mnt2], check=False, timeout=30)

    # without backups the same mount fails, saying why
    mnt3 = os.path.join(a.root, "m3")
    os.makedirs(mnt3)
    r = subprocess.run([exe("cairn-fuse"), f"{a.host}:/bv", mnt3], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1 and not mounted(mnt3)
    assert f"cannot connect to cairnd at {a.host}:24810: Connection refused" in r.stderr, r.stderr
