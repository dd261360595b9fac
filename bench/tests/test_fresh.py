"""A step marked fresh starts from the same state of the disk for every
system: the kernel's clean page cache is dropped first (so no recently
freed inode table block is cached), and the inputs warm() read are read
again (so the step does not pay for reading them). Checked with fincore
on a real file: needs root, as the harness does."""

import os
import re
import subprocess

import pytest

from cairnbench.systems.local import LocalSystem
from cairnbench.workloads import Workload

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="drop_caches needs root")


def cached_pages(path):
    out = subprocess.run(["fincore", "--raw", "--noheadings", "--output", "PAGES", path],
                         capture_output=True, text=True, check=True).stdout
    return int(re.search(r"\d+", out).group())


class Probe(Workload):
    name = "probe"

    def run_step(self, system, ctx, fresh, inp, other, out):
        self.warm(ctx, inp)
        return self.timed(system, ctx, "probe",
                          lambda t: f"fincore --raw --noheadings --output PAGES {inp} {other} "
                                    f"> {out}", fresh=fresh)


def files(tmp_path):
    paths = []
    for name in ("input", "other"):
        p = tmp_path / name
        p.write_bytes(os.urandom(1 << 20))
        paths.append(str(p))
    for p in paths:  # both in the page cache
        with open(p, "rb") as f:
            f.read()
    return paths


@pytest.mark.parametrize("fresh", [True, False])
def test_fresh_step_drops_the_cache_and_reads_the_inputs_again(ctx, tmp_path, fresh):
    inp, other = files(tmp_path)
    assert cached_pages(inp) == cached_pages(other) == 256
    system = LocalSystem(ctx)
    system.setup()
    try:
        out = str(tmp_path / "pages")
        Probe().run_step(system, ctx, fresh, inp, other, out)
        with open(out) as f:
            seen = [int(x) for x in f.read().split()]
    finally:
        system.teardown()
    # the input is cached either way; the other file only without fresh
    assert seen == ([256, 0] if fresh else [256, 256])
