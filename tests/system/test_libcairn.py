"""libcairn (docs/libcairn.md) against real bricks, beside FUSE mounts of the
same volumes: the example program; a tree copied in through the library
(cairn-copy, asynchronous calls) and checked through a mount, and one
written through a mount and read back through the library; coherence with a
mount that holds leases; and errors as a local file system gives them.

The library's calls run in tests/libcairn tools built against the public
header and libcairn.so: cairn-copy, and cairn-shell (one call per line on
stdin, one answer per line)."""

import errno
import hashlib
import os
import random
import stat
import subprocess
import time

import pytest

from cairn_cluster import exe


def spec(vol):
    return f"{vol.cluster.remote}:/{vol.name}"


def example_bin():
    return os.path.join(os.path.dirname(exe("cairnd")), "..", "examples", "cairn-example")


class Shell:
    """A cairn-shell on a volume: call(line) returns its answer."""

    def __init__(self, volspec, options=None):
        args = [exe("cairn-shell"), volspec] + ([options] if options else [])
        self.p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, bufsize=1)
        first = self.p.stdout.readline()
        if not first.startswith("ready"):
            err = self.p.stderr.read()
            self.p.wait(timeout=10)
            raise AssertionError(f"cairn-shell did not start: {first!r} {err!r}")

    def call(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().rstrip("\n")

    def ok(self, line):
        out = self.call(line)
        assert out.startswith("ok"), f"{line}: {out}"
        return out[3:]

    def close(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.write("quit\n")
                self.p.stdin.close()
                self.p.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.p.kill()
                self.p.wait()
        assert self.p.returncode == 0, self.p.stderr.read()


@pytest.fixture
def shell(r3vol):
    s = Shell(spec(r3vol))
    yield s
    s.close()


def make_tree(root, n_files, seed):
    """A tree of n_files small files (a few larger than the library's 1 MiB
    request) in nested directories, with varied modes and some symlinks.
    Returns the list of relative paths made."""
    rnd = random.Random(seed)
    os.makedirs(root)
    dirs = [""]
    made = []
    for i in range(max(1, n_files // 50)):
        parent = rnd.choice(dirs)
        d = os.path.join(parent, f"d{i:03d}")
        os.mkdir(os.path.join(root, d))
        dirs.append(d)
        made.append(d)
    modes = [0o644, 0o600, 0o755, 0o640, 0o444, 0o700]
    for i in range(n_files):
        d = rnd.choice(dirs)
        rel = os.path.join(d, f"f{i:05d}.dat")
        size = rnd.choice([0, 1, 100, 4096, 5000, 20000, 65536, 130000])
        if i % 997 == 5:
            size = 2 * 1024 * 1024 + 12345  # split into several requests
        with open(os.path.join(root, rel), "wb") as f:
            f.write(rnd.randbytes(size))
        os.chmod(os.path.join(root, rel), rnd.choice(modes))
        made.append(rel)
        if i % 100 == 7:
            link = os.path.join(d, f"l{i:05d}")
            os.symlink(f"f{i:05d}.dat", os.path.join(root, link))
            made.append(link)
    for d in dirs[1:]:
        os.chmod(os.path.join(root, d), rnd.choice([0o755, 0o750, 0o711]))
    return made


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def compare_trees(src, dst, made):
    """Every entry of made exists under dst as under src: type, permission
    bits, bytes, link target, and the modification time of files."""
    bad = []
    for rel in made:
        a, b = os.path.join(src, rel), os.path.join(dst, rel)
        try:
            sa, sb = os.lstat(a), os.lstat(b)
        except OSError as e:
            bad.append(f"{rel}: {e}")
            continue
        if stat.S_IFMT(sa.st_mode) != stat.S_IFMT(sb.st_mode):
            bad.append(f"{rel}: type {sa.st_mode:o} vs {sb.st_mode:o}")
        elif stat.S_ISLNK(sa.st_mode):
            if os.readlink(a) != os.readlink(b):
                bad.append(f"{rel}: link target")
        elif stat.S_IMODE(sa.st_mode) != stat.S_IMODE(sb.st_mode):
            bad.append(f"{rel}: mode {sa.st_mode:o} vs {sb.st_mode:o}")
        elif stat.S_ISREG(sa.st_mode):
            if sa.st_size != sb.st_size or digest(a) != digest(b):
                bad.append(f"{rel}: contents differ")
            elif int(sa.st_mtime) != int(sb.st_mtime):
                bad.append(f"{rel}: mtime {sa.st_mtime} vs {sb.st_mtime}")
    assert not bad, f"{len(bad)} differences, first: {bad[:10]}"


def test_example_program(r3vol):
    """The example of docs/libcairn.md, built by make, runs and its file is
    visible through a mount."""
    r = subprocess.run([example_bin(), spec(r3vol), "/example"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert "read back: hello from libcairn" in r.stdout
    assert "entry hello.txt 20 bytes" in r.stdout
    with open(os.path.join(r3vol.m1, "example", "hello.txt")) as f:
        assert f.read() == "hello from libcairn\n"


@pytest.mark.slow
@pytest.mark.parametrize("volname,n_files", [("r3vol", 3000), ("dr3vol", 600)])
def test_copy_tree_in_through_library(request, tmp_path, volname, n_files):
    """A generated tree copied into the volume through libcairn's
    asynchronous calls is what a mount shows: every file with its bytes,
    mode and mtime, every directory's mode, every symlink."""
    vol = request.getfixturevalue(volname)
    src = str(tmp_path / "src")
    made = make_tree(src, n_files, seed=n_files)
    name = f"libcopy-{volname}"
    t0 = time.monotonic()
    r = subprocess.run([exe("cairn-copy"), src, spec(vol), f"/{name}"], capture_output=True,
                       text=True, timeout=300)
    lib_s = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    compare_trees(src, os.path.join(vol.m2, name), made)
    for d in [m for m in made if os.path.isdir(os.path.join(src, m))]:
        assert (stat.S_IMODE(os.stat(os.path.join(src, d)).st_mode)
                == stat.S_IMODE(os.stat(os.path.join(vol.m2, name, d)).st_mode)), d
    # the same copy through the mount, for the timing beside it
    t0 = time.monotonic()
    subprocess.run(["cp", "-a", src, os.path.join(vol.m1, f"fusecopy-{volname}")], check=True,
                   timeout=300)
    fuse_s = time.monotonic() - t0
    print(f"\n{volname}: {len(made)} entries: libcairn {lib_s:.2f} s, FUSE cp -a {fuse_s:.2f} s")


@pytest.mark.slow
def test_copy_tree_out_through_library(r3vol, tmp_path):
    """A tree written through a mount reads back through libcairn (readdir
    with attributes, pread, readlink) byte for byte."""
    src = str(tmp_path / "src")
    made = make_tree(src, 800, seed=7)
    on_vol = os.path.join(r3vol.m1, "fuse-written")
    subprocess.run(["cp", "-a", src, on_vol], check=True, timeout=300)
    out = str(tmp_path / "out")
    r = subprocess.run([exe("cairn-copy"), "-r", spec(r3vol), "/fuse-written", out],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    compare_trees(src, out, made)


# After another client's change the bricks grant no lease on a directory
# for a second (brick/lease.c, LEASE_COOLDOWN_MS): wait that out, so that the
# mount's next listing takes the lease.
COOLDOWN_S = 1.2


def leased_listing(d):
    """Lists d under its lease; the kernel keeps the listing from the
    second open on (src/fuse/ops_dir.c)."""
    time.sleep(COOLDOWN_S)
    os.listdir(d)
    os.listdir(d)
    return sorted(os.listdir(d))


def test_mount_sees_library_changes_at_once(r3vol, shell):
    """A mount that listed a directory under its lease (and so caches its
    entries, and the absence of names) sees each change the library makes
    in it at once: the bricks recall the lease before they answer."""
    d = os.path.join(r3vol.m1, "coherent")
    os.mkdir(d)
    shell.ok("write /coherent/old before")
    assert leased_listing(d) == ["old"]
    assert not os.path.exists(os.path.join(d, "new"))  # a cached negative entry
    os.stat(os.path.join(d, "old"))
    # The mount does cache the listing: a file put on the bricks behind
    # every client's back (no recall) does not show. What the library
    # changes below shows at once only because the bricks recall the lease.
    sneaky = [os.path.join(b, "coherent", "sneaky") for b in r3vol.bricks]
    for p in sneaky:
        open(p, "w").close()
    assert os.listdir(d) == ["old"]
    for p in sneaky:
        os.unlink(p)

    shell.ok("write /coherent/new hello")
    assert sorted(os.listdir(d)) == ["new", "old"]
    with open(os.path.join(d, "new")) as f:
        assert f.read() == "hello"

    assert leased_listing(d) == ["new", "old"]
    shell.ok("rename /coherent/new /coherent/renamed")
    assert sorted(os.listdir(d)) == ["old", "renamed"]
    assert not os.path.exists(os.path.join(d, "new"))
    with open(os.path.join(d, "renamed")) as f:
        assert f.read() == "hello"

    assert leased_listing(d) == ["old", "renamed"]
    shell.ok("unlink /coherent/old")
    assert os.listdir(d) == ["renamed"]
    assert not os.path.exists(os.path.join(d, "old"))

    assert leased_listing(d) == ["renamed"]
    shell.ok("mkdir /coherent/sub 0750")
    assert stat.S_IMODE(os.stat(os.path.join(d, "sub")).st_mode) == 0o750

    # a write and a chmod through a handle reach the mount's cached
    # attributes of the file
    time.sleep(COOLDOWN_S)
    assert os.stat(os.path.join(d, "renamed")).st_size == 5
    fd = shell.ok("open /coherent/renamed w")
    shell.ok(f"pwrite {fd} 5 , world")
    assert os.stat(os.path.join(d, "renamed")).st_size == 12
    with open(os.path.join(d, "renamed")) as f:
        assert f.read() == "hello, world"
    shell.ok(f"close {fd}")
    shell.ok("chmod /coherent/renamed 0600")
    assert stat.S_IMODE(os.stat(os.path.join(d, "renamed")).st_mode) == 0o600


def test_library_sees_mount_changes(r3vol, shell):
    d = os.path.join(r3vol.m1, "seen")
    os.mkdir(d)
    assert shell.ok("ls /seen") == ""
    with open(os.path.join(d, "a"), "w") as f:
        f.write("from fuse")
    assert shell.ok("ls /seen").split() == ["a"]
    assert shell.ok("read /seen/a") == "9 from fuse"
    os.rename(os.path.join(d, "a"), os.path.join(d, "b"))
    assert shell.ok("ls /seen").split() == ["b"]
    assert shell.call("stat /seen/a") == "err ENOENT"


def test_calls(r3vol, shell):
    """The file calls beyond the copy: xattrs, symlinks, links, truncate,
    discard, statvfs, locks against a mount's."""
    shell.ok("mkdir /calls")
    shell.ok("write /calls/f 0123456789")
    shell.ok("setxattr /calls/f user.color blue")
    assert shell.ok("getxattr /calls/f user.color") == "blue"
    assert "user.color" in shell.ok("listxattr /calls/f").split()
    assert os.getxattr(os.path.join(r3vol.m1, "calls", "f"), "user.color") == b"blue"
    shell.ok("removexattr /calls/f user.color")
    assert shell.call("getxattr /calls/f user.color") == "err ENODATA"

    shell.ok("symlink f /calls/l")
    assert shell.ok("readlink /calls/l") == "f"
    assert "size=10" in shell.ok("stat /calls/l")  # follows the link
    assert shell.ok("lstat /calls/l").startswith("mode=120777")
    assert os.readlink(os.path.join(r3vol.m1, "calls", "l")) == "f"

    shell.ok("link /calls/f /calls/hard")
    assert "nlink=2" in shell.ok("stat /calls/f")
    shell.ok("truncate /calls/hard 4")
    assert shell.ok("read /calls/f") == "4 0123"

    fd = shell.ok("open /calls/big rwc")
    shell.ok(f"pwrite {fd} 0 " + "x" * 3000)
    shell.ok(f"ftruncate {fd} 8192")
    assert "size=8192" in shell.ok(f"fstat {fd}")
    shell.ok(f"discard {fd} 0 4096")
    assert shell.ok(f"pread {fd} 0 3") == "3 "  # three zero bytes, printed as a string
    shell.ok(f"fsync {fd}")
    shell.ok(f"close {fd}")
    with open(os.path.join(r3vol.m1, "calls", "big"), "rb") as f:
        data = f.read()
    assert len(data) == 8192 and data[:4096] == b"\0" * 4096 and data[4096:] == b"\0" * 4096

    assert "namemax=255" in shell.ok("statvfs /")

    # a POSIX lock the library holds is seen by a mount's fcntl
    import fcntl
    fd = shell.ok("open /calls/f rw")
    shell.ok(f"lock {fd} w")
    with open(os.path.join(r3vol.m1, "calls", "f"), "r+") as f:
        with pytest.raises(OSError) as e:
            fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert e.value.errno in (errno.EAGAIN, errno.EACCES)
        shell.ok(f"close {fd}")  # closing the handle releases its locks
        fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fd2 = shell.ok("open /calls/f rw")
        assert shell.ok(f"getlk {fd2} w") == "locked"
        assert shell.call(f"lock {fd2} w") == "err EAGAIN"
        fcntl.lockf(f, fcntl.LOCK_UN)
        shell.ok(f"lock {fd2} w")
        shell.ok(f"close {fd2}")


# Each operation, run on a local directory and through the library: the
# errno names must be the same.
ERROR_CASES = [
    ("stat /e/missing", lambda r: os.stat(f"{r}/missing")),
    ("open /e/missing r", lambda r: os.open(f"{r}/missing", os.O_RDONLY)),
    ("open /e/file rwcx", lambda r: os.open(f"{r}/file", os.O_RDWR | os.O_CREAT | os.O_EXCL)),
    ("mkdir /e/file", lambda r: os.mkdir(f"{r}/file")),
    ("mkdir /e/dir", lambda r: os.mkdir(f"{r}/dir")),
    ("mkdir /e/missing/x", lambda r: os.mkdir(f"{r}/missing/x")),
    ("mkdir /e/file/x", lambda r: os.mkdir(f"{r}/file/x")),
    ("stat /e/file/x", lambda r: os.stat(f"{r}/file/x")),
    ("open /e/file/x rwc", lambda r: os.open(f"{r}/file/x", os.O_RDWR | os.O_CREAT)),
    ("open /e/dir w", lambda r: os.open(f"{r}/dir", os.O_WRONLY)),
    ("open /e/dir rwc", lambda r: os.open(f"{r}/dir", os.O_RDWR | os.O_CREAT)),
    ("unlink /e/dir", lambda r: os.unlink(f"{r}/dir")),
    ("unlink /e/missing", lambda r: os.unlink(f"{r}/missing")),
    ("rmdir /e/file", lambda r: os.rmdir(f"{r}/file")),
    ("rmdir /e/full", lambda r: os.rmdir(f"{r}/full")),
    ("rmdir /e/missing", lambda r: os.rmdir(f"{r}/missing")),
    ("rename /e/missing /e/x", lambda r: os.rename(f"{r}/missing", f"{r}/x")),
    ("rename /e/file /e/dir", lambda r: os.rename(f"{r}/file", f"{r}/dir")),
    ("rename /e/dir /e/file", lambda r: os.rename(f"{r}/dir", f"{r}/file")),
    ("rename /e/dir /e/full", lambda r: os.rename(f"{r}/dir", f"{r}/full")),
    ("ls /e/file", lambda r: os.listdir(f"{r}/file")),
    ("ls /e/missing", lambda r: os.listdir(f"{r}/missing")),
    ("readlink /e/file", lambda r: os.readlink(f"{r}/file")),
    ("symlink x /e/file", lambda r: os.symlink("x", f"{r}/file")),
    ("link /e/file /e/dir", lambda r: os.link(f"{r}/file", f"{r}/dir")),
    ("link /e/dir /e/d2", lambda r: os.link(f"{r}/dir", f"{r}/d2")),
    ("getxattr /e/file user.none", lambda r: os.getxattr(f"{r}/file", "user.none")),
    ("mkdir /e/" + "n" * 256, lambda r: os.mkdir(f"{r}/" + "n" * 256)),
    ("truncate /e/dir 0", lambda r: os.truncate(f"{r}/dir", 0)),
]


def local_errno(root, fn):
    try:
        fn(root)
    except OSError as e:
        return "err " + errno.errorcode[e.errno]
    return "ok"


def test_errors_as_local_file_system(r3vol, shell, tmp_path):
    local = str(tmp_path / "e")

    def setup_local(r):
        os.makedirs(f"{r}/dir")
        os.makedirs(f"{r}/full/x")
        open(f"{r}/file", "w").close()

    setup_local(local)
    for c in ["mkdir /e", "mkdir /e/dir", "mkdir /e/full", "mkdir /e/full/x", "write /e/file "]:
        shell.ok(c)
    diffs = []
    for cmd, fn in ERROR_CASES:
        want = local_errno(local, fn)
        got = shell.call(cmd)
        if got.split(" ")[0] == "ok":
            got = "ok"
        if got != want:
            diffs.append(f"{cmd}: library {got}, local {want}")
    assert not diffs, "\n".join(diffs)


def test_open_missing_volume(cluster, r3vol):
    r = subprocess.run([exe("cairn-shell"), f"{cluster.remote}:/novol"], capture_output=True,
                       text=True, timeout=60, input="")
    assert r.returncode == 1
    assert "ENOENT" in r.stderr and "novol" in r.stderr, r.stderr


def test_open_unreachable_server():
    t0 = time.monotonic()
    r = subprocess.run([exe("cairn-shell"), "127.0.0.99:24810:/v", "timeout=2"],
                       capture_output=True, text=True, timeout=60, input="")
    assert r.returncode == 1
    assert "cannot connect to cairnd at 127.0.0.99" in r.stderr, r.stderr
    assert time.monotonic() - t0 < 10


def test_open_bad_spec_and_options(r3vol):
    for args in (["nohost"], ["h:/a/b/../c"], [spec(r3vol), "bogus=1"], [spec(r3vol), "timeout=x"]):
        r = subprocess.run([exe("cairn-shell")] + args, capture_output=True, text=True,
                           timeout=60, input="")
        assert r.returncode == 1 and "EINVAL" in r.stderr, (args, r.stderr)


def test_open_through_backup_server(r3vol):
    """The spec's server does not answer: the volume comes from a backup."""
    s = Shell(f"127.0.0.99:24810:/{r3vol.name}",
              f"timeout=2,backup-servers={r3vol.cluster.remote}")
    try:
        s.ok("write /via-backup yes")
        with open(os.path.join(r3vol.m1, "via-backup")) as f:
            assert f.read() == "yes"
    finally:
        s.close()


def test_bad_paths(shell):
    assert shell.call("stat /..").startswith("ok mode=40")  # the root
    assert shell.call("unlink /") == "err EISDIR"
    assert shell.call("rmdir /") == "err EBUSY"
    assert shell.call("mkdir /") == "err EEXIST"
    assert shell.call("stat") == "err EINVAL"
    deep = "/" + "/".join(["d" * 200] * 21)  # more than 4,095 bytes
    assert shell.call(f"mkdir {deep}") == "err ENAMETOOLONG"
    shell.ok("mkdir /bp")
    shell.ok("write /bp/f x")
    assert shell.ok("ls /bp/./../bp//").split() == ["f"]
