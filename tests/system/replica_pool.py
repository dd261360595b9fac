"""A pool of three cairnd (one per loopback address, formed by peer probe)
and replica 3 volumes with one brick on each server, for tests of faults:
servers killed or stopped, bricks on small disks, copies compared byte for
byte. Every process and mount is torn down by close(), even after a
failure.
"""

import hashlib
import os
import signal
import subprocess
import time

from cairn_cluster import Cluster, alive, kill_pid, pids_with_arg


def out(r):
    return r.stdout + r.stderr


class Pool:
    def __init__(self, hosts, prefix):
        self.nodes = [Cluster(host=h, prefix=prefix) for h in hosts]
        self.loops = []  # loop-mounted file systems, unmounted at close

    def start(self, faults=False):
        """Starts the servers and forms the pool. faults: their bricks run
        on the fault-injecting storage table (CAIRN_TEST_FAULTS=1, passed on
        by cairnd; see arm())."""
        if faults:
            os.environ["CAIRN_TEST_FAULTS"] = "1"
        try:
            for n in self.nodes:
                n.start()
        except BaseException:
            self.close()
            raise
        finally:
            if faults:
                del os.environ["CAIRN_TEST_FAULTS"]
        for n in self.nodes[1:]:
            r = self.nodes[0].cli("peer", "probe", n.host, check=False)
            assert r.returncode == 0 and "peer probe: success" in r.stdout, out(r)
        return self

    def kill_server(self, n):
        """kill -9 of cairnd and of its brick processes (a crashed server)."""
        pids = [p for b in sum(n.volumes.values(), []) for p in pids_with_arg("--brick-path", b)]
        n.proc.kill()
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        n.proc.wait()
        end = time.time() + 5
        while time.time() < end and any(alive(p) for p in pids):
            time.sleep(0.05)

    def close(self):
        for n in self.nodes:
            for m in reversed(n.mounts):
                try:
                    m.stop()
                except Exception:
                    pass
            n.mounts = []
        for n in self.nodes:
            if n.proc and n.proc.poll() is None:
                for pid in list(n.stopped_pids):
                    n.cont(pid)
                kill_pid(n.proc.pid)
                n.proc.wait()
        for n in self.nodes:
            n.close()
        for m in self.loops:
            subprocess.run(["umount", "-l", m], check=False, stderr=subprocess.DEVNULL)

    def brick_logs(self):
        """Every brick log of every server, concatenated."""
        text = ""
        for n in self.nodes:
            d = os.path.join(n.workdir, "logs", "bricks")
            for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
                with open(os.path.join(d, f), errors="replace") as fh:
                    text += fh.read()
        return text

    def revive(self):
        """Continues stopped processes and restarts killed servers a failed
        test left behind."""
        for n in self.nodes:
            for pid in list(n.stopped_pids):
                n.cont(pid)
            if n.proc and n.proc.poll() is not None:
                n.start()

    def small_disk(self, node, name, mb, fs="ext4"):
        """A loop-mounted file system of mb MiB on node's root; its mount
        point."""
        img = os.path.join(self.nodes[node].root, f"{name}.img")
        mnt = os.path.join(self.nodes[node].root, name)
        os.makedirs(mnt)
        with open(img, "wb") as f:
            f.truncate(mb << 20)
        mkfs = ["mkfs.ext4", "-q", "-F"] if fs == "ext4" else ["mkfs.xfs", "-q"]
        subprocess.run(mkfs + [img], check=True)
        subprocess.run(["mount", "-o", "loop", img, mnt], check=True)
        self.loops.append(mnt)
        return mnt


def brick_calls(node, name, bricks, op):
    """[calls of op] of each brick in bricks (`volume profile NAME info
    cumulative` through node; a brick that is down counts 0)."""
    text = node.cli("volume", "profile", name, "info", "cumulative", check=False).stdout
    calls, cur = [0] * len(bricks), None
    for line in text.splitlines():
        if line.startswith("Brick: "):
            path = line.split(":", 2)[2]
            cur = bricks.index(path) if path in bricks else None
        parts = line.split()
        if cur is not None and parts and parts[-1] == op:
            calls[cur] += int(parts[-2])
    return calls


class Vol:
    """A replica 3 volume, one brick per server (bricks: paths, default
    <node root>/<name>-brick), started, mounted through the first server."""

    count = 0

    def __init__(self, pool, bricks=None, options=None, mounts=1):
        Vol.count += 1
        self.pool = pool
        self.name = f"gv{Vol.count}"
        self.bricks = bricks or [os.path.join(n.root, f"{self.name}-brick") for n in pool.nodes]
        for n, b in zip(pool.nodes, self.bricks):
            os.makedirs(b, exist_ok=True)
            n.volumes[self.name] = [b]
        c = pool.nodes[0]
        c.cli("volume", "create", self.name, "replica", "3",
              *[f"{n.host}:{b}" for n, b in zip(pool.nodes, self.bricks)], "force")
        for k, v in (options or {}).items():
            c.cli("volume", "set", self.name, k, v)
        c.cli("volume", "start", self.name)
        self.wait_bricks()
        self.mounts = [self.mount(f"m{i}") for i in range(mounts)]

    def mount(self, tag, opts=()):
        c = self.pool.nodes[0]
        return c.mount(self.name, os.path.join(c.root, f"{self.name}-{tag}"), opts=opts)

    def unmount(self, m):
        m.stop()
        self.pool.nodes[0].mounts.remove(m)

    def brick_pid(self, i):
        pids = pids_with_arg("--brick-path", self.bricks[i])
        return pids[0] if pids else None

    def wait_bricks(self, timeout=30):
        end = time.time() + timeout
        while time.time() < end:
            if all(self.brick_pid(i) for i in range(3)):
                st = self.pool.nodes[0].cli("volume", "status", self.name, check=False).stdout
                if st.count(" Y ") >= 3:
                    return
            time.sleep(0.2)
        raise AssertionError(f"bricks of {self.name} not all up")

    def cli(self, *args, check=False, timeout=300):
        return self.pool.nodes[0].cli(*args, check=check, timeout=timeout)

    def heal(self, *what):
        return self.cli("volume", "heal", self.name, *what)

    def heal_entries(self):
        """Entries `heal info` lists, over every brick."""
        info = self.heal("info").stdout
        return sum(int(x) for x in
                   [line.split(":")[1] for line in info.splitlines()
                    if line.startswith("Number of entries:")])

    def brick_reads(self):
        """[READ calls] of each brick since the volume's bricks started."""
        return brick_calls(self.pool.nodes[0], self.name, self.bricks, "READ")

    def server_down(self, i):
        """Server i stops: its cairnd is stopped (it restarts nothing) and
        its brick of this volume killed. Returns a function that brings
        both back."""
        n = self.pool.nodes[i]
        n.stop_signal(n.proc.pid)
        pid = self.brick_pid(i)
        if pid:
            os.kill(pid, signal.SIGKILL)
            end = time.time() + 5
            while time.time() < end and alive(pid):
                time.sleep(0.05)

        def back():
            n.cont(n.proc.pid)
            self.wait_bricks(timeout=60)
        return back

    def close(self):
        c = self.pool.nodes[0]
        for m in [m for m in c.mounts if m.path.startswith(os.path.join(c.root, self.name + "-"))]:
            m.stop()
            c.mounts.remove(m)
        c.stop_volume(self.name, check=False)
        c.cli("volume", "delete", self.name, check=False)
        for b in self.bricks:
            for p in pids_with_arg("--brick-path", b):
                kill_pid(p)


def arm(brick, *commands):
    """Gives a brick of a pool started with faults=True fault commands
    (storage.h, brick_fault_command: "fail pwrite EIO 0 sticky", "stall
    pwrite 15000", "short pwrite 4096", "reset"); returns once it has taken
    them."""
    ctl = os.path.join(brick, ".cairn", "test-faults")
    with open(ctl + ".tmp", "w") as f:
        f.write("".join(c + "\n" for c in commands))
    os.rename(ctl + ".tmp", ctl)
    end = time.time() + 10
    while os.path.exists(ctl):
        assert time.time() < end, "the brick did not take its fault commands"
        time.sleep(0.05)


def sha(data):
    return hashlib.sha256(data).hexdigest()


def file_sums(root, names):
    """{name: sha256 or None when missing} of names under root."""
    res = {}
    for n in names:
        try:
            with open(os.path.join(root, n), "rb") as f:
                res[n] = sha(f.read())
        except FileNotFoundError:
            res[n] = None
    return res


def tree(root):
    """{relative path: (kind, mode, sha or target)} below root, .cairn left out."""
    res = {}
    for d, dirs, files in os.walk(root):
        if d == root:
            dirs[:] = [x for x in dirs if x != ".cairn"]
        for n in dirs + files:
            p = os.path.join(d, n)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if os.path.isdir(p):
                res[rel] = ("d", st.st_mode & 0o7777)
            else:
                with open(p, "rb") as f:
                    res[rel] = ("f", st.st_mode & 0o7777, sha(f.read()))
    return res


def wait_until(fn, timeout, what, step=0.5):
    end = time.time() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(step)
