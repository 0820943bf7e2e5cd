"""The sample model is package data: once installed, the default works from any directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """embscope built as a wheel from this checkout and installed into a folder of its own."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(ROOT)],
                   check=True, capture_output=True)
    return target


def run_installed(target: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "EMBSCOPE_CHECKPOINT"}
    env["PYTHONPATH"] = str(target)  # the installed copy, not the checkout: cwd is elsewhere
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=env, check=True)


def test_default_checkpoint_is_found_outside_the_checkout(installed, tmp_path):
    doc = json.loads(run_installed(installed, tmp_path, "-m", "embscope", "info", "--json").stdout)
    assert Path(doc["checkpoint"]).is_relative_to(installed)
    assert doc["tables"]["token"]["shape"] == [1024, 128] and doc["tables"]["position"]["shape"] == [256, 128]
    assert doc["tokenizer"]["kind"] == "byte-bpe"
    pair = json.loads(run_installed(installed, tmp_path, "-m", "embscope", "similarity", "father", "mother",
                                    "--json").stdout)["pairs"][0]
    assert pair["cosine"] > 0.5


def test_the_default_path_imports_nothing_heavy(installed, tmp_path):
    code = ("import sys; from embscope.cli import app; from typer.testing import CliRunner; "
            "assert CliRunner().invoke(app, ['similarity', 'father', 'mother']).exit_code == 0; "
            "print(sorted(m for m in ('torch', 'matplotlib', 'tokenizers') if m in sys.modules))")
    assert run_installed(installed, tmp_path, "-c", code).stdout.strip() == "[]"
