"""The mount gives memory it freed back to the system: after a burst of
work (small files written and read), its resident memory falls back near
what it keeps in use, and its counters say so. Sanitizer builds use their
own allocator, which the mount does not trim; there the counters say "not
trimmed" and only that is checked."""

import os
import re
import time

import pytest

from cairn_cluster import Cluster

STATS = "trusted.cairn.io-stats"


@pytest.fixture
def mnt():
    with Cluster(host="127.0.0.46", prefix="memtrim-") as c:
        yield c.replica3("mt", mounts=1)[1][0]


def memory_line(path):
    text = os.getxattr(path, STATS).decode()
    m = re.search(r"^FUSE client memory: (\d+) KiB resident, (.*)$", text, re.M)
    assert m, text
    return int(m.group(1)), m.group(2)


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(field + r":\s+(\d+) kB", f.read()).group(1))


def test_freed_memory_goes_back(mnt):
    pid = mnt.proc.pid
    resident, rest = memory_line(mnt.path)
    # the line reports this process's own resident memory
    assert abs(resident - status_kib(pid, "VmRSS")) < 8 * 1024
    if rest == "not trimmed":
        pytest.skip("sanitizer build: its allocator is not trimmed")
    assert re.fullmatch(r"(\d+) trims returned (\d+) KiB freed", rest), rest
    d = os.path.join(mnt.path, "d")
    os.mkdir(d)
    blob = os.urandom(48 * 1024)
    for i in range(3000):  # 144 MB written back and read again
        with open(os.path.join(d, f"f{i}"), "wb") as f:
            f.write(blob)
    for i in range(3000):
        with open(os.path.join(d, f"f{i}"), "rb") as f:
            assert f.read() == blob
    peak = status_kib(pid, "VmHWM")
    assert peak > 48 * 1024, f"the work never needed much memory ({peak} KiB): nothing to show"
    end = time.time() + 20
    while True:
        rss = status_kib(pid, "VmRSS")
        resident, rest = memory_line(mnt.path)
        trims, returned = (int(x) for x in re.findall(r"\d+", rest))
        if trims >= 1 and rss < peak / 2:
            break
        assert time.time() < end, (f"resident {rss} KiB of a {peak} KiB peak; "
                                   f"counters: {resident} KiB resident, {rest}")
        time.sleep(0.5)
    assert returned > (peak - rss) / 2, rest
    # what was returned is faulted in again as needed: the data is intact
    for i in range(0, 3000, 7):
        with open(os.path.join(d, f"f{i}"), "rb") as f:
            assert f.read() == blob
