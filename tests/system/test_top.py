"""`cairn volume top`: the paths each brick served most, counted by the
brick, in GlusterFS's layout. A mount opens, reads (O_DIRECT, so every
read reaches the brick), writes and lists known paths a known number of
times; top must list them first, with at least those counts, and the
perf lists must time a real write and read on each brick. Also `volume
status VOL clients`, the bricks' client connections.
One cairnd on 127.0.0.235, a replica 2 volume (each brick counts what it
served).

Run: /usr/bin/python3 -m pytest tests/system/test_top.py
"""

import os
import re
import subprocess

import pytest

from cairn_cluster import Cluster

HOST = "127.0.0.235"
VOL = "tp"


@pytest.fixture(scope="module")
def c():
    cl = Cluster(host=HOST, prefix="st-top-")
    try:
        cl.start()
        cl.create_volume(VOL, [cl.brick_path("b0"), cl.brick_path("b1")], replica=2)
        cl.mnt = cl.mount(VOL, os.path.join(cl.root, "m"))
        yield cl
    finally:
        cl.close()


def top(c, *args, check=True):
    r = c.cli("volume", "top", VOL, *args, check=check)
    return r


def blocks(out):
    """{brick: [(count, path)]} from a count list."""
    res, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"^Brick: (\S+)$", line)
        if m:
            cur = res.setdefault(m.group(1), [])
            continue
        m = re.match(r"^(\d+)\t\t(/.*)$", line)
        if m and cur is not None:
            cur.append((int(m.group(1)), m.group(2)))
    return res


def dd(*args):
    subprocess.run(["dd", "status=none", *args], check=True, timeout=60)


def test_counts_follow_what_the_mount_did(c):
    m = c.mnt.path
    bricks = [f"{HOST}:{b}" for b in c.volumes[VOL]]
    top(c, "clear")
    with open(os.path.join(m, "hot"), "wb") as f:
        f.write(os.urandom(64 * 1024))
    with open(os.path.join(m, "cold"), "wb") as f:
        f.write(b"c" * 4096)
    os.mkdir(os.path.join(m, "dir"))
    for i in range(3):
        open(os.path.join(m, "dir", f"e{i}"), "wb").close()
    for _ in range(7):
        dd(f"if={m}/hot", "of=/dev/null", "bs=4096", "count=4", "iflag=direct")
    dd(f"if={m}/cold", "of=/dev/null", "bs=4096", "count=1", "iflag=direct")
    dd("if=/dev/zero", f"of={m}/written", "bs=4096", "count=6", "oflag=direct")
    # the mount that made dir lists it from what it knows: list it from
    # another mount
    other = c.mount(VOL, os.path.join(c.root, "m2"))
    assert sorted(os.listdir(os.path.join(other.path, "dir"))) == ["e0", "e1", "e2"]

    opens = blocks(top(c, "open").stdout)
    assert sorted(opens) == sorted(bricks)
    # reads go to one copy, opens to both
    for b in bricks:
        assert opens[b][0][1] == "/hot" and opens[b][0][0] >= 7, opens
    assert "Current open fds: " in top(c, "open").stdout
    reads = blocks(top(c, "read").stdout)
    served = [r for b in bricks for r in reads[b] if r[1] == "/hot"]
    assert sum(n for n, _ in served) >= 7 * 4, reads  # every O_DIRECT block reached a brick
    writes = blocks(top(c, "write").stdout)
    for b in bricks:  # both copies took every write
        assert ("/written" in [p for _, p in writes[b]]), writes
        assert dict((p, n) for n, p in writes[b])["/written"] >= 6, writes
    dirs = blocks(top(c, "opendir").stdout)
    assert any(p == "/dir" for b in bricks for _, p in dirs[b]), dirs
    listed = blocks(top(c, "readdir").stdout)
    assert any(p == "/dir" for b in bricks for _, p in listed[b]), listed

    # list-cnt and brick narrow the answer
    one = blocks(top(c, "open", "brick", bricks[1], "list-cnt", "1").stdout)
    assert list(one) == [bricks[1]] and len(one[bricks[1]]) == 1
    # clear zeroes them
    assert top(c, "clear").stdout.strip() == "volume top: success"
    assert all(not v for v in blocks(top(c, "open").stdout).values())


def test_perf_times_a_write_and_a_read_on_each_brick(c):
    for what in ("write-perf", "read-perf"):
        out = top(c, what, "bs", "1MB", "count", "4").stdout
        got = re.findall(r"^Throughput ([\d.]+) MBps time ([\d.]+) secs$", out, re.M)
        assert len(got) == 2 and all(float(x) > 0 and float(t) > 0 for x, t in got), out
        assert "MBps       Filename" in out
    for b in c.volumes[VOL]:  # the test files are gone
        assert not [n for n in os.listdir(os.path.join(b, ".cairn", "tmp")) if "top-perf" in n]


def test_errors(c):
    def fails(*args):
        r = top(c, *args, check=False)
        assert r.returncode != 0, r.stdout
        return r.stdout + r.stderr

    assert "Usage" in fails("bogus")
    assert "Usage" in fails("open", "brick")
    assert "list-cnt must be 1-100" in fails("open", "list-cnt", "0")
    assert "list-cnt must be 1-100" in fails("read", "list-cnt", "101")
    assert "bs and count go together" in fails("read-perf", "bs", "4096")
    assert "bs must be" in fails("write-perf", "bs", "1GB", "count", "1")
    assert "Usage" in fails("open", "bs", "4096", "count", "1")
    assert f"{HOST}:/nowhere is not a brick of volume {VOL}" in fails("open", "brick",
                                                                    f"{HOST}:/nowhere")
    r = c.cli("volume", "top", "nosuch", "open", check=False)
    assert r.returncode != 0 and "volume top: failed" in r.stdout + r.stderr


def test_status_clients(c):
    """`volume status VOL clients`: every brick lists the mounts' connections
    (and the self-heal daemon's), with the bytes it read from each: a 1 MiB
    write through a mount shows on every copy."""
    before = clients(c)
    with open(os.path.join(c.mnt.path, "big"), "wb") as f:
        f.write(os.urandom(1 << 20))
        f.flush()
        os.fsync(f.fileno())
    after = clients(c)
    assert sorted(after) == sorted(f"{HOST}:{b}" for b in c.volumes[VOL])
    for brick, rows in after.items():
        assert len(rows) >= 2, after  # this module's mounts at least
        grew = [h for h, (rd, _) in rows.items() if rd - before[brick].get(h, (0, 0))[0] >= 1 << 20]
        assert grew, (before, after)
        assert all(wr > 0 for _, wr in rows.values())
    r = c.cli("volume", "status", "nosuch", "clients", check=False)
    assert r.returncode != 0 and "volume status: failed" in r.stdout + r.stderr


def clients(c):
    """{brick: {host: (bytes read, bytes written)}} from status clients."""
    out = c.cli("volume", "status", VOL, "clients").stdout
    assert out.startswith(f"Client connections for volume {VOL}\n"), out
    res, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"^Brick : (\S+)$", line)
        if m:
            cur = res.setdefault(m.group(1), {})
            continue
        m = re.match(r"^Clients connected : (\d+)$", line)
        if m:
            n = int(m.group(1))
            continue
        m = re.match(r"^(\d+\.\d+\.\d+\.\d+:\d+)\s+(\d+)\s+(\d+)\s+-$", line)
        if m:
            cur[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    for rows in res.values():
        assert rows
    assert n == len(cur)
    return res
