"""FUSE requests over io_uring: where the kernel has it, a mount serves its
requests from per-CPU ring queues (and says how many in its io-stats);
with -o io-uring=off, or without kernel support, they come over /dev/fuse.
Both paths must give the same file system."""

import hashlib
import os
import re

import pytest

STATS = "trusted.cairn.io-stats"
PARAM = "/sys/module/fuse/parameters/enable_uring"


def ring_line(mount_path):
    text = os.getxattr(mount_path, STATS).decode()
    m = re.search(r"^FUSE requests over io_uring: (.*)$", text, re.M)
    assert m, text
    return m.group(1)


def workload(root):
    """Creates, writes, renames, lists and removes; returns what it read."""
    d = os.path.join(root, "w")
    os.mkdir(d)
    sums = {}
    for i in range(200):
        data = os.urandom(100 + i * 37)
        p = os.path.join(d, f"f{i}")
        with open(p, "wb") as f:
            f.write(data)
        os.chmod(p, 0o640)
        os.setxattr(p, "user.i", str(i).encode())
        sums[f"f{i}"] = hashlib.sha256(data).hexdigest()
    os.rename(os.path.join(d, "f0"), os.path.join(d, "g0"))
    sums["g0"] = sums.pop("f0")
    big = os.urandom(3 << 20)  # writes and reads beyond one ring payload
    with open(os.path.join(d, "big"), "wb") as f:
        f.write(big)
    sums["big"] = hashlib.sha256(big).hexdigest()
    seen = {}
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), "rb") as f:
            seen[name] = hashlib.sha256(f.read()).hexdigest()
        if name.startswith("f"):
            assert os.getxattr(os.path.join(d, name), "user.i") == name[1:].encode()
            assert os.stat(os.path.join(d, name)).st_mode & 0o777 == 0o640
    assert seen == sums
    for name in list(seen):
        os.unlink(os.path.join(d, name))
    os.rmdir(d)
    return seen


@pytest.mark.skipif(not os.path.exists(PARAM), reason="kernel without FUSE over io_uring")
def test_requests_come_over_the_ring(vol, tdir):
    before = ring_line(vol.m1)
    m = re.match(r"(\d+) \((\d+) of (\d+) CPU queues\)", before)
    assert m, before
    assert m.group(2) == m.group(3), before  # every CPU's queue is up
    workload(tdir.a)
    after = int(re.match(r"(\d+)", ring_line(vol.m1)).group(1))
    # each file: lookup, create, write, setattr, setxattr, flush, release...
    assert after - int(m.group(1)) > 1000
    # the other mount sees what the first wrote over the ring
    with open(os.path.join(tdir.a, "x"), "wb") as f:
        f.write(b"ring")
    with open(os.path.join(tdir.b, "x"), "rb") as f:
        assert f.read() == b"ring"


def test_off_uses_dev_fuse(vol, tdir):
    m = vol.cluster.mount(vol.name, os.path.join(vol.cluster.root, "m-noring"),
                          opts=["io-uring=off"])
    try:
        assert ring_line(m.path) == "off"
        workload(os.path.join(m.path, tdir.name))
        assert ring_line(m.path) == "off"
        # what it wrote is seen over the ring mount, and the other way round
        with open(os.path.join(m.path, tdir.name, "y"), "wb") as f:
            f.write(b"dev")
        with open(os.path.join(tdir.a, "y"), "rb") as f:
            assert f.read() == b"dev"
    finally:
        m.stop()


def test_bad_option_value_is_refused(cluster, tmp_path):
    import subprocess
    from cairn_cluster import exe
    r = subprocess.run([exe("cairn-fuse"), f"{cluster.remote}:/whatever", str(tmp_path),
                        "-o", "io-uring=maybe"], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert "io-uring=maybe" in r.stderr
