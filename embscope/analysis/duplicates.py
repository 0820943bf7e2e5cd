"""Duplicate and near-duplicate rows of a table (cosine above DUPLICATE_COSINE), in time linear in the table
for tables whose rows do not crowd together, and never all pairs.

1. Exact duplicates by hashing: each row's bits go through a 64-bit multiply-add hash, equal hashes are
   checked to be equal rows, and each group of identical rows is searched once, by one representative.
2. Near-duplicates on a grid: two unit rows of cosine c lie within r = sqrt(2 (1 - c)) of each other, and so do
   their projections on any orthonormal directions. The representatives are projected on the directions of
   widest spread, and each of the widest m is cut into cells of side GRID_SIDE * r. A row near a cell's edge
   (within r of it) also looks into the neighbouring cell on that side, so every row within r of it lies in
   a cell it looks into; a row in a cell's middle looks into its own only. Cells are found by a hash of their
   coordinates (a counting sort into buckets), the pairs they give are checked in the projection, and those
   within r there are checked in full.
The work is about N (1 + 2 / GRID_SIDE)^m lookups plus the rows that share a cell; rows crowded into a few
cells (near-copies by the thousand) are bounded by max_checks, and the result then says it was cut short.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

DUPLICATE_COSINE = 0.9999
DUPLICATE_SUBSPACE = 16  # directions rows are projected on (the widest first), before the full check
DUPLICATE_MAX_CHECKS = 20_000_000  # candidate pairs checked in full at most
DUPLICATE_MAX_BYTES = 1 << 30  # unit rows held in memory for the search at most
DUPLICATE_MAX_LISTED = 1000
GRID_SIDE = 12  # cells are this many times r wide: a row looks past its cell in a dimension 2 / GRID_SIDE of the time
GRID_MOST_DIMENSIONS = 12  # directions cut into cells at most (each adds up to a doubling of the lookups)
WORK_BYTES = 4 << 20  # rows hashed, or candidate pairs' rows gathered, at a time: a few MB of temporaries
LOOKUPS = 1 << 15  # cells looked up at a time
GRID_ROWS = 1 << 12  # rows whose cells are worked out, and looked into, at a time
GRID_MOST_CROWDED = 64  # rows sharing a cell, per row, past which windows along one direction are cheaper
WINDOW_BLOCK = 512  # rows matched at a time with the rows that follow them along the widest direction
DUPLICATE_MAX_WINDOW = 32768  # rows compared with each block at most: keeps the windowed search bounded
SPREAD_SAMPLE = 1 << 12  # rows the directions of widest spread are estimated from
REACH_SLACK = 1e-5  # float32 rounding of unit rows and their projections


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


def find_duplicates(array: np.ndarray, norms: np.ndarray, cosine: float = DUPLICATE_COSINE,
                    max_window: int = DUPLICATE_MAX_WINDOW, max_checks: int = DUPLICATE_MAX_CHECKS,
                    max_bytes: int = DUPLICATE_MAX_BYTES) -> DuplicateSearch:
    """Pairs of distinct rows with cosine above `cosine` (module text: hashing, then a grid of projections).
    Zero and non-finite rows are anomalies already and are left out."""
    if array.ndim == 2 and array.shape[1] < 2:
        return DuplicateSearch((), 0, False, "no duplicate search in a table of one column: any two of its rows of "
                                             "one sign have cosine 1")
    rows = np.flatnonzero(np.isfinite(norms) & (norms > 0))
    if len(rows) < 2:
        return DuplicateSearch((), 0, True)
    if len(rows) * array.shape[1] * 4 > max_bytes:
        return DuplicateSearch((), 0, False, f"duplicate search skipped: the unit rows would take more than "
                                             f"{max_bytes >> 20} MiB")
    groups = identical_groups(array, rows)
    unit = scaled_rows(array, groups.representatives, norms)
    near_a, near_b, cut = near_pairs(unit, cosine, max_checks, max_window)
    sizes = groups.sizes
    total = int((sizes * (sizes - 1) // 2).sum() + (sizes[near_a] * sizes[near_b]).sum())
    listed = sorted(listed_pairs(groups, near_a, near_b))[:DUPLICATE_MAX_LISTED]
    pairs = tuple(checked(array, norms, a, b) for a, b in listed)
    note = None if cut is None else f"duplicate search cut short among very crowded rows ({cut}): pairs may be missing"
    return DuplicateSearch(pairs, total, cut is None, note)


def scaled_rows(array: np.ndarray, rows: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """float32 unit rows of `rows`, divided by the norms already worked out (float64, so no overflow)."""
    unit = np.empty((len(rows), array.shape[1]), dtype=np.float32)
    for start, block in row_blocks(array, rows):
        chosen = norms[rows[start:start + len(block)], None]
        np.divide(block, chosen, out=unit[start:start + len(block)], casting="same_kind")
    return unit


@dataclass(frozen=True, eq=False)
class Groups:
    """Rows grouped by equal values: group g holds members[starts[g]:starts[g] + sizes[g]], ascending, the first
    of them its representative."""

    members: np.ndarray
    starts: np.ndarray
    sizes: np.ndarray

    @property
    def representatives(self) -> np.ndarray:
        firsts: np.ndarray = self.members[self.starts]
        return firsts

    def rows(self, group: int) -> np.ndarray:
        return self.members[self.starts[group]:self.starts[group] + self.sizes[group]]


def row_hashes(array: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """A float key for each row: its values' product with a random vector (one BLAS pass). Equal rows get equal
    keys (-0.0 and 0.0 alike) wherever the BLAS rounds them alike; unequal rows rarely collide, and
    identical_groups checks every group anyway. Equal rows that the BLAS rounded apart stay apart here and are
    paired by the grid instead: the answer is the same."""
    direction = np.random.default_rng(0).standard_normal(array.shape[1], dtype=np.float32)
    hashes = np.empty(len(rows), dtype=np.float32)
    for start, block in row_blocks(array, rows):
        np.matmul(block, direction, out=hashes[start:start + len(block)])
    return hashes


def row_blocks(array: np.ndarray, rows: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(position in rows, float32 block of those rows), a few MB at a time: slices where the rows run on without
    a gap (every row valid, the usual case), else gathered."""
    step = max(1, WORK_BYTES // (4 * array.shape[1]))
    running = len(rows) > 0 and int(rows[-1]) - int(rows[0]) + 1 == len(rows)
    for start in range(0, len(rows), step):
        if running:
            first = int(rows[0]) + start
            block = array[first:first + min(step, len(rows) - start)]
        else:
            block = array[rows[start:start + step]]
        yield start, np.asarray(block, dtype=np.float32)


def identical_groups(array: np.ndarray, rows: np.ndarray) -> Groups:
    """The rows grouped by equal values: by hash, and each row of a shared hash checked against its group's
    first (a row that differs, a collision, keeps a group of its own: the grid still pairs it if it is near).
    Members of a group stay in ascending row order (a stable sort of rows given ascending)."""
    hashes = row_hashes(array, rows)
    order = np.argsort(hashes, kind="stable")
    members, sorted_hashes = rows[order], hashes[order]
    new_key = np.r_[True, sorted_hashes[1:] != sorted_hashes[:-1]]
    starts = np.flatnonzero(new_key)
    sizes = np.diff(np.r_[starts, len(members)])
    shared = np.flatnonzero(sizes > 1)
    if shared.size:
        others = np.flatnonzero(np.repeat(sizes > 1, sizes) & ~new_key)
        firsts = members[np.repeat(starts, sizes)[others]]
        step = max(1, WORK_BYTES // (8 * array.shape[1]))
        equal = np.concatenate([np.all(array[firsts[i:i + step]] == array[members[others[i:i + step]]], axis=1)
                                for i in range(0, len(others), step)])
        if not equal.all():  # a collision: split every differing row off into a group of its own
            new_key[others[~equal]] = True
            starts = np.flatnonzero(new_key)
            sizes = np.diff(np.r_[starts, len(members)])
    return Groups(members, starts, sizes)


def spread_subspace(unit: np.ndarray, width: int = DUPLICATE_SUBSPACE, iterations: int = 4,
                    seed: int = 0) -> np.ndarray:
    """Orthonormal (d, width) directions along which the rows spread most (block power iteration on the
    covariance of a sample of at most SPREAD_SAMPLE rows: the directions need only be about right, as any
    orthonormal ones keep the search exact)."""
    rng = np.random.default_rng(seed)
    width = min(width, unit.shape[1])
    sample = min(SPREAD_SAMPLE, max(width, WORK_BYTES // 2 // (4 * unit.shape[1])))  # within a few MB
    if len(unit) > sample:
        unit = unit[np.sort(rng.choice(len(unit), sample, replace=False))]
    mean = unit.mean(axis=0, dtype=np.float64)
    basis, _ = np.linalg.qr(rng.standard_normal((unit.shape[1], width)))
    for _ in range(iterations):
        spread = (unit.T @ (unit @ basis.astype(np.float32))).astype(np.float64) / len(unit)
        basis, _ = np.linalg.qr(spread - np.outer(mean, mean @ basis))
    return basis


def near_pairs(unit: np.ndarray, cosine: float, max_checks: int,
               max_window: int = DUPLICATE_MAX_WINDOW) -> tuple[np.ndarray, np.ndarray, str | None]:
    """(a, b, cut): the pairs of rows of `unit` (a < b) with cosine above `cosine`, found on the grid;
    cut says which limit stopped the search, or None."""
    reach = math.sqrt(2 * (1 - cosine)) + REACH_SLACK
    projected = unit @ spread_subspace(unit).astype(np.float32)
    projected = projected[:, np.argsort(-projected.var(axis=0), kind="stable")]  # the widest first
    found_a, found_b = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
    reach2 = np.float32(reach * reach)
    step = max(1, WORK_BYTES // (8 * unit.shape[1]))
    checks, cut = 0, None
    cuts: list[str] = []
    for a, b in candidates(projected, reach, max_window, cuts):
        if checks + len(a) > max_checks:
            a, b = a[:max_checks - checks], b[:max_checks - checks]
            cut = f"at most {max_checks:,} candidate pairs were checked"
        checks += len(a)
        for at in range(0, len(a), step):  # the gathered rows stay within WORK_BYTES
            i, j = a[at:at + step], b[at:at + step]
            gap = projected[i] - projected[j]
            close = np.einsum("ij,ij->i", gap, gap) <= reach2
            i, j = i[close], j[close]
            similar = np.einsum("ij,ij->i", unit[i], unit[j]) > cosine
            found_a.append(i[similar])
            found_b.append(j[similar])
        if cut:
            break
    return np.concatenate(found_a), np.concatenate(found_b), cut or (cuts[0] if cuts else None)


def candidates(projected: np.ndarray, reach: float, max_window: int,
               cuts: list[str]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Candidate pairs from the grid, or, where the grid's cells would be crowded (rows of many dimensions
    spread little along each direction, so a cell some r wide holds much of the table), from windows along the
    widest direction. A limit that cuts the search short is said in `cuts`."""
    grid = Grid(projected, reach)
    if grid.crowding() <= GRID_MOST_CROWDED * len(projected):
        return grid.candidates()
    return window_candidates(projected, reach, max_window, cuts)


def grid_dimensions(projected: np.ndarray, side: float) -> int:
    """How many of the widest directions to cut into cells: those at least two cells across, at most
    GRID_MOST_DIMENSIONS, and no more than the cell coordinates' hash can mix without overflow."""
    extents = np.floor((projected.max(axis=0) - projected.min(axis=0)) / side) + 1
    count, product = 0, 1.0
    for extent in extents[:GRID_MOST_DIMENSIONS]:
        if extent < 2 or product * extent > 2.0 ** 62:
            break
        count, product = count + 1, product * extent
    return max(1, count)


class Grid:
    """The rows' cells: the widest m directions cut into cells of side GRID_SIDE * reach, each cell keyed by
    one integer, and the cell table that finds a key's rows."""

    def __init__(self, projected: np.ndarray, reach: float):
        self.projected = projected
        self.side = GRID_SIDE * reach
        self.m = m = grid_dimensions(projected, self.side)
        self.origin = projected[:, :m].min(axis=0)
        extents = np.floor((projected[:, :m].max(axis=0) - self.origin) / self.side).astype(np.int64) + 1
        self.strides = np.cumprod(np.r_[1, extents[:-1] + 2]).astype(np.int64)  # +2: a neighbour past either edge
        self.keys = np.concatenate([self.cells(start)[0] for start in range(0, len(projected), GRID_ROWS)])
        self.table = CellTable(self.keys)

    def cells(self, start: int) -> tuple[np.ndarray, np.ndarray]:
        """(key, step) of rows start.. (GRID_ROWS of them): step is the key's change across each edge the row
        lies within reach of (0 in the cell's middle)."""
        scaled = (self.projected[start:start + GRID_ROWS, :self.m] - self.origin) / self.side
        cells = np.floor(scaled).astype(np.int64)
        keys = ((cells + 1) * self.strides).sum(axis=1)  # numpy's integer matmul has no fast kernel
        edge = scaled - cells  # where in its cell each row lies, 0..1
        return keys, np.where(edge < 1 / GRID_SIDE, -self.strides, np.where(edge > 1 - 1 / GRID_SIDE, self.strides, 0))

    def crowding(self) -> int:
        """Pairs of rows that share a cell (each counted from both ends): what the lookups cost beyond the rows."""
        return int(self.table.counts[self.table.bucket(self.keys)].sum()) - len(self.keys)

    def candidates(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Every pair of rows (a < b) that share a cell one of them looks into, a bounded number at a time."""
        for start in range(0, len(self.projected), GRID_ROWS):
            keys, step = self.cells(start)
            asking, asked = neighbour_cells(keys, step)
            for a, b in self.table.pairs(asking + start, asked):
                later = b > a
                yield a[later], b[later]


def window_candidates(projected: np.ndarray, reach: float, max_window: int,
                      cuts: list[str]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Pairs within reach in the projection, found by sorting along the widest direction and matching each block
    of WINDOW_BLOCK rows with the rows that follow it within reach along it (at most max_window of them)."""
    order = np.argsort(projected[:, 0], kind="stable")
    ordered = projected[order]
    lengths = np.einsum("ij,ij->i", ordered, ordered)
    later = ~np.tri(WINDOW_BLOCK, dtype=bool)  # column after row
    for start in range(0, len(ordered), WINDOW_BLOCK):
        stop = min(start + WINDOW_BLOCK, len(ordered))
        end = int(np.searchsorted(ordered[:, 0], ordered[stop - 1, 0] + reach, side="right"))
        if end > stop + max_window:
            end = stop + max_window
            if not cuts:
                cuts.append(f"each block of {WINDOW_BLOCK} rows was compared with at most {max_window} following rows")
        # squared distance in the projection, in place: |x|^2 + |y|^2 - 2 x.y
        near = ordered[start:stop] @ ordered[start:end].T
        near *= -2
        near += lengths[start:stop, None]
        near += lengths[None, start:end]
        close = near <= reach * reach + 1e-6
        close[:, :stop - start] &= later[:stop - start, :stop - start]  # within the block: each pair once
        a, b = np.nonzero(close)
        yield order[a + start], order[b + start]


def neighbour_cells(keys: np.ndarray, step: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, cell key) for each cell a row looks into: its own, and for each set of the dimensions in which it
    lies near an edge, the cell across those edges (step: (rows, m) the key's change across the near edge, 0
    where it lies in the middle). Rows near q edges look into 2^q cells: they go q by q, one product each."""
    near = step != 0
    count = near.sum(axis=1)
    packed = np.zeros_like(step)  # each row's steps, its near dimensions first
    packed[np.nonzero(near)[0], (np.cumsum(near, axis=1) - 1)[near]] = step[near]
    step = packed
    asking, asked = [], []
    for q in np.unique(count).tolist():
        rows = np.flatnonzero(count == q)
        cells = np.broadcast_to(keys[rows, None], (rows.size, 1 << q)).copy()
        for edge in range(q):  # cell s crosses the edges of the bits of s
            crosses = (np.arange(1 << q) >> edge) & 1 == 1
            cells[:, crosses] += step[rows, edge, None]
        asking.append(np.repeat(rows, 1 << q))
        asked.append(cells.reshape(-1))
    return np.concatenate(asking), np.concatenate(asked)


class CellTable:
    """The rows of each occupied cell, found by a hash of the cell's key: a counting sort of the rows into
    buckets (at least four for each row, so most buckets hold one cell at most), so a lookup is two gathers."""

    def __init__(self, keys: np.ndarray):
        self.shift = np.uint64(64 - max(4, int(len(keys) - 1).bit_length() + 2))
        buckets = 1 << (64 - int(self.shift))
        bucket = self.bucket(keys)
        self.order = np.argsort(bucket, kind="stable")
        self.keys = keys[self.order]  # in bucket order: a bucket's rows and their keys side by side
        counts = np.bincount(bucket, minlength=buckets)
        self.starts = (np.cumsum(counts) - counts).astype(np.int32 if len(keys) < 1 << 31 else np.int64)
        self.counts = counts.astype(np.int32)

    def bucket(self, keys: np.ndarray) -> np.ndarray:
        mixed = keys.view(np.uint64) * np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the high bits mix well
        mixed >>= self.shift
        return mixed.view(np.int64)

    def pairs(self, asking: np.ndarray, asked: np.ndarray, step: int = LOOKUPS) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(asking row, row in the asked cell) pairs, a few lookups at a time."""
        for start in range(0, len(asking), step):
            bucket = self.bucket(asked[start:start + step])
            counts = self.counts[bucket]
            hit = np.flatnonzero(counts)  # most neighbouring cells are empty: drop them first
            rows, keys, bucket, counts = asking[start + hit], asked[start + hit], bucket[hit], counts[hit]
            ends = np.cumsum(counts)
            at = np.repeat(self.starts[bucket] - (ends - counts), counts) + np.arange(ends[-1] if ends.size else 0)
            same = self.keys[at] == np.repeat(keys, counts)  # the bucket may hold other cells
            yield np.repeat(rows, counts)[same], self.order[at[same]]


def listed_pairs(groups: Groups, near_a: np.ndarray, near_b: np.ndarray) -> list[tuple[int, int]]:
    """Up to DUPLICATE_MAX_LISTED pairs of row ids (a < b) from each kind, to be sorted and cut: the pairs inside
    each group of identical rows, and every pair of rows of two near groups."""
    found: list[tuple[int, int]] = []
    shared = np.flatnonzero(groups.sizes > 1)
    for group in shared[np.argsort(groups.representatives[shared], kind="stable")]:
        members = groups.rows(int(group)).tolist()
        for i, a in enumerate(members[:-1]):  # the pairs of the group's lowest rows first, no more than are listed
            found += [(a, b) for b in members[i + 1:i + 1 + DUPLICATE_MAX_LISTED]]
            if len(found) >= 4 * DUPLICATE_MAX_LISTED:
                break
        if len(found) >= 4 * DUPLICATE_MAX_LISTED:
            break
    near: list[tuple[int, int]] = []
    for a, b in zip(near_a.tolist(), near_b.tolist()):
        near += [(min(x, y), max(x, y)) for x in groups.rows(a).tolist() for y in groups.rows(b).tolist()]
        if len(near) >= 4 * DUPLICATE_MAX_LISTED:
            break
    return found + near


def checked(array: np.ndarray, norms: np.ndarray, a: int, b: int) -> Duplicate:
    a, b = min(a, b), max(a, b)
    row_a, row_b = np.asarray(array[a], dtype=np.float64), np.asarray(array[b], dtype=np.float64)
    cos = float(np.clip(row_a @ row_b / (norms[a] * norms[b]), -1.0, 1.0))
    return Duplicate(a, b, cos, bool(np.array_equal(row_a, row_b)))
