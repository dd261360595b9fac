"""Random operations on one file, checked against a model of its bytes.

Every operation done on the file (pwrite, truncate, fallocate with
PUNCH_HOLE or ZERO_RANGE, plain fallocate, fsync, reopen) is done on an
in-memory copy too; every read, stat and SEEK_DATA / SEEK_HOLE answer is
compared with the copy, and the whole file at the end. A mismatch raises
OpMismatch with the operations that led to it, so a failing run can be
replayed from its seed.

Used by the system tests (tests/system/test_posix_files.py and the layers
that split files: shard, disperse); also a command:

    python3 tests/system/opcheck.py FILE [--seed N] [--ops N] [--max-size B]
        [--ops-mix write,read,truncate,punch,zero,alloc,fsync,reopen,seek]
        [--also PATH]   (the same file through a second mount, read at checks)
"""

import argparse
import ctypes
import errno
import os
import random
import sys

FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_ZERO_RANGE = 0x10
SEEK_DATA = getattr(os, "SEEK_DATA", 3)
SEEK_HOLE = getattr(os, "SEEK_HOLE", 4)

ALL_OPS = ("write", "read", "truncate", "punch", "zero", "alloc", "fsync", "reopen", "seek")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]


class OpMismatch(AssertionError):
    pass


def fallocate(fd, mode, offset, length):
    if _libc.fallocate(fd, mode, offset, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


class OpCheck:
    """One file and its model. path: the file (created or truncated to 0);
    also: the same file seen through another mount, or None."""

    def __init__(self, path, seed=0, max_size=4 << 20, ops=ALL_OPS, also=None, max_io=256 << 10):
        unknown = set(ops) - set(ALL_OPS)
        if unknown:
            raise ValueError("unknown operations: %s" % ", ".join(sorted(unknown)))
        self.path = path
        self.also = also
        self.rng = random.Random(seed)
        self.seed = seed
        self.max_size = max_size
        self.max_io = max_io
        self.ops = list(ops)
        self.model = bytearray()
        self.log = []
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    # --- helpers -----------------------------------------------------

    def fail(self, what):
        tail = "\n".join("  %s" % line for line in self.log[-25:])
        raise OpMismatch("%s: %s (seed %d, after %d operations; last ones:\n%s)"
                         % (self.path, what, self.seed, len(self.log), tail))

    def _range(self, beyond=0):
        """A random (offset, length) within max_size, biased to small I/O
        and to offsets near the current end and near 4 KiB / 512 B edges."""
        rng = self.rng
        size = len(self.model)
        pick = rng.random()
        if pick < 0.3 and size:
            off = max(0, size - rng.randrange(0, min(size, 8192) + 1))
        elif pick < 0.5:
            unit = rng.choice((512, 4096, 65536, 1 << 20))
            off = rng.randrange(0, max(1, self.max_size // unit)) * unit
            off = max(0, off + rng.choice((-1, 0, 0, 1)))
        else:
            off = rng.randrange(0, self.max_size)
        length = rng.choice((1, 7, 511, 512, 513, 4096, rng.randrange(1, self.max_io + 1)))
        length = max(1, min(length, self.max_size + beyond - off))
        return off, length

    def _zero_model(self, off, length):
        end = min(off + length, len(self.model))
        if off < end:
            self.model[off:end] = bytes(end - off)

    def _setsize(self, size):
        if size < len(self.model):
            del self.model[size:]
        else:
            self.model.extend(bytes(size - len(self.model)))

    def _compare(self, fd, off, length, where):
        got = os.pread(fd, length, off)
        want = bytes(self.model[off:off + length])
        if got != want:
            if len(got) != len(want):
                self.fail("%s read %d bytes at %d: got %d, want %d"
                          % (where, length, off, len(got), len(want)))
            first = next(i for i in range(len(got)) if got[i] != want[i])
            self.fail("%s read at %d+%d differs first at byte %d (got %#x, want %#x)"
                      % (where, off, length, off + first, got[first], want[first]))

    # --- operations --------------------------------------------------

    def op_write(self):
        off, length = self._range()
        data = self.rng.randbytes(length)
        self.log.append("pwrite %d+%d" % (off, length))
        if os.pwrite(self.fd, data, off) != length:
            self.fail("short write at %d+%d" % (off, length))
        if off > len(self.model):
            self._setsize(off)
        self.model[off:off + length] = data

    def op_read(self):
        size = len(self.model)
        off, length = self._range(beyond=8192)
        if size and self.rng.random() < 0.5:
            off = self.rng.randrange(0, size)
        self.log.append("pread %d+%d" % (off, length))
        self._compare(self.fd, off, length, "")

    def op_truncate(self):
        size = self.rng.choice((0, self.rng.randrange(0, self.max_size + 1),
                                max(0, len(self.model) - self.rng.randrange(0, 4097)),
                                len(self.model) + self.rng.randrange(0, 1 << 20)))
        size = min(size, self.max_size)
        self.log.append("ftruncate %d" % size)
        os.ftruncate(self.fd, size)
        self._setsize(size)

    def _fallocate(self, name, mode, off, length):
        self.log.append("fallocate %s %d+%d" % (name, off, length))
        try:
            fallocate(self.fd, mode, off, length)
        except OSError as e:
            if e.errno == errno.EOPNOTSUPP:
                self.fail("fallocate %s is not supported (EOPNOTSUPP)" % name)
            raise

    def op_punch(self):
        off, length = self._range()
        self._fallocate("PUNCH_HOLE", FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, length)
        self._zero_model(off, length)

    def op_zero(self):
        off, length = self._range()
        keep = self.rng.random() < 0.5
        mode = FALLOC_FL_ZERO_RANGE | (FALLOC_FL_KEEP_SIZE if keep else 0)
        self._fallocate("ZERO_RANGE%s" % ("|KEEP_SIZE" if keep else ""), mode, off, length)
        self._zero_model(off, length)
        if not keep and off + length > len(self.model):
            self._setsize(off + length)

    def op_alloc(self):
        off, length = self._range()
        self._fallocate("0", 0, off, length)
        if off + length > len(self.model):
            self._setsize(off + length)

    def op_fsync(self):
        self.log.append("fsync")
        os.fsync(self.fd)

    def op_reopen(self):
        self.log.append("reopen")
        os.close(self.fd)
        self.fd = os.open(self.path, os.O_RDWR)

    def op_seek(self):
        """SEEK_DATA / SEEK_HOLE may report data where the model has zeros
        (a file system need not find every hole), never a hole where the
        model has data, and never past the end."""
        size = len(self.model)
        off = self.rng.randrange(0, size + 2)
        whence = self.rng.choice((SEEK_DATA, SEEK_HOLE))
        name = "SEEK_DATA" if whence == SEEK_DATA else "SEEK_HOLE"
        self.log.append("lseek %s %d" % (name, off))
        try:
            got = os.lseek(self.fd, off, whence)
        except OSError as e:
            if e.errno != errno.ENXIO:
                raise
            if off < size and (whence == SEEK_HOLE or any(self.model[off:])):
                self.fail("lseek %s %d: ENXIO inside a file of %d bytes with data after it"
                          % (name, off, size))
            return
        if off >= size:
            self.fail("lseek %s %d in a file of %d bytes returned %d, not ENXIO"
                      % (name, off, size, got))
        if got < off or got > size:
            self.fail("lseek %s %d returned %d (file size %d)" % (name, off, got, size))
        if whence == SEEK_DATA and any(self.model[off:got]):
            self.fail("lseek SEEK_DATA %d returned %d, skipping data" % (off, got))
        if whence == SEEK_HOLE and got < size and any(self.model[got:got + 1]):
            self.fail("lseek SEEK_HOLE %d returned %d, where there is data" % (off, got))

    # --- checks ------------------------------------------------------

    def check_all(self):
        st = os.fstat(self.fd)
        if st.st_size != len(self.model):
            self.fail("size %d, model %d" % (st.st_size, len(self.model)))
        self._compare(self.fd, 0, len(self.model) + 1, "whole file:")
        if self.also:
            with open(self.also, "rb") as f:
                got = f.read()
            if got != bytes(self.model):
                self.fail("the file through %s differs (%d bytes, model %d)"
                          % (self.also, len(got), len(self.model)))

    def run(self, n_ops, check_every=100):
        weights = {"write": 30, "read": 25, "truncate": 6, "punch": 8, "zero": 8,
                   "alloc": 4, "fsync": 3, "reopen": 3, "seek": 8}
        names = self.ops
        w = [weights[n] for n in names]
        for i in range(n_ops):
            getattr(self, "op_" + self.rng.choices(names, w)[0])()
            if check_every and (i + 1) % check_every == 0:
                if self.also:
                    os.fsync(self.fd)
                self.check_all()
        os.fsync(self.fd)
        self.check_all()
        return len(self.model)


def check_file(path, seed=0, n_ops=1000, **kw):
    """Runs n_ops random operations on path; returns the final size."""
    oc = OpCheck(path, seed=seed, **kw)
    try:
        return oc.run(n_ops)
    finally:
        oc.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ops", type=int, default=1000)
    ap.add_argument("--max-size", type=int, default=4 << 20)
    ap.add_argument("--ops-mix", default=",".join(ALL_OPS))
    ap.add_argument("--also", default=None)
    a = ap.parse_args()
    try:
        size = check_file(a.file, seed=a.seed, n_ops=a.ops, max_size=a.max_size,
                          ops=a.ops_mix.split(","), also=a.also)
    except OpMismatch as e:
        print(e, file=sys.stderr)
        return 1
    print("%s: %d operations, seed %d, final size %d: every read matched"
          % (a.file, a.ops, a.seed, size))
    return 0


if __name__ == "__main__":
    sys.exit(main())
