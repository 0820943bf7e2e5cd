"""Faults the round-three attack on the bounds, geometry, first-week and perf work found: each test failed
before its fix."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run, run_json
from safetensors.numpy import save_file


def gpt2_folder(path, token: np.ndarray, position: np.ndarray):
    path.mkdir()
    save_file({"wte.weight": token, "wpe.weight": position}, str(path / "model.safetensors"))
    return path


@pytest.mark.parametrize("position", [np.ones((1, 4)), np.zeros((8, 4)), np.full((8, 4), np.nan)],
                         ids=["one position", "all zero", "all NaN"])
def test_positions_plot_with_no_cosine_at_any_distance(tmp_path, monkeypatch, position):
    # the curve had no finite point, and matplotlib's log axis raised "Data cannot be log-scaled" (a traceback)
    token = np.random.default_rng(0).standard_normal((10, 4)).astype(np.float32)
    folder = gpt2_folder(tmp_path / "run", token, position.astype(np.float32))
    monkeypatch.chdir(tmp_path)
    out = run("positions", "--plot", "-c", folder).stdout
    assert "plot written to run-position-heatmap.png" in out
    assert (tmp_path / "run-position-heatmap.png").stat().st_size > 0


def test_neighbors_all_says_why_its_tokens_are_ids(tmp_path):
    # a --tokenizer that failed to load was dropped without a word: the TSV held #ids and the answer no note
    rng = np.random.default_rng(1)
    folder = gpt2_folder(tmp_path / "m", rng.standard_normal((12, 4)).astype(np.float32),
                         rng.standard_normal((8, 4)).astype(np.float32))
    broken = tmp_path / "vocab_map.json"
    broken.write_text('{"": 10}')
    doc = run_json("neighbors", "--all", "-k", "2", "--out", tmp_path / "nb.tsv", "-c", folder, "--tokenizer", broken)
    assert any(note.startswith("tokenizer not loaded") for note in doc["notes"]), doc["notes"]
    assert "\t#0\t" in (tmp_path / "nb.tsv").read_text()
