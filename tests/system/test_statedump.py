"""`cairn volume statedump`: bricks and mounted clients write their internal
state on SIGUSR1 into server.statedump-path. Checks that a brick's dump
names every handle a mount holds open and every lease on them, that a
client's dump names its open files and what it holds under leases, that
both processes keep serving after a dump, and the command's errors.
One cairnd on 127.0.0.231; a pool of two on 127.0.0.232-233.

Run: /usr/bin/python3 -m pytest tests/system/test_statedump.py
"""

import glob
import os
import time

import pytest

import replica_pool
from cairn_cluster import Cluster, pids_with_arg
from replica_pool import wait_until

HOST = "127.0.0.231"
VOL = "sd"


@pytest.fixture(scope="module")
def c():
    cl = Cluster(host=HOST, prefix="st-sd-")
    try:
        cl.start()
        cl.dumps = os.path.join(cl.root, "dumps", "deep")  # made by the processes
        cl.create_volume(VOL, options={"server.statedump-path": cl.dumps})
        cl.mnt = cl.mount(VOL, os.path.join(cl.root, "m"))
        yield cl
    finally:
        cl.close()


def wait_dump(pattern, before=()):
    """The one complete dump matching pattern that is not in before."""
    end = time.time() + 15
    while time.time() < end:
        for p in sorted(set(glob.glob(pattern)) - set(before)):
            with open(p) as f:
                text = f.read()
            if "DUMP-END-TIME:" in text:
                return p, text
        time.sleep(0.05)
    raise AssertionError(f"no complete dump {pattern}: {os.listdir(os.path.dirname(pattern))}")


def section(text, name):
    """The key=value lines of [name]."""
    out, inside = [], False
    for line in text.splitlines():
        if line.startswith("["):
            inside = line == f"[{name}]"
        elif inside and line:
            out.append(line)
    return out


def test_brick_dump_names_open_handles_and_leases(c):
    m = c.mnt.path
    with open(os.path.join(m, "r"), "wb") as f:
        f.write(b"read me")
    os.mkdir(os.path.join(m, "d"))
    w = open(os.path.join(m, "d", "w"), "wb")
    r = open(os.path.join(m, "r"), "rb")
    try:
        w.write(b"x" * 4096)
        w.flush()
        os.fsync(w.fileno())  # made on the brick, not only in this mount's write-back
        assert r.read() == b"read me"
        pid = c.brick_status(VOL)[0][3]
        brick = c.volumes[VOL][0]
        pattern = os.path.join(c.dumps, brick.strip("/").replace("/", "-") + f".{pid}.dump.*")
        before = glob.glob(pattern)
        out = c.cli("volume", "statedump", VOL).stdout
        assert out.strip() == "volume statedump: success"
        path, text = wait_dump(pattern, before)
        assert f"path={brick}" in section(text, "brick")
        conns = [s for s in text.splitlines() if s.startswith("[brick.connection.")]
        assert conns, text
        handles = [s for s in text.splitlines() if s.startswith("handle.")]
        # both files the mount holds open, by their place on the brick
        assert any("on-brick=/d/w" in h and h.split("=", 1)[1].startswith("file") for h in handles), text
        assert any("on-brick=/r" in h for h in handles), text
        leases = section(text, "brick.leases")
        held = {}
        for i, line in enumerate(leases):
            if line.startswith("lease="):
                held[line.split()[0][len("lease="):]] = leases[i + 1] if i + 1 < len(leases) else ""
        # the directory this mount made is its own; the files are leased
        assert "/d" in held and "exclusive" in held["/d"], leases
        assert "/d/w" in held and "/r" in held, leases
        assert section(text, "brick.space") and section(text, "brick.locks")
    finally:
        w.close()
        r.close()
    # the brick serves on, and writes again on the next signal
    with open(os.path.join(m, "after"), "wb") as f:
        f.write(b"ok")
    with open(os.path.join(m, "after"), "rb") as f:
        assert f.read() == b"ok"


def test_client_dump_names_open_files_and_leases(c):
    m = c.mnt.path
    f = open(os.path.join(m, "held"), "wb")
    try:
        f.write(b"y" * 100)
        f.flush()
        pid = c.mnt.proc.pid
        pattern = os.path.join(c.dumps, "client-" + m.strip("/").replace("/", "-") + f".{pid}.dump.*")
        before = glob.glob(pattern)
        out = c.cli("volume", "statedump", VOL, "client", f"{HOST}:{pid}").stdout
        assert out.strip() == "volume statedump: success"
        path, text = wait_dump(pattern, before)
        client = section(text, "client")
        assert f"mountpoint={m}" in client and f"volume={VOL}" in client
        opened = section(text, "client.open")
        assert any(" path=/held " in line + " " and "handles=1" in line for line in opened), opened
        leases = section(text, "client.leases")
        assert any("path=/held" in line and "exclusive-file" in line for line in leases), leases
        assert any(line.startswith("READ") or line.startswith("Fop") for line in
                   section(text, "client.io-stats")), text
    finally:
        f.close()
    # SIGUSR1 does not end the mount
    assert c.mnt.proc.poll() is None
    with open(os.path.join(m, "held"), "rb") as g:
        assert g.read() == b"y" * 100


def test_errors(c):
    def fails(*args):
        r = c.cli("volume", "statedump", *args, check=False)
        assert r.returncode != 0, r.stdout
        return r.stdout + r.stderr

    assert "Volume nosuch does not exist" in fails("nosuch")
    assert "HOSTNAME:PID" in fails(VOL, "client", "nopid")
    assert "HOSTNAME:PID" in fails(VOL, "client", f"{HOST}:12x")
    assert "no nfs daemon" in fails(VOL, "nfs")
    assert "Usage" in fails(VOL, "bogus")
    # a process that is not a client of the volume is not signalled
    out = fails(VOL, "client", f"{HOST}:{os.getpid()}")
    assert f"process {os.getpid()} is not a Cairn client of volume {VOL}" in out
    r = c.cli("volume", "set", VOL, "server.statedump-path", "relative/dir", check=False)
    assert r.returncode != 0 and "not an absolute path" in r.stdout + r.stderr
    # the section words GlusterFS takes are accepted
    assert c.cli("volume", "statedump", VOL, "fd", "inode").stdout.strip() == \
        "volume statedump: success"
    c.create_volume("sdstopped", start=False)
    assert "is not in the started state" in fails("sdstopped")


def test_pool_dumps_every_servers_bricks():
    """A replica 2 volume over two servers: the command, given to one,
    makes the other server's brick write its dump too; a client on the
    other server is reached through its cairnd."""
    pool = replica_pool.Pool(["127.0.0.232", "127.0.0.233"], "st-sdpool-")
    try:
        pool.start()
        a, b = pool.nodes
        dumps = os.path.join(a.root, "pooldumps")
        bricks = []
        for n in pool.nodes:
            path = os.path.join(n.root, "pd-brick")
            os.makedirs(path)
            bricks.append(path)
            n.volumes["pd"] = [path]
        a.cli("volume", "create", "pd", "replica", "2",
              *[f"{n.host}:{p}" for n, p in zip(pool.nodes, bricks)], "force")
        a.cli("volume", "set", "pd", "server.statedump-path", dumps)
        a.cli("volume", "start", "pd")
        wait_until(lambda: all(p for _, _, _, p in a.brick_status("pd")), 15, "both bricks up")
        assert a.cli("volume", "statedump", "pd").stdout.strip() == "volume statedump: success"
        for path in bricks:
            pid = pids_with_arg("--brick-path", path)[0]
            wait_dump(os.path.join(dumps, path.strip("/").replace("/", "-") + f".{pid}.dump.*"))
        mnt = b.mount("pd", os.path.join(b.root, "m"))
        out = a.cli("volume", "statedump", "pd", "client", f"{b.host}:{mnt.proc.pid}").stdout
        assert out.strip() == "volume statedump: success"
        wait_dump(os.path.join(dumps, "client-" + mnt.path.strip("/").replace("/", "-") +
                               f".{mnt.proc.pid}.dump.*"))
        r = a.cli("volume", "statedump", "pd", "client", "127.0.0.234:4242", check=False)
        assert r.returncode != 0 and "127.0.0.234 is not a server of the pool" in r.stderr
    finally:
        pool.close()
