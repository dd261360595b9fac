"""Command line: bench/run [--quick] [--only W,...] [--systems S,...]
[--degraded] [--runs N] ..."""

import argparse
import datetime
import json
import os
import shlex
import signal
import subprocess
import sys
import time

from cairnbench import assets, gen, machine, report, runner, util
from cairnbench.systems import DEFAULT_SYSTEMS, DOWN_VARIANTS, EXTRA_SYSTEMS, registry
from cairnbench.workloads import all_workloads

BASE_PACKAGES = ("fio", "rsync", "linux-source-6.1", "xz-utils", "tar",
                 "fuse3", "iproute2", "util-linux", "psmisc")

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(HERE)

# A volume in service has been idle before most work reaches it; one
# mounted a second ago may still be doing what a file system does after it
# is made (ext4's lazy inode-table initialisation, Cairn's spare inodes).
SETTLE_S = 20


class Context:
    """Everything a workload or a system adapter needs to know."""

    def __init__(self, args):
        self.quick = args.quick
        self.workdir = os.path.abspath(args.workdir)
        self.cache_dir = os.path.join(self.workdir, "cache")
        self.tmpdir = os.path.join(self.workdir, "tmp")
        self.runs = args.runs or (2 if args.quick else 3)
        self.timeout = args.timeout or (300 if args.quick else 600)
        self.prepare_timeout = 2 * self.timeout
        self.nfiles = args.files or (gen.QUICK_FILES if args.quick
                                     else gen.FULL_FILES)
        self.seq_mib = 256 if args.quick else 1024
        self.par_files = 500 if args.quick else 2000
        self.cairn_repo = os.path.abspath(args.cairn_repo)
        self.cairn_build_dir = os.path.abspath(
            args.cairn_build_dir or os.path.join(self.cairn_repo, "build"))
        self.assets = assets.Assets(self.cache_dir, self.nfiles)
        self.settle = args.settle
        self.active = []

    def config(self):
        return {"quick": self.quick, "runs": self.runs,
                "timeout": self.timeout,
                "prepare_timeout": self.prepare_timeout,
                "settle_s": self.settle, "tree_files": self.nfiles,
                "seq_mib": self.seq_mib,
                "parallel_files_per_proc": self.par_files,
                "workdir": self.workdir, "cairn_repo": self.cairn_repo,
                "cairn_build_dir": self.cairn_build_dir}


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="bench/run",
        description="Run the seed workloads on Cairn, GlusterFS, MooseFS "
                    "and the local disk; print a markdown table.")
    ap.add_argument("--quick", action="store_true",
                    help="smaller inputs (5,000-file tree, 256 MiB "
                         "sequential file, 4x500 parallel creates, no "
                         "whole-kernel untar), 2 runs, 300 s timeouts")
    ap.add_argument("--only", action="append", default=[],
                    metavar="WORKLOAD",
                    help="run only these workloads (comma separated, "
                         "repeatable); see --list")
    ap.add_argument("--systems", default=None,
                    help="comma separated, default: "
                         + ",".join(DEFAULT_SYSTEMS) + "; also: "
                         + ",".join(EXTRA_SYSTEMS))
    ap.add_argument("--runs", type=int, default=None,
                    help="runs per measurement (default 3, quick 2)")
    ap.add_argument("--timeout", type=float, default=None,
                    help="seconds per timed step (default 600, quick 300)")
    ap.add_argument("--settle", type=float, default=SETTLE_S,
                    help="seconds each system's new volume rests after it "
                         "is mounted, before its first workload (default "
                         f"{SETTLE_S:g})")
    ap.add_argument("--files", type=int, default=None,
                    help="files in the generated tree (default 21791, "
                         "quick 5000)")
    ap.add_argument("--workdir", default="/var/tmp/cairn-bench")
    ap.add_argument("--cairn-repo", default=REPO,
                    help="Cairn repository to build with make (default: "
                         "the one holding this harness)")
    ap.add_argument("--cairn-build-dir", default=None,
                    help="make BUILD= directory (default <repo>/build)")
    ap.add_argument("--json", default=None, help="write raw results here")
    ap.add_argument("--markdown", default=None, help="write the table here")
    ap.add_argument("--no-install", action="store_true",
                    help="do not apt-get install missing packages")
    ap.add_argument("--degraded", action="store_true",
                    help="also run each replicated system with one server of "
                         "three killed (kill -9) before the workloads, right "
                         "after it in the same run (systems cairn-down, "
                         "glusterfs-down, ...)")
    ap.add_argument("--list", action="store_true",
                    help="list workloads and systems and exit")
    ap.add_argument("-v", "--verbose", action="store_true")
    return ap.parse_args(argv)


def expand_systems(systems, degraded):
    """With --degraded, each system that has servers is followed by its
    "-down" variant, so both run in one run, side by side."""
    if not degraded:
        return list(systems)
    return [v for s in systems for v in ([s, DOWN_VARIANTS[s]]
                                         if s in DOWN_VARIANTS else [s])]


def select_workloads(args, ctx):
    wls = all_workloads()
    names = [n for o in args.only for n in o.split(",") if n]
    if names:
        known = {w.name for w in wls}
        bad = [n for n in names if n not in known]
        if bad:
            raise SystemExit(f"unknown workload(s) {bad}; known: "
                             f"{sorted(known)}")
        return [w for w in wls if w.name in names]
    return [w for w in wls if not (w.full_only and ctx.quick)
            and not getattr(w, "opt_in", False)]


def missing_packages(pkgs):
    missing = []
    for p in pkgs:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", p],
                           capture_output=True, text=True)
        if "install ok installed" not in r.stdout:
            missing.append(p)
    return missing


def install(pkgs):
    missing = missing_packages(pkgs)
    if not missing:
        return
    util.log("installing " + " ".join(missing))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    rc, out, err = util.run(["apt-get", "install", "-y", "--no-install-recommends"]
                            + missing, timeout=1800, check=False, env=env)
    if rc != 0:
        util.log("apt-get install failed (systems needing these packages "
                 "will be reported unavailable): " + err.strip()[-300:])


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    util.VERBOSE = args.verbose
    reg = registry()
    if args.list:
        for w in all_workloads():
            print(f"{w.name:10s} {w.description}"
                  + (" (full run only)" if w.full_only else ""))
        print("systems: " + ", ".join(reg))
        return 0
    if os.geteuid() != 0:
        print("bench/run must run as root (mounts, namespaces, "
              "drop_caches)", file=sys.stderr)
        return 2
    ctx = Context(args)
    systems = (args.systems.split(",") if args.systems else DEFAULT_SYSTEMS)
    systems = expand_systems(systems, args.degraded)
    bad = [s for s in systems if s not in reg]
    if bad:
        raise SystemExit(f"unknown system(s) {bad}; known: {list(reg)}")
    workloads = select_workloads(args, ctx)

    for d in (ctx.workdir, ctx.cache_dir, ctx.tmpdir):
        os.makedirs(d, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    resdir = os.path.join(ctx.workdir, "results")
    os.makedirs(resdir, exist_ok=True)
    json_path = args.json or os.path.join(resdir, f"{stamp}.json")
    md_path = args.markdown or os.path.join(resdir, f"{stamp}.md")
    util.set_log_file(os.path.join(resdir, f"{stamp}.log"))

    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGHUP, _raise_interrupt)

    if not args.no_install:
        pkgs = list(BASE_PACKAGES)
        for s in systems:
            sysobj = reg[s](ctx)
            pkgs += [p for p in sysobj.packages if p not in pkgs]
        install(pkgs)

    results = runner.Results()
    for wl in workloads:
        for m in wl.metrics(ctx):
            results.add_metric(m)
    data = {
        "date": datetime.datetime.now().astimezone().isoformat(
            timespec="seconds"),
        "command": "bench/run " + " ".join(shlex.quote(a) for a in argv),
        "machine": machine.describe(ctx.workdir),
        "config": ctx.config(),
        "workloads": [w.name for w in workloads],
    }
    interrupted = False
    t0 = time.time()
    try:
        # inputs first, so that their preparation is never timed
        needs_tree = any(w.name in ("cp", "cp-libcairn", "rm", "ls-stat", "rsync")
                         for w in workloads)
        if needs_tree:
            ctx.assets.tree()
        for w in workloads:
            if w.name.startswith("tar-"):
                ctx.assets.tar(w.which)
        for s in systems:
            runner.run_system(reg[s], s, workloads, ctx, results)
    except KeyboardInterrupt:
        interrupted = True
        util.log("interrupted: tearing down")
        for sysobj in list(ctx.active):
            sysobj.teardown()
    finally:
        data.update(results.to_json())
        data["elapsed_s"] = round(time.time() - t0, 1)
        data["interrupted"] = interrupted
        with open(json_path, "w") as f:
            json.dump(data, f, indent=1)
        table = report.render(data)
        with open(md_path, "w") as f:
            f.write(table)
    print(table)
    util.log(f"results: {json_path} and {md_path} "
             f"({data['elapsed_s']:.0f} s)")
    return 130 if interrupted else 0
