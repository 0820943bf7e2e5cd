"""The environment is input (issue 33, round four's r08): every variable a library reads when it is imported, or
embscope reads for its own folders, that could break a run gets a value that once would have: the run answers
as without it, with an empty stderr. MPLBACKEND=bogus made matplotlib raise while it was imported; HOME unset for
a uid with no passwd entry made Path.home() raise in the cache lookup."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run

ROOT = Path(__file__).resolve().parents[1]
# a plot (matplotlib imported, a figure drawn and saved) and a similarity (the tokenizer, the random-pair cache)
SCRIPT = """import sys
from embscope.cli import build
for args in (["norms", "--plot", sys.argv[1]], ["similarity", "father", "mother"]):
    assert build(args[:1])(args, standalone_mode=False) == 0, args
"""
HOSTILE = {
    "MPLBACKEND": "bogus",  # matplotlib validates it while it is imported
    "MPLCONFIGDIR": "/proc/no-such-folder",  # matplotlib's config and font cache
    "HOME": "relative/home",  # would put the cache in the working directory
    "XDG_CACHE_HOME": "relative/cache",
    "TMPDIR": "/no-such-folder",  # where fd 2 of native libraries is captured
    "RUST_BACKTRACE": "full",  # the tokenizers library's panic hook prints whole backtraces
    "TOKENIZERS_PARALLELISM": "bogus",
    "OMP_NUM_THREADS": "bogus",
    "OPENBLAS_NUM_THREADS": "bogus",
    "MKL_NUM_THREADS": "-3",
    "PYTHONWARNINGS": "error",  # every warning a library gives would be an exception
    "HF_HUB_CACHE": "/proc/1/no-such-cache",
}


@pytest.mark.slow  # seconds of subprocesses: CI's slow step runs it; a cheaper test of the same feature stays in the suite
@pytest.mark.parametrize("variable", list(HOSTILE))
def test_a_hostile_variable_changes_nothing_on_stderr(tmp_path, variable):
    env = {**os.environ, "PYTHONPATH": str(ROOT), variable: HOSTILE[variable]}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "n.png")], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300, check=False)
    assert done.returncode == 0 and done.stderr == "", done.stderr[-2000:]
    assert (tmp_path / "n.png").read_bytes().startswith(b"\x89PNG")
    assert "cosine" in done.stdout
    assert sorted(path.name for path in tmp_path.iterdir()) == ["n.png"]  # no cache made in the working directory


def test_every_hostile_variable_at_once_changes_nothing_on_stderr(tmp_path):
    """The suite's cheap form of the test above (which CI runs one variable at a time): all of them in one run."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **HOSTILE}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "n.png")], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300, check=False)
    assert done.returncode == 0 and done.stderr == "", done.stderr[-2000:]
    assert (tmp_path / "n.png").read_bytes().startswith(b"\x89PNG") and "cosine" in done.stdout
    assert sorted(path.name for path in tmp_path.iterdir()) == ["n.png"]


def test_no_home_for_a_cache_means_no_cache(tmp_path, monkeypatch):
    """As for a uid with no passwd entry and HOME unset: os.path.expanduser gives "~" back, and Path.home()
    raises. The answer is computed, nothing is written, and it is the answer a cached run gives."""
    from embscope import cache
    cached = run("similarity", "father", "mother", "--json").stdout
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.setattr(cache.os.path, "expanduser", lambda path: path)
    assert cache.directory() is None
    monkeypatch.chdir(tmp_path)
    assert run("similarity", "father", "mother", "--json").stdout == cached
    assert list(tmp_path.iterdir()) == []
