"""Reads come from a good copy (issue 42, docs/replication.md "Reads come
from a good copy"): a copy that missed changes is never read, by any
client, from the moment the change that it missed returned until heal has
made it whole again, whether it missed them because it was down, hung
(and another client kept its connection to it), or refused them.

Three cairnd on 127.0.0.150-152, one brick of each replica 3 volume on
each. Run:
  unshare -n sh -c 'ip link set lo up; CAIRN_BUILD=$PWD/build \
      /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/system/test_good_copy.py'
"""

import errno
import os
import signal

import pytest

from replica_pool import Pool, Vol, file_sums, sha, wait_until

HOSTS = ["127.0.0.150", "127.0.0.151", "127.0.0.152"]
PING = 3
NAMES = [f"f{i}" for i in range(24)]  # the path hash spreads their reads over all copies


@pytest.fixture(scope="module")
def pool():
    p = Pool(HOSTS, "st-good-")
    try:
        yield p.start()
    finally:
        p.close()


@pytest.fixture
def make_vol(pool):
    made = []

    def make(**kw):
        v = Vol(pool, **kw)
        made.append(v)
        return v

    yield make
    pool.revive()
    for v in made:
        v.close()


def write_all(root, names, data):
    for n in names:
        with open(os.path.join(root, n), "wb") as f:
            f.write(data[n])


def versions(tag):
    return {n: (tag + n).encode() * 50 for n in NAMES}


def test_fresh_mount_does_not_read_a_copy_that_was_down(make_vol):
    """A server was down while files changed, the client that changed them
    is gone (no client heal), the self-heal daemons are off: a mount made
    after the server came back reads every file's new contents, heal info
    lists them, and heal makes every brick equal."""
    v = make_vol(options={"network.ping-timeout": str(PING), "cluster.self-heal-daemon": "off"})
    a = v.mounts[0]
    old, new = versions("old-"), versions("new-")
    write_all(a.path, NAMES, old)
    back = v.server_down(2)
    write_all(a.path, NAMES, new)
    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait()
    v.unmount(a)
    back()
    b = v.mount("fresh")
    before = v.brick_reads()
    got = file_sums(b.path, NAMES)
    assert got == {n: sha(new[n]) for n in NAMES}
    after = v.brick_reads()
    assert after[2] == before[2], f"the copy that was down served reads: {before} -> {after}"
    assert v.heal_entries() >= len(NAMES)
    v.heal()
    for brick in v.bricks:
        assert file_sums(brick, NAMES) == {n: sha(new[n]) for n in NAMES}, brick
    wait_until(lambda: v.heal_entries() == 0, 60, "heal info to be clean")
    assert file_sums(b.path, NAMES) == {n: sha(new[n]) for n in NAMES}


def test_other_client_does_not_read_a_hung_copy_that_woke(make_vol):
    """Client B has the files open to no one and its connection to brick 3
    stays up; brick 3 hangs (SIGSTOP) while client A rewrites the files
    (A drops brick 3 after the ping timeout), then wakes. B reads every
    file right after A's writes returned: the new contents, never brick 3's
    old ones."""
    v = make_vol(options={"network.ping-timeout": str(PING), "cluster.self-heal-daemon": "off"},
                 mounts=2)
    a, b = v.mounts
    old, new = versions("old-"), versions("new-")
    write_all(a.path, NAMES, old)
    assert file_sums(b.path, NAMES) == {n: sha(old[n]) for n in NAMES}
    node = v.pool.nodes[2]
    pid = v.brick_pid(2)
    node.stop_signal(pid)
    try:
        write_all(a.path, NAMES, new)
    finally:
        node.cont(pid)
    got = file_sums(b.path, NAMES)
    stale = [n for n in NAMES if got[n] != sha(new[n])]
    assert not stale, f"B read old contents of {stale}"
    # both clients confirmed the accusation at once (no recall timeout)
    assert "did not confirm" not in v.pool.brick_logs()
    assert v.brick_pid(2) == pid, "the brick restarted"
    v.heal()
    wait_until(lambda: v.heal_entries() == 0, 60, "heal info to be clean")
    for brick in v.bricks:
        assert file_sums(brick, NAMES) == {n: sha(new[n]) for n in NAMES}, brick


def test_accusation_clears_after_heal(make_vol):
    """Once heal made the copy whole it is read from again: the bricks log
    that the marks against it are cleared, and a fresh mount's reads reach
    it as they reach the others."""
    v = make_vol(options={"network.ping-timeout": str(PING), "cluster.self-heal-daemon": "off"})
    a = v.mounts[0]
    write_all(a.path, NAMES, versions("x-"))
    back = v.server_down(1)
    new = versions("y-")
    write_all(a.path, NAMES, new)
    back()
    v.unmount(a)

    def fresh_reads(tag):
        m = v.mount(tag)
        before = v.brick_reads()
        assert file_sums(m.path, NAMES) == {n: sha(new[n]) for n in NAMES}
        after = v.brick_reads()
        v.unmount(m)
        return [x - y for x, y in zip(after, before)]

    assert fresh_reads("before")[1] == 0
    v.heal()
    wait_until(lambda: v.heal_entries() == 0, 60, "heal info to be clean")
    logs = os.path.join(v.pool.nodes[0].workdir, "logs", "bricks")
    text = "".join(open(os.path.join(logs, f)).read() for f in os.listdir(logs))
    assert "now holds marks against replica(s) 0x2" in text
    assert "marks against replica(s) 0x2 of this set are all cleared" in text
    assert wait_until(lambda: fresh_reads("after")[1] > 0, 20, "reads from the healed copy")


def test_every_copy_accused_reads_by_the_objects_own_marks(make_vol):
    """One file in split brain (each copy blames the others, made by hand
    on the bricks as test_heal.py does) makes every brick accuse the
    others: reads then go by each object's own marks, so every other file
    still reads, and the split one fails with EIO instead of returning one
    side's bytes."""
    import struct
    import uuid
    v = make_vol(options={"cluster.self-heal-daemon": "off"})
    a = v.mounts[0]
    data = versions("z-")
    write_all(a.path, NAMES, data)
    with open(os.path.join(a.path, "split"), "wb") as f:
        f.write(b"agreed")
    v.unmount(a)
    for i, b in enumerate(v.bricks):
        p = os.path.join(b, "split")
        with open(p, "wb") as f:
            f.write(f"brick {i} says".encode())
        os.setxattr(p, "trusted.cairn.pending", struct.pack("<I", 0b111 & ~(1 << i)))
        idx = os.path.join(b, ".cairn", "index")
        os.makedirs(idx, exist_ok=True)
        g = str(uuid.UUID(bytes=os.getxattr(p, "trusted.cairn.gfid")))
        with open(os.path.join(idx, g), "w") as f:
            f.write("/split")
    # the bricks learn their marks when they start: restart them
    pids = [v.brick_pid(i) for i in range(3)]
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: all(v.brick_pid(i) not in (None, pids[i]) for i in range(3)), 30,
               "the bricks to be restarted")
    v.wait_bricks()
    m = v.mount("after")
    assert file_sums(m.path, NAMES) == {n: sha(data[n]) for n in NAMES}
    with pytest.raises(OSError) as e:
        open(os.path.join(m.path, "split"), "rb").read()
    assert e.value.errno == errno.EIO
    assert "no reachable copy is known to hold every change" in open(m.log).read()
