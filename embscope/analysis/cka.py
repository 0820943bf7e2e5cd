"""Linear CKA between two tables' paired rows (Kornblith et al. 2019): how alike two representations of the
same items are, whatever rotation or scale separates them. From d x d products of the column-centred tables,
summed over blocks of pairs (compute.moments), never from n x n Gram matrices:
CKA = ||Y^T X||_F^2 / (||X^T X||_F ||Y^T Y||_F)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..compute.moments import MAX_SIDE, Work, block_rows, cross_moments, work_for
from ..core.memory import release
from .stages import Progress

if TYPE_CHECKING:
    from .pairing import Pairing


@dataclass(frozen=True)
class Cka:
    value: float  # NaN when undefined (fewer than 2 pairs, or a table constant over them)
    rows: int  # pairs used: those finite in both tables
    skipped: str | None = None  # why it was not computed at all (tables too wide), when it was not


def paired_blocks(a: np.ndarray, b: np.ndarray, pairing: Pairing,
                  progress: Progress | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The paired rows of A and B in blocks big enough for BLAS (compare's own blocks suit per-row work)."""
    step = block_rows(max(a.shape[1], b.shape[1]))
    for start in range(0, pairing.count, step):
        stop = min(start + step, pairing.count)
        if pairing.ids_a is None or pairing.ids_b is None:
            block_a = a[pairing.start_a + start:pairing.start_a + stop]
            block_b = b[pairing.start_b + start:pairing.start_b + stop]
        else:
            block_a, block_b = a[pairing.ids_a[start:stop]], b[pairing.ids_b[start:stop]]
        yield block_a, block_b
        release(block_a)
        release(block_b)
        if progress is not None:
            progress(stop, pairing.count)


def cka_of(xx: np.ndarray, yy: np.ndarray, yx: np.ndarray) -> float:
    """||Y^T X||_F^2 / (||X^T X||_F ||Y^T Y||_F) from the centred products; NaN when a denominator is 0."""
    scale = float(np.linalg.norm(xx) * np.linalg.norm(yy))
    return float(np.linalg.norm(yx) ** 2 / scale) if scale > 0 else math.nan


def gram_cka(blocks: Iterator[tuple[np.ndarray, np.ndarray]]) -> Cka:
    """CKA from the n x n Gram matrices of the column-centred pairs, for fewer pairs than columns:
    ||Y^T X||_F^2 = <X X^T, Y Y^T>_F and ||X^T X||_F = ||X X^T||_F, so the value is the d x d form's (a 4 x 8,192
    pair of tables took 12 s and 4 GB through the d x d products)."""
    pairs = [(np.array(x, dtype=np.float64), np.array(y, dtype=np.float64)) for x, y in blocks]
    if not pairs:
        return Cka(math.nan, 0)
    x, y = np.concatenate([p[0] for p in pairs]), np.concatenate([p[1] for p in pairs])
    finite = np.isfinite(x).all(axis=1) & np.isfinite(y).all(axis=1)
    x, y = x[finite], y[finite]
    if len(x) < 2:
        return Cka(math.nan, len(x))
    x -= x.mean(0)
    y -= y.mean(0)
    kx, ky = x @ x.T, y @ y.T
    scale = float(np.linalg.norm(kx) * np.linalg.norm(ky))
    return Cka(float((kx * ky).sum() / scale) if scale > 0 else math.nan, len(x))


def linear_cka(a: np.ndarray, b: np.ndarray, pairing: Pairing, device: str = "auto",
               progress: Progress | None = None, _work: Work | None = None) -> Cka:
    """Linear CKA over the pairs of rows `pairing` names (rows with NaN or Inf in either table left out)."""
    side = a.shape[1] + b.shape[1]  # [X Y]^T [X Y] is one square of this side
    if side > 2 * MAX_SIDE:
        return Cka(math.nan, 0, f"not computed: the tables are {a.shape[1]:,} and {b.shape[1]:,} wide, and its d x d "
                                f"products would take {side * side * 8 / (1 << 30):.1f} GiB (at most {MAX_SIDE:,} "
                                "columns each)")
    if pairing.count < max(a.shape[1], b.shape[1]):  # few pairs: the n x n form, never a d x d product
        return gram_cka(paired_blocks(a, b, pairing, progress))
    work = _work if _work is not None else work_for(device)[0]
    found = cross_moments(paired_blocks(a, b, pairing, progress), a.shape[1], b.shape[1], work)
    return Cka(cka_of(found.xx, found.yy, found.yx) if found.rows >= 2 else math.nan, found.rows)
