"""Cosines between chosen rows, the random-pair baseline of a table (one pass), and cosines of row blocks
against the whole table. All in float64 except the blocks (float32, as matrix products give them).
A cosine involving an invalid row (zero norm, NaN or Inf) is NaN; cosines are clipped to [-1, 1]."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..core.errors import OptionError
from .rows import (
    SCORE_BLOCK_BYTES,
    TableChecksum,
    as_table,
    block_rows_for,
    check_center,
    check_ids,
    float64_norms,
    normalise,
    raw_blocks,
    unit_rows,
)

PASS_BLOCK_BYTES = 4 << 20  # float64 work space of the baseline's pass: near the cache (16 MB blocks were 20% slower)


def pair_cosines(table: object, pairs: object, *, center: np.ndarray | None = None) -> np.ndarray:
    """Cosine of each (i, j) pair of rows, float64 (n,); NaN where either row is invalid.

    center, when given, is subtracted from both rows first (e.g. the table mean).
    Only the rows named in pairs are read.
    """
    array = as_table(table)
    index = np.asarray(pairs)
    if index.ndim != 2 or index.shape[1] != 2:
        raise OptionError(f"expected pairs of shape (n, 2); found shape {tuple(index.shape)}", option="pairs")
    index = check_ids(index, array.shape[0], "pair row ids", "pairs")
    if index.shape[0] == 0:
        return np.empty(0, dtype=np.float64)
    needed, where = np.unique(index, return_inverse=True)
    rows = np.asarray(array[needed], dtype=np.float64)
    if center is not None:
        rows -= check_center(center, array.shape[1])
    unit, _, valid = normalise(rows)
    where = where.reshape(index.shape)
    cos: np.ndarray = np.einsum("ij,ij->i", unit[where[:, 0]], unit[where[:, 1]])
    np.clip(cos, -1.0, 1.0, out=cos)
    cos[~(valid[where[:, 0]] & valid[where[:, 1]])] = np.nan
    return cos


def cosines_to(table: object, ids: object, vector: np.ndarray) -> np.ndarray:
    """float64 cosine of each listed row with one vector; NaN where the row or the vector is invalid."""
    array = as_table(table)
    index = check_ids(np.asarray(ids).reshape(-1), array.shape[0], "row ids", "ids")
    stacked = np.concatenate([np.asarray(vector, dtype=np.float64)[None, :], np.asarray(array[index], np.float64)])
    pairs = np.stack([np.zeros(index.size, dtype=np.int64), np.arange(1, index.size + 1)], axis=1)
    return pair_cosines(stacked, pairs)


@dataclass(frozen=True, eq=False)
class RandomPairs:
    """What an unremarkable cosine in a table looks like."""

    mean: float  # exact mean over every ordered pair of distinct valid rows; NaN when fewer than 2
    sample: np.ndarray  # float64 cosines of n_pairs pairs of distinct valid rows drawn with `seed`
    seed: int


def draw_pairs(n: int, n_pairs: int, seed: int) -> np.ndarray:
    """n_pairs (first, second) indices of distinct items among n, uniform, reproducible from the seed; where n items
    have no more than n_pairs pairs, every pair once instead (the whole population, not a sample of it)."""
    if n * (n - 1) // 2 <= n_pairs:
        return np.stack(np.triu_indices(n, 1), axis=1).astype(np.int64)
    rng = np.random.default_rng(seed)
    first = rng.integers(0, n, size=n_pairs)
    # Draw the second from the n-1 others and skip over the first: distinct, still uniform.
    second = rng.integers(0, n - 1, size=n_pairs)
    second += second >= first
    return np.stack([first, second], axis=1)


def random_pairs(table: object, n_pairs: int = 10000, seed: int = 0, center: np.ndarray | None = None,
                 checksum: TableChecksum | None = None) -> RandomPairs:
    """The exact mean cosine between distinct valid rows and the cosines of n_pairs random such pairs, or of every
    such pair where there are no more (rows less `center` when given), in one pass over the table.

    The mean comes from the sum s of unit rows: (||s||^2 - n) / (n (n - 1)) over the n valid rows.
    The pairs are drawn among the valid rows. They are drawn before the pass as if every row were valid,
    so their rows are kept as the pass reads them; a table with invalid rows draws again once it knows
    which, and reads only the rows drawn. `checksum` is fed every row (as stored, not centred) as the pass reads it.
    """
    array = as_table(table)
    n_rows, dim = array.shape
    if center is not None:
        center = check_center(center, dim)
    hoped = draw_pairs(n_rows, n_pairs, seed) if n_rows >= 2 and n_pairs > 0 else np.empty((0, 2), np.int64)
    needed, where = np.unique(hoped, return_inverse=True)
    kept = np.empty((needed.size, dim), dtype=array.dtype)  # the drawn rows as stored, kept as the pass reads them
    total = np.zeros(dim, dtype=np.float64)
    norms = np.empty(n_rows, dtype=np.float64)
    work = np.empty((min(n_rows, block_rows_for(dim, PASS_BLOCK_BYTES // (8 * max(1, dim)))), dim))
    for start, raw in raw_blocks(array, block_rows=len(work)):
        stop = start + raw.shape[0]
        if checksum is not None:
            checksum.add(raw)
        block = work[:raw.shape[0]]
        block[...] = raw
        if center is not None:
            block -= center
        norms[start:stop] = found = float64_norms(block)
        ok = np.isfinite(found) & (found > 0)
        weights = np.divide(1.0, found, out=np.zeros_like(found), where=ok)
        if not ok.all():
            block[~ok] = 0.0  # its own buffer: a NaN row must not reach the sum
        total += np.einsum("i,ij->j", weights, block)  # the sum of unit rows, without making them
        low, high = np.searchsorted(needed, (start, stop))
        kept[low:high] = raw[needed[low:high] - start]
    valid = np.isfinite(norms) & (norms > 0)
    count = int(valid.sum())
    mean = float((total @ total - count) / (count * (count - 1))) if count >= 2 else float("nan")
    if count < 2 or n_pairs <= 0:
        return RandomPairs(mean, np.empty(0, dtype=np.float64), seed)
    if count == n_rows:
        sample = kept_cosines(kept, norms[needed], where.reshape(hoped.shape), center)
    else:
        sample = pair_cosines(array, np.flatnonzero(valid)[draw_pairs(count, n_pairs, seed)], center=center)
    return RandomPairs(mean, sample, seed)


def kept_cosines(kept: np.ndarray, norms: np.ndarray, pairs: np.ndarray, center: np.ndarray | None,
                 chunk: int = 2048) -> np.ndarray:
    """float64 cosines of pairs of kept rows (less center) whose norms are known, a chunk of pairs at a time."""
    out = np.empty(len(pairs), dtype=np.float64)
    for start in range(0, len(pairs), chunk):
        a, b = pairs[start:start + chunk, 0], pairs[start:start + chunk, 1]
        rows_a, rows_b = kept[a], kept[b]
        if center is not None:
            rows_a, rows_b = rows_a - center, rows_b - center  # in float64
        out[start:start + chunk] = np.einsum("ij,ij->i", rows_a, rows_b, dtype=np.float64) / (norms[a] * norms[b])
    return np.clip(out, -1.0, 1.0, out=out)


def cosine_blocks(table: object, *, rows: np.ndarray | None = None, block_rows: int | None = None,
                  upper: bool = False, every: int = 1) -> Iterator[tuple[int, np.ndarray]]:
    """(start, float32 cosines of rows start..start+B with every row) for blocks of the n rows (every row,
    or the ids in `rows`): the n x n matrix one block at a time, never whole. upper: only the columns from
    start on, (B, n - start), so the blocks tile the upper triangle (and the diagonal) with half the work.
    every: only every so many blocks of rows is computed and given (a sample of the rows, evenly spread).

    Rows and columns of invalid rows are NaN; the diagonal of a valid row is exactly 1.
    The block's buffer is reused: copy what must outlive the next step.
    """
    unit, _, valid = unit_rows(table, rows=rows)
    n, invalid = unit.shape[0], not valid.all()
    step = block_rows if block_rows is not None else max(1, SCORE_BLOCK_BYTES // 2 // (4 * max(1, n)))
    buffer = np.empty(min(step, n) * n, dtype=np.float32)
    for start in range(0, n, step * every):
        stop, first = min(start + step, n), start if upper else 0
        block = buffer[:(stop - start) * (n - first)].reshape(stop - start, n - first)
        np.matmul(unit[start:stop], unit[first:].T, out=block)
        np.clip(block, -1.0, 1.0, out=block)
        local = np.arange(stop - start)
        block[local, start - first + local] = np.where(valid[start:stop], 1.0, np.nan)
        if invalid:
            block[:, ~valid[first:]] = np.nan
            block[~valid[start:stop]] = np.nan
        yield start, block
