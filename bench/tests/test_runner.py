"""Failures and timeouts are reported as such, never timed."""

import os
import time

from cairnbench import report, runner, util
from cairnbench.systems import Unavailable
from cairnbench.systems.local import LocalSystem
from cairnbench.workloads import CopyTree, DdLoop, Parallel, Rsync


class CorruptingLocal(LocalSystem):
    """Runs each workload command, then damages one file in the target:
    what a file system returning wrong data looks like."""
    key = "corrupt"
    label = "corrupting local"

    def prefix(self):
        script = ('"$@"; rc=$?; '
                  f'f=$(find {self.root} -type f | sort | head -n 1); '
                  '[ -n "$f" ] && printf X >> "$f"; exit $rc')
        return ["/bin/sh", "-c", script, "wrapper"]


class FailingLocal(LocalSystem):
    """Every workload command exits non-zero after doing its work."""
    key = "failing"
    label = "failing local"

    def prefix(self):
        return ["/bin/sh", "-c", '"$@"; exit 3', "wrapper"]


class BrokenSystem(LocalSystem):
    key = "broken"
    label = "broken"

    def setup(self):
        raise Unavailable("build failed: no Makefile")


def _run(cls, wl, ctx):
    results = runner.Results()
    for m in wl.metrics(ctx):
        results.add_metric(m)
    runner.run_system(cls, cls.key, [wl], ctx, results)
    return results


def test_local_copy_is_timed_and_verified(ctx):
    r = _run(LocalSystem, CopyTree(), ctx)
    e = r.values["local"]["cp_a"]
    assert e["status"] == "ok" and len(e["values"]) == 1
    assert e["values"][0] > 0
    # teardown removed everything
    assert not os.path.exists(os.path.join(ctx.workdir, "systems", "local"))


def test_wrong_data_is_a_failure_not_a_time(ctx):
    for wl in (CopyTree(), Rsync()):
        r = _run(CorruptingLocal, wl, ctx)
        key = wl.metrics(ctx)[0].key
        e = r.values["corrupt"][key]
        assert e["status"] == "failed", e
        assert e["values"] == []
        assert "wrong data" in e["reason"]


def test_failing_command_is_a_failure(ctx):
    r = _run(FailingLocal, Parallel(), ctx)
    for key in ("par_shared", "par_private"):
        e = r.values["failing"][key]
        assert e["status"] == "failed" and e["values"] == []
        assert "exited 3" in e["reason"]


def test_wrong_count_is_a_failure(ctx, monkeypatch):
    # the workload's own check sees a file short of what it should be
    wl = Parallel()
    r = _run(CorruptingLocal, wl, ctx)
    assert r.values["corrupt"]["par_shared"]["status"] == "failed"


def test_timeout_is_reported(ctx):
    ctx.timeout = 0.3
    r = _run(LocalSystem, DdLoop(), ctx)
    e = r.values["local"]["dd_loop"]
    assert e["status"] == "timeout" and e["values"] == []
    data = {"systems": r.systems, "metrics": r.metrics,
            "results": r.values}
    assert "timeout (>0.3s)" in report.render(data)


def test_timeout_kills_the_command(ctx):
    import time
    t0 = time.time()
    try:
        util.run_timed("sleep 30", timeout=0.5)
    except util.BenchTimeout as e:
        assert "timeout (>0.5s)" in str(e)
    else:
        raise AssertionError("no timeout")
    assert time.time() - t0 < 10


def test_unavailable_system(ctx):
    r = _run(BrokenSystem, CopyTree(), ctx)
    assert r.systems["broken"]["status"] == "unavailable"
    assert r.values["broken"]["cp_a"]["status"] == "unavailable"
    data = {"systems": r.systems, "metrics": r.metrics,
            "results": r.values}
    text = report.render(data)
    assert "unavailable: build failed: no Makefile" in text


class ClockedLocal(LocalSystem):
    """Notes when it came up and when its first run was prepared."""
    key = "clocked"
    label = "clocked local"
    times = {}

    def setup(self):
        super().setup()
        self.times["up"] = time.monotonic()

    def reset(self):
        if "up" in self.times:  # setup resets too
            self.times.setdefault("first_reset", time.monotonic())
        super().reset()


def test_new_volume_rests_before_its_first_workload(ctx):
    ctx.settle = 0.5
    ClockedLocal.times = {}
    r = _run(ClockedLocal, DdLoop(), ctx)
    assert r.values["clocked"]["dd_loop"]["status"] == "ok"
    t = ClockedLocal.times
    assert t["first_reset"] - t["up"] >= 0.5


class DownLocal(LocalSystem):
    """A "-down" variant that records when its server is taken down."""
    key = "local-down"
    label = "local, 1 of 3 servers down"
    down = True

    def __init__(self, ctx):
        super().__init__(ctx)
        self.calls = []

    def setup(self):
        self.calls.append("setup")
        super().setup()

    def reset(self):
        self.calls.append("reset")
        super().reset()

    def take_server_down(self):
        self.calls.append("down")


def test_down_variant_loses_its_server_before_every_run(ctx):
    made = []

    def factory(c):
        made.append(DownLocal(c))
        return made[-1]

    results = runner.Results()
    wl = CopyTree()
    for m in wl.metrics(ctx):
        results.add_metric(m)
    ctx.runs = 2
    runner.run_system(factory, "local-down", [wl], ctx, results)
    # LocalSystem.setup resets once itself; every run starts after a "down"
    assert made[0].calls == ["setup", "reset", "down", "reset", "down", "reset", "down"]
    assert results.values["local-down"]["cp_a"]["status"] == "ok"


def test_a_system_without_servers_cannot_be_taken_down(ctx):
    class NoServers(LocalSystem):
        key = "local-nodown"
        down = True

    results = runner.Results()
    wl = CopyTree()
    for m in wl.metrics(ctx):
        results.add_metric(m)
    runner.run_system(NoServers, "local-nodown", [wl], ctx, results)
    assert results.systems["local-nodown"]["status"] == "unavailable"
    assert "no servers" in results.systems["local-nodown"]["reason"]


def test_degraded_adds_the_down_variants_after_their_systems():
    from cairnbench.cli import expand_systems, parse_args
    from cairnbench.systems import DOWN_VARIANTS, registry
    assert parse_args(["--degraded"]).degraded
    assert expand_systems(["local", "cairn", "glusterfs"], True) == \
        ["local", "cairn", "cairn-down", "glusterfs", "glusterfs-down"]
    assert expand_systems(["local", "cairn"], False) == ["local", "cairn"]
    reg = registry()
    for s, v in DOWN_VARIANTS.items():
        assert s in reg and v in reg
