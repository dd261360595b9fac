"""The nbdkit plugin (src/nbd/, docs/nbd.md): a real nbdkit serving a file of
a replica 3 volume over a unix socket, driven by qemu-img, qemu-io and
nbdinfo. The same writes go to a local raw file; the image is compared with
it through NBD (qemu-img compare), through a fresh FUSE mount and on every
brick. Also two connections writing at once (multi-conn), zeroing where the
bricks' file system cannot fallocate ZERO_RANGE (tmpfs), and the messages of
a start with bad parameters."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import time

import pytest

from cairn_cluster import alive, exe, kill_pid

MiB = 1 << 20
SIZE = 32 * MiB

# Applied to the NBD image and to the local copy alike: unaligned offsets
# and lengths, writes across 1 MiB boundaries and larger than libcairn's
# 1 MiB request, a discard (NBD trim), a zero that must keep the blocks
# (NO_HOLE: ZERO_RANGE) and one that may punch a hole (-u), a flush. qemu-io
# opens the image writethrough: every write comes with FUA (as -f asks).
WRITES = [
    "write -P 0xab 0 1M",
    "write -P 0xcd 1048000 100000",
    "write -P 0x5a 3145721 7",
    "write -P 0x11 5M 3M",
    "write -P 0x77 16777215 2",
    "write -P 0x33 10M 2M",
    "write -P 0x44 31M 1M",
    "write -f -P 0x99 20M 65537",
    "discard 6M 1M",
    "write -z 10489856 300000",
    "write -z -u 11M 512k",
    "write -P 0x66 11534336 1",
    "flush",
]
# What the writes leave, read back through NBD.
READS = [
    "read -P 0xab 0 1048000",
    "read -P 0xcd 1048000 100000",
    "read -P 0 1148000 1997721",
    "read -P 0x5a 3145721 7",
    "read -P 0x11 5M 1M",
    "read -P 0 6M 1M",
    "read -P 0x11 7M 1M",
    "read -P 0x77 16777215 2",
    "read -P 0x33 10M 4096",
    "read -P 0 10489856 300000",
    "read -P 0x33 10789856 259616",
    "read -P 0x66 11534336 1",
    "read -P 0 11534337 524287",
    "read -P 0x33 12058624 524288",
    "read -P 0x44 31M 1M",
    "read -P 0x99 20M 65537",
]


def plugin_path():
    p = os.path.join(os.path.dirname(exe("cairnd")), "..", "lib", "nbdkit-cairn-plugin.so")
    if not os.path.exists(p) or not shutil.which("nbdkit"):
        pytest.fail(f"{p} or nbdkit missing: install nbdkit-plugin-dev, nbdkit (scripts/deps.sh "
                    "--test) and run make")
    return os.path.realpath(p)


def nbdkit_env(plugin):
    """nbdkit's environment: a sanitizer build of the plugin needs the
    ASan runtime loaded first, as nbdkit itself is not built with it."""
    env = dict(os.environ)
    ldd = subprocess.run(["ldd", plugin], capture_output=True, text=True).stdout
    m = re.search(r"(\S*libasan\.so\S*) => (\S+)", ldd)
    if m:
        env["LD_PRELOAD"] = m.group(2)
        env["ASAN_OPTIONS"] = "abort_on_error=1:detect_leaks=0"
    return env


def spec(vol):
    return f"{vol.cluster.remote}:/{vol.name}"


class Server:
    """nbdkit with the plugin, forked into the background as it runs in
    production, on a unix socket in dirpath; uri() for qemu, stop() ends
    it (the plugin's cleanup closes the volume)."""

    def __init__(self, dirpath, params):
        self.plugin = plugin_path()
        self.sock = os.path.join(dirpath, "nbd.sock")
        self.pidfile = os.path.join(dirpath, "nbdkit.pid")
        self.log = os.path.join(dirpath, "nbdkit.log")
        for p in (self.sock, self.pidfile):
            if os.path.exists(p):
                os.unlink(p)
        with open(self.log, "ab") as logf:
            r = subprocess.run(["nbdkit", "--log=stderr", "--pidfile", self.pidfile, "-U",
                                self.sock, self.plugin] + params, stdout=logf, stderr=logf,
                               stdin=subprocess.DEVNULL, env=nbdkit_env(self.plugin),
                               timeout=60)
        assert r.returncode == 0, f"nbdkit did not start: {self.tail()}"
        end = time.time() + 20
        while not (os.path.exists(self.pidfile) and os.path.exists(self.sock)):
            assert time.time() < end, f"nbdkit did not listen: {self.tail()}"
            time.sleep(0.05)
        time.sleep(0.05)  # the pid is written once the file is complete
        with open(self.pidfile) as f:
            self.pid = int(f.read().strip())

    def uri(self):
        return f"nbd+unix:///?socket={self.sock}"

    def tail(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def stop(self):
        kill_pid(self.pid, wait=20)
        assert not alive(self.pid)
        log = self.tail()
        assert "Sanitizer" not in log and "runtime error" not in log, log


@pytest.fixture
def image(r3vol, request):
    """(tdir name, its path on m1): a directory on the replica 3 volume for
    this test's image."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)
    os.mkdir(os.path.join(r3vol.m1, name))
    work = os.path.join(r3vol.cluster.root, "nbd-" + name)
    os.makedirs(work, exist_ok=True)
    return name, work


def qemu_io(target, cmds, check=True):
    args = ["qemu-io", "-f", "raw"]
    for c in cmds:
        args += ["-c", c]
    r = subprocess.run(args + [target], capture_output=True, text=True, timeout=120)
    out = r.stdout + r.stderr
    if check:
        assert r.returncode == 0 and "failed" not in out, f"qemu-io {cmds}: {out}"
    return out


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(MiB), b""):
            h.update(block)
    return h.hexdigest()


def fresh_mount_read(vol, relpath):
    """The file's sha256 through a new FUSE mount of vol."""
    c = vol.cluster
    m = c.mount(vol.name, os.path.join(c.root, f"nbd-check-{time.monotonic_ns()}"))
    try:
        return digest(os.path.join(m.path, relpath))
    finally:
        m.stop()
        c.mounts.remove(m)


def test_image_through_nbd(r3vol, image):
    name, work = image
    rel = f"{name}/disk.img"
    srv = Server(work, [f"volume={spec(r3vol)}", f"file=/{rel}", f"size={SIZE}"])
    try:
        uri = srv.uri()
        r = subprocess.run(["qemu-img", "create", "-f", "raw", uri, str(SIZE)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        info = json.loads(subprocess.run(["qemu-img", "info", "--output=json", uri],
                                         capture_output=True, text=True, check=True,
                                         timeout=60).stdout)
        assert info["virtual-size"] == SIZE and info["format"] == "raw", info

        local = os.path.join(work, "local.img")
        with open(local, "wb") as f:
            f.truncate(SIZE)
        qemu_io(local, WRITES)
        qemu_io(uri, WRITES)
        qemu_io(uri, READS)
        r = subprocess.run(["qemu-img", "compare", "-f", "raw", "-F", "raw", local, uri],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        srv.stop()

    want = digest(local)
    assert os.path.getsize(os.path.join(r3vol.m2, rel)) == SIZE
    assert fresh_mount_read(r3vol, rel) == want
    for b in r3vol.bricks:
        assert digest(os.path.join(b, rel)) == want, f"brick {b}"


def test_two_connections_at_once(r3vol, image):
    """multi-conn is advertised, and two clients writing different regions
    at once (each write landing between the other's) both get theirs."""
    name, work = image
    rel = f"{name}/disk.img"
    srv = Server(work, [f"volume={spec(r3vol)}", f"file=/{rel}", "size=16M"])
    try:
        uri = srv.uri()
        info = json.loads(subprocess.run(["nbdinfo", "--json", uri], capture_output=True,
                                         text=True, check=True, timeout=60).stdout)
        export = info["exports"][0]
        assert export["can_multi_conn"] is True and export["can_flush"] is True, export
        assert export["can_zero"] is True and export["can_trim"] is True, export
        assert export["can_fua"] is True, export

        # 64 KiB pieces: A takes the even ones, B the odd ones.
        def cmds(first, pattern):
            return [f"write -P {pattern} {i * 65536} 65536" for i in range(first, 256, 2)] + [
                "flush"]

        # writeback: plain writes, then one flush each (no FUA per write)
        procs = []
        for first, pattern in ((0, "0x0a"), (1, "0x0b")):
            args = ["qemu-io", "-f", "raw", "-t", "writeback"]
            for c in cmds(first, pattern):
                args += ["-c", c]
            procs.append(subprocess.Popen(args + [uri], stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
        for p in procs:
            out = p.communicate(timeout=120)[0]
            assert p.returncode == 0 and "failed" not in out, out
        qemu_io(uri, [f"read -P {'0x0a' if i % 2 == 0 else '0x0b'} {i * 65536} 65536"
                      for i in range(256)])
    finally:
        srv.stop()

    want = b"".join((b"\x0a" if i % 2 == 0 else b"\x0b") * 65536 for i in range(256))
    want = hashlib.sha256(want).hexdigest()
    assert fresh_mount_read(r3vol, rel) == want
    for b in r3vol.bricks:
        assert digest(os.path.join(b, rel)) == want, f"brick {b}"


def test_zero_where_bricks_cannot_zero_range(r3vol, image):
    """tmpfs punches holes but refuses FALLOC_FL_ZERO_RANGE: a zero that must
    keep its blocks (NO_HOLE) falls back to writing zeros."""
    name, work = image
    c = r3vol.cluster
    vname = "nbdtmpfs"
    brick = os.path.join(c.root, "nbd-tmpfs-brick")
    if vname not in c.volumes:
        os.makedirs(brick, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", brick], check=True)
        c.extra_mounts.append(brick)
        c.create_volume(vname, [brick])
    srv = Server(work, [f"volume={c.remote}:/{vname}", f"file=/{name}.img", "size=4M"])
    try:
        uri = srv.uri()
        qemu_io(uri, ["write -P 0x5c 0 4M", "write -z 4097 1M", "write -z -u 2M 1M",
                      "write -z -u 3M 100"])
        qemu_io(uri, ["read -P 0x5c 0 4097", "read -P 0 4097 1M", "read -P 0x5c 1052673 1044479",
                      "read -P 0 2M 1M", "read -P 0 3M 100", "read -P 0x5c 3145828 1048476"])
    finally:
        srv.stop()
    with open(os.path.join(brick, f"{name}.img"), "rb") as f:
        data = f.read()
    want = bytearray(b"\x5c" * (4 * MiB))
    want[4097:4097 + MiB] = bytes(MiB)
    want[2 * MiB:3 * MiB + 100] = bytes(MiB + 100)
    assert data == bytes(want)


def start_fails(params):
    """nbdkit's exit code and output when it refuses to start."""
    plugin = plugin_path()
    r = subprocess.run(["nbdkit", "-U", "-", plugin] + params + ["--run", "true"],
                       capture_output=True, text=True, timeout=60, env=nbdkit_env(plugin))
    return r.returncode, r.stdout + r.stderr


def test_bad_parameters(r3vol, image):
    name, _ = image
    rc, out = start_fails([f"file=/{name}/x.img"])
    assert rc != 0 and "volume=HOST[:PORT]:/VOLUME is required" in out, out
    rc, out = start_fails([f"volume={spec(r3vol)}"])
    assert rc != 0 and "file=/PATH/IN/VOLUME is required" in out, out
    rc, out = start_fails([f"volume={r3vol.cluster.remote}:/nosuchvol", "file=/x.img"])
    assert rc != 0 and f"cannot open volume {r3vol.cluster.remote}:/nosuchvol" in out, out
    rc, out = start_fails([f"volume={spec(r3vol)}", f"file=/{name}/missing.img"])
    assert rc != 0 and f"/{name}/missing.img: no such file in volume" in out, out
    assert not os.path.exists(os.path.join(r3vol.m1, name, "missing.img"))
    rc, out = start_fails([f"volume={spec(r3vol)}", f"file=/{name}/no/x.img", "size=1M"])
    assert rc != 0 and f"/{name}/no/x.img: cannot create it in volume" in out, out
    rc, out = start_fails([f"volume={spec(r3vol)}", f"file=/{name}", "size=1M"])
    assert rc != 0 and "not a regular file" in out, out
    rc, out = start_fails([f"volume={spec(r3vol)}", f"file=/{name}/x.img", "colour=blue"])
    assert rc != 0 and "unknown parameter 'colour'" in out, out


def test_block_status_reports_holes(r3vol, image):
    """NBD block status from SEEK_DATA/SEEK_HOLE: `qemu-img map` of a sparse
    image shows data exactly where it was written and holes (reading as
    zeros) elsewhere, trims included, and `qemu-img convert` of it to a
    local file makes an equal, sparse copy."""
    name, work = image
    srv = Server(work, [f"volume={spec(r3vol)}", f"file=/{name}/sparse.img", f"size={SIZE}"])
    try:
        uri = srv.uri()
        qemu_io(uri, ["write -P 0x11 4M 1M", "write -P 0x22 20M 64k", "write -P 0x33 28M 2M",
                      "discard 29M 1M"])
        r = subprocess.run(["qemu-img", "map", "--output=json", "-f", "raw", uri],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        data = [(e["start"], e["length"]) for e in json.loads(r.stdout) if e["data"]]
        holes = [e for e in json.loads(r.stdout) if not e["data"]]
        assert data == [(4 * MiB, MiB), (20 * MiB, 64 * 1024), (28 * MiB, MiB)], r.stdout
        assert holes and all(e["zero"] for e in holes), r.stdout
        assert sum(e["length"] for e in json.loads(r.stdout)) == SIZE
        local = os.path.join(work, "copy.img")
        r = subprocess.run(["qemu-img", "convert", "-f", "raw", "-O", "raw", uri, local],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        r = subprocess.run(["qemu-img", "compare", "-f", "raw", "-F", "raw", local, uri],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert os.stat(local).st_blocks * 512 <= 4 * MiB  # the holes stayed holes
    finally:
        srv.stop()
