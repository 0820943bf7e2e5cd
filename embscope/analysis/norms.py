"""Row norms of an embedding table: summary, anomalies (with the rule that flagged each) and near-duplicate
rows; under-trained tokens are analysis.undertrained's job. Norms are read block by block, so a memory-mapped table may
exceed memory; the duplicate search (analysis.duplicates) holds unit rows and is skipped above DUPLICATE_MAX_BYTES."""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Generic, TypeVar, overload

import numpy as np

from ..compute import row_norms
from ..core.errors import Message, OptionError
from ..core.role import Role
from ..core.text import quote
from ..naming import row_name
from .duplicates import DUPLICATE_COSINE, Duplicate, DuplicateSearch, find_duplicates
from .median import median_of
from .untrained import AT_ZERO, Untrained, find_untrained

if TYPE_CHECKING:
    from ..core.tokenizer import Tokenizer
    from ..embeddings import Embeddings

__all__ = [
    "DUPLICATE_COSINE",
    "Anomaly",
    "Duplicate",
    "DuplicateSearch",
    "NormSummary",
    "NormsReport",
    "RowListing",
    "find_duplicates",
    "judged",
    "median_and_mad",
    "norms_report",
    "robust_z",
    "row_norms",
    "rule_text",
    "running_median",
    "summarize",
    "summarize_trained",
]

MAD_SCALE = 1.4826  # makes the MAD estimate the standard deviation for normally distributed norms
# Gaussian-noise tables of 64..50,000 rows (d 4..768) reach a largest robust z of about 5.0, so 6 flags
# none of them, while a row of 2.46 in a table whose norms are 0.43 +- 0.03 scores about 68.
DEFAULT_THRESHOLD = 6.0
EQUAL_NORMS_TOLERANCE = 1e-6  # relative difference from the median flagged when MAD is 0
SUMMARY_BLOCK_ROWS = 1 << 16  # rows whose robust z is worked out at a time: a few MB of temporaries
# a position's norm is judged against the running median of the trained positions around it: TREND_SHARE of the
# table on each side, from TREND_MIN to TREND_MAX rows (a smooth rise and fall of norms is no anomaly)
TREND_SHARE = 0.02
TREND_MIN = 2
TREND_MAX = 10
# the spread a position's residual is measured against is at least this share of the median norm: a noiseless smooth
# curve has residuals of almost nothing, and its bends would otherwise stand out (a table of one norm keeps MAD 0)
TREND_FLOOR = 0.01


@dataclass(frozen=True)
class Anomaly:
    index: int
    norm: float  # NaN for a row with NaN values, Inf for a row with Inf values
    ratio_to_mean: float
    reason: str  # short ("z 16.2", "zero row"): the rule itself is NormSummary's, stated once
    z: float  # robust z, signed; NaN for a row with no finite norm, +-Inf off a median every other row shares


Item = TypeVar("Item")


class RowListing(Sequence[Item], Generic[Item]):
    """Rows picked out of a table, kept as an array of row ids: the object that describes a row is made only
    when that row is read, so a million flagged rows cost 8 bytes each, not an object each."""

    def __init__(self, indices: np.ndarray, describe: Callable[[int], Item]):
        self.indices = indices  # int64 row ids, in listing order
        self._describe = describe  # position in the listing -> the object for that row

    def __len__(self) -> int:
        return len(self.indices)

    @overload
    def __getitem__(self, key: int) -> Item: ...

    @overload
    def __getitem__(self, key: slice) -> tuple[Item, ...]: ...

    def __getitem__(self, key: int | slice) -> Item | tuple[Item, ...]:
        if isinstance(key, slice):
            return tuple(self._describe(i) for i in range(*key.indices(len(self))))
        position = operator.index(key)
        if position < 0:
            position += len(self)
        if not 0 <= position < len(self):
            raise IndexError("row listing index out of range")
        return self._describe(position)

    def __iter__(self) -> Iterator[Item]:
        return (self._describe(i) for i in range(len(self)))

    def __add__(self, other: RowListing[Item]) -> RowListing[Item]:
        first = len(self)
        return RowListing(np.concatenate([self.indices, other.indices]),
                          lambda i: self._describe(i) if i < first else other._describe(i - first))

    def __repr__(self) -> str:
        return f"RowListing({len(self)} rows)"


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
    flagged: np.ndarray  # int64 row ids of the anomalies: rows without a finite norm first, then largest |z| first
    # what z measures: the norms (trend None), or their residuals from `trend`, the running median along the table;
    # rows left out (never trained) are NaN in it. center and spread: the median and MAD the z is taken from.
    trend: np.ndarray | None = None
    judged: np.ndarray | None = None  # the values z is taken of (None: the norms themselves)
    center: float = math.nan
    spread: float = math.nan
    half_window: int = 0  # rows on each side in the running median
    # the rows left out of the rule (NEVER_TRAINED_ROWS, UNDECIDED_ROWS, KEPT_NORM_ROWS, AT_ZERO_ROWS)
    left_out_as: str = "never-trained rows"

    @cached_property
    def robust_z(self) -> np.ndarray:
        """float64 (rows,) signed robust z of every row (see robust_z); NaN where a norm is not finite or the row
        was left out. Made when asked for (the plot): the summary itself needs it only block by block."""
        if self.judged is None:
            return robust_z(self.norms, self.median, self.mad)
        return robust_z(self.judged, self.center, self.spread)

    @property
    def rows(self) -> int:
        return len(self.norms)

    @property
    def anomalies(self) -> RowListing[Anomaly]:
        """The flagged rows, with the rule that flagged each; Anomaly objects are made as they are read."""
        return RowListing(self.flagged, lambda i: self.anomaly(int(self.flagged[i])))

    def anomaly(self, index: int) -> Anomaly:
        """Row `index` as an Anomaly: its norm, its ratio to the mean, its robust z and a short reason."""
        norm = float(self.norms[index])
        z = float(self.robust_z[index]) if self.judged is not None else \
            float(robust_z(self.norms[index:index + 1], self.median, self.mad)[0])
        if math.isnan(norm):
            reason = "NaN values"
        elif math.isinf(norm):
            reason = "Inf values"
        elif norm == 0:
            reason = "zero row"
        elif math.isinf(z):
            reason = "off the shared median"
        else:
            reason = f"z {z:.3g}"
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = float(np.float64(norm) / self.mean)
        return Anomaly(index, norm, ratio, reason, z)


def median_and_mad(norms: np.ndarray) -> tuple[float, float]:
    """The median of the finite norms and their median absolute deviation from it (NaN, NaN when none). One copy
    of the finite norms is worked in place: a table of 2**26 rows of one column holds 8 bytes a row per copy."""
    finite = norms[np.isfinite(norms)]
    if not len(finite):
        return math.nan, math.nan
    median = median_of(finite, overwrite=True)
    np.subtract(finite, median, out=finite)
    return median, median_of(np.abs(finite, out=finite), overwrite=True)


def robust_z(norms: np.ndarray, median: float, mad: float) -> np.ndarray:
    """(norm - median) / (1.4826 MAD), signed. When MAD is 0, +-Inf for a norm off the median by more than a
    relative EQUAL_NORMS_TOLERANCE, else 0. NaN where the norm is not finite."""
    with np.errstate(divide="ignore", invalid="ignore"):
        z = norms - median  # the one array made: every step below works in it
        if mad > 0:
            z /= MAD_SCALE * mad
        else:
            on = np.abs(z) <= EQUAL_NORMS_TOLERANCE * max(abs(median), np.finfo(np.float64).tiny)
            np.sign(z, out=z)
            z *= np.inf
            z[on] = 0.0
    z[~np.isfinite(norms)] = np.nan
    return z


def check_threshold(threshold: float) -> None:
    """A threshold NaN flagged no row, and one below 0 every row, as the command line refuses them."""
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or not 0 <= threshold < math.inf:
        raise OptionError(f"expected a threshold of 0 or more and finite, found {quote(threshold)}", option="threshold")


def summarize(norms: np.ndarray, threshold: float = DEFAULT_THRESHOLD) -> NormSummary:
    """Statistics over the finite norms, and the rows flagged as anomalies: zero, NaN and Inf rows always;
    otherwise |robust z| > threshold (when MAD is 0: any norm off the shared median by a relative 1e-6).
    Rows without a finite norm are listed first, then the largest |z| first."""
    check_threshold(threshold)
    finite_rows = np.isfinite(norms)
    count = int(finite_rows.sum())
    mean, low, high = (math.nan, math.nan, math.nan)
    if count:  # over the finite rows, without a copy of them
        mean = float(np.mean(norms, where=finite_rows))
        low = float(np.min(norms, where=finite_rows, initial=np.inf))
        high = float(np.max(norms, where=finite_rows, initial=-np.inf))
    median, mad = median_and_mad(norms)
    is_flagged = finite_rows  # reused in place: z block by block, never an array of it for every row
    for start in range(0, len(norms), SUMMARY_BLOCK_ROWS):
        block = norms[start:start + SUMMARY_BLOCK_ROWS]
        z = robust_z(block, median, mad)
        is_flagged[start:start + len(block)] = ~np.isfinite(block) | (block == 0) | (z > threshold) | (z < -threshold)
    flagged = np.flatnonzero(is_flagged)
    del is_flagged, finite_rows
    severity = np.empty(len(flagged))
    for start in range(0, len(flagged), SUMMARY_BLOCK_ROWS):
        rows = norms[flagged[start:start + SUMMARY_BLOCK_ROWS]]
        part = np.abs(robust_z(rows, median, mad))
        part[~np.isfinite(rows)] = np.inf
        severity[start:start + len(rows)] = part
    if len(severity) > 1 and not (severity == severity[0]).all():  # all alike (every row zero): in row order already
        flagged = flagged[np.argsort(np.negative(severity, out=severity), kind="stable")]
    return NormSummary(norms, count, mean, median, low, high, mad, threshold, flagged)


def running_median(values: np.ndarray, half: int) -> np.ndarray:
    """The median of each finite value's neighbours along the array (itself and up to `half` finite values on
    each side, fewer at the ends); NaN where the value is not finite. Non-finite values are skipped, not counted."""
    trend = np.full(len(values), np.nan)
    kept = np.flatnonzero(np.isfinite(values))
    if not len(kept):
        return trend
    padded = np.concatenate([np.full(half, np.nan), values[kept], np.full(half, np.nan)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1)
    trend[kept] = np.nanmedian(windows, axis=1)  # every window holds its own finite centre
    return trend


# what the rows an untrained verdict keeps out of the anomaly rule are, in its words
NEVER_TRAINED_ROWS = "never-trained rows"
UNDECIDED_ROWS = "rows that cannot be told from their initialisation"  # an undecided majority (analysis.untrained)
KEPT_NORM_ROWS = "rows that keep their initialisation's norm"  # a majority that moved, at its norm (untrained.near_init)
AT_ZERO_ROWS = "rows within a quantization step of zero"  # most of a quantized table, at its resolution (analysis.lattice)


def trend_half_window(rows: int) -> int:
    return int(min(TREND_MAX, max(TREND_MIN, round(TREND_SHARE * rows))))


def mostly_zero(norms: np.ndarray) -> bool:
    """Zero rows are half the finite rows or more (a pruned or padded vocabulary): measured with them, the median and
    MAD are 0 and every other row stands out, so they are left out of the rule (still flagged as zero rows)."""
    zero = int(np.count_nonzero(norms == 0))
    return zero > 0 and 2 * zero >= int(np.count_nonzero(np.isfinite(norms))) > zero + 1


def summarize_trained(norms: np.ndarray, threshold: float = DEFAULT_THRESHOLD, *, left_out: np.ndarray | None = None,
                      along: bool = False, first_row: int = 0, left_out_as: str = "never-trained rows") -> NormSummary:
    """summarize, with the rows of `left_out` (never trained) kept out of the rule and never flagged for their
    norm, and, when `along` (a position table), each norm judged against the running median of its trained
    neighbours: z of the residual, so a smooth trend along the table is no anomaly. The table's statistics
    (count, mean, median, min, max) stay those of every finite row. Rows before `first_row` (a position table's
    reserved rows, never used by design) are neither judged nor flagged."""
    plain = summarize(norms, threshold)
    if left_out is None and not along:
        if not mostly_zero(norms):
            return plain
        left_out_as = "zero rows"  # the rule measured among the others, which no rule here called trained
    judged = norms.copy()
    judged[norms == 0] = np.nan  # zero rows are flagged anyway, and are no trend
    judged[:first_row] = np.nan
    if left_out is not None:
        judged[left_out] = np.nan
    half = trend_half_window(int(np.isfinite(judged).sum())) if along else 0
    trend = running_median(judged, half) if along else None
    if trend is not None:
        judged -= trend
    center, spread = median_and_mad(judged)
    if trend is not None and plain.mad > 0:
        spread = max(spread, TREND_FLOOR * float(np.nanmedian(np.abs(judged + trend))) / MAD_SCALE)
    z = robust_z(judged, center, spread)
    with np.errstate(invalid="ignore"):
        is_flagged = ~np.isfinite(norms) | (norms == 0) | (np.abs(z) > threshold)
    is_flagged[:first_row] = False
    flagged = np.flatnonzero(is_flagged)
    # rows with no finite norm first, then zero rows (no residual of their own), then the largest |z|
    severity = np.where(np.isfinite(norms[flagged]), np.nan_to_num(np.abs(z[flagged]), nan=np.finfo(np.float64).max),
                        np.inf)
    flagged = flagged[np.argsort(-severity, kind="stable")]
    return replace(plain, flagged=flagged, trend=trend, judged=judged, center=center, spread=spread,
                   threshold=threshold, half_window=half, left_out_as=left_out_as)


def rule_text(threshold: float, mad: float, summary: NormSummary | None = None) -> str:
    """The anomaly rule in one line; with a summary that judged trained rows only, or residuals along the table,
    that too."""
    trend = summary is not None and summary.trend is not None
    # rows outside an undecided majority (analysis.untrained) cannot be called trained either
    trained = summary is None or summary.left_out_as == NEVER_TRAINED_ROWS
    among = f" among {'trained' if trained else 'the other'} rows" if summary is not None and summary.judged is not None \
        else ""
    if summary is not None and summary.left_out_as == KEPT_NORM_ROWS:  # whom the rule left out, by what they showed
        among += f"; the {KEPT_NORM_ROWS} are judged apart"
    if summary is not None and summary.judged is not None:
        mad = summary.spread
    if math.isnan(mad):
        return "no row has a finite norm: zero, NaN and Inf rows are flagged"
    if trend and summary is not None:
        measured = (f"a position is flagged when the robust z of its residual from the running median of its "
                    f"{'trained' if trained else 'other'} neighbours ({summary.half_window} on each side), (residual - median residual) / "
                    f"({MAD_SCALE} x MAD), the MAD at least {TREND_FLOOR:.0%} of the median norm / {MAD_SCALE}")
        if mad > 0:
            return (f"{measured}, is beyond +-{threshold:g} (MAD {mad:.4g}); zero, NaN and Inf rows are always "
                    f"flagged; {summary.left_out_as} are judged apart")
        return ("every finite norm equals its neighbours' running median (MAD is 0): a position is flagged when it "
                "differs from it by more than a relative 1e-6; zero, NaN and Inf rows are always flagged")
    if mad > 0:
        return (f"a row is flagged when its robust z = (norm - median) / ({MAD_SCALE} x MAD) is beyond +-{threshold:g} "
                f"(MAD {mad:.4g}{among}); zero, NaN and Inf rows are always flagged")
    return ("every finite norm equals the median (MAD is 0): a row is flagged when it differs from the median by "
            "more than a relative 1e-6; zero, NaN and Inf rows are always flagged")


@dataclass(frozen=True, eq=False)
class NormsReport:
    """What `embscope norms` reports about one table: the statistics and flagged rows, and near-duplicate rows.
    Under-trained tokens are `embscope undertrained`'s (analysis.undertrained)."""

    role: Role  # position, token or output
    name: str
    dim: int
    first_row: int  # rows before position 0
    summary: NormSummary
    duplicates: DuplicateSearch
    notes: tuple[str, ...]
    tokenizer: Tokenizer | None = field(default=None, repr=False)  # names token rows; None for positions, or when there is none
    untrained: Untrained | None = None  # the rows that never trained (analysis.untrained), kept out of the anomalies

    def label(self, index: int) -> str:
        """How a row is called: `position 5`, a reserved row before position 0, or its token (`#id` when unnamed)."""
        return row_name(self.tokenizer, self.role, index, self.first_row)


def judged(array: np.ndarray, norms: np.ndarray, role: Role | str, config: dict[str, object] | None = None,
           first_row: int = 0, threshold: float = DEFAULT_THRESHOLD) -> tuple[NormSummary, Untrained]:
    """The verdicts `norms` gives a table, for every command that carries them (norms, report, map, export): the
    rows that never trained (analysis.untrained), and the anomalies among the others (summarize_trained)."""
    untrained = find_untrained(array, norms, str(role), config, first_row)
    left_out = untrained.mask(len(norms)) if untrained.count and not untrained.whole else None
    along = str(role) == Role.position
    left_out_as = (KEPT_NORM_ROWS if untrained.near else AT_ZERO_ROWS if untrained.kind == AT_ZERO
                   else UNDECIDED_ROWS if untrained.undecided else NEVER_TRAINED_ROWS)
    return summarize_trained(norms, threshold, left_out=left_out, along=along, first_row=first_row if along else 0,
                             left_out_as=left_out_as), untrained


def norms_report(emb: Embeddings, table: str | None = None, threshold: float = DEFAULT_THRESHOLD) -> NormsReport:
    """Norms of one table of `emb`: `table` position, token or output; None is the position table when there is one."""
    role = table if table is not None else ("position" if emb.position is not None else "token")
    chosen = emb.table(role)
    norms = row_norms(chosen.array)
    notes = list(chosen.notes)  # after the read: it may add one
    summary, untrained = judged(chosen.array, norms, chosen.role, emb.checkpoint.config, chosen.first_row, threshold)
    duplicates = find_duplicates(chosen.array, norms)
    if duplicates.note:
        notes.append(duplicates.note)
    tokenizer: Tokenizer | None = None
    if chosen.role is not Role.position:
        tokenizer, why_none = emb.tokenizer_for_names(chosen)
        if tokenizer is None:
            notes.append(Message(why_none or "", "; padding rows past the vocabulary cannot be told apart"))
    return NormsReport(chosen.role, chosen.name, chosen.dim, chosen.first_row, summary, duplicates, tuple(notes), tokenizer,
                       untrained)
