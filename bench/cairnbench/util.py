"""Process control, timing and tree verification helpers."""

import hashlib
import os
import shlex
import signal
import stat
import subprocess
import sys
import time

VERBOSE = False
_LOG_FILE = None


class BenchFailure(Exception):
    """A workload failed: a command exited non-zero or the data was wrong."""


class BenchTimeout(Exception):
    """A command ran longer than its time limit."""

    def __init__(self, seconds, what=""):
        super().__init__(f"timeout (>{seconds:g}s) {what}".strip())
        self.seconds = seconds


def set_log_file(path):
    global _LOG_FILE
    _LOG_FILE = open(path, "a", buffering=1)


def log(msg):
    line = time.strftime("%H:%M:%S ") + msg
    print(line, file=sys.stderr, flush=True)
    if _LOG_FILE:
        _LOG_FILE.write(line + "\n")


def debug(msg):
    if _LOG_FILE:
        _LOG_FILE.write(time.strftime("%H:%M:%S ") + msg + "\n")
    if VERBOSE:
        print("  " + msg, file=sys.stderr, flush=True)


def _kill_group(proc):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue
    # Still alive (for example stuck in D state on a hung FUSE mount): give up
    # waiting; the system teardown aborts the mount.


def start_group(cmd):
    """Start cmd in the background, in a process group of its own (for
    kill_group), its output discarded."""
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def kill_group(proc):
    """Stop what start_group started, with everything it started."""
    _kill_group(proc)


def run(cmd, timeout=120, check=True, input=None, env=None, cwd=None,
        what=None):
    """Run cmd (list or shell string) in its own process group.

    Returns (returncode, stdout, stderr). Raises BenchTimeout on timeout and
    BenchFailure on non-zero exit when check is true."""
    shell = isinstance(cmd, str)
    shown = cmd if shell else " ".join(shlex.quote(c) for c in cmd)
    debug(f"$ {shown}")
    proc = subprocess.Popen(
        ["/bin/bash", "-c", cmd] if shell else cmd,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, env=env, cwd=cwd)
    try:
        out, err = proc.communicate(input=input, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise BenchTimeout(timeout, what or "")
    except BaseException:
        _kill_group(proc)
        raise
    if out.strip():
        debug("  stdout: " + out.strip()[-2000:])
    if err.strip():
        debug("  stderr: " + err.strip()[-2000:])
    if check and proc.returncode != 0:
        tail = (err.strip() or out.strip())[-600:]
        raise BenchFailure(
            f"{what or shown[:200]} exited {proc.returncode}: {tail}")
    return proc.returncode, out, err


_MARK = "CAIRNBENCH_ELAPSED_NS="


def run_timed(body, prefix=(), timeout=300, what="timed command"):
    """Run the bash fragment `body` under `set -euo pipefail` and return the
    wall time in seconds measured inside the same shell (so wrappers such as
    nsenter cost nothing). `prefix` is prepended to the bash command line."""
    script = ("set -euo pipefail\n"
              "__t0=$(date +%s%N)\n"
              f"{body}\n"
              "__t1=$(date +%s%N)\n"
              f"echo {_MARK}$((__t1-__t0))\n")
    rc, out, err = run(list(prefix) + ["/bin/bash", "-c", script],
                       timeout=timeout, check=True, what=what)
    for line in reversed(out.splitlines()):
        if line.startswith(_MARK):
            return int(line[len(_MARK):]) / 1e9
    raise BenchFailure(f"{what}: no timing marker in output")


def drop_caches(what=3):
    """sync, then drop the kernel's clean caches: 1 the page cache, 2
    dentries and inodes, 3 both."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write(f"{what}\n")
    except OSError as e:
        debug(f"drop_caches failed: {e}")


# ----------------------------------------------------------------- mounts

def mountpoints():
    """Set of mount points from /proc/self/mountinfo."""
    res = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            mnt = parts[4].replace("\\040", " ")
            res[mnt] = parts[2]  # major:minor
    return res


def is_mounted(path):
    return os.path.realpath(path) in mountpoints()


def unmount(path, timeout=30):
    """Unmount path; if that fails abort its FUSE connection and unmount
    lazily. Never raises."""
    path = os.path.realpath(path)
    for _ in range(3):
        mps = mountpoints()
        if path not in mps:
            return
        try:
            rc, _, _ = run(["umount", path], timeout=timeout, check=False)
        except BenchTimeout:
            rc = 1
        if rc == 0:
            continue
        devno = mps[path]
        minor = devno.split(":")[1]
        abort = f"/sys/fs/fuse/connections/{minor}/abort"
        if devno.startswith("0:") and os.path.exists(abort):
            try:
                with open(abort, "w") as f:
                    f.write("1")
            except OSError:
                pass
        run(["umount", "-l", path], timeout=timeout, check=False)


def wait_for(pred, timeout, interval=0.2, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(interval)
    raise BenchFailure(f"timed out after {timeout}s waiting for {what}")


def cmdline(pid):
    """The command line of pid with its arguments joined by spaces, or ""
    when the process is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def pids_matching(substrings):
    """PIDs of processes whose command line contains any of substrings."""
    me = os.getpid()
    res = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        cmd = cmdline(d)
        if cmd and any(s in cmd for s in substrings):
            res.append(int(d))
    return res


def reset_peak_rss(pids):
    """Start a new peak-memory measurement of pids (clear_refs 5 resets
    VmHWM to the current resident size)."""
    for p in pids:
        try:
            with open(f"/proc/{p}/clear_refs", "w") as f:
                f.write("5")
        except OSError as e:
            raise BenchFailure(f"cannot reset the peak memory of {p}: {e}")


def peak_rss_mib(pids):
    """The sum of VmHWM (peak resident memory) of pids, in MiB."""
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as f:
                hwm = [ln for ln in f if ln.startswith("VmHWM:")]
        except OSError as e:
            raise BenchFailure(f"cannot read the peak memory of {p}: {e}")
        if not hwm:
            raise BenchFailure(f"no VmHWM in /proc/{p}/status")
        total += int(hwm[0].split()[1])
    return total / 1024


def _signal(pids, sig):
    for p in pids:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass


def _wait_gone(pids, seconds, step):
    """The pids still alive (not zombies) after waiting up to seconds."""
    deadline = time.time() + seconds
    while True:
        pids = [p for p in pids if os.path.exists(f"/proc/{p}")
                and proc_state(p) != "Z"]
        if not pids or time.time() >= deadline:
            return pids
        time.sleep(step)


def kill_pids(pids, grace=5.0):
    """SIGTERM, wait up to grace seconds, then SIGKILL the given pids."""
    pids = [p for p in pids if p and p != os.getpid()]
    _signal(pids, signal.SIGTERM)
    _signal(_wait_gone(pids, grace, 0.1), signal.SIGKILL)


def kill9(pids, wait=5.0):
    """SIGKILL the given pids (a crash, not a stop) and wait until they are
    gone."""
    pids = [p for p in pids if p and p != os.getpid()]
    _signal(pids, signal.SIGKILL)
    _wait_gone(pids, wait, 0.05)


def proc_state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "X"


def rmtree(path, timeout=600):
    if os.path.lexists(path):
        run(["rm", "-rf", "--one-file-system", path], timeout=timeout,
            what=f"rm -rf {path}")


# ----------------------------------------------------------- verification

def tree_manifest(root, mtimes=True):
    """Map relative path -> description of every entry below root (not root
    itself): type, permission bits, size, content hash, link target,
    and for regular files and links the mtime in whole seconds."""
    res = {}
    root = os.path.abspath(root)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                res[rel] = ("l", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                res[rel] = ("d", mode)
            elif stat.S_ISREG(st.st_mode):
                h = hashlib.sha256()
                with open(p, "rb") as f:
                    while True:
                        b = f.read(1 << 20)
                        if not b:
                            break
                        h.update(b)
                entry = ("f", mode, st.st_size, h.hexdigest())
                if mtimes:
                    entry += (int(st.st_mtime),)
                res[rel] = entry
            else:
                res[rel] = ("o", mode)
    return res


def manifest_digest(manifest):
    h = hashlib.sha256()
    for k in sorted(manifest):
        h.update(repr((k, manifest[k])).encode())
    return h.hexdigest()


def compare_manifests(expected, actual, what):
    """Raise BenchFailure describing the first differences."""
    if expected == actual:
        return
    missing = sorted(set(expected) - set(actual))
    extra = sorted(set(actual) - set(expected))
    differ = sorted(k for k in set(expected) & set(actual)
                    if tuple(expected[k]) != tuple(actual[k]))
    parts = []
    if missing:
        parts.append(f"{len(missing)} missing (e.g. {missing[0]})")
    if extra:
        parts.append(f"{len(extra)} unexpected (e.g. {extra[0]})")
    if differ:
        k = differ[0]
        parts.append(f"{len(differ)} differ (e.g. {k}: expected "
                     f"{tuple(expected[k])}, got {tuple(actual[k])})")
    raise BenchFailure(f"{what}: wrong data: " + "; ".join(parts))
