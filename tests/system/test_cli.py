"""System tests of cairnd and the cairn CLI: real daemons on 127.0.0.5 and
127.0.0.6 (127.0.0.1:25202 for the localhost case), temporary workdirs, every
command and every refusal of `volume create`, persistence across restarts,
and brick supervision with the real cairn-brickd.

Run: /usr/bin/python3 -m pytest tests/system/test_cli.py
Binaries: $CAIRN_BUILD (default <repo>/build).
"""

import os
import re
import signal
import stat
import subprocess
import time

import pytest

from cairn_cluster import Cluster, ClusterError, alive, bin_dir, exe, kill_pid, port_open

HOST = "127.0.0.5"
HOST2 = "127.0.0.6"

OPTIONS = [
    "auth.allow", "auth.reject", "client.attribute-timeout", "client.entry-timeout",
    "client.lease-cache-timeout", "client.leases", "client.write-back",
    "client.write-back-files", "client.write-back-size", "cluster.favorite-child-policy",
    "cluster.heal-rate-limit", "cluster.heal-timeout", "cluster.min-free-disk",
    "cluster.self-heal-daemon",
    "cluster.shd-max-threads", "diagnostics.brick-log-level", "diagnostics.client-log-level",
    "features.lease-recall-timeout", "network.ping-timeout", "performance.aggregate-size", "performance.cache-size",
    "performance.io-thread-count", "performance.read-ahead", "performance.read-ahead-page-count",
    "performance.strict-o-direct", "performance.write-behind",
    "performance.write-behind-trickling-writes", "performance.write-behind-window-size",
    "storage.reserve", "storage.spare-inodes",
]


def have_brickd():
    return os.access(os.path.join(bin_dir(), "cairn-brickd"), os.X_OK)


needs_brickd = pytest.mark.skipif(not have_brickd(),
                                  reason="cairn-brickd is not built yet (bin/cairn-brickd missing)")


@pytest.fixture(scope="module")
def c5():
    c = Cluster(host=HOST, prefix="st-cli-", spare_inodes=None)
    try:
        c.start()
        yield c
    finally:
        c.close()


@pytest.fixture
def c6():
    """A cairnd of the test's own, for restarts and damage."""
    c = Cluster(host=HOST2, prefix="st-cli6-", spare_inodes=None)
    try:
        c.start()
        yield c
    finally:
        c.close()


def cli(c, *args):
    return c.cli(*args, check=False)


def out(r):
    return r.stdout + r.stderr


def mkdirs(c, *names):
    paths = [os.path.join(c.root, n) for n in names]
    for p in paths:
        os.makedirs(p, exist_ok=True)
    return paths


def restart(c):
    kill_pid(c.proc.pid)
    c.proc.wait(timeout=10)
    c.start()


def wait_for(fn, timeout=10.0, step=0.1):
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(step)
    return fn()


def cmdline(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return [a.decode() for a in f.read().split(b"\0") if a]


# ---- CLI basics ----

def test_version_and_help(c5):
    r = subprocess.run([exe("cairn"), "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and re.match(r"cairn \d+\.\d+\.\d+", r.stdout)
    r = cli(c5, "help")
    assert r.returncode == 0
    for word in ("volume create", "volume start", "volume stop", "volume delete", "volume info",
                 "volume status", "volume set", "volume get", "volume reset", "volume list"):
        assert word in r.stdout
    r = cli(c5, "--mode=script", "volume", "list")
    assert r.returncode == 0
    r = cli(c5, "volume", "frobnicate")
    assert r.returncode == 1 and "unrecognized word: frobnicate" in out(r)
    r = cli(c5, "peer", "probe", "x")  # an unknown host: a clear refusal (test_pool.py)
    assert r.returncode == 1 and out(r).startswith("peer probe: failed: "), out(r)


def test_no_daemon():
    # nothing listens on 127.0.0.6:24899
    assert not port_open(HOST2, 24899)
    r = subprocess.run([exe("cairn"), "--remote-host", f"{HOST2}:24899", "volume", "info"],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 1
    assert f"Connection failed. Please check if cairnd is running on {HOST2}:24899." in r.stderr
    # `volume set help` comes from the CLI's own registry when no daemon answers
    r = subprocess.run([exe("cairn"), "--remote-host", f"{HOST2}:24899", "volume", "set",
                        "help"], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0
    for o in OPTIONS:
        assert f"Option: {o}\n" in r.stdout
    # and so do `help` and `volume help`: every command with its usage
    for words in (["help"], ["volume", "help"]):
        r = subprocess.run([exe("cairn"), "--remote-host", f"{HOST2}:24899", *words],
                           capture_output=True, text=True, timeout=20)
        assert r.returncode == 0, r.stderr
        for line in ("volume create <NEW-VOLNAME> [replica <COUNT> [arbiter 1]]",
                     "volume profile <VOLNAME>", "volume heal <VOLNAME>", "peer probe",
                     "pool list", "volume set help"):
            assert line in r.stdout, (words, r.stdout)


def test_set_help_lists_every_option(c5):
    r = cli(c5, "volume", "set", "help")
    assert r.returncode == 0
    for o in OPTIONS:
        assert f"Option: {o}\n" in r.stdout
    block = r.stdout.split("Option: network.ping-timeout\n")[1].split("\n\n")[0]
    assert "Default Value: 10" in block and "Range: 1 - 1800" in block and "Live: yes" in block
    block = r.stdout.split("Option: diagnostics.brick-log-level\n")[1].split("\n\n")[0]
    assert "Choices: ERROR|WARNING|INFO|DEBUG|TRACE" in block
    block = r.stdout.split("Option: performance.io-thread-count\n")[1].split("\n\n")[0]
    assert "Live: no" in block and "Default Value: 16" in block


# ---- volume create: success and every refusal ----

def test_create_info_list_delete(c5):
    b1, b2 = mkdirs(c5, "cil-1", "cil-2")
    r = cli(c5, "volume", "create", "cil", f"{HOST}:{b1}", f"{HOST}:{b2}/", "force")
    assert r.returncode == 0, out(r)
    assert r.stdout == "volume create: cil: success: please start the volume to access data\n"
    c5.volumes["cil"] = [b1, b2]
    assert os.path.exists(os.path.join(b1, ".cairn", "brick.info"))
    r = cli(c5, "volume", "info", "cil")
    assert r.returncode == 0
    vid = re.search(r"^Volume ID: ([0-9a-f-]{36})$", r.stdout, re.M).group(1)
    assert r.stdout == (f"\nVolume Name: cil\nType: Distribute\nVolume ID: {vid}\n"
                        "Status: Created\nSnapshot Count: 0\nNumber of Bricks: 2\n"
                        "Transport-type: tcp\nBricks:\n"
                        f"Brick1: {HOST}:{b1}\nBrick2: {HOST}:{b2}\n")
    assert "cil\n" in cli(c5, "volume", "list").stdout
    assert "Volume Name: cil" in cli(c5, "volume", "info").stdout
    assert "Volume Name: cil" in cli(c5, "volume", "info", "all").stdout
    r = cli(c5, "volume", "status", "cil")
    assert r.returncode == 1 and "Volume cil is not started" in out(r)
    r = cli(c5, "volume", "delete", "cil")
    assert r.returncode == 0 and r.stdout == "volume delete: cil: success\n"
    del c5.volumes["cil"]
    assert not os.path.exists(os.path.join(b1, ".cairn", "brick.info"))
    r = cli(c5, "volume", "info", "cil")
    assert r.returncode == 1 and "Volume cil does not exist" in out(r)
    r = cli(c5, "volume", "delete", "cil")
    assert r.returncode == 1 and "volume delete: cil: failed: Volume cil does not exist" in out(r)
    # the bricks can be used again once the volume is gone
    r = cli(c5, "volume", "create", "cil2", f"{HOST}:{b1}", "force")
    assert r.returncode == 0, out(r)
    c5.volumes["cil2"] = [b1]
    assert cli(c5, "volume", "delete", "cil2").returncode == 0
    del c5.volumes["cil2"]


def same_fs_as_root(path):
    return os.stat(path).st_dev == os.stat("/").st_dev


def create_refusals(c):
    """(args, expected message part) for every refusal of volume create."""
    base, = mkdirs(c, "ref-base")
    b_ok, b_other, nested_parent = mkdirs(c, "ref-ok", "ref-other", "ref-np")
    inner, = mkdirs(c, "ref-np/inner")
    afile = os.path.join(c.root, "ref-file")
    open(afile, "w").close()
    dangling = os.path.join(c.root, "ref-dangling")
    if not os.path.islink(dangling):
        os.symlink(os.path.join(c.root, "ref-nowhere"), dangling)
    readonly, = mkdirs(c, "ref-ro")
    if readonly not in c.extra_mounts:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", readonly], check=True)
        c.extra_mounts.append(readonly)
    marked, = mkdirs(c, "ref-marked")
    os.makedirs(os.path.join(marked, ".cairn"), exist_ok=True)
    with open(os.path.join(marked, ".cairn", "brick.info"), "w") as f:
        f.write("volume=elsewhere\nvolume-id=00000000-0000-0000-0000-0000000000aa\n"
                "brick-id=00000000-0000-0000-0000-0000000000bb\n")
    # an existing volume owning `base`, for the overlap checks
    r = cli(c, "volume", "create", "refbase", f"{HOST}:{base}", "force")
    assert r.returncode == 0, out(r)
    c.volumes["refbase"] = [base]
    sub, = mkdirs(c, "ref-base/sub")
    h = HOST
    cases = [
        (["bad/name", f"{h}:{b_ok}"], "Volume name bad/name is invalid"),
        (["all", f"{h}:{b_ok}"], "Volume name all is reserved"),
        (["x" * 65, f"{h}:{b_ok}"], "Volume name must be 1 to 64 characters long"),
        (["refbase", f"{h}:{b_ok}"], "Volume refbase already exists"),
        (["v", f"{h}:relative/path"], f"wrong brick type: {h}:relative/path, use "
                                      "<HOSTNAME>:<export-dir-abs-path>"),
        (["v", b_ok], f"wrong brick type: {b_ok}"),
        (["v", f"{h}:{b_ok}/../ref-other"], "wrong brick type"),
        (["v", f"{h}:{b_ok}", f"{h}:{b_ok}"], f"Found duplicate exports {h}:{b_ok}"),
        (["v", f"{HOST2}:{b_ok}"], f"Host {HOST2} is not in 'Peer in Cluster' state"),
        (["v", f"no-such-host.invalid:{b_ok}"], "Host no-such-host.invalid cannot be resolved"),
        (["v", f"{h}:{afile}"], f"Brick path {h}:{afile} is not a directory"),
        (["v", f"{h}:{afile}/sub/brick"], f"Cannot create brick directory {h}:{afile}/sub/brick: "
                                          f"{afile} is not a directory"),
        (["v", f"{h}:{dangling}"], f"Cannot create brick directory {h}:{dangling}: it is a "
                                   "dangling symbolic link"),
        (["v", f"{h}:{readonly}/brick"], f"Cannot create brick directory {h}:{readonly}/brick in "
                                         f"{readonly}: Read-only file system"),
        # one brick missing and one refused: nothing is made
        (["v", f"{h}:{c.root}/never/made", f"{h}:{afile}"], f"{afile} is not a directory"),
        (["v", f"{h}:{base}"], f"{h}:{base} is already part of volume refbase"),
        (["v", f"{h}:{sub}"], f"The brick {h}:{sub} is inside the brick {h}:{base} of volume "
                              "refbase"),
        (["v", f"{h}:{c.root}"], f"The brick {h}:{c.root} contains the brick {h}:{base} of "
                                 "volume refbase"),
        (["v", f"{h}:{nested_parent}", f"{h}:{inner}"], "overlaps with the brick"),
        (["v", f"{h}:{marked}"], f"{h}:{marked} is already part of a volume (elsewhere"),
        (["v", "replica", "3", f"{h}:{b_ok}", f"{h}:{b_other}"],
         "Incorrect number of bricks supplied 2 with count 3"),
        (["v", "replica", "2", "arbiter", "1", f"{h}:{b_ok}", f"{h}:{b_other}"],
         "For arbiter configuration, replica count must be 3"),
        (["v", "replica", "1", f"{h}:{b_ok}"], "replica count must be a number from 2 to 16"),
        (["v", "disperse", "3", f"{h}:{b_ok}"], "Incorrect number of bricks supplied 1 with count 3"),
        (["v", "disperse", "3", "redundancy", "2", f"{h}:{b_ok}", f"{h}:{b_other}", f"{h}:{sub}"],
         "redundancy must be less than 2 for a disperse 3 volume"),
        (["v", "replica", "2", "disperse", "3", f"{h}:{b_ok}"], "cannot be combined"),
        (["v", "stripe", "2", f"{h}:{b_ok}", f"{h}:{b_other}"], "stripe volumes are not supported"),
        (["v", "transport", "rdma", f"{h}:{b_ok}"], "transport rdma is not supported"),
    ]
    return cases, [b_ok, b_other, nested_parent, inner, sub]


def test_create_refusals(c5):
    cases, dirs = create_refusals(c5)
    before = cli(c5, "volume", "list").stdout
    for args, expect in cases:
        r = cli(c5, "volume", "create", *args, "force")
        assert r.returncode == 1, (args, out(r))
        assert expect in out(r), (args, out(r))
        assert out(r).count("\n") == 1, out(r)  # one clear line
        name = args[0]
        if "invalid" not in expect and "reserved" not in expect and "characters" not in expect:
            assert out(r).startswith(f"volume create: {name}: failed: "), out(r)
        # no partial state: no new volume, no marker written on any brick,
        # no brick directory made
        assert cli(c5, "volume", "list").stdout == before
        for d in dirs:
            assert not os.path.exists(os.path.join(d, ".cairn", "brick.info")), (args, d)
        assert not os.path.exists(os.path.join(c5.root, "never")), args
    # usage errors
    for args in (["volume", "create"], ["volume", "create", "v"],
                 ["volume", "create", "v", "force"]):
        r = cli(c5, *args)
        assert r.returncode == 1 and "Usage:\nvolume create" in out(r), out(r)


def test_create_makes_missing_brick_directories(c5):
    """As GlusterFS does: a missing brick directory is made, with its
    parents, by the server that owns it."""
    top = os.path.join(c5.root, "made")
    b1, b2 = os.path.join(top, "a", "b", "brick1"), os.path.join(top, "brick2")
    r = cli(c5, "volume", "create", "mk", f"{HOST}:{b1}", f"{HOST}:{b2}", "force")
    assert r.returncode == 0 and r.stdout == ("volume create: mk: success: please start the "
                                              "volume to access data\n"), out(r)
    c5.volumes["mk"] = [b1, b2]
    for b in (b1, b2, os.path.join(top, "a"), os.path.join(top, "a", "b")):
        assert os.path.isdir(b) and stat.S_IMODE(os.stat(b).st_mode) == 0o755, b
    for b in (b1, b2):
        with open(os.path.join(b, ".cairn", "brick.info")) as f:
            assert f.read().startswith("volume=mk\n")
    if have_brickd():
        assert cli(c5, "volume", "start", "mk").returncode == 0
        assert all(pid for _, _, _, pid in c5.brick_status("mk"))
        c5.stop_volume("mk")
    assert cli(c5, "volume", "delete", "mk").returncode == 0
    del c5.volumes["mk"]
    assert os.path.isdir(b1)  # the data, and the directory, stay


def test_create_missing_brick_on_root_partition(c5):
    """The root file system check applies to the directory a missing brick
    will be made in: `force` is needed, and nothing is made without it."""
    if not same_fs_as_root(c5.root):
        pytest.skip("/tmp is not on the root file system here")
    b = os.path.join(c5.root, "rootmiss", "brick")
    r = cli(c5, "volume", "create", "rootm", f"{HOST}:{b}")
    assert r.returncode == 1 and "is being created in the root partition" in out(r), out(r)
    assert not os.path.exists(os.path.join(c5.root, "rootmiss"))
    r = cli(c5, "volume", "create", "rootm", f"{HOST}:{b}", "force")
    assert r.returncode == 0, out(r)
    c5.volumes["rootm"] = [b]
    assert os.path.isdir(b)
    assert cli(c5, "volume", "delete", "rootm").returncode == 0
    del c5.volumes["rootm"]


def test_create_brick_where_cairnd_may_not_write():
    """A cairnd run by a user other than root cannot make a brick in a
    directory of root: refused, saying so; one in its own directory is
    made."""
    c = Cluster(host=HOST2, prefix="st-cli-user-", uid=1000, spare_inodes=None)
    try:
        c.start()
        rootdir, = mkdirs(c, "root-owned")
        own, = mkdirs(c, "user-owned")
        os.chown(own, 1000, 1000)
        r = cli(c, "volume", "create", "uv", f"{HOST2}:{rootdir}/brick", "force")
        assert r.returncode == 1, out(r)
        assert out(r) == (f"volume create: uv: failed: Cannot create brick directory "
                          f"{HOST2}:{rootdir}/brick in {rootdir}: Permission denied\n")
        assert not os.path.exists(os.path.join(rootdir, "brick"))
        r = cli(c, "volume", "create", "uv", f"{HOST2}:{own}/new/brick", "force")
        assert r.returncode == 0, out(r)
        c.volumes["uv"] = [f"{own}/new/brick"]
        st = os.stat(os.path.join(own, "new", "brick"))
        assert (st.st_uid, stat.S_ISDIR(st.st_mode)) == (1000, True)
    finally:
        c.close()


def test_create_root_partition(c5):
    b, = mkdirs(c5, "rootfs")
    if not same_fs_as_root(b):
        pytest.skip("/tmp is not on the root file system here")
    r = cli(c5, "volume", "create", "rootp", f"{HOST}:{b}")
    assert r.returncode == 1
    assert out(r) == (f"volume create: rootp: failed: The brick {HOST}:{b} is being created in "
                      "the root partition. It is recommended that you don't use the system's "
                      "root partition for storage backend. Or use 'force' at the end of the "
                      "command if you want to override this behavior.\n")
    assert "rootp" not in cli(c5, "volume", "list").stdout
    r = cli(c5, "volume", "create", "rootp", f"{HOST}:{b}", "force")
    assert r.returncode == 0, out(r)
    c5.volumes["rootp"] = [b]
    assert cli(c5, "volume", "delete", "rootp").returncode == 0
    del c5.volumes["rootp"]


def test_localhost_names_this_server():
    """A cairnd listening on 127.0.0.1 takes bricks named localhost."""
    c = Cluster(host="127.0.0.1", port=25202, prefix="st-cli1-", spare_inodes=None)
    try:
        c.start()
        b, = mkdirs(c, "lh")
        r = cli(c, "volume", "create", "lh", f"localhost:{b}", "force")
        assert r.returncode == 0, out(r)
        c.volumes["lh"] = [b]
        assert f"Brick1: localhost:{b}" in cli(c, "volume", "info", "lh").stdout
        b2, = mkdirs(c, "lh2")
        r = cli(c, "volume", "create", "lh2", f"{HOST}:{b2}", "force")
        assert r.returncode == 1 and "is not in 'Peer in Cluster' state" in out(r)
    finally:
        c.close()


# ---- options ----

def test_options(c5):
    b, = mkdirs(c5, "opt-1")
    assert cli(c5, "volume", "create", "optv", f"{HOST}:{b}", "force").returncode == 0
    c5.volumes["optv"] = [b]
    r = cli(c5, "volume", "set", "optv", "network.ping-timeout", "5000")
    assert r.returncode == 1
    assert out(r) == ("volume set: failed: '5000' is out of range [1 - 1800] for "
                      "network.ping-timeout\n")
    r = cli(c5, "volume", "set", "optv", "no.such-option", "1")
    assert r.returncode == 1 and "volume set: failed: option : no.such-option does not exist" \
        in out(r)
    r = cli(c5, "volume", "set", "optv", "diagnostics.brick-log-level", "LOUD")
    assert r.returncode == 1 and "ERROR|WARNING|INFO|DEBUG|TRACE" in out(r)
    r = cli(c5, "volume", "set", "optv", "performance.io-thread-count", "0")
    assert r.returncode == 1 and "out of range [1 - 64]" in out(r)
    r = cli(c5, "volume", "set", "nosuchvol", "network.ping-timeout", "5")
    assert r.returncode == 1 and "volume set: failed: Volume nosuchvol does not exist" in out(r)
    r = cli(c5, "volume", "set", "optv", "network.ping-timeout")
    assert r.returncode == 1 and "Usage:" in out(r)
    # a failing pair leaves the other pairs unset too
    r = cli(c5, "volume", "set", "optv", "network.ping-timeout", "7", "auth.allow", "a b")
    assert r.returncode == 1
    assert "Options Reconfigured" not in cli(c5, "volume", "info", "optv").stdout

    for k, v in (("network.ping-timeout", "20"), ("diagnostics.client-log-level", "debug"),
                 ("auth.allow", "127.0.0.*,10.0.0.0/8"), ("client.lease-cache-timeout", "2m")):
        r = cli(c5, "volume", "set", "optv", k, v)
        assert r.returncode == 0 and r.stdout == "volume set: success\n", out(r)
    info = cli(c5, "volume", "info", "optv").stdout
    assert info.endswith("Options Reconfigured:\nnetwork.ping-timeout: 20\n"
                         "diagnostics.client-log-level: DEBUG\n"
                         "auth.allow: 127.0.0.*,10.0.0.0/8\nclient.lease-cache-timeout: 120\n"), info
    r = cli(c5, "volume", "get", "optv", "network.ping-timeout")
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["Option", "Value"]
    assert lines[2].split() == ["network.ping-timeout", "20"]
    r = cli(c5, "volume", "get", "optv", "all")
    rows = {ln.split()[0]: ln.split()[1:] for ln in r.stdout.splitlines()[2:]}
    assert set(OPTIONS) <= set(rows)
    assert set(rows) == help_options(c5)
    assert rows["performance.io-thread-count"] == ["16", "(DEFAULT)"]
    assert rows["network.ping-timeout"] == ["20"]
    r = cli(c5, "volume", "get", "optv", "bogus.key")
    assert r.returncode == 1 and "bogus.key does not exist" in out(r)
    r = cli(c5, "volume", "get", "nosuchvol", "all")
    assert r.returncode == 1 and "Volume nosuchvol does not exist" in out(r)

    r = cli(c5, "volume", "reset", "optv", "network.ping-timeout")
    assert r.returncode == 0 and r.stdout == "volume reset: success: reset volume successful\n"
    assert "network.ping-timeout" not in cli(c5, "volume", "info", "optv").stdout
    assert "auth.allow" in cli(c5, "volume", "info", "optv").stdout
    r = cli(c5, "volume", "reset", "optv", "bogus.key")
    assert r.returncode == 1 and "bogus.key does not exist" in out(r)
    assert cli(c5, "volume", "reset", "optv").returncode == 0
    assert "Options Reconfigured" not in cli(c5, "volume", "info", "optv").stdout
    assert cli(c5, "volume", "set", "optv", "network.ping-timeout", "30").returncode == 0
    assert cli(c5, "volume", "reset", "optv", "all").returncode == 0
    assert "Options Reconfigured" not in cli(c5, "volume", "info", "optv").stdout


# ---- settings from GlusterFS ----

def help_options(c):
    """The options `volume set help` lists with a value of their own (not the
    GlusterFS names of other options, nor user.*)."""
    r = cli(c, "volume", "set", "help")
    names = set()
    for block in r.stdout.split("\n\n"):
        m = re.match(r"Option: (\S+)\n", block)
        if m and "Same as:" not in block and m.group(1) != "user.*":
            names.add(m.group(1))
    return names


# The options the seed-000 thread's volume had set ("Options Reconfigured"
# of its `gluster volume info`), in that order.
SEED_000 = """\
performance.rda-cache-limit: 256MB
network.inode-lru-limit: 50000
server.outstanding-rpc-limit: 256
performance.client-io-threads: true
nfs.disable: on
transport.address-family: inet
client.event-threads: 8
cluster.eager-lock: true
cluster.favorite-child-policy: size
cluster.lookup-optimize: true
cluster.readdir-optimize: true
cluster.use-compound-fops: true
diagnostics.brick-log-level: ERROR
diagnostics.client-log-level: ERROR
features.cache-invalidation-timeout: 600
features.cache-invalidation: true
network.ping-timeout: 15
performance.cache-invalidation: true
performance.cache-max-file-size: 6MB
performance.cache-refresh-timeout: 60
performance.cache-size: 1024MB
performance.io-thread-count: 16
performance.md-cache-timeout: 600
performance.stat-prefetch: true
performance.write-behind-window-size: 256MB
server.event-threads: 8
transport.listen-backlog: 2048
"""
SEED_PAIRS = [tuple(ln.split(": ")) for ln in SEED_000.splitlines()]
# what `volume get` shows for a value given in another spelling
SHOWN = {"true": "on"}


def get_all(c, vol):
    r = cli(c, "volume", "get", vol, "all")
    assert r.returncode == 0, out(r)
    return {ln.split()[0]: ln.split(None, 1)[1] for ln in r.stdout.splitlines()[2:]}


def seed_volume(c, name):
    b, = mkdirs(c, name)
    assert cli(c, "volume", "create", name, f"{HOST}:{b}", "force").returncode == 0
    c.volumes[name] = [b]


def check_seed_values(c, vol):
    rows = get_all(c, vol)
    for k, v in SEED_PAIRS:
        shown = rows[k].split()
        assert shown[0] == SHOWN.get(v, v), (k, rows[k])
        assert "(DEFAULT)" not in rows[k]


def test_seed_list_in_one_command(c5):
    seed_volume(c5, "seed1")
    args = [x for kv in SEED_PAIRS for x in kv]
    r = cli(c5, "volume", "set", "seed1", *args)
    assert r.returncode == 0 and r.stdout == "volume set: success\n", out(r)
    check_seed_values(c5, "seed1")
    # volume info lists them, as GlusterFS's does
    info = cli(c5, "volume", "info", "seed1").stdout
    for k, _ in SEED_PAIRS:
        assert f"\n{k}: " in info


def test_seed_list_pair_by_pair(c5):
    seed_volume(c5, "seed2")
    for k, v in SEED_PAIRS:
        r = cli(c5, "volume", "set", "seed2", k, v)
        assert r.returncode == 0 and r.stdout == "volume set: success\n", (k, v, out(r))
    check_seed_values(c5, "seed2")


def test_no_effect_options_say_why(c5):
    r = cli(c5, "volume", "set", "help")
    block = r.stdout.split("Option: performance.nl-cache\n")[1].split("\n\n")[0]
    assert "Description: (no effect in Cairn: " in block
    seed_volume(c5, "noeff")
    assert cli(c5, "volume", "set", "noeff", "performance.nl-cache", "on").returncode == 0
    rows = get_all(c5, "noeff")
    assert rows["performance.nl-cache"].startswith("on (no effect in Cairn: ")
    assert rows["performance.parallel-readdir"].startswith("off (DEFAULT) (no effect in Cairn: ")
    assert "no effect" not in rows["network.ping-timeout"]
    # values are still checked
    r = cli(c5, "volume", "set", "noeff", "performance.nl-cache", "maybe")
    assert r.returncode == 1 and "not a valid boolean" in out(r)


def test_bad_pairs_all_reported_none_set(c5):
    seed_volume(c5, "badpairs")
    r = cli(c5, "volume", "set", "badpairs", "network.ping-timeout", "7",
            "performance.nl-cache", "sometimes", "no.such-option", "1",
            "performance.io-thread-count", "8")
    assert r.returncode == 1
    lines = out(r).splitlines()
    assert len(lines) == 2, lines
    assert all(ln.startswith("volume set: failed: ") for ln in lines)
    assert "performance.nl-cache" in lines[0] and "no.such-option" in lines[1]
    assert "Options Reconfigured" not in cli(c5, "volume", "info", "badpairs").stdout


def test_refused_gluster_values(c5):
    seed_volume(c5, "refv")
    r = cli(c5, "volume", "set", "refv", "features.read-only", "on")
    assert r.returncode == 1 and "read-only volume is not available yet" in out(r)
    assert cli(c5, "volume", "set", "refv", "features.read-only", "off").returncode == 0
    assert cli(c5, "volume", "set", "refv", "cluster.quorum-type", "auto").returncode == 0
    r = cli(c5, "volume", "set", "refv", "storage.owner-uid", "107")
    assert r.returncode == 1 and "chown" in out(r)
    rows = get_all(c5, "refv")
    assert rows["features.read-only"].startswith("off ")
    assert rows["cluster.quorum-type"] == "auto"


def test_gluster_name_of_cairn_option_and_user_keys(c5):
    seed_volume(c5, "alias")
    r = cli(c5, "volume", "set", "alias", "features.lease-lock-recall-timeout", "30",
            "user.cifs", "disable")
    assert r.returncode == 0, out(r)
    rows = get_all(c5, "alias")
    assert rows["features.lease-recall-timeout"] == "30"
    assert rows["user.cifs"] == "disable"
    r = cli(c5, "volume", "get", "alias", "features.lease-lock-recall-timeout")
    assert r.returncode == 0 and r.stdout.splitlines()[2].split() == [
        "features.lease-recall-timeout", "30"]
    assert cli(c5, "volume", "reset", "alias", "user.cifs").returncode == 0
    assert "user.cifs" not in get_all(c5, "alias")


def test_auth_allow_entries_that_never_match_refused(c5):
    seed_volume(c5, "authv")
    for bad in ("on", "*.example.com", "cairn-no-such-host.invalid"):
        t0 = time.time()
        r = cli(c5, "volume", "set", "authv", "auth.allow", bad)
        assert r.returncode == 1 and f"'{bad}'" in out(r), out(r)
        assert time.time() - t0 < 10
        r = cli(c5, "volume", "set", "authv", "auth.reject", bad)
        assert r.returncode == 1 and f"'{bad}'" in out(r), out(r)
    assert "Options Reconfigured" not in cli(c5, "volume", "info", "authv").stdout
    assert cli(c5, "volume", "set", "authv", "auth.allow", "127.0.0.*").returncode == 0
    assert get_all(c5, "authv")["auth.allow"] == "127.0.0.*"
    # a host name is stored as the addresses it resolves to, which bricks match
    r = cli(c5, "volume", "set", "authv", "auth.allow", "localhost")
    assert r.returncode == 0, out(r)
    assert "127.0.0.1" in get_all(c5, "authv")["auth.allow"].split(",")


# ---- daemon life ----

def test_options_survive_restart(c6):
    b, = mkdirs(c6, "persist")
    assert cli(c6, "volume", "create", "pv", f"{HOST2}:{b}", "force").returncode == 0
    c6.volumes["pv"] = [b]
    assert cli(c6, "volume", "set", "pv", "network.ping-timeout", "42").returncode == 0
    before = cli(c6, "volume", "info", "pv").stdout
    restart(c6)
    assert cli(c6, "volume", "info", "pv").stdout == before
    assert "network.ping-timeout: 42" in before


def test_second_cairnd_refused(c6):
    r = subprocess.run([exe("cairnd"), "--foreground", "--listen", f"{HOST2}:25204",
                        "--workdir", c6.workdir], capture_output=True, text=True, timeout=20)
    assert r.returncode == 1
    assert f"another cairnd (pid {c6.proc.pid}) is running with workdir" in r.stderr


def test_damaged_store_refused(c6):
    b, = mkdirs(c6, "dmg")
    assert cli(c6, "volume", "create", "dv", f"{HOST2}:{b}", "force").returncode == 0
    c6.volumes["dv"] = [b]
    kill_pid(c6.proc.pid)
    c6.proc.wait(timeout=10)
    info = os.path.join(c6.workdir, "vols", "dv", "info")
    with open(info) as f:
        text = f.read()
    with open(info, "w") as f:
        f.write(text.replace("status=Created", "status=Started"))
    with pytest.raises(ClusterError) as e:
        c6.start()
    assert f"{info} is corrupted: checksum mismatch" in str(e.value)
    with open(info, "w") as f:
        f.write(text[: len(text) // 2])
    with pytest.raises(ClusterError) as e:
        c6.start()
    assert "is corrupted" in str(e.value)
    with open(info, "w") as f:
        f.write(text)
    c6.start()
    assert "Volume Name: dv" in cli(c6, "volume", "info", "dv").stdout


def test_daemonize(tmp_path):
    wd = str(tmp_path / "wd")
    r = subprocess.run([exe("cairnd"), "--listen", f"{HOST2}:25203", "--workdir", wd],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    pidfile = os.path.join(wd, "cairnd.pid")
    pid = int(open(pidfile).read())
    try:
        assert alive(pid)
        assert os.getsid(pid) != os.getsid(0)  # detached into its own session
        assert port_open(HOST2, 25203)
        r = subprocess.run([exe("cairn"), "--remote-host", f"{HOST2}:25203", "volume", "list"],
                           capture_output=True, text=True, timeout=20)
        assert r.returncode == 0 and "No volumes present in cluster" in r.stdout
        assert "cairnd 0.1.0 starting" in open(os.path.join(wd, "cairnd.log")).read()
        # a second daemonized start fails and says why
        r = subprocess.run([exe("cairnd"), "--listen", f"{HOST2}:25205", "--workdir", wd],
                           capture_output=True, text=True, timeout=20)
        assert r.returncode == 1 and "another cairnd" in r.stderr
    finally:
        os.kill(pid, signal.SIGTERM)
        assert wait_for(lambda: not alive(pid), 10)
    assert not os.path.exists(pidfile)


def test_bad_daemon_args(tmp_path):
    for args in (["--listen", "127.0.0.6:99999"], ["--log-level", "LOUD"],
                 ["--brick-ports", "9-1"], ["stray"]):
        r = subprocess.run([exe("cairnd"), "--foreground", "--workdir", str(tmp_path)] + args,
                           capture_output=True, text=True, timeout=20)
        assert r.returncode == 1 and r.stderr, args


# ---- bricks (need cairn-brickd) ----

def brick_procs(c, name):
    return c.brick_status(name)


def check_brick_running(host, path, port, pid):
    assert pid and alive(pid)
    argv = cmdline(pid)
    assert argv[0].endswith("cairn-brickd")
    assert argv[argv.index("--brick-path") + 1] == path
    assert argv[argv.index("--listen") + 1].endswith(f":{port}")
    assert port_open(host, port)


@needs_brickd
def test_start_stop_status(c5):
    b1, b2 = mkdirs(c5, "ss-1", "ss-2")
    assert cli(c5, "volume", "create", "ss", f"{HOST}:{b1}", f"{HOST}:{b2}",
               "force").returncode == 0
    c5.volumes["ss"] = [b1, b2]
    r = cli(c5, "volume", "stop", "ss")
    assert r.returncode == 1 and "volume stop: ss: failed: Volume ss is not in the started " \
        "state" in out(r)
    r = cli(c5, "volume", "start", "ss")
    assert r.returncode == 0 and r.stdout == "volume start: ss: success\n", out(r)
    assert "Status: Started" in cli(c5, "volume", "info", "ss").stdout
    r = cli(c5, "volume", "start", "ss")
    assert r.returncode == 1 and "volume start: ss: failed: Volume ss already started" in out(r)
    st = brick_procs(c5, "ss")
    assert [s[1] for s in st] == [b1, b2]
    for host, path, port, pid in st:
        check_brick_running(host, path, port, pid)
    assert st[0][2] != st[1][2]
    r = cli(c5, "volume", "status", "ss")
    assert "Cairn process" in r.stdout and "TCP Port  RDMA Port  Online  Pid" in r.stdout
    r = cli(c5, "volume", "status", "ss", "detail")
    assert r.returncode == 0 and "Online               : Y" in r.stdout
    assert "Total Disk Space" in r.stdout
    r = cli(c5, "volume", "status", "all")
    assert "Status of volume: ss" in r.stdout
    r = cli(c5, "volume", "delete", "ss")
    assert r.returncode == 1 and "Volume ss has been started.Volume needs to be stopped " \
        "before deletion." in out(r)
    # live option change while bricks run
    assert cli(c5, "volume", "set", "ss", "diagnostics.brick-log-level", "DEBUG").returncode == 0
    r = cli(c5, "volume", "stop", "ss")
    assert r.returncode == 0 and r.stdout == "volume stop: ss: success\n"
    for _, _, _, pid in st:
        assert not alive(pid)
    r = cli(c5, "volume", "status", "ss")
    assert r.returncode == 1 and "Volume ss is not started" in out(r)
    assert "Status: Stopped" in cli(c5, "volume", "info", "ss").stdout
    # start again: non-live options reach the new processes
    assert cli(c5, "volume", "set", "ss", "performance.io-thread-count", "4").returncode == 0
    assert cli(c5, "volume", "start", "ss").returncode == 0
    for host, path, port, pid in brick_procs(c5, "ss"):
        argv = cmdline(pid)
        assert argv[argv.index("--threads") + 1] == "4"
        assert argv[argv.index("--log-level") + 1] == "DEBUG"
    assert cli(c5, "volume", "stop", "ss").returncode == 0
    assert cli(c5, "volume", "delete", "ss").returncode == 0
    del c5.volumes["ss"]


@needs_brickd
def test_start_refuses_unmarked_brick(c5):
    b, = mkdirs(c5, "unm")
    assert cli(c5, "volume", "create", "unm", f"{HOST}:{b}", "force").returncode == 0
    c5.volumes["unm"] = [b]
    os.unlink(os.path.join(b, ".cairn", "brick.info"))  # as if the disk were not mounted
    r = cli(c5, "volume", "start", "unm")
    assert r.returncode == 1 and "is its file system mounted?" in out(r)
    assert "Status: Created" in cli(c5, "volume", "info", "unm").stdout
    r = cli(c5, "volume", "start", "unm", "force")
    assert r.returncode == 0, out(r)
    assert cli(c5, "volume", "stop", "unm").returncode == 0
    assert cli(c5, "volume", "delete", "unm").returncode == 0
    del c5.volumes["unm"]


@needs_brickd
def test_dead_brick_is_restarted(c6):
    b, = mkdirs(c6, "dead")
    c6.create_volume("dead", [b])
    (_, _, port, pid), = c6.brick_status("dead")
    os.kill(pid, signal.SIGKILL)

    def new_brick():
        (_, _, p, q), = c6.brick_status("dead")
        return (p, q) if q and q != pid and alive(q) else None
    got = wait_for(new_brick, 15)
    assert got, c6.tail(c6.logfile)
    assert got[0] == port  # it keeps its port
    check_brick_running(HOST2, b, got[0], got[1])
    assert "died with signal 9" in open(c6.logfile).read()


@needs_brickd
def test_bricks_come_back_after_restart(c6):
    b1, b2 = mkdirs(c6, "back-1", "back-2")
    c6.create_volume("back", [b1, b2])
    before = c6.brick_status("back")
    # orderly restart: cairnd stops its bricks and starts them again
    restart(c6)
    after = wait_for(lambda: all(s[3] for s in c6.brick_status("back")) and
                     c6.brick_status("back"), 15)
    for host, path, port, pid in after:
        check_brick_running(host, path, port, pid)
    for _, _, _, pid in before:
        assert not alive(pid)
    # crash: bricks outlive cairnd; the next cairnd replaces them
    os.kill(c6.proc.pid, signal.SIGKILL)
    c6.proc.wait(timeout=10)
    for _, _, _, pid in after:
        assert alive(pid)
    c6.start()
    again = wait_for(lambda: all(s[3] for s in c6.brick_status("back")) and
                     c6.brick_status("back"), 15)
    for host, path, port, pid in again:
        check_brick_running(host, path, port, pid)
    for _, _, _, pid in after:
        assert wait_for(lambda: not alive(pid), 10)
    assert [s[2] for s in again] == [s[2] for s in after]  # same ports
