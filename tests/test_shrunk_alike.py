"""Rows weight decay shrank that no lookup moved: tdmelodic-torch 2.0.1's tdmelodic/nn/resource/net_it_2500000 (a
chainer save_npz zip, trained 2.5M steps with Adam and L2) keeps the 41 unused rows (ids 9-49: pos_map gives 0-8) of
its 50 x 64 enc_surface/emb/emb_pos/W at norm 4e-5, every coordinate at one of a few steps (3.03e-6, 3.64e-6,
7.28e-6), kurtosis 1.98. embscope found them, but called them 'a Gaussian draw of sigma 5.33e-06 (estimated)', still
as initialised, which they are not. The stand-in is written by np.savez under the same name, the shrunk rows from the
real file's steps and shares; every figure is worked out here in numpy."""

import numpy as np
from conftest import run_json

NAME = "enc_surface/emb/emb_pos/W"
USED, ROWS, DIM = 9, 50, 64


def table(shrunk: bool) -> np.ndarray:
    rng = np.random.default_rng(16)
    trained = rng.standard_t(3, (USED, DIM))  # heavy-tailed, as the real trained rows (kurtosis 12)
    trained *= rng.uniform(3, 7.4, (USED, 1)) / np.linalg.norm(trained, axis=1, keepdims=True)
    if shrunk:
        steps = rng.choice([3.03e-6, 3.64e-6, 7.28e-6], p=[0.55, 0.25, 0.2], size=(ROWS - USED, DIM))
        rest = steps * (1 + rng.uniform(-0.005, 0.005, steps.shape)) * rng.choice([-1.0, 1.0], steps.shape)
    else:  # the same norms from a Gaussian draw: still as initialised
        rest = rng.normal(0, 5.3e-6, (ROWS - USED, DIM))
    return np.concatenate([trained, rest]).astype(np.float32)


def kurtosis(values: np.ndarray) -> float:
    squares = np.square(values.astype(np.float64)).ravel()
    return float(np.mean(np.square(squares)) / np.mean(squares) ** 2)


def test_rows_shrunk_alike_are_never_trained_but_not_said_to_be_a_draw(tmp_path):
    emb = table(shrunk=True)
    np.savez(tmp_path / "net_it_2500000.npz", **{NAME: emb})
    doc = run_json("norms", "-c", str(tmp_path / "net_it_2500000.npz"), "--token-key", NAME)
    norms = np.linalg.norm(emb.astype(np.float64), axis=1)
    assert norms[USED:].max() < 1e-4 and norms[:USED].min() > 3
    shape = kurtosis(emb[USED:])
    assert abs(shape - 3) > 4 * np.sqrt(24 / emb[USED:].size)  # no Gaussian draw's
    untrained = doc["untrained"]
    assert untrained["ranges"] == [{"first": USED, "last": ROWS - 1}] and untrained["kind"] == "shrunk alike"
    assert untrained["evidence"].startswith(
        f"41 rows never trained: norm {norms[USED:].mean():.4g} +- {norms[USED:].std():.2g}, a common norm that no "
        f"Gaussian draw gives (their coordinates' kurtosis {shape:.3g}, a Gaussian's 3 +- "
        f"{4 * np.sqrt(24 / emb[USED:].size):.2g}): not as initialised, but shrunk alike")
    assert "Gaussian draw of sigma" not in untrained["evidence"]
    assert doc["anomalies_found"] == 0  # the trained rows are judged among themselves, not from the shrunk median


def test_a_draw_at_the_same_norms_is_still_said_to_be_one(tmp_path):
    emb = table(shrunk=False)
    np.savez(tmp_path / "draw.npz", **{NAME: emb})
    untrained = run_json("norms", "-c", str(tmp_path / "draw.npz"), "--token-key", NAME)["untrained"]
    assert abs(kurtosis(emb[USED:]) - 3) < 4 * np.sqrt(24 / emb[USED:].size)
    assert untrained["rows"] == ROWS - USED and untrained["kind"] == "at init"
    assert "a Gaussian draw of sigma" in untrained["evidence"]


def test_a_shrunk_minority_near_half_the_table_leaves_the_trained_rows_unflagged(tmp_path):
    """The same file's enc_surface/emb/emb_v/W: 24 rows shrunk to 4e-5, one at 4e-4 and one at 0.17 (seen a few
    times), 24 trained rows at 0.87 to 4.7. The median of every row, 0.085, fell in the gap: norms found no row and
    flagged the 24 trained rows as anomalies (z up to 36), undertrained called them 'norm-high'."""
    rng = np.random.default_rng(7)
    emb = table(shrunk=True)
    trained = rng.standard_t(3, (24, DIM))
    trained *= rng.uniform(0.9, 4.7, (24, 1)) / np.linalg.norm(trained, axis=1, keepdims=True)
    seen_a_little = rng.normal(0, 1, (2, DIM))
    seen_a_little *= (np.array([3.8e-4, 0.17]) / np.linalg.norm(seen_a_little, axis=1))[:, None]
    emb = np.concatenate([trained, seen_a_little, emb[USED:USED + 24]]).astype(np.float32)
    norms = np.linalg.norm(emb.astype(np.float64), axis=1)
    shrunk = np.arange(26, 50)
    # the truth, and why the median misleads: it lies between the two low rows, under every trained row
    assert norms[24] < np.median(norms) < norms[25] < norms[:24].min()
    path = tmp_path / "emb_v.npz"
    np.savez(path, **{NAME: emb})
    doc = run_json("norms", "-c", str(path), "--token-key", NAME)
    assert doc["untrained"]["ranges"] == [{"first": 26, "last": 49}] and doc["untrained"]["kind"] == "shrunk alike"
    assert f"kurtosis {kurtosis(emb[shrunk]):.3g}" in doc["untrained"]["evidence"]
    assert doc["anomalies_found"] == 0
    under = run_json("undertrained", "-c", str(path), "--token-key", NAME)
    (found,) = under.get("tables", [under])
    assert sorted(c["id"] for c in found["candidates"]) == shrunk.tolist()
    assert not any("norm-high" in c["signals"] for c in found["candidates"])
    kept = np.delete(norms, shrunk)
    assert any(note.startswith(f"norm z is measured among the 26 rows not found never trained (median "
                               f"{np.median(kept):.4g}") for note in found["notes"])
