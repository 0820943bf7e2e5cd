"""Duplicate and near-duplicate rows of a table (cosine above DUPLICATE_COSINE), in time linear in the table
for tables whose rows do not crowd together, and never all pairs.

The table is read once: every row is multiplied, as stored, by 16 directions of widest spread (one matmul a
block) and divided by its norm, which gives its unit row's projection; no unit rows are held.
1. Exact duplicates by hashing: a row's key is the bits of its first raw projection; rows of equal keys (one
   sort of key and row number packed in 64 bits) are checked to be equal rows, and each group of identical
   rows is searched once, by one representative.
2. Near-duplicates on a grid: two unit rows of cosine c lie within r = sqrt(2 (1 - c)) of each other, and so do
   their projections on any orthonormal directions. The widest m directions are cut into cells of side
   GRID_SIDE * r. A row near a cell's edge (within r of it) could have a partner across it; of the two rows
   of such a pair only the one whose first crossed edge is an upper edge looks across (each pair is looked
   for once), and a row in a cell's middle looks into its own cell only. Cells are found by a hash of their
   coordinates (a counting sort into buckets), the pairs they give are checked in the projection, and those
   within r there are checked in full, in float64 from the rows as stored.
The work is about N (1 + (1 + 2 / GRID_SIDE)^m) / 2 lookups plus the rows that share a cell; rows crowded into
a few cells (near-copies by the thousand) are bounded by max_checks, and the result then says it was cut short.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .columns import column_reduced
from .products import thin_product

DUPLICATE_COSINE = 0.9999
DUPLICATE_SUBSPACE = 16  # directions rows are projected on (the widest first), before the full check
DUPLICATE_MAX_CHECKS = 20_000_000  # candidate pairs checked in the projection at most
DUPLICATE_MAX_BYTES = 1 << 30  # a table whose float32 rows exceed this is not searched
DUPLICATE_MAX_LISTED = 1000  # pairs listed, the lowest by row index
LISTED_CHUNK = 256  # row ids converted to Python at a time while the listed pairs are read
GRID_SIDE = 12  # cells are this many times r wide: a row looks past its cell in a dimension 2 / GRID_SIDE of the time
GRID_MOST_DIMENSIONS = 12  # directions cut into cells at most (each adds up to a doubling of the lookups)
WORK_BYTES = 4 << 20  # rows projected, or candidate pairs' rows gathered, at a time: a few MB of temporaries
GRID_ROWS = 1 << 16  # rows whose cells are worked out, and looked into, at a time
GRID_MOST_CROWDED = 64  # rows sharing a cell, per row, past which windows along one direction are cheaper
WINDOW_BLOCK = 512  # rows matched at a time with the rows that follow them along the widest direction
DUPLICATE_MAX_WINDOW = 32768  # rows compared with each block at most: keeps the windowed search bounded
SPREAD_SAMPLE = 1 << 12  # rows the directions of widest spread are estimated from
SPREAD_RUN = 64  # rows of the sample that lie side by side
SPREAD_EIGH_MOST = 256  # up to this width the sample's covariance is decomposed whole; wider, power iteration
FLOAT32_UNIT = 2.0 ** -24
ORDINARY_NORMS = (2.0 ** -60, 2.0 ** 60)  # rows projected in float32 as stored; others are projected in float64
_SETS = np.arange(1 << GRID_MOST_DIMENSIONS)  # each set of edges, bit e for edge e
# each set's first edge: the place of its lowest bit, log2 of a power of two (exact; no Python loop at import)
LOWEST_EDGE = np.log2(_SETS & -_SETS, where=_SETS > 0, out=np.zeros(len(_SETS))).astype(np.intp)
PROJECTION_LEAST_PIECE = 256  # rows a piece of the projection at least (wide rows: threaded pieces, fewer calls)
PREFILTER_MARGIN = 1.001  # one coordinate's gap against reach, before the squared gap over all of them is summed


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
        return DuplicateSearch((), 0, False, f"duplicate search skipped: the rows would take more than "
                                             f"{max_bytes >> 20} MiB")
    basis = spread_subspace(array, rows, norms)
    projected, keys = projections(array, rows, norms, basis)
    groups = identical_groups(array, rows, keys)
    if len(groups.representatives) < len(rows):  # some rows stand for others: search the representatives only
        projected = compacted(projected, positions_in(rows, groups.representatives))
    full = FullCheck(array, norms, groups.representatives, cosine)
    near_a, near_b, cut = near_pairs(projected, reach_of(cosine, array.shape[1], projected.shape[1]), full,
                                     max_checks, max_window)
    sizes = groups.sizes
    total = int((sizes * (sizes - 1) // 2).sum() + (sizes[near_a] * sizes[near_b]).sum())
    pairs = tuple(checked(array, norms, a, b) for a, b in listed_pairs(groups, near_a, near_b))
    note = None if cut is None else f"duplicate search cut short among very crowded rows ({cut}): pairs may be missing"
    return DuplicateSearch(pairs, total, cut is None, note)


def without_gap(rows: np.ndarray) -> bool:
    """Ascending distinct rows that run on without a gap (every row valid, the usual case): a slice holds them."""
    return len(rows) > 0 and int(rows[-1]) - int(rows[0]) + 1 == len(rows)


def positions_in(rows: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Where each of `ids` (some of `rows`, both ascending) lies in `rows`: an offset where the rows run on without
    a gap, else a binary search."""
    if without_gap(rows):
        offsets: np.ndarray = ids - rows[0]
        return offsets
    found: np.ndarray = np.searchsorted(rows, ids)
    return found


def compacted(projected: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """projected[positions] (ascending) in place, a few MB at a time: each row moves down, never up, so no copy
    of the whole array is made."""
    step = max(1, WORK_BYTES // (4 * projected.shape[1]))
    unmoved = int(np.searchsorted(positions - np.arange(len(positions)), 0, side="right"))  # rows before the first gap
    for start in range(unmoved, len(positions), step):
        chunk = positions[start:start + step]
        first = int(chunk[0])
        if without_gap(chunk):  # a slice, not a gather
            projected[start:start + len(chunk)] = projected[first:first + len(chunk)]
        else:
            projected[start:start + len(chunk)] = projected[chunk]
    kept: np.ndarray = projected[:len(positions)]
    return kept


def reach_of(cosine: float, dim: int, width: int) -> float:
    """r = sqrt(2 (1 - cosine)), plus the float32 rounding of the projections: each coordinate of a unit row's
    projection is off by at most about (dim + 4) u (the dot product, the basis and the division rounded), so a
    distance over `width` coordinates between two rows by at most 2 (dim + 4) u sqrt(width); twice that is kept."""
    return math.sqrt(2 * (1 - cosine)) + 4 * (dim + 4) * FLOAT32_UNIT * math.sqrt(width) + 1e-7


def projections(array: np.ndarray, rows: np.ndarray, norms: np.ndarray,
                basis: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(float32 (len(rows), width) projections of the unit rows on `basis`, uint32 key of each row): one matmul
    of the rows as stored a block, then a division by the norms; the key is the raw first projection's bits."""
    basis32 = np.ascontiguousarray(basis, dtype=np.float32)
    projected = np.empty((len(rows), basis32.shape[1]), dtype=np.float32)
    keys = np.empty(len(rows), dtype=np.uint32)
    own_norms = of_rows(norms, rows)
    for start, block in row_blocks(array, rows):
        out, chosen = projected[start:start + len(block)], own_norms[start:start + len(block), None]
        if chosen.min() < ORDINARY_NORMS[0] or chosen.max() > ORDINARY_NORMS[1]:  # float32 would lose or overflow them
            # from the rows as stored (a float64 table's may lie beyond float32's range); the key from the unit
            # rows' projection, which equal rows share and which stays in float32's range
            out[:] = (np.asarray(block, dtype=np.float64) @ basis) / chosen
            keys[start:start + len(block)] = out[:, 0].view(np.uint32)
            continue
        block = np.asarray(block, dtype=np.float32)
        thin_product(block, basis32, out, least=PROJECTION_LEAST_PIECE)
        keys[start:start + len(block)] = out[:, 0].view(np.uint32)
        out /= chosen.astype(np.float32)
    return projected, keys


def of_rows(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """values[rows] (rows ascending): a slice, not a gather, where the rows run on without a gap."""
    if without_gap(rows):
        return values[int(rows[0]):int(rows[0]) + len(rows)]
    chosen: np.ndarray = values[rows]
    return chosen


@dataclass(frozen=True, eq=False)
class Groups:
    """Rows grouped by equal values: group g is its representative, representatives[g] (its lowest row), and
    the rows that follow it (few, in most tables), followers[first:last] where follower_groups is g; groups in
    ascending order of their representatives, followers by group, then row."""

    representatives: np.ndarray
    sizes: np.ndarray  # rows of each group, its representative included
    follower_groups: np.ndarray  # ascending
    followers: np.ndarray

    def rows(self, group: int) -> np.ndarray:
        """The group's rows, ascending."""
        first, last = np.searchsorted(self.follower_groups, [group, group + 1])
        return np.concatenate([self.representatives[group:group + 1], self.followers[first:last]])

    def seconds(self, groups: np.ndarray) -> np.ndarray:
        """The second row of each of `groups` (ascending, each of two rows or more): its first follower."""
        firsts: np.ndarray = self.followers[np.searchsorted(self.follower_groups, groups)]
        return firsts


def row_blocks(array: np.ndarray, rows: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(position in rows, block of those rows as stored), a few MB at a time: slices where the rows run on without
    a gap, else gathered."""
    step = max(1, WORK_BYTES // (4 * array.shape[1]))
    running = without_gap(rows)
    for start in range(0, len(rows), step):
        if running:
            first = int(rows[0]) + start
            block = array[first:first + min(step, len(rows) - start)]
        else:
            block = array[rows[start:start + step]]
        yield start, np.asarray(block)


def identical_groups(array: np.ndarray, rows: np.ndarray, keys: np.ndarray) -> Groups:
    """The rows grouped by equal values: by key (equal rows have equal keys wherever the BLAS rounds them
    alike; equal rows it rounded apart stay apart and the grid pairs them instead: the answer is the same), and
    each row of a shared key checked against its group's first (a row that differs keeps a group of its own).
    Rows that share no key (nearly all) are groups of one, kept in row order; only the few others are listed."""
    packed = keys.astype(np.uint64)  # key and position packed in 64 bits, worked in place: fewer fresh pages
    packed <<= np.uint64(32)
    packed |= np.arange(len(rows), dtype=np.uint64)
    packed.sort()
    step_on = packed[1:] ^ packed[:-1]  # the keys of neighbours differ where this reaches the high half
    step_on >>= np.uint64(32)
    others = np.flatnonzero(step_on == 0) + 1  # rows after the first of their key (few: no pass over every row)
    if not others.size:  # no key shared: every row a group of its own
        return Groups(rows, np.ones(len(rows), dtype=np.int64), np.empty(0, np.int64), np.empty(0, rows.dtype))
    high = packed[others] & np.uint64(0xFFFFFFFF00000000)  # each one's key, with position 0: its key's first
    firsts = (packed[np.searchsorted(packed, high)] & np.uint64(0xFFFFFFFF)).view(np.int64)
    order = (packed[others] & np.uint64(0xFFFFFFFF)).view(np.int64)
    step = max(1, WORK_BYTES // (8 * array.shape[1]))
    equal = np.concatenate([np.all(array[rows[firsts[i:i + step]]] == array[rows[order[i:i + step]]], axis=1)
                            for i in range(0, len(others), step)])
    followers = order[equal]  # positions of rows that belong to an earlier row's group
    head = np.ones(len(rows), dtype=bool)
    head[followers] = False
    # a representative's group number, groups in the order of their first rows: the rows before it less the
    # followers before it
    follower_group = firsts[equal] - np.searchsorted(np.sort(followers), firsts[equal])
    sizes = np.bincount(follower_group, minlength=len(rows) - len(followers))
    sizes += 1
    ranked = np.lexsort((followers, follower_group))  # followers by group, then row
    return Groups(rows[head], sizes, follower_group[ranked], rows[followers[ranked]])


def spread_subspace(array: np.ndarray, rows: np.ndarray, norms: np.ndarray, width: int = DUPLICATE_SUBSPACE,
                    iterations: int = 4, seed: int = 0) -> np.ndarray:
    """Orthonormal (d, width) directions along which the unit rows spread most, from a sample of at most
    SPREAD_SAMPLE rows: the top eigenvectors of its covariance (by block power iteration past SPREAD_EIGH_MOST
    columns). They need only be about right: any orthonormal directions keep the search exact."""
    rng = np.random.default_rng(seed)
    width = min(width, array.shape[1])
    sample = min(SPREAD_SAMPLE, max(width, WORK_BYTES // 2 // (4 * array.shape[1])))  # within a few MB
    chosen = rows
    if len(rows) > sample:  # runs of SPREAD_RUN rows at random places: few pages of a memory map are touched
        runs = -(-sample // SPREAD_RUN)
        starts = np.sort(rng.choice(len(rows) // SPREAD_RUN, runs, replace=False)) * SPREAD_RUN
        chosen = rows[(starts[:, None] + np.arange(SPREAD_RUN)).reshape(-1)]
    unit = np.asarray(array[chosen], dtype=np.float64) / norms[chosen, None]
    unit -= unit.mean(axis=0)
    if array.shape[1] <= SPREAD_EIGH_MOST:
        covariance = np.zeros((unit.shape[1], unit.shape[1]))
        for start in range(0, len(unit), SPREAD_RUN):  # pieces too small for OpenBLAS to wake its threads
            piece = unit[start:start + SPREAD_RUN]
            covariance += piece.T @ piece
        vectors: np.ndarray = np.linalg.eigh(covariance)[1][:, ::-1][:, :width]
        return vectors
    basis, _ = np.linalg.qr(rng.standard_normal((unit.shape[1], width)))
    for _ in range(iterations):
        basis, _ = np.linalg.qr(unit.T @ (unit @ basis))
    spread = unit @ basis
    rotation: np.ndarray = np.linalg.eigh(spread.T @ spread)[1][:, ::-1]  # the widest of them first
    widest: np.ndarray = basis @ rotation
    return widest


class FullCheck:
    """The last word on a candidate pair of representatives: their cosine in float64, from the rows as stored."""

    def __init__(self, array: np.ndarray, norms: np.ndarray, representatives: np.ndarray, cosine: float):
        self.array, self.norms, self.rows, self.cosine = array, norms, representatives, cosine

    def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Which of the pairs (a[i], b[i]) of representatives have cosine above the line."""
        rows_a, rows_b = self.rows[a], self.rows[b]
        dots = np.einsum("ij,ij->i", np.asarray(self.array[rows_a], dtype=np.float64),
                         np.asarray(self.array[rows_b], dtype=np.float64))
        similar: np.ndarray = dots / (self.norms[rows_a] * self.norms[rows_b]) > self.cosine
        return similar


def near_pairs(projected: np.ndarray, reach: float, full: FullCheck, max_checks: int,
               max_window: int = DUPLICATE_MAX_WINDOW) -> tuple[np.ndarray, np.ndarray, str | None]:
    """(a, b, cut): the pairs of rows (a < b) of `projected` within `reach` there and similar in full, found on
    the grid (or in windows); cut says which limit stopped the search, or None."""
    found_a, found_b = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
    reach2 = np.float32(reach * reach)
    step = max(1, WORK_BYTES // (8 * projected.shape[1]))
    checks, cut = 0, None
    cuts: list[str] = []
    last = np.ascontiguousarray(projected[:, -1])  # a direction few grids cut: most candidates differ along it
    for a, b in candidates(projected, reach, max_window, cuts):
        if checks + len(a) > max_checks:
            a, b = a[:max_checks - checks], b[:max_checks - checks]
            cut = f"at most {max_checks:,} candidate pairs were checked"
        checks += len(a)
        # a pair within reach is within it along every direction: one coordinate first (a margin above the
        # float32 rounding of the sum below), then the whole projection for the few left
        along = np.flatnonzero(np.abs(last[a] - last[b]) <= np.float32(reach * PREFILTER_MARGIN))
        a, b = a[along], b[along]
        for at in range(0, len(a), step):  # the gathered rows stay within WORK_BYTES
            i, j = a[at:at + step], b[at:at + step]
            gap = projected[i] - projected[j]
            close = np.einsum("ij,ij->i", gap, gap) <= reach2
            i, j = i[close], j[close]
            similar = full(i, j)
            found_a.append(np.minimum(i[similar], j[similar]))
            found_b.append(np.maximum(i[similar], j[similar]))
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


def grid_dimensions(low: np.ndarray, high: np.ndarray, side: float) -> int:
    """How many of the widest directions (lowest and highest values given) to cut into cells: those at least two
    cells across, at most GRID_MOST_DIMENSIONS, and no more than a float64 can number exactly (the cells' keys
    are one product)."""
    extents = np.floor((high - low) / side) + 3
    count, product = 0, 1.0
    for extent in extents[:GRID_MOST_DIMENSIONS]:
        if extent < 4 or product * extent > 2.0 ** 50:
            break
        count, product = count + 1, product * extent
    return max(1, count)


def column_extremes(projected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lowest, highest) value of each column, read as wide rows (analysis/columns.py)."""
    return column_reduced(np.minimum, projected), column_reduced(np.maximum, projected)


class Grid:
    """The rows' cells: the widest m directions cut into cells of side GRID_SIDE * reach, each cell keyed by
    one integer, and the cell table that finds a key's rows."""

    def __init__(self, projected: np.ndarray, reach: float):
        self.projected = projected
        self.side = GRID_SIDE * reach
        low, high = column_extremes(projected)
        self.m = m = grid_dimensions(low, high, self.side)
        self.origin = low[:m] - np.float32(self.side)  # a neighbour past either edge
        extents = np.floor((high[:m] - self.origin) / self.side) + 2
        self.strides = np.cumprod(np.r_[1.0, extents[:-1]])  # float64: the keys stay below 2^50, exact
        self.keys = np.empty(len(projected), dtype=np.int64)
        self.sides = np.empty((len(projected), m), dtype=np.int8)
        for start in range(0, len(projected), GRID_ROWS):
            self.cells(start)
        self.table = CellTable(self.keys)

    def cells(self, start: int) -> None:
        """keys and sides of rows start.. (GRID_ROWS of them): side is +1 or -1 in the dimensions where the row
        lies within reach of its cell's upper or lower edge, 0 in the cell's middle."""
        scaled = self.projected[start:start + GRID_ROWS, :self.m] - self.origin
        scaled *= np.float32(1 / self.side)
        # the cell's whole number, and where in its cell each row lies, 0..1: both exact (scaled lies in
        # 1 .. 2 / side + 2, far below 2^24), and floor and a subtraction take half the time of np.modf
        whole = np.floor(scaled, out=np.empty(scaled.shape, dtype=np.int32), casting="unsafe")  # floored, then cast
        place = np.subtract(scaled, whole, out=scaled, dtype=np.float32)  # whole numbers below 2^24: exact in float32
        keys = self.keys[start:start + len(place)]
        # every key is below 2^50; einsum sums in int64 at twice the speed of matmul's integer loop
        np.einsum("ij,j->i", whole, self.strides.astype(np.int64), out=keys)
        np.subtract((place >= 1 - 1 / GRID_SIDE).view(np.int8), (place <= 1 / GRID_SIDE).view(np.int8),
                    out=self.sides[start:start + len(place)])

    def crowding(self) -> int:
        """Pairs of rows that share a cell (each counted from both ends): what the lookups cost beyond the rows."""
        per_bucket = self.table.bucket_sizes()  # each row counts the rows of its bucket: sum of squares
        return int(per_bucket @ per_bucket) - len(self.keys)

    def candidates(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Every pair of rows that share a cell, read off the cell table, and every pair across edges, looked up
        once, from the row whose first crossed edge is an upper one: (a, b) rows of a pair, in either order."""
        yield from self.table.shared()
        for start in range(0, len(self.projected), GRID_ROWS):
            keys, side = self.keys[start:start + GRID_ROWS], self.sides[start:start + GRID_ROWS]
            asking, asked = neighbour_cells(keys, side, self.strides[:self.m])
            yield self.table.pairs(asking + start, asked)


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


def neighbour_cells(keys: np.ndarray, side: np.ndarray, strides: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, cell key) for each cell beside its own that a row looks into: across the edges it lies near (side:
    (rows, m), +1 near the upper edge, -1 near the lower, 0 in the middle), each set of them whose first edge is
    an upper one. A pair across edges is then looked for by one of its rows only (the other sees the
    first edge as a lower one), and rows near q edges look into about 2^(q-1) cells. The rows near q edges are
    taken together, all 2^q sets of their edges at once."""
    at = np.flatnonzero(side.reshape(-1) != 0)  # each row's near edges, in order of dimension
    at_row = at // side.shape[1]  # a floor division by one number runs vectorised (divmod and % do not)
    at_dim = at - at_row * side.shape[1]
    count = np.bincount(at_row, minlength=len(keys)).astype(np.int8)  # at most m (GRID_MOST_DIMENSIONS)
    first = np.cumsum(count, dtype=np.int64) - count  # where each row's edges start in at_row
    signs = side.reshape(-1)[at]
    steps = signs * strides.astype(np.int64)[at_dim]
    up = signs > 0
    by_count = np.argsort(count, kind="stable")  # rows by their number of near edges (a radix sort of bytes)
    ends = np.cumsum(np.bincount(count))
    asking, asked = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
    for q in range(1, len(ends)):
        rows = by_count[ends[q - 1]:ends[q]]
        if not rows.size:
            continue
        edges = first[rows] + np.arange(q)[:, None]  # (q, rows): each row's q edges
        cells = np.empty((1 << q, len(rows)), dtype=np.int64)  # set s holds edge e when bit e of s is 1
        cells[0] = keys[rows]  # the empty set: the row's own cell; the doubling below writes every other set
        for e in range(q):
            np.add(cells[:1 << e], steps[edges[e]], out=cells[1 << e:2 << e])
        allowed = up[edges][LOWEST_EDGE[:1 << q]]  # a set is looked into when its first edge is an upper one
        allowed[0] = False  # the empty set: the row's own cell
        chosen = np.flatnonzero(allowed)  # flat, then a division by a constant: 4x faster than a 2-D nonzero
        looking = rows[chosen - chosen // len(rows) * len(rows)]  # chosen % len(rows), vectorised
        asking.append(looking)
        asked.append(cells.reshape(-1)[chosen])
    return np.concatenate(asking), np.concatenate(asked)


class CellTable:
    """The rows of each occupied cell, found by a hash of the cell's key: a counting sort of the rows into
    buckets (at least two for each row, so most buckets hold one cell at most), so a lookup is two gathers.
    Bucket b's rows are order[ends[b] - count:ends[b]], its count ends[b] - ends[b - 1]."""

    def __init__(self, keys: np.ndarray):
        self.shift = np.uint64(64 - max(4, int(len(keys) - 1).bit_length() + 1))
        buckets = 1 << (64 - int(self.shift))
        bucket = self.bucket(keys)
        self.ends = np.zeros(buckets + 1, dtype=np.int64)  # ends[b + 1]: one array, not counts and starts
        np.cumsum(np.bincount(bucket, minlength=buckets), out=self.ends[1:])
        packed = bucket.view(np.uint64)  # bucket and row packed in 64 bits, worked in place: fewer fresh pages
        packed <<= np.uint64(32)
        packed |= np.arange(len(keys), dtype=np.uint64)
        packed.sort()
        self.sorted_buckets = (packed >> np.uint64(32)).view(np.int64)  # below 2^32: the same bits
        packed &= np.uint64(0xFFFFFFFF)
        self.order = packed.view(np.int64)  # by bucket, then row: a stable sort, packed
        self.keys = keys[self.order]  # in bucket order: a bucket's rows and their keys side by side
        self.runs_on = self.sorted_buckets[1:] == self.sorted_buckets[:-1]  # a row's bucket holds the next row too
        self.occupied = self.ends[1:] != self.ends[:-1]  # a byte a bucket: nearer the cache than `ends`

    def bucket(self, keys: np.ndarray) -> np.ndarray:
        mixed = keys.view(np.uint64) * np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the high bits mix well
        mixed >>= self.shift
        return mixed.view(np.int64)

    def bucket_sizes(self) -> np.ndarray:
        """The rows of each occupied bucket: the runs of one bucket in sorted order (not a count for each of the
        buckets, most of them empty)."""
        starts = np.flatnonzero(~self.runs_on) + 1  # where each run but the first begins
        sizes: np.ndarray = np.diff(starts, prepend=0, append=len(self.sorted_buckets))
        return sizes

    def shared(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Every pair of rows of one cell (a < b): rows of one bucket lie side by side, so the pairs are the
        positions p, p + offset of one bucket and one key, offset 1, 2, ... while any bucket holds more."""
        buckets = self.sorted_buckets
        at = np.flatnonzero(self.runs_on)
        offset = 1
        while at.size:
            same = at[self.keys[at] == self.keys[at + offset]]
            first, second = self.order[same], self.order[same + offset]
            yield np.minimum(first, second), np.maximum(first, second)
            offset += 1
            at = at[at + offset < len(buckets)]
            at = at[buckets[at + offset] == buckets[at]]

    def pairs(self, asking: np.ndarray, asked: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(asking row, row in the asked cell) for every lookup."""
        bucket = self.bucket(asked)
        hit = np.flatnonzero(self.occupied[bucket])  # most neighbouring cells are empty: drop them first
        rows, keys, bucket = asking[hit], asked[hit], bucket[hit]
        first = self.ends[bucket]  # where each bucket's rows start: gathered once
        counts = self.ends[1:][bucket] - first
        ends = np.cumsum(counts)
        lookup = lookups_of(ends)  # the lookup each row found belongs to: one pass, then gathers in order
        at = (first - (ends - counts))[lookup]
        at += np.arange(len(lookup))
        same = np.flatnonzero(self.keys[at] == keys[lookup])  # the bucket may hold other cells
        return rows[lookup[same]], self.order[at[same]]  # positions: one nonzero for both gathers


def lookups_of(ends: np.ndarray) -> np.ndarray:
    """np.repeat(np.arange(len(ends)), counts) for the counts whose running sums are `ends`, every count at least 1
    (occupied buckets): a mark where each lookup's rows start, summed; numpy's repeat copies one item at a time."""
    lookup = np.zeros(int(ends[-1]) if ends.size else 0, dtype=np.intp)
    lookup[ends[:-1]] = 1
    found: np.ndarray = np.cumsum(lookup, out=lookup)
    return found


def listed_pairs(groups: Groups, near_a: np.ndarray, near_b: np.ndarray) -> list[tuple[int, int]]:
    """The DUPLICATE_MAX_LISTED lowest pairs of row ids (a < b), by row index, of every pair found: those inside
    each group of identical rows and those across two near groups. Each source of pairs is read lazily in
    ascending order and the sources merged; only the sources whose own lowest pair is among the lowest that
    many are read (every source gives one pair at least, so no other can reach the list)."""
    shared = np.flatnonzero(groups.sizes > 1)
    firsts = groups.representatives
    seconds = groups.seconds(shared)
    low, high = np.minimum(firsts[near_a], firsts[near_b]), np.maximum(firsts[near_a], firsts[near_b])
    lows, highs = np.concatenate([firsts[shared], low]), np.concatenate([seconds, high])
    chosen = np.lexsort((highs, lows))[:DUPLICATE_MAX_LISTED].tolist()
    sources = [inner_pairs(groups.rows(int(shared[s]))) if s < len(shared) else
               cross_pairs(groups.rows(int(near_a[s - len(shared)])), groups.rows(int(near_b[s - len(shared)])))
               for s in chosen]
    return list(itertools.islice(heapq.merge(*sources), DUPLICATE_MAX_LISTED))


def ascending(rows: np.ndarray) -> Iterator[int]:
    """The row ids of an ascending array, converted a few at a time: a group may hold most of the table."""
    for start in range(0, len(rows), LISTED_CHUNK):
        yield from rows[start:start + LISTED_CHUNK].tolist()


def inner_pairs(members: np.ndarray) -> Iterator[tuple[int, int]]:
    """Every pair of one group's rows (a < b), in ascending order."""
    for i, a in enumerate(ascending(members)):
        for b in ascending(members[i + 1:]):
            yield a, b


def cross_pairs(one: np.ndarray, other: np.ndarray) -> Iterator[tuple[int, int]]:
    """Every pair of a row of `one` and a row of `other` (two groups, no row in both), as (lower, higher), in
    ascending order: each row in turn, from the lowest, with the rows of the other group above it."""
    merged = heapq.merge(((row, other) for row in ascending(one)), ((row, one) for row in ascending(other)),
                         key=lambda pair: pair[0])
    for row, partners in merged:
        for partner in ascending(partners[np.searchsorted(partners, row, side="right"):]):
            yield row, partner


def checked(array: np.ndarray, norms: np.ndarray, a: int, b: int) -> Duplicate:
    a, b = min(a, b), max(a, b)
    row_a, row_b = np.asarray(array[a], dtype=np.float64), np.asarray(array[b], dtype=np.float64)
    cos = float(np.clip(row_a @ row_b / (norms[a] * norms[b]), -1.0, 1.0))
    return Duplicate(a, b, cos, bool(np.array_equal(row_a, row_b)))
