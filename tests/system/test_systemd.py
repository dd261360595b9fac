"""cairnd under a service manager: the readiness report systemd's
Type=notify waits for (sd_notify's NOTIFY_SOCKET datagrams), and SIGHUP
(`systemctl reload cairnd`, logrotate) reaching the bricks' logs too.

No systemd needed: the test plays the service manager's part, binding the
datagram socket cairnd is told about in NOTIFY_SOCKET."""

import os
import shutil
import signal
import socket
import subprocess

import pytest

from cairn_cluster import REPO, Cluster, exe, kill_pid, port_open
from replica_pool import wait_until

HOST = "127.0.0.214"


@pytest.fixture
def pool():
    with Cluster(host=HOST, prefix="sysd-") as c:
        yield c


def notify_socket(root):
    path = os.path.join(root, "notify.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(30)
    return s, path


def start_notified(c, path):
    """Starts the cluster's cairnd with NOTIFY_SOCKET set to path."""
    os.environ["NOTIFY_SOCKET"] = path
    try:
        c.start()
    finally:
        del os.environ["NOTIFY_SOCKET"]


def test_ready_only_once_bricks_answer(pool):
    c = pool
    brick = c.create_volume("nv")[0]
    port = c.brick_status("nv")[0][2]
    assert port
    # cairnd stops its bricks when it stops: the next one starts them again
    kill_pid(c.proc.pid)
    c.proc.wait(timeout=10)
    wait_until(lambda: not port_open(HOST, port), 10, "the brick to stop with cairnd", step=0.1)

    s, path = notify_socket(c.root)
    with s:
        start_notified(c, path)
        msgs = []
        while not any(m.startswith("READY=1") for m in msgs):
            msgs += s.recv(4096).decode().split("\n")
        # at the moment READY=1 arrives both cairnd and the brick answer
        assert port_open(HOST, port, timeout=1), f"brick {brick} not up at READY=1: {msgs}"
        assert port_open(HOST, c.port, timeout=1)
        assert any(m.startswith("STATUS=listening on") for m in msgs), msgs

        c.proc.send_signal(signal.SIGTERM)
        c.proc.wait(timeout=15)
        assert c.proc.returncode == 0
        msgs = s.recv(4096).decode().split("\n")
        assert "STOPPING=1" in msgs, msgs
    assert not port_open(HOST, port), "cairnd left its brick running"


def test_sighup_to_cairnd_reopens_brick_logs(pool):
    c = pool
    brick = c.create_volume("hv")[0]
    pid = c.brick_status("hv")[0][3]
    args = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    log = args[args.index(b"--log-file") + 1].decode()
    assert os.path.getsize(log) > 0

    # logrotate: move the files away, then signal cairnd alone
    os.rename(log, log + ".1")
    os.rename(c.logfile, c.logfile + ".1")
    os.kill(c.proc.pid, signal.SIGHUP)
    wait_until(lambda: os.path.exists(log), 10, f"brick {brick} to open {log} again", step=0.1)
    wait_until(lambda: os.path.exists(c.logfile), 10, "cairnd to open its log again", step=0.1)
    assert c.brick_status("hv")[0][3] == pid, "the brick restarted instead of reopening"
    # its standard output and error (a crash message) follow the log too
    for fd in (1, 2):
        assert os.readlink(f"/proc/{pid}/fd/{fd}") == log, fd
    assert c.proc.poll() is None
    wait_until(lambda: "passed on to 1 brick process" in open(c.logfile).read(), 10,
             "cairnd to log the SIGHUP", step=0.1)


UNIT = os.path.join(REPO, "extras", "systemd", "cairnd.service")


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze is missing")
def test_unit_file_parses(tmp_path):
    """systemd reads every line of cairnd.service (a misspelt key or value
    is only a warning to it: any output fails this)."""
    text = open(UNIT).read()
    assert "Type=notify" in text and "ExecReload=/bin/kill -HUP $MAINPID" in text
    unit = tmp_path / "cairnd.service"
    unit.write_text(text.replace("/usr/sbin/cairnd", exe("cairnd")))
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout + r.stderr == "", r.stdout + r.stderr


def test_mount_helper_takes_what_systemd_and_mount_pass(tmp_path):
    """A mount unit from an fstab line runs `mount -t cairn -o OPTIONS`, and
    mount(8) runs mount.cairn with -n/-s/-v and the options: those for
    mount(8) and systemd alone are dropped, the rest reach cairn-fuse."""
    r = subprocess.run(
        [exe("mount.cairn"), "server1:/vol1", str(tmp_path), "-s", "-n", "-f", "-v", "-o",
         "rw,_netdev,nofail,x-systemd.automount,x-systemd.mount-timeout=30,noatime,"
         "backup-servers=s2:s3,comment=x,defaults", "-t", "cairn"],
        capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip().endswith(
        f"cairn-fuse server1:/vol1 {tmp_path} -o noatime,backup-servers=s2:s3"), r.stderr
    r = subprocess.run([exe("mount.cairn"), "server1:/vol1", str(tmp_path), "-Z"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode != 0 and "unknown flag -Z" in r.stderr
