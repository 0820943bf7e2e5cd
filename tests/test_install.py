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


# what a wheel is built from (pyproject.toml's packages and package-dir); a virtual environment inside the
# checkout (.venv, a gigabyte with torch) or a build/ folder is no part of it
BUILT_FROM = ("pyproject.toml", "README.md", "embscope", "sample_checkpoints")


def setuptools_is_new_enough() -> bool:
    """Whether this environment's setuptools meets pyproject's build requirement, so pip can build with it
    instead of fetching one into an isolated environment (seconds, and the network)."""
    try:
        from importlib.metadata import version
        return int(version("setuptools").split(".")[0]) >= 77
    except (ImportError, ValueError, LookupError):
        return False


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """embscope built as a wheel from this checkout and installed into a folder of its own."""
    source, target = tmp_path_factory.mktemp("source") / "embscope", tmp_path_factory.mktemp("site")
    source.mkdir()
    # a clean copy: setuptools reuses build/ in the tree it builds, and stale files there would ship
    skip = shutil.ignore_patterns("build", "*.egg-info", "__pycache__", ".*cache")
    for name in BUILT_FROM:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=skip)
        else:
            shutil.copy2(ROOT / name, source / name)
    isolation = ["--no-build-isolation"] if setuptools_is_new_enough() else []
    # --no-compile: pip would compile every module (0.5 s of CPU); the first child below compiles what it imports,
    # into the installed copy's __pycache__, for the others. No version check: pip asks nothing of the network
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile",
                    "--disable-pip-version-check", *isolation, "--target", str(target), str(source)],
                   check=True, capture_output=True)
    return target


def run_installed(target: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "EMBSCOPE_CHECKPOINT"}
    env["PYTHONPATH"] = str(target)  # the installed copy, not the checkout: cwd is elsewhere
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=env, check=True)


def test_only_the_default_sample_ships(installed):
    shipped = installed / "embscope" / "sample_checkpoints"
    assert sorted(str(p.relative_to(shipped)) for p in shipped.rglob("*") if p.is_file() and "__pycache__" not in
                  p.parts) == ["README.md", "__init__.py", "nlm/model.pkl", "nlm/tokenizer.model"]  # no training script
    assert sum(p.stat().st_size for p in shipped.rglob("*") if p.is_file()) < 5_000_000


def test_the_types_and_the_stub_ship(installed):
    assert (installed / "embscope" / "py.typed").is_file() and (installed / "embscope" / "__init__.pyi").is_file()
    assert (installed / "embscope" / "compute" / "__init__.pyi").is_file()  # what compute's names are imported from


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
