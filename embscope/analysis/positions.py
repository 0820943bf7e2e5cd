"""How similar learned position rows are: chosen pairs, and how similarity falls with distance.

Positions are table rows offset by `first_row` (OPT and RoBERTa keep 2 rows before position 0).
Undefined cosines (a zero, NaN or Inf row) are NaN here; rendering turns them into null.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..compute import cosine_matrix, pair_cosines
from ..errors import PositionError

NOMINAL_LAST = 511  # the default pairs are written for a 512-row table and scaled to the real one
BLOCK_ROWS = 1024  # rows of the cosine matrix reduced at a time


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


@dataclass(frozen=True)
class PositionReport:
    table: str
    rows: int  # rows in the table
    first_row: int  # rows before position 0
    pairs: tuple[PositionPair, ...]

    @property
    def positions(self) -> int:
        return self.rows - self.first_row


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


def position_cosines(table: np.ndarray, first_row: int = 0) -> np.ndarray:
    """The (T, T) cosine matrix of the positions (rows from first_row on)."""
    return cosine_matrix(table, np.arange(first_row, table.shape[0]))


def profile_from_matrix(matrix: np.ndarray) -> PositionProfile:
    """Similarity by distance from a position cosine matrix (NaN entries are left out)."""
    n = matrix.shape[0]
    mean, std = np.full(max(n - 1, 0), np.nan), np.full(max(n - 1, 0), np.nan)
    count = np.zeros(max(n - 1, 0), dtype=np.int64)
    for k in range(1, n):
        diagonal = np.diagonal(matrix, k).astype(np.float64)
        values = diagonal[~np.isnan(diagonal)]
        count[k - 1] = len(values)
        if len(values):
            mean[k - 1] = values.mean()
            std[k - 1] = values.std()
    adjacent, counted = nearest_adjacent(matrix)
    return PositionProfile(mean, std, count, adjacent / counted if counted else float("nan"), counted)


def nearest_adjacent(matrix: np.ndarray) -> tuple[int, int]:
    """How many positions have i-1 or i+1 as their most similar other position, out of those with any."""
    n = matrix.shape[0]
    adjacent = counted = 0
    for start in range(0, n, BLOCK_ROWS):
        block = matrix[start:start + BLOCK_ROWS].astype(np.float64)
        local = np.arange(len(block))
        block[local, start + local] = -np.inf  # a position is not its own neighbour
        block[np.isnan(block)] = -np.inf
        best = block.argmax(axis=1)
        has_any = np.isfinite(block[local, best])
        adjacent += int((has_any & (np.abs(best - (start + local)) == 1)).sum())
        counted += int(has_any.sum())
    return adjacent, counted


def position_profile(table: np.ndarray, first_row: int = 0) -> tuple[PositionProfile, np.ndarray]:
    """The profile and the cosine matrix it came from (kept for the heatmap)."""
    matrix = position_cosines(table, first_row)
    return profile_from_matrix(matrix), matrix


@dataclass(frozen=True, eq=False)
class PositionsResult:
    """What `embscope positions` reports: the pairs asked for, and the profile (and the heatmap it came from)."""

    table: str
    rows: int  # rows in the table
    first_row: int  # rows before position 0
    dim: int
    pairs: tuple[PositionPair, ...]
    profile: PositionProfile | None
    heatmap: np.ndarray | None  # the cosine matrix the plot draws; None unless asked for
    notes: tuple[str, ...]

    @property
    def positions(self) -> int:
        return max(self.rows - self.first_row, 0)


def positions(emb: Any, pairs: Sequence[tuple[int, int]] = (), *, default: bool = False, profile: bool = False,
              heatmap: bool = False) -> PositionsResult:
    """Cosines of `pairs` (after the default near-to-far set when `default`), and the profile by distance when
    `profile` or `heatmap` asks for it."""
    table = emb.require_position()
    count = max(table.rows - table.first_row, 0)
    chosen = [*(default_pairs(count) if default else ()), *pairs]
    notes = list(table.notes)
    found = position_pairs(table.array, chosen, table.first_row, table.name).pairs if chosen else ()
    if default and not found:
        notes.append(f"the table has {count} position(s): no pair to compare")
    shape, matrix = position_profile(table.array, table.first_row) if profile or heatmap else (None, None)
    return PositionsResult(table.name, table.rows, table.first_row, table.dim, found, shape,
                           matrix if heatmap else None, tuple(notes))
