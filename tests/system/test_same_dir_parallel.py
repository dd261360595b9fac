"""Lookups, listings and changes in one directory at the same time.

The mount asks the kernel for parallel directory operations, so lookups
and listings of one directory reach it side by side (some kernels run
them side by side anyway). Names another mount made are looked up cold
by several threads while others list the directory and one renames and
creates in it: every answer must be right, every listing must hold every
name nobody touched exactly once, and both mounts must agree afterwards."""

import os
import threading
from concurrent.futures import ThreadPoolExecutor

STABLE = 240
MOVING = 30
NEW = 60


def stable_size(i):
    return 1 + (i * 37) % 900


def test_lookups_listings_and_changes_side_by_side(tdir_on_each_volume):
    t = tdir_on_each_volume
    d = os.path.join(t.b, "d")
    os.mkdir(d)
    for i in range(STABLE):
        with open(os.path.join(d, f"a{i}"), "wb") as f:
            f.write(b"x" * stable_size(i))
    for i in range(MOVING):
        open(os.path.join(d, f"r{i}"), "w").close()
    here = os.path.join(t.a, "d")
    stable = {f"a{i}" for i in range(STABLE)}
    stop = threading.Event()
    errors = []

    def stat_slice(k, workers):
        for _ in range(2):
            for i in range(k, STABLE, workers):
                st = os.stat(os.path.join(here, f"a{i}"))
                if st.st_size != stable_size(i):
                    errors.append(f"a{i}: size {st.st_size}, expected {stable_size(i)}")

    def list_often():
        n = 0
        while not stop.is_set() or n < 3:
            names = os.listdir(here)
            seen = [x for x in names if x in stable]
            if len(seen) != len(set(seen)):
                errors.append("a listing holds a name twice")
            missing = stable - set(seen)
            if missing:
                errors.append(f"a listing misses {sorted(missing)[:5]}")
            n += 1

    def change():
        for rnd in range(4):
            for i in range(MOVING):
                a, b = (f"r{i}", f"s{i}") if rnd % 2 == 0 else (f"s{i}", f"r{i}")
                os.rename(os.path.join(here, a), os.path.join(here, b))
        for k in range(NEW):
            with open(os.path.join(here, f"n{k}"), "wb") as f:
                f.write(str(k).encode())

    with ThreadPoolExecutor(10) as ex:
        lookers = [ex.submit(stat_slice, k, 6) for k in range(6)]
        listers = [ex.submit(list_often) for _ in range(3)]
        changer = ex.submit(change)
        for f in lookers + [changer]:
            f.result(timeout=120)
        stop.set()
        for f in listers:
            f.result(timeout=120)
    assert errors == []

    want = stable | {f"r{i}" for i in range(MOVING)} | {f"n{k}" for k in range(NEW)}
    assert set(os.listdir(here)) == want
    assert set(os.listdir(d)) == want
    for k in range(NEW):
        with open(os.path.join(d, f"n{k}"), "rb") as f:
            assert f.read() == str(k).encode()
    for i in range(0, STABLE, 17):
        assert os.stat(os.path.join(d, f"a{i}")).st_size == stable_size(i)
