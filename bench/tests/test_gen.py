import os

from cairnbench import gen, util


def test_same_seed_same_tree(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    gen.generate(str(a), 300, seed=7)
    gen.generate(str(b), 300, seed=7)
    ma, mb = util.tree_manifest(str(a)), util.tree_manifest(str(b))
    assert ma == mb
    assert util.manifest_digest(ma) == util.manifest_digest(mb)


def test_other_seed_other_tree(tmp_path):
    gen.generate(str(tmp_path / "a"), 50, seed=1)
    gen.generate(str(tmp_path / "b"), 50, seed=2)
    assert util.manifest_digest(util.tree_manifest(str(tmp_path / "a"))) != \
        util.manifest_digest(util.tree_manifest(str(tmp_path / "b")))


def test_full_plan_matches_seed_000():
    dirs, files = gen.plan(gen.FULL_FILES)
    assert len(files) == 21791
    assert len(dirs) == 100
    sizes = [f[1] for f in files]
    assert min(sizes) >= 1024 and max(sizes) <= 11 * 1024
    total_mib = sum(sizes) / 2**20
    assert 120 < total_mib < 135          # "127M" in the thread
    assert len({f[0] for f in files}) == len(files)
    # every directory gets files, none gets a disproportionate share
    per_dir = {}
    for f in files:
        per_dir[os.path.dirname(f[0])] = per_dir.get(
            os.path.dirname(f[0]), 0) + 1
    assert len(per_dir) == 100
    assert max(per_dir.values()) < 2 * len(files) / 100


def test_generated_tree_matches_plan(tmp_path):
    root = tmp_path / "t"
    gen.generate(str(root), 120, seed=3)
    _, files = gen.plan(120, seed=3)
    m = util.tree_manifest(str(root))
    for rel, size, mode, mtime, _ in files:
        kind, fmode, fsize, _, fmtime = m[rel]
        assert (kind, fmode, fsize, fmtime) == ("f", mode, size, mtime)
    assert sum(1 for v in m.values() if v[0] == "f") == 120


def test_cached_tree_reused(tmp_path):
    r1, m1 = gen.cached_tree(str(tmp_path), 40)
    mark = os.path.join(r1, os.listdir(r1)[0])
    inode = os.stat(mark).st_ino
    r2, m2 = gen.cached_tree(str(tmp_path), 40)
    assert r1 == r2 and m1 == m2
    assert os.stat(mark).st_ino == inode
