"""`similarity` and `neighbors --remove-top D`: cosines in the all-but-the-top space (Mu & Viswanath 2018),
against plain numpy (the table less its mean, less its part along the top D right singular vectors)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import cosine, run, run_json

import embscope

V, D = 120, 10


def planted(tmp_path, seed: int = 0):
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((V, D)).astype(np.float32) * np.linspace(3, 0.5, D).astype(np.float32) + 2
    np.savez(tmp_path / "t.npz", token_emb=table)
    return tmp_path / "t.npz", table.astype(np.float64)


def all_but_the_top(table: np.ndarray, removed: int) -> np.ndarray:
    centred = table - table.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return centred - centred @ vt[:removed].T @ vt[:removed]


def test_similarity_in_the_all_but_the_top_space(tmp_path):
    path, table = planted(tmp_path)
    space = all_but_the_top(table, 2)
    doc = run_json("similarity", "-c", path, "--ids", "3", "40", "77", "--remove-top", "2")
    assert doc["remove_top"] == 2
    for pair in doc["pairs"]:
        i, j = pair["a_ids"][0], pair["b_ids"][0]
        assert pair["cosine"] == pytest.approx(cosine(space[i], space[j]), rel=1e-6)
    unit = space / np.linalg.norm(space, axis=1, keepdims=True)
    cosines = unit @ unit.T
    exact = (cosines.sum() - np.trace(cosines)) / (V * (V - 1))
    assert doc["baseline"]["mean_random_cosine"] == pytest.approx(exact, abs=1e-6)
    printed = run("similarity", "-c", path, "--ids", "3", "40", "--remove-top", "2").stdout
    assert "cosines in the all-but-the-top space of the token table: the mean row and the top 2 principal directions" \
        in printed


def test_neighbors_in_the_all_but_the_top_space(tmp_path):
    path, table = planted(tmp_path, seed=1)
    space = all_but_the_top(table, 3)
    unit = space / np.linalg.norm(space, axis=1, keepdims=True)
    scores = unit @ unit[5]
    scores[5] = -np.inf
    expected = np.argsort(-scores, kind="stable")[:4].tolist()
    doc = run_json("neighbors", "-c", path, "--ids", "5", "-k", "4", "--remove-top", "3")
    assert [n["id"] for n in doc["neighbors"]] == expected and doc["remove_top"] == 3
    assert [n["cosine"] for n in doc["neighbors"]] == pytest.approx(scores[expected], rel=1e-6)
    out = tmp_path / "all.npz"
    run("neighbors", "-c", path, "--all", "--out", out, "-k", "4", "--remove-top", "3")
    assert np.load(out)["ids"][5].tolist() == expected


def test_too_many_directions_is_one_line(tmp_path):
    path, _ = planted(tmp_path)
    result = run("similarity", "-c", path, "--ids", "1", "2", "--remove-top", "10", code=2)  # a bad option value
    assert result.stderr.splitlines()[0] == ("Error: Invalid value for '--remove-top': expected a number of directions "
                                             "to remove from 1 to 9 (the table is 10 wide), found 10")
    assert run("neighbors", "-c", path, "--ids", "1", "--remove-top", "0", code=2).stderr.startswith("Error:")


def test_a_zero_row_keeps_no_direction(tmp_path):
    rng = np.random.default_rng(2)
    table = rng.standard_normal((V, D)).astype(np.float32) + 1
    table[[4, 9]] = 0.0  # padding rows: without a direction before, and after
    np.savez(tmp_path / "z.npz", token_emb=table)
    kept = np.delete(table.astype(np.float64), [4, 9], axis=0)
    space = all_but_the_top(kept, 1)
    doc = run_json("neighbors", "-c", tmp_path / "z.npz", "--ids", "0", "-k", str(V), "--remove-top", "1")
    assert {4, 9}.isdisjoint(n["id"] for n in doc["neighbors"]) and len(doc["neighbors"]) == V - 3
    unit = space / np.linalg.norm(space, axis=1, keepdims=True)
    assert doc["neighbors"][0]["cosine"] == pytest.approx(np.delete(unit @ unit[0], 0).max(), rel=1e-6)
    doc = run_json("similarity", "-c", tmp_path / "z.npz", "--ids", "0", "4", "--remove-top", "1")
    assert doc["pairs"][0]["cosine"] is None and "zero norm" in doc["pairs"][0]["reason"]


@pytest.mark.parametrize("removed", [1.5, True, "3"])
def test_library_directions_that_are_no_integer_are_refused(tmp_path, removed):
    # 1.5 and "3" raised TypeError from numpy's slicing; True removed one direction as if 1 were asked
    path, _ = planted(tmp_path)
    emb = embscope.open(path)
    with pytest.raises(embscope.OptionError, match="expected a number of directions to remove") as err:
        embscope.similarity(emb, ["1", "2"], ids=True, remove_top=removed)
    assert err.value.option == "remove_top"
    with pytest.raises(embscope.OptionError, match="expected a number of directions to remove"):
        embscope.neighbors(emb, 1, ids=True, remove_top=removed)
