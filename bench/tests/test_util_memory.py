"""Peak resident memory of a client process, as the tar workloads
measure it."""

import subprocess
import sys

import pytest

from cairnbench import util

GROW = ("import sys\n"
        "sys.stdin.readline()\n"
        "b = bytearray(80 << 20)\n"
        "for i in range(0, len(b), 4096): b[i] = 1\n"
        "del b\n"
        "print('done', flush=True)\n"
        "sys.stdin.readline()\n")


def test_peak_is_measured_from_the_reset():
    p = subprocess.Popen([sys.executable, "-c", GROW], text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        util.reset_peak_rss([p.pid])
        before = util.peak_rss_mib([p.pid])
        p.stdin.write("\n")
        p.stdin.flush()
        assert p.stdout.readline() == "done\n"
        grown = util.peak_rss_mib([p.pid])
        # the 80 MiB were freed, but the peak keeps them
        assert grown >= before + 75
        util.reset_peak_rss([p.pid])
        assert util.peak_rss_mib([p.pid]) < grown - 75
    finally:
        p.kill()
        p.wait()


def test_a_vanished_process_is_a_failure():
    p = subprocess.Popen(["true"])
    p.wait()
    with pytest.raises(util.BenchFailure):
        util.peak_rss_mib([p.pid])
    with pytest.raises(util.BenchFailure):
        util.reset_peak_rss([p.pid])
