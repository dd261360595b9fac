"""`cairn --xml`: volume info, volume status and volume heal VOL info as
GlusterFS's `gluster --xml` documents, parsed with xml.etree as scripts
written for GlusterFS parse them, and checked against the text output and
against the real processes (pids, a brick that stops answering, an entry
that needs healing). One cairnd on 127.0.0.12; a pool of three on
127.0.0.24-26 for the uuids and pids of other servers' bricks.

Run: /usr/bin/python3 -m pytest tests/system/test_cli_xml.py
"""

import os
import re
import subprocess
import xml.etree.ElementTree as ET

import pytest

import replica_pool
from replica_pool import wait_until as wait_for
from cairn_cluster import TEST_SPARE_INODES, Cluster, exe, pids_with_arg

HOST = "127.0.0.12"


@pytest.fixture(scope="module")
def c():
    cl = Cluster(host=HOST, prefix="st-xml-")
    try:
        cl.start()
        # a plain volume of two bricks, one with characters XML escapes
        plain = [cl.brick_path("p0"), cl.brick_path("p1 &<'\">")]
        cl.create_volume("xplain", plain, start=False)
        # replica 3 arbiter 1, started, with options set
        arb = [cl.brick_path(f"a{i}") for i in range(3)]
        for b in arb:
            os.makedirs(b)
        cl.cli("volume", "create", "xarb", "replica", "3", "arbiter", "1",
               *[f"{HOST}:{b}" for b in arb], "force")
        cl.volumes["xarb"] = arb
        cl.cli("volume", "set", "xarb", "network.ping-timeout", "2")
        cl.cli("volume", "set", "xarb", "performance.read-ahead", "off")
        cl.cli("volume", "start", "xarb")
        # 2 x 3, created only
        dr = [cl.brick_path(f"d{i}") for i in range(6)]
        cl.create_volume("xdr", dr, start=False, replica=3)
        yield cl
    finally:
        cl.close()


def xml(c, *args, rc=0):
    """Runs cairn with args (which hold --xml), checks the exit status and
    that stdout alone is one well-formed document; returns its root."""
    r = c.cli(*args, check=False)
    assert (r.returncode == 0) == (rc == 0), f"{args} -> {r.returncode}\n{r.stdout}{r.stderr}"
    assert r.stdout.startswith('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'), r.stdout
    root = ET.fromstring(r.stdout.encode())
    assert root.tag == "cliOutput"
    return root


def ok(root):
    assert root.findtext("opRet") == "0", ET.tostring(root)
    assert root.findtext("opErrno") == "0"
    assert root.find("opErrstr") is not None and not root.findtext("opErrstr")


def text_info(c, name):
    """Fields of `volume info NAME` (text)."""
    t = c.cli("volume", "info", name).stdout
    bricks = re.findall(r"^Brick\d+: (.*)$", t, re.M)
    opts = {}
    if "Options Reconfigured:" in t:
        for line in t.split("Options Reconfigured:\n", 1)[1].splitlines():
            if ": " in line:
                k, v = line.split(": ", 1)
                opts[k] = v
    field = lambda k: re.search(rf"^{k}: (.*)$", t, re.M).group(1)
    return {"id": field("Volume ID"), "type": field("Type"), "status": field("Status"),
            "bricks": bricks, "opts": opts}


def self_uuid(c):
    line = [l for l in c.cli("pool", "list").stdout.splitlines() if "localhost" in l][0]
    return line.split()[0]


def test_info(c):
    uuid = self_uuid(c)
    expect = {  # name: (type, typeStr, brickCount, distCount, replicaCount, arbiterCount, status)
        "xarb": (2, "Replicate", 3, 1, 3, 1, 1),
        "xdr": (7, "Distributed-Replicate", 6, 2, 3, 0, 0),
        "xplain": (0, "Distribute", 2, 2, 1, 0, 0),
    }
    for root in (xml(c, "--xml", "volume", "info"), xml(c, "volume", "info", "all", "--xml")):
        ok(root)
        vols = root.findall("volInfo/volumes/volume")
        assert [v.findtext("name") for v in vols] == sorted(expect)
        assert root.findtext("volInfo/volumes/count") == "3"
    for name, (typ, typ_s, nb, dist, rep, arb, status) in expect.items():
        root = xml(c, "volume", "info", name, "--xml")
        ok(root)
        (v,) = root.findall("volInfo/volumes/volume")
        t = text_info(c, name)
        assert v.findtext("name") == name
        assert v.findtext("id") == t["id"]
        assert v.findtext("status") == str(status)
        assert v.findtext("statusStr") == t["status"] == ["Created", "Started"][status]
        assert v.findtext("type") == str(typ)
        assert v.findtext("typeStr") == typ_s == t["type"]
        for tag, want in (("brickCount", nb), ("distCount", dist), ("replicaCount", rep),
                          ("arbiterCount", arb), ("disperseCount", 0), ("redundancyCount", 0),
                          ("transport", 0), ("snapshotCount", 0)):
            assert v.findtext(tag) == str(want), tag
        bricks = v.findall("bricks/brick")
        names = [f"{HOST}:{p}" for p in c.volumes[name]]
        assert [b.findtext("name") for b in bricks] == names
        assert [b.text for b in bricks] == names  # the brick's own text, as GlusterFS writes it
        assert [b.findtext("name") + (" (arbiter)" if b.findtext("isArbiter") == "1" else "")
                for b in bricks] == t["bricks"]
        assert [b.findtext("isArbiter") for b in bricks] == (
            ["0", "0", "1"] if arb else ["0"] * nb)
        assert {b.get("uuid") for b in bricks} == {b.findtext("hostUuid") for b in bricks} == {uuid}
        opts = {o.findtext("name"): o.findtext("value") for o in v.findall("options/option")}
        assert opts == t["opts"]
        assert v.findtext("optCount") == str(len(opts))
    opts = {o.findtext("name"): o.findtext("value")
            for o in xml(c, "--xml", "volume", "info", "xarb").findall(".//options/option")}
    assert opts == {"network.ping-timeout": "2", "performance.read-ahead": "off",
                    "storage.spare-inodes": str(TEST_SPARE_INODES)}


def nodes(c, vol):
    root = xml(c, "--xml", "volume", "status", vol)
    ok(root)
    (v,) = root.findall("volStatus/volumes/volume")
    assert v.findtext("volName") == vol
    ns = v.findall("node")
    assert v.findtext("nodeCount") == str(len(ns))
    return ns



def heal_info(c, vol):
    """heal info as XML: [(name, status, entries or None, [file paths])] and the
    same from the text output."""
    root = xml(c, "--xml", "volume", "heal", vol, "info")
    assert root.findtext("opRet") == "0" and root.findtext("opErrno") == "0"
    got = []
    for b in root.findall("healInfo/bricks/brick"):
        assert b.get("hostUuid")
        n = b.findtext("numberOfEntries")
        got.append((b.findtext("name"), b.findtext("status"), None if n == "-" else int(n),
                    sorted(f.text for f in b.findall("file"))))
    text = c.cli("volume", "heal", vol, "info").stdout
    want = []
    for block in text.strip().split("\n\n"):
        lines = block.splitlines()
        n = lines[-1].split(": ", 1)[1]
        files = sorted(l.split(" - ")[0] for l in lines[1:-2])
        want.append((lines[0][len("Brick "):], lines[-2].split(": ", 1)[1],
                     None if n == "-" else int(n), files))
    assert got == want
    return got


def test_status_and_heal_info(c):
    arb = c.volumes["xarb"]
    uuid = self_uuid(c)
    ns = nodes(c, "xarb")
    assert len(ns) == 4  # three bricks and this server's self-heal daemon
    text = {(h, p): (port, pid) for h, p, port, pid in c.brick_status("xarb")}
    for n, path in zip(ns, arb):
        assert (n.findtext("hostname"), n.findtext("path")) == (HOST, path)
        assert n.findtext("peerid") == uuid
        assert n.findtext("status") == "1"
        (real,) = pids_with_arg("--brick-path", path)  # the brick's process
        assert int(n.findtext("pid")) == real == text[(HOST, path)][1]
        assert int(n.findtext("port")) == int(n.findtext("ports/tcp")) == text[(HOST, path)][0]
        assert n.findtext("ports/rdma") == "N/A"
    shd = ns[3]
    assert (shd.findtext("hostname"), shd.findtext("path")) == ("Self-heal Daemon", "localhost")
    assert shd.findtext("status") == "1" and shd.findtext("port") == "N/A"
    pid = int(shd.findtext("pid"))
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = f.read().split(b"\0")
    assert os.path.basename(argv[0]) == b"cairn-shd" and b"xarb" in argv
    # status detail: the brick's file system, as statvfs sees it
    root = xml(c, "--xml", "volume", "status", "xarb", "detail")
    ok(root)
    dn = root.findall("volStatus/volumes/volume/node")
    assert len(dn) == 3
    st = os.statvfs(arb[0])
    assert int(dn[0].findtext("sizeTotal")) == st.f_blocks * st.f_frsize
    assert int(dn[0].findtext("inodesTotal")) == st.f_files

    # brick 1 stops answering: offline in status, down in heal info, and a
    # file written meanwhile is listed on the other two
    victim = pids_with_arg("--brick-path", arb[1])[0]
    c.stop_signal(victim)
    wait_for(lambda: nodes(c, "xarb")[1].findtext("status") == "0", 15, "brick 1 offline")
    ns = nodes(c, "xarb")
    assert [n.findtext("status") for n in ns] == ["1", "0", "1", "1"]
    assert ns[1].findtext("pid") == "-1" and ns[1].findtext("port") == "N/A"
    assert ns[1].findtext("ports/tcp") == "N/A"
    assert [pid for _, _, _, pid in c.brick_status("xarb")][1] is None
    m = c.mount("xarb", c.brick_path("m"))
    with open(os.path.join(m.path, "changed"), "wb") as f:
        f.write(b"written while brick 1 was down")
    bricks = heal_info(c, "xarb")
    assert [b[0] for b in bricks] == [f"{HOST}:{p}" for p in arb]
    assert bricks[1][1:] == ("Transport endpoint is not connected", None, [])
    for i in (0, 2):
        name, status, count, files = bricks[i]
        assert status == "Connected" and "/changed" in files and count == len(files)
    root = xml(c, "--xml", "volume", "heal", "xarb", "info", "summary")
    sums = root.findall("healInfo/bricks/brick")
    assert sums[1].findtext("totalNumberOfEntries") == "-"
    assert int(sums[0].findtext("totalNumberOfEntries")) == bricks[0][2]
    assert sums[0].findtext("numberOfEntriesInSplitBrain") == "0"
    c.cont(victim)
    wait_for(lambda: nodes(c, "xarb")[1].findtext("status") == "1", 15, "brick 1 back")


def test_errors(c):
    for args, errno_, msg in (
            (("--xml", "volume", "info", "nosuch"), "30806", "Volume nosuch does not exist"),
            (("volume", "status", "nosuch", "--xml"), "30806", "Volume nosuch does not exist"),
            (("--xml", "volume", "status", "xplain"), "30810", "Volume xplain is not started")):
        root = xml(c, *args, rc=1)
        assert root.findtext("opRet") == "-1"
        assert root.findtext("opErrno") == errno_
        assert root.findtext("opErrstr") == msg
        assert root.find("volInfo") is None and root.find("volStatus") is None
    root = xml(c, "--xml", "volume", "heal", "nosuch", "info", rc=1)
    assert root.findtext("opRet") == "-1" and "nosuch" in root.findtext("opErrstr")
    root = xml(c, "--xml", "volume", "heal", "xplain", "info", rc=1)
    assert root.findtext("opErrstr") in ("Volume xplain is not started",
                                         "Volume xplain is not of type replicate")
    # a command without an XML form of its own: its text in <output>
    root = xml(c, "--xml", "volume", "list")
    ok(root)
    assert root.findtext("output").split() == ["xarb", "xdr", "xplain"]
    assert "--xml volume info|status|heal" in c.cli("help").stdout
    # no daemon to answer: still a document, on stdout
    r = subprocess.run([exe("cairn"), "--remote-host", "127.0.0.13", "--xml", "volume", "info"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    root = ET.fromstring(r.stdout.encode())
    assert root.findtext("opRet") == "-1" and "Connection failed" in root.findtext("opErrstr")


def test_pool():
    """Bricks of three servers: each brick's uuid is its server's, each
    pid is the process on that server, and detail reads only local ones."""
    pool = replica_pool.Pool(["127.0.0.24", "127.0.0.25", "127.0.0.26"], "st-xmlpool-")
    try:
        pool.start()
        bricks = []
        for n in pool.nodes:
            path = os.path.join(n.root, "pv-brick")
            os.makedirs(path)
            bricks.append(path)
            n.volumes["pv"] = [path]
        a = pool.nodes[0]
        a.cli("volume", "create", "pv", "replica", "3",
              *[f"{n.host}:{p}" for n, p in zip(pool.nodes, bricks)], "force")
        a.cli("volume", "start", "pv")
        uuids = [self_uuid(n) for n in pool.nodes]
        assert len(set(uuids)) == 3
        for n in pool.nodes:  # every server gives the same answer
            (v,) = xml(n, "--xml", "volume", "info", "pv").findall("volInfo/volumes/volume")
            bs = v.findall("bricks/brick")
            assert [b.findtext("name") for b in bs] == [
                f"{m.host}:{p}" for m, p in zip(pool.nodes, bricks)]
            assert [b.get("uuid") for b in bs] == [b.findtext("hostUuid") for b in bs] == uuids
        for i, n in enumerate(pool.nodes):
            wait_for(lambda: all(x.findtext("status") == "1" for x in nodes(n, "pv")), 15,
                     f"every brick online as {n.host} sees it")
            ns = nodes(n, "pv")
            assert [x.findtext("peerid") for x in ns] == uuids + [uuids[i]]
            assert [x.findtext("hostname") for x in ns[:3]] == [m.host for m in pool.nodes]
            for x, path in zip(ns, bricks):
                assert int(x.findtext("pid")) == pids_with_arg("--brick-path", path)[0]
            assert ns[3].findtext("hostname") == "Self-heal Daemon"
        dn = xml(a, "--xml", "volume", "status", "pv", "detail").findall(
            "volStatus/volumes/volume/node")
        assert [x.find("sizeTotal") is not None for x in dn] == [True, False, False]
    finally:
        pool.close()
