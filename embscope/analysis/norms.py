"""Row norms of an embedding table: summary, anomalies (with the rule that flagged each), near-duplicate
rows, and under-trained token candidates. Norms are read block by block, so a memory-mapped table may
exceed memory; the duplicate search holds unit rows and is skipped above DUPLICATE_MAX_BYTES."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..memory import release
from ..naming import token_name

NORM_BLOCK_ROWS = 65536  # rows gathered at a time for the duplicate search
NORM_BLOCK_BYTES = 32 * 1024 * 1024  # table bytes read at a time for the norms
MAD_SCALE = 1.4826  # makes the MAD estimate the standard deviation for normally distributed norms
# Gaussian-noise tables of 64..50,000 rows (d 4..768) reach a largest robust z of about 5.0, so 6 flags
# none of them, while a row of 2.46 in a table whose norms are 0.43 +- 0.03 scores about 68.
DEFAULT_THRESHOLD = 6.0
EQUAL_NORMS_TOLERANCE = 1e-6  # relative difference from the median flagged when MAD is 0
DUPLICATE_COSINE = 0.9999
DUPLICATE_BLOCK_ROWS = 1024
DUPLICATE_SUBSPACE = 16  # directions rows are first compared in, before the full check
DUPLICATE_MAX_WINDOW = 32768  # rows compared with each block at most: keeps the search bounded
DUPLICATE_MAX_CHECKS = 20_000_000  # candidate pairs checked in full at most
DUPLICATE_MAX_BYTES = 1 << 30  # unit rows held in memory for the search at most
DUPLICATE_MAX_LISTED = 1000
UNDERTRAINED_PERCENTILE = 1.0


@dataclass(frozen=True)
class Anomaly:
    index: int
    norm: float  # NaN for a row with NaN values, Inf for a row with Inf values
    ratio_to_mean: float
    reason: str


@dataclass(frozen=True)
class Duplicate:
    a: int
    b: int
    cosine: float
    identical: bool


@dataclass(frozen=True)
class DuplicateSearch:
    pairs: tuple[Duplicate, ...]  # the first DUPLICATE_MAX_LISTED, by row index
    total: int  # pairs found, listed or not
    complete: bool  # False when a limit cut the search short; `note` says which
    note: str | None = None


@dataclass(frozen=True)
class Candidate:
    """A row that may never have been trained: not an anomaly, a hint."""

    table: str  # token or output
    index: int
    norm: float
    reason: str


@dataclass(frozen=True, eq=False)
class NormSummary:
    norms: np.ndarray  # float64 (rows,)
    count: int  # rows with a finite norm: the ones the statistics describe
    mean: float
    median: float
    min: float
    max: float
    mad: float  # median absolute deviation from the median
    threshold: float
    anomalies: tuple[Anomaly, ...]

    @property
    def rows(self) -> int:
        return len(self.norms)


def row_norms(array: np.ndarray, block_rows: int | None = None) -> np.ndarray:
    """L2 norm of every row in float64; NaN for a row with a NaN, Inf for a row with an Inf.
    Blocks are bounded in bytes, squared and summed in float64 without a float64 copy, and a memory
    map's pages are let go after each block: a mapped table larger than memory keeps one block resident."""
    if block_rows is None:
        block_rows = max(1, NORM_BLOCK_BYTES // max(1, array.shape[1] * array.itemsize))
    norms = np.empty(array.shape[0], dtype=np.float64)
    for start in range(0, array.shape[0], block_rows):
        block = array[start:start + block_rows]
        with np.errstate(invalid="ignore", over="ignore"):
            norms[start:start + block_rows] = np.sqrt(np.einsum("ij,ij->i", block, block, dtype=np.float64))
        release(block)
    return norms


def summarize(norms: np.ndarray, threshold: float = DEFAULT_THRESHOLD) -> NormSummary:
    """Statistics over the finite norms, and the rows flagged as anomalies."""
    finite = norms[np.isfinite(norms)]
    if len(finite):
        mean, median = float(finite.mean()), float(np.median(finite))
        low, high = float(finite.min()), float(finite.max())
        mad = float(np.median(np.abs(finite - median)))
    else:
        mean = median = low = high = mad = math.nan
    anomalies = flag_anomalies(norms, mean, median, mad, threshold)
    return NormSummary(norms, len(finite), mean, median, low, high, mad, threshold, anomalies)


def flag_anomalies(norms: np.ndarray, mean: float, median: float, mad: float, threshold: float) -> tuple[Anomaly, ...]:
    """Zero, NaN and Inf rows always; otherwise |norm - median| / (1.4826 MAD) > threshold, or, when MAD is 0,
    any norm that differs from the median by more than a relative 1e-6."""
    flagged = []
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = norms / mean
        if mad > 0:
            scores = np.abs(norms - median) / (MAD_SCALE * mad)
            robust = scores > threshold
        else:
            scores = None
            robust = np.abs(norms - median) > EQUAL_NORMS_TOLERANCE * max(abs(median), np.finfo(np.float64).tiny)
    always = ~np.isfinite(norms) | (norms == 0)
    for index in np.flatnonzero(always | (robust & np.isfinite(norms))):
        norm = float(norms[index])
        if math.isnan(norm):
            reason = "the row holds NaN values: its norm is undefined"
        elif math.isinf(norm):
            reason = "the row holds Inf values"
        elif norm == 0:
            reason = "zero row: every value is 0"
        elif scores is not None:
            reason = (f"robust z {scores[index]:.4g} > {threshold:g}: |norm - median {median:.4g}| / "
                      f"(1.4826 x MAD {mad:.4g})")
        else:
            reason = (f"norm differs from the median {median:.6g} that the other rows share (MAD is 0, so any "
                      f"relative difference above {EQUAL_NORMS_TOLERANCE:g} is flagged)")
        flagged.append(Anomaly(int(index), norm, float(ratios[index]), reason))
    return tuple(flagged)


def undertrained(norms: np.ndarray, table: str, real_rows: int | None = None,
                 percentile: float = UNDERTRAINED_PERCENTILE) -> tuple[Candidate, ...]:
    """Rows of real tokens whose norm is in the lowest `percentile` (zero and non-finite rows, anomalies
    already, left out), then the rows past the tokenizer's ids (`real_rows`; None when there is no
    tokenizer), which no text can select: padding."""
    rows = len(norms)
    real = rows if real_rows is None else min(real_rows, rows)
    found: list[Candidate] = []
    real_norms = norms[:real]
    ordinary = np.isfinite(real_norms) & (real_norms > 0)  # zero and non-finite rows are anomalies already
    if ordinary.any():
        cutoff = float(np.percentile(real_norms[ordinary], percentile))
        low = np.flatnonzero(ordinary & (np.where(ordinary, real_norms, np.inf) <= cutoff))
        for index in low[np.argsort(real_norms[low], kind="stable")]:
            found.append(Candidate(table, int(index), float(norms[index]),
                                   f"lowest {percentile:g}% of real-token norms (<= {cutoff:.4g})"))
    for index in range(real, rows):
        found.append(Candidate(table, index, float(norms[index]),
                               f"past the tokenizer's {real} ids: a padding row no text selects"))
    return tuple(found)


def unit_rows(array: np.ndarray, rows: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """float32 copies of the given rows scaled to length 1 (norms must be finite and non-zero)."""
    unit = np.empty((len(rows), array.shape[1]), dtype=np.float32)
    for start in range(0, len(rows), NORM_BLOCK_ROWS):
        chosen = rows[start:start + NORM_BLOCK_ROWS]
        unit[start:start + len(chosen)] = np.asarray(array[chosen], dtype=np.float64) / norms[chosen, None]
    return unit


def spread_subspace(unit: np.ndarray, width: int = DUPLICATE_SUBSPACE, iterations: int = 4, seed: int = 0) -> np.ndarray:
    """Orthonormal (d, width) directions along which the rows spread most (block power iteration on their
    covariance), the widest first: rows far apart in the table are far apart here too."""
    rng = np.random.default_rng(seed)
    width = min(width, unit.shape[1])
    mean = unit.mean(axis=0, dtype=np.float64)
    basis, _ = np.linalg.qr(rng.standard_normal((unit.shape[1], width)))
    for _ in range(iterations):
        spread = (unit.T @ (unit @ basis.astype(np.float32))).astype(np.float64) / len(unit)
        basis, _ = np.linalg.qr(spread - np.outer(mean, mean @ basis))
    projected = unit @ basis.astype(np.float32)
    return basis[:, np.argsort(-projected.var(axis=0), kind="stable")]


def find_duplicates(array: np.ndarray, norms: np.ndarray, cosine: float = DUPLICATE_COSINE,
                    max_window: int = DUPLICATE_MAX_WINDOW, max_checks: int = DUPLICATE_MAX_CHECKS,
                    max_bytes: int = DUPLICATE_MAX_BYTES) -> DuplicateSearch:
    """Pairs of distinct rows with cosine above `cosine`, without comparing every row with every other.

    Two unit rows with that cosine lie within r = sqrt(2 (1 - cosine)) of each other, and so do their
    projections on any orthonormal directions. Rows are projected on a few directions of wide spread and
    sorted along the widest; each block of rows is matched only against the rows that follow it within r
    along it, first in the projection, and the pairs that stay within r there are checked in full.
    Zero and non-finite rows are anomalies already and are left out."""
    rows = np.flatnonzero(np.isfinite(norms) & (norms > 0))
    if len(rows) < 2:
        return DuplicateSearch((), 0, True)
    if len(rows) * array.shape[1] * 4 > max_bytes:
        return DuplicateSearch((), 0, False, f"duplicate search skipped: the unit rows would take more than "
                                             f"{max_bytes >> 20} MiB")
    unit = unit_rows(array, rows, norms)
    projected = unit @ spread_subspace(unit).astype(np.float32)
    order = np.argsort(projected[:, 0], kind="stable")
    unit, projected, rows = unit[order], projected[order], rows[order]
    reach = math.sqrt(2 * (1 - cosine)) + 1e-5  # slack for float32 rounding
    lengths = np.einsum("ij,ij->i", projected, projected)
    found: list[tuple[int, int]] = []
    total, checks, cut = 0, 0, None
    later = ~np.tri(DUPLICATE_BLOCK_ROWS, dtype=bool)  # column after row
    for start in range(0, len(rows), DUPLICATE_BLOCK_ROWS):
        stop = min(start + DUPLICATE_BLOCK_ROWS, len(rows))
        end = int(np.searchsorted(projected[:, 0], projected[stop - 1, 0] + reach, side="right"))
        if end > stop + max_window:
            end, cut = stop + max_window, f"each block of {DUPLICATE_BLOCK_ROWS} rows was compared with at most {max_window} following rows"
        # squared distance in the projection, in place: |x|^2 + |y|^2 - 2 x.y
        near = projected[start:stop] @ projected[start:end].T
        near *= -2
        near += lengths[start:stop, None]
        near += lengths[None, start:end]
        near = near <= reach * reach + 1e-6
        near[:, :stop - start] &= later[:stop - start, :stop - start]  # within the block: each pair once
        if not near.any():
            continue
        a, b = np.nonzero(near)
        if checks + len(a) > max_checks:
            keep = max(max_checks - checks, 0)
            a, b, cut = a[:keep], b[:keep], f"at most {max_checks:,} candidate pairs were checked"
        checks += len(a)
        a, b = a + start, b + start
        similar = np.einsum("ij,ij->i", unit[a], unit[b]) > cosine
        total += int(similar.sum())
        found += [(int(rows[i]), int(rows[j])) for i, j in zip(a[similar], b[similar])][:DUPLICATE_MAX_LISTED - len(found)]
        if checks >= max_checks:
            break
    pairs = tuple(sorted((checked(array, norms, a, b) for a, b in found), key=lambda d: (d.a, d.b)))
    note = None if cut is None else f"duplicate search cut short among very crowded rows ({cut}): pairs may be missing"
    return DuplicateSearch(pairs, total, cut is None, note)


def checked(array: np.ndarray, norms: np.ndarray, a: int, b: int) -> Duplicate:
    a, b = min(a, b), max(a, b)
    row_a, row_b = np.asarray(array[a], dtype=np.float64), np.asarray(array[b], dtype=np.float64)
    cos = float(np.clip(row_a @ row_b / (norms[a] * norms[b]), -1.0, 1.0))
    return Duplicate(a, b, cos, bool(np.array_equal(row_a, row_b)))


@dataclass(frozen=True, eq=False)
class NormsReport:
    """What `embscope norms` reports about one table: the statistics and flagged rows, near-duplicate rows,
    and for token tables the under-trained candidates (an untied head's included)."""

    role: str  # position, token or output
    name: str
    dim: int
    first_row: int  # rows before position 0
    summary: NormSummary
    duplicates: DuplicateSearch
    candidates: tuple[Candidate, ...]
    notes: tuple[str, ...]
    tokenizer: Any = field(default=None, repr=False)  # names token rows; None for positions, or when there is none

    def label(self, index: int) -> str:
        """How a row is called: `position 5`, a reserved row before position 0, or its token (`#id` when unnamed)."""
        if self.role == "position":
            position = index - self.first_row
            return f"position {position}" if position >= 0 else f"reserved row {index}"
        return token_name(self.tokenizer, index)


def norms_report(emb: Any, table: str | None = None, threshold: float = DEFAULT_THRESHOLD) -> NormsReport:
    """Norms of one table of `emb`: `table` position, token or output; None is the position table when there is one."""
    role = table if table is not None else ("position" if emb.position is not None else "token")
    chosen = emb.table(role)
    notes = list(chosen.notes)
    norms = row_norms(chosen.array)
    summary = summarize(norms, threshold)
    duplicates = find_duplicates(chosen.array, norms)
    if duplicates.note:
        notes.append(duplicates.note)
    tokenizer = None
    candidates: tuple[Candidate, ...] = ()
    if role != "position":
        tokenizer, why_none = emb.tokenizer_for_names()
        if tokenizer is None:
            notes.append(f"{why_none}; padding rows past the vocabulary cannot be told apart")
        real_rows = tokenizer.vocab_size if tokenizer is not None else None
        candidates = undertrained(norms, role, real_rows)
        if role == "token" and emb.output is not None:  # an untied head has rows of its own to check
            candidates += undertrained(row_norms(emb.output.array), "output", real_rows)
    return NormsReport(role, chosen.name, chosen.dim, chosen.first_row, summary, duplicates, candidates,
                       tuple(notes), tokenizer)
