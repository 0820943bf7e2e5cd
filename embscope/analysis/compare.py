"""What training changed between checkpoints: row by row, in neighbour sets, and over a series of steps.

Per row: the cosine between the same row in A and B, both norms, the relative change ||b - a|| / ||a||, and
whether the stored bits are equal (a row no gradient touched). Per table: those summarised, the rows that
moved most and least, and how much the top-k neighbour sets stayed the same. Over three or more checkpoints:
a trajectory of the same figures step by step. Two different runs live in different bases; `procrustes`
rotates B onto A first.

Tables are walked in blocks of rows, each block widened to float64 on its own, so there is never a whole
float64 copy of a table; a series holds at most three checkpoints' tables at a time (first, previous,
current). Undefined values (the cosine of a zero, NaN or Inf row) are NaN here; rendering turns them into null.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from .. import compute
from ..compute.streamed import StreamedTopK
from ..core.errors import Message, Option, OptionError, TableError
from ..core.memory import release, size_text
from ..core.role import Role
from .cka import Cka, linear_cka
from .norms import row_norms, summarize
from .pairing import Pairing
from .positions import PositionProfile, position_profile
from .stages import Progress, Stages, quiet
from .sweep import RowChanges, row_hashes, sweep

if TYPE_CHECKING:
    from ..compute.topk import TopK

PERCENTILES = (1, 5, 95)  # of the row cosines: the low ones are where the movers are
LISTED = 20  # movers and stable rows kept per table
NEIGHBOR_K = 10
NEIGHBOR_SAMPLE = 1000
SEED = 0
PROCRUSTES_MAX_DIM = 4096  # the d x d SVD of the alignment: 4,096 takes tens of seconds, 8,000 took 3 minutes and 3 GB
# Two runs of one model: raw row cosines average about 0 (independent bases) while the row norms match.
DIFFERENT_RUNS_COSINE = 0.1
NORMS_AGREE = 1.25  # mean row norms within this factor of each other
ROLES = tuple(Role)  # token, position, output


@dataclass(frozen=True, eq=False)
class TableInput:
    """One table of one checkpoint: its rows, and the rows before position 0 (OPT keeps 2)."""

    array: np.ndarray
    first_row: int = 0
    stored: str = ""  # the type the file stores the table in (read as float32 or float64): bytes differ by it


def by_index(rows_a: int, rows_b: int, first_a: int = 0, first_b: int = 0, what: str = "rows") -> Pairing:
    """Rows paired by index (positions by position) over the part both tables have; a note when they differ."""
    have_a, have_b = max(rows_a - first_a, 0), max(rows_b - first_b, 0)
    count = min(have_a, have_b)
    note = None
    if have_a != have_b:
        note = f"A has {have_a:,} {what} and B has {have_b:,}: the first {count:,} are compared"
    return Pairing(count, first_a, first_b, note=note)


def by_token(strings_a: Sequence[str | None], strings_b: Sequence[str | None]) -> Pairing:
    """Rows paired by token string (None: a row with no token). A string that several rows of one side hold
    cannot be paired and is left out."""
    def unique(strings: Sequence[str | None]) -> tuple[dict[str, int], int]:
        first: dict[str, int] = {}
        repeated: set[str] = set()
        for row, text in enumerate(strings):
            if text is None:
                continue
            if text in first:
                repeated.add(text)
            else:
                first[text] = row
        return {text: row for text, row in first.items() if text not in repeated}, len(repeated)

    rows_a, repeated_a = unique(strings_a)
    rows_b, repeated_b = unique(strings_b)
    shared = sorted((row, rows_b[text]) for text, row in rows_a.items() if text in rows_b)
    ids = np.array(shared, dtype=np.int64).reshape(-1, 2)
    matched = Option("match", "tokens", noun="by_token()")  # the command line's pairing: this function
    note = Message(matched, f" paired {len(shared):,} rows by token string, of {len(strings_a):,} tokens in A and "
                   f"{len(strings_b):,} in B")
    if repeated_a or repeated_b:
        note += f" ({repeated_a + repeated_b:,} strings held by several ids of one side left out)"
    return Pairing(len(shared), ids_a=ids[:, 0].copy(), ids_b=ids[:, 1].copy(), note=note)


def row_changes(a: np.ndarray, b: np.ndarray, pairing: Pairing, rotation: np.ndarray | None = None,
                progress: Progress | None = None) -> RowChanges:
    """Cosine, norms, relative change and bitwise equality of each pair of rows, block by block, over the cores.
    With `rotation` (d, d), B's rows are compared as b @ rotation; bitwise equality is of the stored rows."""
    return sweep(b, [a], pairing, rotation=rotation, progress=progress)[0]


@dataclass(frozen=True)
class ChangeSummary:
    rows: int  # pairs compared
    defined: int  # pairs with a defined cosine: the statistics on cosines describe these
    mean_cosine: float
    median_cosine: float
    percentiles: dict[int, float]  # row cosine at the PERCENTILES
    mean_relative: float  # over the pairs with a finite relative change
    median_relative: float
    mean_norm_a: float  # over the finite norms
    mean_norm_b: float
    unchanged: int  # pairs whose stored bits are equal

    @property
    def norm_ratio(self) -> float:
        """B's mean row norm over A's."""
        return self.mean_norm_b / self.mean_norm_a if self.mean_norm_a > 0 else math.nan

    @property
    def looks_like_different_runs(self) -> bool:
        """Row cosines about 0 while the norms agree: two independent runs, not two steps of one."""
        ratio = self.norm_ratio
        return (self.defined > 0 and abs(self.mean_cosine) < DIFFERENT_RUNS_COSINE
                and math.isfinite(ratio) and 1 / NORMS_AGREE <= ratio <= NORMS_AGREE)


def finite_mean(values: np.ndarray) -> float:
    kept = values[np.isfinite(values)]
    return float(kept.mean()) if len(kept) else math.nan


def summarize_changes(changes: RowChanges) -> ChangeSummary:
    cosines = changes.cosine[~np.isnan(changes.cosine)]
    relative = changes.relative[np.isfinite(changes.relative)]
    if len(cosines):
        mean, median = float(cosines.mean()), float(np.median(cosines))
        percentiles = {p: float(v) for p, v in zip(PERCENTILES, np.percentile(cosines, PERCENTILES))}
    else:
        mean = median = math.nan
        percentiles = {p: math.nan for p in PERCENTILES}
    return ChangeSummary(
        rows=changes.count, defined=len(cosines), mean_cosine=mean, median_cosine=median, percentiles=percentiles,
        mean_relative=float(relative.mean()) if len(relative) else math.nan,
        median_relative=float(np.median(relative)) if len(relative) else math.nan,
        mean_norm_a=finite_mean(changes.norm_a), mean_norm_b=finite_mean(changes.norm_b),
        unchanged=int(changes.unchanged.sum()))


def movers_and_stable(changes: RowChanges, count: int = LISTED) -> tuple[np.ndarray, np.ndarray]:
    """Pair indices of the rows that moved most (largest relative change first; Inf, a zero row that became
    non-zero, leads) and least (smallest change first, a finite one: a zero row that became non-zero is no stable
    row), among the rows that changed at all: bitwise unchanged rows are counted on their own. Rows with an
    undefined change are in neither; ties go to the lower index."""
    relative = changes.relative
    moved = np.flatnonzero(~np.isnan(relative) & ~changes.unchanged)
    most = moved[np.lexsort((moved, -relative[moved]))][:count]
    finite = moved[np.isfinite(relative[moved])]
    least = finite[np.lexsort((finite, relative[finite]))][:count]
    return most, least


@dataclass(frozen=True, eq=False)
class Alignment:
    """The orthogonal rotation that best maps B's rows onto A's (orthogonal Procrustes)."""

    rotation: np.ndarray  # float64 (d, d), orthogonal: B @ rotation is B in A's basis
    residual: float  # ||B R - A||_F / ||A||_F over the pairs finite in both
    # pairs that shape the fit and have an aligned cosine: finite in both and zero in neither (procrustes_chance
    # draws as many)
    rows: int
    # the mean row cosine two unrelated Gaussian tables of this shape reach after their own fit (procrustes_chance);
    # None where the shape is too large to draw it cheaply
    chance: float | None = None


# a rotation fitted on n rows in d dimensions has d(d-1)/2 degrees of freedom: with n not far above d it aligns
# unrelated tables too (29 x 128 Gaussian pairs reach a mean row cosine of 0.94), so the aligned cosine is said beside
# what chance gives, drawn where the draw is cheap
CHANCE_MAX_ELEMENTS = 1 << 22
# its own draw, product and d x d SVD: 1.3 s of CPU at 4,096 x 1,024 and 0.2 s at 30,000 x 128 (measured, load 1.9),
# where the fit's own SVD at 4,096 columns takes tens of seconds
CHANCE_MAX_DIM = 1024


def procrustes_chance(rows: int, dim: int, seed: int) -> float | None:
    """The mean row cosine of B R against A, for A and B drawn N(0, 1) of `rows` x `dim` (seeded) and R their own
    orthogonal Procrustes fit; None past CHANCE_MAX_ELEMENTS or CHANCE_MAX_DIM, or with no rows."""
    if not rows or rows * dim > CHANCE_MAX_ELEMENTS or dim > CHANCE_MAX_DIM:
        return None
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((rows, dim)), rng.standard_normal((rows, dim))
    u, _, vt = np.linalg.svd(b.T @ a)
    turned = b @ (u @ vt)
    lengths = np.linalg.norm(turned, axis=1) * np.linalg.norm(a, axis=1)
    # clipped: one row is turned onto its pair exactly, and rounding gave a cosine of 1.0000000000000002
    return float(np.mean(np.clip(np.einsum("ij,ij->i", turned, a) / lengths, -1.0, 1.0)))


def procrustes(a: np.ndarray, b: np.ndarray, pairing: Pairing, progress: Progress | None = None) -> Alignment:
    """R minimising ||B R - A||_F over orthogonal R: with B^T A = U S V^T, R = U V^T. The d x d cross-covariance
    is summed block by block, so memory is d x d plus one block; the residual follows from the same sums:
    ||B R - A||^2 = ||A||^2 + ||B||^2 - 2 trace(S). Refused past PROCRUSTES_MAX_DIM columns, before anything
    is allocated."""
    dim = a.shape[1]
    if dim > PROCRUSTES_MAX_DIM:
        raise TableError(f"expected tables of at most {PROCRUSTES_MAX_DIM:,} columns to align by Procrustes (a d x d "
                         f"SVD), found {dim:,}: the {dim:,} x {dim:,} float64 matrices alone would take "
                         f"{size_text(3 * 8 * dim * dim)}")
    cross = np.zeros((dim, dim), dtype=np.float64)
    squares_a = squares_b = 0.0
    used = 0
    for start, block_a, block_b in pairing.blocks(a, b):
        xa = np.asarray(block_a, dtype=np.float64)
        xb = np.asarray(block_b, dtype=np.float64)
        finite = np.isfinite(xa).all(axis=1) & np.isfinite(xb).all(axis=1)
        if not finite.all():
            xa, xb = xa[finite], xb[finite]
        cross += xb.T @ xa
        squares_a += float(np.einsum("ij,ij->", xa, xa))
        squares_b += float(np.einsum("ij,ij->", xb, xb))
        used += int(np.count_nonzero(xa.any(axis=1) & xb.any(axis=1)))
        release(block_a)
        release(block_b)
        if progress is not None:
            progress(start + len(block_a), pairing.count)
    u, singular, vt = np.linalg.svd(cross)
    residual = math.sqrt(max(squares_a + squares_b - 2 * float(singular.sum()), 0.0) / squares_a) \
        if squares_a > 0 else math.nan
    return Alignment(u @ vt, residual, used)


@dataclass(frozen=True, eq=False)
class NeighborOverlap:
    """How much each queried row's top-k neighbour set stayed the same, as Jaccard |A & B| / |A | B|.
    Neighbours are compared through the pairing: a neighbour with no partner counts in the union only."""

    k: int
    rows_a: np.ndarray  # int64 (Q,) A row of each query: the --words rows first, then the seeded sample
    rows_b: np.ndarray  # int64 (Q,) its partner in B
    jaccard: np.ndarray  # float64 (Q,); NaN when neither side has a neighbour
    neighbors_a: np.ndarray  # int64 (Q, k) A row ids, -1 where there is none
    neighbors_b: np.ndarray  # int64 (Q, k) B row ids
    words: int  # queries that came from --words
    seed: int

    @property
    def mean(self) -> float:
        return finite_mean(self.jaccard)


def _topk(table: np.ndarray, k: int, rows: np.ndarray, device: str, progress: Progress | None) -> np.ndarray:
    """The batched top-k of the given rows, the query row itself left out: neighbour ids (Q, k), -1 for none."""
    found: TopK = compute.topk_rows(table, k, rows=rows, device=device, progress=progress)
    return found.ids


def neighbor_labels(ids: np.ndarray, pairs: np.ndarray, unpaired_from: int) -> np.ndarray:
    """Neighbour row ids (-1: none) as their pair indices (`pairs`, -1: unpaired); an unpaired row gets a label
    of its own past every pair index, so it can only count in the union."""
    return np.where(ids < 0, -1, np.where(pairs >= 0, pairs, unpaired_from + ids))


def neighbor_queries(pairing: Pairing, defined: np.ndarray, word_pairs: Sequence[int], sample: int,
                     seed: int) -> np.ndarray:
    """The pairs whose neighbour sets are compared: those in `word_pairs`, then `sample` pairs drawn with `seed`
    from those with a defined cosine (`defined`, per pair)."""
    others = np.setdiff1d(np.flatnonzero(defined), np.asarray(word_pairs, dtype=np.int64))
    rng = np.random.default_rng(seed)
    drawn = np.sort(rng.choice(others, size=min(sample, len(others)), replace=False))
    return np.concatenate([np.asarray(word_pairs, dtype=np.int64), drawn]).astype(np.int64)


def neighbor_overlap(a: np.ndarray, b: np.ndarray, pairing: Pairing, defined: np.ndarray, word_pairs: Sequence[int],
                     k: int = NEIGHBOR_K, sample: int = NEIGHBOR_SAMPLE, seed: int = SEED, device: str = "auto",
                     stages: Stages = quiet) -> NeighborOverlap:
    """Top-k neighbour sets of the same rows in A and in B: the pairs in `word_pairs`, then `sample` pairs drawn
    with `seed` from those with a defined cosine (`defined`, per pair)."""
    chosen = neighbor_queries(pairing, defined, word_pairs, sample, seed)
    ids_a = _topk(a, k, pairing.rows_a()[chosen], device, stages("neighbours in A"))
    ids_b = _topk(b, k, pairing.rows_b()[chosen], device, stages("neighbours in B"))
    return overlap_of(pairing, chosen, ids_a, ids_b, (a.shape[0], b.shape[0]), k, len(word_pairs), seed)


def overlap_of(pairing: Pairing, chosen: np.ndarray, ids_a: np.ndarray, ids_b: np.ndarray,
               table_rows: tuple[int, int], k: int, words: int, seed: int) -> NeighborOverlap:
    """The Jaccard overlap of the neighbour ids (-1: none) found in A and in B (tables of table_rows rows) for
    the chosen pairs."""
    labels_a = neighbor_labels(ids_a, pairing.pair_of(ids_a, "a", table_rows[0]), pairing.count)
    labels_b = neighbor_labels(ids_b, pairing.pair_of(ids_b, "b", table_rows[1]), pairing.count + table_rows[0])
    jaccard = np.full(len(chosen), np.nan)
    for query, (row_a, row_b) in enumerate(zip(labels_a, labels_b)):
        set_a, set_b = set(row_a[row_a >= 0].tolist()), set(row_b[row_b >= 0].tolist())
        if set_a or set_b:
            jaccard[query] = len(set_a & set_b) / len(set_a | set_b)
    return NeighborOverlap(k, pairing.rows_a()[chosen], pairing.rows_b()[chosen], jaccard, ids_a, ids_b, words, seed)


@dataclass(frozen=True, eq=False)
class TableState:
    """One table of one checkpoint, on its own."""

    rows: int
    mean_norm: float  # over the finite row norms (positions from first_row on, for a position table)
    anomalies: int  # rows `embscope norms` flags
    position0_norm: float | None  # position tables: the norm of position 0 (row first_row)
    profile: PositionProfile | None  # position tables: cos(p_i, p_i+k) by distance k


def table_state(table: TableInput, role: str, norms: np.ndarray | None = None) -> TableState:
    """`norms`: the table's row norms when a comparison has already found them (one pass over the table less)."""
    norms = row_norms(table.array) if norms is None else norms
    if role != "position":
        return TableState(len(norms), finite_mean(norms), len(summarize(norms).anomalies), None, None)
    positions = norms[table.first_row:]
    profile, matrix = position_profile(table.array, table.first_row)
    del matrix  # T x T: not kept
    first = float(positions[0]) if len(positions) else math.nan
    return TableState(len(norms), finite_mean(positions), len(summarize(norms).anomalies), first, profile)


@dataclass(frozen=True)
class TrajectoryPoint:
    """One table at one checkpoint of a series, against the one before and against the first."""

    state: TableState | None  # None: this checkpoint has no such table
    cosine_to_previous: float  # mean row cosine; NaN at the first checkpoint
    cosine_to_first: float
    unchanged_from_previous: int | None  # rows bitwise unchanged since the previous checkpoint
    note: str | None = None  # the shapes differ: what was compared


@dataclass(frozen=True, eq=False)
class TableComparison:
    """One table, first checkpoint (A) against last (B)."""

    role: str
    pairing: Pairing
    changes: RowChanges
    summary: ChangeSummary
    movers: np.ndarray  # pair indices, largest relative change first
    stable: np.ndarray  # pair indices, smallest non-zero change first
    neighbors: NeighborOverlap | None  # token and output tables
    alignment: Alignment | None
    unaligned_mean_cosine: float  # the mean row cosine before any rotation
    different_runs: bool  # unaligned, the rows look like two independent runs (see ChangeSummary)
    cka: Cka | None = None  # linear CKA of the paired rows (a rotation leaves it as it is)


@dataclass(frozen=True)
class CompareOptions:
    align: bool = False  # rotate B onto A (orthogonal Procrustes over the paired rows) before comparing
    k: int = NEIGHBOR_K
    sample: int = NEIGHBOR_SAMPLE
    seed: int = SEED
    listed: int = LISTED
    device: str = "auto"
    cka: bool = True  # linear CKA: the d x d products of each table pair (about 2 n d^2 multiply-adds, a top-k's order)

    def __post_init__(self) -> None:
        """The bounds the command line's flags have (--sample 0 or more, --top 1 or more, a seed numpy takes):
        sample=-1 and seed=-1 raised ValueError from numpy, 1.5 TypeError, and listed=-1 listed every row but one."""
        for name, least in (("sample", 0), ("seed", 0), ("listed", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
                raise OptionError(f"expected {name} of at least {least}, found {value!r}", option=name)


@dataclass(frozen=True, eq=False)
class Comparison:
    checkpoints: int
    states: dict[str, list[TableState | None]]  # per role, one entry per checkpoint
    trajectory: dict[str, list[TrajectoryPoint]]  # per role, one entry per checkpoint
    tables: dict[str, TableComparison]  # per role present in the first and the last checkpoint
    notes: list[str] = field(default_factory=list)
    # per role, checkpoint index -> a digest of the table's stored bytes, found in the read that compared it (the
    # run audit's duplicates); a table read only in part (cut to a shorter one, rows matched by string) has none
    digests: dict[str, dict[int, bytes]] = field(default_factory=dict)


def index_pairing(role: str, a: TableInput, b: TableInput) -> Pairing:
    return by_index(a.array.shape[0], b.array.shape[0], a.first_row, b.first_row,
                    "positions" if role == "position" else "rows")


def width_note(role: str, a: TableInput, b: TableInput) -> str | None:
    if a.array.shape[1] == b.array.shape[1]:
        return None
    return (f"the {role} tables are {a.array.shape[1]} and {b.array.shape[1]} wide: rows of different widths "
            "cannot be compared, so this table is left out")


def compare_tables(role: str, a: TableInput, b: TableInput, pairing: Pairing, options: CompareOptions, *,
                   unaligned: RowChanges | None = None, word_rows: Sequence[int] = (),
                   stages: Stages = quiet, neighbors: NeighborOverlap | None = None) -> TableComparison:
    """A (first) against B (last) for one table. `unaligned`: the row changes already computed for `pairing`;
    `neighbors`: the neighbour overlap already found (in the same read)."""
    if unaligned is None:
        unaligned = row_changes(a.array, b.array, pairing, progress=stages(f"{role} table: rows"))
    before = summarize_changes(unaligned)
    alignment, changes = None, unaligned
    if options.align:
        alignment = procrustes(a.array, b.array, pairing, stages(f"{role} table: alignment"))
        alignment = replace(alignment, chance=procrustes_chance(alignment.rows, a.array.shape[1], options.seed))
        changes = row_changes(a.array, b.array, pairing, alignment.rotation, stages(f"{role} table: aligned rows"))
    summary = summarize_changes(changes)
    movers, stable = movers_and_stable(changes, options.listed)
    if neighbors is None and role != "position" and pairing.count and (options.sample or word_rows):
        word_pairs = word_pairs_of(pairing, word_rows, a.array.shape[0])
        neighbors = neighbor_overlap(a.array, b.array, pairing, ~np.isnan(changes.cosine), word_pairs, options.k,
                                     options.sample, options.seed, options.device, stages)
    cka = (linear_cka(a.array, b.array, pairing, options.device, stages(f"{role} table: linear CKA"))
           if options.cka and pairing.count else None)
    return TableComparison(role, pairing, changes, summary, movers, stable, neighbors, alignment,
                           before.mean_cosine, alignment is None and before.looks_like_different_runs, cka)


def word_pairs_of(pairing: Pairing, word_rows: Sequence[int], rows_a: int) -> list[int]:
    """The pairs of A's --words rows that have a partner, each once, in the order given."""
    pairs = pairing.pair_of(np.array(list(dict.fromkeys(word_rows)), dtype=np.int64), "a", rows_a)
    return [int(p) for p in pairs if p >= 0]


@dataclass(frozen=True, eq=False)
class NeighborSearch:
    """First against last's neighbour sets, found in the read of the last checkpoint: the sample is drawn before
    that read as if every pair had a defined cosine, which the read then confirms (else it is found afterwards)."""

    chosen: np.ndarray  # pair indices: the --words pairs, then the sample
    a: StreamedTopK
    b: StreamedTopK
    words: int

    def feeds(self, a: int, b: int) -> dict[int, StreamedTopK]:
        return {a: self.a, b: self.b}

    def overlap(self, pairing: Pairing, changes: RowChanges, table_rows: tuple[int, int], options: CompareOptions
                ) -> NeighborOverlap | None:
        """The overlap, when the read confirmed the sample (None: some pair has no cosine, so the sample differs)."""
        if np.isnan(changes.cosine).any():
            return None
        return overlap_of(pairing, self.chosen, self.a.result()[0], self.b.result()[0], table_rows, options.k,
                          self.words, options.seed)


def planned_search(role: str, a: TableInput, b: TableInput, pairing: Pairing, options: CompareOptions,
                   word_rows: Sequence[int]) -> NeighborSearch | None:
    """The search to run in the read of B, where it can: on the CPU, unaligned, every row of both tables paired
    with its own index (elsewhere the neighbour sets take a read of their own, in compare_tables)."""
    if (role == "position" or options.align or not pairing.count or not (options.sample or word_rows)
            or width_note(role, a, b) is not None or not pairing.covers(a.array, b.array)
            or compute.resolve_device(options.device) != "cpu"):
        return None
    word_pairs = word_pairs_of(pairing, word_rows, a.array.shape[0])
    chosen = neighbor_queries(pairing, np.ones(pairing.count, dtype=bool), word_pairs, options.sample, options.seed)
    rows = pairing.rows_a()[chosen]  # the same rows of B: every row is paired with its own index
    search_a, search_b = (compute.topk_stream(compute.unit_rows(table.array, rows=rows)[0],
                                              min(options.k, table.array.shape[0]), (np.arange(len(rows)), rows))
                          for table in (a, b))
    return NeighborSearch(chosen, search_a, search_b, len(word_pairs))


def read_against(origin: TableInput, before: TableInput, table: TableInput, to_previous: Pairing | None,
                 to_first: Pairing | None, search: NeighborSearch | None,
                 progress: Progress) -> tuple[RowChanges | None, RowChanges | None]:
    """The row changes from the previous checkpoint and from the first to `table` (None: widths differ), in one
    read of it when both pair its rows alike; `search` is fed the first's and this table's unit rows. The read
    hashes this table's rows (and the first's, in the read where the first is also the previous)."""
    if origin is before:
        if to_previous is None:
            return None, None
        found = sweep(table.array, [origin.array], to_previous, searches=search.feeds(0, 1) if search else None,
                      progress=progress, hashed=(0, 1))[0]
        return found, found
    if to_previous is not None and to_first is not None and to_previous.same_as(to_first):
        from_previous, from_first = sweep(table.array, [before.array, origin.array], to_previous,
                                          searches=search.feeds(1, 2) if search else None, progress=progress,
                                          hashed=(2,))
        return from_previous, from_first
    previous_changes = (sweep(table.array, [before.array], to_previous, progress=progress, hashed=(1,))[0]
                        if to_previous else None)
    first_changes = (sweep(table.array, [origin.array], to_first, searches=search.feeds(0, 1) if search else None,
                           progress=progress, hashed=() if to_previous else (1,))[0] if to_first else None)
    return previous_changes, first_changes


def table_digest(table: TableInput, pairing: Pairing, side: str, hashes: np.ndarray | None) -> bytes | None:
    """The table's stored bytes as one digest, from the row hashes its read found: None where that read did not
    cover every row from its first paired one (a table cut to a shorter one's rows, rows matched by string). Rows
    before the first paired one (OPT's two before position 0) are a few, hashed here."""
    start = pairing.start_a if side == "a" else pairing.start_b
    if hashes is None or pairing.ids_a is not None or start + pairing.count != table.array.shape[0]:
        return None
    described = repr((table.array.shape, table.array.dtype.str, table.stored, start))
    digest = hashlib.blake2b(described.encode(), digest_size=16)
    digest.update(row_hashes(np.asarray(table.array[:start])).tobytes())
    digest.update(hashes.tobytes())
    return digest.digest()


def trajectory_point(state: TableState, from_previous: RowChanges | None, from_first: RowChanges | None,
                     pairs: Pairing | None, before: TableInput, table: TableInput) -> TrajectoryPoint:
    """One checkpoint's step: its state, its mean row cosine to the previous and to the first, its unchanged rows."""
    note = None if pairs is not None else f"width changed from {before.array.shape[1]} to {table.array.shape[1]}"
    return TrajectoryPoint(
        state, summarize_changes(from_previous).mean_cosine if from_previous is not None else math.nan,
        summarize_changes(from_first).mean_cosine if from_first is not None else math.nan,
        int(from_previous.unchanged.sum()) if from_previous is not None else None,
        note or (pairs.note if pairs is not None else None))


@dataclass(eq=False)
class SeriesWalk:
    """What `compare` gathers as the series goes by: each table's states and steps, the first and the previous
    checkpoint that has it, its last read against the first, and the neighbour sets found on the way."""

    options: CompareOptions
    token_pairing: Pairing | None
    word_rows: Sequence[int]
    stages: Stages
    checkpoints: int | None
    states: dict[str, dict[int, TableState]] = field(default_factory=dict)
    moves: dict[str, dict[int, TrajectoryPoint]] = field(default_factory=dict)
    first: dict[str, tuple[int, TableInput]] = field(default_factory=dict)  # role -> the first checkpoint that has it
    previous: dict[str, TableInput] = field(default_factory=dict)
    to_first: dict[str, RowChanges] = field(default_factory=dict)
    found_neighbors: dict[str, NeighborOverlap] = field(default_factory=dict)
    digests: dict[str, dict[int, bytes]] = field(default_factory=dict)  # see Comparison.digests

    def keep_digests(self, role: str, index: int, start: int, tables: tuple[TableInput, TableInput],
                     pairs: tuple[Pairing | None, Pairing | None], found: tuple[RowChanges | None, RowChanges | None]
                     ) -> None:
        """This table's digest from the read that hashed it, and the first's from the read that hashed it too."""
        (origin, table), kept = tables, self.digests.setdefault(role, {})
        for pairing, changes in zip(pairs, found):
            if pairing is not None and changes is not None and changes.hash_b is not None:
                digest = table_digest(table, pairing, "b", changes.hash_b)
                if digest is not None:
                    kept[index] = digest
                if changes.hash_a is not None and start not in kept:
                    first = table_digest(origin, pairing, "a", changes.hash_a)
                    if first is not None:
                        kept[start] = first
                return

    def pairing(self, role: str, a: TableInput, b: TableInput) -> Pairing:
        return self.token_pairing if self.token_pairing is not None and role != "position" else index_pairing(role, a, b)

    def paired(self, role: str, a: TableInput, b: TableInput) -> Pairing | None:
        return None if width_note(role, a, b) is not None else self.pairing(role, a, b)

    def search_for(self, role: str, index: int, origin: TableInput, table: TableInput, start: int,
                   pairs_first: Pairing | None) -> NeighborSearch | None:
        """The neighbour search planned into the read of the last checkpoint against the first."""
        if pairs_first is None or start != 0 or index != (self.checkpoints or 0) - 1:
            return None
        return planned_search(role, origin, table, pairs_first, self.options, self.word_rows)

    def keep_overlap(self, role: str, search: NeighborSearch | None, pairs_first: Pairing | None,
                     from_first: RowChanges | None, origin: TableInput, table: TableInput) -> None:
        if search is not None and from_first is not None and pairs_first is not None:
            overlap = search.overlap(pairs_first, from_first, (origin.array.shape[0], table.array.shape[0]),
                                     self.options)
            if overlap is not None:
                self.found_neighbors[role] = overlap

    def state_of(self, role: str, start: int, index: int, origin: TableInput, table: TableInput,
                 whole: RowChanges | None) -> TableState:
        """This checkpoint's state (and the first's, the first time): the norms come with a whole-table read."""
        if start not in self.states.setdefault(role, {}):  # its norms come with this first comparison
            self.states[role][start] = table_state(origin, role, whole.norm_a if whole is not None else None)
        state = self.states[role][index] = table_state(table, role, whole.norm_b if whole is not None else None)
        return state

    def step(self, index: int, role: str, table: TableInput) -> None:
        """One table of one checkpoint, read against the previous and the first checkpoint that has it."""
        if role not in self.first:
            self.first[role] = (index, table)
            self.previous[role] = table
            return
        (start, origin), before = self.first[role], self.previous[role]
        pairs, pairs_first = self.paired(role, before, table), self.paired(role, origin, table)
        search = self.search_for(role, index, origin, table, start, pairs_first)
        from_previous, from_first = read_against(origin, before, table, pairs, pairs_first, search,
                                                 self.stages(f"{role} table: checkpoint {index + 1}"))
        self.keep_overlap(role, search, pairs_first, from_first, origin, table)
        self.keep_digests(role, index, start, (origin, table), (pairs, pairs_first), (from_previous, from_first))
        whole = from_previous if pairs is not None and pairs.covers(before.array, table.array) else None
        state = self.state_of(role, start, index, origin, table, whole)
        self.to_first.pop(role, None)
        if from_first is not None:
            self.to_first[role] = from_first
        self.moves.setdefault(role, {})[index] = trajectory_point(state, from_previous, from_first, pairs, before,
                                                                  table)
        self.previous[role] = table

    def close(self) -> None:
        """The state of a table that no later checkpoint has."""
        for role, (start, origin) in self.first.items():
            if start not in self.states.setdefault(role, {}):  # a table that no later checkpoint has
                self.states[role][start] = table_state(origin, role)

    def detail(self, last: Mapping[str, TableInput]) -> tuple[dict[str, TableComparison], list[str]]:
        """First against last in detail, table by table; a note for each table that cannot be compared."""
        notes: list[str] = []
        compared: dict[str, TableComparison] = {}
        for role in ROLES:
            a = self.first[role][1] if role in self.first and self.first[role][0] == 0 else None  # first against last
            b = last.get(role)
            if a is None or b is None:
                if a is not None or b is not None:
                    notes.append(f"only the {'first' if a is not None else 'last'} checkpoint has {article(role)} "
                                 f"{role} table: it is not compared")
                continue
            why_not = width_note(role, a, b)
            if why_not is not None:
                notes.append(why_not)
                continue
            compared[role] = compare_tables(role, a, b, self.pairing(role, a, b), self.options,
                                            unaligned=self.to_first.get(role), word_rows=self.word_rows,
                                            stages=self.stages, neighbors=self.found_neighbors.get(role))
        return compared, notes

    def comparison(self, count: int, last: Mapping[str, TableInput]) -> Comparison:
        self.close()
        compared, notes = self.detail(last)
        trajectory = {role: [self.moves.get(role, {}).get(i) or TrajectoryPoint(found.get(i), math.nan, math.nan, None)
                             for i in range(count)] for role, found in self.states.items()}
        return Comparison(count, {role: [found.get(i) for i in range(count)] for role, found in self.states.items()},
                          trajectory, compared, notes, self.digests)


def compare(series: Iterable[Mapping[str, TableInput]], options: CompareOptions = CompareOptions(), *,
            token_pairing: Pairing | None = None, word_rows: Sequence[int] = (),
            stages: Stages = quiet, checkpoints: int | None = None) -> Comparison:
    """Each checkpoint's tables in turn (opened lazily by the caller): the state of each, the trajectory (mean
    row cosine to the previous checkpoint and to the first, unchanged rows), and first against last in detail.
    `token_pairing` pairs token and output rows (--match tokens, two checkpoints); `word_rows` are A's rows for
    --words. Each checkpoint's table is read once, against the previous and the first together; the row norms
    come from those reads. `checkpoints`: how many the series holds, when known: the read of the last then finds
    the neighbour sets too, rather than each table being read again for them."""
    walk = SeriesWalk(options, token_pairing, word_rows, stages, checkpoints)
    last: Mapping[str, TableInput] = {}
    count = 0
    for index, tables in enumerate(series):
        count += 1
        for role, table in tables.items():
            walk.step(index, role, table)
        last = tables
    if count < 2:
        raise ValueError(f"expected two or more checkpoints to compare, found {count}")
    return walk.comparison(count, last)


def article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"
