"""Bad numbers are reported, not propagated: NaN, Inf and all-zero rows give null results with a
named reason in every command's JSON (never NaN or Infinity, which are not JSON), and
half-precision tables are upcast before their squares are summed."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import run, run_json

NAN_ROW, INF_ROW, ZERO_ROW = 0, 1, 2
NAN_POSITION, ZERO_POSITION = 3, 4


def strict_json(text: str):
    """json.loads that fails on NaN, Infinity and -Infinity instead of accepting them."""
    def refuse(constant):
        raise AssertionError(f"{constant} in JSON output")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    from safetensors.numpy import save_file
    rng = np.random.default_rng(21)
    wte = rng.standard_normal((40, 8)).astype(np.float32)
    wte[NAN_ROW, 3] = np.nan
    wte[INF_ROW, 5] = -np.inf
    wte[ZERO_ROW] = 0.0
    wpe = rng.standard_normal((9, 8)).astype(np.float32)
    wpe[NAN_POSITION, 0] = np.nan
    wpe[ZERO_POSITION] = 0.0
    path = tmp_path_factory.mktemp("bad") / "model.safetensors"
    save_file({"wte": wte, "wpe": wpe}, str(path))
    return path, wte, wpe


def test_norms_name_nan_inf_and_zero_rows_and_keep_them_out_of_the_statistics(bad):
    path, wte, _ = bad
    doc = run_json("norms", "--table", "token", "-c", path)
    by_index = {a["index"]: a for a in doc["anomalies"]}
    assert by_index[NAN_ROW]["norm"] is None and "NaN" in by_index[NAN_ROW]["reason"]
    assert by_index[INF_ROW]["norm"] is None and "Inf" in by_index[INF_ROW]["reason"]
    assert by_index[ZERO_ROW]["norm"] == 0.0 and "zero row" in by_index[ZERO_ROW]["reason"]
    finite = np.linalg.norm(wte.astype(np.float64), axis=1)
    finite = finite[np.isfinite(finite)]
    assert doc["count"] == len(finite) == 38
    assert doc["mean"] == pytest.approx(finite.mean(), rel=1e-12)
    assert doc["median"] == pytest.approx(np.median(finite), rel=1e-12)
    assert doc["max"] == pytest.approx(finite.max(), rel=1e-12)


def test_norms_of_a_table_with_no_finite_row_are_null_not_nan(tmp_path):
    from safetensors.numpy import save_file
    path = tmp_path / "model.safetensors"
    save_file({"wte": np.full((4, 3), np.nan, dtype=np.float32)}, str(path))
    doc = run_json("norms", "--table", "token", "-c", path)
    assert doc["count"] == 0
    assert doc["mean"] is None and doc["median"] is None and doc["min"] is None and doc["max"] is None
    assert [a["index"] for a in doc["anomalies"]] == [0, 1, 2, 3]


def test_similarity_with_a_bad_row_is_null_with_the_reason(bad):
    path, wte, _ = bad
    doc = run_json("similarity", "--ids", NAN_ROW, 5, ZERO_ROW, 6, "-c", path)
    pairs = {(p["a"], p["b"]): p for p in doc["pairs"]}
    assert pairs[(str(NAN_ROW), "5")]["cosine"] is None
    assert "NaN or Inf" in pairs[(str(NAN_ROW), "5")]["reason"]
    assert pairs[(str(ZERO_ROW), "6")]["cosine"] is None and "zero norm" in pairs[(str(ZERO_ROW), "6")]["reason"]
    a, b = wte[5].astype(np.float64), wte[6].astype(np.float64)
    assert pairs[("5", "6")]["cosine"] == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b), abs=1e-6)
    assert pairs[("5", "6")]["reason"] is None


def test_positions_with_a_bad_row_are_null_with_the_reason(bad):
    path, _, wpe = bad
    doc = run_json("positions", "--pairs", f"{NAN_POSITION}:{NAN_POSITION + 1},{ZERO_POSITION}:8,0:1", "-c", path)
    cosines = {(p["i"], p["j"]): p for p in doc["pairs"]}
    assert cosines[(NAN_POSITION, NAN_POSITION + 1)]["cosine"] is None
    assert "NaN" in cosines[(NAN_POSITION, NAN_POSITION + 1)]["reason"]
    assert cosines[(ZERO_POSITION, 8)]["cosine"] is None and "zero" in cosines[(ZERO_POSITION, 8)]["reason"]
    a, b = wpe[0].astype(np.float64), wpe[1].astype(np.float64)
    assert cosines[(0, 1)]["cosine"] == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b), abs=1e-6)


def test_neighbors_skip_bad_rows_and_a_bad_query_gets_a_reason(bad):
    path, _, _ = bad
    doc = run_json("neighbors", "--ids", 5, "-k", 39, "-c", path)
    found = [n["id"] for n in doc["neighbors"]]
    assert not {NAN_ROW, INF_ROW, ZERO_ROW} & set(found)
    assert all(isinstance(n["cosine"], float) for n in doc["neighbors"])
    doc = run_json("neighbors", "--ids", NAN_ROW, "-k", 3, "-c", path)
    assert doc["neighbors"] == [] and "NaN or Inf" in doc["reason"]


def test_neighbors_all_file_holds_no_nan(bad, tmp_path):
    path, wte, _ = bad
    out = tmp_path / "all.jsonl"
    run("neighbors", "--all", "-k", 3, "--out", out, "-c", path)
    docs = [strict_json(line) for line in out.read_text().splitlines()]
    assert [doc["query_id"] for doc in docs] == list(range(len(wte)))  # every row has its line: none was lost
    assert not {NAN_ROW, INF_ROW, ZERO_ROW} & {n["id"] for doc in docs for n in doc["neighbors"]}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_is_upcast_before_summing(dtype, tmp_path):
    """Rows of 300s: each square (90,000) is past float16's largest value (65,504) on its own."""
    import torch
    from safetensors.torch import save_file
    table = torch.full((6, 1024), 300.0)
    table[1] = -300.0
    table[2, :512] = 0.0
    path = tmp_path / "model.safetensors"
    save_file({"wte": table.to(getattr(torch, dtype))}, str(path))
    doc = run_json("norms", "--table", "token", "-c", path)
    assert doc["max"] == pytest.approx(300.0 * 32, rel=1e-6)  # sqrt(1024) * 300, exactly representable
    assert doc["min"] == pytest.approx(300.0 * np.sqrt(512), rel=1e-6)
    doc = run_json("similarity", "--ids", 0, 1, 2, "-c", path)
    cosines = {(p["a"], p["b"]): p["cosine"] for p in doc["pairs"]}
    assert cosines[("0", "1")] == pytest.approx(-1.0, abs=1e-6)
    assert cosines[("0", "2")] == pytest.approx(np.sqrt(0.5), abs=1e-6)
