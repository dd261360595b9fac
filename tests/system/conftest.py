"""Fixtures for system tests on real daemons and real FUSE mounts.

Session: one cairnd on 127.0.0.10, a single-brick volume `stvol`, mounted
twice (m1, m2, with allow_other so unprivileged test users can use them).
Each test gets its own directory on the volume (`tdir`), seen through both
mounts. Everything is torn down by finalizers even when a test fails.
"""

import os
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cairn_cluster import LIVE_ROOTS, Cluster, pids_with_arg  # noqa: E402

HOST = "127.0.0.10"
VOLUME = "stvol"
DVOLUME = "stdvol"
R3VOLUME = "str3vol"
DR3VOLUME = "stdr3vol"


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long-running test (still run in CI)")


_SESSION = {}


@pytest.fixture(scope="session")
def cluster():
    c = Cluster(host=HOST, prefix="st-")
    _SESSION["cluster"] = c
    try:
        c.start()
        yield c
    finally:
        c.close()


class Vol:
    """brick: the one brick's path (None when the volume has several);
    bricks: every brick's path, in volume order."""

    def __init__(self, cluster, name, brick, m1, m2, bricks=None):
        self.cluster, self.name, self.brick = cluster, name, brick
        self.m1, self.m2 = m1, m2
        self.bricks = bricks if bricks is not None else [brick]


@pytest.fixture(scope="session")
def vol(cluster):
    brick = os.path.join(cluster.root, "brick")
    cluster.create_volume(VOLUME, [brick])
    m1 = cluster.mount(VOLUME, os.path.join(cluster.root, "m1"), opts=["allow_other"])
    m2 = cluster.mount(VOLUME, os.path.join(cluster.root, "m2"), opts=["allow_other"])
    os.chmod(m1.path, 0o755)
    return Vol(cluster, VOLUME, brick, m1.path, m2.path)


class TDir:
    """A test's own directory: `a` through mount m1, `b` through m2, `brick`
    on the brick."""

    def __init__(self, vol, name):
        self.vol, self.name = vol, name
        self.a = os.path.join(vol.m1, name)
        self.b = os.path.join(vol.m2, name)
        self.brick = os.path.join(vol.brick, name) if vol.brick else None

    def __iter__(self):
        return iter((self.a, self.b))


@pytest.fixture(scope="session")
def dvol(cluster):
    """A distribute volume of three bricks, mounted twice (its files spread
    over the bricks: no one brick path)."""
    bricks = [os.path.join(cluster.root, f"dbrick{i}") for i in range(3)]
    cluster.create_volume(DVOLUME, bricks)
    m1 = cluster.mount(DVOLUME, os.path.join(cluster.root, "dm1"), opts=["allow_other"])
    m2 = cluster.mount(DVOLUME, os.path.join(cluster.root, "dm2"), opts=["allow_other"])
    os.chmod(m1.path, 0o755)
    return Vol(cluster, DVOLUME, None, m1.path, m2.path)


def _replicated(cluster, name, sets):
    bricks = [os.path.join(cluster.root, f"{name}-b{i}") for i in range(3 * sets)]
    cluster.create_volume(name, bricks, replica=3)
    m1 = cluster.mount(name, os.path.join(cluster.root, f"{name}-m1"), opts=["allow_other"])
    m2 = cluster.mount(name, os.path.join(cluster.root, f"{name}-m2"), opts=["allow_other"])
    os.chmod(m1.path, 0o755)
    return Vol(cluster, name, None, m1.path, m2.path, bricks)


@pytest.fixture(scope="session")
def r3vol(cluster):
    """A replica 3 volume (three bricks of the session's cairnd), mounted twice."""
    return _replicated(cluster, R3VOLUME, 1)


@pytest.fixture(scope="session")
def dr3vol(cluster):
    """A 2 x 3 distributed-replicate volume, mounted twice."""
    return _replicated(cluster, DR3VOLUME, 2)


def make_tdir(vol, request):
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)[:200]
    t = TDir(vol, name)
    os.mkdir(t.a)
    os.chmod(t.a, 0o777)
    return t


@pytest.fixture
def tdir(vol, request):
    return make_tdir(vol, request)


@pytest.fixture(params=["one_brick", "distribute"])
def tdir_on_each_volume(request):
    """tdir on the one-brick volume, then on the distribute volume."""
    vol = request.getfixturevalue("vol" if request.param == "one_brick" else "dvol")
    return make_tdir(vol, request)


@pytest.fixture(params=["replica3", "2x3"])
def tdir_replicated(request):
    """tdir on the replica 3 volume, then on the 2 x 3 volume; tdir.vol.bricks
    lists every brick (a file lives on one set of three)."""
    vol = request.getfixturevalue("r3vol" if request.param == "replica3" else "dr3vol")
    return make_tdir(vol, request)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On failure, attach the tails of the daemons' logs to the report."""
    outcome = yield
    rep = outcome.get_result()
    if rep.when != "call" or not rep.failed:
        return
    one = item.funcargs.get("cluster") or getattr(item.funcargs.get("vol"), "cluster", None)
    clusters = [one] if one is not None else getattr(item.funcargs.get("pool"), "nodes", [])
    logs = []
    for c in clusters:
        # cairnd's and every mount's (named after its mount point)
        logs += [os.path.join(c.root, n) for n in sorted(os.listdir(c.root)) if n.endswith(".log")]
        bdir = os.path.join(c.workdir, "logs", "bricks")
        if os.path.isdir(bdir):
            logs += [os.path.join(bdir, n) for n in sorted(os.listdir(bdir))]
    for p in logs:
        text = Cluster.tail(p, 1500)
        if text:
            rep.sections.append((f"tail of {p}", text))


class TestTimeout(Exception):
    pass


def abort_hung_fuse_mounts(roots):
    """Aborts the FUSE connections of the mounts under roots that have
    requests waiting on their client, and kills that client (a request a
    client over io_uring has taken ends only when the client lets go of
    the ring), so requests stuck in a hung client fail instead of blocking
    forever. Idle mounts (the session's shared volume between tests) are
    left alone. Returns the aborted mount points."""
    import signal
    import subprocess

    ctl = "/sys/fs/fuse/connections"
    if os.path.isdir(ctl) and not os.listdir(ctl):
        subprocess.run(["mount", "-t", "fusectl", "none", ctl], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    prefixes = tuple(os.path.realpath(r) + "/" for r in roots)
    aborted = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            if not parts[4].startswith(prefixes):
                continue
            minor = int(parts[2].split(":")[1])
            try:
                with open(f"{ctl}/{minor}/waiting") as w:
                    if int(w.read()) == 0:
                        continue
                with open(f"{ctl}/{minor}/abort", "w") as a:
                    a.write("1")
            except (OSError, ValueError):
                continue
            aborted.append(parts[4])
    for m in aborted:
        for pid in pids_with_arg(m):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return aborted


@pytest.fixture(autouse=True)
def _time_limit(request):
    """Fails a test that runs too long (a hang must not stall the whole
    suite): 120 s, 400 s for tests marked slow, its fixtures' teardown
    included. A SIGALRM ends a hang in Python code; a watchdog thread
    aborts, a little later, the FUSE connections of our mounts that have a
    request a hung client never answers."""
    import signal
    import threading

    limit = 400 if request.node.get_closest_marker("slow") else 120
    hung = []

    def expired(signum, frame):
        raise TestTimeout(f"test exceeded {limit}s")

    def watchdog():
        hung.extend(abort_hung_fuse_mounts(list(LIVE_ROOTS)) or ["(no FUSE request was waiting)"])

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(limit)
    timer = threading.Timer(limit + 10, watchdog)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    if hung:
        pytest.fail(f"test still running {limit + 10}s after it started; FUSE connections "
                    f"with waiting requests were aborted: {', '.join(hung)}")
