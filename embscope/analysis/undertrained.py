"""Under-trained tokens, found from the weights as Land & Bartolo 2024 ("Fishing for Magikarp: Automatically
Detecting Under-trained Tokens in Large Language Models") find them, then checked against the tokenizer.

1. A reference set of rows known to be unused: rows no text can select (past the tokenizer, bytes no UTF-8
   text holds, ids the round trip never gives back, reserved placeholders), rows bitwise unchanged across
   checkpoints. Magikarp takes such a list by hand for each model (unused_tokens.py); when the tokenizer gives
   too few rows to trust (MIN_TRUSTED_REFERENCE), or its rows show no gap, the reference is seeded from the
   table: the densest tight cluster (untrained rows all receive the same push from the softmax, so they end up
   pointing the same way: each row's mean cosine to its nearest rows stands above a gap that noise would not
   make), else the low-norm tail (rows weight decay shrank, below a gap in the norms); the seed is refined once
   from the candidates it gives, and when the indicator then shows no gap, the seed's rows are the candidates
   (signal "seed": they stood apart by a gap of their own, held to the same false-alarm rate).
2. The indicator (magikarp's `cosine_distance_without_first_pc`, as a similarity): the first principal
   component of the table is removed from every row, then each row's cosine to the mean reference row.
3. The threshold: the widest gap in the upper half of the indicator, measured against the spacings just
   below it; a gap exponential spacings would give by chance in fewer than 1 in 1,000 tables counts. No gap,
   no candidates: a table with no under-trained rows (a Gaussian random one) yields none.
4. Second signals: norms far above the rest (rows that kept their initial values) or far below (rows weight
   decay shrank, and zero rows), by robust z; rows bitwise unchanged across checkpoints, which are conclusive.

Tables are read block by block; nothing here is V x V (the cluster search uses the batched top-k).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import compute
from ..core.errors import EmbscopeError, Message, OptionError, TableError, message_of
from .norms import (
    AT_ZERO_ROWS,
    DEFAULT_THRESHOLD,
    KEPT_NORM_ROWS,
    RowListing,
    median_and_mad,
    mostly_zero,
    robust_z,
    row_norms,
)
from .stages import Progress, Stages, quiet
from .token_kinds import KINDS, ROUND_TRIP_MAX_CHARS, TokenKinds, token_kinds
from .untrained import (
    AT_ZERO,
    MIN_DIM,
    NEAREST_CHANCE,
    UNIFORM_SAMPLE,
    Untrained,
    band,
    find_untrained,
    init_scale,
    nearest_bound,
    nearest_cosines,
)

if TYPE_CHECKING:
    from ..core.tokenizer import Tokenizer
    from ..embeddings import Embeddings

BLOCK_BYTES = 32 * 1024 * 1024  # float64 work space per block of rows
NO_TOKENIZER = "without a tokenizer nothing is verified, and padding rows cannot be told apart"
COMPONENT_WIDTH = 8  # directions iterated together to find the first principal component
COMPONENT_ITERATIONS = 40  # reads of the table at most; a table with no leading direction uses them all
COMPONENT_TOLERANCE = 1e-10  # distance between successive unit estimates of the component
# up to this width the first component's iteration multiplies the d x d covariance, summed in one read of the table,
# instead of reading the table at each iteration: the covariance's d x d products cost about what two iterations'
# d x COMPONENT_WIDTH ones do at this width, and a table with no leading direction iterates COMPONENT_ITERATIONS times
COVARIANCE_MAX_DIM = 256
NEAR_IDENTICAL = 0.99  # cosine at which two rows count as one point of a cluster
CLUSTER_NEIGHBOURS = 8  # top-k of every row, for the cluster search
# rows scored against the table at most (queries x rows): past it the search starts from a seeded sample of
# rows, so a table of millions of rows costs seconds, not hours
CLUSTER_MAX_SCORES = 500_000_000
CLUSTER_SEED = 0
MIN_CLUSTER_ROWS = 3
# a seed from the table needs as many rows as each row has neighbours in the search, plus itself: a smaller group
# cannot fill its members' neighbour lists, and near-duplicate trained tokens come in twos and threes
MIN_SEED_ROWS = CLUSTER_NEIGHBOURS + 1
# rows the tokenizer must mark unused for its reference to be used as it is: a BERT vocabulary renamed, or one
# unreachable id, is too few, and the table's own never-trained rows seed it instead
MIN_TRUSTED_REFERENCE = 20
# a cluster seeds the reference only when its rows' norms stand apart from the rest too (their median robust z beyond
# this, either way): never-trained rows' norms are set by the decay or the softmax's push alone (measured: -3.2 in
# the real BERT case, -2.4 and -6.5 in the tied runs of the tests), while a class of trained tokens used alike
# (digits, a script) points one way with the norms of trained rows (-0.8 to -1.1)
SEED_NORM_Z = 2.0
GAP_WINDOW = 50  # spacings below a gap that set the scale it is measured against
GAP_FALSE_ALARM = 1e-3  # chance that exponential spacings give a gap as wide, per table
NORM_Z = DEFAULT_THRESHOLD  # the robust z beyond which a norm is far from the rest, as `norms` flags it
# "seed": a row of the reference the table seeded, when the indicator then shows no gap: the seed stood apart by a
# gap of its own (in the density or the norms), held to the same false-alarm rate
SIGNALS = ("indicator", "seed", "norm-high", "norm-low", "unchanged")
THRESHOLD_RULE = (f"the widest gap in the upper half of the indicator, as a multiple of the mean of the (up to) {GAP_WINDOW} "
                  f"rank-scaled spacings below it, when exponential spacings would reach it in fewer than 1 in "
                  f"{1 / GAP_FALSE_ALARM:,.0f} tables")
# Kinds that put a row in the reference set. A partial UTF-8 byte is left out: multilingual text uses them;
# so is a special token: BOS and EOS are trained.
REFERENCE_KINDS = ("padding", "placeholder", "never-utf8")

# (array, valid, reference, scores, threshold, component) -> the same, once refined (refined, reseeded)
Refine = Callable[[np.ndarray, np.ndarray, "Reference", np.ndarray, "Threshold", np.ndarray],
                  tuple["Reference", np.ndarray, "Threshold"]]
# (table, k) -> (ids, cosines), each (rows, k): every row's k nearest other rows, -1 / NaN where there are none
# (table, k, query rows) -> (neighbour ids, cosines), one line per query row
NearestRows = Callable[[np.ndarray, int, np.ndarray], tuple[np.ndarray, np.ndarray]]
# (role, shape) -> the same table from each other checkpoint of the run (`undertrained --against`)
OtherTables = Callable[[str, tuple[int, ...]], Sequence[np.ndarray]]


@dataclass(frozen=True, eq=False)
class Reference:
    rows: np.ndarray  # int64 ids whose mean row the indicator measures against
    # "tokenizer", "unchanged", "untrained", "cluster" or "low-norm" (the last three from the table), or "none"
    source: str
    description: str  # what the rows are, for people
    dropped: int = 0  # rows of the first set that scored like trained rows and were left out of the mean


@dataclass(frozen=True)
class Threshold:
    value: float | None  # candidates score above it; None when no gap stands out
    why: str  # one line: where the value lies, or why there is none
    gap: float | None = None  # width of the widest gap, in indicator units
    ratio: float | None = None  # that gap against the spacings below it
    needed: float | None = None  # the ratio a gap needs (THRESHOLD_RULE)


@dataclass(frozen=True)
class Candidate:
    id: int
    score: float  # the indicator; NaN when there is none
    norm: float
    norm_z: float  # robust z of the norm
    signals: tuple[str, ...]  # from SIGNALS
    kinds: tuple[str, ...]  # what the tokenizer says (token_kinds.KINDS)
    verified: bool | None  # the tokenizer gives a reason; None when there is no tokenizer
    conclusive: bool  # bitwise unchanged across every checkpoint given


@dataclass(frozen=True, eq=False)
class UndertrainedReport:
    table: str  # "token" or "output"
    name: str
    reference: Reference
    threshold: Threshold
    scores: np.ndarray  # float64 (rows,) the indicator, NaN where undefined
    norms: np.ndarray  # float64 (rows,)
    norm_z: np.ndarray  # float64 (rows,)
    unchanged: np.ndarray | None  # bool (rows,); None when no other checkpoint was given
    candidates: RowListing[Candidate]  # best first; each Candidate made when read
    verified: int | None  # candidates the tokenizer gives a reason for; None without a tokenizer
    notes: tuple[str, ...] = ()
    norm_median: float = math.nan  # of the finite norms, which norm_z is measured from
    norm_mad: float = math.nan  # their median absolute deviation (unscaled)

    @property
    def rows(self) -> int:
        return len(self.norms)

    @property
    def has_indicator(self) -> bool:
        return len(self.reference.rows) > 0


@dataclass(frozen=True, eq=False)
class UndertrainedTables:
    """What `embscope undertrained` reports about a checkpoint: one report per table analysed, the tokenizer's
    view of the rows (None without a tokenizer), and the notes (why there is no tokenizer, the tables' own)."""

    reports: tuple[UndertrainedReport, ...]
    kinds: TokenKinds | None
    notes: tuple[str, ...]


def default_roles(emb: Embeddings) -> list[str]:
    """The output table when the head is untied (magikarp: the stronger signal), else the token table."""
    return ["output" if emb.output is not None else "token"]


def nearest_rows(device: str, progress: Progress) -> NearestRows:
    """The batched top-k the cluster search uses."""
    def search(table: np.ndarray, k: int, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        found = compute.topk_rows(table, k, rows=rows, device=device, progress=progress)
        return found.ids, found.scores
    return search


def undertrained_tables(emb: Embeddings, roles: Sequence[str] | None = None, *, others: OtherTables | None = None,
                        device: str = "auto", stages: Stages = quiet,
                        untrained: Mapping[str, Untrained] | None = None) -> UndertrainedTables:
    """Candidates in each table of `roles` (default_roles when None), the tokenizer's kinds worked out once for
    tables of the same height; `others` gives the same table from other checkpoints of the run; `untrained`: the
    never-trained rows of a table by role, where the caller found them already (the report's norms section)."""
    if isinstance(roles, str):  # 'token' was gone through as 't', 'o', ...: "found 't'"
        raise OptionError(f"expected a list of roles for the roles argument, found the string {roles!r}: pass "
                          f"[{roles!r}]", option="roles")
    device = compute.resolve_device(device)
    notes: list[str] = []
    reports: list[UndertrainedReport] = []
    kinds: TokenKinds | None = None
    refused = False  # the tokenizer could not encode at all: every table goes on as without one
    for role in roles if roles is not None else default_roles(emb):
        chosen = emb.table(role)
        tokenizer, why_none = emb.tokenizer_for_names(chosen)  # one that is not the table's verifies nothing there
        # there is one, but not this table's: its note says so, and NO_TOKENIZER would call it none
        misfit = tokenizer is None and emb.tokenizer_for_names()[0] is not None
        unverified = None if misfit else NO_TOKENIZER
        if why_none and why_none not in notes:
            notes.append(why_none)
        if refused:
            tokenizer = None
        if tokenizer is not None and (kinds is None or kinds.rows != chosen.rows):
            kinds = round_trip(tokenizer, chosen.rows, notes, stages)
            tokenizer, refused = (tokenizer, False) if kinds is not None else (None, True)
        other = others(role, chosen.tensor.shape) if others is not None else ()
        found = find_undertrained(chosen.array, kinds if tokenizer is not None else None, table=chosen.role,
                                  name=chosen.name, others=other,
                                  topk=nearest_rows(device, stages(f"nearest rows of the {role} table")),
                                  config=emb.checkpoint.config, never=(untrained or {}).get(str(chosen.role)),
                                  unverified=unverified)
        reports.append(found)
    notes += [note for report in reports for note in emb.table(report.table).notes]
    return UndertrainedTables(tuple(reports), kinds, tuple(notes))


def round_trip(tokenizer: Tokenizer, rows: int, notes: list[str], stages: Stages) -> TokenKinds | None:
    """The tokenizer's kinds of `rows` ids, None where it cannot encode at all (the answer goes on as without one);
    `notes` gets what the answer says of it."""
    try:
        kinds = token_kinds(tokenizer, rows, stages("tokenizer round trip"))
    except EmbscopeError as err:
        notes.append(Message("tokenizer refused: ", message_of(err)))
        return None
    if kinds.too_long:
        notes.append(f"{kinds.too_long:,} tokens longer than {ROUND_TRIP_MAX_CHARS:,} characters were not "
                     "encoded back (the round trip costs their length), so none of them is marked unreachable")
    return kinds


Measured = tuple["Reference", np.ndarray, "Threshold"]  # the reference used, the indicator, its threshold
Measure = Callable[["Reference", Refine], Measured]


def indicator(array: np.ndarray, valid: np.ndarray, norms: np.ndarray, kinds: TokenKinds | None,
              reference: Reference, topk: NearestRows | None, config: Mapping[str, Any] | None = None,
              table: str = "token", never: Untrained | None = None) -> tuple[Reference, np.ndarray, Threshold, np.ndarray]:
    """The indicator of each row against the reference (refined), or against the table's own seed when the
    tokenizer's rows are too few or show no gap; and the seed's rows when they are the candidates themselves."""
    components: list[np.ndarray] = []  # the first principal component, found once if an indicator is measured

    def measured(reference: Reference, refine: Refine) -> Measured:
        if not components:
            components.append(first_component(array, valid))
        scores = reference_cosines(array, valid, reference.rows, components[0])
        return refine(array, valid, reference, scores, gap_threshold(scores), components[0])

    scores, threshold = np.full(len(norms), np.nan), Threshold(None, "no indicator without reference rows")
    too_few = reference.source in ("tokenizer", "none") and len(reference.rows) < MIN_TRUSTED_REFERENCE
    if len(reference.rows) and not too_few:
        reference, scores, threshold = measured(reference, refined)
    seed_rows = np.zeros(0, dtype=np.int64)
    # the table's own evidence: when the tokenizer's rows are too few to trust, or show no gap (they may be trained,
    # or too scattered for their mean to point anywhere)
    if topk is not None and reference.source in ("tokenizer", "none") and (too_few or threshold.value is None):
        reference, scores, threshold, seed_rows = seeded(array, valid, norms, kinds, topk,
                                                         (reference, scores, threshold), measured, config, table,
                                                         never)
    if too_few and len(reference.rows) and reference.source == "tokenizer" and np.isnan(scores).all():
        reference, scores, threshold = measured(reference, refined)  # the few rows there are: the table seeded none
    return reference, scores, threshold, seed_rows


def seeded(array: np.ndarray, valid: np.ndarray, norms: np.ndarray, kinds: TokenKinds | None, topk: NearestRows,
           found: Measured, measured: Measure, config: Mapping[str, Any] | None = None,
           table: str = "token", never: Untrained | None = None) -> tuple[Reference, np.ndarray, Threshold, np.ndarray]:
    """The indicator against the table's own seed (a cluster of rows near each other), when it finds one."""
    reference, scores, threshold = found
    seed_rows = np.zeros(0, dtype=np.int64)
    never = never if never is not None else find_untrained(array, norms, table, config)
    seed = table_seed(array, valid, norms, topk, never)
    if len(seed.rows):
        why = seeded_because(reference, kinds)
        reference, scores, threshold = measured(Reference(seed.rows, seed.source, f"{seed.description}; {why}"),
                                                reseeded)
        if threshold.value is None:
            seed_rows = reference.rows
            own = f"found {found_as(never)}" if seed.source == "untrained" else "which stand apart by a gap of their own"
            count = f"{len(seed_rows):,} row{'s' * (len(seed_rows) != 1)}"
            threshold = replace(threshold, why=f"{threshold.why}; the candidates are the {count} of the seed, {own}")
    elif not len(reference.rows):
        reference = seed
    return reference, scores, threshold, seed_rows


def find_undertrained(array: np.ndarray, kinds: TokenKinds | None, *, table: str = "token", name: str = "",
                      others: Sequence[np.ndarray] = (), topk: NearestRows | None = None,
                      config: Mapping[str, Any] | None = None, never: Untrained | None = None,
                      unverified: str | None = NO_TOKENIZER) -> UndertrainedReport:
    """Candidates for under-trained rows of one table. `kinds`: the tokenizer's view (None without one);
    `others`: the same table from other checkpoints of the run; `topk`: the batched nearest-row search for
    the cluster fallback (None skips it); `config`: the checkpoint's config.json (its init scale); `never`: the
    table's never-trained rows (analysis.untrained) when the caller has them; `unverified`: the note for a table
    without the tokenizer's view (None where the caller says why: a tokenizer that is not the table's)."""
    norms = row_norms(array)
    valid = np.isfinite(norms) & (norms > 0)
    notes = []
    unchanged = unchanged_rows(array, others) if others else None
    if unchanged is not None and len(unchanged) and unchanged.all():
        raise TableError(f"expected checkpoints of different steps, found every row of the {table} table bitwise the "
                         "same in all of them (the same weights given twice?)")
    if never is None and kinds is None:  # the table seeds the reference: its never-trained rows are needed anyway
        never = find_untrained(array, norms, table, config)
    reference, scores, threshold, seed_rows = indicator(array, valid, norms, kinds,
                                                        tokenizer_reference(kinds, unchanged), topk, config, table,
                                                        never)
    if kinds is None and unverified:
        notes.append(unverified)
    median, mad, basis_note = norm_basis(norms, never)
    notes += [basis_note] if basis_note else []
    z = robust_z(norms, median, mad)
    high, high_note = kept_initial_norm(array, norms, z, config, table, never, bool(len(reference.rows)))
    notes += [high_note] if high_note else []
    candidates = collect(scores, threshold, norms, z, unchanged, kinds, seed_rows, high)
    verified = None
    if kinds is not None:  # a candidate is verified when the tokenizer says anything about its row
        said = np.zeros(len(candidates), dtype=bool)
        for kind in KINDS:
            said |= kinds[kind][candidates.indices]
        verified = int(said.sum())
    return UndertrainedReport(table, name, reference, threshold, scores, norms, z, unchanged, candidates, verified,
                              tuple(notes), median, mad)


def kept_initial_norm(array: np.ndarray, norms: np.ndarray, z: np.ndarray, config: Mapping[str, Any] | None,
                      table: str, never: Untrained | None, referenced: bool = False) -> tuple[np.ndarray | bool, str]:
    """Where norm-high may fire, and the note when that leaves a row out. norm-high says a row kept its initial
    values while the rest shrank: where most rows keep the init's norm (analysis.untrained.near_init), a row far
    above them grew in training; where the init scale is known, only a row at its norm (untrained.band) can have
    kept it (Keras models trained with Adam: their most frequent tokens grew to 2-9 times the draw's norm, and were
    'norm-high')."""
    if never is not None and never.near:
        return False, ""
    dim = array.shape[1]
    sigma, why = init_scale(config or {}, table)
    if sigma is None:  # rows near a reference group moved with it, seen or not: left to norm-high
        return unlike_nearest(array, norms, z) if not referenced else (True, "")
    scale = sigma * math.sqrt(dim)
    at_init = band(norms, scale, dim)
    grown = int(np.count_nonzero((z > NORM_Z) & ~at_init))
    if not grown:
        return at_init, ""
    return at_init, (f"norm-high only where a row's norm is its initialisation's ({scale:.4g}: {sigma:g} x sqrt({dim}), "
                     f"{why}): {grown:,} row{'s' * (grown != 1)} far above the rest at another norm grew in training, "
                     "and kept no initial values")


def unlike_nearest(array: np.ndarray, norms: np.ndarray, z: np.ndarray) -> tuple[np.ndarray | bool, str]:
    """With no known init scale, norm-high only where a row is unlike its nearest row, as a draw at init is (its
    nearest-row cosine below the line a draw passes with a chance of NEAREST_CHANCE): a row alike another moved in
    training, and kept no initial values (attack20's torch model, 2,000 x 64 at N(0, 1), AdamW at lr 3e-2: every row
    shrank to 0.4 of its draw's norm or so, and 4 rows seen 51 to 118 times, moved 0.84 to 0.93 of their draw's norm,
    stayed at 0.6 to 0.8 of it, 'norm-high' at z 6 to 10, each at cosine 0.64 to 0.67 to its nearest row where a
    draw's passes 0.60). Up to UNIFORM_SAMPLE rows are tested; past that, none is left out. Only where the table has
    no reference rows: the sample's rare bytes (seen 2 to 63 times) sit alike its never-seen group, and stay."""
    high = np.flatnonzero(z > NORM_Z)
    valid = np.isfinite(norms) & (norms > 0)
    if not len(high) or len(high) > UNIFORM_SAMPLE or array.shape[1] < MIN_DIM:
        return True, ""
    nearest = nearest_cosines(array, norms, valid, high)
    line = nearest_bound(array.shape[1], int(valid.sum()))
    alike = np.abs(np.nan_to_num(nearest, nan=0.0)) > line
    if not alike.any():
        return True, ""
    allowed = np.ones(len(norms), dtype=bool)
    allowed[high[alike]] = False
    count = int(alike.sum())
    return allowed, (f"norm-high only where a row is unlike its nearest row, as a draw at init is: {count:,} "
                     f"row{'s' * (count != 1)} far above the rest alike {'their' if count != 1 else 'its'} nearest "
                     f"row (cosine {float(np.min(nearest[alike])):.2g} to {float(np.max(nearest[alike])):.2g}, where a "
                     f"draw's passes {line:.2g} with a chance of {NEAREST_CHANCE:g}) moved in training, and kept no "
                     "initial values")


def norm_basis(norms: np.ndarray, never: Untrained | None) -> tuple[float, float, str]:
    """The median and MAD the norm signals measure z from: of every row while the rows found never trained are a
    minority (the median and MAD withstand up to half the rows off) or are not known (a tokenizer gave the
    reference), else of the others, as `norms` measures its anomalies (LAC's 50,164 word rows at their draw, of
    58,224, made the 8,060 trained rows 'norm-high', z up to 914); and the note saying so, or ""."""
    if (never is None or not never.count or never.whole) and mostly_zero(norms):  # a pruned or padded vocabulary
        median, mad = median_and_mad(norms[norms != 0])
        return median, mad, (f"norm z is measured among the {int(np.count_nonzero(np.isfinite(norms) & (norms != 0))):,}"
                             f" rows not zero (median {median:.4g}, MAD {mad:.4g}): zero rows are half the table or "
                             "more, and would make both 0, as norms measures its anomalies")
    if never is None or not never.count or never.whole:
        median, mad = median_and_mad(norms)
        return median, mad, ""
    kept = np.ones(len(norms), dtype=bool)
    kept[never.rows] = False
    at_zero = never.kind == AT_ZERO
    if at_zero:  # the zero rows are of that majority at the file's resolution (analysis.lattice)
        kept &= norms != 0
    elif 2 * never.count <= int(np.isfinite(norms).sum()) and describes(median_and_mad(norms)[0], norms[kept]):
        median, mad = median_and_mad(norms)
        return median, mad, ""
    median, mad = median_and_mad(norms[kept])
    grown = (f"; norm-high is not signalled: a row far above the {KEPT_NORM_ROWS} grew in training, and kept no "
             "initial values") if never.near else ""
    return median, mad, (f"norm z is measured among the {int(kept.sum()):,} rows not found {found_as(never)} (median "
                         f"{median:.4g}, MAD {mad:.4g}), as norms measures its anomalies{grown}")


def describes(median: float, kept: np.ndarray) -> bool:
    """Whether the median of every row lies within the quartiles of the rows not found never trained: a minority
    close to half the table, far below the rest, moves it into the gap between them (tdmelodic's enc_surface emb_v:
    24 rows shrunk to 4e-5 and 26 others, 2 of them low, put it at 0.085 under trained rows of 0.87 to 4.7, which
    were 'norm-high' at z up to 36)."""
    finite = kept[np.isfinite(kept)]
    if not len(finite):
        return True
    low, high = np.quantile(finite, [0.25, 0.75])
    return bool(low <= median <= high)


# ---------------------------------------------------------------- the reference set


def tokenizer_reference(kinds: TokenKinds | None, unchanged: np.ndarray | None) -> Reference:
    """Rows known unused: by the tokenizer (REFERENCE_KINDS, and unreachable ids that are neither partial
    UTF-8 nor special) and by the checkpoints (bitwise unchanged)."""
    parts = []
    if kinds is not None:
        parts = [(kinds[kind], kind) for kind in REFERENCE_KINDS]
        parts.append((kinds["unreachable"] & ~kinds["partial-utf8"] & ~kinds["special"], "unreachable"))
    by_tokenizer = np.logical_or.reduce([mask for mask, _ in parts]) if parts else None
    if unchanged is not None:
        parts.append((unchanged, "unchanged"))
    rows = np.flatnonzero(np.logical_or.reduce([mask for mask, _ in parts])) if parts else np.zeros(0, np.int64)
    if not len(rows):
        why = "no tokenizer" if kinds is None else "the tokenizer marks no row unused"
        return Reference(rows, "none", f"no reference rows ({why})")
    counted = ", ".join(f"{int(mask.sum())} {label}" for mask, label in parts if mask.any())
    source = "tokenizer" if by_tokenizer is not None and by_tokenizer.any() else "unchanged"
    return Reference(rows, source, f"{len(rows)} row{'s' * (len(rows) != 1)} known unused ({counted})")


def seeded_because(tokenizer: Reference, kinds: TokenKinds | None) -> str:
    """Why the reference came from the table: what the tokenizer's own reference lacked."""
    if kinds is None:
        return "seeded from the table: there is no tokenizer to say which rows are unused"
    count = len(tokenizer.rows)
    if count >= MIN_TRUSTED_REFERENCE:
        return (f"seeded from the table because the {count} rows the tokenizer marks unused show no gap in the "
                "indicator")
    marks = "no row" if not count else f"only {count} row{'s' * (count != 1)}"
    return (f"seeded from the table because the tokenizer marks {marks} unused ({MIN_TRUSTED_REFERENCE} needed to "
            "trust it)")


def table_seed(array: np.ndarray, valid: np.ndarray, norms: np.ndarray, topk: NearestRows,
               never: Untrained) -> Reference:
    """Rows the table itself shows as unused: its never-trained rows (`never`, analysis.untrained: still as
    initialised, or moved only together; rows that moved together give way to a seed of the table's shape that holds
    them all and more), else the densest tight cluster whose norms stand apart from the rest (SEED_NORM_Z), else the
    low-norm tail."""
    verdict = Reference(never.rows, "untrained", f"the table's {found_as(never, rows=True)}: {never.evidence}")
    judged = never.count >= MIN_SEED_ROWS and not never.whole
    # rows that moved only together are the tightest of those decay shrank: a low-norm tail below a gap that holds
    # them all and more is the fuller seed (the rest kept part of their own start)
    if judged and (never.kind != "moved together" or not holds_more(low_norm_tail(norms, valid).rows, never.rows)):
        return verdict
    seed = seed_of_shape(array, valid, norms, topk)
    if not judged:
        return few_never_trained(norms, valid, seed, never) or never_trained_alone(seed, never) or seed
    if not holds_more(seed.rows, never.rows):
        return verdict
    return replace(seed, description=f"{seed.description}; it holds the table's {never.count} never-trained rows "
                                     f"({never.evidence})")


def found_as(never: Untrained, rows: bool = False) -> str:
    """How the rows `never` holds are named: never trained, or, for a majority no trained row stands apart from
    (analysis.untrained's undecided), at their initialisation, which may be trained too little to tell."""
    if never.near:  # a majority that moved, at the init's norm (analysis.untrained.near_init)
        return KEPT_NORM_ROWS if rows else "keeping their initialisation's norm"
    if never.kind == AT_ZERO:  # most of a quantized table, at its resolution (analysis.lattice)
        return AT_ZERO_ROWS if rows else "within a quantization step of zero"
    if never.undecided:
        return "rows at their initialisation" if rows else "at their initialisation"
    return "never-trained rows" if rows else "never trained"


def few_never_trained(norms: np.ndarray, valid: np.ndarray, seed: Reference, never: Untrained) -> Reference | None:
    """The table's never-trained rows, too few to seed by their number, in place of a cluster that holds none of
    them and whose norms stand apart on the other side of the rest: rows that never trained keep their init or
    decay's norm while the others grew or kept theirs, and a cluster above the rest is a class of trained tokens used
    alike and often (rnnmorph's ten digits, median norm z +2.1, against its unknown-character row at -1.8)."""
    if not never.contrasted or seed.source != "cluster" or np.isin(never.rows, seed.rows).any():
        return None
    cluster, untrained = norm_apart(norms, valid, seed.rows), norm_apart(norms, valid, never.rows)
    if cluster * untrained >= 0:
        return None
    return Reference(never.rows, "untrained", (
        f"the table's never-trained rows: {never.evidence}; the densest cluster of {len(seed.rows)} rows is passed "
        f"over: none of them never trained, and their norms stand {'above' if cluster > 0 else 'below'} the rest "
        f"(median robust z {cluster:+.2f}) where the never-trained rows' stand {'below' if cluster > 0 else 'above'} "
        f"({untrained:+.2f})"))


def never_trained_alone(seed: Reference, never: Untrained) -> Reference | None:
    """The table's never-trained rows, too few to seed by their number, where the table's shape seeds nothing: they
    are the only evidence there is (g2p_id 0.4.2's bert_mlm.onnx: 5 of 32 character rows in Keras' uniform draw,
    which norms names, while undertrained said 'candidates: none')."""
    if not never.count or never.whole or seed.source != "none":
        return None
    return Reference(never.rows, "untrained", f"the table's never-trained rows: {never.evidence}; too few to seed by "
                                              f"their number, but the table's shape seeds nothing: {seed.description}")


def holds_more(rows: np.ndarray, inner: np.ndarray) -> bool:
    """Whether `rows` holds every row of `inner` and others too."""
    return len(rows) > len(inner) and bool(np.isin(inner, rows).all())


def seed_of_shape(array: np.ndarray, valid: np.ndarray, norms: np.ndarray, topk: NearestRows) -> Reference:
    """The seed the table's shape gives: the densest tight cluster whose norms stand apart from the rest
    (SEED_NORM_Z), else the low-norm tail."""
    cluster = cluster_reference(array, valid, topk, norms)
    if len(cluster.rows):
        return cluster
    tail = low_norm_tail(norms, valid)
    passed_over = cluster.description if "passed over" in cluster.description else ""
    if len(tail.rows):
        return replace(tail, description="; ".join(filter(None, (tail.description, passed_over))))
    return Reference(cluster.rows, "none", f"{cluster.description}; {tail.description}")


def norm_apart(norms: np.ndarray, valid: np.ndarray, rows: np.ndarray) -> float:
    """How far the norms of `rows` stand from the valid rows' own: the median of their robust z."""
    z = robust_z(norms[rows], *median_and_mad(norms[valid]))
    finite = z[np.isfinite(z)]
    return float(np.median(finite)) if len(finite) else 0.0


def cluster_reference(array: np.ndarray, valid: np.ndarray, topk: NearestRows,
                      norms: np.ndarray | None = None) -> Reference:
    """The densest tight cluster. A row's density is its mean cosine to its CLUSTER_NEIGHBOURS nearest rows; rows
    above a gap in the densities (gap_threshold: one noise gives in fewer than 1 in 1,000 tables) are dense, and
    the largest group of them linked as one another's nearest rows (closer than the gap) is the cluster, when it
    has MIN_SEED_ROWS rows and, given `norms`, those rows' norms stand apart from the rest (SEED_NORM_Z). Failing
    that, the largest group of near-identical rows (cosine >= NEAR_IDENTICAL), as a table most of whose rows are
    one point has no gap to show. On a table too long to search from every row, the search starts from a seeded
    sample of rows, and the description says so."""
    empty = Reference(np.zeros(0, dtype=np.int64), "none",
                      f"no cluster: no {MIN_SEED_ROWS} or more rows stand out by their cosine to their nearest rows, "
                      f"and no {MIN_CLUSTER_ROWS} or more are near-identical (cosine >= {NEAR_IDENTICAL})")
    rows = np.flatnonzero(valid)
    if len(rows) <= MIN_CLUSTER_ROWS:
        return empty
    queries, searched = rows, f"a top-{CLUSTER_NEIGHBOURS} search"
    if len(rows) * len(array) > CLUSTER_MAX_SCORES:
        count = max(MIN_CLUSTER_ROWS, CLUSTER_MAX_SCORES // len(array))
        queries = np.sort(np.random.default_rng(CLUSTER_SEED).choice(rows, size=count, replace=False))
        searched += f" from {count:,} of the {len(rows):,} rows, sampled with seed {CLUSTER_SEED}"
    nearest_ids, nearest_cos = topk(array, min(CLUSTER_NEIGHBOURS, len(rows) - 1), queries)
    with np.errstate(invalid="ignore"):
        density = np.nanmean(np.where(nearest_ids >= 0, nearest_cos, np.nan), axis=1) \
            if nearest_cos.shape[1] else np.full(len(queries), np.nan)
    gap = gap_threshold(density)
    if gap.value is not None:
        dense = density > gap.value
        members = largest_group(len(array), queries[dense], nearest_ids[dense], nearest_cos[dense] > gap.value, valid)
        apart = norm_apart(norms, valid, members) if norms is not None and len(members) else math.inf
        if len(members) >= MIN_SEED_ROWS and abs(apart) >= SEED_NORM_Z:
            return Reference(members, "cluster", f"the densest cluster: {len(members)} rows whose mean cosine to their "
                                                 f"{CLUSTER_NEIGHBOURS} nearest rows is above {gap.value:.3g}, "
                                                 f"{gap.why} (found with {searched})")
        if len(members) >= MIN_SEED_ROWS:
            empty = replace(empty, description=(
                f"the densest cluster of {len(members)} rows is passed over: their norms are those of the rest "
                f"(median robust z {apart:+.2f}, beyond {SEED_NORM_Z:g} either way needed), as a class of trained "
                "tokens used alike has"))
    members = largest_group(len(array), queries, nearest_ids, nearest_cos >= NEAR_IDENTICAL, valid)
    if len(members) < MIN_CLUSTER_ROWS:
        return empty
    apart = norm_apart(norms, valid, members) if norms is not None else math.inf
    if 2 * len(members) < len(rows) and abs(apart) < SEED_NORM_Z:
        # a minority of near-identical rows at the others' norms is a class of trained words used alike (the years
        # 1972 to 1978 of a spaCy vectors table, GloVe's, cosine 0.99, median norm z +0.8): no seed
        return replace(empty, description=(
            f"no cluster: no {MIN_SEED_ROWS} or more rows stand out by their cosine to their nearest rows, and the "
            f"{len(members)} near-identical rows found (cosine >= {NEAR_IDENTICAL}) are passed over: their norms are "
            f"those of the rest (median robust z {apart:+.2f}, beyond {SEED_NORM_Z:g} either way needed), as a class "
            "of trained tokens used alike has"))
    return Reference(members, "cluster", f"the densest cluster: {len(members)} near-identical rows "
                                         f"(cosine >= {NEAR_IDENTICAL}, found with {searched})")


def largest_group(n: int, queries: np.ndarray, nearest_ids: np.ndarray, linked: np.ndarray,
                  valid: np.ndarray) -> np.ndarray:
    """The rows of the largest connected group under the links query -> nearest row where `linked`; ties go to
    the group with the lowest row."""
    linked = linked & (nearest_ids >= 0)
    a = np.repeat(queries, linked.sum(axis=1))
    b = nearest_ids[linked]
    if not len(a):
        return np.zeros(0, dtype=np.int64)
    labels = connected_labels(n, a, b)
    sizes = np.bincount(labels[np.unique(np.concatenate([a, b]))], minlength=n)
    sizes[~valid] = 0
    return np.flatnonzero(labels == int(np.argmax(sizes)))


def low_norm_tail(norms: np.ndarray, valid: np.ndarray) -> Reference:
    """Rows below a gap at the low end of the norms (gap_threshold on the negated norms), when MIN_SEED_ROWS."""
    ids = np.flatnonzero(valid)
    gap = gap_threshold(-norms[ids])
    if gap.value is not None:
        tail = ids[-norms[ids] > gap.value]
        if len(tail) >= MIN_SEED_ROWS:
            return Reference(tail, "low-norm", f"the low-norm tail: {len(tail)} rows of norm below {-gap.value:.3g}, "
                                               f"{gap.why.replace('below the top', 'above the lowest')}")
    return Reference(np.zeros(0, dtype=np.int64), "none",
                     f"no low-norm tail of {MIN_SEED_ROWS} or more rows below a gap in the norms")


def connected_labels(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For every node 0..n-1, the smallest node of its connected component under edges (a, b)."""
    labels = np.arange(n)
    while True:
        low = np.minimum(labels[a], labels[b])
        before = labels.copy()
        np.minimum.at(labels, a, low)
        np.minimum.at(labels, b, low)
        labels = labels[labels]  # jump to the root found so far
        if np.array_equal(labels, before):
            return labels


def reseeded(array: np.ndarray, valid: np.ndarray, reference: Reference, scores: np.ndarray, threshold: Threshold,
             component: np.ndarray) -> tuple[Reference, np.ndarray, Threshold]:
    """A seed from the table is refined once: the candidates it gives (the rows above its threshold) become the
    reference, and the indicator is measured again from them."""
    if threshold.value is None:
        return reference, scores, threshold
    kept = np.flatnonzero(scores > threshold.value)
    if len(kept) < MIN_CLUSTER_ROWS or np.array_equal(kept, reference.rows):
        return reference, scores, threshold
    scores = reference_cosines(array, valid, kept, component)
    threshold = gap_threshold(scores)
    left_out = len(np.setdiff1d(reference.rows, kept))
    description = (f"{reference.description}; refined once to the {len(kept)} rows it scored above its threshold "
                   f"({left_out} of the seed left out)")
    return Reference(kept, reference.source, description, left_out), scores, threshold


def refined(array: np.ndarray, valid: np.ndarray, reference: Reference, scores: np.ndarray, threshold: Threshold,
            component: np.ndarray) -> tuple[Reference, np.ndarray, Threshold]:
    """Reference rows scoring below the threshold are trained after all (a special token the data uses,
    an id the round trip misses but merges make): the mean is taken again without them, once."""
    if threshold.value is None:
        return reference, scores, threshold
    kept = reference.rows[scores[reference.rows] > threshold.value]
    dropped = len(reference.rows) - len(kept)
    if not dropped or not len(kept):
        return reference, scores, threshold
    scores = reference_cosines(array, valid, kept, component)
    threshold = gap_threshold(scores)
    description = f"{reference.description}; {dropped} of them scored like trained rows and were left out"
    return Reference(kept, reference.source, description, dropped), scores, threshold


# ---------------------------------------------------------------- the indicator


def blocks(array: np.ndarray, valid: np.ndarray, center: np.ndarray | None = None) -> Iterator[tuple[int, np.ndarray]]:
    """(start, float64 rows less `center`) blocks (compute.row_blocks: the buffer is reused); rows without a
    finite, non-zero norm come as zeros."""
    step = max(1, BLOCK_BYTES // (8 * max(1, array.shape[1])))
    for start, block in compute.row_blocks(array, center=center, block_rows=step):
        block[~valid[start:start + len(block)]] = 0
        yield start, block


def first_component(array: np.ndarray, valid: np.ndarray, seed: int = 0) -> np.ndarray:
    """The unit direction of largest variance of the valid rows about their mean (PCA's first component), by
    block subspace iteration with Rayleigh-Ritz on the covariance: one read of the table per iteration and
    d x COMPONENT_WIDTH memory, or, for a table up to COVARIANCE_MAX_DIM wide, one read that sums the d x d
    covariance, which each iteration then multiplies (the same products, summed in another order). A table with
    no leading direction (noise) stops at COMPONENT_ITERATIONS."""
    dim = array.shape[1]
    count = max(int(valid.sum()), 1)
    mean = sum((block.sum(axis=0) for _, block in blocks(array, valid)), np.zeros(dim)) / count
    width = min(COMPONENT_WIDTH, dim)
    basis, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((dim, width)))
    covariance = None
    if dim <= COVARIANCE_MAX_DIM:
        covariance = sum((block.T @ block for _, block in blocks(array, valid, mean)), np.zeros((dim, dim)))
    top = np.zeros(dim)
    for _ in range(COMPONENT_ITERATIONS):
        spread = covariance @ basis if covariance is not None else spread_of(array, valid, mean, basis)
        vectors = np.linalg.eigh(basis.T @ spread)[1]  # Rayleigh-Ritz within the current directions
        order = vectors[:, ::-1]
        previous, top = top, basis @ order[:, 0]
        top *= np.sign(top[np.argmax(np.abs(top))])
        if np.linalg.norm(top - previous) < COMPONENT_TOLERANCE:
            break
        basis, _ = np.linalg.qr(spread @ order)
    return top / np.linalg.norm(top)


def spread_of(array: np.ndarray, valid: np.ndarray, mean: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """The covariance of the valid rows times `basis`, in one read of the table: sum of B^T (B basis)."""
    spread = np.zeros_like(basis)
    for _, block in blocks(array, valid, mean):
        spread += block.T @ (block @ basis)
    return spread


def reference_cosines(array: np.ndarray, valid: np.ndarray, reference: np.ndarray, component: np.ndarray) -> np.ndarray:
    """Cosine of every row to the mean reference row, both with `component` removed; NaN for invalid rows.
    A reference row is measured against the mean of the others: its own share of the mean would lift it
    above the rest even in a random table. Removing p from x leaves x - (x.p) p, so x'.m' = x.m' and
    |x'|^2 = |x|^2 - (x.p)^2: one pass over the table."""
    reference = reference[valid[reference]]
    scores = np.full(len(array), np.nan)
    if not len(reference):
        return scores
    total = np.zeros(array.shape[1])
    for rows in reference_blocks(array, reference, component):
        total += rows.sum(axis=0)
    for start, block in blocks(array, valid):
        scores[start:start + len(block)] = _cosines(block, total / len(reference), component)
    # a reference row r (component removed) against the others' sum t - r: cos = (r.t - |r|^2) / (|r| |t - r|)
    at = 0
    for rows in reference_blocks(array, reference, component):
        squares = np.einsum("ij,ij->i", rows, rows)
        others = np.linalg.norm(total - rows, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            own = (rows @ total - squares) / (np.sqrt(squares) * others)
        # a lone reference row has no others to be measured against
        scores[reference[at:at + len(rows)]] = np.where((squares > 0) & (others > 0), np.clip(own, -1, 1), np.nan)
        at += len(rows)
    scores[~valid] = np.nan
    return scores


def reference_blocks(array: np.ndarray, reference: np.ndarray, component: np.ndarray) -> Iterator[np.ndarray]:
    """The reference rows as float64 with `component` removed, BLOCK_BYTES of them at a time: a reference of
    100,000 rows of 1,024 is never copied to float64 at once."""
    step = max(1, BLOCK_BYTES // (8 * max(1, array.shape[1])))
    for start in range(0, len(reference), step):
        rows = np.asarray(array[reference[start:start + step]], dtype=np.float64)  # sorted ids, as a map wants
        rows -= np.outer(rows @ component, component)
        yield rows


def _cosines(block: np.ndarray, target: np.ndarray, component: np.ndarray) -> np.ndarray:
    """cos(x - (x.p) p, target) for each row x; target is orthogonal to p. NaN where either is zero."""
    target_norm = float(np.linalg.norm(target))
    along = block @ component
    remaining = np.sqrt(np.maximum(np.einsum("ij,ij->i", block, block) - along * along, 0))
    with np.errstate(divide="ignore", invalid="ignore"):
        cosine = (block @ target) / (remaining * target_norm)
    return np.where((remaining > 0) & (target_norm > 0), np.clip(cosine, -1, 1), np.nan)


# ---------------------------------------------------------------- the threshold


def gap_needed(tested: int, window: int = GAP_WINDOW, false_alarm: float = GAP_FALSE_ALARM) -> float:
    """The ratio a gap must exceed. Under no under-trained rows, rank-scaled spacings i (s_i - s_i+1) are
    close to independent exponentials, so a spacing over the mean of the `window` below it has
    P(ratio > t) = (1 + t / window) ** -window; over `tested` gaps that chance is held to `false_alarm`."""
    return window * (float((tested / false_alarm) ** (1 / window)) - 1)


def gap_threshold(scores: np.ndarray, window: int = GAP_WINDOW) -> Threshold:
    """The widest gap in the upper half of the finite scores, against the spacings just below it."""
    ordered = np.sort(scores[np.isfinite(scores)])[::-1]
    n = len(ordered)
    window = min(window, n // 2 - 1)
    if window < 5:
        return Threshold(None, f"too few rows ({n}) to find a gap in the indicator")
    tested = n // 2  # candidates are a minority: the gap lies in the upper half
    spacing = np.arange(1, n) * (ordered[:-1] - ordered[1:])  # i (s_i - s_i+1), i = 1..n-1
    sums = np.concatenate([[0.0], np.cumsum(spacing)])
    ranks = np.arange(tested)  # index i-1 for the gap under the i-th highest score
    below = (sums[ranks + 1 + window] - sums[ranks + 1]) / window
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(below > 0, spacing[:tested] / below, np.where(spacing[:tested] > 0, np.inf, 0.0))
    best = int(np.argmax(ratio))
    needed = gap_needed(tested, window)
    gap = float(ordered[best] - ordered[best + 1])
    if ratio[best] <= needed:
        return Threshold(None, f"no gap stands out: the widest reaches {ratio[best]:.3g}x the spacings below it, "
                               f"{needed:.3g}x needed", gap, float(ratio[best]), needed)
    value = float((ordered[best] + ordered[best + 1]) / 2)
    return Threshold(value, f"in a gap of {gap:.3g} below the top {best + 1:,} rows, {ratio[best]:.3g}x the spacings "
                            f"below it ({needed:.3g}x needed)", gap, float(ratio[best]), needed)


# ---------------------------------------------------------------- second signals and candidates


def unchanged_rows(array: np.ndarray, others: Sequence[np.ndarray]) -> np.ndarray:
    """Rows whose bytes are the same in this table and in every other (same shape, float32)."""
    same = np.ones(len(array), dtype=bool)
    step = max(1, BLOCK_BYTES // (4 * max(1, array.shape[1])))
    for other in others:
        for start in range(0, len(array), step):
            mine = np.ascontiguousarray(array[start:start + step], dtype=np.float32).view(np.uint32)
            theirs = np.ascontiguousarray(other[start:start + step], dtype=np.float32).view(np.uint32)
            same[start:start + step] &= (mine == theirs).all(axis=1)
    return same


def collect(scores: np.ndarray, threshold: Threshold, norms: np.ndarray, z: np.ndarray,
            unchanged: np.ndarray | None, kinds: TokenKinds | None,
            seed: np.ndarray | None = None, high: np.ndarray | bool = True) -> RowListing[Candidate]:
    """The candidates, best first, as row ids: a Candidate is made when it is read (a table of millions of zero
    rows has millions of candidates, and one object each would take gigabytes). `high`: where norm-high may fire."""
    fired = {
        "indicator": scores > threshold.value if threshold.value is not None else np.zeros(len(scores), dtype=bool),
        "seed": np.isin(np.arange(len(scores)), seed if seed is not None else ()),
        "norm-high": (z > NORM_Z) & high,
        "norm-low": (z < -NORM_Z) | (norms == 0),  # a zero row never received a gradient that stuck
        "unchanged": unchanged if unchanged is not None else np.zeros(len(scores), dtype=bool),
    }
    chosen = np.flatnonzero(np.logical_or.reduce(list(fired.values())))
    # by indicator score, highest first; rows without a score after them, the farthest norm first
    order = np.lexsort((-np.abs(np.nan_to_num(z[chosen], nan=0.0)), -np.nan_to_num(scores[chosen], nan=-np.inf)))
    ranked = chosen[order]

    def candidate(position: int) -> Candidate:
        row = int(ranked[position])
        row_kinds = kinds.of(row) if kinds is not None else ()
        return Candidate(row, float(scores[row]), float(norms[row]), float(z[row]),
                         tuple(signal for signal in SIGNALS if fired[signal][row]), row_kinds,
                         bool(row_kinds) if kinds is not None else None, bool(fired["unchanged"][row]))

    return RowListing(ranked, candidate)
