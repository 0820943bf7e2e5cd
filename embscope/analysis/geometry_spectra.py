"""The directions geometry needs from a table: the principal directions of its centred rows (their variances,
largest first) and those of its rows as they are (for the partition function). A table with at least as many
rows as columns gets them from its d x d scatter matrix, summed block by block; one with fewer rows (V < d)
from the rows' V x V Gram matrix, which has the same non-zero eigenvalues: a 4 x 8,192 table took 189 s and
3.1 GB through the 8,192 x 8,192 matrices, and takes milliseconds this way. Such a table is read whole (V x d
is smaller than d x d)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..compute.moments import LEFT_OUT_LISTED, Progress, StoredRows, TableMoments, Work, table_moments

ROUNDING = np.finfo(np.float64).eps


@dataclass(frozen=True, eq=False)
class Spectra:
    moments: TableMoments  # the Gram path leaves `scatter` empty (0 x 0): nothing else reads it
    squares: np.ndarray  # float64 (d,): the scatter's eigenvalues, largest first, rounding set to 0
    top: np.ndarray  # float64 (d, k): the first `removed` principal directions (k < removed when the rank is)
    uncentred: np.ndarray | None  # float64 (d, r): the directions of W^T W the partition function sums along
    null_log_z: float | None  # log Z(c) = log(rows) for a direction orthogonal to every row, when one is left out


def spectra(rows: StoredRows, work: Work, removed: int, progress: Progress | None = None) -> Spectra:
    """The dense path for a table of at least as many rows as columns, the Gram path for one of fewer."""
    if rows.rows < rows.dim:
        return gram_spectra(rows, removed)
    moments = table_moments(rows, work, progress)
    squares, directions = variances(moments.scatter, work)
    top = directions[:, :removed].copy()
    del directions  # d x d: only the top few are needed from here on
    uncentred = work.eigh(moments.uncentred())[1] if moments.used else None
    return Spectra(moments, squares, top, uncentred, None)


def variances(scatter: np.ndarray, work: Work) -> tuple[np.ndarray, np.ndarray]:
    """The eigenvalues of the scatter matrix (the squared singular values of the centred table), largest first,
    rounding below zero and below d * eps * the largest set to 0, with their eigenvectors (columns)."""
    values, vectors = work.eigh(scatter)
    values, vectors = values[::-1].copy(), vectors[:, ::-1]
    floor = len(values) * ROUNDING * max(float(values[0]), 0.0) if len(values) else 0.0
    values[values <= floor] = 0.0
    return values, vectors


def principal(rows: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues of rows^T rows (dim of them, largest first, the same rounding floor as `variances`) and the
    eigenvectors of the non-zero ones, from the V x V matrix rows rows^T: v = rows^T u / sqrt(lambda)."""
    squares = np.zeros(dim)
    if not len(rows):
        return squares, np.zeros((dim, 0))
    values, vectors = np.linalg.eigh(rows @ rows.T)
    values, vectors = values[::-1], vectors[:, ::-1]
    floor = dim * ROUNDING * max(float(values[0]), 0.0)
    kept = values > floor
    squares[:int(kept.sum())] = values[kept]
    directions = rows.T @ (vectors[:, kept] / np.sqrt(values[kept]))
    return squares, directions


def gram_spectra(rows: StoredRows, removed: int) -> Spectra:
    """Every figure's inputs for a table of fewer rows than columns, from its V x V Gram matrices."""
    dim = rows.dim
    parts = [np.array(raw, dtype=np.float64) for _, raw in rows.blocks(max(rows.rows, 1))]
    table = np.concatenate(parts) if parts else np.zeros((0, dim))
    with np.errstate(over="ignore", invalid="ignore"):  # an overflowing row is counted (not finite), not warned of
        norms = np.sqrt(np.einsum("ij,ij->i", table, table))
    finite = np.isfinite(norms)
    valid = finite & (norms > 0)
    bad = np.flatnonzero(~valid)
    used = table[valid]
    unit = used / norms[valid][:, None]
    mean = used.mean(0) if len(used) else np.zeros(dim)
    moments = TableMoments(rows.rows, valid, len(bad) - int((~finite).sum()), int((~finite).sum()),
                           tuple(bad[:LEFT_OUT_LISTED].tolist()), mean, unit.sum(0), (unit * unit).sum(0),
                           np.zeros((0, 0)))
    squares, directions = principal(used - mean, dim)
    uncentred = principal(used, dim)[1] if len(used) else None
    null = math.log(len(used)) if uncentred is not None and uncentred.shape[1] < dim else None
    return Spectra(moments, squares, directions[:, :removed], uncentred, null)
