"""Root squash and all squash (docs/security.md, "Root squash").

With server.root-squash on, root on a mount acts as server.anonuid:anongid:
what it creates is theirs on every brick, and it is refused what an
unprivileged user is refused, whether the bricks answer or the mount does
(write-back, known directories). server.all-squash does the same to every
user. Each setting changes live on a mounted volume, and the bricks squash
a client that does not (libcairn's creates).

Addresses: 127.0.0.140.
Run: /usr/bin/python3 -m pytest tests/system/test_root_squash.py
"""

import errno
import os
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cairn_cluster import Cluster, as_user, exe, fsync_dir, made_here  # noqa: E402

HOST = "127.0.0.140"
NOBODY = 65534


def log_size(m):
    try:
        return os.path.getsize(m.log)
    except OSError:
        return 0


def wait_log(m, needle, since, timeout=10):
    """Waits until the mount's log has needle past offset since."""
    end = time.time() + timeout
    while True:
        with open(m.log, "rb") as f:
            f.seek(since)
            if needle in f.read().decode(errors="replace"):
                return
        if time.time() > end:
            raise AssertionError(f"{needle!r} not in the mount's log:\n{m.tail(3000)}")
        time.sleep(0.05)


class Env:
    pass


@pytest.fixture(scope="module")
def env():
    c = Cluster(host=HOST, prefix="squash-")
    try:
        c.start()
        e = Env()
        e.c = c
        e.bricks = [os.path.join(c.root, f"b{i}") for i in range(2)]
        c.create_volume("sq", e.bricks, replica=2)
        e.m = c.mount("sq", os.path.join(c.root, "m0"))
        e.mnt = e.m.path
        # made by root before any squash
        os.mkdir(os.path.join(e.mnt, "pub"))
        os.chmod(os.path.join(e.mnt, "pub"), 0o777)
        os.mkdir(os.path.join(e.mnt, "rootdir"), 0o755)
        os.mkdir(os.path.join(e.mnt, "user"), 0o755)
        os.chown(os.path.join(e.mnt, "user"), 1000, 1000)
        with open(os.path.join(e.mnt, "rootfile"), "w") as f:
            f.write("root's\n")
        os.chmod(os.path.join(e.mnt, "rootfile"), 0o644)
        e.settings = {}
        yield e
    finally:
        c.close()


def squash(e, **opts):
    """Sets the options (server_root_squash=on...) and waits for the mount."""
    since = log_size(e.m)
    before = dict(e.settings)
    for k, v in opts.items():
        name = "server." + k.replace("_", "-")
        e.c.cli("volume", "set", "sq", name, str(v))
        e.settings[name] = str(v)
    if e.settings == before:
        return
    root = e.settings.get("server.root-squash", "off")
    every = e.settings.get("server.all-squash", "off")
    uid = e.settings.get("server.anonuid", str(NOBODY))
    gid = e.settings.get("server.anongid", str(NOBODY))
    wait_log(e.m, f"squash: root-squash {root}, all-squash {every}, anonymous user {uid}:{gid}",
             since)


def owners(e, rel):
    """(uid, gid) on every brick, through the mount and through a fresh one
    (what the mount wrote back in rel's directory sent first)."""
    fsync_dir(os.path.dirname(os.path.join(e.mnt, rel)))
    seen = [(s.st_uid, s.st_gid) for s in (os.lstat(os.path.join(b, rel)) for b in e.bricks)]
    s = os.lstat(os.path.join(e.mnt, rel))
    seen.append((s.st_uid, s.st_gid))
    fresh = e.c.mount("sq", os.path.join(e.c.root, "fresh"))
    try:
        s = os.lstat(os.path.join(fresh.path, rel))
        seen.append((s.st_uid, s.st_gid))
    finally:
        fresh.stop()
        e.c.mounts.remove(fresh)
    return set(seen)


def err(fn, *args):
    try:
        fn(*args)
    except OSError as x:
        return errno.errorcode[x.errno]
    return "OK"


def test_root_squash(env):
    e = env
    p = lambda *a: os.path.join(e.mnt, *a)  # noqa: E731
    squash(e, root_squash="on")
    # a new file is the anonymous user's, everywhere
    with open(p("pub", "new"), "w") as f:
        f.write("x")
    assert owners(e, "pub/new") == {(NOBODY, NOBODY)}
    os.mkdir(p("pub", "newdir"))
    assert owners(e, "pub/newdir") == {(NOBODY, NOBODY)}
    # root's files and directories are not root's to change any more
    assert err(os.chmod, p("rootfile"), 0o666) == "EPERM"
    assert err(os.chown, p("rootfile"), 0, 0) == "EPERM"
    assert err(os.chown, p("rootfile"), NOBODY, -1) == "EPERM"
    assert err(os.open, p("rootfile"), os.O_WRONLY) == "EACCES"
    assert err(os.truncate, p("rootfile"), 0) == "EACCES"
    assert err(os.setxattr, p("rootfile"), "user.a", b"1") == "EACCES"
    assert err(os.open, p("rootdir", "f"), os.O_CREAT | os.O_WRONLY, 0o644) == "EACCES"
    assert err(os.mkdir, p("rootdir", "d")) == "EACCES"
    assert err(os.symlink, "x", p("rootdir", "l")) == "EACCES"
    assert err(os.unlink, p("rootfile")) == "EACCES"  # the volume's root is root's 0755
    assert err(os.rename, p("pub", "new"), p("rootdir", "new")) == "EACCES"
    # a user's 0755 directory is closed to the anonymous user as well
    assert err(os.open, p("user", "f"), os.O_CREAT | os.O_WRONLY, 0o644) == "EACCES"
    # reading what others may read is fine; so is changing its own file
    with open(p("rootfile")) as f:
        assert f.read() == "root's\n"
    os.chmod(p("pub", "new"), 0o600)
    os.utime(p("pub", "new"))
    with open(p("rootfile"), "rb"):
        pass
    # nothing was made or changed on the bricks by the refused requests
    for b in e.bricks:
        assert sorted(os.listdir(os.path.join(b, "rootdir"))) == []
        assert oct(os.stat(os.path.join(b, "rootfile")).st_mode & 0o777) == oct(0o644)
        assert os.stat(os.path.join(b, "rootfile")).st_uid == 0


def test_write_back_squashed(env):
    """What write-back answers alone gives the same results: owner and
    refusals."""
    e = env
    p = lambda *a: os.path.join(e.mnt, *a)  # noqa: E731
    squash(e, root_squash="off")
    # a directory root makes and this mount holds: its creates are written back
    os.mkdir(p("wbroot"), 0o755)
    before = made_here(e.mnt)
    with open(p("wbroot", "warm"), "w") as f:
        f.write("w")
    assert made_here(e.mnt) > before, "write-back is not in play: the test proves nothing"
    squash(e, root_squash="on")
    # still held by this mount: the create is decided here, as the bricks would
    assert err(os.open, p("wbroot", "f"), os.O_CREAT | os.O_WRONLY, 0o644) == "EACCES"
    assert err(os.mkdir, p("wbroot", "d")) == "EACCES"
    assert err(os.chmod, p("wbroot", "warm"), 0o600) == "EPERM"
    # a directory the squashed root makes is the anonymous user's; its
    # files are written back with that owner
    os.mkdir(p("pub", "mine"))
    before = made_here(e.mnt)
    for i in range(3):
        with open(p("pub", "mine", f"f{i}"), "w") as f:
            f.write(f"data {i}\n")
    assert made_here(e.mnt) >= before + 3, "the files were not written back"
    assert os.stat(p("pub", "mine", "f0")).st_uid == NOBODY
    fsync_dir(p("pub", "mine"))
    assert owners(e, "pub/mine/f2") == {(NOBODY, NOBODY)}
    assert owners(e, "pub/mine") == {(NOBODY, NOBODY)}


def test_anon_ids_and_all_squash(env):
    e = env
    p = lambda *a: os.path.join(e.mnt, *a)  # noqa: E731
    squash(e, root_squash="on", anonuid=4321, anongid=4322)
    with open(p("pub", "ids"), "w") as f:
        f.write("x")
    assert owners(e, "pub/ids") == {(4321, 4322)}
    # a user other than root is not squashed by root-squash ...
    last, out = as_user("open(os.path.join(os.environ['D'], 'u1'), 'w').close()",
                        D=p("pub"))
    assert last == "OK", out
    assert owners(e, "pub/u1") == {(1000, 1000)}
    last, out = as_user("open(os.path.join(os.environ['D'], 'f'), 'w').close()", D=p("user"))
    assert last == "OK", out
    # ... but by all-squash, in its own directory too
    squash(e, all_squash="on")
    last, out = as_user("open(os.path.join(os.environ['D'], 'u2'), 'w').close()",
                        D=p("pub"))
    assert last == "OK", out
    assert owners(e, "pub/u2") == {(4321, 4322)}
    last, out = as_user("open(os.path.join(os.environ['D'], 'g'), 'w').close()", D=p("user"))
    assert last == "ERR EACCES", out
    last, out = as_user("os.chmod(os.environ['F'], 0o600)", F=p("user", "f"))
    assert last == "ERR EPERM", out
    squash(e, all_squash="off", anonuid=NOBODY, anongid=NOBODY)


def test_bricks_squash_a_client_that_does_not(env):
    """libcairn does not map identities: the bricks give its creates the
    anonymous owner."""
    e = env
    squash(e, root_squash="on")
    sh = subprocess.run([exe("cairn-shell"), f"{e.c.remote}:/sq"], capture_output=True,
                        text=True, timeout=60,
                        input="write /pub/lib hello\nmkdir /pub/libdir\nquit\n")
    assert sh.returncode == 0, sh.stderr
    assert sh.stdout.split("\n")[1:3] == ["ok", "ok"], sh.stdout
    for rel in ("pub/lib", "pub/libdir"):
        for b in e.bricks:
            s = os.lstat(os.path.join(b, rel))
            assert (s.st_uid, s.st_gid) == (NOBODY, NOBODY), rel


def test_off_restores_root(env):
    e = env
    p = lambda *a: os.path.join(e.mnt, *a)  # noqa: E731
    squash(e, root_squash="off", all_squash="off")
    os.chmod(p("rootfile"), 0o640)
    os.chown(p("rootfile"), 0, 0)
    with open(p("rootdir", "f"), "w") as f:
        f.write("y")
    with open(p("wbroot", "f"), "w") as f:
        f.write("y")
    fsync_dir(p("wbroot"))
    assert owners(e, "rootdir/f") == {(0, 0)}
    assert owners(e, "wbroot/f") == {(0, 0)}
    for b in e.bricks:
        assert os.stat(os.path.join(b, "rootfile")).st_mode & 0o777 == 0o640
