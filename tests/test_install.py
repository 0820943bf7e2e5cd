"""The sample model is package data: once installed, the default works from any directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """embscope built as a wheel from this checkout and installed into a folder of its own."""
    source, target = tmp_path_factory.mktemp("source") / "embscope", tmp_path_factory.mktemp("site")
    # a clean copy: setuptools reuses build/ in the tree it builds, and stale files there would ship
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__", ".*cache"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(source)],
                   check=True, capture_output=True)
    return target


def run_installed(target: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "EMBSCOPE_CHECKPOINT"}
    env["PYTHONPATH"] = str(target)  # the installed copy, not the checkout: cwd is elsewhere
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=env, check=True)


def test_only_the_default_sample_ships(installed):
    shipped = installed / "embscope" / "sample_checkpoints"
    assert sorted(p.name for p in shipped.iterdir() if p.is_dir() and p.name != "__pycache__") == ["nlm"]
    assert sum(p.stat().st_size for p in shipped.rglob("*") if p.is_file()) < 5_000_000


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
