"""`cairn volume import` against a real GlusterFS 10 (Debian's
glusterfs-server): a replica 3 GlusterFS volume (imported by a pool of three
cairnd, one brick each), a 2 x 3 one on one server and a 2 x 3 one whose
sets span a pool of three cairnd are made and filled through
GlusterFS's own FUSE client, one brick misses changes (its glusterfsd
killed, the volume stopped before any heal), and the stopped bricks are
imported in place. Afterwards the Cairn mount must show every name and
byte of the tree, no file may have been copied (inode numbers on the
bricks unchanged), no GlusterFS name may remain, and Cairn's heal must
make the three bricks identical.

glusterd refuses bricks on loopback addresses, so the test makes a network
namespace of its own (`ip netns add`, a veth pair inside it) and runs
glusterd, its bricks and its FUSE client there (nsenter --net), with its
own working, run and log directories and CLI socket (a glusterd.vol of its
own), so it shares nothing with a glusterd on the machine, whether or not
the tests run under `unshare -n`. scripts/test.sh installs glusterfs-server and sets
CAIRN_TEST_GLUSTERFS=1: then a missing GlusterFS fails the test instead of
skipping it.
"""

import hashlib
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import time

import pytest

import replica_pool
from cairn_cluster import Cluster, detach, kill_pid, mounted

ADDR = "10.77.31.1"
VETH = ("cimpa", "cimpb")
CAIRN_HOST = "127.0.0.61"
GVOL = "gimp"


def _need_gluster():
    missing = [p for p in ("glusterd", "gluster", "glusterfs") if shutil.which(p) is None]
    if not missing:
        return
    why = f"GlusterFS is not installed ({', '.join(missing)} missing; apt-get install glusterfs-server)"
    if os.environ.get("CAIRN_TEST_GLUSTERFS") == "1":
        pytest.fail(why)
    pytest.skip(why)


def _pids_under(root):
    """GlusterFS processes (glusterd, glusterfsd, glusterfs) whose command
    line names something under root."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]).startswith(b"gluster") and \
                any(root.encode() in a for a in argv):
            out.append(int(d))
    return out


class Gluster:
    def __init__(self, root):
        self.root = root
        self.work = os.path.join(root, "glusterd")
        self.sock = os.path.join(self.work, "glusterd.socket")
        self.bricks = [os.path.join(root, f"gb{i}") for i in range(3)]
        self.mnt = os.path.join(root, "gmnt")
        # glusterd, its bricks and its FUSE client run in a network namespace
        # of their own (entered with nsenter, so mounts stay shared)
        self.ns = f"cairn-import-{os.getpid()}"
        self.prefix = ["nsenter", f"--net=/run/netns/{self.ns}"]

    def start(self):
        for sub in ("lib", "run", "log"):
            os.makedirs(os.path.join(self.work, sub), exist_ok=True)
        if not os.path.exists(f"/run/netns/{self.ns}"):
            subprocess.run(["ip", "netns", "add", self.ns], check=True)
            ip = ["ip", "netns", "exec", self.ns, "ip"]
            subprocess.run(ip + ["link", "set", "lo", "up"], check=True)
            # made inside the namespace: nothing outside it gets a link
            subprocess.run(ip + ["link", "add", VETH[0], "type", "veth", "peer", "name",
                                 VETH[1]], check=True)
            subprocess.run(ip + ["addr", "add", f"{ADDR}/24", "dev", VETH[0]], check=True)
            for v in VETH:
                subprocess.run(ip + ["link", "set", v, "up"], check=True)
        vol = os.path.join(self.work, "glusterd.vol")
        with open(vol, "w") as f:
            f.write(f"""volume management
    type mgmt/glusterd
    option working-directory {self.work}/lib
    option run-directory {self.work}/run
    option logging-directory {self.work}/log
    option glusterd-sockfile {self.sock}
    option transport-type socket
    option transport.socket.bind-address {ADDR}
    option ping-timeout 0
    option event-threads 1
end-volume
""")
        subprocess.run(self.prefix + ["glusterd", "-f", vol, "-p", os.path.join(self.work, "glusterd.pid"),
                        "-l", os.path.join(self.work, "log", "glusterd.log")], check=True,
                       timeout=60)
        end = time.time() + 30
        while self.cli("pool", "list", check=False).returncode != 0:
            if time.time() > end:
                raise AssertionError("glusterd does not answer: " + self.log())
            time.sleep(0.3)

    def log(self):
        try:
            with open(os.path.join(self.work, "log", "glusterd.log")) as f:
                return f.read()[-3000:]
        except OSError:
            return ""

    def cli(self, *args, check=True):
        r = subprocess.run(self.prefix + ["gluster", "--mode=script", f"--glusterd-sock={self.sock}", *args],
                           capture_output=True, text=True, timeout=120)
        if check and r.returncode != 0:
            raise AssertionError(f"gluster {' '.join(args)}: {r.stdout}{r.stderr}")
        return r

    def brick_pid(self, brick):
        for pid in _pids_under(brick):
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if b"--brick-name" in argv and argv[argv.index(b"--brick-name") + 1] == brick.encode():
                return pid
        return None

    def stop_glusterd(self):
        try:
            with open(os.path.join(self.work, "glusterd.pid")) as f:
                kill_pid(int(f.read().strip()))
        except (OSError, ValueError):
            pass

    def close(self):
        detach(self.mnt)
        for pid in _pids_under(self.root):
            kill_pid(pid, wait=2)
        subprocess.run(["ip", "netns", "delete", self.ns], stderr=subprocess.DEVNULL,
                       check=False)


@pytest.fixture(scope="module")
def env():
    _need_gluster()
    c = Cluster(host=CAIRN_HOST, prefix="st-import-")
    g = Gluster(c.root)
    try:
        c.start()
        yield c, g
    finally:
        g.close()
        c.close()


# ---- the tree ----

def tree(top, skip=(".cairn",)):
    """path -> what an application sees of it (type, mode, owner, bytes or
    target, user xattrs, mtime for files), and the hard link groups."""
    out, inodes = {}, {}
    for d, dirs, files in os.walk(top):
        rel_d = os.path.relpath(d, top)
        if rel_d == ".":
            dirs[:] = [x for x in dirs if x not in skip]
        for n in sorted(dirs + files):
            p = os.path.join(d, n)
            rel = os.path.normpath(os.path.join(rel_d, n))
            st = os.lstat(p)
            xattrs = {}
            if not stat.S_ISLNK(st.st_mode):
                xattrs = {x: os.getxattr(p, x, follow_symlinks=False)
                          for x in os.listxattr(p, follow_symlinks=False) if x.startswith("user.")}
            e = {"mode": st.st_mode, "uid": st.st_uid, "gid": st.st_gid, "xattrs": xattrs}
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    e["sha"] = hashlib.sha256(f.read()).hexdigest()
                e["size"] = st.st_size
                e["mtime"] = st.st_mtime_ns
                inodes.setdefault(st.st_ino, []).append(rel)
            elif stat.S_ISLNK(st.st_mode):
                e["target"] = os.readlink(p)
            out[rel] = e
    links = sorted(sorted(v) for v in inodes.values() if len(v) > 1)
    return out, links


def fill(m):
    rng = random.Random(31)
    os.makedirs(os.path.join(m, "a/b/c"))
    os.makedirs(os.path.join(m, "empty"))
    for i, size in enumerate([0, 1, 4095, 4096, 65537, 1 << 20, (3 << 20) + 17]):
        with open(os.path.join(m, "a" if i % 2 else "a/b", f"f{i}"), "wb") as f:
            f.write(rng.randbytes(size))
    for i in range(40):
        with open(os.path.join(m, "a/b/c", f"small{i}"), "wb") as f:
            f.write(rng.randbytes(rng.randrange(1, 3000)))
    os.symlink("b/f0", os.path.join(m, "a/link-to-f0"))
    os.symlink("/nowhere/at/all", os.path.join(m, "dangling"))
    os.link(os.path.join(m, "a/f1"), os.path.join(m, "hard-f1"))
    os.setxattr(os.path.join(m, "a/f3"), "user.colour", b"blue")
    os.setxattr(os.path.join(m, "a/b"), "user.dir", b"yes")
    os.chmod(os.path.join(m, "a/f5"), 0o640)
    os.chown(os.path.join(m, "a/b/f4"), 1234, 5678)
    os.rename(os.path.join(m, "a/b/f2"), os.path.join(m, "a/f2-renamed"))


def change_while_down(m):
    rng = random.Random(77)
    with open(os.path.join(m, "a/b/f6"), "r+b") as f:
        f.seek(12345)
        f.write(rng.randbytes(70000))
    with open(os.path.join(m, "a/new-file"), "wb") as f:
        f.write(rng.randbytes(200000))
    os.makedirs(os.path.join(m, "newdir/deeper"))
    with open(os.path.join(m, "newdir/deeper/g"), "wb") as f:
        f.write(b"made while a brick was down\n")
    os.unlink(os.path.join(m, "a/b/c/small7"))
    os.chmod(os.path.join(m, "a/b/c/small8"), 0o600)
    os.rename(os.path.join(m, "a/b/c/small9"), os.path.join(m, "small9-moved"))
    os.setxattr(os.path.join(m, "a/f1"), "user.added", b"later")


def brick_inodes(brick):
    out = {}
    for d, dirs, files in os.walk(brick):
        if d == brick:
            dirs[:] = [x for x in dirs if not x.startswith((".glusterfs", ".cairn"))]
        for n in files:
            p = os.path.join(d, n)
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode):
                out[os.path.relpath(p, brick)] = st.st_ino
    return out


def gluster_names(brick):
    """Every GlusterFS xattr left on the brick's objects."""
    left = []
    for d, dirs, files in os.walk(brick):
        if d == brick:
            dirs[:] = [x for x in dirs if x != ".cairn"]
        for n in [""] + dirs + files:
            p = os.path.join(d, n) if n else d
            for x in os.listxattr(p, follow_symlinks=False):
                if x.startswith(("trusted.gfid", "trusted.afr.", "trusted.glusterfs.")):
                    left.append((os.path.relpath(p, brick), x))
    return left


def brick_state(brick):
    """What must agree between replicas: the tree and every object's id."""
    t, links = tree(brick)
    for rel, e in t.items():
        e["gfid"] = os.getxattr(os.path.join(brick, rel), "trusted.cairn.gfid",
                                follow_symlinks=False)
        e.pop("mtime", None)
    return t, links


def gluster_volume(g, name, bricks):
    """A started GlusterFS volume of replica 3 sets over bricks, mounted
    at g.mnt."""
    for b in bricks:
        os.makedirs(b)
    g.cli("volume", "create", name, "replica", "3", *[f"{ADDR}:{b}" for b in bricks], "force")
    g.cli("volume", "start", name)
    os.makedirs(g.mnt, exist_ok=True)
    subprocess.run(g.prefix + ["mount", "-t", "glusterfs", "-o", f"log-file={g.work}/log/mnt-{name}.log",
                    f"{ADDR}:/{name}", g.mnt], check=True, timeout=60)
    assert mounted(g.mnt)


def gluster_stop(g, name):
    """Unmounts, stops the volume and glusterd: what docs/migrating.md asks."""
    detach(g.mnt)
    g.cli("volume", "stop", name)
    g.stop_glusterd()
    end = time.time() + 20
    while time.time() < end and _pids_under(g.root):
        time.sleep(0.2)
    assert not _pids_under(g.root), "GlusterFS processes still running"


def heal_until_identical(cairn, vol, sets):
    """Runs heal until the bricks of every set agree; returns their states."""
    end = time.time() + 60
    while True:
        cairn.cli("volume", "heal", vol, check=False)
        states = [[brick_state(b) for b in s] for s in sets]
        if all(st[0] == x for st in states for x in st) or time.time() > end:
            break
        time.sleep(1)
    for s, st in zip(sets, states):
        for b, x in zip(s[1:], st[1:]):
            for p in st[0][0]:
                assert x[0].get(p) == st[0][0][p], f"{b}: {p} differs from {s[0]}"
            assert x == st[0], f"{b} differs from {s[0]}"
    info = cairn.cli("volume", "heal", vol, "info").stdout
    assert "Number of entries: 0" in info and not re.search(r"Number of entries: [1-9]", info), \
        info
    return states


def test_import_replica3_on_three_servers(env):
    """A replica 3 volume whose bricks belong to three cairnd of a pool, one
    brick behind: each server checks and converts its own brick (the
    internal __import command), the command given to the third server."""
    _, g = env
    g.bricks = [os.path.join(g.root, f"gb{i}") for i in range(3)]
    g.start()
    gluster_volume(g, GVOL, g.bricks)
    fill(g.mnt)
    victim = g.brick_pid(g.bricks[2])
    assert victim, "no glusterfsd for the third brick"
    os.kill(victim, signal.SIGKILL)
    change_while_down(g.mnt)
    expected, expected_links = tree(g.mnt)
    assert expected_links == [["a/f1", "hard-f1"]]

    pool = replica_pool.Pool(["127.0.0.62", "127.0.0.63", "127.0.0.64"], "st-import-pool-")
    try:
        pool.start()
        first, third = pool.nodes[0], pool.nodes[2]
        bricks = [f"{n.host}:{b}" for n, b in zip(pool.nodes, g.bricks)]

        # A brick a glusterfsd serves is refused, and nothing is written.
        r = third.cli("volume", "import", "early", "replica", "3", *bricks, "force", check=False)
        assert r.returncode == 1 and "glusterfsd" in r.stderr, r.stdout + r.stderr
        assert not os.path.exists(os.path.join(g.bricks[0], ".cairn"))

        gluster_stop(g, GVOL)
        # The scenario left GlusterFS pending marks against the third brick.
        marks = os.getxattr(os.path.join(g.bricks[0], "a/b/f6"),
                            f"trusted.afr.{GVOL}-client-2")
        assert marks != bytes(12)
        assert not os.path.exists(os.path.join(g.bricks[2], "a/new-file"))
        before = [brick_inodes(b) for b in g.bricks]

        # Not a GlusterFS brick: refused, by the server that owns it.
        plain = os.path.join(third.root, "plain")
        os.makedirs(plain)
        r = third.cli("volume", "import", "bad", "replica", "3", *bricks[:2],
                      f"{third.host}:{plain}", "force", check=False)
        assert r.returncode == 1 and "not a GlusterFS brick" in r.stderr, r.stdout + r.stderr

        r = third.cli("volume", "import", "imported", "replica", "3", *bricks, "force")
        assert "success" in r.stdout, r.stdout
        first.volumes["imported"] = list(g.bricks)
        # The two bricks that took the changes accuse the third of them.
        for b, line in zip(g.bricks, [x for x in r.stdout.splitlines() if "brick" in x]):
            assert "objects to heal" in line and "report in" in line, line
            with open(os.path.join(b, ".cairn/import-report")) as f:
                report = f.read()
            if b == g.bricks[2]:
                assert "\nheal " not in report, report
            else:
                assert "heal /a/b/f6" in report and "heal /newdir" in report, report
            assert not os.path.exists(os.path.join(b, ".glusterfs"))
            assert gluster_names(b) == []

        # No file was copied: every file keeps its inode.
        for b, was in zip(g.bricks, before):
            assert brick_inodes(b) == was, f"{b}: inodes changed"

        first.cli("volume", "start", "imported")
        m = first.mount("imported", os.path.join(first.root, "cmnt"))
        got, got_links = tree(m.path)
        assert sorted(got) == sorted(expected)
        for p in expected:
            assert got[p] == expected[p], p
        assert got_links == expected_links

        # Heal makes every brick identical, and the mount still reads the tree.
        heal_until_identical(first, "imported", [g.bricks])
        got, _ = tree(m.path)
        assert got == expected
        m.stop()
        first.stop_volume("imported")
    finally:
        pool.close()


def test_import_distributed_replicate(env):
    """2 x 3: GlusterFS placed files by its own hash and left DHT link files
    after renames; Cairn must find every file through its own placement."""
    cairn, g = env
    g.bricks = [os.path.join(g.root, f"dr{i}") for i in range(6)]
    g.start()
    gluster_volume(g, "gimpdr", g.bricks)
    fill(g.mnt)
    rng = random.Random(5)
    os.makedirs(os.path.join(g.mnt, "many"))
    for i in range(60):
        with open(os.path.join(g.mnt, "many", f"n{i}"), "wb") as f:
            f.write(rng.randbytes(rng.randrange(1, 20000)))
    for i in range(0, 60, 2):  # renames leave GlusterFS link files
        os.rename(os.path.join(g.mnt, "many", f"n{i}"), os.path.join(g.mnt, "many", f"r{i}"))
    os.kill(g.brick_pid(g.bricks[5]), signal.SIGKILL)
    change_while_down(g.mnt)
    expected, expected_links = tree(g.mnt)
    gluster_stop(g, "gimpdr")
    links = sum(1 for b in g.bricks for d, _, fs in os.walk(b) if ".glusterfs" not in d
                for n in fs if os.lstat(os.path.join(d, n)).st_mode & 0o7777 == stat.S_ISVTX)
    assert links > 0, "the renames left no GlusterFS link file"
    before = [brick_inodes(b) for b in g.bricks]

    r = cairn.cli("volume", "import", "importeddr", "replica", "3",
                  *[f"{CAIRN_HOST}:{b}" for b in g.bricks], "force")
    assert "success" in r.stdout, r.stdout
    # about half the names hash elsewhere under Cairn's hash than GlusterFS's
    assert int(re.search(r"(\d+) names linked", r.stdout).group(1)) > 20, r.stdout
    cairn.volumes["importeddr"] = list(g.bricks)
    dropped = sum(int(re.search(r"(\d+) link files dropped", x).group(1))
                  for x in r.stdout.splitlines() if "link files dropped" in x)
    assert dropped == links, r.stdout
    for b, was in zip(g.bricks, before):
        now = brick_inodes(b)
        for p, ino in was.items():
            st = os.lstat(os.path.join(b, p)) if p in now else None
            if st is None or st.st_mode & 0o7777 == stat.S_ISVTX and st.st_size == 0:
                continue  # a GlusterFS link file, dropped
            assert now[p] == ino, f"{b}/{p}: inode changed"
        assert gluster_names(b) == []
        with open(os.path.join(b, ".cairn/import-report")) as f:
            assert "\norphans=0\n" in f.read()  # a dropped link file is no orphan

    cairn.cli("volume", "start", "importeddr")
    m = cairn.mount("importeddr", os.path.join(cairn.root, "drmnt"))
    got, got_links = tree(m.path)
    assert sorted(got) == sorted(expected)
    for p in expected:
        assert got[p] == expected[p], p
    assert got_links == expected_links
    heal_until_identical(cairn, "importeddr", [g.bricks[:3], g.bricks[3:]])
    # the imported directories take new files, renames and removals
    with open(os.path.join(m.path, "many", "new"), "wb") as f:
        f.write(b"x" * 5000)
    os.rename(os.path.join(m.path, "many", "r0"), os.path.join(m.path, "many", "r0-again"))
    os.unlink(os.path.join(m.path, "many", "n1"))
    m2 = cairn.mount("importeddr", os.path.join(cairn.root, "drmnt2"))
    got, _ = tree(m2.path)
    assert got["many/r0-again"]["sha"] == expected["many/r0"]["sha"]
    assert "many/r0" not in got and "many/n1" not in got
    with open(os.path.join(m2.path, "many", "new"), "rb") as f:
        assert f.read() == b"x" * 5000


def test_import_distributed_replicate_on_three_servers(env):
    """2 x 3 whose sets span a pool of three cairnd, each server holding one
    brick of each set: the link-to files go from server to server (the
    __import place-* steps). A server down refuses the import before any
    brick is touched; an import cut short while placing is finished by
    running it again, every copy of a set with the same link-to files and
    ids."""
    _, g = env
    g.bricks = [os.path.join(g.root, f"ds{i}") for i in range(6)]
    g.start()
    gluster_volume(g, "gimpds", g.bricks)
    fill(g.mnt)
    rng = random.Random(9)
    os.makedirs(os.path.join(g.mnt, "many"))
    for i in range(40):
        with open(os.path.join(g.mnt, "many", f"n{i}"), "wb") as f:
            f.write(rng.randbytes(rng.randrange(1, 5000)))
    for i in range(0, 40, 4):  # GlusterFS link files, to be dropped
        os.rename(os.path.join(g.mnt, "many", f"n{i}"), os.path.join(g.mnt, "many", f"r{i}"))
    expected, expected_links = tree(g.mnt)
    gluster_stop(g, "gimpds")

    pool = replica_pool.Pool(["127.0.0.65", "127.0.0.66", "127.0.0.67"], "st-import-dpool-")
    try:
        pool.start()
        first, third = pool.nodes[0], pool.nodes[2]
        bricks = [f"{pool.nodes[i % 3].host}:{b}" for i, b in enumerate(g.bricks)]
        command = ["volume", "import", "ids", "replica", "3", *bricks, "force"]

        # A server down: refused by the check, no brick touched.
        pool.kill_server(third)
        r = first.cli(*command, check=False)
        assert r.returncode == 1 and f"Host {third.host} is not reachable" in r.stderr, \
            r.stdout + r.stderr
        assert not any(os.path.exists(os.path.join(b, ".cairn")) for b in g.bricks)
        third.start()

        # The third server cannot make its link-to files (the name it
        # stages them under is taken): the bricks are converted, some
        # link-to files made, and the import refused with why.
        blocker = os.path.join(g.bricks[5], ".cairn", "import-linkto.tmp")
        os.makedirs(blocker)
        r = first.cli(*command, check=False)
        assert r.returncode == 1 and "Is a directory" in r.stderr and \
            "run the import again" in r.stderr, r.stdout + r.stderr
        made = [sum(1 for d, _, fs in os.walk(b) for n in fs
                    if os.lstat(os.path.join(d, n)).st_mode & 0o7777 == stat.S_ISVTX)
                for b in g.bricks[3:]]
        assert made[0] > 0 and made[2] == 0, made
        os.rmdir(blocker)

        r = first.cli(*command)
        assert "success" in r.stdout, r.stdout
        assert int(re.search(r"(\d+) names linked", r.stdout).group(1)) > 10, r.stdout
        first.volumes["ids"] = list(g.bricks)
        # Every copy of a set holds the same names, link-to files and ids.
        for s in (g.bricks[:3], g.bricks[3:]):
            states = [brick_state(b) for b in s]
            for b, st in zip(s[1:], states[1:]):
                assert st == states[0], f"{b} differs from {s[0]}"
        for b in g.bricks:
            assert gluster_names(b) == []
            assert not os.path.exists(os.path.join(b, ".cairn", "import-names"))

        first.cli("volume", "start", "ids")
        m = first.mount("ids", os.path.join(first.root, "dsmnt"))
        got, got_links = tree(m.path)
        assert sorted(got) == sorted(expected)
        for p in expected:
            assert got[p] == expected[p], p
        assert got_links == expected_links
        os.rename(os.path.join(m.path, "many", "r0"), os.path.join(m.path, "many", "r0-again"))
        with open(os.path.join(m.path, "many", "new"), "wb") as f:
            f.write(b"y" * 3000)
        m2 = first.mount("ids", os.path.join(first.root, "dsmnt2"))
        got, _ = tree(m2.path)
        assert got["many/r0-again"]["sha"] == expected["many/r0"]["sha"]
        assert "many/r0" not in got and got["many/new"]["size"] == 3000
        m2.stop()
        m.stop()
        first.stop_volume("ids")
    finally:
        pool.close()
