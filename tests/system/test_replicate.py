"""Replicated volumes: layout, byte-identical replicas, a brick killed during
a copy, heal, quorum loss, the arbiter. One cairnd with three bricks on one
host (force). A brick is kept down by SIGSTOP (cairnd does not restart a
stopped process); SIGKILL is used where a restart by cairnd is wanted."""

import errno
import os
import subprocess
import time

import pytest

from cairn_cluster import Cluster, as_user, fsync_dir, start_copy

HOST = "127.0.0.63"
PORT = 24960


def tree_diff(a, b):
    r = subprocess.run(["diff", "-r", "--no-dereference", "--exclude=.cairn", a, b],
                       capture_output=True, text=True)
    return r.returncode, r.stdout[-2000:]


@pytest.fixture
def rep3():
    with Cluster(host=HOST, port=PORT, prefix="repl-") as c:
        bricks = [c.brick_path(f"b{i}") for i in range(3)]
        for b in bricks:
            os.makedirs(b)
        c.cli("volume", "create", "rv", "replica", "3", *[f"{HOST}:{b}" for b in bricks], "force")
        c.cli("volume", "set", "rv", "network.ping-timeout", "2")
        c.cli("volume", "start", "rv")
        m = c.mount("rv", os.path.join(c.root, "mnt"))
        yield c, bricks, m.path


def wait_heal(c, bricks, src, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        c.cli("volume", "heal", "rv", check=False)
        if all(tree_diff(src, b)[0] == 0 for b in bricks):
            return
        time.sleep(1)
    raise AssertionError("replicas differ after heal: " + tree_diff(src, bricks[0])[1] +
                         tree_diff(bricks[0], bricks[2])[1])


def test_info_and_status():
    with Cluster(host=HOST, port=PORT, prefix="repl-") as c:
        b = [c.brick_path(f"x{i}") for i in range(6)]
        for p in b:
            os.makedirs(p)
        c.cli("volume", "create", "a", "replica", "3", "arbiter", "1",
              *[f"{HOST}:{p}" for p in b[:3]], "force")
        out = c.cli("volume", "info", "a").stdout
        assert "Type: Replicate" in out
        assert "Number of Bricks: 1 x (2 + 1) = 3" in out
        assert f"Brick3: {HOST}:{b[2]} (arbiter)" in out
        assert f"Brick2: {HOST}:{b[1]}\n" in out
        c.cli("volume", "create", "d", "replica", "3", *[f"{HOST}:{p}" for p in b[3:]],
              f"{HOST}:{c.brick_path('y0')}", "force", check=False)
        r = c.cli("volume", "create", "d", "replica", "2", f"{HOST}:{b[3]}", "force", check=False)
        assert r.returncode != 0 and "Incorrect number of bricks" in r.stderr
        r = c.cli("volume", "create", "d", "replica", "2", "arbiter", "1",
                  *[f"{HOST}:{p}" for p in b[3:5]], "force", check=False)
        assert r.returncode != 0
        for p in b[3:]:
            os.makedirs(p + "z")
        c.cli("volume", "create", "d", "replica", "3", *[f"{HOST}:{p}" for p in b[3:]],
              *[f"{HOST}:{p}z" for p in b[3:]], "force")
        out = c.cli("volume", "info", "d").stdout
        assert "Type: Distributed-Replicate" in out and "Number of Bricks: 2 x 3 = 6" in out
        c.cli("volume", "start", "a")
        st = c.brick_status("a")
        assert len(st) == 3 and all(s[3] for s in st)


def test_identical_replicas(rep3):
    c, bricks, mnt = rep3
    os.makedirs(os.path.join(mnt, "d/e"))
    data = os.urandom(300000)
    with open(os.path.join(mnt, "d/e/f"), "wb") as f:
        f.write(data)
    os.symlink("e/f", os.path.join(mnt, "d/l"))
    os.chmod(os.path.join(mnt, "d/e/f"), 0o640)
    os.rename(os.path.join(mnt, "d/e/f"), os.path.join(mnt, "d/e/g"))
    with open(os.path.join(mnt, "d/e/g"), "rb") as f:
        assert f.read() == data
    # written back (the mount made d/e): on the bricks once d/e is synced
    fsync_dir(os.path.join(mnt, "d/e"))
    for b in bricks:
        with open(os.path.join(b, "d/e/g"), "rb") as f:
            assert f.read() == data
        assert os.stat(os.path.join(b, "d/e/g")).st_mode & 0o777 == 0o640
        assert tree_diff(bricks[0], b)[0] == 0
        assert not os.listdir(os.path.join(b, ".cairn/index")) if os.path.isdir(
            os.path.join(b, ".cairn/index")) else True


def make_source(root, n):
    src = os.path.join(root, "src")
    os.makedirs(src)
    for i in range(n):
        d = os.path.join(src, f"d{i // 200}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i}"), "wb") as f:
            f.write(os.urandom(i % 3000))
    return src


def test_kill_brick_during_copy_then_heal(rep3):
    c, bricks, mnt = rep3
    src = make_source(c.root, 4000)
    pid = c.brick_status("rv")[1][3]
    cp = start_copy(src, os.path.join(mnt, "copy"))
    os.kill(pid, 9)  # cairnd restarts it; it comes back stale
    _, err = cp.communicate(timeout=120)
    assert cp.returncode == 0, err
    rc, out = tree_diff(src, os.path.join(mnt, "copy"))
    assert rc == 0, out
    wait_heal(c, [os.path.join(b, "copy") for b in bricks], src)
    end = time.time() + 30  # the restarted brick may still be connecting
    while True:
        info = c.cli("volume", "heal", "rv", "info").stdout
        if info.count("Number of entries: 0") == 3 or time.time() > end:
            break
        time.sleep(0.5)
    assert info.count("Number of entries: 0") == 3, info


def test_stopped_brick_then_heal(rep3):
    c, bricks, mnt = rep3
    src = make_source(c.root, 300)
    pid = c.brick_status("rv")[2][3]
    c.stop_signal(pid)
    t = time.time()
    subprocess.run(["cp", "-a", src, os.path.join(mnt, "copy")], check=True, timeout=120)
    assert time.time() - t < 30  # one ping timeout, not one per operation
    info = c.cli("volume", "heal", "rv", "info", timeout=30).stdout
    assert "Number of entries: 0" not in info.split("Brick")[1], info
    c.cont(pid)
    wait_heal(c, [os.path.join(b, "copy") for b in bricks], src)


def test_two_down_writes_fail_reads_work(rep3):
    c, bricks, mnt = rep3
    with open(os.path.join(mnt, "keep"), "wb") as f:
        f.write(b"intact")
    st = c.brick_status("rv")
    for s in st[1:]:
        c.stop_signal(s[3])
    try:
        with open(os.path.join(mnt, "new"), "wb") as f:
            f.write(b"x")
    except OSError as e:
        assert e.errno in (errno.EIO, errno.ENOTCONN, errno.EROFS)
    else:
        # Seen once in CI (ASan build, full suite), never reproduced: say
        # what the processes and bricks looked like.
        states = {s[3]: proc_state(s[3]) for s in st}
        on = [os.path.exists(os.path.join(b, "new")) for b in bricks]
        log = [m for m in c.mounts if m.path == mnt][0].tail(3000)
        pytest.fail(f"created with two of three bricks stopped: status {st}, "
                    f"process states {states}, 'new' on bricks {on}, mount log:\n{log}")
    with open(os.path.join(mnt, "keep"), "rb") as f:
        assert f.read() == b"intact"
    for s in st[1:]:
        c.cont(s[3])


def proc_state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError as e:
        return str(e)


def arbiter_volume(c, name, opts=()):
    """A started replica 3 arbiter 1 volume on three new bricks, mounted."""
    b = [c.brick_path(f"{name}{i}") for i in range(3)]
    for p in b:
        os.makedirs(p)
    c.cli("volume", "create", name, "replica", "3", "arbiter", "1",
          *[f"{HOST}:{p}" for p in b], "force")
    c.cli("volume", "start", name)
    return b, c.mount(name, os.path.join(c.root, "mnt"), opts=opts)


def test_arbiter_clears_set_id_bits_with_the_data_bricks():
    """A write by a user without CAP_FSETID clears set-id bits on every
    brick, the arbiter's copy included (it gets the write as a mark)."""
    with Cluster(host=HOST, port=PORT, prefix="repl-") as c:
        b, m = arbiter_volume(c, "kv", opts=("allow_other",))
        for name in ("w", "t"):
            p = os.path.join(m.path, name)
            with open(p, "wb") as f:
                f.write(b"x" * 100)
            os.chmod(p, 0o6777)
        code = {"w": 'fd = os.open(os.environ["P"], os.O_WRONLY)\n'
                     'os.pwrite(fd, b"w", 0)\n'
                     'os.close(fd)',
                "t": 'os.truncate(os.environ["P"], 10)'}
        for name, body in code.items():
            assert as_user(body, P=os.path.join(m.path, name))[0] == "OK"
            for p in b + [m.path]:
                assert os.stat(os.path.join(p, name)).st_mode & 0o7777 == 0o0777, (name, p)


def test_arbiter_holds_names_only():
    with Cluster(host=HOST, port=PORT, prefix="repl-") as c:
        b, m = arbiter_volume(c, "av")
        os.makedirs(os.path.join(m.path, "d"))
        with open(os.path.join(m.path, "d/f"), "wb") as f:
            f.write(b"z" * 100000)
        with open(os.path.join(m.path, "d/f"), "rb") as f:
            assert f.read() == b"z" * 100000
        fsync_dir(os.path.join(m.path, "d"))  # written back until then
        assert os.path.getsize(os.path.join(b[0], "d/f")) == 100000
        assert os.path.getsize(os.path.join(b[1], "d/f")) == 100000
        assert os.path.exists(os.path.join(b[2], "d/f"))
        assert os.path.getsize(os.path.join(b[2], "d/f")) == 0
