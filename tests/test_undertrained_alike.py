"""A minority of near-identical rows at the other rows' norms seeds no under-trained reference: the vectors of
en_prompt_nsfw_pipeline_bilstm 0.3.0's spaCy pipeline (vocab/vectors, a numpy .npy of 20,000 x 300 GloVe rows, every
row a word of key2row) hold the years 1972 to 1978 and their ranges at cosine 0.99, median norm z +0.86; undertrained
took those 45 trained rows as the seed of its reference and listed them as candidates. Written here with np.save, as
spaCy's Vectors.to_disk writes the table."""

from __future__ import annotations

import numpy as np
from conftest import run_json

V, D, ALIKE = 400, 32, 12


def table(alike_scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Trained rows (random directions, norms 3 to 9) and ALIKE rows near one direction (cosine about 0.995 to it),
    their norms the median's times `alike_scale`."""
    rng = np.random.default_rng(72)
    rows = rng.standard_normal((V, D))
    rows *= (rng.uniform(3, 9, V) / np.linalg.norm(rows, axis=1))[:, None]
    alike = np.sort(rng.choice(V, ALIKE, replace=False))
    base = rng.standard_normal(D)
    group = base + 0.07 * rng.standard_normal((ALIKE, D))
    rows[alike] = group * (alike_scale * np.median(np.linalg.norm(rows, axis=1)) / np.linalg.norm(group, axis=1))[:, None]
    return rows.astype(np.float32), alike


def cosines(rows: np.ndarray) -> np.ndarray:
    unit = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return unit @ unit.T


def test_near_identical_rows_at_the_others_norms_seed_nothing(tmp_path):
    rows, alike = table(1.0)
    near = cosines(rows[alike])
    assert near[np.triu_indices(ALIKE, 1)].min() >= 0.99  # near-identical, as the years were
    norms = np.linalg.norm(rows, axis=1)
    median = np.median(norms)
    z = (norms[alike] - median) / (1.4826 * np.median(np.abs(norms - median)))
    assert abs(np.median(z)) < 2  # at the others' norms
    np.save(tmp_path / "vectors.npy", rows)
    doc = run_json("undertrained", "-c", tmp_path / "vectors.npy")
    assert doc["reference"]["source"] != "cluster"
    assert f"the {ALIKE} near-identical rows found (cosine >= 0.99) are passed over" in doc["reference"]["description"]
    assert not set(alike.tolist()) & {c["id"] for c in doc["candidates"]}


def test_near_identical_rows_below_the_others_norms_still_seed(tmp_path):
    """Rows that moved only together keep a norm of their own (decay's): they stay the seed."""
    rows, alike = table(0.2)
    np.save(tmp_path / "vectors.npy", rows)
    doc = run_json("undertrained", "-c", tmp_path / "vectors.npy")
    assert doc["reference"]["source"] == "cluster" and sorted(doc["reference"]["ids"]) == alike.tolist()
