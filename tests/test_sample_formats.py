"""The shipped sample model: every format gives the same answers, checked against plain numpy."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from conftest import cosine, run_json

SAMPLE = Path(__file__).resolve().parent.parent / "sample_checkpoints"
FORMATS = ["nlm", "nanogpt", "hf", "andrea"]


@pytest.fixture(scope="module")
def params():
    """The nlm pickle is our own file: plain pickle is the independent reader here."""
    with open(SAMPLE / "nlm" / "model.pkl", "rb") as f:
        return pickle.load(f)["params"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_info_and_params_agree_across_formats(fmt, params):
    info = run_json("info", "-c", SAMPLE / fmt)
    assert info["tables"]["token"]["shape"] == list(params["token_emb"].shape)
    assert info["tables"]["position"]["shape"] == list(params["pos_emb"].shape)
    # nlm's pickle holds no head and says nothing about one; the others say it is tied
    assert info["tied"] is (None if fmt == "nlm" else True) and info["tables"]["output"] is None
    assert info["tokenizer"]["vocab_size"] == params["token_emb"].shape[0]
    counted = run_json("params", "-c", SAMPLE / fmt)
    total = sum(a.size for a in params.values())
    assert (counted["total"], counted["token"], counted["position"]) == (
        total, params["token_emb"].size, params["pos_emb"].size)


@pytest.mark.parametrize("fmt", FORMATS)
def test_similarity_and_neighbors_agree_with_numpy(fmt, params):
    pair = run_json("similarity", "father", "mother", "-c", SAMPLE / fmt)["pairs"][0]
    assert len(pair["a_ids"]) == len(pair["b_ids"]) == 1  # one token each in this vocabulary
    token = params["token_emb"]
    assert pair["cosine"] == pytest.approx(cosine(token[pair["a_ids"][0]], token[pair["b_ids"][0]]), abs=1e-6)
    assert pair["cosine"] > 0.5  # the model learned that they share contexts
    found = run_json("neighbors", "father", "-k", "3", "-c", SAMPLE / fmt)
    query = token[found["ids"][0]].astype(np.float64)
    scores = token.astype(np.float64) @ query / np.linalg.norm(token.astype(np.float64), axis=1) / np.linalg.norm(query)
    scores[found["ids"][0]] = -np.inf
    assert [n["id"] for n in found["neighbors"]] == list(np.argsort(-scores, kind="stable")[:3])


@pytest.mark.parametrize("fmt", FORMATS)
def test_positions_and_norms_agree_with_numpy(fmt, params):
    pos = params["pos_emb"]
    pairs = run_json("positions", "--pairs", "10:11,10:200", "-c", SAMPLE / fmt)["pairs"]
    assert [p["cosine"] for p in pairs] == pytest.approx([cosine(pos[10], pos[11]), cosine(pos[10], pos[200])], abs=1e-6)
    assert pairs[0]["cosine"] > pairs[1]["cosine"]  # near positions are more alike than far ones
    norms = run_json("norms", "-c", SAMPLE / fmt)
    expected = np.linalg.norm(pos.astype(np.float64), axis=1)
    assert norms["mean"] == pytest.approx(expected.mean()) and norms["max"] == pytest.approx(expected.max())
    assert norms["anomalies"][0]["index"] == int(np.argmax(expected)) == 0  # position 0 stands out
