"""System tests of the trusted pool: three cairnd on 127.0.0.41-43 (plus
.44-.46 for probe refusals), real cairn-brickd processes, Raft through
libraft.

Covers: pool formation and probe/detach refusals; the volume lifecycle run
from every server; GETVOL answered identically by every server, with the
volume generation, and change notifications on a subscribed connection;
option groups; one server down (changes go on, it catches up and restarts
its bricks); two down (changes refused, reads work); kill -9 of the leader
in the middle of changes (all or nothing); concurrent conflicting creates.

Run: /usr/bin/python3 -m pytest tests/system/test_pool.py
Binaries: $CAIRN_BUILD (default <repo>/build).
"""

import os
import socket
import struct
import subprocess
import threading
import time

import pytest

from cairn_cluster import (TEST_SPARE_INODES, Cluster, alive, bin_dir, exe, kill_pid,
                           pids_with_arg)
from wire import crc32c, parse_tlv, tlv

HOSTS = ["127.0.0.41", "127.0.0.42", "127.0.0.43"]

needs_brickd = pytest.mark.skipif(
    not os.access(os.path.join(bin_dir(), "cairn-brickd"), os.X_OK),
    reason="cairn-brickd is not built")


def out(r):
    return r.stdout + r.stderr


T_NAME, T_DATA, T_TEXT, T_BRICK, T_HOST, T_PORT, T_PATH, T_OPTION, T_ID, T_GEN = \
    4, 15, 25, 32, 33, 34, 2, 35, 38, 39
OP_GETVOL = 101


def layout(body):
    """A GETVOL reply or notification body as a comparable dict."""
    d = {"bricks": [], "options": {}}
    for tag, val in parse_tlv(body):
        if tag == T_BRICK:
            b = {t: v for t, v in parse_tlv(val)}
            d["bricks"].append((b[T_HOST].decode(), struct.unpack("<Q", b[T_PORT])[0],
                                b[T_PATH].decode(), b[T_ID].decode()))
        elif tag == T_OPTION:
            o = {t: v for t, v in parse_tlv(val)}
            d["options"][o[T_NAME].decode()] = o[T_DATA].decode()
        elif tag == T_GEN:
            d["gen"] = struct.unpack("<Q", val)[0]
        elif tag in (T_NAME, T_ID, T_TEXT):
            d[{T_NAME: "name", T_ID: "id", T_TEXT: "text"}[tag]] = val.decode()
    return d


class MgmtConn:
    def __init__(self, host, port=24810):
        self.s = socket.create_connection((host, port), timeout=10)
        self.buf = b""
        self.reqid = 0

    def close(self):
        self.s.close()

    def _frame(self):
        while True:
            if len(self.buf) >= 32:
                magic, ver, kind, flags, op, res, reqid, blen, crc, status = struct.unpack_from(
                    "<IHBBHHQIIi", self.buf)
                if len(self.buf) >= 32 + blen:
                    body = self.buf[32:32 + blen]
                    self.buf = self.buf[32 + blen:]
                    assert crc == crc32c(body)
                    return kind, op, reqid, status, body
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("cairnd closed the connection")
            self.buf += chunk

    def getvol(self, name):
        self.reqid += 1
        body = tlv(T_NAME, name)
        hdr = struct.pack("<IHBBHHQIIi", 0x4E524143, 1, 1, 0, OP_GETVOL, 0, self.reqid,
                          len(body), crc32c(body), 0)
        self.s.sendall(hdr + body)
        while True:
            kind, op, reqid, status, body = self._frame()
            if kind == 2 and reqid == self.reqid:
                return status, layout(body)

    def notification(self, timeout):
        self.s.settimeout(timeout)
        try:
            while True:
                kind, op, reqid, status, body = self._frame()
                if kind == 3 and op == OP_GETVOL:
                    return layout(body)
        finally:
            self.s.settimeout(10)


# ---- the pool ----

class Pool:
    def __init__(self):
        self.nodes = [Cluster(host=h, prefix="st-pool-") for h in HOSTS]

    def start(self):
        for n in self.nodes:
            n.start()
        for n in self.nodes[1:]:
            r = self.nodes[0].cli("peer", "probe", n.host, check=False)
            assert r.returncode == 0 and "peer probe: success" in r.stdout, out(r)
        return self

    def close(self):
        # cairnd first (each stops its own bricks on SIGTERM): stopping volumes
        # one by one through a pool that is losing its servers would wait for
        # quorum each time
        for n in self.nodes:
            if n.proc and n.proc.poll() is None:
                kill_pid(n.proc.pid)
                n.proc.wait()
        for n in self.nodes:
            n.close()  # leftover brick processes (by path), directories

    def node(self, host):
        return next(n for n in self.nodes if n.host == host)

    def hello(self, n):
        r = n.cli("__hello", check=False)
        return dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)

    def leader(self, among=None, timeout=10):
        end = time.time() + timeout
        while time.time() < end:
            for n in among or self.nodes:
                if n.proc and n.proc.poll() is None and self.hello(n).get("leader") == "1":
                    return n
            time.sleep(0.1)
        raise AssertionError("no leader")

    def kill(self, n):
        """kill -9 of cairnd (its bricks stay, as after a crash)."""
        n.proc.kill()
        n.proc.wait()

    def restart(self, n):
        n.start()

    def bricks(self, name):
        """host:path of a brick of volume name on every server."""
        out = []
        for n in self.nodes:
            path = os.path.join(n.root, f"{name}-brick")
            os.makedirs(path, exist_ok=True)
            out.append(f"{n.host}:{path}")
            n.volumes[name] = [path]  # for close(): stop and kill by path
        return out

    def members(self):
        """The pool's server uuids, as every live server lists them (all equal)."""
        sets = []
        for n in self.nodes:
            if n.proc and n.proc.poll() is None:
                lines = n.cli("pool", "list").stdout.splitlines()[1:]
                sets.append(sorted(line.split()[0] for line in lines))
        assert all(x == sets[0] for x in sets), sets
        return sets[0]

    def same_everywhere(self, *args, timeout=5):
        """Runs a read command on every live server until all agree."""
        end = time.time() + timeout
        while True:
            outs = [n.cli(*args, check=False).stdout for n in self.nodes
                    if n.proc and n.proc.poll() is None]
            if all(o == outs[0] for o in outs) or time.time() > end:
                assert all(o == outs[0] for o in outs), outs
                return outs[0]
            time.sleep(0.2)


@pytest.fixture(scope="module")
def pool():
    p = Pool()
    try:
        yield p.start()
    finally:
        p.close()


# ---- formation ----

def test_pool_formation(pool):
    uuids = set()
    for n in pool.nodes:
        r = n.cli("pool", "list")
        lines = r.stdout.splitlines()
        assert lines[0].split() == ["UUID", "Hostname", "State"]
        assert len(lines) == 4, r.stdout
        assert lines[-1].split()[1] == "localhost"
        assert all(line.split()[2] == "Connected" for line in lines[1:])
        uuids.add(frozenset(line.split()[0] for line in lines[1:]))
        r = n.cli("peer", "status")
        assert r.stdout.startswith("Number of Peers: 2\n"), r.stdout
        assert r.stdout.count("State: Peer in Cluster (Connected)") == 2
        others = {h for h in HOSTS if h != n.host}
        assert {line.split()[1] for line in r.stdout.splitlines()
                if line.startswith("Hostname:")} == others
    assert len(uuids) == 1  # every server lists the same three servers


def test_probe_refusals(pool, tmp_path):
    a = pool.nodes[0]
    before = pool.members()
    r = a.cli("peer", "probe", a.host, check=False)
    assert r.returncode == 0 and "Probe on localhost not needed" in r.stdout, out(r)
    r = pool.nodes[1].cli("peer", "probe", HOSTS[2], check=False)
    assert r.returncode == 0 and "already in peer list" in r.stdout, out(r)
    r = a.cli("peer", "probe", "127.0.0.44", check=False)  # nothing listens there
    assert r.returncode == 1 and out(r).startswith("peer probe: failed: Probe returned with")
    r = a.cli("peer", "probe", "no-such-host.invalid", check=False)
    assert r.returncode == 1 and out(r).startswith("peer probe: failed:"), out(r)
    # a server that has volumes of its own (GlusterFS's rule)
    with Cluster(host="127.0.0.45", prefix="st-pool45-") as other:
        other.create_volume("mine", start=False)
        r = a.cli("peer", "probe", other.host, check=False)
        assert r.returncode == 1
        assert "is either already part of another cluster or having volumes configured" in out(r)
        assert other.cli("pool", "list").stdout.count("\n") == 2  # still alone
    # a server whose clock is an hour off
    wd = tmp_path / "skew"
    proc = subprocess.Popen([exe("cairnd"), "--foreground", "--listen", "127.0.0.46",
                             "--workdir", str(wd), "--log-file", str(tmp_path / "skew.log"),
                             "--clock-skew-test", "3600"])
    try:
        end = time.time() + 10
        while time.time() < end and a.cli("peer", "probe", "127.0.0.46",
                                          check=False).stderr.find("Probe returned") >= 0:
            time.sleep(0.1)
        r = a.cli("peer", "probe", "127.0.0.46", check=False)
        assert r.returncode == 1 and "clock of 127.0.0.46 differs" in out(r), out(r)
    finally:
        kill_pid(proc.pid)
        proc.wait()
    assert pool.members() == before


def test_commands_only_from_pool_hosts_or_local(pool):
    # the internal commands need a pool member or this host; the CLI path is
    # local here, so check the refusal of an unknown word instead
    r = pool.nodes[0].cli("__frob", check=False)
    assert r.returncode == 1 and "unrecognized word: __frob" in out(r)


# ---- volumes across the pool ----

@needs_brickd
def test_volume_lifecycle_from_every_server(pool):
    a, b, c = pool.nodes
    bricks = pool.bricks("lc")
    r = b.cli("volume", "create", "lc", *bricks, "force", check=False)
    assert r.returncode == 0 and "volume create: lc: success" in r.stdout, out(r)
    info = pool.same_everywhere("volume", "info", "lc")
    assert "Status: Created" in info and "Number of Bricks: 3" in info
    for br in bricks:  # every owner wrote its brick's marker
        assert os.path.exists(os.path.join(br.split(":", 1)[1], ".cairn", "brick.info"))
    r = c.cli("volume", "start", "lc", check=False)
    assert r.returncode == 0 and r.stdout == "volume start: lc: success\n", out(r)
    st = {n.host: n.brick_status("lc") for n in pool.nodes}
    assert st[a.host] == st[b.host] == st[c.host]
    rows = st[a.host]
    assert [f"{h}:{p}" for h, p, _, _ in rows] == bricks
    for h, p, port, pid in rows:
        assert port and pid and alive(pid)
        assert pids_with_arg("--brick-path", p) == [pid]
    # GETVOL: the same layout from every server, with a generation
    lay = []
    for n in pool.nodes:
        m = MgmtConn(n.host)
        status, d = m.getvol("lc")
        m.close()
        assert status == 0
        lay.append(d)
    assert lay[0] == lay[1] == lay[2] and lay[0]["gen"] > 0
    assert [(h, port) for h, port, _, _ in lay[0]["bricks"]] == [(h, port) for h, _, port, _ in rows]
    # options from each server
    assert a.cli("volume", "set", "lc", "network.ping-timeout", "17").returncode == 0
    r = c.cli("volume", "get", "lc", "network.ping-timeout")
    assert "network.ping-timeout" in r.stdout and " 17" in r.stdout
    r = b.cli("volume", "set", "lc", "group", "virt", check=False)
    assert r.returncode == 0, out(r)
    info = pool.same_everywhere("volume", "info", "lc")
    assert "network.ping-timeout: 20" in info and "performance.io-thread-count: 32" in info
    r = b.cli("volume", "set", "lc", "group", "nonsense", check=False)
    assert r.returncode == 1 and "volume set: failed:" in out(r)
    r = b.cli("volume", "set", "lc", "network.ping-timeout", "0", check=False)
    assert r.returncode == 1 and "volume set: failed:" in out(r)
    assert c.cli("volume", "reset", "lc", "all").returncode == 0
    assert "Options Reconfigured" not in pool.same_everywhere("volume", "info", "lc")
    # stop from one server: every brick process goes away
    r = a.cli("volume", "stop", "lc", check=False)
    assert r.returncode == 0, out(r)
    for h, p, port, pid in rows:
        end = time.time() + 5
        while alive(pid) and time.time() < end:
            time.sleep(0.05)
        assert not alive(pid)
    r = b.cli("volume", "delete", "lc", check=False)
    assert r.returncode == 0, out(r)
    assert "lc" not in pool.same_everywhere("volume", "list")
    for br in bricks:
        assert not os.path.exists(os.path.join(br.split(":", 1)[1], ".cairn", "brick.info"))


@needs_brickd
def test_layout_changes_are_notified(pool):
    a, b, c = pool.nodes
    bricks = pool.bricks("nt")
    a.cli("volume", "create", "nt", *bricks, "force")
    a.cli("volume", "start", "nt")
    conns = [MgmtConn(n.host) for n in pool.nodes]
    try:
        gens = [m.getvol("nt")[1]["gen"] for m in conns]
        assert gens[0] == gens[1] == gens[2]
        b.cli("volume", "set", "nt", "client.lease-cache-timeout", "5")
        for m in conns:  # every server tells its subscribers
            d = m.notification(timeout=5)
            assert d["name"] == "nt" and d["gen"] > gens[0]
            # the options set: this test's and the harness's (cairn_cluster)
            assert d["options"] == {"client.lease-cache-timeout": "5",
                                    "storage.spare-inodes": str(TEST_SPARE_INODES)}
        c.cli("volume", "stop", "nt")
        d = conns[0].notification(timeout=5)
        assert d["text"] == "Volume nt is not started" and "bricks" in d and not d["bricks"]
    finally:
        for m in conns:
            m.close()
    a.cli("volume", "delete", "nt")


def test_create_refusals_in_pool(pool):
    a, b, c = pool.nodes
    afile = os.path.join(c.root, "a-file")
    open(afile, "w").close()
    blocked = f"{c.host}:{afile}/brick"
    ok = pool.bricks("rf")[0]
    made = os.path.join(b.root, "rf-new", "brick")
    # the owner (c) checks its brick and says why it cannot make it; the
    # brick of b that could be made is not made either
    r = a.cli("volume", "create", "rf", ok, f"{b.host}:{made}", blocked, "force", check=False)
    assert r.returncode == 1, out(r)
    assert out(r) == (f"volume create: rf: failed: {c.host}: Cannot create brick directory "
                      f"{afile}/brick: {afile} is not a directory\n"), out(r)
    assert not os.path.exists(os.path.dirname(made))
    r = a.cli("volume", "create", "rf", ok, "127.0.0.47:/srv/x", "force", check=False)
    assert r.returncode == 1 and "is not in 'Peer in Cluster' state" in out(r), out(r)
    assert "rf" not in pool.same_everywhere("volume", "list")
    assert not os.path.exists(os.path.join(ok.split(":", 1)[1], ".cairn", "brick.info"))


@needs_brickd
def test_create_makes_missing_brick_directories_on_their_servers(pool):
    """Bricks on the other servers whose directories do not exist: each
    owner checks it can make its own, and makes it (with its parents) when
    the create is applied; the volume then starts everywhere."""
    a, b, c = pool.nodes
    paths = {n.host: os.path.join(n.root, "mkp", "deep", "brick") for n in pool.nodes}
    for n in pool.nodes:
        n.volumes["mkp"] = [paths[n.host]]
    r = a.cli("volume", "create", "mkp", "replica", "3",
              *[f"{h}:{p}" for h, p in paths.items()], "force", check=False)
    assert r.returncode == 0, out(r)
    for p in paths.values():  # the other servers apply the create a little later
        marker = os.path.join(p, ".cairn", "brick.info")
        end = time.time() + 10
        while not os.path.exists(marker) and time.time() < end:
            time.sleep(0.05)
        with open(marker) as f:
            assert f.read().startswith("volume=mkp\n")
    for n in pool.nodes:  # logged once the volume's state is saved, after the marker
        end = time.time() + 10
        while ("created volume mkp" not in Cluster.tail(n.logfile, 1 << 20)
               and time.time() < end):
            time.sleep(0.05)
        assert "created volume mkp" in Cluster.tail(n.logfile, 1 << 20)
    r = c.cli("volume", "start", "mkp", check=False)
    assert r.returncode == 0, out(r)
    assert all(pid for _, _, _, pid in b.brick_status("mkp"))
    b.stop_volume("mkp")
    a.cli("volume", "delete", "mkp")


def test_detach_refusals(pool):
    a, b, c = pool.nodes
    bricks = pool.bricks("dt")
    a.cli("volume", "create", "dt", bricks[1], "force")
    r = a.cli("peer", "detach", b.host, check=False)
    assert r.returncode == 1 and "hosts one or more bricks" in out(r), out(r)
    r = a.cli("peer", "detach", a.host, check=False)
    assert r.returncode == 1 and "is localhost" in out(r)
    r = a.cli("peer", "detach", "127.0.0.48", check=False)
    assert r.returncode == 1 and "is not part of cluster" in out(r)
    assert len(pool.members()) == 3
    a.cli("volume", "delete", "dt")


def test_concurrent_conflicting_creates(pool):
    a, b, c = pool.nodes
    b1 = pool.bricks("cc1")[0]
    b2 = pool.bricks("cc2")[2]
    results = {}

    def run(node, brick):
        results[node.host] = node.cli("volume", "create", "cc", brick, "force", check=False)

    ts = [threading.Thread(target=run, args=(a, b1)), threading.Thread(target=run, args=(c, b2))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    codes = sorted(r.returncode for r in results.values())
    assert codes == [0, 1], {h: out(r) for h, r in results.items()}
    loser = next(r for r in results.values() if r.returncode == 1)
    assert "Volume cc already exists" in out(loser) or "already part of" in out(loser)
    info = pool.same_everywhere("volume", "info", "cc")
    assert info.count("Brick1:") == 1 and "Brick2:" not in info
    a.cli("volume", "delete", "cc")


# ---- faults ----

@needs_brickd
def test_one_server_down_then_catch_up(pool):
    victim = pool.leader()
    rest = [n for n in pool.nodes if n is not victim]
    bricks = pool.bricks("od")
    rest[0].cli("volume", "create", "od", *bricks, "force")
    rest[1].cli("volume", "start", "od")
    vpath = next(b for b in bricks if b.startswith(victim.host + ":")).split(":", 1)[1]
    old_brick = pids_with_arg("--brick-path", vpath)
    pool.kill(victim)
    for pid in old_brick:  # the server's bricks die with it here (a reboot)
        kill_pid(pid)
    # the two others go on: set, stop, start, create
    r = rest[0].cli("volume", "set", "od", "network.ping-timeout", "23", check=False)
    assert r.returncode == 0, out(r)
    assert rest[1].cli("volume", "stop", "od", check=False).returncode == 0
    r = rest[1].cli("volume", "start", "od", "force", check=False)
    assert r.returncode == 0, out(r)  # force: the victim's brick cannot start now
    b2 = pool.bricks("od2")
    r = rest[0].cli("volume", "create", "od2", *b2, "force", check=False)
    assert r.returncode == 1 and f"Host {victim.host} is not reachable" in out(r), out(r)
    live = [b for b in b2 if not b.startswith(victim.host + ":")]
    r = rest[0].cli("volume", "create", "od2", *live, "force", check=False)
    assert r.returncode == 0, out(r)
    st = rest[0].brick_status("od")
    assert [pid is None for h, _, _, pid in st] == [h == victim.host for h, _, _, _ in st]
    # it comes back, catches up, and brings its brick back
    pool.restart(victim)
    info = pool.same_everywhere("volume", "info", "od", timeout=10)
    assert "network.ping-timeout: 23" in info and "Status: Started" in info
    assert "od2" in pool.same_everywhere("volume", "list")
    end = time.time() + 15
    while time.time() < end and not pids_with_arg("--brick-path", vpath):
        time.sleep(0.2)
    assert pids_with_arg("--brick-path", vpath)
    end = time.time() + 10
    while time.time() < end:
        st = victim.brick_status("od")
        if all(pid for _, _, _, pid in st):
            break
        time.sleep(0.3)
    assert all(pid for _, _, _, pid in st), st
    rest[0].cli("volume", "stop", "od")
    for v in ("od", "od2"):
        rest[0].cli("volume", "delete", v, check=False)


def test_two_servers_down_refuses_changes(pool):
    a = pool.nodes[0]
    bricks = pool.bricks("td")
    a.cli("volume", "create", "td", bricks[0], "force")
    a.cli("volume", "set", "td", "network.ping-timeout", "31")
    survivor = pool.nodes[2]
    down = [n for n in pool.nodes if n is not survivor]
    before = survivor.cli("volume", "info", "td").stdout
    for n in down:
        pool.kill(n)
    try:
        t0 = time.time()
        r = survivor.cli("volume", "set", "td", "network.ping-timeout", "32", check=False)
        assert r.returncode == 1, out(r)
        assert "no quorum" in out(r) and "volume set" in out(r), out(r)
        assert time.time() - t0 < 20
        r = survivor.cli("volume", "create", "td2", bricks[2], "force", check=False)
        assert r.returncode == 1 and "no quorum" in out(r)
        # reads show the last known state
        assert survivor.cli("volume", "info", "td").stdout == before
        assert "network.ping-timeout: 31" in before
        assert survivor.cli("pool", "list").stdout.count("Disconnected") == 2
    finally:
        for n in down:
            pool.restart(n)
    r = pool.nodes[0].cli("volume", "set", "td", "network.ping-timeout", "33", check=False)
    assert r.returncode == 0, out(r)
    info = pool.same_everywhere("volume", "info", "td", timeout=10)
    assert "network.ping-timeout: 33" in info and "td2" not in pool.same_everywhere(
        "volume", "list")
    a.cli("volume", "delete", "td")


def test_kill_leader_during_changes_is_all_or_nothing(pool):
    bricks = pool.bricks("ka")
    pool.nodes[0].cli("volume", "create", "ka", bricks[0], "force")
    for i, delay in enumerate((0.0, 0.01, 0.03)):
        leader = pool.leader()
        client = next(n for n in pool.nodes if n is not leader)
        value = str(40 + i)
        vb = pool.bricks(f"kb{i}")
        procs = [subprocess.Popen([exe("cairn"), "--remote-host", client.remote, "volume", "set",
                                   "ka", "network.ping-timeout", value],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
                 subprocess.Popen([exe("cairn"), "--remote-host", client.remote, "volume",
                                   "create", f"kb{i}", vb[1], "force"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)]
        time.sleep(delay)
        pool.kill(leader)
        res = [p.communicate(timeout=60)[0] for p in procs]
        pool.restart(leader)
        info = pool.same_everywhere("volume", "info", "ka", timeout=15)
        vols = pool.same_everywhere("volume", "list", timeout=15)
        # all or nothing, the same on every server; a reported success holds
        if procs[0].returncode == 0:
            assert f"network.ping-timeout: {value}" in info, (res, info)
        if procs[1].returncode == 0:
            assert f"kb{i}" in vols.split(), (res, vols)
        marker = os.path.join(vb[1].split(":", 1)[1], ".cairn", "brick.info")
        end = time.time() + 15
        # a create the restarted leader's log still held may be applied
        # after the first listing: look again until marker and list agree
        while time.time() < end and os.path.exists(marker) != (f"kb{i}" in vols.split()):
            time.sleep(0.2)
            vols = pool.same_everywhere("volume", "list", timeout=15)
        assert os.path.exists(marker) == (f"kb{i}" in vols.split()), (res, vols)
        if f"kb{i}" in vols.split():
            pool.nodes[0].cli("volume", "delete", f"kb{i}", check=False)
    pool.nodes[0].cli("volume", "delete", "ka", check=False)


def test_detach_and_reprobe(pool):
    """A fourth server joins and leaves; it is on its own again afterwards."""
    with Cluster(host="127.0.0.44", prefix="st-pool44-") as d:
        a = pool.nodes[1]
        r = a.cli("peer", "probe", d.host, check=False)
        assert r.returncode == 0, out(r)
        assert len(pool.members()) == 4
        assert d.cli("pool", "list").stdout.count("\n") == 5
        r = pool.nodes[2].cli("peer", "detach", d.host, check=False)
        assert r.returncode == 0, out(r)
        assert len(pool.members()) == 3
        assert d.cli("pool", "list").stdout.count("\n") == 2  # itself only
        assert d.cli("volume", "list").stdout == "No volumes present in cluster\n"
        d.create_volume("alone", start=False)  # works on its own
