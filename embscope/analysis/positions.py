"""How similar learned position rows are: chosen pairs, and how similarity falls with distance.

Positions are table rows offset by `first_row` (OPT and RoBERTa keep 2 rows before position 0).
Undefined cosines (a zero, NaN or Inf row) are NaN here; rendering turns them into null.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from ..compute import cosine_blocks, pair_cosines, topk_rows
from ..errors import PositionError

NOMINAL_LAST = 511  # the default pairs are written for a 512-row table and scaled to the real one
PAIR_PATTERN = re.compile(r"\s*(-?\d+)\s*:\s*(-?\d+)\s*")
PROFILE_BLOCK_BYTES = 16 << 20  # float64 work space per block of rows of the cosine matrix
HEATMAP_MAX_SIDE = 1024  # the heatmap is averaged down to at most this many cells a side


@dataclass(frozen=True)
class PositionPair:
    i: int
    j: int
    distance: int  # |j - i|, in positions
    cosine: float  # NaN when undefined; `reason` says why
    reason: str | None = None


@dataclass(frozen=True)
class OffsetSummary:
    offset: int
    mean: float
    std: float
    pairs: int  # pairs (i, i + offset) with a defined cosine


@dataclass(frozen=True, eq=False)
class PositionProfile:
    """cos(p_i, p_i+k) for every offset k = 1..T-1 (index k-1), and how often a position's nearest
    neighbour by cosine is the position right next to it."""

    mean: np.ndarray  # float64 (T-1,)
    std: np.ndarray  # float64 (T-1,)
    count: np.ndarray  # int64 (T-1,)
    nearest_is_adjacent: float  # share of positions whose most similar other position is i-1 or i+1
    positions_counted: int  # positions with a defined nearest neighbour

    @property
    def offsets(self) -> np.ndarray:
        return np.arange(1, len(self.mean) + 1)

    def summary(self) -> list[OffsetSummary]:
        """Offsets 1, 2, 4, 8, ... and the longest, T-1."""
        last = len(self.mean)
        picks = [k for k in (2 ** e for e in range(last.bit_length())) if k < last] + ([last] if last else [])
        return [OffsetSummary(k, float(self.mean[k - 1]), float(self.std[k - 1]), int(self.count[k - 1]))
                for k in picks]


@dataclass(frozen=True, eq=False)
class Heatmap:
    """Cosines between positions, averaged over square cells of `cell` positions a side (NaN left out)."""

    cells: np.ndarray  # float32 (side, side), side = ceil(positions / cell) <= HEATMAP_MAX_SIDE
    positions: int
    cell: int


@dataclass(frozen=True)
class PositionReport:
    table: str
    rows: int  # rows in the table
    first_row: int  # rows before position 0
    pairs: tuple[PositionPair, ...]

    @property
    def positions(self) -> int:
        return self.rows - self.first_row


def parse_pairs(text: str) -> list[tuple[int, int]]:
    """'10:11,10:500' -> [(10, 11), (10, 500)]; anything else is a PositionError naming the bad part."""
    pairs = []
    for part in text.split(","):
        match = PAIR_PATTERN.fullmatch(part)
        if match is None:
            raise PositionError(f"expected position pairs written I:J,I:J (e.g. 10:11,10:500), found {part.strip()!r}")
        i, j = int(match[1]), int(match[2])
        if i < 0 or j < 0:
            raise PositionError(f"expected positions of 0 or more, found {part.strip()!r}")
        pairs.append((i, j))
    return pairs


def default_pairs(positions: int) -> list[tuple[int, int]]:
    """Near and far pairs across the table, sorted near to far. For 512 positions exactly 10:11, 250:251,
    250:260, 500:511, 10:100, 250:500, 10:500, 0:511; otherwise anchors scale with the table and the
    near pairs keep their small distances."""
    last = positions - 1
    if last < 1:
        return []

    def scaled(p: int) -> int:
        return min(last, round(p * last / NOMINAL_LAST))

    def near(anchor: int, distance: int) -> tuple[int, int]:
        distance = min(distance, last)
        start = max(0, min(anchor, last - distance))
        return start, start + distance

    candidates = [near(scaled(10), 1), near(scaled(250), 1), near(scaled(250), 10), near(last - 11, 11),
                  (scaled(10), scaled(100)), (scaled(250), scaled(500)), (scaled(10), scaled(500)), (0, last)]
    unique = {(i, j) for i, j in candidates if i != j}
    return sorted(unique, key=lambda pair: (pair[1] - pair[0], pair[0]))


def check_positions(pairs: list[tuple[int, int]], rows: int, first_row: int, name: str) -> None:
    positions = max(rows - first_row, 0)
    for position in (p for pair in pairs for p in pair):
        if position < 0:
            raise PositionError(f"expected positions from 0 to {positions - 1}, found {position}")
        if position >= positions:
            reserved = f" ({first_row} reserved rows come before position 0)" if first_row else ""
            raise PositionError(
                f"expected a position below {positions}, found {position}: the position table {name!r} has "
                f"{rows} rows{reserved}, and a learned table holds one row per position up to the model's "
                f"fixed context length, so there is no row for position {position}")


def undefined_reason(table: np.ndarray, row: int, position: int) -> str | None:
    values = np.asarray(table[row], dtype=np.float64)
    if np.isnan(values).any():
        return f"position {position} has NaN values"
    if np.isinf(values).any():
        return f"position {position} has Inf values"
    if not values.any():
        return f"position {position} is a zero row"
    return None


def position_pairs(table: np.ndarray, pairs: list[tuple[int, int]], first_row: int = 0,
                   name: str = "position table") -> PositionReport:
    """Cosines of the given position pairs; positions past the table's end are a PositionError."""
    check_positions(pairs, table.shape[0], first_row, name)
    rows = np.array(pairs, dtype=np.int64).reshape(-1, 2) + first_row
    cosines = pair_cosines(table, rows)
    found = []
    for (i, j), cosine in zip(pairs, cosines):
        reason = None
        if np.isnan(cosine):
            reason = undefined_reason(table, i + first_row, i) or undefined_reason(table, j + first_row, j)
        found.append(PositionPair(i, j, abs(j - i), float(cosine), reason))
    return PositionReport(name, table.shape[0], first_row, tuple(found))


def position_profile(table: np.ndarray, first_row: int = 0, *, heatmap: bool = True,
                     block_rows: int | None = None) -> tuple[PositionProfile, Heatmap | None]:
    """How similarity falls with distance, and (when `heatmap`) the cosine heatmap averaged down to at
    most HEATMAP_MAX_SIDE cells a side, from one pass over blocks of rows of the position cosine matrix:
    memory grows with the positions, never with their square."""
    positions = np.arange(first_row, table.shape[0], dtype=np.int64)
    n = positions.size
    offsets = OffsetStats(max(n - 1, 0))
    cells = HeatmapCells(n) if heatmap else None
    step = block_rows if block_rows is not None else max(1, min(1024, PROFILE_BLOCK_BYTES // (8 * max(1, n))))
    padded = np.full((min(step, n), n + step), np.nan, dtype=np.float32)  # NaN past the last column
    for start, block in cosine_blocks(table, rows=positions, block_rows=step):
        rows = block.shape[0]
        if cells is not None:
            cells.add(start, block)
        if start + 1 >= n:
            continue
        padded[:rows, :n] = block
        # skewed[r, k - 1] = padded[r, start + r + k]: cos(p_i, p_i+k) for i = start + r, NaN past the end
        skewed = np.lib.stride_tricks.as_strided(padded.ravel()[start + 1:], shape=(rows, n - 1 - start),
                                                 strides=((padded.shape[1] + 1) * 4, 4), writeable=False)
        offsets.add(skewed)
    adjacent, counted = nearest_adjacent(table[first_row:])
    profile = PositionProfile(offsets.mean(), offsets.std(), offsets.count,
                              adjacent / counted if counted else float("nan"), counted)
    return profile, cells.heatmap() if cells is not None else None


class OffsetStats:
    """Count, mean and spread of the cosines at each offset, merged block by block (Chan et al.), so the
    spread is as exact as a two-pass one and an offset with one pair has a spread of exactly 0."""

    def __init__(self, offsets: int):
        self.count = np.zeros(offsets, dtype=np.int64)
        self.running_mean = np.zeros(offsets, dtype=np.float64)
        self.squares = np.zeros(offsets, dtype=np.float64)  # sum of squared deviations from the mean

    def add(self, skewed: np.ndarray) -> None:
        """skewed: (rows, offsets 1..K) cosines, NaN where there is no pair."""
        width = skewed.shape[1]
        values = skewed.astype(np.float64)
        present = ~np.isnan(values)
        values[~present] = 0.0
        count = present.sum(axis=0)
        block_mean = np.divide(values.sum(axis=0), count, out=np.zeros(width), where=count > 0)
        values -= block_mean
        values[~present] = 0.0
        block_squares = np.einsum("ij,ij->j", values, values)
        before = self.count[:width]
        total = before + count
        delta = block_mean - self.running_mean[:width]
        share = np.divide(count, total, out=np.zeros(width), where=total > 0)
        self.running_mean[:width] += delta * share
        self.squares[:width] += block_squares + delta * delta * before * share
        self.count[:width] = total

    def mean(self) -> np.ndarray:
        return np.where(self.count > 0, self.running_mean, np.nan)

    def std(self) -> np.ndarray:
        return np.sqrt(np.divide(self.squares, self.count, out=np.full(self.count.shape, np.nan),
                                 where=self.count > 0))


class HeatmapCells:
    """The cosine matrix averaged over square cells of `cell` positions a side (NaN entries left out),
    gathered block by block of rows."""

    def __init__(self, positions: int):
        self.positions = positions
        self.cell = max(1, math.ceil(positions / HEATMAP_MAX_SIDE))
        side = math.ceil(positions / self.cell)
        self.sums = np.zeros((side, side), dtype=np.float64)
        self.counts = np.zeros((side, side), dtype=np.int64)

    def add(self, start: int, block: np.ndarray) -> None:
        present = ~np.isnan(block)
        sums, counts = self.by_cell(np.where(present, block, 0.0)), self.by_cell(present.astype(np.float32))
        cell_rows = (start + np.arange(block.shape[0])) // self.cell
        first = np.flatnonzero(np.diff(cell_rows, prepend=-1))  # where each cell row's rows begin
        self.sums[cell_rows[first]] += np.add.reduceat(sums, first, axis=0)
        self.counts[cell_rows[first]] += np.add.reduceat(counts, first, axis=0).astype(np.int64)

    def by_cell(self, values: np.ndarray) -> np.ndarray:
        """float64 (rows, side): each row's values summed over the columns of each cell."""
        side = self.sums.shape[1]
        if side * self.cell != values.shape[1]:
            values = np.pad(values, ((0, 0), (0, side * self.cell - values.shape[1])))
        grouped = values.reshape(values.shape[0], side, self.cell)
        total = grouped[:, :, 0].astype(np.float64)
        for column in range(1, self.cell):  # one strided add per column of a cell: faster than a sum over it
            total += grouped[:, :, column]
        return total

    def heatmap(self) -> Heatmap:
        with np.errstate(invalid="ignore", divide="ignore"):
            cells = np.where(self.counts > 0, self.sums / self.counts, np.nan).astype(np.float32)
        return Heatmap(cells, self.positions, self.cell)


def nearest_adjacent(table: np.ndarray) -> tuple[int, int]:
    """How many positions have i-1 or i+1 as their most similar other position (ties to the lower), out of
    those with any."""
    if table.shape[0] == 0:
        return 0, 0
    best = topk_rows(table, 1, device="cpu").ids[:, 0]
    found = best >= 0
    adjacent = np.abs(best - np.arange(best.size)) == 1
    return int((found & adjacent).sum()), int(found.sum())
