"""The workloads, taken from the user threads in the seeds.

A workload prepares its input (untimed), runs the timed part on every
target of the system (local x3 has three), ends the timed part with a sync
of the target and of the machine, then verifies the result (untimed). A
wrong result or a failing command raises BenchFailure: the run is reported
as a failure, never timed."""

import json
import os
import shlex
import time

from cairnbench import gen, util

q = shlex.quote

TIME, RATE, MEMORY = "time", "rate", "memory"


class Metric:
    def __init__(self, key, title, unit, kind):
        self.key, self.title, self.unit, self.kind = key, title, unit, kind

    def to_json(self):
        return {"key": self.key, "title": self.title, "unit": self.unit,
                "kind": self.kind}


def _tag(exc, metric):
    if getattr(exc, "metric", None) is None:
        exc.metric = metric
    return exc


class Workload:
    name = "?"
    description = ""
    full_only = False

    def metrics(self, ctx):
        raise NotImplementedError

    def run(self, system, ctx, record):
        """Do one run; call record(metric_key, value) for each verified
        measurement."""
        raise NotImplementedError

    # -- helpers ---------------------------------------------------------
    def timed(self, system, ctx, metric, body_for_target, fresh=False):
        """Run body_for_target(t) for every target in one timed shell,
        followed by an fsync of each target directory (a client that
        writes back waits there until its files are on the bricks), a
        sync of each target's file system and a global sync (the bricks
        live on the same local file system).

        fresh: the step makes many files. The kernel's clean page cache is
        dropped first and the inputs warm() read are read again, so every
        system starts it from the same state of the disk: ext4 without a
        journal (this machine's root) skips, for each new inode, every
        inode of its block group freed in the last minute whose block of
        the inode table is still cached, so the step would otherwise pay
        for whatever the steps before it removed, the previous system's
        included (docs/notes/performance-notes.md, round eighteen)."""
        ts = system.targets()
        # Flush what earlier steps left dirty, so the timed sync below only
        # pays for this step's work.
        util.run(["sync"], timeout=ctx.prepare_timeout, what="sync")
        if fresh:
            util.drop_caches(1)
            for path in getattr(self, "warmed", ()):
                self.warm(ctx, path)
        body = "\n".join(body_for_target(t) for t in ts)
        body += "\n" + "\n".join(f"sync {q(t)}; sync -f {q(t)}" for t in ts) + "\nsync"
        try:
            return util.run_timed(body, prefix=system.prefix(),
                                  timeout=ctx.timeout, what=metric)
        except (util.BenchTimeout, util.BenchFailure) as e:
            raise _tag(e, metric)

    def untimed(self, system, ctx, body_for_target, what):
        ts = system.targets()
        body = "set -euo pipefail\n" + "\n".join(body_for_target(t)
                                                 for t in ts)
        try:
            util.run(system.prefix() + ["/bin/bash", "-c", body],
                     timeout=ctx.prepare_timeout, what=what)
        except util.BenchTimeout as e:
            raise util.BenchTimeout(e.seconds, f"in preparation ({what})")

    def warm(self, ctx, path):
        """Read the input once (untimed) so every system starts with it in
        the page cache, whatever an earlier cold step dropped."""
        util.run(f"find {q(path)} -type f -print0 | xargs -0 cat > /dev/null",
                 timeout=ctx.prepare_timeout, what="warm input")
        if path not in getattr(self, "warmed", ()):
            self.warmed = getattr(self, "warmed", []) + [path]

    def verify_tree(self, system, rel, manifest, metric):
        for t in system.targets():
            try:
                got = util.tree_manifest(os.path.join(t, rel))
            except OSError as e:
                raise _tag(util.BenchFailure(f"{metric}: {e}"), metric)
            try:
                util.compare_manifests(manifest, got, metric)
            except util.BenchFailure as e:
                raise _tag(e, metric)

    def copy_tree_untimed(self, system, ctx):
        src, manifest = ctx.assets.tree()
        self.untimed(system, ctx,
                     lambda t: f"cp -a {q(src)} {q(t)}/tree",
                     "cp -a (preparation)")
        self.verify_tree(system, "tree", manifest, "preparation")


class CopyTree(Workload):
    name = "cp"
    description = "cp -a of the generated small-file tree (seed 000)"

    def metrics(self, ctx):
        return [Metric("cp_a", f"cp -a tree ({ctx.nfiles} files)", "s",
                       TIME)]

    def run(self, system, ctx, record):
        src, manifest = ctx.assets.tree()
        self.warm(ctx, src)
        t = self.timed(system, ctx, "cp_a",
                       lambda t: f"cp -a {q(src)} {q(t)}/tree", fresh=True)
        self.verify_tree(system, "tree", manifest, "cp_a")
        record("cp_a", t)


class CopyTreeLibcairn(Workload):
    """The cp tree copied into the volume by a program on libcairn
    (tests/libcairn/cairn_copy.c: asynchronous create, write, setattr and
    close, 32 files in flight), beside cp -a through the mount; verified
    through the mount. Only Cairn has it, so it runs when asked for
    (--only cp-libcairn)."""
    name = "cp-libcairn"
    description = "the cp tree copied in through libcairn (cairn-copy); --only"
    opt_in = True

    def metrics(self, ctx):
        return [Metric("cp_libcairn", f"copy tree via libcairn ({ctx.nfiles} files)",
                       "s", TIME)]

    def run(self, system, ctx, record):
        copy = getattr(system, "libcairn_copy", None)
        if copy is None:
            raise _tag(util.BenchFailure(f"{system.key} has no libcairn"),
                       "cp_libcairn")
        src, manifest = ctx.assets.tree()
        self.warm(ctx, src)
        t = self.timed(system, ctx, "cp_libcairn",
                       lambda t: copy(src, t, "tree"), fresh=True)
        self.verify_tree(system, "tree", manifest, "cp_libcairn")
        record("cp_libcairn", t)


class RemoveTree(Workload):
    name = "rm"
    description = "rm -rf of the tree (seed 000)"

    def metrics(self, ctx):
        return [Metric("rm_rf", f"rm -rf tree ({ctx.nfiles} files)", "s",
                       TIME)]

    def run(self, system, ctx, record):
        self.copy_tree_untimed(system, ctx)
        t = self.timed(system, ctx, "rm_rf", lambda t: f"rm -rf {q(t)}/tree")
        for tg in system.targets():
            left = os.listdir(tg)
            if left:
                raise _tag(util.BenchFailure(
                    f"rm_rf: {tg} still holds {left[:3]}"), "rm_rf")
        record("rm_rf", t)


class TarExtract(Workload):
    def __init__(self, which):
        self.which = which
        self.name = "tar-" + which
        self.key = "tar_" + which
        self.full_only = which == "kernel"
        self.description = (f"tar x of the Linux 6.1 {which} tree "
                            "(uncompressed tar, seed 003)")

    def metrics(self, ctx):
        what = "include/ (5,912 files)" if self.which == "include" else \
            "whole tree (~78,000 files)"
        return [Metric(self.key, f"tar x Linux 6.1 {what}", "s", TIME),
                Metric(self.key + "_client_mib",
                       f"peak client memory, tar x {what}", "MiB", MEMORY)]

    def run(self, system, ctx, record):
        tarp, top, manifest = ctx.assets.tar(self.which)
        self.warm(ctx, tarp)
        clients = system.client_pids()
        util.reset_peak_rss(clients)
        t = self.timed(system, ctx, self.key,
                       lambda t: f"tar -xf {q(tarp)} -C {q(t)}", fresh=True)
        peak = util.peak_rss_mib(clients) if clients else None
        self.verify_tree(system, top, manifest, self.key)
        record(self.key, t)
        if peak is not None:
            record(self.key + "_client_mib", peak)


class ListStat(Workload):
    name = "ls-stat"
    description = "ls -lR and find | xargs stat on the tree, cold and warm"

    def metrics(self, ctx):
        return [Metric("ls_cold", "ls -lR tree, cold", "s", TIME),
                Metric("ls_warm", "ls -lR tree, warm", "s", TIME),
                Metric("stat_cold", "find -type f | xargs stat, cold", "s",
                       TIME),
                Metric("stat_warm", "find -type f | xargs stat, warm", "s",
                       TIME)]

    def run(self, system, ctx, record):
        self.copy_tree_untimed(system, ctx)
        nfiles = ctx.nfiles
        ndirs = sum(1 for v in ctx.assets.tree()[1].values() if v[0] == "d")
        out = os.path.join(ctx.tmpdir, "ls.out")

        def ls(t):
            return f"ls -lR {q(t)}/tree >> {q(out)}"

        def st(t):
            return (f"cd {q(t)}/tree && find . -type f -print0 | "
                    f"xargs -0 stat >> {q(out)}")

        def check(metric, counter, expected):
            with open(out, errors="replace") as f:
                n = sum(1 for line in f if counter(line))
            os.unlink(out)
            if n != expected:
                raise _tag(util.BenchFailure(
                    f"{metric}: saw {n} entries, expected {expected}"),
                    metric)

        ntg = len(system.targets())
        for phase in ("cold", "warm"):
            if phase == "cold":
                system.make_cold()
            t = self.timed(system, ctx, "ls_" + phase, ls)
            # one line per file and per directory, plus per-directory header
            check("ls_" + phase, lambda l: l.startswith(("-", "d")),
                  ntg * (nfiles + ndirs))
            record("ls_" + phase, t)
        for phase in ("cold", "warm"):
            if phase == "cold":
                system.make_cold()
            t = self.timed(system, ctx, "stat_" + phase, st)
            check("stat_" + phase, lambda l: l.lstrip().startswith("File:"),
                  ntg * nfiles)
            record("stat_" + phase, t)


class DdLoop(Workload):
    name = "dd-loop"
    description = "seed 004: 1,000 x (dd 10 KiB file, rm it)"
    count = 1000

    def metrics(self, ctx):
        return [Metric("dd_loop", "1,000 x (dd 10 KiB; rm)", "s", TIME)]

    def run(self, system, ctx, record):
        def body(t):
            b = q(t + "/bench")
            return (f"mkdir {b}\n"
                    f"for id in $(seq 1 {self.count}); do\n"
                    f"  dd if=/dev/zero of={b}/$id bs=1024 count=10 "
                    "status=none\n"
                    f"  rm -f {b}/$id\n"
                    "done\n"
                    f"rmdir {b}")
        t = self.timed(system, ctx, "dd_loop", body, fresh=True)
        for tg in system.targets():
            if os.listdir(tg):
                raise _tag(util.BenchFailure(
                    f"dd_loop: {tg} not empty afterwards"), "dd_loop")
        record("dd_loop", t)


def _fio_json(path, metric):
    try:
        with open(path) as f:
            text = f.read()
        # fio may print notes before the JSON document
        data = json.loads(text[text.index("{"):])
    except (OSError, ValueError) as e:
        raise _tag(util.BenchFailure(f"{metric}: bad fio output: {e}"),
                   metric)
    job = data["jobs"][0]
    if job.get("error"):
        raise _tag(util.BenchFailure(f"{metric}: fio error {job['error']}"),
                   metric)
    return job


class FioBase(Workload):
    def fio(self, system, ctx, metric, args, direction, expect_bytes):
        """Run fio on every target in one timed shell; return the
        effective rate over all targets done one after another
        (1 / sum(1/rate_i)): IOPS or MB/s. expect_bytes: what each fio
        must have moved (None for a time-based job)."""
        outs = [os.path.join(ctx.tmpdir, f"{metric}.{i}.json")
                for i in range(len(system.targets()))]
        idx = {t: i for i, t in enumerate(system.targets())}

        def body(t):
            return (f"cd {q(t)} && fio {args} --output-format=json "
                    f"--output={q(outs[idx[t]])}")
        wall = self.timed(system, ctx, metric, body)
        inv = 0.0
        for o in outs:
            job = _fio_json(o, metric)[direction]
            if expect_bytes is not None and job["io_bytes"] != expect_bytes:
                raise _tag(util.BenchFailure(
                    f"{metric}: fio moved {job['io_bytes']} bytes, expected "
                    f"{expect_bytes}"), metric)
            rate = job["iops"] if metric.endswith("iops") else \
                job["bw_bytes"] / 1e6
            if rate <= 0:
                raise _tag(util.BenchFailure(f"{metric}: zero rate"), metric)
            inv += 1.0 / rate
            os.unlink(o)
        return 1.0 / inv, wall


class FioRandom(FioBase):
    name = "fio-rand"
    description = ("seed 001: fio 4k random write then random read, "
                   "iodepth 32, 256 MB file; then random writes again to "
                   "the file, now an existing one on a fresh mount (a "
                   "virtual machine's image)")
    SEED_CMD = ("--randrepeat=1 --ioengine=libaio --gtod_reduce=1 "
                "--name=test --filename=test --bs=4k --iodepth=32 "
                "--size=256MB")

    def metrics(self, ctx):
        return [Metric("randwrite_iops", "fio 4k randwrite QD32 (IOPS)",
                       "IOPS", RATE),
                Metric("randread_iops", "fio 4k randread QD32 (IOPS)",
                       "IOPS", RATE),
                Metric("randwrite_existing_iops",
                       "fio 4k randwrite QD32, existing file (IOPS)",
                       "IOPS", RATE)]

    def run(self, system, ctx, record):
        size = 256 << 20
        # end_fsync: the write-back cache must not flatter the result.
        v, wall = self.fio(system, ctx, "randwrite_iops",
                           self.SEED_CMD +
                           " --readwrite=randwrite --end_fsync=1",
                           "write", size)
        record("randwrite_iops", v, wall_s=wall)
        system.make_cold()
        v, wall = self.fio(system, ctx, "randread_iops",
                           self.SEED_CMD + " --readwrite=randread", "read",
                           size)
        record("randread_iops", v, wall_s=wall)
        # The file was made before this mount: for Cairn its directory is
        # not one this client made, so write-behind rests on the file's
        # own lease.
        system.make_cold()
        v, wall = self.fio(system, ctx, "randwrite_existing_iops",
                           self.SEED_CMD +
                           " --readwrite=randwrite --end_fsync=1",
                           "write", size)
        record("randwrite_existing_iops", v, wall_s=wall)


class FioSequential(FioBase):
    name = "fio-seq"
    description = "fio 1 MiB sequential write (end_fsync) then read"

    def metrics(self, ctx):
        s = f"{ctx.seq_mib // 1024} GiB" if ctx.seq_mib >= 1024 else \
            f"{ctx.seq_mib} MiB"
        return [Metric("seqwrite_mbs", f"fio 1M seq write {s} (MB/s)",
                       "MB/s", RATE),
                Metric("seqread_mbs", f"fio 1M seq read {s} (MB/s)",
                       "MB/s", RATE)]

    def run(self, system, ctx, record):
        args = (f"--name=seq --filename=seqfile --bs=1M "
                f"--size={ctx.seq_mib}M --ioengine=libaio --iodepth=16")
        size = ctx.seq_mib << 20
        v, wall = self.fio(system, ctx, "seqwrite_mbs",
                           args + " --rw=write --end_fsync=1", "write", size)
        record("seqwrite_mbs", v, wall_s=wall)
        system.make_cold()
        v, wall = self.fio(system, ctx, "seqread_mbs", args + " --rw=read",
                           "read", size)
        record("seqread_mbs", v, wall_s=wall)


class VmSeed003(FioBase):
    """Seed 003's three fio command lines, as its users ran them inside a
    virtual machine whose disk was a sharded file on a 2 x (2 + 1)
    dispersed GlusterFS volume: here run on the mount itself (the disk
    image's view), with --size scaled to this machine's disk (the seed
    used 10G; full runs use 2 GiB, quick 512 MiB). The random jobs run
    for 30 s each (quick: 10 s) on the file the sequential job wrote."""
    name = "vm"
    description = ("seed 003: fio 1M sequential write --direct=1 "
                   "--iodepth=200, then 4k randread and randwrite "
                   "--iodepth=128 --numjobs=4 --direct=1, 30 s each "
                   "(--size scaled: 2 GiB, quick 512 MiB); --only vm")
    opt_in = True

    def _size_mib(self, ctx):
        return 512 if ctx.quick else 2048

    ROUTES = (("vm", "through the mount"), ("vm_nbd", "through NBD"))

    def metrics(self, ctx):
        s = self._size_mib(ctx)
        out = []
        for key, how in self.ROUTES:
            out += [Metric(f"{key}_seqwrite_mbs",
                           f"seed 003 1M seq write {s} MiB, direct, QD200, {how} (MB/s)",
                           "MB/s", RATE),
                    Metric(f"{key}_randread_iops",
                           f"seed 003 4k randread 4 jobs x QD128, direct, {how} (IOPS)",
                           "IOPS", RATE),
                    Metric(f"{key}_randwrite_iops",
                           f"seed 003 4k randwrite 4 jobs x QD128, direct, {how} (IOPS)",
                           "IOPS", RATE)]
        return out

    def _jobs(self, ctx, where):
        """The three fio lines (metric suffix, arguments, direction,
        bytes expected); where: the arguments naming the file."""
        size = self._size_mib(ctx)
        secs = 10 if ctx.quick else 30
        yield ("seqwrite_mbs",
               f"--name=writefile --size={size}M {where} --bs=1M --nrfiles=1 "
               "--direct=1 --sync=0 --randrepeat=0 --rw=write --refill_buffers "
               "--end_fsync=1 --iodepth=200", "write", size << 20)
        for rw in ("randread", "randwrite"):
            yield (f"{rw}_iops",
                   f"--time_based --name=benchmark --size={size}M --runtime={secs} {where} "
                   "--randrepeat=0 --iodepth=128 --direct=1 --invalidate=1 --verify=0 "
                   f"--verify_fatal=0 --numjobs=4 --rw={rw} --blocksize=4k --group_reporting",
                   "read" if rw == "randread" else "write", None)

    def run(self, system, ctx, record):
        size = self._size_mib(ctx)
        where = f"--filesize={size}M --filename=fio_file --ioengine=libaio"
        for suffix, args, direction, expect in self._jobs(ctx, where):
            v, wall = self.fio(system, ctx, f"vm_{suffix}", args, direction, expect)
            record(f"vm_{suffix}", v, wall_s=wall)
        if not hasattr(system, "nbd_start"):
            return
        # The same lines through the system's NBD export of an image file
        # (fio's nbd engine, libnbd; one connection per job).
        # Systems with an NBD export have one target.
        uri, stop = system.nbd_start(system.targets()[0], "nbd_image", size)
        try:
            for suffix, args, direction, expect in self._jobs(
                    ctx, f"--ioengine=nbd --uri={q(uri)}"):
                args = args.replace(" --direct=1", "").replace(" --invalidate=1", "")
                v, wall = self.fio(system, ctx, f"vm_nbd_{suffix}", args, direction, expect)
                record(f"vm_nbd_{suffix}", v, wall_s=wall)
        finally:
            stop()


class Rsync(Workload):
    name = "rsync"
    description = "seed 002: rsync -a of the tree into the file system"

    def metrics(self, ctx):
        return [Metric("rsync", f"rsync -a tree ({ctx.nfiles} files)", "s",
                       TIME)]

    def run(self, system, ctx, record):
        src, manifest = ctx.assets.tree()
        self.warm(ctx, src)
        t = self.timed(system, ctx, "rsync",
                       lambda t: f"rsync -a {q(src)}/ {q(t)}/tree/",
                       fresh=True)
        self.verify_tree(system, "tree", manifest, "rsync")
        record("rsync", t)


class SharedDir(Workload):
    """Seed 002's lab writes into home directories that other clients list
    (a shell's `ls`, a file manager, a monitoring loop). dd with bs=512 of
    a file and rsync -a of a small tree, each into a directory that a
    second mount of the volume lists (`ls -lR`) every second, beside the
    same into a directory nobody lists. On Cairn each listing takes the
    writer's exclusive lease on the file away, and the writer must get it
    back for its writes to be written behind (docs/consistency.md,
    "Write-behind in a shared directory"). Verified through both mounts."""
    name = "shared-dir"
    description = ("seed 002: dd bs=512 and rsync -a into a directory a "
                   "second mount lists every second, and into one nobody "
                   "lists")
    opt_in = True
    dd_count = 20000   # 10 MB in 512-byte writes
    tree_files = 1000  # the small tree rsync copies (at most ctx.nfiles)
    interval = 1.0     # seconds between the lister's listings

    def metrics(self, ctx):
        mb = self.dd_count * 512 / 1e6
        n = self.files(ctx)
        return [Metric("shared_dd_alone", f"dd bs=512 {mb:g} MB, nobody lists", "s", TIME),
                Metric("shared_dd_listed", f"dd bs=512 {mb:g} MB, listed each second",
                       "s", TIME),
                Metric("shared_rsync_alone", f"rsync -a {n} files, nobody lists", "s", TIME),
                Metric("shared_rsync_listed", f"rsync -a {n} files, listed each second",
                       "s", TIME)]

    def files(self, ctx):
        return min(ctx.nfiles, self.tree_files)

    def lister(self, system, path):
        """A process of the system's prefix listing path every interval
        seconds, from now until stopped (util.kill_group)."""
        loop = f"while :; do ls -lR {q(path)} > /dev/null 2>&1 || true; sleep {self.interval}; done"
        return util.start_group(list(system.prefix()) + ["/bin/bash", "-c", loop])

    def listed(self, system, ctx, metric, other, t_dir, body_for_target):
        """Time body_for_target with a lister on each target's t_dir as
        the second client sees it (listing already when the body starts),
        or without one when other is None."""
        listers = []
        try:
            if other is not None:
                listers = [self.lister(system, other(os.path.join(t, t_dir)))
                           for t in system.targets()]
                time.sleep(self.interval + 0.5)
            return self.timed(system, ctx, metric, body_for_target)
        finally:
            for p in listers:
                util.kill_group(p)

    def check_dd(self, path, metric):
        want = self.dd_count * 512
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise _tag(util.BenchFailure(f"{metric}: {e}"), metric)
        if len(data) != want or data.count(0) != want:
            raise _tag(util.BenchFailure(
                f"{metric}: {path} has {len(data)} bytes, {data.count(0)} of them "
                f"zeros; expected {want} zeros"), metric)

    def run(self, system, ctx, record):
        src, manifest = gen.cached_tree(ctx.cache_dir, self.files(ctx))
        self.warm(ctx, src)
        self.untimed(system, ctx, lambda t: f"mkdir {q(t)}/alone {q(t)}/listed",
                     "mkdir (preparation)")
        other = system.second_client()
        try:
            for where in ("alone", "listed"):
                metric = f"shared_dd_{where}"
                t = self.listed(
                    system, ctx, metric, other if where == "listed" else None, where,
                    lambda t: (f"dd if=/dev/zero of={q(t)}/{where}/file bs=512 "
                               f"count={self.dd_count} status=none"))
                for tg in system.targets():
                    self.check_dd(os.path.join(tg, where, "file"), metric)
                    self.check_dd(os.path.join(other(tg), where, "file"), metric)
                record(metric, t)
            for where in ("alone", "listed"):
                metric = f"shared_rsync_{where}"
                t = self.listed(
                    system, ctx, metric, other if where == "listed" else None, where,
                    lambda t: f"rsync -a {q(src)}/ {q(t)}/{where}/tree/")
                self.verify_tree(system, f"{where}/tree", manifest, metric)
                for tg in system.targets():
                    try:
                        util.compare_manifests(manifest, util.tree_manifest(
                            os.path.join(other(tg), where, "tree")), metric)
                    except (OSError, util.BenchFailure) as e:
                        raise _tag(util.BenchFailure(f"{metric}: {e}"), metric)
                record(metric, t)
        finally:
            system.end_second_client()


PAYLOAD = "cairnbench parallel create payload line\n" * 4


class Parallel(Workload):
    name = "parallel"
    description = ("4 processes creating files: one shared dir / own dirs; "
                   "then 4 processes stat the shared dir's files, cold")
    procs = 4

    def metrics(self, ctx):
        n = ctx.par_files
        return [Metric("par_shared", f"4 procs x {n} creates, shared dir",
                       "s", TIME),
                Metric("par_private", f"4 procs x {n} creates, own dirs",
                       "s", TIME),
                Metric("par_stat", f"4 procs x {n} stat, shared dir, cold",
                       "s", TIME)]

    def run(self, system, ctx, record):
        n = ctx.par_files
        for mode in ("shared", "private"):
            metric = "par_" + mode

            def body(t, mode=mode):
                lines = []
                dirs = [f"{t}/{mode}"] if mode == "shared" else \
                    [f"{t}/{mode}/p{p}" for p in range(self.procs)]
                lines.append("mkdir -p " + " ".join(q(d) for d in dirs))
                lines.append(f"payload={q(PAYLOAD)}")
                lines.append("pids=()")
                for p in range(self.procs):
                    d = dirs[0] if mode == "shared" else dirs[p]
                    lines.append(
                        f"( for i in $(seq 1 {n}); do "
                        f"printf '%s' \"$payload\" > {q(d)}/p{p}_$i; "
                        "done ) & pids+=($!)")
                lines.append('for p in "${pids[@]}"; do wait "$p"; done')
                return "\n".join(lines)

            t = self.timed(system, ctx, metric, body, fresh=True)
            for tg in system.targets():
                total = 0
                for dp, _, files in os.walk(os.path.join(tg, mode)):
                    for f in files:
                        if os.path.getsize(os.path.join(dp, f)) != \
                                len(PAYLOAD):
                            raise _tag(util.BenchFailure(
                                f"{metric}: {f} has wrong size"), metric)
                    total += len(files)
                if total != self.procs * n:
                    raise _tag(util.BenchFailure(
                        f"{metric}: {total} files, expected "
                        f"{self.procs * n}"), metric)
            record(metric, t)
        self.stat_shared(system, ctx, record)

    def stat_shared(self, system, ctx, record):
        """Lookups of names in one directory from several processes at
        once, none of them cached: a client that takes them one at a time
        per directory shows it here."""
        n = ctx.par_files
        out = os.path.join(ctx.tmpdir, "par-stat.out")

        def body(t):
            d = f"{t}/shared"
            lines = ["pids=()"]
            for p in range(self.procs):
                lines.append(f"( seq -f {q(d)}/p{p}_%g 1 {n} | "
                             f"xargs stat -c %s >> {q(out)}.{p} ) & "
                             "pids+=($!)")
            lines.append('for p in "${pids[@]}"; do wait "$p"; done')
            return "\n".join(lines)

        for p in range(self.procs):  # what a failed run left
            if os.path.exists(f"{out}.{p}"):
                os.unlink(f"{out}.{p}")
        system.make_cold()
        t = self.timed(system, ctx, "par_stat", body)
        sizes = []
        for p in range(self.procs):
            with open(f"{out}.{p}") as f:
                sizes += f.read().split()
            os.unlink(f"{out}.{p}")
        want = len(system.targets()) * self.procs * n
        good = sum(1 for v in sizes if v == str(len(PAYLOAD)))
        if good != want or len(sizes) != want:
            raise _tag(util.BenchFailure(
                f"par_stat: {good} of {len(sizes)} sizes right, expected "
                f"{want}"), "par_stat")
        record("par_stat", t)


def all_workloads():
    return [CopyTree(), CopyTreeLibcairn(), RemoveTree(), TarExtract("include"),
            TarExtract("kernel"), ListStat(), DdLoop(), FioRandom(),
            FioSequential(), VmSeed003(), Rsync(), Parallel(), SharedDir()]
