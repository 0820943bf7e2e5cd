"""The sample model is package data: after `pip install .`, the default works from any directory."""

from __future__ import annotations

import json
import os
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A virtual environment with embscope installed from this checkout (dependencies from the system)."""
    home = tmp_path_factory.mktemp("venv")
    venv.create(home, system_site_packages=True, with_pip=True)
    python = home / "bin" / "python"
    # a wheel build, not an editable install: the sample must travel as package data
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", str(ROOT)],
                   check=True, capture_output=True, cwd=home)
    return home


def test_default_checkpoint_is_found_outside_the_checkout(installed, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("EMBSCOPE_CHECKPOINT", "PYTHONPATH")}
    result = subprocess.run([installed / "bin" / "embscope", "info", "--json"], capture_output=True, text=True,
                            cwd=tmp_path, env=env, check=True)
    doc = json.loads(result.stdout)
    assert Path(doc["checkpoint"]).is_relative_to(installed)
    assert doc["tables"]["token"]["shape"][0] > 256 and doc["tables"]["position"] is not None
    assert doc["tokenizer"] is not None


def test_python_dash_m_and_no_heavy_imports(installed, tmp_path):
    code = ("import sys, embscope.cli; print(sorted(m for m in ('torch', 'matplotlib', 'tokenizers') "
            "if m in sys.modules))")
    result = subprocess.run([installed / "bin" / "python", "-c", code], capture_output=True, text=True, cwd=tmp_path,
                            check=True)
    assert result.stdout.strip() == "[]"
    help_text = subprocess.run([installed / "bin" / "python", "-m", "embscope", "--help"], capture_output=True,
                               text=True, cwd=tmp_path, check=True).stdout
    assert "info" in help_text and "params" in help_text

