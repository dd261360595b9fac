"""cairnd's Prometheus endpoint (issue 45, docs/metrics.md): a scrape before
and after a workload on a one-brick volume shows the brick's counters moved
by exactly the operations done (creates, writes and their bytes, reads of
a fresh mount and their bytes, unlinks, failed lookups, lease recalls),
the histograms agree with the counts, the whole answer is valid Prometheus
text; on a replica 3 volume with a stopped brick, the heal backlog equals
`volume heal info`'s count and the self-heal daemon's counters move as it
empties it; every metric the example Grafana dashboard uses exists; and
bad or slow HTTP clients are refused without stopping cairnd from serving.
"""

import json
import math
import os
import re
import socket
import time

import pytest

from cairn_cluster import REPO, Cluster, kill_pid, pids_with_arg

HOST = "127.0.0.181"
MPORT = 24809
N = 20

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"'
SAMPLE = re.compile(rf"^({NAME})(?:\{{((?:{LABEL})(?:,{LABEL})*)?\}})? (\S+)$")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def parse_exposition(text):
    """Strict reading of Prometheus' text format 0.0.4: HELP and TYPE once per
    family, before its samples; samples of a family together; names,
    labels and values well formed; no duplicate series; histograms with
    _bucket (le, ending at +Inf), _sum and _count. Returns
    {family: {"type", "help", "samples": [(name, {labels}, value)]}}."""
    assert text.endswith("\n"), "the exposition must end with a newline"
    fams, cur, seen_series, closed = {}, None, set(), set()

    def family_of(name):
        for suffix in ("_bucket", "_sum", "_count"):
            base = name[: -len(suffix)]
            if name.endswith(suffix) and base in fams and fams[base]["type"] in ("histogram",
                                                                                "summary"):
                return base
        return name

    for n, line in enumerate(text.splitlines(), 1):
        where = f"line {n}: {line!r}"
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            kind, rest = line[2:6], line[7:]
            name, _, arg = rest.partition(" ")
            assert re.fullmatch(NAME, name), where
            if name != cur:
                assert name not in closed, f"family {name} split: {where}"
                if cur:
                    closed.add(cur)
                cur = name
            f = fams.setdefault(name, {"type": "untyped", "help": None, "samples": []})
            assert not f["samples"], f"{kind} after samples: {where}"
            if kind == "TYPE":
                assert arg in TYPES, where
                f["type"] = arg
            else:
                assert f["help"] is None, f"second HELP: {where}"
                assert "\\" not in arg.replace("\\\\", "").replace("\\n", ""), where
                f["help"] = arg
            continue
        assert not line.startswith("#") and line.strip(), f"stray line: {where}"
        m = SAMPLE.match(line)
        assert m, f"not a sample: {where}"
        name, value = m.group(1), m.group(m.lastindex)
        labels = {}
        if m.group(2):
            for lm in re.finditer(LABEL, m.group(2)):
                assert lm.group(1) not in labels, f"label twice: {where}"
                labels[lm.group(1)] = lm.group(2)
        if value in ("+Inf", "-Inf", "NaN"):
            v = float(value.replace("Inf", "inf").replace("NaN", "nan"))
        else:
            assert re.fullmatch(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?", value), where
            v = float(value)
        fam = family_of(name)
        assert fam == cur, f"sample outside its family's block: {where}"
        assert fam in fams and fams[fam]["help"] is not None, f"no HELP: {where}"
        key = (name, tuple(sorted(labels.items())))
        assert key not in seen_series, f"duplicate series: {where}"
        seen_series.add(key)
        if fams[fam]["type"] == "counter":
            assert name.endswith("_total") and v >= 0, where
        fams[fam]["samples"].append((name, labels, v))
    for name, f in fams.items():
        if f["type"] != "histogram":
            continue
        series = {}
        for sname, labels, v in f["samples"]:
            key = tuple(sorted((k, x) for k, x in labels.items() if k != "le"))
            series.setdefault(key, {"buckets": []})
            if sname.endswith("_bucket"):
                series[key]["buckets"].append((float(labels["le"].replace("Inf", "inf")), v))
            else:
                series[key][sname[len(name) + 1:]] = v
        for key, s in series.items():
            b = s["buckets"]
            assert b and b[-1][0] == math.inf, f"{name}{key}: no +Inf bucket"
            assert [x for x, _ in b] == sorted(x for x, _ in b), f"{name}{key}: le out of order"
            assert all(b[i][1] <= b[i + 1][1] for i in range(len(b) - 1)), \
                f"{name}{key}: buckets not cumulative: {b}"
            assert b[-1][1] == s.get("count"), f"{name}{key}: +Inf bucket != _count"
            assert "sum" in s and s["sum"] >= 0, f"{name}{key}: no _sum"
    return fams


def http(req, timeout=10):
    """Sends req (bytes) to the endpoint; returns (status, headers, body)."""
    with socket.create_connection((HOST, MPORT), timeout=timeout) as s:
        s.sendall(req)
        data = b""
        while True:
            got = s.recv(65536)
            if not got:
                break
            data += got
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = dict(x.split(": ", 1) for x in lines[1:])
    assert int(headers["Content-Length"]) == len(body) or req.startswith(b"HEAD"), data[:300]
    return status, headers, body.decode()


def scrape():
    status, headers, body = http(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200, body
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4"), headers
    return parse_exposition(body)


def value(fams, name, **labels):
    """The value of the one sample of name with those labels (0 if none)."""
    fam = fams.get(re.sub(r"_(bucket|sum|count)$", "", name)) or fams.get(name)
    if not fam:
        return 0
    hits = [v for n, lb, v in fam["samples"]
            if n == name and all(lb.get(k) == x for k, x in labels.items())]
    assert len(hits) <= 1, (name, labels, hits)
    return hits[0] if hits else 0


@pytest.fixture(scope="module")
def node():
    c = Cluster(host=HOST, prefix="st-metrics-", args=["--metrics", f"{HOST}:{MPORT}"])
    try:
        c.start()
        # the synchronous path: one CREATE and one WRITE per file reach the
        # brick while the test runs (write-back batches them otherwise)
        c.create_volume("mv", options={"client.write-back": "off"})
        end = time.time() + 20
        while not pids_with_arg("--brick-path", c.volumes["mv"][0]):
            assert time.time() < end, "the brick did not start"
            time.sleep(0.1)
        yield c
    finally:
        c.close()


def brick_label(node):
    return f"{HOST}:{node.volumes['mv'][0]}"


def test_counters_move_by_the_operations_done(node):
    b = brick_label(node)
    mnt = node.mount("mv", os.path.join(node.root, "mnt")).path
    os.mkdir(os.path.join(mnt, "d"))
    end = time.time() + 10
    while not value(scrape(), "cairn_brick_up", brick=b):
        assert time.time() < end, "the brick is not up in the metrics"
        time.sleep(0.2)
    sizes = [1000 + 37 * i for i in range(N)]
    before = scrape()
    for i, size in enumerate(sizes):
        fd = os.open(os.path.join(mnt, f"d/f{i}"), os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
        assert os.write(fd, bytes([65 + i % 26]) * size) == size
        os.close(fd)
    after = scrape()

    def delta(name, **labels):
        return value(after, name, brick=b, **labels) - value(before, name, brick=b, **labels)

    assert delta("cairn_brick_requests_total", op="CREATE") == N
    assert delta("cairn_brick_requests_total", op="WRITE") == N
    assert delta("cairn_brick_written_bytes_total") == sum(sizes)
    assert delta("cairn_brick_lease_grants_total") > 0
    for op in ("CREATE", "WRITE"):
        assert delta("cairn_brick_request_duration_seconds_count", op=op) == N
        assert delta("cairn_brick_request_duration_seconds_bucket", op=op, le="+Inf") == N
        assert delta("cairn_brick_request_duration_seconds_sum", op=op) > 0
    # every operation's histogram counts what its counter counts
    for _, lb, v in after["cairn_brick_requests_total"]["samples"]:
        assert value(after, "cairn_brick_request_duration_seconds_count", **lb) == v, lb

    # reads through a fresh mount (no cache): each file's bytes once
    fresh = node.mount("mv", os.path.join(node.root, "mnt2")).path
    before = scrape()
    for i, size in enumerate(sizes):
        with open(os.path.join(fresh, f"d/f{i}"), "rb") as f:
            assert f.read() == bytes([65 + i % 26]) * size
    # names that do not exist, which this mount has not listed: each one
    # a LOOKUP failing with ENOENT
    for i in range(N):
        assert not os.path.exists(os.path.join(fresh, f"d/missing{i}"))
    after = scrape()
    assert delta("cairn_brick_read_bytes_total") == sum(sizes)
    assert delta("cairn_brick_requests_total", op="READ") >= N
    assert delta("cairn_brick_errors_total", op="LOOKUP", errno="ENOENT") == N

    # the fresh mount holds leases on what it read: the unlinks through the
    # first one recall them (and drop the first one's own at once), and the
    # fresh mount returns them
    before = after
    for i in range(N):
        os.unlink(os.path.join(mnt, f"d/f{i}"))
    after = scrape()
    assert delta("cairn_brick_requests_total", op="UNLINK") == N
    assert delta("cairn_brick_lease_recalls_total") >= N
    end = time.time() + 10
    while delta("cairn_brick_lease_recall_duration_seconds_count") < 1:
        assert time.time() < end, "no recall ended"
        time.sleep(0.2)
        after = scrape()
    assert delta("cairn_brick_lease_recall_duration_seconds_sum") >= 0
    assert delta("cairn_brick_lease_revocations_total") == 0
    assert delta("cairn_brick_written_bytes_total") == 0
    assert value(after, "cairn_brick_heal_pending_entries", brick=b) == 0
    assert value(after, "cairn_volume_started", volume="mv") == 1


def heal_info_counts(node, vol):
    """{brick: entries} from `volume heal VOL info` (bricks that answered)."""
    r = node.cli("volume", "heal", vol, "info", check=False)
    return {m.group(1): int(m.group(2)) for m in
            re.finditer(r"^Brick (\S+)\n(?:Status: Connected\n)?(?:.*\n)*?Number of entries: (\d+)",
                        r.stdout, re.M)}, r.stdout


def test_heal_backlog_and_the_self_heal_daemon(node):
    """Changes made while a replica is stopped show as heal backlog on the
    others, the same count `volume heal info` gives; once it is back, the
    self-heal daemon empties the backlog and its counters say so."""
    bricks = [os.path.join(node.root, f"h{i}") for i in range(3)]
    node.create_volume("hv", bricks=bricks, replica=3,
                       options={"network.ping-timeout": "2", "cluster.heal-timeout": "1",
                                "client.write-back": "off"})
    labels = [f"{HOST}:{b}" for b in bricks]
    end = time.time() + 20
    while not all(value(scrape(), "cairn_brick_up", brick=b) for b in labels):
        assert time.time() < end, "the bricks are not up"
        time.sleep(0.2)
    mnt = node.mount("hv", os.path.join(node.root, "hmnt")).path
    os.mkdir(os.path.join(mnt, "d"))
    pid = pids_with_arg("--brick-path", bricks[2])[0]
    node.stop_signal(pid)
    try:
        for i in range(5):
            with open(os.path.join(mnt, f"d/g{i}"), "wb") as f:
                f.write(b"h" * 4000)
        fams = scrape()
        assert value(fams, "cairn_brick_up", brick=labels[2]) == 0
        pending = [value(fams, "cairn_brick_heal_pending_entries", brick=b) for b in labels]
        assert pending[0] >= 5 and pending[0] == pending[1], pending
        counts, text = heal_info_counts(node, "hv")
        assert counts.get(labels[0]) == pending[0], text
        assert counts.get(labels[1]) == pending[1], text
    finally:
        node.cont(pid)
    end = time.time() + 40
    while True:
        fams = scrape()
        if (all(value(fams, "cairn_brick_heal_pending_entries", brick=b) == 0 for b in labels)
                and sum(value(fams, "cairn_shd_healed_entries_total", brick=b)
                        for b in labels) >= 5):
            break
        assert time.time() < end, "the self-heal daemon did not empty the backlog"
        time.sleep(0.5)
    assert sum(value(fams, "cairn_shd_crawls_total", brick=b) for b in labels) >= 1
    assert value(fams, "cairn_shd_last_crawl_end_timestamp_seconds", brick=labels[0]) > 0
    assert value(fams, "cairn_shd_split_brain_entries", brick=labels[0]) == 0


def client_value(name, mnt):
    fams = scrape()
    hits = [v for n, lb, v in fams.get(name, {"samples": []})["samples"] if lb["mount"] == mnt]
    assert len(hits) <= 1, hits
    return hits[0] if hits else None


def test_mounts_report_to_cairnd(node):
    """A mount reports its counters over its management connection (every
    5 s, and at once when it connects); cairnd serves them per mount, and
    forgets them when the mount goes."""
    m = node.mount("mv", os.path.join(node.root, "cmnt"))
    mnt = m.path
    end = time.time() + 10
    while client_value("cairn_client_resident_memory_bytes", mnt) is None:
        assert time.time() < end, "the mount did not report"
        time.sleep(0.2)
    assert client_value("cairn_client_resident_memory_bytes", mnt) > 1 << 20
    assert client_value("cairn_client_write_back_pending_files", mnt) == 0
    fams = scrape()
    lb = [lb for _, lb, _ in fams["cairn_client_resident_memory_bytes"]["samples"]
          if lb["mount"] == mnt][0]
    assert lb["volume"] == "mv" and lb["client"].startswith("127."), lb

    def reads():
        return (client_value("cairn_client_read_cache_hits_total", mnt) +
                client_value("cairn_client_read_cache_misses_total", mnt))

    before = reads()
    with open(os.path.join(mnt, "big"), "wb") as f:
        f.write(os.urandom(1 << 20))
    with open(os.path.join(mnt, "big"), "rb") as f:
        # the kernel's copy goes: the reads below reach the mount
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        while f.read(4096):
            pass
    end = time.time() + 12
    while reads() == before:
        assert time.time() < end, "the read cache counters did not move"
        time.sleep(0.5)
    m.stop()
    node.mounts.remove(m)
    end = time.time() + 10
    while client_value("cairn_client_resident_memory_bytes", mnt) is not None:
        assert time.time() < end, "cairnd kept the report of a mount that is gone"
        time.sleep(0.2)


def test_profile_clear_does_not_reset_the_counters(node):
    before = scrape()
    node.cli("volume", "profile", "mv", "start")  # clears profile's counters
    after = scrape()
    for _, lb, v in before["cairn_brick_requests_total"]["samples"]:
        assert value(after, "cairn_brick_requests_total", **lb) >= v, lb


def test_dashboard_metrics_exist(node):
    """Every metric an expression of the example dashboard names is in a
    scrape. Runs after the tests above, whose workloads (errors, recalls,
    a heal) make every family non-empty."""
    with open(os.path.join(REPO, "docs/grafana/cairn-dashboard.json")) as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for v in dash["templating"]["list"] if v["type"] == "query"]
    used = {m for e in exprs for m in re.findall(r"\bcairn_[a-z_]+", e)}
    assert used, exprs
    fams = scrape()
    names = {n for f in fams.values() for n, _, _ in f["samples"]}
    missing = sorted(used - names)
    assert not missing, f"the dashboard uses metrics cairnd does not serve: {missing}"
    # and docs/metrics.md documents every family served
    with open(os.path.join(REPO, "docs/metrics.md")) as f:
        doc = f.read()
    undocumented = sorted(n for n in fams if f"`{n}`" not in doc)
    assert not undocumented, undocumented


@pytest.mark.parametrize("req,status", [
    (b"GARBAGE\r\n\r\n", 400),
    (b"GET /metrics HTTP/1.1\nHost: x\n\n", 400),
    (b"GET /metrics HTTP/1.1\r\nContent-Length: 4\r\n\r\nabcd", 400),
    (b"GET /metrics HTTP/1.1\r\n" + b"X: " + b"a" * 9000 + b"\r\n\r\n", 431),
    (b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 405),
    (b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n", 404),
    (b"GET /metrics HTTP/3.0\r\n\r\n", 505),
])
def test_bad_requests_are_refused(node, req, status):
    got, headers, _ = http(req)
    assert got == status
    assert headers["Connection"] == "close"
    assert scrape()  # and cairnd goes on serving


def test_head_has_no_body(node):
    status, headers, body = http(b"HEAD /metrics HTTP/1.0\r\n\r\n")
    assert status == 200 and body == "" and int(headers["Content-Length"]) > 0


def test_a_silent_client_blocks_nothing(node):
    """Clients that connect and send nothing (or half a request) hold no one
    up: scrapes and CLI commands are answered meanwhile, and the silent
    ones are answered 408 at their deadline."""
    idle = [socket.create_connection((HOST, MPORT)) for _ in range(3)]
    try:
        idle[0].sendall(b"GET /metr")
        t = time.time()
        assert scrape()
        node.cli("volume", "info", "mv")
        assert time.time() - t < 4, "a scrape waited for the silent clients"
        idle[1].settimeout(10)
        data = idle[1].recv(4096)
        assert data.startswith(b"HTTP/1.1 408 "), data
    finally:
        for s in idle:
            s.close()
    assert scrape()


def test_a_dead_brick_is_down(node):
    b = brick_label(node)
    pid = pids_with_arg("--brick-path", node.volumes["mv"][0])[0]
    node.stop_signal(pid)
    try:
        t = time.time()
        fams = scrape()
        assert value(fams, "cairn_brick_up", brick=b) == 0
        assert time.time() - t < 10
        assert "cairn_brick_requests_total" in fams  # the family, empty
    finally:
        node.cont(pid)
    kill_pid(pid)
    end = time.time() + 20
    while value(scrape(), "cairn_brick_restarts_total", brick=b) < 1:
        assert time.time() < end, "cairnd did not restart the brick"
        time.sleep(0.2)
    end = time.time() + 20
    while not value(scrape(), "cairn_brick_up", brick=b):
        assert time.time() < end, "the restarted brick is not up"
        time.sleep(0.2)
