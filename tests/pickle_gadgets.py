"""Hostile pickles for the tests: objects whose __reduce__ would create a marker file if unpickled
by plain pickle. Each gadget names one dangerous global; embscope must refuse it by that name."""

from __future__ import annotations

import builtins
import os
import subprocess
from pathlib import Path

import pytest

GADGETS = ("os.system", "subprocess.Popen", "builtins.eval", "builtins.exec", "builtins.__import__")


class Reduce:
    """Pickles as `func(*args)`: exactly what a malicious file holds."""

    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def gadget(kind: str, marker: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Reduce, str]:
    """A pickle-able object that creates `marker` when loaded, and the global name it pickles as."""
    create = f"open({str(marker)!r}, 'w').close()"
    if kind == "os.system":
        return Reduce(os.system, f"touch {marker}"), f"{os.system.__module__}.system"  # posix.system
    if kind == "subprocess.Popen":
        return Reduce(subprocess.Popen, ["touch", str(marker)]), "subprocess.Popen"
    if kind == "builtins.eval":
        return Reduce(builtins.eval, create), "builtins.eval"
    if kind == "builtins.exec":
        return Reduce(builtins.exec, create), "builtins.exec"
    if kind == "builtins.__import__":
        # importing this module would create the marker; it sits on sys.path so the import could succeed
        module = f"embscope_gadget_{abs(hash(marker)) % 10**8}"
        (marker.parent / f"{module}.py").write_text(f"{create}\n")
        monkeypatch.syspath_prepend(str(marker.parent))
        return Reduce(builtins.__import__, module), "builtins.__import__"
    raise ValueError(kind)


def assert_refused(result, global_name: str, marker: Path) -> None:
    """Exit 1, one 'Error:' line naming the global, no traceback, and nothing was run."""
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert repr(global_name) in lines[0], lines[0]
    assert "Traceback" not in result.output
    assert not marker.exists()


def assert_error_line(result, *fragments: str) -> str:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]
