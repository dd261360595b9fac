"""The Debian packages (debian/), end to end: built with dpkg-buildpackage
from a copy of the tree, installed with dpkg, cairnd started through
systemd where systemd runs this machine (and directly otherwise), a
one-brick volume mounted through an fstab line with `mount -a -t cairn`,
a file written and read back, logrotate's configuration applied, and
everything purged again, with no file of the packages left behind.

Installs into /usr, /sbin and /etc of this machine: it runs only when
debhelper is installed (scripts/deps.sh --test installs it; with
CAIRN_TEST_PACKAGE=1 a missing tool fails the test instead) and when no
Cairn package is installed already, and removes what it installed even
when it fails. The other tests use the build tree, never /usr."""

import glob
import os
import shutil
import signal
import subprocess
import tempfile

import pytest

from cairn_cluster import REPO, mounted, port_open
from replica_pool import wait_until

HOST = "127.0.0.218"
PACKAGES = ["cairn-server", "cairn-client", "libcairn1", "libcairn-dev"]
WORKDIR = "/var/lib/cairnd"
LOGDIR = "/var/log/cairn"
# sources a package build needs; tests/, bench/ and build outputs stay out
TREE = ["Makefile", "debian", "extras", "include", "man", "src", "examples"]


def run(*cmd, check=True, timeout=120, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} -> {r.returncode}:\n{r.stdout[-3000:]}"
                             f"{r.stderr[-3000:]}")
    return r


def installed(pkg):
    r = run("dpkg-query", "-W", "-f=${Status}", pkg, check=False)
    return r.returncode == 0 and "installed" in r.stdout.split()[-1:]


def systemd_reaches_us():
    """systemd runs this machine and would start cairnd in our network
    namespace (a test run in a private one must start cairnd itself)."""
    if not os.path.isdir("/run/systemd/system"):
        return False
    try:
        if os.readlink("/proc/1/ns/net") != os.readlink("/proc/self/ns/net"):
            return False
    except OSError:
        return False
    r = run("systemctl", "is-system-running", check=False)
    return r.stdout.strip() in ("running", "degraded")


@pytest.fixture
def tmp():
    d = tempfile.mkdtemp(prefix="pkg-", dir="/tmp")
    yield d
    if not mounted(os.path.join(d, "mnt")):
        shutil.rmtree(d, ignore_errors=True)


def build(tmp):
    for tool in ("dpkg-buildpackage", "dh"):
        if not shutil.which(tool):
            if os.environ.get("CAIRN_TEST_PACKAGE") == "1":
                pytest.fail(f"{tool} is missing (scripts/deps.sh --test installs it)")
            pytest.skip(f"{tool} is missing (scripts/deps.sh --test installs it)")
    src = os.path.join(tmp, "cairn")
    os.makedirs(src)
    for name in TREE:
        p = os.path.join(REPO, name)
        if os.path.isdir(p):
            shutil.copytree(p, os.path.join(src, name), symlinks=True,
                            ignore=shutil.ignore_patterns("build*", "__pycache__"))
        else:
            shutil.copy2(p, src)
    env = dict(os.environ, DEB_BUILD_OPTIONS=f"noautodbgsym nocheck parallel={os.cpu_count()}")
    run("dpkg-buildpackage", "-us", "-uc", "-b", cwd=src, env=env, timeout=900)
    debs = {p: glob.glob(os.path.join(tmp, f"{p}_*.deb")) for p in PACKAGES}
    assert all(len(v) == 1 for v in debs.values()), debs
    return [v[0] for v in debs.values()]


@pytest.mark.slow  # the package build compiles the programs and libcairn: a minute or two
def test_packages_build_install_mount_and_purge(tmp):
    for p in PACKAGES:
        if installed(p):
            pytest.skip(f"{p} is installed on this machine: not touching it")
    debs = build(tmp)
    # a mount.cairn that `make install` (or a test) put there is kept aside
    helper = "/sbin/mount.cairn"
    backup = helper + ".pkgtest-backup" if os.path.lexists(helper) else None
    if backup:
        os.replace(helper, backup)
    own_workdir = not os.path.exists(WORKDIR)
    workdir = WORKDIR if own_workdir else os.path.join(tmp, "cairnd")
    mnt, brick = os.path.join(tmp, "mnt"), os.path.join(tmp, "brick")
    os.makedirs(mnt)
    os.makedirs(brick)
    use_systemd = own_workdir and systemd_reaches_us()
    files = []
    try:
        if use_systemd:
            # the package starts cairnd on installation: on our address, not
            # on every address, where the other tests' cairnds listen
            with open("/etc/default/cairnd", "w") as f:
                f.write(f'CAIRND_OPTIONS="--listen {HOST}"\n')
        run("dpkg", "-i", "--force-confold", *debs)
        for p in PACKAGES:
            files += [f for f in run("dpkg", "-L", p).stdout.split("\n")
                      if f and os.path.isfile(f)]
        for f in ["/usr/sbin/cairnd", "/usr/sbin/cairn-brickd", "/usr/sbin/cairn-shd",
                  "/usr/sbin/cairn", "/usr/sbin/cairn-fuse", helper,
                  "/lib/systemd/system/cairnd.service", "/etc/default/cairnd",
                  "/etc/logrotate.d/cairn-server", "/etc/logrotate.d/cairn-client",
                  "/usr/share/bash-completion/completions/cairn",
                  "/usr/share/man/man8/cairnd.8.gz", "/usr/share/man/man8/mount.cairn.8.gz",
                  "/usr/include/cairn/cairn.h"]:
            assert f in files or os.path.realpath(f) in map(os.path.realpath, files), f
        assert run("pkg-config", "--libs", "cairn").stdout.strip() == "-lcairn"
        if shutil.which("systemd-analyze"):
            # the installed unit, its command and its man page
            r = run("systemd-analyze", "verify", "/lib/systemd/system/cairnd.service")
            assert r.stdout + r.stderr == "", r.stdout + r.stderr
        run("man", "-w", "cairn-fuse", env=dict(os.environ, MANPATH="/usr/share/man"))

        # cairnd: through its unit, or as the unit would run it
        if use_systemd:
            run("systemctl", "restart", "cairnd")
            assert run("systemctl", "is-active", "cairnd").stdout.strip() == "active"
        else:
            run("/usr/sbin/cairnd", "--listen", HOST, "--workdir", workdir, "--log-file",
                os.path.join(workdir, "cairnd.log"))
        assert port_open(HOST, 24810)
        cli = ["/usr/sbin/cairn", "--remote-host", HOST]
        run(*cli, "volume", "create", "pkgvol", f"{HOST}:{brick}", "force")
        run(*cli, "volume", "start", "pkgvol")

        # fstab as an administrator writes it; mount(8) finds /sbin/mount.cairn
        fstab = os.path.join(tmp, "fstab")
        with open(fstab, "w") as f:
            f.write(f"{HOST}:/pkgvol {mnt} cairn defaults,_netdev,nofail,"
                    f"x-systemd.mount-timeout=30,noatime,log-file={tmp}/mnt.log 0 0\n")
        run("mount", "-a", "-t", "cairn", "-T", fstab, env={"PATH": "/usr/sbin:/usr/bin"})
        assert mounted(mnt)
        data = os.urandom(200_000)
        with open(os.path.join(mnt, "through-fstab"), "wb") as f:
            f.write(data)
            os.fsync(f.fileno())
        with open(os.path.join(mnt, "through-fstab"), "rb") as f:
            assert f.read() == data
        with open(os.path.join(brick, "through-fstab"), "rb") as f:
            assert f.read() == data
        run("umount", mnt)
        assert not mounted(mnt)

        # logrotate's files parse; on the packaged paths they rotate for real
        run("logrotate", "-d", "/etc/logrotate.d/cairn-server", "/etc/logrotate.d/cairn-client")
        if own_workdir:
            state = os.path.join(tmp, "logrotate.state")
            run("logrotate", "-f", "-s", state, "/etc/logrotate.d/cairn-server")
            assert os.path.exists(os.path.join(workdir, "cairnd.log.1"))
            wait_until(lambda: os.path.exists(os.path.join(workdir, "cairnd.log")), 10,
                     "cairnd to reopen its log after logrotate")
            blogs = glob.glob(os.path.join(workdir, "logs", "bricks", "*.log.1"))
            assert blogs, os.listdir(os.path.join(workdir, "logs", "bricks"))
            wait_until(lambda: all(os.path.exists(b[:-2]) for b in blogs), 10,
                     "the brick to reopen its log")

        # stopping cairnd stops its brick
        if use_systemd:
            run("systemctl", "stop", "cairnd")
        else:
            pid = int(open(os.path.join(workdir, "cairnd.pid")).read())
            os.kill(pid, signal.SIGTERM)
            wait_until(lambda: not os.path.exists(f"/proc/{pid}"), 30, "cairnd to stop", step=0.1)
        assert not port_open(HOST, 24810)
        wait_until(lambda: not run("pgrep", "-f", f"--brick-path {brick}", check=False).stdout,
                 10, "the brick to stop", step=0.1)
    finally:
        if mounted(mnt):
            subprocess.run(["umount", "-l", mnt])
        for pidfile in [os.path.join(workdir, "cairnd.pid")]:
            try:
                pid = int(open(pidfile).read())
                if "cairnd" in open(f"/proc/{pid}/comm").read():
                    os.kill(pid, signal.SIGKILL)
            except (OSError, ValueError):
                pass
        for pid in run("pgrep", "-f", f"--brick-path {brick}", check=False).stdout.split():
            os.kill(int(pid), signal.SIGKILL)
        if use_systemd:
            subprocess.run(["systemctl", "stop", "cairnd"], capture_output=True)
        # purging cairn-client removes /var/log/cairn: the logs of mounts
        # made by other tests (from the build tree) wait aside meanwhile,
        # and a log of our own shows that purge removes it
        logs_aside = None
        if os.path.isdir(LOGDIR):
            logs_aside = LOGDIR + ".pkgtest-aside"
            os.rename(LOGDIR, logs_aside)
        os.makedirs(LOGDIR, exist_ok=True)
        open(os.path.join(LOGDIR, "mnt-pkgtest.log"), "w").close()
        r = subprocess.run(["apt-get", "purge", "-y", "-q", *PACKAGES], capture_output=True,
                           text=True, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        # purge removes cairnd's logs and runtime files, keeps the pool's state
        state_left = sorted(os.listdir(WORKDIR)) if own_workdir and os.path.isdir(WORKDIR) else []
        if own_workdir:
            shutil.rmtree(WORKDIR, ignore_errors=True)
        if backup:
            os.replace(backup, helper)
        logs_purged = not os.path.exists(LOGDIR)
        if logs_aside:
            os.makedirs(LOGDIR, exist_ok=True)
            for name in os.listdir(logs_aside):
                os.replace(os.path.join(logs_aside, name), os.path.join(LOGDIR, name))
            os.rmdir(logs_aside)
    assert r.returncode == 0, r.stdout + r.stderr
    assert logs_purged, f"purge left {LOGDIR}"
    for p in PACKAGES:
        assert not installed(p), p
    left = [f for f in files if os.path.lexists(f) and not (backup and f == helper)]
    assert left == [], left
    for d in ["/etc/default/cairnd", "/etc/logrotate.d/cairn-server",
              "/etc/logrotate.d/cairn-client",
              "/usr/share/doc/cairn-server", "/usr/include/cairn"]:
        assert not os.path.exists(d), d
    assert not os.path.lexists("/etc/systemd/system/multi-user.target.wants/cairnd.service")
    assert not [f for f in state_left if "log" in f or f in ("run", "cairnd.pid")], state_left
