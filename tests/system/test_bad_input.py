"""Bad input at the protocol level: malformed frames and hostile paths sent
to a brick (cairn-brickd) and to cairnd by a raw Python client speaking
docs/protocol.md independently of the C code. After each: the server process
is still the same live process, the brick directory is unchanged and a mount
still works."""

import socket
import struct
import time

MAGIC = 0x4E524143
VERSION = 1
HDR = struct.Struct("<IHBBHHQIIi")  # 32 bytes
assert HDR.size == 32

KIND_REQUEST, KIND_REPLY, KIND_NOTIFY = 1, 2, 3

OP = dict(HANDSHAKE=1, PING=2, COMPOUND=3, LOOKUP=10, GETATTR=11, SETATTR=12, MKNOD=13,
          MKDIR=14, SYMLINK=15, LINK=16, UNLINK=17, RMDIR=18, RENAME=19, READLINK=20, OPEN=30,
          CREATE=31, READ=32, WRITE=33, FLUSH=34, RELEASE=35, FSYNC=36, FALLOCATE=37, LSEEK=38,
          OPENDIR=40, READDIR=41, RELEASEDIR=42, STATFS=43, SETXATTR=50, GETXATTR=51,
          LISTXATTR=52, REMOVEXATTR=53, GETLK=60, SETLK=61, FLOCK=62, MGMT_CLI=100,
          MGMT_GETVOL=101, MGMT_RECONF=102)
T = dict(OP=1, PATH=2, PATH2=3, NAME=4, GFID=5, FH=6, MODE=7, UID=8, GID=9, UMASK=10, FLAGS=11,
         RDEV=12, OFFSET=13, SIZE=14, DATA=15, ATTR=16, VALID=17, ATIME=18, MTIME=19, LOCK=20,
         OWNER=21, DIRENT=22, STATFS=23, ARG=24, TEXT=25, STATUS=26, SUB=27, ERRNO=28,
         GROUP=29, PID=30, FEATURES=31, BRICK=32, HOST=33, PORT=34, OPTION=35, EOF=36,
         WHENCE=37, ID=38)
TAGNAME = {v: k for k, v in T.items()}
INT_TAGS = {T[k] for k in ("OP", "FH", "MODE", "UID", "GID", "UMASK", "FLAGS", "RDEV", "OFFSET",
                           "SIZE", "VALID", "OWNER", "STATUS", "ERRNO", "GROUP", "PID",
                           "FEATURES", "PORT", "EOF", "WHENCE")}


def _crc_table():
    tab = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        tab.append(c)
    return tab


_TAB = _crc_table()


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = (crc >> 8) ^ _TAB[(crc ^ b) & 0xFF]
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283  # the standard check value


def field(tag, value):
    """One TLV field; value is bytes, str (UTF-8) or int (u64)."""
    if isinstance(tag, str):
        tag = T[tag]
    if isinstance(value, int):
        value = struct.pack("<Q", value)
    elif isinstance(value, str):
        value = value.encode("utf-8", "surrogateescape")
    return struct.pack("<HI", tag, len(value)) + value


def body(*pairs):
    return b"".join(field(t, v) for t, v in pairs)


def header(opcode, body_bytes, reqid=1, kind=KIND_REQUEST, magic=MAGIC, version=VERSION, flags=0,
           reserved=0, body_len=None, crc=None, status=0):
    return HDR.pack(magic, version, kind, flags, opcode, reserved, reqid,
                    len(body_bytes) if body_len is None else body_len,
                    crc32c(body_bytes) if crc is None else crc, status)


def frame(opcode, body_bytes=b"", **kw):
    return header(opcode, body_bytes, **kw) + body_bytes


def parse_fields(b):
    """[(tagname, raw bytes)]; raises ValueError on truncation."""
    out, pos = [], 0
    while pos < len(b):
        if pos + 6 > len(b):
            raise ValueError("truncated field header")
        tag, ln = struct.unpack_from("<HI", b, pos)
        pos += 6
        if pos + ln > len(b):
            raise ValueError("truncated field value")
        out.append((TAGNAME.get(tag, tag), b[pos:pos + ln]))
        pos += ln
    return out


class Reply:
    def __init__(self, hdr, raw):
        (self.magic, self.version, self.kind, self.flags, self.opcode, self.reserved, self.reqid,
         self.body_len, self.crc, self.status) = hdr
        self.raw = raw
        self.fields = parse_fields(raw)

    def get(self, name):
        for t, v in self.fields:
            if t == name:
                return v
        return None

    def has(self, name):
        return self.get(name) is not None

    def text(self):
        t = self.get("TEXT")
        return t.decode(errors="replace") if t is not None else ""

    def __repr__(self):
        return f"Reply(op={self.opcode} status={self.status} fields={[t for t, _ in self.fields]} {self.text()!r})"


class Closed(Exception):
    pass


class Client:
    def __init__(self, host, port, timeout=10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.timeout = timeout
        self.reqid = 100

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, data):
        self.sock.sendall(data)

    def _recv_exact(self, n, deadline):
        buf = b""
        while len(buf) < n:
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError("no reply")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(n - len(buf))
            except socket.timeout:
                raise TimeoutError("no reply")
            except (ConnectionResetError, BrokenPipeError):
                raise Closed()
            if not chunk:
                raise Closed()
            buf += chunk
        return buf

    def recv_reply(self, timeout=None):
        """The next reply frame (notifications are skipped)."""
        deadline = time.time() + (timeout or self.timeout)
        while True:
            h = HDR.unpack(self._recv_exact(32, deadline))
            raw = self._recv_exact(h[7], deadline) if h[7] else b""
            if h[0] != MAGIC:
                raise AssertionError(f"reply with bad magic {h[0]:#x}")
            if crc32c(raw) != h[8]:
                raise AssertionError("reply with bad CRC")
            if h[2] == KIND_NOTIFY:
                continue
            return Reply(h, raw)

    def call(self, op, *pairs, timeout=None):
        if isinstance(op, str):
            op = OP[op]
        self.reqid += 1
        b = body(*pairs)
        self.send(frame(op, b, reqid=self.reqid))
        r = self.recv_reply(timeout)
        assert r.reqid == self.reqid, f"reply for reqid {r.reqid}, expected {self.reqid}"
        assert r.kind == KIND_REPLY
        return r

    def closed_by_peer(self, timeout=5.0):
        """True once the peer closes the connection within timeout; False if it
        stays open (any data received is discarded)."""
        deadline = time.time() + timeout
        while True:
            left = deadline - time.time()
            if left <= 0:
                return False
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return False
            except (ConnectionResetError, BrokenPipeError):
                return True
            if not chunk:
                return True


# ---------------------------------------------------------------------------
# the tests

import errno  # noqa: E402
import hashlib  # noqa: E402
import os  # noqa: E402
import stat  # noqa: E402

import pytest  # noqa: E402

from cairn_cluster import alive  # noqa: E402


def snapshot(root):
    """{relative path: (type, mode, uid, gid, size, sha256 or link target)} of a
    tree, without following symlinks and without the brick's private .cairn."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if rel == ".":
            dirnames[:] = [d for d in dirnames if d != ".cairn"]
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    h = hashlib.sha256(f.read()).hexdigest()
            elif stat.S_ISLNK(st.st_mode):
                h = os.readlink(p)
            else:
                h = ""
            out[os.path.relpath(p, root)] = (stat.S_IFMT(st.st_mode), st.st_mode, st.st_uid,
                                             st.st_gid, st.st_size if not stat.S_ISDIR(st.st_mode)
                                             else 0, h)
    return out


def stable_snapshot(root):
    prev = snapshot(root)
    for _ in range(20):
        time.sleep(0.2)
        cur = snapshot(root)
        if cur == prev:
            return cur
        prev = cur
    return prev


class Target:
    """The brick under attack and the checks that it survived."""

    def __init__(self, vol, tdir):
        self.vol, self.tdir = vol, tdir
        (self.host, self.path, self.port, self.pid), = vol.cluster.brick_status(vol.name)
        assert self.port and self.pid, "brick is not online"
        self.probe = os.path.join(tdir.a, "probe")
        with open(self.probe, "wb") as f:
            f.write(b"probe data")
            f.flush()
            os.fsync(f.fileno())
        self.rel = "/" + tdir.name  # the test directory, volume-relative
        self.before = stable_snapshot(vol.brick)

    def client(self, handshake=True):
        c = Client(self.host, self.port)
        if handshake:
            r = c.call("HANDSHAKE", ("NAME", self.vol.name), ("PATH", self.path),
                       ("FEATURES", 0))
            assert r.status == 0, r
        return c

    def check_healthy(self):
        # the same brick process, not a restarted one
        assert alive(self.pid), f"brick process {self.pid} died"
        (_, _, port, pid), = self.vol.cluster.brick_status(self.vol.name)
        assert (port, pid) == (self.port, self.pid), "brick was restarted"
        # it still serves a well-formed client
        c = self.client()
        try:
            assert c.call("PING").status == 0
            r = c.call("LOOKUP", ("PATH", self.rel + "/probe"))
            assert r.status == 0 and r.has("ATTR"), r
        finally:
            c.close()
        # the brick's content is unchanged
        assert stable_snapshot(self.vol.brick) == self.before
        # and the mounts still work
        with open(os.path.join(self.tdir.b, "probe"), "rb") as f:
            assert f.read() == b"probe data"
        assert "probe" in os.listdir(self.tdir.a)


@pytest.fixture
def brick(vol, tdir):
    t = Target(vol, tdir)
    yield t
    t.check_healthy()


def good_ping():
    return frame(OP["PING"], b"")


MALFORMED = {
    "garbage": lambda: os.urandom(4096),
    "bad_magic": lambda: frame(OP["PING"], b"", magic=0xDEADBEEF),
    "bad_version": lambda: frame(OP["PING"], b"", version=2),
    "bad_kind": lambda: frame(OP["PING"], b"", kind=9),
    "nonzero_flags": lambda: frame(OP["PING"], b"", flags=0x80),
    "nonzero_reserved": lambda: frame(OP["PING"], b"", reserved=7),
    "oversized_body_len": lambda: header(OP["PING"], b"", body_len=1 << 30),
    "body_len_over_8MiB": lambda: header(OP["PING"], b"", body_len=(8 << 20) + 1),
    "bad_crc": lambda: header(OP["LOOKUP"], body(("PATH", "/")), crc=0x12345678) +
    body(("PATH", "/")),
    "unknown_tag": lambda: frame(OP["LOOKUP"], body(("PATH", "/")) + field(64, b"x")),
    "truncated_tlv": lambda: frame(OP["LOOKUP"], field("PATH", "/")[:-1] + b""),
    "tlv_len_past_body": lambda: frame(OP["LOOKUP"], struct.pack("<HI", T["PATH"], 1000) + b"/"),
    "wrong_len_fixed_field": lambda: frame(OP["LOOKUP"], body(("PATH", "/"), ("GFID", b"12345"))),
    "bad_int_len": lambda: frame(OP["LOOKUP"], body(("PATH", "/")) + field("FH", b"123")),
    "duplicate_singleton": lambda: frame(OP["LOOKUP"], body(("PATH", "/"), ("PATH", "/"))),
    "nul_in_path": lambda: frame(OP["LOOKUP"], body(("PATH", "/x\x00y"))),
}


@pytest.mark.parametrize("what", sorted(MALFORMED))
def test_brick_closes_on_malformed_frame(brick, what):
    c = brick.client(handshake=what in ("nul_in_path", "unknown_tag", "truncated_tlv",
                                        "tlv_len_past_body", "wrong_len_fixed_field",
                                        "bad_int_len", "duplicate_singleton", "bad_crc"))
    try:
        c.send(MALFORMED[what]())
        assert c.closed_by_peer(timeout=5), f"brick kept the connection open after {what}"
    finally:
        c.close()


@pytest.mark.parametrize("what", ["garbage", "bad_magic", "oversized_body_len", "bad_crc",
                                  "nul_in_path", "unknown_tag"])
def test_brick_malformed_before_handshake(brick, what):
    c = brick.client(handshake=False)
    try:
        c.send(MALFORMED[what]())
        assert c.closed_by_peer(timeout=5)
    finally:
        c.close()


def test_brick_truncated_frame_then_close(brick):
    c = brick.client()
    c.send(frame(OP["LOOKUP"], body(("PATH", brick.rel + "/probe")))[:20])
    c.close()
    c = brick.client()
    c.send(frame(OP["LOOKUP"], body(("PATH", brick.rel + "/probe")))[:40])
    c.close()


def test_brick_bad_crc_not_executed(brick):
    victim = os.path.join(brick.tdir.a, "victim")
    with open(victim, "wb") as f:
        f.write(b"must survive")
    brick.before = stable_snapshot(brick.vol.brick)
    c = brick.client()
    try:
        b = body(("PATH", brick.rel + "/victim"), ("UID", 0), ("GID", 0))
        c.send(header(OP["UNLINK"], b, crc=crc32c(b) ^ 1, reqid=77) + b)
        assert c.closed_by_peer(timeout=5)
    finally:
        c.close()
    assert os.path.exists(os.path.join(brick.tdir.brick, "victim"))
    with open(os.path.join(brick.tdir.b, "victim"), "rb") as f:
        assert f.read() == b"must survive"


def test_brick_unknown_opcode_enosys(brick):
    c = brick.client()
    try:
        for op in (99, 4000, 65535):
            c.reqid += 1
            c.send(frame(op, b"", reqid=c.reqid))
            r = c.recv_reply()
            assert r.reqid == c.reqid
            assert r.status == -errno.ENOSYS, r
        # the connection is still good
        assert c.call("PING").status == 0
    finally:
        c.close()


def test_brick_pipelined_garbage_after_good_requests(brick):
    c = brick.client()
    try:
        c.send(frame(OP["PING"], b"", reqid=5) + frame(OP["PING"], b"", reqid=6) +
               b"\xff" * 64)
        got = set()
        try:
            while len(got) < 2:
                got.add(c.recv_reply(timeout=5).reqid)
        except Closed:
            pass
        assert c.closed_by_peer(timeout=5)
    finally:
        c.close()


HOSTILE_PATHS = [
    "/../../etc/passwd",
    "/a/../..",
    "/..",
    "/./probe",
    "//etc/passwd",
    "etc/passwd",
    "",
    "/.cairn",
    "/.cairn/",
    "/.cairn/anything",
    "/" + "x" * 256,
    "/{rel}/../../../etc/passwd",
    "/{rel}/./probe",
    "/{rel}//probe",
    "/{rel}/probe/../probe",
]


@pytest.mark.parametrize("path", HOSTILE_PATHS)
def test_brick_hostile_lookup_refused(brick, path):
    path = path.format(rel=brick.rel.lstrip("/"))
    c = brick.client()
    try:
        try:
            r = c.call("LOOKUP", ("PATH", path))
        except Closed:
            return  # refusing the whole connection is an acceptable answer
        assert r.status < 0, f"LOOKUP {path!r} succeeded: {r}"
        assert not r.has("ATTR")
        assert c.call("PING").status == 0
    finally:
        c.close()


@pytest.mark.parametrize("path", ["/../../etc/passwd", "/.cairn/anything",
                                  "/{rel}/../../../etc/passwd"])
def test_brick_hostile_open_refused(brick, path):
    path = path.format(rel=brick.rel.lstrip("/"))
    c = brick.client()
    try:
        r = c.call("OPEN", ("PATH", path), ("FLAGS", os.O_RDONLY))
        assert r.status < 0, r
        assert not r.has("FH")
    finally:
        c.close()


def test_brick_hostile_create_refused(brick):
    c = brick.client()
    try:
        for path in ("/../escaped-by-cairn-test", "/.cairn/planted"):
            r = c.call("CREATE", ("PATH", path), ("MODE", 0o100644), ("UMASK", 0),
                       ("FLAGS", os.O_WRONLY | os.O_CREAT), ("GFID", os.urandom(16)),
                       ("UID", 0), ("GID", 0))
            assert r.status < 0, (path, r)
    finally:
        c.close()
    assert not os.path.exists(os.path.join(os.path.dirname(brick.vol.brick),
                                           "escaped-by-cairn-test"))


def test_brick_nul_in_path_closes(brick):
    c = brick.client()
    try:
        c.send(frame(OP["LOOKUP"], body(("PATH", "/x\x00y"))))
        assert c.closed_by_peer(timeout=5)
    finally:
        c.close()


def on_brick(d):
    """What the mount made in d is on the brick when this returns (a new
    symlink may be written back)."""
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def test_brick_symlink_to_root_not_followed(brick):
    # planted through the mount: a real object with an id, pointing at /
    os.symlink("/", os.path.join(brick.tdir.a, "planted"))
    on_brick(brick.tdir.a)
    # and planted behind Cairn's back, directly in the brick
    os.symlink("/etc", os.path.join(brick.tdir.brick, "planted2"))
    assert os.readlink(os.path.join(brick.tdir.brick, "planted")) == "/"
    brick.before = stable_snapshot(brick.vol.brick)
    c = brick.client()
    try:
        for path, op, extra in (
                (brick.rel + "/planted/etc/passwd", "LOOKUP", ()),
                (brick.rel + "/planted/etc", "LOOKUP", ()),
                (brick.rel + "/planted2/passwd", "LOOKUP", ()),
                (brick.rel + "/planted/etc/passwd", "OPEN", (("FLAGS", os.O_RDONLY),)),
                (brick.rel + "/planted2/passwd", "OPEN", (("FLAGS", os.O_RDONLY),)),
                (brick.rel + "/planted/etc", "OPENDIR", ()),
                (brick.rel + "/planted/etc/passwd", "GETXATTR", (("NAME", "user.x"),
                                                                  ("SIZE", 0))),
                (brick.rel + "/planted/tmp", "STATFS", ()),
        ):
            r = c.call(op, ("PATH", path), *extra)
            assert r.status < 0, f"{op} {path} succeeded: {r}"
            assert r.status in (-errno.ELOOP, -errno.ENOTDIR, -errno.EXDEV, -errno.ENOENT,
                                -errno.EPERM, -errno.EACCES, -errno.EINVAL), r
            assert not r.has("ATTR") and not r.has("FH") and not r.has("DATA")
        # the symlink itself is an ordinary object
        r = c.call("READLINK", ("PATH", brick.rel + "/planted"))
        assert r.status == 0 and r.get("DATA") == b"/", r
    finally:
        c.close()
    # through the mount it is a symlink, resolved by the client's kernel
    p = os.path.join(brick.tdir.b, "planted")
    assert stat.S_ISLNK(os.lstat(p).st_mode)
    assert os.readlink(p) == "/"


def test_brick_symlink_escape_as_second_path(brick):
    os.symlink("/tmp", os.path.join(brick.tdir.a, "totmp"))
    on_brick(brick.tdir.a)
    name = "cairn-systest-escape-%d" % os.getpid()
    brick.before = stable_snapshot(brick.vol.brick)
    c = brick.client()
    try:
        r = c.call("LINK", ("PATH", brick.rel + "/probe"), ("PATH2", brick.rel + "/totmp/" + name))
        assert r.status < 0, r
        r = c.call("RENAME", ("PATH", brick.rel + "/probe"),
                   ("PATH2", brick.rel + "/totmp/" + name), ("FLAGS", 0))
        assert r.status < 0, r
        r = c.call("SYMLINK", ("PATH", brick.rel + "/totmp/" + name), ("NAME", "x"),
                   ("GFID", os.urandom(16)), ("UID", 0), ("GID", 0))
        assert r.status < 0, r
        r = c.call("MKDIR", ("PATH", brick.rel + "/totmp/" + name), ("MODE", 0o755),
                   ("UMASK", 0), ("GFID", os.urandom(16)), ("UID", 0), ("GID", 0))
        assert r.status < 0, r
    finally:
        c.close()
    assert not os.path.lexists("/tmp/" + name)


def test_brick_handshake_wrong_volume(brick):
    c = brick.client(handshake=False)
    try:
        try:
            r = c.call("HANDSHAKE", ("NAME", "not-" + brick.vol.name), ("PATH", brick.path),
                       ("FEATURES", 0))
        except Closed:
            return
        assert r.status < 0, r
    finally:
        c.close()


def test_brick_many_idle_connections(brick):
    conns = [Client(brick.host, brick.port) for _ in range(200)]
    try:
        for c in conns[::20]:
            c.send(b"\0" * 10)
    finally:
        for c in conns:
            c.close()


def test_brick_huge_readdir_and_read_sizes(brick):
    c = brick.client()
    try:
        r = c.call("OPEN", ("PATH", brick.rel + "/probe"), ("FLAGS", os.O_RDONLY))
        assert r.status == 0, r
        fh = struct.unpack("<Q", r.get("FH").ljust(8, b"\0"))[0]
        r = c.call("READ", ("FH", fh), ("OFFSET", 0), ("SIZE", (1 << 64) - 1))
        assert r.status < 0 or r.get("DATA") == b"probe data", r
        r = c.call("READ", ("FH", fh), ("OFFSET", (1 << 63) + 5), ("SIZE", 10))
        assert r.status < 0 or r.get("DATA") in (None, b""), r
        r = c.call("READ", ("FH", 0xDEADBEEF), ("OFFSET", 0), ("SIZE", 10))
        assert r.status == -errno.EBADF or r.status < 0, r
        c.call("RELEASE", ("FH", fh))
        r = c.call("READ", ("FH", fh), ("OFFSET", 0), ("SIZE", 10))
        assert r.status < 0, "read through a released handle succeeded"
    finally:
        c.close()


# ---- cairnd's management port ----

@pytest.fixture
def mgmt(vol):
    c = vol.cluster
    pid = c.proc.pid
    yield c
    assert alive(pid) and c.proc.poll() is None, "cairnd died"
    r = c.cli("volume", "info", vol.name, check=False)
    assert r.returncode == 0 and vol.name in r.stdout, r


@pytest.mark.parametrize("what", ["garbage", "bad_magic", "bad_version", "oversized_body_len",
                                  "bad_crc", "unknown_tag", "nul_in_path", "duplicate_singleton",
                                  "truncated_tlv"])
def test_cairnd_closes_on_malformed_frame(mgmt, what):
    cl = Client(mgmt.host, mgmt.port)
    try:
        cl.send(MALFORMED[what]())
        assert cl.closed_by_peer(timeout=5), f"cairnd kept the connection open after {what}"
    finally:
        cl.close()


def test_cairnd_truncated_frame_then_close(mgmt):
    cl = Client(mgmt.host, mgmt.port)
    cl.send(frame(OP["MGMT_CLI"], body(("ARG", "volume"), ("ARG", "info")))[:30])
    cl.close()


def test_cairnd_unknown_opcode_enosys(mgmt):
    cl = Client(mgmt.host, mgmt.port)
    try:
        for op in (OP["LOOKUP"], 999):
            cl.reqid += 1
            cl.send(frame(op, body(("PATH", "/")), reqid=cl.reqid))
            try:
                r = cl.recv_reply()
            except Closed:
                pytest.fail(f"cairnd closed the connection on opcode {op} instead of -ENOSYS")
            assert r.status in (-errno.ENOSYS, -errno.EOPNOTSUPP, -errno.EPROTO), r
    finally:
        cl.close()


def test_cairnd_cli_odd_arguments(mgmt, vol):
    cl = Client(mgmt.host, mgmt.port)
    try:
        for args in ([], ["volume"], ["volume", "info", "x" * 5000], ["volume"] * 1000,
                     ["volume", "create", "../../etc", "127.0.0.10:/tmp/../etc", "force"],
                     ["volume", "set", vol.name, "network.ping-timeout", "-1"],
                     ["volume", "set", vol.name, "no.such.option", "1"],
                     ["\xff\xfe"]):
            r = cl.call("MGMT_CLI", *[("ARG", a) for a in args])
            assert r.status == 0  # a CLI error is a STATUS field, not a transport error
            st = r.get("STATUS")
            assert st is not None and int.from_bytes(st, "little") != 0, (args, r)
    finally:
        cl.close()
    assert not os.path.exists("/etc/.cairn")


@pytest.mark.parametrize("name", ["", "../../etc", "no-such-volume", "x" * 4000])
def test_cairnd_getvol_bad_name(mgmt, name):
    cl = Client(mgmt.host, mgmt.port)
    try:
        r = cl.call("MGMT_GETVOL", ("NAME", name))
        assert r.status < 0, r
        assert not r.has("BRICK")
    finally:
        cl.close()


def test_cairnd_getvol_good(mgmt, vol):
    cl = Client(mgmt.host, mgmt.port)
    try:
        r = cl.call("MGMT_GETVOL", ("NAME", vol.name))
        assert r.status == 0 and r.get("NAME") == vol.name.encode(), r
        bricks = [parse_fields(v) for t, v in r.fields if t == "BRICK"]
        assert len(bricks) == 1
        b = dict(bricks[0])
        assert b["PATH"] == vol.brick.encode()
    finally:
        cl.close()


def test_cairnd_many_connections_then_cli(mgmt):
    conns = []
    try:
        for i in range(100):
            cl = Client(mgmt.host, mgmt.port)
            cl.send(b"CARN"[: i % 5])
            conns.append(cl)
        r = mgmt.cli("volume", "list", check=False, timeout=20)
        assert r.returncode == 0, r
    finally:
        for cl in conns:
            cl.close()
