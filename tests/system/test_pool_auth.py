"""System test of the pool's authentication (docs/security.md, "The pool
secret"): a pool of two cairnd on 127.0.0.121-122, and a forged one that
is not a member: a cairnd of its own on 127.0.0.123 (a fresh state
directory) and raw clients speaking Cairn's RPC and libraft's TCP protocol
from its address. Every attempt to change the pool's volume is refused,
the volume stays as it was on every member, the members log why and go
on serving.

Last, the upgrade path of a pool formed before secrets: without the files
it runs as before (unauthenticated, with a warning), and the documented
procedure (the same new file on every server, restart) authenticates it.

Run: /usr/bin/python3 -m pytest tests/system/test_pool_auth.py
Binaries: $CAIRN_BUILD (default <repo>/build).
"""

import os
import socket
import stat
import struct
import time

import pytest

from cairn_cluster import Cluster, kill_pid
from wire import crc32c, fields, tlv

HOSTS = ["127.0.0.121", "127.0.0.122"]
FORGED = "127.0.0.123"
MGMT_PORT = 24810
RAFT_PORT = MGMT_PORT + 1000

OP_MGMT_CLI, OP_POOL_HELLO, OP_POOL_PROVE = 100, 104, 105
T_DATA, T_ARG, T_TEXT, T_STATUS = 15, 24, 25, 26


def out(r):
    return r.stdout + r.stderr


class Forged:
    """A raw client of a member's cairnd, from the forged server's address."""

    def __init__(self, host):
        self.s = socket.create_connection((host, MGMT_PORT), timeout=10,
                                          source_address=(FORGED, 0))
        self.reqid = 0

    def close(self):
        self.s.close()

    def call(self, op, body):
        self.reqid += 1
        hdr = struct.pack("<IHBBHHQIIi", 0x4E524143, 1, 1, 0, op, 0, self.reqid, len(body),
                          crc32c(body), 0)
        self.s.sendall(hdr + body)
        buf = b""
        while True:
            if len(buf) >= 32:
                _, _, kind, _, _, _, reqid, blen, _, status = struct.unpack_from(
                    "<IHBBHHQIIi", buf)
                if len(buf) >= 32 + blen:
                    body, buf = buf[32:32 + blen], buf[32 + blen:]
                    if kind == 2 and reqid == self.reqid:
                        return status, fields(body)
                    continue
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("cairnd closed the connection")
            buf += chunk

    def cli(self, *argv):
        status, f = self.call(OP_MGMT_CLI, b"".join(tlv(T_ARG, a) for a in argv))
        assert status == 0
        return struct.unpack("<Q", f[T_STATUS])[0], f.get(T_TEXT, b"").decode()


def closed_by_peer(s, timeout=8.0):
    end = time.time() + timeout
    while time.time() < end:
        s.settimeout(end - time.time())
        try:
            if not s.recv(65536):
                return True
        except socket.timeout:
            return False
        except (ConnectionResetError, BrokenPipeError):
            return True
    return False


def log_of(n):
    with open(n.logfile, errors="replace") as f:
        return f.read()


def wait_log(n, text, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        if text in log_of(n):
            return True
        time.sleep(0.1)
    return False


@pytest.fixture(scope="module")
def pool():
    nodes = [Cluster(host=h, prefix="st-pauth-") for h in HOSTS]
    forged = Cluster(host=FORGED, prefix="st-pauth-forged-")
    try:
        for n in nodes + [forged]:
            n.start()
        r = nodes[0].cli("peer", "probe", nodes[1].host, check=False)
        assert r.returncode == 0 and "peer probe: success" in r.stdout, out(r)
        bricks = []
        for i, n in enumerate(nodes):
            p = os.path.join(n.root, "b")
            bricks.append(f"{n.host}:{p}")
        r = nodes[1].cli("volume", "create", "pa", *bricks, "force", check=False)
        assert r.returncode == 0, out(r)
        yield nodes, forged
    finally:
        for n in [forged] + nodes:
            n.close()


def info_everywhere(nodes, timeout=5):
    """volume info on every server, once all agree: a change committed
    through one server reaches the others as they apply the pool's log
    (as test_pool.py's same_everywhere waits for)."""
    end = time.time() + timeout
    while True:
        texts = [n.cli("volume", "info", "pa").stdout for n in nodes]
        if texts[0] == texts[1] or time.time() > end:
            assert texts[0] == texts[1]
            return texts[0]
        time.sleep(0.2)


def test_secret_kept_apart(pool):
    nodes, forged = pool
    secrets = []
    for n in nodes:
        path = os.path.join(n.workdir, "raft", "secret")
        st = os.stat(path)
        assert stat.S_IMODE(st.st_mode) == 0o600
        secrets.append(open(path).read().strip())
    assert secrets[0] == secrets[1] and len(secrets[0]) == 64
    assert not os.path.exists(os.path.join(forged.workdir, "raft"))
    # never in the volume files nor the logs
    for n in nodes:
        for d, _, files in os.walk(n.workdir):
            for f in files:
                if f == "secret" or "raft" in d.split(os.sep):
                    continue
                with open(os.path.join(d, f), "rb") as fh:
                    assert secrets[0].encode() not in fh.read(), os.path.join(d, f)
        assert secrets[0] not in log_of(n)


def test_forged_internal_commands_refused(pool):
    nodes, forged = pool
    before = info_everywhere(nodes)
    assert f"auth.allow: {FORGED}" not in before
    for n in nodes:
        c = Forged(n.host)
        try:
            # a forwarded change, as the leader takes them from members:
            # the volume would be open to the forged server alone
            st, text = c.cli("__fwd", "volume", "set", "pa", "auth.allow", FORGED)
            assert st == 1 and "not a server of this pool" in text, text
            # a handshake with a made-up proof
            hello = b"CRNA\x01\x00\x00\x00" + os.urandom(32)
            status, f = c.call(OP_POOL_HELLO, tlv(T_DATA, hello))
            assert status == 0 and len(f[T_DATA]) == 64
            status, _ = c.call(OP_POOL_PROVE, tlv(T_DATA, os.urandom(32)))
            assert status == -13  # EACCES
            st, text = c.cli("__fwd", "volume", "set", "pa", "auth.allow", FORGED)
            assert st == 1 and "not a server of this pool" in text, text
            # a second guess for the same hello is not even checked: one
            # proof per answer
            status, _ = c.call(OP_POOL_PROVE, tlv(T_DATA, os.urandom(32)))
            assert status == -13
            # the member's other internal commands, and a probe's __join
            st, text = c.cli("__leave", "x")
            assert st == 1 and "not a server of this pool" in text
            st, text = c.cli("__join", f"{FORGED}:{RAFT_PORT}", "00" * 32)
            assert st == 1 and "already part of a pool" in text, text
        finally:
            c.close()
        assert wait_log(n, f"refusing __fwd from {FORGED}: it did not prove it knows the pool "
                           "secret")
        assert wait_log(n, f"refusing the pool handshake of {FORGED}: it does not know the "
                           "pool secret")
    # the forged cairnd, asked to take a member in, is refused too
    r = forged.cli("peer", "probe", nodes[0].host, check=False)
    assert r.returncode == 1 and "already part of another cluster" in out(r), out(r)
    assert info_everywhere(nodes) == before


def raft_preamble(raft_id, address):
    a = address.encode() + b"\0"
    a += b"\0" * (-len(a) % 8)
    return struct.pack("<QQQ", 1, raft_id, len(a)) + a


def request_vote(term, candidate):
    # RAFT_IO_REQUEST_VOTE (3): term, candidate, last index and term, flags
    # (1: disrupt the leader)
    body = struct.pack("<QQQQQ", term, candidate, 1 << 40, term, 1)
    return struct.pack("<QQ", 3, len(body)) + body


def test_forged_raft_peer_refused(pool):
    nodes, forged = pool
    before = info_everywhere(nodes)
    marks = {n.host: len(log_of(n)) for n in nodes}
    for n in nodes:
        # libraft's own handshake and a vote request of a much later term:
        # taken, it would make a leader step down
        s = socket.create_connection((n.host, RAFT_PORT), timeout=10,
                                     source_address=(FORGED, 0))
        s.sendall(raft_preamble(0x666, f"{FORGED}:{RAFT_PORT}") + request_vote(1 << 30, 0x666))
        assert closed_by_peer(s), "the raft port kept a connection without the pool handshake"
        s.close()
        # one that speaks the pool handshake but does not know the secret
        s = socket.create_connection((n.host, RAFT_PORT), timeout=10,
                                     source_address=(FORGED, 0))
        s.sendall(raft_preamble(0x667, f"{FORGED}:{RAFT_PORT}") +
                  b"CRNA\x01\x00\x00\x00" + os.urandom(32))
        s.settimeout(10)
        answer = b""
        while len(answer) < 64:
            chunk = s.recv(64 - len(answer))
            assert chunk
            answer += chunk
        s.sendall(os.urandom(32) + request_vote(1 << 30, 0x667))
        assert closed_by_peer(s)
        s.close()
        # and garbage
        s = socket.create_connection((n.host, RAFT_PORT), timeout=10,
                                     source_address=(FORGED, 0))
        s.sendall(os.urandom(200))
        assert closed_by_peer(s)
        s.close()
        assert wait_log(n, f"refusing a raft connection from {FORGED} (raft id 666): it did not "
                           "start with the pool handshake")
        assert wait_log(n, f"refusing a raft connection from {FORGED} (raft id 667): it does not "
                           "know this pool's secret")
    # no member changed its term or role: the vote requests never reached raft
    time.sleep(1)
    for n in nodes:
        tail = log_of(n)[marks[n.host]:]
        assert "pool: candidate" not in tail and "pool: unavailable" not in tail, tail
        assert "pool: follower, leader 0 " not in tail, tail
    # the pool still works: a change by a member goes through everywhere
    assert info_everywhere(nodes) == before
    r = nodes[1].cli("volume", "set", "pa", "auth.allow", FORGED, check=False)
    assert r.returncode == 0, out(r)
    after = info_everywhere(nodes)
    assert f"auth.allow: {FORGED}" in after
    r = nodes[0].cli("volume", "reset", "pa", "auth.allow", check=False)
    assert r.returncode == 0, out(r)


def restart_all(nodes, before_start=None):
    for n in nodes:
        kill_pid(n.proc.pid)
        n.proc.wait()
    if before_start:
        before_start()
    for n in nodes:
        n.start()


def test_pool_without_secret_then_given_one(pool):
    nodes, forged = pool
    paths = [os.path.join(n.workdir, "raft", "secret") for n in nodes]
    before = info_everywhere(nodes)
    # a pool from before secrets: raft/ without the file
    marks = {n.host: len(log_of(n)) for n in nodes}
    restart_all(nodes, lambda: [os.unlink(p) for p in paths])
    for n in nodes:
        assert "pool: this pool has no secret" in log_of(n)[marks[n.host]:]
    assert info_everywhere(nodes) == before
    r = nodes[0].cli("volume", "set", "pa", "auth.allow", "127.0.0.130", check=False)
    assert r.returncode == 0, out(r)
    assert "auth.allow: 127.0.0.130" in info_everywhere(nodes)

    # docs/security.md: the same new secret on every server, then restart
    def give_secret():
        secret = os.urandom(32).hex() + "\n"
        for p in paths:
            with open(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
                f.write(secret)

    marks = {n.host: len(log_of(n)) for n in nodes}
    restart_all(nodes, give_secret)
    for n in nodes:
        assert "pool: this pool has no secret" not in log_of(n)[marks[n.host]:]
    r = nodes[1].cli("volume", "reset", "pa", "auth.allow", check=False)
    assert r.returncode == 0, out(r)
    assert "auth.allow: 127.0.0.130" not in info_everywhere(nodes)
    c = Forged(nodes[0].host)
    try:
        st, text = c.cli("__fwd", "volume", "set", "pa", "auth.allow", FORGED)
        assert st == 1 and "not a server of this pool" in text, text
    finally:
        c.close()
    s = socket.create_connection((nodes[1].host, RAFT_PORT), timeout=10,
                                 source_address=(FORGED, 0))
    s.sendall(raft_preamble(0x668, f"{FORGED}:{RAFT_PORT}") + request_vote(1 << 30, 0x668))
    assert closed_by_peer(s)
    s.close()
    assert f"auth.allow: {FORGED}" not in info_everywhere(nodes)
