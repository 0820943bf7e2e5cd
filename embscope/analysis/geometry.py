"""The shape of a whole table as the literature measures it: how narrow a cone its rows fill (the mean cosine,
partition-function isotropy, IsoScore), which dimensions make its cosines (rogue dimensions), how many
directions it uses (the spectrum of the centred table), what is left once the dominant directions are removed
(all-but-the-top), and for a position table the periods it repeats with. docs/geometry.md gives each formula
and its paper.

Everything comes from d x d statistics summed over blocks of rows (compute.moments), never from V x V: one
pass for the sums and the scatter matrix, two eigendecompositions, one pass for the projections. Rows of zero
norm and rows holding NaN or Inf are left out of every figure and counted. A figure that is undefined is None,
with the reason under its key in `reasons`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..compute.moments import Progress, StoredRows, TableMoments, Work, projections, work_for
from ..core.arrays import to_float32
from ..core.role import Role
from .geometry_spectra import Spectra, spectra
from .stages import Stages, quiet

if TYPE_CHECKING:
    from ..core.checkpoint import Table
    from ..embeddings import Embeddings

TOP_SHARES = (1, 3, 10)  # directions whose share of the variance is reported (3: GPT-2's position helix)
ABTT_DIVISOR = 100  # all-but-the-top removes d / 100 directions (Mu & Viswanath 2018), at least one
PERIOD_BLOCK_BYTES = 16 << 20  # columns of a position table transformed at a time
# eigenvalues below d * eps * the largest are rounding, not directions the table uses


@dataclass(frozen=True)
class Dimension:
    """One dimension's part of the mean cosine (Timkey & van Schijndel 2021)."""

    dim: int
    contribution: float  # CC_k: the CC_k of all dimensions sum to the mean cosine
    # |CC_k| / the sum of every |CC_j|: never negative, and CC_k / the mean cosine when all share one sign; None when
    # every contribution is 0
    share: float | None


@dataclass(frozen=True, eq=False)
class Spectrum:
    """The singular values of the centred table (the table less its mean row) and what they say."""

    singular_values: np.ndarray  # float64, largest first
    shares: dict[int, float]  # TOP_SHARES -> the share of the variance (s^2) in that many directions
    effective_rank: float  # exp(-sum p log p), p = s / sum s (Roy & Vetterli 2007)
    participation_ratio: float  # (sum s^2)^2 / sum s^4


@dataclass(frozen=True)
class Period:
    """A period a position table repeats with: T / k positions, and frequency k's share of the power."""

    period: float
    frequency: int
    share: float


@dataclass(frozen=True, eq=False)
class Geometry:
    role: str
    name: str
    rows: int  # the table's rows (a position table's reserved rows included)
    first_row: int  # rows before the first one used (a position table's reserved rows)
    dim: int
    used: int  # rows every figure is over
    zero_rows: int
    not_finite_rows: int
    left_out: tuple[int, ...]  # the first few left-out row ids
    mean_cosine: float | None
    contributions: np.ndarray  # float64 (d,): CC_k of each dimension
    spectrum: Spectrum | None
    partition_isotropy: float | None
    isoscore: float | None
    removed: int  # directions all-but-the-top removes
    abtt_mean_cosine: float | None
    abtt_rows: int  # rows with a part outside the removed directions
    power: np.ndarray | None  # position tables: the power of frequencies 1..T//2 (None: not one, or undefined)
    reasons: dict[str, str] = field(default_factory=dict)  # figure -> why it is None
    notes: tuple[str, ...] = ()
    device: str = "cpu"

    @property
    def dimensions(self) -> list[Dimension]:
        """Every dimension, the largest share first, so a large negative part is listed too (ties: the lower
        dimension)."""
        order = np.lexsort((np.arange(self.dim), -np.abs(self.contributions)))
        size = float(np.abs(self.contributions).sum())
        return [Dimension(int(k), float(self.contributions[k]),
                          float(abs(self.contributions[k]) / size) if size > 0 else None) for k in order]

    @property
    def share_rule(self) -> str:
        """How a dimension's share is taken, in words: the answer says it."""
        mixed = bool((self.contributions > 0).any() and (self.contributions < 0).any())
        if mixed:
            return ("the contributions have mixed signs: each share is |contribution| / the sum of every "
                    "|contribution|, never negative")
        return "each share is the dimension's part of the mean cosine (the contributions share one sign)"

    @property
    def periods(self) -> list[Period] | None:
        """The periods of a position table, the largest share first (ties: the lower frequency); None otherwise."""
        if self.power is None:
            return None
        total = float(self.power.sum())
        positions = self.rows - self.first_row
        order = np.lexsort((np.arange(len(self.power)), -self.power))
        return [Period(positions / (k + 1), int(k + 1), float(self.power[k] / total)) for k in order]


def pair_mean(unit_sum: np.ndarray, count: int) -> float | None:
    """The mean cosine over every pair of distinct rows, from the sum s of n unit rows: (s.s - n) / (n (n - 1))."""
    if count < 2:
        return None
    return float((unit_sum @ unit_sum - count) / (count * (count - 1)))


def contributions(unit_sum: np.ndarray, unit_squares: np.ndarray, count: int) -> np.ndarray:
    """CC_k = ((sum_i u_ik)^2 - sum_i u_ik^2) / (n (n - 1)) for each dimension k; NaN for fewer than 2 rows."""
    if count < 2:
        return np.full(len(unit_sum), np.nan)
    shares: np.ndarray = (unit_sum * unit_sum - unit_squares) / (count * (count - 1))
    return shares


def spectrum_of(squares: np.ndarray) -> Spectrum | None:
    """The spectrum figures from the squared singular values (largest first); None when they are all 0."""
    total = float(squares.sum())
    if not total > 0:
        return None
    singular = np.sqrt(squares)
    p = singular[singular > 0] / singular.sum()
    shares = {k: float(squares[:k].sum() / total) for k in TOP_SHARES}
    return Spectrum(singular, shares, float(np.exp(-(p * np.log(p)).sum())), total ** 2 / float((squares ** 2).sum()))


def isoscore(squares: np.ndarray) -> float | None:
    """IsoScore (Rudman et al. 2022) from the variances along the principal directions, as the authors' package
    computes it (IsoScore 2.0.1: the eigenvalues of the covariance, normalised to length sqrt(n)); scale drops out."""
    n = len(squares)
    length = float(np.sqrt((squares ** 2).sum()))
    if n < 2 or not length > 0:
        return None
    normalised = squares * math.sqrt(n) / length
    defect = float(np.sqrt(((normalised - 1) ** 2).sum())) / math.sqrt(2 * (n - math.sqrt(n)))
    return ((n - defect ** 2 * (n - math.sqrt(n))) ** 2 - n) / (n * (n - 1))


def partition_isotropy(log_z_plus: np.ndarray, log_z_minus: np.ndarray) -> float:
    """I(W) = min_c Z(c) / max_c Z(c) (Mu & Viswanath 2018), from log Z: the ratio never over- or underflows
    on the way."""
    logs = np.concatenate([log_z_plus, log_z_minus])
    return float(np.exp(logs.min() - logs.max()))


def removed_directions(dim: int) -> int:
    return max(1, dim // ABTT_DIVISOR)


def period_power(rows: StoredRows) -> np.ndarray:
    """The power of the centred position table along positions: |rfft over positions|^2 summed over the
    dimensions, for frequencies k = 1..T//2; computed a block of columns at a time."""
    positions = rows.array[rows.first:]
    count = positions.shape[0]
    power = np.zeros(count // 2, dtype=np.float64)
    columns = max(1, PERIOD_BLOCK_BYTES // (16 * max(1, count)))
    for start in range(0, rows.dim, columns):
        raw = np.asarray(positions[:, start:start + columns])
        x = np.array(to_float32(raw, rows.dtype) if rows.dtype == "bfloat16" else raw, dtype=np.float64)
        x -= x.mean(axis=0)
        spectrum = np.fft.rfft(x, axis=0)[1:count // 2 + 1]
        power += (spectrum.real ** 2 + spectrum.imag ** 2).sum(axis=1)
    return power


def table_geometry(rows: StoredRows, role: str, name: str, *, device: str = "auto", stages: Stages = quiet,
                   _work: Work | None = None) -> Geometry:
    """Every figure for one table (`role` position: the periods too). _work: tests only, to run the torch path on
    the CPU."""
    work, device_note = (_work, None) if _work is not None else work_for(device)
    removed = removed_directions(rows.dim)
    # V < d: from the rows' V x V Gram matrices, never a d x d one (geometry_spectra)
    found_spectra = spectra(rows, work, removed, stages(f"{role} table: sums and scatter"))
    moments = found_spectra.moments
    used, dim = moments.used, rows.dim
    reasons: dict[str, str] = {}
    notes = [note for note in (device_note, left_out_note(moments, rows.first, role == Role.position)) if note]
    mean = pair_mean(moments.unit_sum, used)
    if mean is None:
        reasons["mean_cosine"] = f"{used} row{'s' * (used != 1)} with a direction: a mean over pairs needs 2"
    elif not contributions(moments.unit_sum, moments.unit_squares, used).any():
        reasons["share"] = "every dimension contributes 0: a share of nothing is undefined"
    squares = found_spectra.squares
    spectrum = spectrum_of(squares) if used >= 2 else None
    if spectrum is None:
        reasons["spectrum"] = same_rows(used)
    score = isoscore(squares) if spectrum is not None else None
    if score is None:
        reasons["isoscore"] = (f"the table is {dim} wide: IsoScore needs 2 or more dimensions" if dim < 2
                               else same_rows(used))
    isotropy, abtt, abtt_rows = second_pass(rows, found_spectra, removed, work, stages(f"{role} table: partition "
                                                                                       "function"), reasons)
    if isotropy is None and "partition_isotropy" not in reasons:
        reasons["partition_isotropy"] = "no row with a direction: the partition function is a sum over rows"
    if abtt is None:
        reasons["all_but_the_top"] = (
            f"removing the mean and {removed} direction{'s' * (removed != 1)} of a {dim}-wide table leaves nothing"
            if removed >= dim else f"{abtt_rows} row{'s' * (abtt_rows != 1)} with a part outside the removed "
                                   "directions: a mean over pairs needs 2")
    power = None
    if role == Role.position:
        power, why = position_power(rows, moments)
        if why:
            reasons["periods"] = why
    return Geometry(role, name, rows.rows + rows.first, rows.first, dim, used, moments.zero, moments.not_finite,
                    moments.left_out, mean, contributions(moments.unit_sum, moments.unit_squares, used), spectrum,
                    isotropy, score, removed, abtt, abtt_rows, power, reasons, tuple(notes), work.device)


def second_pass(rows: StoredRows, found: Spectra, removed: int, work: Work, progress: Progress | None,
                reasons: dict[str, str]) -> tuple[float | None, float | None, int]:
    """The partition isotropy and all-but-the-top's mean cosine, and the rows that mean is over."""
    if not found.moments.used or found.uncentred is None:
        return None, None, 0
    passed = projections(rows, found.moments, found.uncentred, found.top, work, progress)
    # a direction orthogonal to every row (left out of the Gram path's) has Z = the number of rows
    null = [] if found.null_log_z is None else [found.null_log_z]
    isotropy: float | None = partition_isotropy(np.concatenate([passed.log_z_plus, null]), passed.log_z_minus)
    if not math.isfinite(isotropy or 0.0):
        isotropy = None
        reasons["partition_isotropy"] = "log Z is not finite in float64: rows too large even in log space"
    abtt = pair_mean(passed.residual_unit_sum, passed.residual_rows) if removed < rows.dim else None
    return isotropy, abtt, passed.residual_rows


def position_power(rows: StoredRows, moments: TableMoments) -> tuple[np.ndarray | None, str | None]:
    """The power spectrum along positions, or why there is none: it needs every position, in order."""
    if moments.not_finite:
        return None, (f"{moments.not_finite:,} position rows hold NaN or Inf: the spectrum along positions needs "
                      "every position")
    if rows.rows < 2:
        return None, f"{rows.rows} position{'s' * (rows.rows != 1)}: a period needs 2 or more"
    power = period_power(rows)
    if not power.sum() > 0:
        return None, "every position row is the same: the centred table has no power at any period"
    return power, None


def same_rows(used: int) -> str:
    if used < 2:
        return f"{used} row{'s' * (used != 1)} with a direction: the spectrum of a centred table needs 2"
    return "every row used is the same: the centred table is zero"


def left_out_note(moments: TableMoments, first: int, position: bool) -> str | None:
    if not (moments.zero or moments.not_finite):
        return None
    parts = [f"{count:,} row{'s' * (count != 1)} {what}" for count, what in (
        (moments.zero, "of zero norm"), (moments.not_finite, "holding NaN or Inf")) if count]
    listed = ", ".join(str(row + first) for row in moments.left_out)
    more = ", ..." if moments.zero + moments.not_finite > len(moments.left_out) else ""
    periods = " (but the periods, which take every position in order)" if position and moments.zero else ""
    return f"{' and '.join(parts)} left out (rows {listed}{more}): every figure is over the other {moments.used:,}" \
        + periods


def stored_rows(table: Table) -> StoredRows:
    """The table's rows for a pass: a half-precision table as stored (widened block by block, no float32 copy)."""
    first = table.first_row if table.role is Role.position else 0
    if table.tensor.dtype in ("bfloat16", "float16") and "array" not in table.__dict__:
        return StoredRows(table.tensor.read(), table.tensor.dtype, first)
    return StoredRows(table.array, "float32", first)


def geometry(emb: Embeddings, table: Role | str = Role.token, *, device: str = "auto",
             stages: Stages = quiet) -> Geometry:
    """The geometry of one table of a checkpoint: token (default), position, or an untied output projection."""
    chosen = emb.table(table)
    return table_geometry(stored_rows(chosen), chosen.role, chosen.name, device=device, stages=stages)
