"""How similar learned position rows are: chosen pairs, and how similarity falls with distance.

Positions are table rows offset by `first_row` (position_offsets: RoBERTa-family padding_idx + 1, MPNet and OPT 2).
Undefined cosines (a zero, NaN or Inf row) are NaN here; rendering turns them into null.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from ..compute import cosine_blocks, pair_cosines, row_norms, topk_rows, unit_rows
from ..core.errors import OptionError, PositionError
from ..core.text import quote
from .untrained import Untrained, find_untrained

if TYPE_CHECKING:
    from ..embeddings import Embeddings
    from .stages import Progress

NOMINAL_LAST = 511  # the default pairs are written for a 512-row table and scaled to the real one
PROFILE_BLOCK_BYTES = 16 << 20  # float64 work space per block of rows of the cosine matrix
# pairs of positions compared at most (a few seconds); a longer table is profiled from evenly spread blocks of
# positions, each compared with every later one: 8,192 positions are 34M pairs, 200,000 would be 20 billion
PROFILE_MAX_PAIRS = 250_000_000
HEATMAP_MAX_SIDE = 1024  # the heatmap is averaged down to at most this many cells a side


@dataclass(frozen=True)
class PositionPair:
    i: int
    j: int
    distance: int  # |j - i|, in positions
    cosine: float  # NaN when undefined; `reason` says why
    reason: str | None = None
    never_trained: bool = False  # i or j is a position that never trained (analysis.untrained): rows as initialised


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
    sampled_every: int = 1  # 1: every position compared with every other; n: only every n-th block of positions

    @property
    def offsets(self) -> np.ndarray:
        return np.arange(1, len(self.mean) + 1)

    def summary(self) -> list[OffsetSummary]:
        """Offsets 1, 2, 4, 8, ... and the longest, T-1."""
        last = len(self.mean)
        picks = [k for k in (2 ** e for e in range(last.bit_length())) if k < last] + ([last] if last else [])
        return [OffsetSummary(k, float(self.mean[k - 1]), float(self.std[k - 1]), int(self.count[k - 1]))
                for k in picks]


def empty_offsets_note(profile: PositionProfile) -> list[str]:
    """Why a distance the profile lists has no mean: every pair at it holds a row with no cosine (zero, NaN, Inf);
    g2p_id's sinusoid keeps position 0 at zero, so distance T-1's one pair has none."""
    empty = [s.offset for s in profile.summary() if s.pairs == 0]
    if not empty or profile.sampled_every > 1:  # a sparse profile leaves pairs out by design: said apart
        return []
    listed = ", ".join(map(str, empty))
    note = (f"distance{'s' * (len(empty) > 1)} {listed}: no pair has a cosine (every pair there holds a zero, NaN "
            "or Inf row), so mean and std are null")
    return [note]


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


def integer_pairs(pairs: Iterable[Sequence[object]]) -> list[tuple[int, int]]:
    """Each pair as two ints; a pair of another length, or a position that is no whole number (1.5 named row 1,
    NaN and "3" raised from numpy), is refused."""
    found = []
    for pair in pairs:
        items = tuple(pair) if isinstance(pair, Iterable) and not isinstance(pair, (str, bytes)) else ()
        if len(items) != 2:
            raise OptionError(f"expected pairs of two positions, found {quote(pair)}", option="pairs")
        if not all(isinstance(p, numbers.Integral) and not isinstance(p, bool) for p in items):
            raise OptionError(f"expected positions that are integers, found the pair {quote(pair)}", option="pairs")
        found.append((int(items[0]), int(items[1])))  # type: ignore[call-overload]  # Integral, checked above
    return found


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
    pairs = integer_pairs(pairs)
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


def position_profile(table: np.ndarray, first_row: int = 0, *, heatmap: bool = True, block_rows: int | None = None,
                     progress: Progress | None = None) -> tuple[PositionProfile, Heatmap | None]:
    """How similarity falls with distance, and (when `heatmap`) the cosine heatmap averaged down to at most
    HEATMAP_MAX_SIDE cells a side. Memory grows with the positions, never with their square: the profile
    comes from blocks of the upper triangle of the cosine matrix, the heatmap from averaged unit rows.
    Time grows with the square up to PROFILE_MAX_PAIRS pairs; past it only evenly spread blocks of positions
    are compared (profile.sampled_every says how sparse). progress(done, total) follows the work."""
    positions = np.arange(first_row, table.shape[0], dtype=np.int64)
    n = positions.size
    offsets = OffsetStats(max(n - 1, 0))
    step = block_rows if block_rows is not None else max(1, min(1024, PROFILE_BLOCK_BYTES // (8 * max(1, n))))
    every = max(1, math.ceil(n * n / 2 / PROFILE_MAX_PAIRS))
    flat = np.empty(min(step, n) * (n + step), dtype=np.float32)
    for start, block in cosine_blocks(table, rows=positions, block_rows=step, upper=True, every=every):
        rows, width = block.shape[0], n - start + step
        if start + 1 < n:
            padded = flat[:rows * width].reshape(rows, width)
            padded[:, :n - start] = block
            padded[:, n - start:] = np.nan  # past the last position
            # skewed[r, k - 1] = padded[r, r + k] = cos(p_i, p_i+k) for i = start + r
            offsets.add(np.lib.stride_tricks.as_strided(flat[1:], shape=(rows, n - 1 - start),
                                                        strides=((width + 1) * 4, 4), writeable=False))
        if progress is not None:
            progress(start + rows, 2 * n)
    adjacent, counted = nearest_adjacent(table[first_row:], block_rows,
                                         None if progress is None else lambda done, _: progress(n + done, 2 * n),
                                         every=every)
    profile = PositionProfile(offsets.mean(), offsets.std(), offsets.count,
                              adjacent / counted if counted else float("nan"), counted, every)
    return profile, pooled_heatmap(table, positions) if heatmap else None


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
        std: np.ndarray = np.sqrt(np.divide(self.squares, self.count, out=np.full(self.count.shape, np.nan),
                                            where=self.count > 0))
        return std


def pooled_heatmap(table: np.ndarray, positions: np.ndarray) -> Heatmap:
    """The cosine matrix averaged over square cells of `cell` positions a side, undefined cosines left out.
    The mean of u_i . u_j over i in one cell and j in another is the dot product of the cells' mean unit
    rows, so no cosine between two positions is ever computed for it."""
    n = positions.size
    cell = max(1, math.ceil(n / HEATMAP_MAX_SIDE))
    side = math.ceil(n / cell)
    unit, _, valid = unit_rows(table, rows=positions)
    sums = np.zeros((side * cell, unit.shape[1]), dtype=np.float64)
    sums[:n] = unit
    counts = np.zeros(side * cell, dtype=np.int64)
    counts[:n] = valid
    with np.errstate(invalid="ignore", divide="ignore"):  # a cell of invalid rows only is NaN
        means = sums.reshape(side, cell, -1).sum(axis=1) / counts.reshape(side, cell).sum(axis=1)[:, None]
    return Heatmap((means @ means.T).astype(np.float32), n, cell)


def nearest_adjacent(table: np.ndarray, block_rows: int | None = None, progress: Progress | None = None,
                     every: int = 1) -> tuple[int, int]:
    """How many positions have i-1 or i+1 as their most similar other position (ties to the lower), out of
    those with any; every: only every so many positions are asked (each against all)."""
    if table.shape[0] == 0:
        return 0, 0
    asked = np.arange(0, table.shape[0], every)
    best = topk_rows(table, 1, rows=asked, device="cpu", block_rows=block_rows, progress=progress).ids[:, 0]
    found = best >= 0
    adjacent = np.abs(best - asked) == 1
    return int((found & adjacent).sum()), int(found.sum())


@dataclass(frozen=True, eq=False)
class PositionsResult:
    """What `embscope positions` reports: the pairs asked for, and the profile (and the heatmap drawn from it)."""

    table: str
    rows: int  # rows in the table
    first_row: int  # rows before position 0
    dim: int
    pairs: tuple[PositionPair, ...]
    profile: PositionProfile | None
    heatmap: Heatmap | None  # what the plot draws; None unless asked for
    notes: tuple[str, ...]
    trained: PositionProfile | None = None  # the profile of the positions before a never-trained tail

    @property
    def positions(self) -> int:
        return max(self.rows - self.first_row, 0)


def positions(emb: Embeddings, pairs: Sequence[tuple[int, int]] = (), *, default: bool = False, profile: bool = False,
              heatmap: bool = False) -> PositionsResult:
    """Cosines of `pairs` (after the default near-to-far set when `default`), and the profile by distance when
    `profile` or `heatmap` asks for it."""
    table = emb.require_position()
    count = max(table.rows - table.first_row, 0)
    chosen = [*(default_pairs(count) if default else ()), *pairs]
    found = position_pairs(table.array, chosen, table.first_row, table.name).pairs if chosen else ()
    notes = list(table.notes)  # after the read: it may add one
    if default and not found:
        notes.append(f"the table has {count} position(s): no pair to compare")
    shape, cells = (position_profile(table.array, table.first_row, heatmap=heatmap) if profile or heatmap
                    else (None, None))
    if shape is not None:
        notes += empty_offsets_note(shape)
    never = find_untrained(table.array, row_norms(table.array), "position", emb.checkpoint.config, table.first_row)
    found, said = marked_untrained(found, never, table.first_row, shape is not None)
    trained = trained_profile(table.array, table.first_row, never) if shape is not None else None
    if trained is not None:
        said.append(trained_note(trained))
    return PositionsResult(table.name, table.rows, table.first_row, table.dim, found, shape, cells,
                           (*said, *notes), trained)


def trained_profile(table: np.ndarray, first_row: int, never: Untrained) -> PositionProfile | None:
    """The profile of the positions before a never-trained tail (the model's longest sequence), where the tail is
    all the table's never-trained rows (and any zero or NaN rows among or after them) and at least two positions come
    before it: the figures of the positions the model learnt, which a long tail of rows as initialised would drown."""
    if not never.contrasted:
        return None
    start = int(never.rows[0])
    norms = row_norms(table[start:])
    tail = ~(np.isfinite(norms) & (norms > 0))  # a zero or NaN row in the tail is no trained position to stop it
    tail[never.rows - start] = True
    if not tail.all() or start - first_row < 2:
        return None
    return position_profile(table[:start], first_row, heatmap=False)[0]


def trained_note(profile: PositionProfile) -> str:
    last = len(profile.mean)
    return (f"among positions 0-{last} alone (those before the never-trained ones): mean cos(p_i, p_i+1) "
            f"{profile.mean[0]:+.4f}, nearest neighbour is i-1 or i+1 for {100 * profile.nearest_is_adjacent:.2f}% "
            f"of {profile.positions_counted} positions")


def marked_untrained(pairs: Sequence[PositionPair], never: Untrained, first_row: int,
                     profiled: bool) -> tuple[tuple[PositionPair, ...], list[str]]:
    """The pairs with those that hold a never-trained position marked, and the note that names the evidence: a
    cosine between rows still as initialised says nothing the model learnt about those positions."""
    if not never.count:
        return tuple(pairs), []
    if not never.contrasted:  # the whole table at init: never trained, or trained too little to tell; no pair apart
        return tuple(pairs), [never.evidence]
    untrained = set((never.rows - first_row).tolist())
    marked = tuple(replace(p, never_trained=p.i in untrained or p.j in untrained) for p in pairs)
    held = [f"{p.i}:{p.j}" for p in marked if p.never_trained]
    parts = [never.evidence]
    if held:
        parts.append(f"the pair{'s' * (len(held) > 1)} {', '.join(held)} hold{'s' * (len(held) == 1)} such a "
                     "position: a cosine between rows as initialised, not between positions the model learnt")
    if profiled:
        parts.append("the profile by distance counts them too")
    return marked, ["; ".join(parts)]
