"""Who may use a mount, and with which permissions.

A mount lets every user in (allow_other) and the kernel checks permissions
from mode bits, owners and groups (default_permissions), as on a local
disk: the same operations by unprivileged users on a local directory and
on the mount must give the same results. `-o no-allow-other` keeps a mount
to its mounter. A mount by a user other than root can let others in only
where /etc/fuse.conf has user_allow_other (fusermount3's rule); without it
the default falls back, with a warning, to a mount only its mounter can
use, and an explicit `-o allow_other` fails saying why.

The unprivileged mounts run in a private mount namespace (unshare -m) in
which /etc/fuse.conf is replaced by the case's own file and /dev/fuse is a
node every user may open (as on a stock system; this machine's is 0600),
so the real fusermount3 decides, and nothing of the host changes.

Address: 127.0.0.65.
Run: /usr/bin/python3 -m pytest tests/system/test_mount_access.py
Binaries: $CAIRN_BUILD (default <repo>/build).
"""

import json
import os
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from cairn_cluster import (Cluster, as_user, detach, drop_privs, exe, kill_pid,  # noqa: E402
                           mounted, pids_with_arg)

HOST = "127.0.0.65"
USER, OTHER = 1000, 1001  # OTHER is in no group of the files below


def super_options(path):
    """The FUSE super block options of the mount at path (mountinfo)."""
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            if parts[4] == path:
                return parts[parts.index("-") + 3].split(",")
    raise AssertionError(f"{path} is not mounted")


def run_as(uid, code, **fmt):
    groups = (uid, 2000) if uid == USER else (uid,)
    return as_user(code, uid=uid, gid=uid, groups=groups, **fmt)[0]


# ---- the same tree and the same operations on a local disk and a mount ----

def make_tree(top):
    """As root: directories and files of every kind of permission."""
    def mk(rel, mode, uid=0, gid=0, data=None):
        p = os.path.join(top, rel)
        if data is None:
            os.mkdir(p)
        else:
            with open(p, "wb") as f:
                f.write(data)
        os.chown(p, uid, gid)
        os.chmod(p, mode)
    mk("ro", 0o755)
    mk("ro/f", 0o644, data=b"hello")
    mk("ro/secret", 0o600, data=b"secret")
    mk("ro/grp", 0o640, gid=2000, data=b"group")
    mk("ro/w", 0o666, data=b"anyone")
    mk("rw", 0o777)
    mk("sticky", 0o1777)
    mk("sticky/victim", 0o666, data=b"v")
    mk("x", 0o711)
    mk("x/f", 0o644, data=b"through")
    mk("none", 0o700)
    mk("none/f", 0o644, data=b"hidden")
    mk("grpdir", 0o770, gid=2000)
    mk("own", 0o755, uid=USER, gid=USER)
    mk("own/f", 0o600, uid=USER, gid=USER, data=b"mine")


# (uid, name, code): each runs in its own process; code sees T (the top).
OPS = [
    (USER, "read 0644", "open(os.environ['T'] + '/ro/f').read()"),
    (USER, "write 0644 of root", "open(os.environ['T'] + '/ro/f', 'a')"),
    (USER, "create in 0755 of root", "open(os.environ['T'] + '/ro/new', 'w')"),
    (USER, "read 0600 of root", "open(os.environ['T'] + '/ro/secret').read()"),
    (USER, "read 0640 of its group", "open(os.environ['T'] + '/ro/grp').read()"),
    (OTHER, "read 0640 of another group", "open(os.environ['T'] + '/ro/grp').read()"),
    (USER, "write 0666", "open(os.environ['T'] + '/ro/w', 'a').write('+')"),
    (USER, "truncate 0644 of root", "os.truncate(os.environ['T'] + '/ro/f', 0)"),
    (USER, "truncate 0666", "os.truncate(os.environ['T'] + '/ro/w', 2)"),
    (USER, "unlink in 0755 of root", "os.unlink(os.environ['T'] + '/ro/f')"),
    (USER, "chmod of root's file", "os.chmod(os.environ['T'] + '/ro/w', 0o600)"),
    (USER, "chown to itself", "os.chown(os.environ['T'] + '/ro/w', 1000, 1000)"),
    (USER, "set times of root's 0666 file", "os.utime(os.environ['T'] + '/ro/w', (1, 1))"),
    (USER, "touch root's 0666 file", "os.utime(os.environ['T'] + '/ro/w', None)"),
    (USER, "create in 0777", "open(os.environ['T'] + '/rw/mine', 'w').write('m')"),
    (USER, "chmod its file", "os.chmod(os.environ['T'] + '/rw/mine', 0o600)"),
    (OTHER, "read another's 0600", "open(os.environ['T'] + '/rw/mine').read()"),
    (OTHER, "unlink another's file in 0777", "os.unlink(os.environ['T'] + '/rw/mine')"),
    (USER, "mkdir and rmdir in 0777",
     "os.mkdir(os.environ['T'] + '/rw/d'); os.rmdir(os.environ['T'] + '/rw/d')"),
    (USER, "unlink root's file in sticky dir", "os.unlink(os.environ['T'] + '/sticky/victim')"),
    (USER, "rename root's file in sticky dir",
     "os.rename(os.environ['T'] + '/sticky/victim', os.environ['T'] + '/sticky/v2')"),
    (USER, "list 0711", "os.listdir(os.environ['T'] + '/x')"),
    (USER, "read through 0711", "open(os.environ['T'] + '/x/f').read()"),
    (USER, "stat inside 0700 of root", "os.stat(os.environ['T'] + '/none/f')"),
    (USER, "create in 0770 of its group", "open(os.environ['T'] + '/grpdir/g', 'w')"),
    (OTHER, "create in 0770 of another group", "open(os.environ['T'] + '/grpdir/o', 'w')"),
    (USER, "read its own 0600", "open(os.environ['T'] + '/own/f').read()"),
    (OTHER, "read another user's 0600", "open(os.environ['T'] + '/own/f').read()"),
    (USER, "rename its own file", "os.rename(os.environ['T'] + '/own/f', os.environ['T'] + '/own/g')"),
]

# What a local disk answers (checked against it below, too).
EXPECTED = {
    "read 0644": "OK", "write 0644 of root": "ERR EACCES", "create in 0755 of root": "ERR EACCES",
    "read 0600 of root": "ERR EACCES", "read 0640 of its group": "OK",
    "read 0640 of another group": "ERR EACCES", "write 0666": "OK",
    "truncate 0644 of root": "ERR EACCES", "truncate 0666": "OK",
    "unlink in 0755 of root": "ERR EACCES", "chmod of root's file": "ERR EPERM",
    "chown to itself": "ERR EPERM", "set times of root's 0666 file": "ERR EPERM",
    "touch root's 0666 file": "OK", "create in 0777": "OK", "chmod its file": "OK",
    "read another's 0600": "ERR EACCES", "unlink another's file in 0777": "OK",
    "mkdir and rmdir in 0777": "OK", "unlink root's file in sticky dir": "ERR EPERM",
    "rename root's file in sticky dir": "ERR EPERM", "list 0711": "ERR EACCES",
    "read through 0711": "OK", "stat inside 0700 of root": "ERR EACCES",
    "create in 0770 of its group": "OK", "create in 0770 of another group": "ERR EACCES",
    "read its own 0600": "OK", "read another user's 0600": "ERR EACCES",
    "rename its own file": "OK",
}


def run_ops(top):
    return {name: run_as(uid, code, T=top) for uid, name, code in OPS}


def tree_state(top):
    """Names, modes, owners and sizes under top, after the operations."""
    out = {}
    for d, dirs, files in os.walk(top):
        for n in dirs + files:
            p = os.path.join(d, n)
            st = os.lstat(p)
            out[os.path.relpath(p, top)] = (st.st_mode, st.st_uid, st.st_gid,
                                            0 if n in dirs else st.st_size)
    return out


# ---- fixtures ----

@pytest.fixture(scope="module")
def cluster():
    with Cluster(host=HOST, prefix="access-") as c:
        c.create_volume("acc")
        yield c


@pytest.fixture(scope="module")
def root_mount(cluster):
    """Mounted by root with no option at all, as fstab's `defaults` does."""
    m = cluster.mount("acc", os.path.join(cluster.root, "m"))
    os.chmod(m.path, 0o755)
    return m


def test_defaults_let_every_user_in_with_permissions_checked(root_mount):
    opts = super_options(root_mount.path)
    assert "allow_other" in opts and "default_permissions" in opts, opts
    assert run_as(USER, "os.listdir(os.environ['T'])", T=root_mount.path) == "OK"


def test_permissions_as_on_a_local_disk(cluster, root_mount):
    local = tempfile.mkdtemp(prefix="access-local-", dir=cluster.root)
    os.chmod(local, 0o755)
    remote = os.path.join(root_mount.path, "t")
    os.mkdir(remote)
    os.chmod(remote, 0o755)
    for top in (local, remote):
        make_tree(top)
    want = run_ops(local)
    assert want == EXPECTED, "the local disk answers otherwise: fix EXPECTED"
    got = run_ops(remote)
    assert got == want
    assert tree_state(remote) == tree_state(local)
    # and what the operations left is there for root too
    with open(os.path.join(remote, "ro", "w"), "rb") as f:
        assert f.read() == b"an"


def test_no_allow_other_keeps_the_mount_to_its_mounter(cluster, root_mount):
    with open(os.path.join(root_mount.path, "pub"), "wb") as f:
        f.write(b"p")
    os.chmod(os.path.join(root_mount.path, "pub"), 0o644)
    m = cluster.mount("acc", os.path.join(cluster.root, "mine"), opts=["no-allow-other"])
    opts = super_options(m.path)
    assert "allow_other" not in opts and "default_permissions" in opts, opts
    assert run_as(USER, "os.stat(os.environ['T'])", T=m.path) == "ERR EACCES"
    assert run_as(USER, "open(os.environ['T'] + '/pub').read()", T=m.path) == "ERR EACCES"
    with open(os.path.join(m.path, "pub"), "rb") as f:
        assert f.read() == b"p"
    assert "only uid" not in m.tail()  # meant: no warning


def test_explicit_allow_other_as_root(cluster, root_mount):
    """The test fixtures' `-o allow_other`: set once, as before."""
    m = cluster.mount("acc", os.path.join(cluster.root, "asked"), opts=["allow_other"])
    opts = super_options(m.path)
    assert opts.count("allow_other") == 1 and "default_permissions" in opts, opts
    assert run_as(USER, "os.listdir(os.environ['T'])", T=m.path) == "OK"


@pytest.mark.parametrize("opts", ["allow_other,allow_root", "no-allow-other,allow_other",
                                  "allow_root,no-allow-other"])
def test_conflicting_access_options_refused(cluster, opts):
    mnt = os.path.join(cluster.root, "bad")
    os.makedirs(mnt, exist_ok=True)
    if mnt not in cluster.extra_mounts:  # detached at the end even if it mounts
        cluster.extra_mounts.append(mnt)
    r = subprocess.run([exe("cairn-fuse"), f"{HOST}:/acc", mnt, "-o", opts],
                       capture_output=True, text=True, timeout=60)
    cluster.extra_pids += pids_with_arg(mnt)  # a mount that daemonized, wrongly
    assert r.returncode == 1 and not mounted(mnt), r.stderr
    assert ("cairn-fuse: mount options allow_other, allow_root and no-allow-other exclude each "
            "other") in r.stderr
    r = subprocess.run([exe("cairn-fuse"), f"{HOST}:/acc", mnt, "-o", "no-allow-other=yes"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "invalid mount option 'no-allow-other=yes'" in r.stderr


# ---- mounts by a user other than root, in a private mount namespace ----

NO_USER_ALLOW_OTHER = "# user_allow_other\nmount_max = 1000\n"
USER_ALLOW_OTHER = "  user_allow_other  # for the test\n"


def in_namespace(cluster, conf_text, cases, timeout=120):
    """Runs this file's ns_main in a private mount namespace where
    /etc/fuse.conf holds conf_text; returns its results (JSON)."""
    work = tempfile.mkdtemp(prefix="ns-", dir=cluster.root)
    os.chmod(work, 0o755)
    conf = os.path.join(work, "fuse.conf")
    with open(conf, "w") as f:
        f.write(conf_text)
    args = {"work": work, "conf": conf, "spec": f"{HOST}:/acc", "cases": cases}
    try:
        r = subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable,
                            os.path.abspath(__file__), json.dumps(args)],
                           capture_output=True, text=True, timeout=timeout)
    finally:
        # the namespace's mounts died with it; its processes are ours to end
        for case in cases:
            for pid in pids_with_arg(os.path.join(work, case["name"])):
                kill_pid(pid)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def ns_main(args):
    """Inside the namespace: mounts as each case's user, records what
    happens, unmounts."""
    work = args["work"]
    subprocess.run(["mount", "--bind", args["conf"], "/etc/fuse.conf"], check=True)
    dev = os.path.join(work, "dev")
    os.mkdir(dev)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=755", "tmpfs", dev], check=True)
    os.mknod(os.path.join(dev, "fuse"), 0o20666, os.makedev(10, 229))
    os.chmod(os.path.join(dev, "fuse"), 0o666)
    subprocess.run(["mount", "--bind", os.path.join(dev, "fuse"), "/dev/fuse"], check=True)
    results = {}
    for case in args["cases"]:
        mnt = os.path.join(work, case["name"])
        os.mkdir(mnt)
        os.chown(mnt, case["uid"], case["uid"])
        out = open(mnt + ".out", "wb")
        proc = subprocess.Popen([exe("cairn-fuse"), args["spec"], mnt, "-f", *case["opts"]],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                preexec_fn=drop_privs(case["uid"], case["uid"], [case["uid"]]))
        end = time.time() + 20
        while time.time() < end and proc.poll() is None and not mounted(mnt):
            time.sleep(0.05)
        res = {"mounted": mounted(mnt)}
        if res["mounted"]:
            # up once its root answers its mounter (root may not be let in)
            while time.time() < end and run_as(case["uid"], "os.stat(os.environ['T'])",
                                               T=mnt) != "OK":
                time.sleep(0.05)
            res["opts"] = super_options(mnt)
            res["checks"] = [run_as(uid, code, T=mnt) for uid, code in case["checks"]]
            detach(mnt)
        try:
            res["status"] = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            kill_pid(proc.pid)
            res["status"] = proc.wait()
        out.close()
        with open(mnt + ".out", errors="replace") as f:
            res["output"] = f.read()
        results[case["name"]] = res
    print(json.dumps(results))


CHECKS = [
    (USER, "open(os.environ['T'] + '/pub').read()"),
    (USER, "open(os.environ['T'] + '/u-' + str(os.getpid()), 'w').write('x')"),
    (OTHER, "open(os.environ['T'] + '/pub').read()"),
    (OTHER, "open(os.environ['T'] + '/priv').read()"),
]


@pytest.fixture(scope="module")
def shared_files(root_mount):
    """Files every case reads: pub 0644, priv 0600 of root, and the root of
    the volume writable by USER."""
    for name, mode in (("pub", 0o644), ("priv", 0o600)):
        p = os.path.join(root_mount.path, name)
        with open(p, "wb") as f:
            f.write(name.encode())
        os.chmod(p, mode)
    os.chown(root_mount.path, USER, USER)
    yield
    os.chown(root_mount.path, 0, 0)


def test_user_mount_without_user_allow_other(cluster, root_mount, shared_files):
    res = in_namespace(cluster, NO_USER_ALLOW_OTHER, [
        {"name": "user", "uid": USER, "opts": [], "checks": CHECKS},
        {"name": "user-asks", "uid": USER, "opts": ["-o", "allow_other"], "checks": []},
        {"name": "user-off", "uid": USER, "opts": ["-o", "no-allow-other"], "checks": []},
        {"name": "root", "uid": 0, "opts": [], "checks": CHECKS},
    ])
    # the default falls back, mounted, with a warning that says what to do
    u = res["user"]
    assert u["mounted"] and u["status"] == 0, u
    assert "allow_other" not in u["opts"] and "default_permissions" in u["opts"], u
    assert u["checks"] == ["OK", "OK", "ERR EACCES", "ERR EACCES"], u
    assert (f"only uid {USER} can use this mount: a user other than root may let other users "
            "in only with 'user_allow_other' in /etc/fuse.conf") in u["output"], u["output"]
    # asked for explicitly: refused before mounting, saying why
    a = res["user-asks"]
    assert not a["mounted"] and a["status"] == 1, a
    assert (f"cairn-fuse: -o allow_other: a mount by uid {USER} (not root) may let other users "
            "in only with 'user_allow_other' in /etc/fuse.conf") in a["output"], a["output"]
    # no-allow-other: the same mount, without the warning
    o = res["user-off"]
    assert o["mounted"] and "only uid" not in o["output"], o
    # root needs no user_allow_other
    r = res["root"]
    assert r["mounted"] and "allow_other" in r["opts"], r
    assert r["checks"] == ["OK", "OK", "OK", "ERR EACCES"], r


def test_user_mount_with_user_allow_other(cluster, root_mount, shared_files):
    res = in_namespace(cluster, USER_ALLOW_OTHER, [
        {"name": "user", "uid": USER, "opts": [], "checks": CHECKS},
        {"name": "user-asks", "uid": USER, "opts": ["-o", "allow_other"], "checks": CHECKS},
    ])
    for name in ("user", "user-asks"):
        u = res[name]
        assert u["mounted"] and u["status"] == 0, u
        assert "allow_other" in u["opts"] and "default_permissions" in u["opts"], u
        assert u["checks"] == ["OK", "OK", "OK", "ERR EACCES"], u
        assert "only uid" not in u["output"], u["output"]


if __name__ == "__main__":
    ns_main(json.loads(sys.argv[1]))
