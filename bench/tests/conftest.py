import os
import sys
import types

import pytest

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if BENCH not in sys.path:
    sys.path.insert(0, BENCH)

from cairnbench import assets  # noqa: E402


@pytest.fixture
def ctx(tmp_path):
    """A small context: 200-file tree, short timeouts, one run."""
    wd = tmp_path / "work"
    (wd / "tmp").mkdir(parents=True)
    return types.SimpleNamespace(
        workdir=str(wd), cache_dir=str(wd / "cache"), tmpdir=str(wd / "tmp"),
        quick=True, runs=1, timeout=60, prepare_timeout=60, nfiles=200,
        seq_mib=8, par_files=20, settle=0, cairn_repo="/nonexistent",
        assets=assets.Assets(str(wd / "cache"), 200), active=[])
