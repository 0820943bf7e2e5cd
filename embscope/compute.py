"""INTERIM plain-numpy stand-in for the compute module (replaced at merge by the real one).
Same interface: device choice, unit rows, pair cosines, batched top-k, random-pair baselines."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .errors import EmbscopeError

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")


@dataclass(frozen=True)
class TopK:
    ids: np.ndarray  # int64 (Q, k); -1 where there is no neighbour
    scores: np.ndarray  # float32 (Q, k); NaN where there is no neighbour
    query_ids: np.ndarray  # int64 (Q,)


def resolve_device(device: str = "auto") -> str:
    # the interim version has numpy only
    if device in ("auto", "cpu"):
        return "cpu"
    raise EmbscopeError(f"expected device auto or cpu (the interim compute has numpy only), found {device!r}")


def unit_rows(table: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows scaled to length 1 (zeros where invalid), their norms, and which rows are valid."""
    rows = np.asarray(table)
    finite = np.isfinite(rows).all(axis=1)
    safe_rows = np.where(finite[:, None], rows, 0).astype(np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", safe_rows, safe_rows))
    norms[~finite] = np.nan
    valid = finite & (norms > 0)
    unit = np.zeros(rows.shape, dtype=np.float32)
    unit[valid] = (safe_rows[valid] / norms[valid, None]).astype(np.float32)
    return unit, norms, valid


def pair_cosines(table: np.ndarray, pairs, *, center=None) -> np.ndarray:
    """Cosine of each (i, j) row pair in float64; NaN where either row is zero or not finite."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    rows = np.asarray(table, dtype=np.float64)
    if center is not None:
        rows = rows - np.asarray(center, dtype=np.float64)
    a, b = rows[pairs[:, 0]], rows[pairs[:, 1]]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        dots = np.einsum("ij,ij->i", a, b)
        norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
        cosines = dots / norms
    bad = ~np.isfinite(a).all(axis=1) | ~np.isfinite(b).all(axis=1) | (norms == 0) | ~np.isfinite(cosines)
    cosines[bad] = np.nan
    return np.clip(cosines, -1.0, 1.0)


def topk_all(table: np.ndarray, k: int, *, queries=None, exclude_self: bool = True, device: str = "auto",
             precision: str = "fp32", block_rows: int | None = None,
             progress: Callable[[int, int], None] | None = None) -> TopK:
    """The k most similar rows for each query row; ties go to the lower id, gaps padded with -1/NaN."""
    resolve_device(device)
    if precision not in PRECISIONS:
        raise EmbscopeError(f"expected precision one of {', '.join(PRECISIONS)}, found {precision!r}")
    unit, _, valid = unit_rows(table)
    n = unit.shape[0]
    query_ids = np.arange(n, dtype=np.int64) if queries is None else np.asarray(queries, dtype=np.int64).reshape(-1)
    ids = np.full((len(query_ids), k), -1, dtype=np.int64)
    scores = np.full((len(query_ids), k), np.nan, dtype=np.float32)
    block = block_rows or 256
    for start in range(0, len(query_ids), block):
        chunk = query_ids[start:start + block]
        sims = unit[chunk] @ unit.T
        for row, q in enumerate(chunk):
            if not valid[q]:
                continue
            allowed = valid.copy()
            if exclude_self:
                allowed[q] = False
            candidates = np.flatnonzero(allowed)
            order = np.argsort(-sims[row, candidates], kind="stable")[:k]  # stable: ties keep the lower id
            ids[start + row, :len(order)] = candidates[order]
            scores[start + row, :len(order)] = sims[row, candidates[order]]
        if progress is not None:
            progress(min(start + block, len(query_ids)), len(query_ids))
    return TopK(ids, scores, query_ids)


def mean_random_cosine(table: np.ndarray) -> float:
    """Exact mean cosine over distinct valid row pairs: (n |mean unit|^2 - 1) / (n - 1)."""
    unit, _, valid = unit_rows(table)
    n = int(valid.sum())
    if n < 2:
        return float("nan")
    mean_unit = unit[valid].astype(np.float64).mean(axis=0)
    return float((n * mean_unit @ mean_unit - 1.0) / (n - 1))


def random_pair_cosines(table: np.ndarray, n_pairs: int = 10000, seed: int = 0) -> np.ndarray:
    """Cosines of random distinct valid row pairs, the same pairs for the same seed."""
    unit, _, valid = unit_rows(table)
    rows = np.flatnonzero(valid)
    if len(rows) < 2:
        return np.empty(0, dtype=np.float64)
    rng = np.random.default_rng(seed)
    i = rng.integers(0, len(rows), n_pairs)
    j = rng.integers(0, len(rows) - 1, n_pairs)
    j = j + (j >= i)  # never the same row twice
    a, b = unit[rows[i]].astype(np.float64), unit[rows[j]].astype(np.float64)
    return np.einsum("ij,ij->i", a, b)
