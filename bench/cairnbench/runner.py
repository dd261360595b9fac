"""Runs the selected workloads on the selected systems and collects the
results (a plain dict, serialised as JSON and rendered by report)."""

import time

from cairnbench import util
from cairnbench.systems import Unavailable

OK, TIMEOUT, FAILED, UNAVAILABLE, SKIPPED = (
    "ok", "timeout", "failed", "unavailable", "skipped")


class Results:
    def __init__(self):
        self.systems = {}    # key -> {"label", "status", "reason", "info"}
        self.metrics = []    # metric json dicts, in table order
        self.values = {}     # system -> metric -> entry

    def add_metric(self, m):
        if all(x["key"] != m.key for x in self.metrics):
            self.metrics.append(m.to_json())

    def entry(self, system, metric):
        return self.values.setdefault(system, {}).setdefault(
            metric, {"status": OK, "values": [], "extra": [],
                     "reason": None})

    def record(self, system, metric, value, **extra):
        e = self.entry(system, metric)
        e["values"].append(value)
        e["extra"].append(extra)

    def mark(self, system, metric, status, reason):
        e = self.entry(system, metric)
        # the worst outcome wins: a timeout or failure in any run shows
        if e["status"] in (OK, SKIPPED):
            e["status"], e["reason"] = status, reason

    def to_json(self):
        return {"systems": self.systems, "metrics": self.metrics,
                "results": self.values}


def run_workload(system, wl, ctx, results, skey):
    """All runs of one workload on one system."""
    keys = [m.key for m in wl.metrics(ctx)]
    for i in range(ctx.runs):
        measured = set()

        def record(metric, value, **extra):
            measured.add(metric)
            results.record(skey, metric, value, **extra)
            util.log(f"  {skey} {metric} run {i + 1}: {value:.4g}")

        try:
            system.reset()
            if system.down:
                system.take_server_down()
        except (util.BenchFailure, util.BenchTimeout, OSError) as e:
            for k in keys:
                results.mark(skey, k, FAILED, f"reset before run failed: {e}")
            return False
        try:
            wl.run(system, ctx, record)
        except util.BenchTimeout as e:
            bad = getattr(e, "metric", None)
            for k in keys:
                if k == bad or bad is None:
                    results.mark(skey, k, TIMEOUT, str(e))
                elif k not in measured:
                    results.mark(skey, k, SKIPPED,
                                 f"not run: {bad} timed out")
            util.log(f"  {skey} {wl.name}: {e}")
            return True
        except (util.BenchFailure, OSError) as e:
            bad = getattr(e, "metric", None)
            for k in keys:
                if k == bad or bad is None or k not in measured:
                    results.mark(skey, k, FAILED, str(e)[:500])
            util.log(f"  {skey} {wl.name}: FAILED: {e}")
            return True
    return True


def run_system(factory, skey, workloads, ctx, results):
    system = factory(ctx)
    results.systems[skey] = {"label": system.label, "status": OK,
                             "reason": None, "info": None}
    all_keys = [m.key for wl in workloads for m in wl.metrics(ctx)]
    ctx.active.append(system)
    try:
        util.log(f"== {skey}: setting up")
        t0 = time.time()
        try:
            system.setup()
            if system.down:
                system.take_server_down()
        except (Unavailable, util.BenchFailure, util.BenchTimeout,
                OSError) as e:
            reason = str(e).strip()[:300]
            util.log(f"== {skey}: unavailable: {reason}")
            results.systems[skey].update(status=UNAVAILABLE, reason=reason,
                                         label=system.label)
            for k in all_keys:
                results.mark(skey, k, UNAVAILABLE, reason)
            return
        results.systems[skey]["label"] = system.label
        results.systems[skey]["info"] = system.describe()
        util.log(f"== {skey} ({system.label}) up in {time.time() - t0:.1f}s")
        if ctx.settle > 0:
            util.log(f"== {skey}: resting {ctx.settle:g}s before the first "
                     "workload")
            time.sleep(ctx.settle)
        for wl in workloads:
            util.log(f"-- {skey}: {wl.name}")
            healthy = run_workload(system, wl, ctx, results, skey)
            if not healthy:
                # the system is wedged: bring it up again from scratch
                util.log(f"== {skey}: restarting after a failed reset")
                system.teardown()
                try:
                    system.setup()
                except (Unavailable, util.BenchFailure, util.BenchTimeout,
                        OSError) as e:
                    rest = workloads[workloads.index(wl) + 1:]
                    for w in rest:
                        for m in w.metrics(ctx):
                            results.mark(skey, m.key, FAILED,
                                         f"system could not be restarted: "
                                         f"{e}")
                    return
        results.systems[skey]["info"] = system.describe()
    finally:
        util.log(f"== {skey}: tearing down")
        system.teardown()
        ctx.active.remove(system)
