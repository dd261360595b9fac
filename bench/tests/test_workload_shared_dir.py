"""The shared-dir workload (seed 002) runs end to end at a tiny size: its
lister lists through the second client while the writers run, is stopped
afterwards, and a wrong byte in what the second client sees is a failure,
not a time. On the local disk, where the second client is the directory
itself."""

import os

from cairnbench import runner
from cairnbench.systems.local import LocalSystem
from cairnbench.workloads import SharedDir


class Tiny(SharedDir):
    dd_count = 64
    interval = 0.1


class CountingLocal(LocalSystem):
    """Lists through a second view of the targets that counts its mounts."""
    key = "counting"
    label = "counting local"
    seconds = []

    def second_client(self):
        self.seconds.append("mounted")
        return lambda t: t

    def end_second_client(self):
        self.seconds.append("unmounted")


class DamagedView(LocalSystem):
    """The second client sees one byte of the dd file wrong."""
    key = "damaged"
    label = "damaged view"

    def second_client(self):
        view = os.path.join(self.root, "view")

        def other(t):
            dst = os.path.join(view, os.path.basename(t))
            for where in ("alone", "listed"):
                src = os.path.join(t, where, "file")
                if os.path.exists(src):
                    os.makedirs(os.path.join(dst, where), exist_ok=True)
                    with open(src, "rb") as f:
                        data = bytearray(f.read())
                    data[-1] = 1
                    with open(os.path.join(dst, where, "file"), "wb") as f:
                        f.write(data)
            return dst
        return other


def _run(cls, ctx):
    results = runner.Results()
    wl = Tiny()
    for m in wl.metrics(ctx):
        results.add_metric(m)
    runner.run_system(cls, cls.key, [wl], ctx, results)
    return results.values[cls.key]


def test_every_step_is_timed_and_verified_through_both_clients(ctx):
    r = _run(CountingLocal, ctx)
    for key in ("shared_dd_alone", "shared_dd_listed", "shared_rsync_alone",
                "shared_rsync_listed"):
        assert r[key]["status"] == "ok", r[key]
        assert len(r[key]["values"]) == 1 and r[key]["values"][0] > 0
    assert CountingLocal.seconds == ["mounted", "unmounted"]


def test_a_wrong_byte_seen_by_the_lister_is_a_failure(ctx):
    r = _run(DamagedView, ctx)
    assert r["shared_dd_alone"]["status"] == "failed", r["shared_dd_alone"]
    assert "zeros" in r["shared_dd_alone"]["reason"]


def test_not_in_the_default_set():
    from cairnbench.cli import parse_args, select_workloads
    import types
    names = [w.name for w in select_workloads(parse_args([]), types.SimpleNamespace(quick=False))]
    assert "shared-dir" not in names
    only = select_workloads(parse_args(["--only", "shared-dir"]), types.SimpleNamespace(quick=False))
    assert [w.name for w in only] == ["shared-dir"]
