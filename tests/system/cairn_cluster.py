"""Real Cairn processes for system tests: cairnd on a loopback address, the
cairn CLI, volumes, and cairn-fuse mounts.

Everything started here is tracked and torn down by close(), which never
raises and is safe to call twice: mounts are detached lazily (umount -l /
fusermount3 -uz), every process we started is killed by its pid, brick
processes of our volumes are found by their brick path and killed by pid,
stopped (SIGSTOP) processes are continued first, and temporary directories
are removed.

Binaries come from $CAIRN_BUILD (a build dir holding bin/, or the bin dir
itself), default <repo>/build/bin.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MGMT_PORT = 24810
# storage.spare-inodes for the volumes the tests make: an idle brick makes
# that many empty files ahead (65,536 by default, docs/brick-format.md).
# Hundreds of test bricks each making 65,536 files would load the machine
# the tests time, and their removal took minutes of teardown; 256 still
# has new files taken from spares. test_tree_removal.py tests the spares
# themselves.
TEST_SPARE_INODES = 256


class ClusterError(Exception):
    pass


def bin_dir():
    env = os.environ.get("CAIRN_BUILD")
    base = env if env else os.path.join(REPO, "build")
    for cand in (os.path.join(base, "bin"), base):
        if os.path.exists(os.path.join(cand, "cairnd")):
            return os.path.abspath(cand)
    return os.path.abspath(os.path.join(base, "bin"))


def exe(name):
    p = os.path.join(bin_dir(), name)
    if not os.access(p, os.X_OK):
        raise ClusterError(f"{name} is not built: {p} missing (set CAIRN_BUILD or run make)")
    return p


def port_open(host, port, timeout=0.3):
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def mounted(path):
    """True when path is a mount point (per /proc/self/mountinfo)."""
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4].encode().decode("unicode_escape")
            if mp == path:
                return True
    return False


def mount_fstype(path):
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            mp = parts[4].encode().decode("unicode_escape")
            if mp == path:
                sep = parts.index("-")
                return parts[sep + 1]
    return None


def detach(path):
    """Unmounts path lazily, by every means available; never raises."""
    for _ in range(3):
        if not mounted(path):
            return
        for cmd in (["fusermount3", "-uz", path], ["umount", "-l", path]):
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=30, check=False)
            if not mounted(path):
                return
        time.sleep(0.2)


def _argvs():
    """(pid, argv) of every process still readable in /proc."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                yield int(d), [a.decode(errors="replace") for a in f.read().split(b"\0")]
        except OSError:
            continue


def pids_with_arg(*needles):
    """Pids of processes whose argv contains every needle as one argument."""
    return [pid for pid, argv in _argvs() if all(n in argv for n in needles)]


def brick_pids_under(root):
    """Pids of cairn-brickd processes whose --brick-path is below root."""
    root = os.path.realpath(root).rstrip("/") + "/"
    return [pid for pid, argv in _argvs()
            if any(a == "--brick-path" and os.path.realpath(argv[i + 1]).startswith(root)
                   for i, a in enumerate(argv[:-1]))]


def all_stopped(pid):
    """Whether every thread of pid is stopped (or pid is gone). The kernel's
    io_uring workers (iou-*) are threads of the process too but never stop
    for a signal; they are left out."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue  # the thread exited meanwhile
        state = stat[stat.rindex(")") + 2]
        if not comm.startswith("iou-") and state not in "tTZX":
            return False
    return True


def alive(pid):
    """True if pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            st = f.read().rsplit(")", 1)[1].split()[0]
        return st != "Z"
    except OSError:
        return False


def kill_pid(pid, wait=5.0):
    """SIGCONT then SIGTERM, then SIGKILL after `wait` seconds."""
    for sig in (signal.SIGCONT, signal.SIGTERM):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
    end = time.time() + wait
    while time.time() < end and alive(pid):
        time.sleep(0.05)
    if alive(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class Mount:
    """A cairn-fuse mount run in the foreground (-f) so we own its pid."""

    def __init__(self, cluster, spec, path, opts=(), log=None):
        self.cluster, self.spec, self.path = cluster, spec, path
        self.opts = list(opts)
        self.proc = None
        self.log = log or (path.rstrip("/") + ".log")

    def start(self, timeout=20):
        os.makedirs(self.path, exist_ok=True)
        args = [exe("cairn-fuse"), self.spec, self.path, "-f"]
        for o in self.opts:
            args += ["-o", o]
        self.logf = open(self.log, "ab")
        self.proc = subprocess.Popen(args, stdout=self.logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        end = time.time() + timeout
        while time.time() < end:
            if mounted(self.path):
                # the mount is up once its root answers
                try:
                    os.stat(self.path)
                    return self
                except OSError:
                    pass
            if self.proc.poll() is not None:
                raise ClusterError(f"cairn-fuse {self.spec} {self.path} exited with "
                                   f"{self.proc.returncode}: {self.tail()}")
            time.sleep(0.05)
        raise ClusterError(f"cairn-fuse {self.spec} did not mount {self.path} in {timeout}s: "
                           f"{self.tail()}")

    def tail(self, n=8000):
        try:
            with open(self.log, "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def stop(self):
        detach(self.path)
        if self.proc and self.proc.poll() is None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                kill_pid(self.proc.pid, wait=2)
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
        if getattr(self, "logf", None):
            self.logf.close()
            self.logf = None


# Roots of the clusters not yet closed: the test watchdog (conftest.py)
# looks for hung FUSE requests under them.
LIVE_ROOTS = set()


class Cluster:
    """One cairnd on a loopback address, plus the volumes and mounts made
    through it. Use as a context manager or call close()."""

    def __init__(self, host="127.0.0.10", port=MGMT_PORT, root=None, prefix="st-", uid=None,
                 args=(), spare_inodes=TEST_SPARE_INODES):
        """uid: run cairnd as that user (and group), its workdir theirs;
        args: more cairnd arguments (e.g. --metrics ADDR); spare_inodes:
        storage.spare-inodes for volumes made through cli() (None: the
        product's default)."""
        self.host, self.port, self.uid = host, port, uid
        self.spare_inodes = spare_inodes
        self.args = list(args)
        self.root = root or tempfile.mkdtemp(prefix=prefix, dir="/tmp")
        os.chmod(self.root, 0o755)  # unprivileged test users traverse it
        self.workdir = os.path.join(self.root, "cairnd")
        self.proc = None
        self.mounts = []
        self.volumes = {}  # name -> list of brick paths
        self.stopped_pids = set()
        self.extra_pids = []
        self.extra_mounts = []
        self.owns_root = root is None
        LIVE_ROOTS.add(self.root)

    @property
    def remote(self):
        return f"{self.host}:{self.port}"

    def __enter__(self):
        return self.start()

    def __exit__(self, *a):
        self.close()

    # ---- cairnd ----
    def start(self, timeout=15):
        os.makedirs(self.workdir, exist_ok=True)
        if self.uid is not None:
            os.chown(self.workdir, self.uid, self.uid)
        if port_open(self.host, self.port):
            raise ClusterError(f"{self.remote} is already in use")
        self.logfile = os.path.join(self.root, "cairnd.log")
        if self.uid is not None:
            open(self.logfile, "ab").close()
            os.chown(self.logfile, self.uid, self.uid)
        args = [exe("cairnd"), "--foreground", "--listen", self.remote, "--workdir",
                self.workdir, "--log-file", self.logfile, "--log-level", "DEBUG"] + self.args
        drop = None if self.uid is None else drop_privs(self.uid, self.uid, [self.uid])
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                     stdout=open(self.logfile + ".out", "ab"),
                                     stderr=subprocess.STDOUT, preexec_fn=drop)
        end = time.time() + timeout
        while time.time() < end:
            if port_open(self.host, self.port):
                return self
            if self.proc.poll() is not None:
                raise ClusterError(f"cairnd exited with {self.proc.returncode}: "
                                   f"{self.tail(self.logfile)}{self.tail(self.logfile + '.out')}")
            time.sleep(0.05)
        raise ClusterError(f"cairnd did not listen on {self.remote} in {timeout}s")

    @staticmethod
    def tail(path, n=3000):
        try:
            with open(path, "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def cli(self, *args, check=True, timeout=60):
        """Runs `cairn --remote-host HOST:PORT args...`; returns CompletedProcess
        (text). With check, a non-zero exit raises ClusterError. A volume
        created here gets TEST_SPARE_INODES (see there) before it starts."""
        cmd = [exe("cairn"), "--remote-host", self.remote] + [str(a) for a in args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise ClusterError(f"{' '.join(cmd)} -> {r.returncode}: {r.stdout}{r.stderr}")
        if (r.returncode == 0 and self.spare_inodes is not None and len(args) > 2
                and tuple(args[:2]) == ("volume", "create")):
            self.cli("volume", "set", args[2], "storage.spare-inodes", str(self.spare_inodes))
        return r

    # ---- volumes ----
    def brick_path(self, name):
        return os.path.join(self.root, name)

    def create_volume(self, name, bricks=None, start=True, options=None, replica=None):
        """Creates (force) and optionally starts a volume; bricks are paths on
        this host (default one brick <root>/<name>-brick)."""
        bricks = bricks or [os.path.join(self.root, f"{name}-brick")]
        for b in bricks:
            os.makedirs(b, exist_ok=True)
        self.volumes[name] = list(bricks)
        kind = ["replica", str(replica)] if replica else []
        self.cli("volume", "create", name, *kind, *[f"{self.host}:{b}" for b in bricks], "force")
        for k, v in (options or {}).items():
            self.cli("volume", "set", name, k, v)
        if start:
            self.cli("volume", "start", name)
        return bricks

    def replica3(self, name, options=None, mounts=2, brick_size=None):
        """A started replica 3 volume of bricks <root>/b0..b2 (each a tmpfs
        of brick_size when given) with options set, and mounts of it at
        <root>/m0, m1, ...; returns (bricks, mounts)."""
        bricks = [os.path.join(self.root, f"b{i}") for i in range(3)]
        for b in bricks:
            os.makedirs(b, exist_ok=True)
            if brick_size:
                subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={brick_size}", "tmpfs", b],
                               check=True)
                self.extra_mounts.append(b)
        self.create_volume(name, bricks, options=options, replica=3)
        return bricks, [self.mount(name, os.path.join(self.root, f"m{i}")) for i in range(mounts)]

    def stop_volume(self, name, check=True):
        # `volume stop` asks for confirmation in GlusterFS's CLI; pass --mode=script
        # equivalent by feeding "y" too.
        cmd = [exe("cairn"), "--remote-host", self.remote, "volume", "stop", name]
        r = subprocess.run(cmd, input="y\n", capture_output=True, text=True, timeout=60)
        if check and r.returncode != 0:
            raise ClusterError(f"volume stop {name} -> {r.returncode}: {r.stdout}{r.stderr}")
        return r

    def brick_status(self, name):
        """[(host, path, port, pid)] from `cairn volume status NAME`; port/pid None when
        the brick is offline."""
        r = self.cli("volume", "status", name)
        out = []
        lines = r.stdout.splitlines()
        # a long process name is printed on a line of its own (GlusterFS layout)
        joined = []
        for line in lines:
            if joined and re.match(r"^Brick\s+\S+$", joined[-1]) and line.startswith(" "):
                joined[-1] += line
            else:
                joined.append(line)
        for line in joined:
            m = re.match(r"^Brick\s+(\S+?):(/\S*)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$", line)
            if m:
                port = int(m.group(3)) if m.group(3).isdigit() else None
                pid = int(m.group(6)) if m.group(6).isdigit() else None
                out.append((m.group(1), m.group(2), port, pid))
        if not out:
            raise ClusterError(f"no brick lines in `volume status {name}`:\n{r.stdout}")
        return out

    # ---- mounts ----
    def mount(self, volname, path, opts=(), host=None):
        m = Mount(self, f"{host or self.remote}:/{volname}", path, opts)
        self.mounts.append(m)
        m.start()
        return m

    def stop_signal(self, pid):
        """SIGSTOPs pid and returns once all its threads have stopped;
        close() continues it. The wait matters: the kernel wakes one
        thread to take a process-wide SIGSTOP, and the others run on
        until that thread has been scheduled and stops them, long enough
        on a busy machine for a request sent right after the kill to be
        answered."""
        self.stopped_pids.add(pid)
        os.kill(pid, signal.SIGSTOP)
        end = time.time() + 10
        while not all_stopped(pid):
            if time.time() > end:
                raise ClusterError(f"process {pid} did not stop within 10 s of SIGSTOP")
            time.sleep(0.005)

    def cont(self, pid):
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        self.stopped_pids.discard(pid)

    # ---- teardown ----
    def close(self):
        for pid in list(self.stopped_pids):
            self.cont(pid)
        for m in reversed(self.mounts):
            try:
                m.stop()
            except Exception:
                pass
        for p in self.extra_mounts:
            detach(p)
        self.mounts = []
        for name in list(self.volumes):
            if self.proc and self.proc.poll() is None:
                try:
                    self.stop_volume(name, check=False)
                except Exception:
                    pass
        if self.proc and self.proc.poll() is None:
            kill_pid(self.proc.pid)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        # brick processes cairnd may have left behind: ours are identified by
        # their brick path argument
        for name, bricks in self.volumes.items():
            for b in bricks:
                for pid in pids_with_arg("--brick-path", b):
                    kill_pid(pid)
        # and those of volumes a test created with the CLI directly: their
        # brick paths lie under this cluster's root
        for pid in brick_pids_under(self.root):
            kill_pid(pid)
        for pid in self.extra_pids:
            if alive(pid):
                kill_pid(pid)
        self.volumes = {}
        LIVE_ROOTS.discard(self.root)
        if self.owns_root and os.path.isdir(self.root):
            # never follow into a mount that failed to detach
            still = [m for m in self._mounts_under(self.root)]
            if not still:
                shutil.rmtree(self.root, ignore_errors=True)

    @staticmethod
    def _mounts_under(root):
        root = os.path.realpath(root) + "/"
        res = []
        with open("/proc/self/mountinfo") as f:
            for line in f:
                mp = line.split()[4].encode().decode("unicode_escape")
                if mp.startswith(root):
                    res.append(mp)
        return res


# ---- running code as an unprivileged user ----

def drop_privs(uid, gid, groups):
    def fn():
        os.setgroups(list(groups))
        os.setgid(gid)
        os.setuid(uid)
    return fn


_WRAP = """
import errno, os, sys
try:
{body}
    print("OK")
except OSError as e:
    print("ERR", errno.errorcode.get(e.errno, str(e.errno)))
"""


def start_copy(src, dst):
    """Starts `cp -a src dst` and returns it once the copy has begun (its
    first directory exists; a fixed delay outlived fast copies), still
    running: a fault injected then lands mid-copy."""
    cp = subprocess.Popen(["cp", "-a", src, dst], stderr=subprocess.PIPE, text=True)
    first = os.path.join(dst, sorted(os.listdir(src))[0])
    end = time.time() + 30
    while time.time() < end and cp.poll() is None and not os.path.isdir(first):
        time.sleep(0.02)
    time.sleep(0.1)
    assert cp.poll() is None, "the copy ended before the fault: copy more files"
    return cp


def made_here(mnt):
    """Files the mount has answered under write-back so far (its io-stats)."""
    text = os.getxattr(mnt, "trusted.cairn.io-stats").decode()
    m = re.search(r"^FUSE write-back: (\d+) files made here", text, re.M)
    assert m, text
    return int(m.group(1))


def fsync_dir(d):
    """Sends what the mount wrote back in d and waits for the bricks
    (syncfs does not reach a FUSE file system, docs/consistency.md)."""
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def as_user(code, uid=1000, gid=1000, groups=(1000, 2000), timeout=30, **fmt):
    """Runs python `code` (statements; may print) as uid/gid with the
    supplementary groups. Returns the last stdout line: "OK" or "ERR ENAME"
    (an OSError ends it), plus everything printed before, as (last, stdout)."""
    body = "\n".join("    " + line for line in code.strip("\n").splitlines())
    src = _WRAP.format(body=body)
    r = subprocess.run(["/usr/bin/python3", "-c", src], capture_output=True, text=True,
                       timeout=timeout, preexec_fn=drop_privs(uid, gid, groups),
                       env={"PATH": "/usr/bin:/bin", **{k: str(v) for k, v in fmt.items()}})
    if r.returncode != 0:
        raise AssertionError(f"as_user failed ({r.returncode}): {r.stderr}")
    lines = r.stdout.strip().splitlines()
    return lines[-1] if lines else "", r.stdout
