"""Each pytest-xdist worker rewrites and compiles its own share of the test modules before it collects: called by
conftest.py's pytest_sessionstart.

Every worker collects every test module. In a fresh clone (CI's one run) no module has its rewritten bytecode yet,
so each of the two workers rewrote the asserts of all 98 modules and compiled them, at the same moment: 2.4 s of
CPU a worker, twice the same work. Each worker now writes the bytecode of every N-th module (N workers) first; when
it collects, it finds the rest written by the others (a module another worker has not reached yet it rewrites
itself, as before). pytest writes each file whole (a rename), so a reader never sees half of one. A run that finds
the bytecode already written only reads it, as it did."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def share(config) -> None:
    """Rewrite and write the bytecode of this worker's share of the test modules that have none up to date."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if sys.dont_write_bytecode or not worker.startswith("gw") or not count.isdigit() or int(count) < 2:
        return
    try:  # pytest's own rewriting, as its import hook calls it; private, so any change in it only costs the saving
        from _pytest.assertion.rewrite import PYC_TAIL, _rewrite_test, _write_pyc, assertstate_key, get_cache_dir
        state = config.stash[assertstate_key]
    except (ImportError, KeyError):
        return
    for path in asked(config)[int(worker[2:]) % int(count)::int(count)]:
        pyc = get_cache_dir(path) / (path.name[:-3] + PYC_TAIL)
        if up_to_date(path, pyc):
            continue
        pyc.parent.mkdir(exist_ok=True)
        source_hash, code = _rewrite_test(path, config)
        _write_pyc(state, code, source_hash, pyc)


def asked(config) -> list[Path]:
    """The test modules the run collects: those under the paths it was given (pytest's testpaths: all of them)."""
    given = [(config.invocation_params.dir / arg.split("::")[0]).resolve() for arg in config.args]
    return [path for path in sorted(TESTS.glob("test_*.py")) if any(path == g or g in path.parents for g in given)]


def up_to_date(source: Path, pyc: Path) -> bool:
    """Whether `pyc` is pytest's bytecode of `source` as it is now: its header only (PEP 552's checked hash, the form
    pytest writes), so that a run that finds it written does not read the code a second time."""
    try:
        with open(pyc, "rb") as f:
            header = f.read(16)
        data = source.read_bytes()
    except OSError:
        return False
    return (header[:4] == importlib.util.MAGIC_NUMBER and header[4:8] == b"\x03\x00\x00\x00"
            and header[8:16] == importlib.util.source_hash(data)[:8])
