"""Option groups (`volume set VOL group G`) and coherence between two mounts.

Whatever options are set, a change made through one mount is seen through
another at its next access (docs/consistency.md): no group, and no value of
a volume option, may let a mount's kernel cache what no lease protects.
Each group is applied to its own volume (one brick, and a distribute volume
of three), mounted twice; every scenario looks through m2 right before the
change through m1, so a stale kernel cache on m2 would show. No sleeping
for cache timeouts.

Address: 127.0.0.64.
Run: /usr/bin/python3 -m pytest tests/system/test_option_groups.py
Binaries: $CAIRN_BUILD (default <repo>/build).
"""

import os
import stat

import pytest

from cairn_cluster import Cluster

HOST = "127.0.0.64"
GROUPS = ("virt", "metadata-cache", "small-file")
# Groups whose options are those of another, or none the scenarios below
# could tell apart from the others: checked on one brick only (CI time).
MORE_GROUPS = ("distributed-virt", "nl-cache", "db-workload")

# What each group leaves set: every option of the group, by `volume get`.
GROUP_VALUES = {
    "virt": {"network.ping-timeout": "20", "performance.io-thread-count": "32"},
    "metadata-cache": {"client.leases": "on", "client.lease-cache-timeout": "600"},
    "small-file": {"performance.io-thread-count": "32", "client.leases": "on"},
    "distributed-virt": {"network.ping-timeout": "20", "performance.io-thread-count": "32"},
    "nl-cache": {"client.leases": "on", "client.lease-cache-timeout": "600"},
    "db-workload": {"performance.read-ahead": "off", "performance.write-behind": "off",
                    "performance.strict-o-direct": "on", "performance.io-thread-count": "32"},
}


@pytest.fixture(scope="module")
def cluster():
    with Cluster(host=HOST, prefix="groups-") as c:
        yield c


class Pair:
    def __init__(self, name, m1, m2):
        self.name, self.a, self.b = name, m1.path, m2.path


_VOLS = {}


def grouped(cluster, group, bricks):
    """A started volume of `bricks` bricks with the group applied (after
    the start, so the mounts are made with its values), mounted twice."""
    key = (group, bricks)
    if key not in _VOLS:
        name = f"g{len(_VOLS)}"
        paths = [os.path.join(cluster.root, f"{name}-b{i}") for i in range(bricks)]
        cluster.create_volume(name, paths)
        r = cluster.cli("volume", "set", name, "group", group)
        assert r.stdout.strip() == "volume set: success", r.stdout
        m1 = cluster.mount(name, os.path.join(cluster.root, f"{name}-m1"))
        m2 = cluster.mount(name, os.path.join(cluster.root, f"{name}-m2"))
        _VOLS[key] = Pair(name, m1, m2)
    return _VOLS[key]


@pytest.fixture(params=[(g, n) for g in GROUPS for n in (1, 3)] + [(g, 1) for g in MORE_GROUPS],
                ids=lambda p: f"{p[0]}-{p[1]}brick")
def pair(cluster, request):
    return grouped(cluster, *request.param)


def test_group_values(cluster, pair):
    group = next(g for (g, _), p in _VOLS.items() if p is pair)
    r = cluster.cli("volume", "get", pair.name, "all")
    got = {}
    for line in r.stdout.splitlines()[2:]:
        parts = line.split()
        got[parts[0]] = (parts[1], line.endswith("(DEFAULT)"))
    for k, v in GROUP_VALUES[group].items():
        assert got[k] == (v, False), (k, got[k])
    # nothing of any group caches without a lease
    assert got["client.attribute-timeout"][0] == "0"
    assert got["client.entry-timeout"][0] == "0"
    assert got["client.leases"][0] == "on"


def put(path, data, mode=None):
    with open(path, "wb") as f:
        f.write(data)
    if mode is not None:
        os.chmod(path, mode)


def get(path):
    with open(path, "rb") as f:
        return f.read()


def test_changes_seen_at_next_access(pair, request):
    d = "t-" + request.node.callspec.id
    os.mkdir(os.path.join(pair.a, d))
    a, b = os.path.join(pair.a, d), os.path.join(pair.b, d)
    # Several rounds: a mount that looks right after another's change finds
    # the object cooling down (no lease granted), the case a timeout
    # without a lease used to cache.
    for i in range(4):
        fa, fb = os.path.join(a, f"f{i}"), os.path.join(b, f"f{i}")
        put(fa, b"ab", 0o600)
        st = os.stat(fb)
        assert (stat.S_IMODE(st.st_mode), st.st_size) == (0o600, 2)
        assert get(fb) == b"ab"
        # mode and size and contents
        os.chmod(fa, 0o644)
        put(fa, b"hello world")
        st = os.stat(fb)
        assert (stat.S_IMODE(st.st_mode), st.st_size) == (0o644, 11), i
        assert get(fb) == b"hello world"
        st = os.stat(fb)  # and once more, now that m2 read it
        assert (stat.S_IMODE(st.st_mode), st.st_size) == (0o644, 11), i
        # a new name, after m2 looked it up and found nothing
        na, nb = os.path.join(a, f"n{i}"), os.path.join(b, f"n{i}")
        with pytest.raises(FileNotFoundError):
            os.stat(nb)
        assert f"n{i}" not in os.listdir(b)
        put(na, b"new")
        assert os.stat(nb).st_size == 3
        assert f"n{i}" in os.listdir(b)
        assert get(nb) == b"new"
        # a removed name, after m2 looked at it
        os.unlink(na)
        with pytest.raises(FileNotFoundError):
            os.stat(nb)
        assert f"n{i}" not in os.listdir(b)
        # and the other way round: m2 changes what m1 looked at
        os.chmod(fb, 0o640)
        assert stat.S_IMODE(os.stat(fa).st_mode) == 0o640
        put(fb, b"x" * 5)
        assert os.stat(fa).st_size == 5
        assert get(fa) == b"xxxxx"


def test_rename_and_mkdir_seen(pair, request):
    d = "r-" + request.node.callspec.id
    os.mkdir(os.path.join(pair.a, d))
    a, b = os.path.join(pair.a, d), os.path.join(pair.b, d)
    put(os.path.join(a, "old"), b"1")
    assert get(os.path.join(b, "old")) == b"1"
    with pytest.raises(FileNotFoundError):
        os.stat(os.path.join(b, "new"))
    os.rename(os.path.join(a, "old"), os.path.join(a, "new"))
    assert get(os.path.join(b, "new")) == b"1"
    with pytest.raises(FileNotFoundError):
        os.stat(os.path.join(b, "old"))
    with pytest.raises(FileNotFoundError):
        os.stat(os.path.join(b, "sub"))
    os.mkdir(os.path.join(a, "sub"))
    assert os.path.isdir(os.path.join(b, "sub"))
    os.rmdir(os.path.join(a, "sub"))
    assert not os.path.exists(os.path.join(b, "sub"))


def test_timeouts_without_lease_refused(cluster):
    name = "tv"
    cluster.create_volume(name, [os.path.join(cluster.root, "tv-b")], start=False)
    for key in ("client.attribute-timeout", "client.entry-timeout"):
        r = cluster.cli("volume", "set", name, key, "600", check=False)
        assert r.returncode == 1
        assert r.stderr.startswith(f"volume set: failed: {key} must be 0:"), r.stderr
        assert "client.lease-cache-timeout" in r.stderr, r.stderr
        r = cluster.cli("volume", "set", name, key, "0")
        assert r.stdout == "volume set: success\n"
    # several pairs are applied together or not at all
    r = cluster.cli("volume", "set", name, "network.ping-timeout", "7",
                    "client.entry-timeout", "1", check=False)
    assert r.returncode == 1
    r = cluster.cli("volume", "get", name, "network.ping-timeout")
    assert "10 (DEFAULT)" in r.stdout, r.stdout
    # the coherent way to cache longer
    cluster.cli("volume", "set", name, "client.lease-cache-timeout", "600")


def test_mount_option_timeouts_warn(cluster):
    """A mount's own -o attribute-timeout / entry-timeout are the mounter's
    choice for that mount (as with GlusterFS's mount options): accepted,
    and the log says what they give up."""
    pair = grouped(cluster, "metadata-cache", 1)
    m = cluster.mount(pair.name, os.path.join(cluster.root, "mo"),
                      opts=["attribute-timeout=5", "entry-timeout=5"])
    log = m.tail(1 << 16)
    assert "attribute-timeout=5" in log and "other clients' changes" in log, log
    assert os.listdir(m.path) is not None
