"""Deterministic generator of a small-file tree shaped like seed 000's:
21,791 files of 1-11 KB (~128 MB) in ~100 directories.

The tree depends only on (seed, nfiles): names, directory layout, sizes,
contents, permission bits and mtimes come from one seeded PRNG."""

import json
import os
import random
import shutil

from cairnbench import util

FULL_FILES = 21791
QUICK_FILES = 5000
MIN_SIZE = 1024
MAX_SIZE = 11 * 1024
TOP_DIRS = 10
SUB_DIRS = 9          # 10 top + 90 sub = 100 directories below the root
BASE_MTIME = 1521410000  # March 2018, when seed 000 was written


def plan(nfiles, seed=1):
    """Return the list of (relpath, size, mode, mtime, content_seed) and the
    list of directories, without touching the disk."""
    rng = random.Random(f"cairnbench-tree-{seed}")
    dirs = []
    for t in range(TOP_DIRS):
        top = f"dept{t:02d}"
        dirs.append(top)
        for s in range(SUB_DIRS):
            dirs.append(f"{top}/project{s:02d}")
    files = []
    for i in range(nfiles):
        d = rng.choice(dirs)
        n = rng.randrange(100000)
        name = f"{n}toto{i}.txt"
        size = rng.randint(MIN_SIZE, MAX_SIZE)
        mode = 0o755 if rng.random() < 0.05 else 0o644
        mtime = BASE_MTIME + rng.randrange(86400 * 365)
        files.append((f"{d}/{name}", size, mode, mtime, rng.getrandbits(64)))
    return dirs, files


def generate(root, nfiles, seed=1):
    """Create the tree under root (which must not exist)."""
    dirs, files = plan(nfiles, seed)
    os.makedirs(root)
    for d in dirs:
        os.makedirs(os.path.join(root, d))
    for rel, size, mode, mtime, cseed in files:
        p = os.path.join(root, rel)
        data = random.Random(cseed).randbytes(size)
        with open(p, "wb") as f:
            f.write(data)
        os.chmod(p, mode)
        os.utime(p, (mtime, mtime))
    for d in reversed(dirs):
        os.utime(os.path.join(root, d), (BASE_MTIME, BASE_MTIME))
    return files


def cached_tree(cache_dir, nfiles, seed=1):
    """Return (path, manifest) of the generated tree, creating it once.

    The manifest is stored next to the tree (not inside it)."""
    name = f"tree-s{seed}-n{nfiles}"
    root = os.path.join(cache_dir, name)
    mpath = os.path.join(cache_dir, name + ".manifest.json")
    if os.path.exists(mpath) and os.path.isdir(root):
        with open(mpath) as f:
            manifest = {k: tuple(v) for k, v in json.load(f).items()}
        return root, manifest
    if os.path.exists(root):
        shutil.rmtree(root)
    util.log(f"generating {nfiles}-file tree in {root}")
    os.makedirs(cache_dir, exist_ok=True)
    generate(root, nfiles, seed)
    manifest = util.tree_manifest(root)
    with open(mpath + ".tmp", "w") as f:
        json.dump(manifest, f)
    os.rename(mpath + ".tmp", mpath)
    return root, manifest


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description="generate the small-file tree")
    ap.add_argument("root")
    ap.add_argument("--files", type=int, default=FULL_FILES)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    generate(a.root, a.files, a.seed)
    print(util.manifest_digest(util.tree_manifest(a.root)))


if __name__ == "__main__":
    main()
