"""The Cairn adapter asks for replica 3 and falls back honestly."""

from cairnbench.systems.cairn import HOSTS, CairnSystem


class FakeProc:
    def __init__(self):
        self.pid = 0

    def wait(self, timeout=None):
        return 0


def _system(ctx, replica_ok, calls, sets=1):
    s = CairnSystem(ctx, sets=sets)
    s.daemons = {h: FakeProc() for h in HOSTS}

    def cli(*args, check=True, timeout=60, input=None):
        calls.append(args)
        if args[:2] == ("volume", "create") and "replica" in args:
            return (0, "", "") if replica_ok else (1, "", "not supported")
        return 0, "", ""
    s.cli = cli
    s._stop_daemon = lambda h: s.daemons.pop(h, None)
    return s


def test_falls_back_to_one_brick(ctx):
    calls = []
    s = _system(ctx, False, calls)
    s._create_volume()
    assert s.layout == "1 brick"
    assert s.label == "cairn (1 brick; replica not yet available)"
    assert list(s.daemons) == [HOSTS[0]]
    creates = [c for c in calls if c[:2] == ("volume", "create")]
    assert "replica" in creates[0] and "replica" not in creates[1]
    assert creates[1][-1] == "force"
    assert ("volume", "start", "cbench") in calls


def test_uses_replica_when_available(ctx):
    calls = []
    s = _system(ctx, True, calls)
    s._create_volume()
    assert s.layout == "replica 3"
    assert s.label == "cairn replica 3"
    create = [c for c in calls if c[:2] == ("volume", "create")]
    assert len(create) == 1
    assert create[0][3:5] == ("replica", "3")
    assert [b.split(":")[0] for b in create[0][5:8]] == HOSTS


def test_build_failure_is_unavailable(ctx, tmp_path):
    import pytest
    from cairnbench.systems import Unavailable
    (tmp_path / "Makefile").write_text("all:\n\tfalse\n")
    ctx.cairn_repo = str(tmp_path)
    with pytest.raises(Unavailable) as e:
        CairnSystem(ctx)._build()
    assert str(e.value).startswith("build failed")


def test_two_sets_make_a_distributed_replicate_volume(ctx):
    calls = []
    s = _system(ctx, True, calls, sets=2)
    assert s.key == "cairn-dr"
    s._create_volume()
    assert s.layout == "2 x 3"
    assert s.label == "cairn 2 x 3"
    create = [c for c in calls if c[:2] == ("volume", "create")]
    assert len(create) == 1 and create[0][3:5] == ("replica", "3")
    bricks = create[0][5:11]
    assert [b.split(":")[0] for b in bricks] == HOSTS * 2  # each set on all hosts
    assert len(set(b.split(":")[1] for b in bricks)) == 6


def test_two_sets_have_no_fallback(ctx):
    import pytest
    from cairnbench.systems import Unavailable
    s = _system(ctx, False, [], sets=2)
    with pytest.raises(Unavailable):
        s._create_volume()


def test_tls_turns_on_both_sides_before_start(ctx):
    calls = []
    s = _system(ctx, True, calls)
    s.tls = True
    s._create_volume()
    sets = [c for c in calls if c[:2] == ("volume", "set")]
    assert [c[3:] for c in sets] == [("server.ssl", "on"), ("client.ssl", "on")]
    assert calls.index(sets[-1]) < calls.index(("volume", "start", "cbench"))
    assert s.label == "cairn replica 3, TLS"
