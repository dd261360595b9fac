"""Signals an administrator sends: SIGHUP, as logrotate does after moving a
log file away, reopens the log file in every daemon and in the mount; no
process ends, no mount goes away, and the new file gets the lines."""

import os
import signal
import time

import pytest

from cairn_cluster import Cluster, alive, pids_with_arg
from replica_pool import wait_until

HOST = "127.0.0.213"


@pytest.fixture
def pool():
    with Cluster(host=HOST, prefix="sig-") as c:
        yield c


def test_sighup_reopens_logs_of_every_process(pool):
    c = pool
    bricks = [os.path.join(c.root, f"b{i}") for i in range(3)]
    c.create_volume("sig", bricks, replica=3)
    mlog = os.path.join(c.root, "mount.log")
    m = c.mount("sig", os.path.join(c.root, "m"), opts=[f"log-file={mlog}"])
    wait_until(lambda: all(pids_with_arg("--brick-path", b) for b in bricks), 30, "the bricks")
    wait_until(lambda: len(pids_with_arg("--volume", "sig")) >= 4, 30, "the self-heal daemon")

    procs = {"cairnd": (c.proc.pid, c.logfile), "mount": (m.proc.pid, mlog)}
    logdir = os.path.join(c.workdir, "logs")
    for p in pids_with_arg("--volume", "sig"):
        args = open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")
        if b"--log-file" not in args:
            continue
        log = args[args.index(b"--log-file") + 1].decode()
        exe = os.path.basename(args[0].decode())
        procs[f"{exe} {p}"] = (p, log)
    names = sorted(procs)
    assert any(n.startswith("cairn-brickd") for n in names), names
    assert any(n.startswith("cairn-shd") for n in names), names
    for name, (pid, log) in procs.items():
        assert os.path.exists(log), f"{name}: no log file {log} (logs in {logdir})"

    # logrotate: move every log away, then SIGHUP every process
    for name, (pid, log) in procs.items():
        os.rename(log, log + ".1")
    for name, (pid, log) in procs.items():
        os.kill(pid, signal.SIGHUP)

    time.sleep(1)
    for name, (pid, log) in procs.items():
        assert alive(pid), f"{name} (pid {pid}) ended on SIGHUP"
        wait_until(lambda: os.path.exists(log), 10, f"{name} to open {log} again", step=0.1)

    # the mount still works, and the daemons write to the new files
    with open(os.path.join(m.path, "after-hup"), "wb") as f:
        f.write(b"x" * 4096)
    with open(os.path.join(m.path, "after-hup"), "rb") as f:
        assert f.read() == b"x" * 4096
    c.cli("volume", "set", "sig", "diagnostics.brick-log-level", "DEBUG")
    r = c.cli("volume", "status", "sig")
    assert r.stdout.count(" Y ") >= 3, r.stdout
    wait_until(lambda: os.path.getsize(c.logfile) > 0, 10, "cairnd to log to the new file", step=0.1)
    for name, (pid, log) in procs.items():
        # the first line logged after the reopen names the new file
        if os.path.getsize(log) > 0:
            assert "reopened (SIGHUP)" in open(log, errors="replace").read(), name
    # the moved-away files kept what was written before
    for name, (pid, log) in procs.items():
        assert os.path.getsize(log + ".1") > 0, name
