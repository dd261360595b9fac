"""Mounting a directory of a volume (HOST:/VOLUME/DIR, as GlusterFS does),
auth.allow / auth.reject entries per directory (/DIR(ADDR|ADDR)), and the
bricks keeping a connection confined to its directory whatever a client
sends (checked with a raw client speaking docs/protocol.md).

One cairnd on its own address with a 2 x 2 volume (distribute over two
replica pairs), so names spread over both sets and every file has two
copies to compare. Clients reach it from 127.0.0.1 (the source address
Linux picks on loopback), so the auth tests move that address in and out
of the lists."""

import errno
import hashlib
import os
import socket
import struct
import subprocess
import time

import pytest

from cairn_cluster import Cluster, ClusterError, Mount, exe, fsync_dir
from test_bad_input import Client, Closed, body, field

HOST = "127.0.0.91"
PORT = 24971
VOL = "sdv"
SUBDIR_TAG = 60  # SUBDIR, docs/protocol.md
OP_INDEX = 71


@pytest.fixture(scope="module")
def sd():
    with Cluster(host=HOST, port=PORT, prefix="subdir-") as c:
        bricks = [c.brick_path(f"b{i}") for i in range(4)]
        for b in bricks:
            os.makedirs(b)
        c.cli("volume", "create", VOL, "replica", "2", *[f"{HOST}:{b}" for b in bricks], "force")
        c.cli("volume", "set", VOL, "network.ping-timeout", "2")
        c.cli("volume", "start", VOL)
        full = c.mount(VOL, os.path.join(c.root, "full"))
        c.bricks = bricks
        c.full = full.path
        yield c


def source_addr():
    """The address the bricks and cairnd see this host's clients come from."""
    s = socket.create_connection((HOST, PORT), timeout=5)
    try:
        return s.getsockname()[0]
    finally:
        s.close()


def sub_mount(c, subdir, name):
    m = Mount(c, f"{c.remote}:/{VOL}{subdir}", os.path.join(c.root, name))
    c.mounts.append(m)
    return m.start()


def try_mount(c, spec, name):
    """Runs cairn-fuse in the foreground expecting it to fail: (rc, output)."""
    path = os.path.join(c.root, name)
    os.makedirs(path, exist_ok=True)
    try:
        r = subprocess.run([exe("cairn-fuse"), spec, path, "-f"], capture_output=True,
                           text=True, timeout=30)
    except subprocess.TimeoutExpired:
        subprocess.run(["umount", "-l", path], capture_output=True)
        raise AssertionError(f"cairn-fuse {spec} did not fail at once")
    return r.returncode, r.stdout + r.stderr


def set_auth(c, allow, reject=""):
    c.cli("volume", "set", VOL, "auth.allow", allow)
    if reject:
        c.cli("volume", "set", VOL, "auth.reject", reject)
    else:
        c.cli("volume", "reset", VOL, "auth.reject", check=False)
    time.sleep(0.5)  # bricks get it through MGMT_RECONF


def copies(c, rel):
    """Contents of every copy of volume path rel on the bricks (link-to files
    of distribute, which carry no data, left out)."""
    out = []
    for b in c.bricks:
        p = os.path.join(b, rel.lstrip("/"))
        if os.path.lexists(p) and not (os.stat(p).st_mode & 0o1000 and os.path.getsize(p) == 0):
            with open(p, "rb") as f:
                out.append(f.read())
    return out


def digest(b):
    return hashlib.sha256(b).hexdigest()


def wait_for(pred, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_mount_a_directory(sd):
    c = sd
    d = os.path.join(c.full, "proj", "team")
    os.makedirs(d)
    os.chmod(d, 0o750)
    os.chown(d, 1234, 4321)
    with open(os.path.join(c.full, "proj", "outside"), "wb") as f:
        f.write(b"not for the directory mount")
    m = sub_mount(c, "/proj/team/", "sub")  # a trailing slash is the same directory
    # the mount's root is the directory: its attributes, its entries only
    st, want = os.stat(m.path), os.stat(d)
    assert (st.st_mode, st.st_uid, st.st_gid) == (want.st_mode, want.st_uid, want.st_gid)
    assert os.listdir(m.path) == []
    # statfs is the volume's
    a, b = os.statvfs(m.path), os.statvfs(c.full)
    assert (a.f_bsize, a.f_blocks, a.f_files) == (b.f_bsize, b.f_blocks, b.f_files)
    # files of several sizes, a directory, a rename, a symlink, a hard link
    data = {f"f{i}": os.urandom(n) for i, n in enumerate((0, 1, 4095, 65536, 1 << 20, 3 << 20))}
    for name, blob in data.items():
        with open(os.path.join(m.path, name), "wb") as f:
            f.write(blob)
    os.mkdir(os.path.join(m.path, "sub"))
    os.rename(os.path.join(m.path, "f1"), os.path.join(m.path, "sub", "moved"))
    data["sub/moved"] = data.pop("f1")
    os.symlink("../f2", os.path.join(m.path, "sub", "ln"))
    os.link(os.path.join(m.path, "f3"), os.path.join(m.path, "f3.hard"))
    data["f3.hard"] = data["f3"]
    fsync_dir(m.path)
    assert sorted(os.listdir(m.path)) == sorted(["f0", "f2", "f3", "f4", "f5", "f3.hard", "sub"])
    assert sorted(os.listdir(os.path.join(m.path, "sub"))) == ["ln", "moved"]
    with open(os.path.join(m.path, "sub", "ln"), "rb") as f:
        assert f.read() == data["f2"]
    # every byte, read back through the mount, the full mount and on both copies
    for name, blob in data.items():
        with open(os.path.join(m.path, name), "rb") as f:
            assert f.read() == blob, name
        with open(os.path.join(d, name), "rb") as f:
            assert f.read() == blob, name
        cp = copies(c, f"/proj/team/{name}")
        assert len(cp) == 2 and all(x == blob for x in cp), (name, len(cp))
        assert not any(os.path.lexists(os.path.join(b, name.split("/")[0])) for b in c.bricks), \
            f"{name} landed at the volume's root"
    # the root stays: it cannot be removed or renamed from inside
    with pytest.raises(OSError):
        os.rmdir(m.path)
    # the volume's own names are not reachable
    assert not os.path.exists(os.path.join(m.path, "outside"))
    assert not os.path.exists(os.path.join(m.path, "proj"))


def test_full_and_directory_mount_see_each_other(sd):
    c = sd
    d = os.path.join(c.full, "shared")
    os.makedirs(d, exist_ok=True)
    m = sub_mount(c, "/shared", "sub2")
    sub = m.path
    assert os.listdir(sub) == []  # listed under a lease now
    # full -> directory mount: new names, new data, removals
    with open(os.path.join(d, "a"), "wb") as f:
        f.write(b"one")
    assert os.listdir(sub) == ["a"]
    with open(os.path.join(sub, "a"), "rb") as f:
        assert f.read() == b"one"
    with open(os.path.join(d, "a"), "wb") as f:
        f.write(b"two, longer")
    with open(os.path.join(sub, "a"), "rb") as f:
        assert f.read() == b"two, longer"
    os.chmod(os.path.join(d, "a"), 0o600)
    assert os.stat(os.path.join(sub, "a")).st_mode & 0o777 == 0o600
    # directory mount -> full
    os.listdir(d)
    with open(os.path.join(sub, "b"), "wb") as f:
        f.write(b"from the directory mount")
    os.rename(os.path.join(sub, "a"), os.path.join(sub, "c"))
    assert sorted(os.listdir(d)) == ["b", "c"]
    with open(os.path.join(d, "b"), "rb") as f:
        assert f.read() == b"from the directory mount"
    os.unlink(os.path.join(d, "b"))
    assert os.listdir(sub) == ["c"]
    # the mounted directory itself changes: its attributes are the root's
    os.chmod(d, 0o711)
    assert os.stat(sub).st_mode & 0o777 == 0o711


def test_missing_directory_fails_at_once(sd):
    c = sd
    rc, out = try_mount(c, f"{c.remote}:/{VOL}/no/such/dir", "nodir")
    assert rc != 0
    assert "does not exist" in out and "No such file or directory" in out, out
    with open(os.path.join(c.full, "plainfile"), "wb"):
        pass
    rc, out = try_mount(c, f"{c.remote}:/{VOL}/plainfile", "notdir")
    assert rc != 0 and "is not a directory" in out, out
    rc, out = try_mount(c, f"{c.remote}:/{VOL}/a/../b", "dots")
    assert rc != 0 and "bad directory" in out, out


def test_auth_allow_per_directory(sd):
    c = sd
    me = source_addr()
    os.makedirs(os.path.join(c.full, "open", "deep"), exist_ok=True)
    os.makedirs(os.path.join(c.full, "closed"), exist_ok=True)
    other = "10.99.99.99"
    try:
        # this host may mount /open, nothing else (not its subdirectories, not /)
        set_auth(c, f"/({other}),/open({other}|{me}),/closed({other})")
        m = sub_mount(c, "/open", "auth-open")
        with open(os.path.join(m.path, "x"), "wb") as f:
            f.write(b"x")
        for spec, why in ((f"/{VOL}/closed", "closed"), (f"/{VOL}", "volume"),
                          (f"/{VOL}/open/deep", "deep")):
            rc, out = try_mount(c, f"{c.remote}:{spec}", "auth-" + why)
            assert rc != 0 and "not allowed" in out, (spec, out)
        # a bare entry applies to every mount; auth.reject per directory
        set_auth(c, f"{me},/closed({other})", reject=f"/closed({me})")
        rc, out = try_mount(c, f"{c.remote}:/{VOL}/closed", "auth-rej")
        assert rc != 0 and "not allowed" in out, out
        sub_mount(c, "/open/deep", "auth-deep")
        # the bricks check it themselves, whatever cairnd said: a raw
        # handshake for /closed is refused, with the reason, also in the log
        host, path, port, _ = c.brick_status(VOL)[0]
        cl = Client(host, port)
        try:
            r = cl.call("HANDSHAKE", ("NAME", VOL), ("PATH", path), (SUBDIR_TAG, "/closed"))
            assert r.status == -errno.EACCES, r
            assert "not allowed to mount directory /closed" in r.text(), r
        finally:
            cl.close()
        logdir = os.path.join(c.workdir, "logs", "bricks")
        logs = "".join(open(os.path.join(logdir, f), errors="replace").read()
                       for f in os.listdir(logdir))
        assert "not allowed to mount directory /closed" in logs
        # malformed values are refused at volume set, the value kept
        for bad in ("/open(127.0.0.1", "/a/../b(1.2.3.4)", "/open()", "/open(1.2.3.4,5.6.7.8)",
                    "/open/(1.2.3.4)", "/open(not an address)"):
            r = c.cli("volume", "set", VOL, "auth.allow", bad, check=False)
            assert r.returncode != 0 and "auth.allow" in r.stdout + r.stderr, (bad, r.stdout)
        info = c.cli("volume", "info", VOL).stdout
        assert f"auth.allow: {me},/closed({other})" in info, info
        # a host name inside a directory entry is resolved as a bare one is
        c.cli("volume", "set", VOL, "auth.allow", "/open(localhost|10.1.2.3),*")
        info = c.cli("volume", "info", VOL).stdout
        assert "/open(127.0.0.1|" in info and "localhost" not in info, info
    finally:
        set_auth(c, "*")


def test_auth_change_closes_connections_no_longer_allowed(sd):
    """auth.allow / auth.reject changed on a running volume: each brick
    closes the connections its handshake would now refuse, for the
    directory each was opened for, and keeps the others; the log says why."""
    c = sd
    me = source_addr()
    for d in ("near", "far"):
        os.makedirs(os.path.join(c.full, d), exist_ok=True)
    host, path, port, _ = c.brick_status(VOL)[0]
    clients = {}
    try:
        for d in ("near", "far"):
            cl = Client(host, port)
            r = cl.call("HANDSHAKE", ("NAME", VOL), ("PATH", path), (SUBDIR_TAG, f"/{d}"))
            assert r.status == 0, r
            clients[d] = cl
        set_auth(c, "*", reject=f"/near({me})")

        def closed(cl):
            try:
                cl.call("PING")
                return False
            except (Closed, ConnectionError, TimeoutError):
                return True
        wait_for(lambda: closed(clients["near"]), 10, "the brick to close /near's connection")
        assert clients["far"].call("PING").status == 0  # its directory is still allowed
        logdir = os.path.join(c.workdir, "logs", "bricks")
        logs = "".join(open(os.path.join(logdir, f), errors="replace").read()
                       for f in os.listdir(logdir))
        assert f"address {me} is no longer allowed (auth.allow/auth.reject)" in logs
        # a bare rejection closes the rest; a new handshake is refused
        set_auth(c, "*", reject=me)
        wait_for(lambda: closed(clients["far"]), 10, "the brick to close /far's connection")
        cl = Client(host, port)
        try:
            r = cl.call("HANDSHAKE", ("NAME", VOL), ("PATH", path), (SUBDIR_TAG, "/far"))
            assert r.status == -errno.EACCES, r
        finally:
            cl.close()
    finally:
        for cl in clients.values():
            cl.close()
        set_auth(c, "*")
    # allowed again: the mounts reconnect by themselves, each brick at its
    # next attempt (a backoff of at most 2 s); until then ENOTCONN. Names
    # on both sets of the volume: every brick connection must be back (the
    # next tests use this mount).
    def write_again():
        try:
            for i in range(16):
                with open(os.path.join(c.full, "far", f"again{i}"), "wb") as f:
                    f.write(b"again%d" % i)
            return True
        except OSError as e:
            if e.errno != errno.ENOTCONN:
                raise
            return False
    wait_for(write_again, 30, "the mount to reconnect to every brick once allowed again")
    time.sleep(2.5)  # and both copies of each set: every brick's backoff (2 s) has run out
    for i in range(16):
        with open(os.path.join(c.full, "far", f"again{i}"), "rb") as f:
            assert f.read() == b"again%d" % i


def client_from(src, host, port):
    """A raw protocol client whose connection comes from address src."""
    cl = Client.__new__(Client)
    cl.sock = socket.create_connection((host, port), timeout=10, source_address=(src, 0))
    cl.timeout, cl.reqid = 10.0, 100
    return cl


def test_two_addresses_each_to_its_directory(sd):
    """Two client addresses at once (raw clients can bind one; cairn-fuse
    cannot): each gets its own directory, from cairnd and from a brick."""
    c = sd
    me, other = source_addr(), "127.0.0.95"
    os.makedirs(os.path.join(c.full, "mine"), exist_ok=True)
    os.makedirs(os.path.join(c.full, "theirs"), exist_ok=True)
    host, path, port, _ = c.brick_status(VOL)[0]
    try:
        set_auth(c, f"/({me}),/mine({me}),/theirs({other})")
        for src, d, ok in ((me, "/mine", True), (me, "/theirs", False), (other, "/theirs", True),
                           (other, "/mine", False), (other, "/", False), (me, "/", True)):
            cl = client_from(src, HOST, PORT)
            try:
                r = cl.call("MGMT_GETVOL", ("NAME", VOL), (SUBDIR_TAG, d))
            finally:
                cl.close()
            assert (r.status == 0) == ok, (src, d, r)
            cl = client_from(src, host, port)
            try:
                hs = [("NAME", VOL), ("PATH", path)] + ([(SUBDIR_TAG, d)] if d != "/" else [])
                r = cl.call("HANDSHAKE", *hs)
            finally:
                cl.close()
            assert (r.status == 0) == ok, (src, d, r)
            if not ok:
                assert r.status == -errno.EACCES and f"address {src} is not allowed" in r.text()
    finally:
        set_auth(c, "*")


def raw_confined(c, subdir, brick=0):
    host, path, port, _ = c.brick_status(VOL)[brick]
    cl = Client(host, port)
    r = cl.call("HANDSHAKE", ("NAME", VOL), ("PATH", path), (SUBDIR_TAG, subdir))
    assert r.status == 0, r
    return cl, c.bricks[brick]


def test_bricks_keep_a_connection_in_its_directory(sd):
    c = sd
    os.makedirs(os.path.join(c.full, "jail", "in"), exist_ok=True)
    os.makedirs(os.path.join(c.full, "secret"), exist_ok=True)
    with open(os.path.join(c.full, "secret", "key"), "wb") as f:
        f.write(b"top secret")
    with open(os.path.join(c.full, "jail", "in", "f"), "wb") as f:
        f.write(b"inside")
    fsync_dir(os.path.join(c.full, "jail", "in"))
    cl, brick = raw_confined(c, "/jail")
    try:
        # the directory mount's own paths work, and are the directory's
        r = cl.call("LOOKUP", ("PATH", "/in"))
        assert r.status == 0, r
        r = cl.call("LOOKUP", ("PATH", "/"))
        assert r.status == 0, r
        # ways out: "..", an absolute path of the volume, in a compound too
        for p in ("/..", "/../secret/key", "/in/../../secret/key", "/./x", "//secret"):
            for op in ("LOOKUP", "OPEN", "UNLINK", "GETXATTR"):
                r = cl.call(op, ("PATH", p), ("NAME", "user.x"), ("FLAGS", 0))
                assert r.status == -errno.EINVAL, (op, p, r)
        r = cl.call("LOOKUP", ("PATH", "/secret/key"))
        assert r.status == -errno.ENOENT, r  # /jail/secret/key: not there
        r = cl.call("RENAME", ("PATH", "/in/f"), ("PATH2", "/../stolen"), ("FLAGS", 0))
        assert r.status == -errno.EINVAL, r
        r = cl.call("LINK", ("PATH", "/../secret/key"), ("PATH2", "/in/got"))
        assert r.status == -errno.EINVAL, r
        sub = body(("OP", 10), ("PATH", "/../secret/key"))
        r = cl.call("COMPOUND", ("SUB", body(("OP", 10), ("PATH", "/in"))), ("SUB", sub))
        subs = [v for t, v in r.fields if t == "SUB"]
        assert r.status != 0 or (len(subs) == 2 and struct.unpack("<Q", [
            v for t, v in __import__("test_bad_input").parse_fields(subs[1])
            if t == "ERRNO"][0])[0] == errno.EINVAL), r
        # the root of the mount stays where it is
        for op, pairs in (("RMDIR", [("PATH", "/")]),
                          ("RENAME", [("PATH", "/"), ("PATH2", "/x"), ("FLAGS", 0)]),
                          ("RENAME", [("PATH", "/in"), ("PATH2", "/"), ("FLAGS", 0)])):
            r = cl.call(op, *pairs)
            assert r.status == -errno.EBUSY, (op, r)
        # a symbolic link on the way out is not followed by the brick
        os.symlink("../secret", os.path.join(c.full, "jail", "esc"))
        r = cl.call("LOOKUP", ("PATH", "/esc/key"))
        assert r.status in (-errno.ELOOP, -errno.ENOENT, -errno.ENOTDIR), r
        r = cl.call("OPEN", ("PATH", "/esc"), ("FLAGS", os.O_RDONLY))
        assert r.status != 0, r
        # the connection cannot move to another directory
        r = cl.call("HANDSHAKE", ("NAME", VOL), ("PATH", c.brick_status(VOL)[0][1]),
                    (SUBDIR_TAG, "/secret"))
        assert r.status == -errno.EINVAL, r
        r = cl.call("HANDSHAKE", ("NAME", VOL), ("PATH", c.brick_status(VOL)[0][1]))
        assert r.status == -errno.EINVAL, r
        r = cl.call("LOOKUP", ("PATH", "/key"))
        assert r.status == -errno.ENOENT, r
        # a heal index read from inside shows paths inside only
        r = cl.call(OP_INDEX, ("OFFSET", 0), ("SIZE", 65536))
        assert r.status == 0, r
        for line in (r.get("DATA") or b"").decode().splitlines():
            assert not line.split(" ", 1)[1].startswith("/jail"), line
    finally:
        cl.close()
    # a directory that is not one, or a way out, is refused at the handshake
    host, path, port, _ = c.brick_status(VOL)[0]
    for d, err in (("/jail/../secret", errno.EINVAL), ("/.cairn", errno.ENOENT),
                   ("/jail/esc", errno.ENOTDIR), ("/nope", errno.ENOENT)):
        cl = Client(host, port)
        try:
            r = cl.call("HANDSHAKE", ("NAME", VOL), ("PATH", path), (SUBDIR_TAG, d))
            assert r.status == -err, (d, r)
            r = cl.call("LOOKUP", ("PATH", "/"))
            assert r.status == -errno.EACCES, r  # no handshake: nothing served
        finally:
            cl.close()
    with open(os.path.join(c.full, "secret", "key"), "rb") as f:
        assert f.read() == b"top secret"
    assert not os.path.lexists(os.path.join(c.full, "stolen"))


def test_heal_after_a_brick_missed_directory_mount_writes(sd):
    c = sd
    os.makedirs(os.path.join(c.full, "healme"), exist_ok=True)
    m = sub_mount(c, "/healme", "sub-heal")
    pid = c.brick_status(VOL)[1][3]
    c.stop_signal(pid)
    blobs = {f"h{i}": os.urandom(10000 + i) for i in range(20)}
    for name, blob in blobs.items():
        with open(os.path.join(m.path, name), "wb") as f:
            f.write(blob)
    os.mkdir(os.path.join(m.path, "dir"))
    c.cont(pid)

    def healed():
        c.cli("volume", "heal", VOL, check=False)
        return all(copies(c, f"/healme/{n}") == [b, b] for n, b in blobs.items()) and \
            all(os.path.isdir(os.path.join(b, "healme", "dir")) for b in c.bricks)
    wait_for(healed, 60, "the stopped brick to be healed")
    for name, blob in blobs.items():
        with open(os.path.join(m.path, name), "rb") as f:
            assert f.read() == blob


def test_mounted_directory_removed_and_made_again(sd):
    c = sd
    d = os.path.join(c.full, "gone")
    os.makedirs(d)
    m = sub_mount(c, "/gone", "sub-gone")
    with open(os.path.join(m.path, "f"), "wb") as f:
        f.write(b"x")
    os.unlink(os.path.join(d, "f"))
    os.rmdir(d)
    with pytest.raises(OSError) as e:
        os.listdir(m.path)
    assert e.value.errno == errno.ENOENT, e.value
    with pytest.raises(OSError) as e:
        open(os.path.join(m.path, "g"), "wb").close()
    assert e.value.errno == errno.ENOENT, e.value
    assert not os.path.lexists(d)  # nothing made in its place
    os.mkdir(d)
    wait_for(lambda: os.listdir(m.path) == [], 10, "the new directory to be served")
    with open(os.path.join(m.path, "g"), "wb") as f:
        f.write(b"again")
    with open(os.path.join(d, "g"), "rb") as f:
        assert f.read() == b"again"


def test_libcairn_opens_a_directory(sd):
    from test_libcairn import Shell
    c = sd
    os.makedirs(os.path.join(c.full, "lib", "d"), exist_ok=True)
    sh = Shell(f"{c.remote}:/{VOL}/lib")
    try:
        sh.ok("write /d/f from the library")
        assert sh.ok("ls /") == "d"
        assert sh.call("stat /lib") == "err ENOENT"
    finally:
        sh.close()
    with open(os.path.join(c.full, "lib", "d", "f"), "rb") as f:
        assert f.read() == b"from the library"
    r = subprocess.run([exe("cairn-shell"), f"{c.remote}:/{VOL}/nolib"], input="quit\n",
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "does not exist" in r.stdout + r.stderr, r
