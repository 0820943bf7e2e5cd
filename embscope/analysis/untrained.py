"""Rows that never trained, by evidence: one finder of both kinds, shared by `norms`, `report`, `map`, `export`
and `undertrained` (which seeds its reference from them).

1. Still as initialised. A row drawn from N(0, sigma^2) in d dimensions has norm sigma x sqrt(d) with a relative
   spread of about 1/sqrt(2d), and is uncorrelated with every other row (|cos| about 1/sqrt(d)). sigma is the
   config's initializer_range (init_std), the family's documented default, or else estimated from the rows
   that look so. Position rows must also be unlike both neighbours (a trained position resembles the next one);
   token rows unlike their nearest row (checked on a sample). For positions the verdict is a range of rows.
2. Moved only together (token and output tables). A token that never occurs as input only receives the updates
   every row shares (the softmax's push on the output side, weight decay): such rows end up pointing one way
   (mutual cosine 0.996 for the sample's unseen bytes, 0.74 for MiniLM's [unused] rows, against about 0.08 for
   trained rows) with norms in a narrow band. Rows sorted by norm are cut into bins; a bin whose unit rows share
   a direction (mutual cosine >= TOGETHER_COSINE) seeds the direction, and the group is every row close to it
   (cosine and norm both within the seed's own spread). Two reads of the table, nothing V x V.

Zero, NaN and Inf rows are anomalies (analysis.norms) and never part of a verdict here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import compute
from .columns import column_reduced
from .duplicates import ORDINARY_NORMS  # float32 products in range
from .lattice import near_zero, near_zero_evidence
from .median import median_of
from .products import SINGLE_THREAD_PRODUCT, thin_product

# documented defaults of the init scale (transformers' configs: initializer_range 0.02; OPT's init_std 0.02;
# nanoGPT and GPT-2 draw embeddings from N(0, 0.02))
INIT_STD = {"bert": 0.02, "roberta": 0.02, "xlm-roberta": 0.02, "camembert": 0.02, "longformer": 0.02,
            "mpnet": 0.02, "electra": 0.02, "gpt2": 0.02, "opt": 0.02, "gpt_neo": 0.02, "gptj": 0.02}
SIGMA_KEYS = ("initializer_range", "init_std")
# keras.layers.Embedding draws from uniform(-0.05, 0.05) unless told otherwise (embeddings_initializer="uniform",
# Keras 2 and 3), a per-coordinate sigma of 0.05 / sqrt(3); a weights file does not store the initializer, so for the
# token rows of a file Keras saved (the reader's keras_version) it is assumed, and the evidence says so. Not for
# positions (keras-hub's PositionEmbedding draws otherwise: their scale is estimated from the rows), nor for a head
KERAS_EMBEDDING_LIMIT = 0.05
MIN_DIM = 16  # below this a Gaussian draw's norm and cosines are too loose to tell from a trained row's
BAND_SPREADS = 4.0  # a row at init has its norm within this many relative spreads (1/sqrt(2d)) of sigma sqrt(d)
NEIGHBOUR_SPREADS = 4.0  # ... and |cos| to its neighbours within this many 1/sqrt(d)
MIN_RUN = 3  # positions in a range at least
MIN_ESTIMATED_RUN = 8  # ... when sigma is estimated from the rows themselves
# ... when the run ends the table at a stated scale: rxnmapper's ALBERT (512 positions, initializer_range 0.02) left
# only its last two positions at the draw (coordinate std 0.0199 and 0.0195), trained to sequences of 510
MIN_TAIL_RUN = 2
LEAN_DRIFT = 0.15  # a row past a trained prefix leans its way when its projection passes this (leaning)
RUN_NORM_ERRORS = 4.0  # standard errors a run's mean norm may lie from the longest run's (one_scale)
GAP_FILLED = 2  # rows between two ranges that join them (a draw at init can fail a test by chance)
# the mean |cos| of neighbours within a range at most, times 1/sqrt(d): a Gaussian draw's is sqrt(2/pi) = 0.8
MEAN_NEIGHBOUR_SPREADS = 2.0
NEAREST_SAMPLE = 64  # token rows whose nearest row is searched, to tell a draw at init from a trained row
# the chance that a row drawn at init has a nearest row above the line (7 of the 64 sampled must, to fail the table)
NEAREST_CHANCE = 1e-4
NARROWEST_SPREAD = 0.25  # times 1/sqrt(2d): norms more alike than this (rows normalised) are no Gaussian draw
AT_INIT_SHARE = 0.9  # of the sampled rows that must look drawn at init
# a whole table at init has no trained row to stand against: never trained, or trained too little for these tests
# (g2p_en's character tables, which a working model uses, sit there), so that is all it is said to be
WHOLE_TABLE = "the whole table cannot be told from its initialisation (never trained, or trained too little to tell)"
# the same of a majority whose other rows do not stand apart (a Keras model trained briefly with SGD: 2,397 of the
# 2,402 rows in uniform(-0.05, 0.05)'s box had been seen, and moved too little to tell)
MOST_ROWS = "most of the table, cannot be told from their initialisation (never trained, or trained too little to tell)"
# with no known scale, the rows in the band of the median norm are judged when they are more than this share of the
# table (the median they are measured from lies among them): LAC's 50,001 word rows its character model never looks
# up, of 58,224
ESTIMATED_SHARE = 0.5
# a majority in the band of a known scale that moved from the draw (analysis.untrained.near_init) is judged apart
# where most of the other rows, MIN_GROUP at least, lie beyond twice the band's reach and this many robust spreads of
# the majority's norms: as far as the anomaly rule (analysis.norms, z beyond 6) would flag from the majority's median
FAR_SPREADS = 6.0
NEAR_INIT = "near init"  # the kind of that verdict
SHRUNK = "shrunk alike"  # the kind of a majority at a common norm whose coordinates are no draw's (shrunk_alike)
AT_ZERO = "at zero"  # the kind of rows within a quantized table's step of zero (analysis.lattice), beside its zero rows
KEPT_NORM = "most of the table, keep their initialisation's norm"
APART_SHARE = 0.01  # ... of whose other rows at most this share may have norms within twice the band's reach
SHARED_CHANCE = 1e-4  # the chance that rows drawn at init share a direction as much as the line allows
SHARED_NORMAL = 3.7190164854557084  # the standard normal's upper 1e-4 quantile (statistics.NormalDist().inv_cdf)
# rows whose directions are summed at most, drawn with a fixed seed past it: a mean direction of |m| 0.004 already
# passes the line at 65,536 rows of width 50 (trained tables keep 0.05 and more), for a sixth of a 400,000-row read
SHARED_SAMPLE = 1 << 16
TOGETHER_COSINE = 0.5  # mutual cosine of a group moved only together (trained rows: about 0.1)
MIN_GROUP = 8  # rows of such a group at least
SEED_SLACK = 0.05  # the bins seeding a group lie within this mutual cosine of its tightest bin (seed_bins)
GROUP_SPREADS = 6.0  # a member's cosine to the group and its norm lie within this many robust spreads of the seed's
MAX_GROUP_SHARE = 0.5  # a group is a minority: most of a table pointing one way is the table's own shape
BLOCK_BYTES = 16 << 20  # float64 work space per block of rows
NEAREST_BLOCK_BYTES = 8 << 20  # the sample's scores against a block of rows
MAD_SCALE = 1.4826
# rows too few for a group, drawn from a known uniform(-a, a): at most this share of the table's other rows, scaled to
# a row's norm, may lie within the bound for the row to be taken as a draw (rnnmorph's unknown-character row: 1 of 99)
LONE_BOX_SHARE = 0.05
UNIFORM_CHANCE = 1e-4  # the chance a uniform draw's coordinates are called uneven in its box
UNIFORM_SAMPLE = 4096  # rows whose coordinates are tested at most
# the chance that rows of the band crossing the box's edge by training's chance fall as unevenly on its two sides
# as a group in the box left alone by training needs (boxed_group)
EDGE_CHANCE = 1e-4
KURTOSIS_SPREADS = 4.0  # standard errors a Gaussian draw's coordinate kurtosis may lie from 3 (a chance of 6e-5)
# a minority below a step in the norms, at a scale of its own (low_tail_draw), is judged only from this many rows and
# this width: attack14's t5, a torch model (4,000 x 32) trained with its 10 most frequent tokens shrunk to norm 1.7
# against 7.5 for the rest, passed every test of a draw there (few rows in few dimensions: the tests lack the power)
TAIL_MIN_ROWS = 2 * MIN_GROUP
TAIL_MIN_DIM = 64
# ... each row tested alone against its nearest row, the others standing apart from the band's reach once (tail_alone),
# from this width: at 64 the line (cosine 0.60) passes the most frequent rows that shrank into the band (attack20's
# torch models at N(0, 0.02) with Adam and AdamW: their 5 most frequent rows at 0.42 to 0.62), and they are left in
TAIL_LOOSE_DIM = 128
SPREAD_ERRORS = 3.0  # ... and its norms spread as a draw's within this many standard errors (t5's: 1.7 times)


@dataclass(frozen=True, eq=False)
class Untrained:
    """The verdict on one table: which rows never trained, the rule, and one sentence of evidence."""

    rows: np.ndarray  # int64 row ids, ascending
    rule: str
    evidence: str  # "" when no row is found
    # "at init", "near init" (a majority at the init's norm that moved, analysis.untrained.near_init), "shrunk alike"
    # (a majority at a common norm whose coordinates are no draw's, shrunk_alike), "moved together",
    # "at init and moved together", "near init and moved together", "none"
    kind: str = "none"
    whole: bool = False  # every valid row of the table
    # most of the table, with no trained rows standing apart from it: never trained, or trained too little to tell;
    # or a majority at the init's norm that moved (kind "near init"): neither at init nor never trained
    undecided: bool = False

    @property
    def contrasted(self) -> bool:
        """Whether trained rows stand against these (a figure draws them apart): not so for a whole table, nor for
        an undecided majority."""
        return bool(self.count) and not self.whole and not self.undecided

    @property
    def near(self) -> bool:
        """Whether the rows are a majority at the init's norm that moved (near_init): they keep its norm, no more."""
        return self.kind.startswith(NEAR_INIT)

    @property
    def count(self) -> int:
        return len(self.rows)

    def ranges(self) -> list[tuple[int, int]]:
        """(first, last) of each run of consecutive rows."""
        if not len(self.rows):
            return []
        breaks = np.flatnonzero(np.diff(self.rows) != 1)
        starts = np.concatenate([[0], breaks + 1])
        ends = np.concatenate([breaks, [len(self.rows) - 1]])
        return [(int(self.rows[a]), int(self.rows[b])) for a, b in zip(starts, ends)]

    def mask(self, rows: int) -> np.ndarray:
        found = np.zeros(rows, dtype=bool)
        found[self.rows] = True
        return found


RULE = (f"never trained: still as initialised (norm within {BAND_SPREADS:g} relative spreads 1/sqrt(2d) of "
        f"sigma x sqrt(d), and unlike its neighbours or nearest row, |cos| below {NEIGHBOUR_SPREADS:g}/sqrt(d)), or "
        f"moved only together (a group of {MIN_GROUP} or more rows of mutual cosine >= {TOGETHER_COSINE:g} with "
        "norms in a narrow band), or shrunk alike (a majority at a common norm, apart from the other rows, whose "
        "coordinates are no Gaussian draw's)")


def nothing(why: str = "") -> Untrained:
    return Untrained(np.zeros(0, dtype=np.int64), RULE if not why else f"{RULE}; {why}", "")


def stated_scale(config: Mapping[str, Any]) -> tuple[float | None, str]:
    """sigma of the initialisation as the config or the family's default states it, or None."""
    for key in SIGMA_KEYS:
        value = config.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
            return float(value), f"{key} {value:g} in config.json"
    model_type = config.get("model_type")
    if isinstance(model_type, str) and model_type in INIT_STD:
        return INIT_STD[model_type], f"{model_type}'s default initializer_range {INIT_STD[model_type]:g}"
    return None, ""


def uniform_limit(config: Mapping[str, Any], role: str = "token") -> float | None:
    """a of the uniform(-a, a) the rows were drawn from, where init_scale takes keras.layers.Embedding's default."""
    keras = role == "token" and any(isinstance(config.get(key), str) for key in ("keras_version", "keras_lookup"))
    return KERAS_EMBEDDING_LIMIT if keras and stated_scale(config)[0] is None else None


def init_scale(config: Mapping[str, Any], role: str = "token") -> tuple[float | None, str]:
    """sigma of the initialisation and where it comes from: the config, the family's default, Keras' default for
    a token table of a file Keras saved, or None."""
    stated = stated_scale(config)
    if stated[0] is not None:
        return stated
    if uniform_limit(config, role) is not None:  # a head is a Dense kernel, drawn by glorot_uniform
        return KERAS_EMBEDDING_LIMIT / math.sqrt(3), (
            f"keras.layers.Embedding's default uniform(-{KERAS_EMBEDDING_LIMIT:g}, {KERAS_EMBEDDING_LIMIT:g}), "
            + keras_source(config))
    return None, ""


def keras_source(config: Mapping[str, Any]) -> str:
    """Why Keras' default is taken: the file names it, or it is assumed of a Keras file or a Keras graph."""
    if config.get("keras_initializer_stored"):
        return "as the file's model_config names it"
    lookup = config.get("keras_lookup")
    if isinstance(lookup, str):
        return f"assumed: tf2onnx's graph looks the table up by Keras' {lookup!r}, and does not store its initializer"
    return f"assumed: the file, saved by Keras {config.get('keras_version')}, does not store its initializer"


def find_untrained(array: np.ndarray, norms: np.ndarray, role: str, config: Mapping[str, Any] | None = None,
                   first_row: int = 0) -> Untrained:
    """The rows of one table that never trained (see the module's rule); `first_row`: rows before position 0."""
    rows, dim = (array.shape[0], array.shape[1]) if array.ndim == 2 else (0, 0)
    valid = np.isfinite(norms) & (norms > 0)
    if dim < MIN_DIM or int(valid.sum()) < MIN_RUN:
        return nothing(f"not judged: {dim} columns and {int(valid.sum())} rows with a finite, non-zero norm "
                       f"({MIN_DIM} and {MIN_RUN} needed)")
    sigma, sigma_why = init_scale(config or {}, role)
    if role == "position":
        return positions_at_init(array, norms, valid, sigma, sigma_why, first_row)
    at_init = tokens_at_init(array, norms, valid, sigma, sigma_why, uniform_limit(config or {}, role))
    if at_init.near and role == "output":
        # a head's rows all train at every step (the softmax over the vocabulary pushes the ones never predicted):
        # growth does not say which trained less (a tiny BERT's untied decoder: its 10 never-predicted ids grew to
        # 4 times the draw's norm, the 28 ids it predicted 100 to 400 times each kept it)
        at_init = nothing()
    if at_init.whole:  # every valid row is at init: none is left to have moved together
        return at_init
    together = moved_together(array, norms, valid & ~at_init.mask(rows))
    if not together.count:
        zero = at_zero(array, norms) if not at_init.count else None
        return zero if zero is not None and zero.count else at_init  # at_init's rule may say what it did not judge
    if not at_init.count:
        return together
    both = np.union1d(at_init.rows, together.rows)
    # an undecided majority stays undecided beside a group that moved together: no figure draws the union apart
    return Untrained(both, RULE, f"{at_init.evidence}; {together.evidence}", f"{at_init.kind} and moved together",
                     undecided=at_init.undecided)


def at_zero(array: np.ndarray, norms: np.ndarray) -> Untrained:
    """Most of a quantized table at zero or within a step of it (analysis.lattice): undecided, as they cannot be
    told from zero at the file's resolution; the zero rows stay anomalies (analysis.norms)."""
    found = near_zero(array, norms)
    if found is None:
        return nothing()
    rows, step = found
    evidence = near_zero_evidence(len(rows), int((norms == 0).sum()), len(norms), step)
    return Untrained(rows, RULE, evidence, AT_ZERO, undecided=True)


# ---------------------------------------------------------------- still as initialised


def band(norms: np.ndarray, scale: float, dim: int) -> np.ndarray:
    """Rows whose norm lies where a Gaussian draw of norm `scale` puts it."""
    with np.errstate(invalid="ignore", over="ignore"):  # a config's initializer_range of 1e-320 overflowed the
        off = norms / scale                               # quotient (numpy's warning on stderr): inf is off the band  # |norm / scale - 1| worked in one array: the table's every row, 8 bytes each
        off -= 1
        return np.abs(off, out=off) <= BAND_SPREADS / math.sqrt(2 * dim)


def neighbour_cosines(array: np.ndarray) -> np.ndarray:
    """cos(row i, row i+1) for i = 0..rows-2; NaN where either row is invalid."""
    count = array.shape[0] - 1
    if count < 1:
        return np.zeros(0)
    found: np.ndarray = compute.pair_cosines(array, np.stack([np.arange(count), np.arange(1, count + 1)], axis=1))
    return found


def positions_at_init(array: np.ndarray, norms: np.ndarray, valid: np.ndarray, sigma: float | None, sigma_why: str,
                      first_row: int) -> Untrained:
    """Runs of MIN_RUN or more position rows at the norm of the init scale and unlike both neighbours."""
    rows, dim = array.shape
    valid = valid.copy()
    valid[:first_row] = False  # rows before position 0 are never used by design (padding_idx + 1): no verdict
    following = neighbour_cosines(array)
    if first_row:
        following[first_row - 1] = np.nan  # a reserved row is no neighbour
    bound = NEIGHBOUR_SPREADS / math.sqrt(dim)
    with np.errstate(invalid="ignore"):
        alike = np.abs(following) > bound  # NaN (an invalid neighbour) is not evidence either way
    seen = np.isfinite(following)
    lone = valid.copy()
    lone[:-1] &= ~alike
    lone[1:] &= ~alike
    some = np.zeros(rows, dtype=bool)  # a row needs one neighbour to be unlike
    some[:-1] |= seen
    some[1:] |= seen
    lone &= some
    if int(lone.sum()) < (MIN_RUN if sigma is None else MIN_TAIL_RUN):
        return nothing()
    scale, said = (sigma * math.sqrt(dim), f"the {sigma:g} x sqrt({dim}) of the initialisation ({sigma_why})") \
        if sigma is not None else (math.nan, "")
    found = lone & band(norms, scale, dim) if sigma is not None else np.zeros(rows, dtype=bool)
    tail = bool(found[-MIN_TAIL_RUN:].all())  # the last positions at the stated scale: past the training length
    if int(found.sum()) < MIN_RUN and not tail:  # no known scale, or the rows sit at another one: estimate it
        scale = median_of(norms[lone])
        spread = MAD_SCALE * median_of(np.abs(norms[lone] / scale - 1))
        if spread > 2 / math.sqrt(2 * dim):  # not the spread of a Gaussian draw
            return nothing()
        found = lone & band(norms, scale, dim)
        said = (f"a Gaussian draw of sigma {scale / math.sqrt(dim):.3g} (estimated from these rows) x sqrt({dim}), "
                f"spread {spread:.2g} against the 1/sqrt(2d) = {1 / math.sqrt(2 * dim):.2g} of such a draw")
    shortest = MIN_RUN if sigma is not None and "estimated" not in said else MIN_ESTIMATED_RUN
    runs = [(a, b) for a, b in joined(runs_of(found))
            if b - a + 1 >= (MIN_TAIL_RUN if tail and b == rows - 1 and shortest == MIN_RUN else shortest)
            and mean_abs(following[a:b]) <= MEAN_NEIGHBOUR_SPREADS / math.sqrt(dim)]
    runs = one_scale(runs, norms, dim)
    runs, prefix = trained_prefixes(array, norms, runs)
    said += prefix
    if not runs:
        return nothing()
    chosen = np.concatenate([np.arange(a, b + 1) for a, b in runs])
    chosen = chosen[valid[chosen]]
    whole = len(chosen) == int(valid.sum())
    return Untrained(chosen, RULE, position_evidence(norms, following, chosen, runs, said, whole, first_row, rows),
                     "at init", whole)


def trained_prefixes(array: np.ndarray, norms: np.ndarray, runs: list[tuple[int, int]]) -> tuple[
        list[tuple[int, int]], str]:
    """Each run less the first positions whose unit rows share a direction, where the rest share none: a model
    trained on short sequences moves its first positions, and at a wide init scale they keep the draw's norm and
    look unlike their neighbours (attack20's torch models, 512 x 64 at N(0, 1), Adam at lr 3e-2 on sequences of
    128: the whole table was said to be as initialised, yet d |sum of unit rows|^2 / rows is 277 on positions 0-127,
    56 on the rest, where a draw passes 115). The split is where that statistic of the prefix peaks; it stands where
    the prefix passes the line a draw passes with a chance of SHARED_CHANCE over the log2(rows) scales searched,
    and the rest does not. Also what the evidence says of it ("; ...")."""
    dim, kept, said = array.shape[1], [], ""
    for a, b in runs:
        count = b - a + 1
        if count < 2 * MIN_ESTIMATED_RUN or count * dim > BLOCK_BYTES // 8:
            kept.append((a, b))
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            unit = np.asarray(array[a:b + 1], dtype=np.float64) / norms[a:b + 1, None]
        unit[~np.isfinite(unit).all(axis=1)] = 0.0  # a NaN, Inf or zero row that joined the run adds nothing
        sums = np.cumsum(unit, axis=0)
        sizes = np.arange(1, count + 1)
        prefix = dim * np.einsum("ij,ij->i", sums, sums) / sizes
        split = MIN_ESTIMATED_RUN + int(np.argmax(prefix[MIN_ESTIMATED_RUN - 1:count - MIN_ESTIMATED_RUN]))
        rest = sums[-1] - sums[split - 1]
        after = dim * float(rest @ rest) / (count - split)
        line = shared_line(dim, SHARED_CHANCE / max(1.0, math.log2(count)))
        if prefix[split - 1] <= line or after > shared_line(dim, SHARED_CHANCE):
            kept.append((a, b))
            continue
        lean = leaning(unit[split:], sums[split - 1], dim)
        kept.append((a + split + lean, b))
        said += (f"; rows {a}-{a + split + lean - 1} left out, trained: the first {split} share a direction (d |sum "
                 f"of unit rows|^2 / rows {prefix[split - 1]:.3g}, where a draw passes {line:.3g} with a chance of "
                 f"{SHARED_CHANCE:g} over the splits searched), the rest none ({after:.3g})")
        if lean:
            said += (f", and the next {lean} still lean that way (the running sum of their projections on it, times "
                     f"sqrt(d), less {LEAN_DRIFT:g} a row, peaks there)")
    return kept, said


def leaning(unit: np.ndarray, direction: np.ndarray, dim: int) -> int:
    """How many rows past a trained prefix still lean its way: the peak of the running sum of their projections on
    its direction (times sqrt(d): a draw's are N(0, 1)) less LEAN_DRIFT each. Positions trained less than the first
    ones share less of their direction (attack20's Adam model: projections 1.3 to 2.2 on positions 0-94, 0.48 on
    95-127, 0 past 128), and the split of the shared direction falls before them; on draws the running sum drifts
    down, and its peak lies within a few rows of the start."""
    steps = math.sqrt(dim) * (unit @ (direction / np.linalg.norm(direction))) - LEAN_DRIFT
    walk = np.cumsum(steps)
    return int(np.argmax(walk)) + 1 if len(walk) and float(np.max(walk)) > 0 else 0


def shared_line(dim: int, chance: float) -> float:
    """The upper `chance` quantile of chi-square with `dim` degrees (Wilson and Hilferty's cube-root normal form)."""
    normal = statistics.NormalDist().inv_cdf(1 - chance)
    return dim * (1 - 2 / (9 * dim) + normal * math.sqrt(2 / (9 * dim))) ** 3


def one_scale(runs: list[tuple[int, int]], norms: np.ndarray, dim: int) -> list[tuple[int, int]]:
    """The runs whose mean norm agrees with the longest run's median, within RUN_NORM_ERRORS standard errors of the
    two (a draw's norms spread 1/sqrt(2d) relative, a mean of n of them 1/sqrt(2dn)): rows drawn at init share one
    scale, where a run of trained positions that the band's width and the loose neighbour bound of a narrow table let
    in sits above it (attack20's tied torch model, 512 x 64 positions trained with AdamW on sequences of 128: runs
    34-50, 84-91 and 104-117 at mean norm 0.20 to 0.23 beside the 384 unused positions' 0.147, 12 to 17 errors off)."""
    if len(runs) < 2:
        return runs
    longest = max(runs, key=lambda run: run[1] - run[0])
    lengths = np.array([b - a + 1 for a, b in runs], dtype=np.float64)
    reference = median_of(norms[longest[0]:longest[1] + 1][np.isfinite(norms[longest[0]:longest[1] + 1])])
    means = np.array([mean_finite(norms[a:b + 1]) for a, b in runs])
    errors = np.sqrt(1 / lengths + 1 / (longest[1] - longest[0] + 1)) / math.sqrt(2 * dim)
    return [run for run, mean, error in zip(runs, means, errors)
            if abs(mean / reference - 1) <= RUN_NORM_ERRORS * error]


def mean_finite(values: np.ndarray) -> float:
    finite = values[np.isfinite(values) & (values > 0)]
    return float(np.mean(finite)) if len(finite) else math.nan


def joined(runs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Runs less than GAP_FILLED + 1 rows apart made one."""
    merged: list[tuple[int, int]] = []
    for a, b in runs:
        if merged and a - merged[-1][1] - 1 <= GAP_FILLED:
            merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    return merged


def mean_abs(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(np.mean(np.abs(finite))) if len(finite) else math.inf


def runs_of(flags: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) of each run of True."""
    edges = np.diff(np.concatenate([[0], flags.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1).tolist(), (np.flatnonzero(edges == -1) - 1).tolist()))


def spread_text(values: np.ndarray) -> str:
    return f"{float(np.mean(values)):.4g} +- {float(np.std(values)):.2g}"


def position_evidence(norms: np.ndarray, following: np.ndarray, chosen: np.ndarray, runs: list[tuple[int, int]],
                      said: str, whole: bool, first_row: int, rows: int) -> str:
    """One sentence: which positions, their norms and the scale they match, their neighbours, what it means."""
    named = ", ".join(f"{a - first_row}-{b - first_row}" if b > a else f"{a - first_row}" for a, b in runs[:4])
    named += f" and {len(runs) - 4} more ranges" if len(runs) > 4 else ""
    inside = np.zeros(rows, dtype=bool)
    inside[chosen] = True
    pairs_in = inside[:-1] & inside[1:]
    pairs_out = ~inside[:-1] & ~inside[1:] & np.isfinite(following)
    pairs_out[:first_row] = False  # rows before position 0 (padding_idx + 1) are reserved, not trained positions
    alike = f"neighbour cosine {float(np.nanmean(np.abs(following[pairs_in]))):.2g}" if pairs_in.any() else ""
    if alike and pairs_out.any():
        alike += f" against {float(np.nanmean(following[pairs_out])):.2g} between trained positions"
    head = f"{WHOLE_TABLE} ({len(chosen):,} rows)" if whole else f"positions {named} ({len(chosen):,} rows) never trained"
    sentence = (f"{head}: norm {spread_text(norms[chosen])}, {said}, no two neighbours alike ({alike})" if alike else
                f"{head}: norm {spread_text(norms[chosen])}, {said}")
    if whole:
        return sentence
    last_run = runs[-1]
    if last_run[1] == rows - 1 and len(runs) == 1 and last_run[0] > first_row:
        sentence += f"; the model saw sequences of at most about {last_run[0] - first_row} tokens"
    return sentence


def tokens_at_init(array: np.ndarray, norms: np.ndarray, valid: np.ndarray, sigma: float | None,
                   sigma_why: str, limit: float | None = None) -> Untrained:
    """Token rows at the norm of the init scale whose nearest row is no closer than a Gaussian draw's: with the
    scale known, the rows in its band; without it, the whole table when every row is so. `limit`: the a of a
    uniform(-a, a) draw (Keras' default), by whose bound rows that are no group are judged one by one (lone_draws)."""
    dim = array.shape[1]
    if sigma is not None:
        scale, said = sigma * math.sqrt(dim), f"the {sigma:g} x sqrt({dim}) of the initialisation ({sigma_why})"
    else:
        scale = median_of(norms[valid], overwrite=True)  # a copy already: partitioned in place
        said = f"a Gaussian draw of sigma {scale / math.sqrt(dim):.3g} (estimated) x sqrt({dim})"
    candidates = np.flatnonzero(valid & band(norms, scale, dim))
    found = drawn_group(array, norms, valid, sigma, scale, said, candidates)
    if sigma is None and found.contrasted:
        found = shrunk_alike(array, norms, valid, scale, found)
    elif sigma is None and not found.count:
        found = low_tail_draw(array, norms, valid)
    if not found.count and limit is not None:
        boxed = boxed_group(array, norms, valid, (sigma, scale, said), candidates, limit)
        if not boxed.count:
            boxed = shrunk_box(array, norms, valid, (sigma, scale, said), candidates, limit)
        if boxed.count:
            return boxed
    if found.count and limit is not None:  # a uniform(-a, a) draw never leaves its box, and fills it evenly
        drawn = found.rows[peaks_of(array)[found.rows] <= limit]
        said_drawn = even_in_box(array, drawn, limit, said)
        found = drawn_group(array, norms, valid, sigma, scale, said_drawn, drawn) if said_drawn else nothing()
        return found if found.count else near_init(array, norms, valid, (sigma, scale, said), candidates, limit)
    if found.count:
        return found
    near = near_init(array, norms, valid, (sigma, scale, said), candidates, limit)
    if near.count or limit is None or not len(candidates):
        return near if near.count else found  # nothing, with why a low tail was not judged where it says
    return lone_draws(array, norms, valid, candidates, limit, said)


def near_init(array: np.ndarray, norms: np.ndarray, valid: np.ndarray, scale_of: tuple[float | None, float, str],
              candidates: np.ndarray, limit: float | None) -> Untrained:
    """A majority of the rows in the band of a known init scale that no test takes for a draw (they moved), beside
    other rows whose norms stand far above theirs (shakkala 1.7's middle_model.h5: 90 of 149 character rows keep
    uniform(-0.05, 0.05)'s norm, moved a little and together, where 46 trained letters grew to 2 to 9 times it).
    The anomaly rule's median lies among them: measured from it, every row that grew is an anomaly. They are judged
    apart, said to keep their initialisation's norm, moved: neither at init nor never trained. `scale_of`: sigma,
    the scale of the band and what the evidence says of it."""
    sigma, scale, said = scale_of
    dim, valid_rows = array.shape[1], int(valid.sum())
    if sigma is None or len(candidates) < MIN_GROUP or len(candidates) <= ESTIMATED_SHARE * valid_rows:
        return nothing()
    others = valid.copy()
    others[candidates] = False
    outside = norms[others]
    inside = norms[candidates]
    center = median_of(inside)
    spread = MAD_SCALE * median_of(np.abs(inside - center))
    edge = scale * (1 + 2 * BAND_SPREADS / math.sqrt(2 * dim))
    far = outside[(outside > edge) & (outside > center + FAR_SPREADS * spread)]
    if len(far) < MIN_GROUP or 2 * len(far) <= len(outside):
        return nothing()
    moved = moved_from_draw(array, norms, valid, candidates, limit)
    if not moved:
        return nothing()
    evidence = (f"{len(candidates):,} rows, {KEPT_NORM}: norm {spread_text(inside)}, {said}; {moved}; "
                f"{len(far):,} of the other {len(outside):,} rows stand far above them (norms {float(far.min()):.4g} "
                f"to {float(far.max()):.4g}, median {median_of(far):.4g}: beyond twice the band's reach, {edge:.4g}, "
                f"and {FAR_SPREADS:g} robust spreads of these rows' norms, {center + FAR_SPREADS * spread:.4g}): those "
                "grew in training, these moved far less, trained too little to grow (how little, these tests cannot "
                "tell), and are judged apart from them")
    return Untrained(candidates, RULE, evidence, NEAR_INIT, undecided=True)


def moved_from_draw(array: np.ndarray, norms: np.ndarray, valid: np.ndarray, rows: np.ndarray,
                    limit: float | None) -> str:
    """What shows that `rows` are no draw at init, each test's figure against its line (rows alike their nearest,
    a direction shared, coordinates out of the uniform draw's box), or "" where none does."""
    dim = array.shape[1]
    sample = np.sort(np.random.default_rng(0).choice(rows, size=min(NEAREST_SAMPLE, len(rows)), replace=False))
    nearest = nearest_cosines(array, norms, valid, sample)
    bound = nearest_bound(dim, int(valid.sum()))
    unlike = float(np.mean(np.abs(np.nan_to_num(nearest, nan=1.0)) <= bound))
    shared, line, summed = shared_direction(array, norms, rows)
    shown = []
    if unlike < AT_INIT_SHARE:
        shown.append(f"only {unlike:.0%} of a sample of {len(sample)} unlike their nearest row (nearest-row cosine "
                     f"below {bound:.2g}, where {AT_INIT_SHARE:.0%} of a draw's are)")
    if shared > line:
        shown.append(f"they share a direction (d |sum of unit rows|^2 / rows {shared:.3g}{sampled(summed, len(rows))}, "
                     f"where a draw passes {line:.3g} with a chance of {SHARED_CHANCE:g})")
    if limit is not None:
        peaks = peaks_of(array)[rows]
        if float(peaks.max()) > limit:
            inside = coordinates_within(array, rows, limit)
            shown.append(f"{inside:.0%} of their coordinates within the uniform(-{limit:g}, {limit:g}) draw's bound, "
                         f"{int(np.count_nonzero(peaks > limit)):,} rows beyond it (largest |x| "
                         f"{float(peaks.max()):.3g})")
    return "but they moved from the draw: " + "; ".join(shown) if shown else ""


def coordinates_within(array: np.ndarray, rows: np.ndarray, limit: float) -> float:
    """The share of the coordinates of `rows` within +-limit, read a block at a time."""
    step = max(1, BLOCK_BYTES // (8 * max(1, array.shape[1])))
    count = 0
    for start in range(0, len(rows), step):
        count += int(np.count_nonzero(np.abs(np.asarray(array[rows[start:start + step]], dtype=np.float64)) <= limit))
    return float(count / (len(rows) * array.shape[1]))


def low_tail_draw(array: np.ndarray, norms: np.ndarray, valid: np.ndarray) -> Untrained:
    """With no known scale, a minority of rows below the widest step in the lower half of the sorted norms, judged
    as a draw of the scale their own median norm gives: typeseg 0.2.7's unet_al.npz (Flax, 130 x 256) keeps the 30
    byte ids its sanitiser never emits at norm 0.28 to 0.35 (N(0, 0.02)), the 100 others at 2.1 and above. The
    group tests (drawn_group) and the others' standing apart decide; the scale is said to be estimated so."""
    dim, rows = array.shape[1], np.flatnonzero(valid)
    if len(rows) < 2 * MIN_GROUP or dim < TAIL_MIN_DIM:
        return nothing()
    ordered = rows[np.argsort(norms[rows], kind="stable")]
    sorted_norms = norms[ordered]
    steps = sorted_norms[MIN_GROUP:len(ordered) // 2 + 1] / sorted_norms[MIN_GROUP - 1:len(ordered) // 2]
    if not len(steps):
        return nothing()
    below = np.sort(ordered[:MIN_GROUP + int(np.argmax(steps))])
    scale = median_of(norms[below])
    # a few trained rows between the draw's band and the step are no part of it (attack19's w14: a torch table at
    # N(0, 0.02), 4,000 x 256, its 433 unseen ids at the draw below 2 seen rows of norm 0.42 to 0.72, then the step)
    tail = below[band(norms[below], scale, dim)]
    if len(tail) < TAIL_MIN_ROWS or len(tail) < AT_INIT_SHARE * len(below):
        return nothing()
    if not draw_spread(norms[tail], dim):
        return nothing()
    kurtosis, allowed = coordinate_kurtosis(array, tail)
    if abs(kurtosis - 3) > allowed:  # no Gaussian draw: rows shrunk alike, or none (verdicts16's tdmelodic)
        return shrunk_tail(array, norms, valid, tail, scale, (kurtosis, allowed))
    strays = (f" ({len(below):,} rows, {len(below) - len(tail):,} of them above the band of their median)"
              if len(tail) < len(below) else "")
    said = (f"a Gaussian draw of sigma {scale / math.sqrt(dim):.3g} (estimated from these {len(tail)} rows, the "
            f"lowest norms, below the widest step in the lower half of the norms{strays}; their coordinates' kurtosis "
            f"{kurtosis:.3g}, a Gaussian's 3 +- {allowed:.2g}) x sqrt({dim})")
    if dim < TAIL_LOOSE_DIM or len(tail) > UNIFORM_SAMPLE:
        found = drawn_group(array, norms, valid, None, scale, said, tail, tail_of_table=True)
        return found if found.count else crowded_tail(array, norms, valid, tail, scale)
    return tail_alone(array, norms, valid, tail, scale, said)


def crowded_tail(array: np.ndarray, norms: np.ndarray, valid: np.ndarray, tail: np.ndarray, scale: float) -> Untrained:
    """No verdict on a low tail that passes every test of a draw but the others' standing apart from twice the
    band's reach, while they stand apart from its reach once: the rule says so and why it is not judged (attack20's
    torch models, 2,000 x 64 at N(0, 0.02), Adam and AdamW: 504 rows below the step, 499 never seen, and the 5 most
    frequent rows, shrunk into the band, which the nearest-row line of 64 columns does not set apart)."""
    if not drawn_group(array, norms, valid, None, scale, "", tail, tail_of_table=True, apart_reaches=1.0).count:
        return nothing()
    return nothing(f"not judged: the {len(tail):,} rows of lowest norm look like a Gaussian draw of sigma "
                   f"{scale / math.sqrt(array.shape[1]):.3g}, but trained rows crowd its band's edge, and at "
                   f"{array.shape[1]} columns (below {TAIL_LOOSE_DIM}) the nearest-row test cannot set apart trained "
                   "rows that shrank into the band")


def tail_alone(array: np.ndarray, norms: np.ndarray, valid: np.ndarray, tail: np.ndarray, scale: float,
               said: str) -> Untrained:
    """The low tail of a table TAIL_LOOSE_DIM wide or more, each row tested alone against its nearest row (a draw's
    passes the line with a chance of NEAREST_CHANCE), judged as a group where the others stand apart from the
    band's reach once, not twice: trained rows may crowd the draw's edge where the norms step (attack20's torch
    model, 2,000 x 256 at N(0, 0.02), AdamW: its 500 unseen rows at norm 0.27 to 0.35, trained rows from 0.36 up,
    so many within twice the reach that none was found), and the most frequent rows may shrink into the band (its
    two most frequent, seen 71,278 and 15,286 times, at 0.31 and 0.35: nearest-row cosine 0.48 and 0.52 against the
    line's 0.32 and the unseen rows' 0.20)."""
    nearest = nearest_cosines(array, norms, valid, tail)
    bound = nearest_bound(array.shape[1], int(valid.sum()))
    alike = np.abs(np.nan_to_num(nearest, nan=1.0)) > bound
    kept = tail[~alike]
    if alike.any():
        said += (f"; {plural(int(alike.sum()), 'row')} of the band left out, each alike its nearest row (cosine "
                 f"{float(np.min(nearest[alike])):.2g} to {float(np.max(nearest[alike])):.2g}, where a draw's passes "
                 f"{bound:.2g} with a chance of {NEAREST_CHANCE:g})")
    return drawn_group(array, norms, valid, None, scale, said, kept, tail_of_table=True, apart_reaches=1.0)


def shrunk_tail(array: np.ndarray, norms: np.ndarray, valid: np.ndarray, tail: np.ndarray, scale: float,
                kurtosis_of: tuple[float, float]) -> Untrained:
    """The low tail of low_tail_draw (its rows in their band, enough of them, their norms spread as a draw's) when
    its coordinates are no Gaussian draw's (`kurtosis_of`: their kurtosis and how far from 3 a draw's may lie): rows
    shrunk alike (shrunk_alike), judged as a group where they do not fill a box evenly (a uniform draw's kurtosis is
    1.8): tdmelodic's enc_surface emb_v, 24 unused rows at 4e-5 of its 50, one more at 4e-4 left with the rest."""
    kurtosis, allowed = kurtosis_of
    if even_in_box(array, tail, float(np.max(peaks_of(array)[tail])), "a draw"):
        return nothing()
    found = drawn_group(array, norms, valid, None, scale, shrunk_said(kurtosis, allowed), tail, tail_of_table=True)
    return Untrained(found.rows, RULE, found.evidence, SHRUNK) if found.count else found


def shrunk_said(kurtosis: float, allowed: float) -> str:
    return (f"a common norm that no Gaussian draw gives (their coordinates' kurtosis {kurtosis:.3g}, a Gaussian's 3 "
            f"+- {allowed:.2g}): not as initialised, but shrunk alike, as weight decay leaves rows that no lookup moves")


def shrunk_alike(array: np.ndarray, norms: np.ndarray, valid: np.ndarray, scale: float, found: Untrained) -> Untrained:
    """A majority at an estimated scale, apart from the other rows, whose coordinates are no Gaussian draw's: not as
    initialised, but shrunk alike to a common norm, as weight decay leaves rows that no lookup moves (tdmelodic's
    net_it_2500000, Adam and L2 for 2.5M steps: 41 of emb_pos's 50 rows at norm 4e-5, coordinates at a few steps of
    3e-6, kurtosis 1.98, and not spread evenly in a box as a uniform draw's are). Still never trained; the evidence
    says what they are."""
    kurtosis, allowed = coordinate_kurtosis(array, found.rows)
    if abs(kurtosis - 3) <= allowed:
        return found
    if even_in_box(array, found.rows, float(np.max(peaks_of(array)[found.rows])), "a uniform draw"):
        return found  # a uniform draw's kurtosis is 1.8 (LAC's 50,000 word rows): a draw all the same
    again = drawn_group(array, norms, valid, None, scale, shrunk_said(kurtosis, allowed), found.rows)
    return Untrained(again.rows, RULE, again.evidence, SHRUNK) if again.count else found


def draw_spread(norms: np.ndarray, dim: int) -> bool:
    """Whether the norms of a group spread as a Gaussian draw's do: relative spread 1 / sqrt(2 d) (a chi's), within
    SPREAD_ERRORS standard errors of a sample's (sqrt(2 (n - 1)) relative)."""
    mean = float(np.mean(norms))
    ratio = float(np.std(norms)) / mean * math.sqrt(2 * dim) if mean > 0 else math.inf
    return abs(ratio - 1) <= SPREAD_ERRORS / math.sqrt(2 * (len(norms) - 1))


def coordinate_kurtosis(array: np.ndarray, rows: np.ndarray) -> tuple[float, float]:
    """E[x^4] / E[x^2]^2 of the coordinates of `rows` (a sample of UNIFORM_SAMPLE rows at most), about zero as a
    draw at init is, and how far from a Gaussian's 3 a Gaussian draw's lies with KURTOSIS_SPREADS standard errors
    (sqrt(24 / n)): a uniform draw's is 1.8 (keras.layers.Embedding's, whose scale a file may not state), a trained
    row's coordinates are heavier-tailed."""
    sample = rows if len(rows) <= UNIFORM_SAMPLE else np.sort(np.random.default_rng(0).choice(
        rows, size=UNIFORM_SAMPLE, replace=False))
    squares = np.square(np.asarray(array[sample], dtype=np.float64)).ravel()
    second = float(squares.mean())
    kurtosis = float(np.square(squares).mean()) / second ** 2 if second > 0 else math.inf
    return kurtosis, KURTOSIS_SPREADS * math.sqrt(24 / len(squares))


def boxed_group(array: np.ndarray, norms: np.ndarray, valid: np.ndarray, scale_of: tuple[float | None, float, str],
                candidates: np.ndarray, limit: float) -> Untrained:
    """The rows of the band inside a uniform(-limit, limit) draw's box, judged as a group where the band as a whole
    is none: a Keras model trained with Adam keeps the rows it never saw in the box, while its seen rows of the same
    norms all left it (a 2,000 x 64 Embedding, 300 steps: the 500 ids never seen in the box, none of the 1,246 seen
    rows of the band; norms said none found). Judged only where the box's edge is a gap: of the band's rows whose
    largest |x| lies within limit / d of the bound, where a draw puts about 63% of its rows, as few lie beyond it
    as rows moved by chance across the edge would leave with a chance under EDGE_CHANCE (a model whose rows in the
    box were seen and moved a little has as many just beyond it)."""
    sigma, scale, said = scale_of
    peaks = peaks_of(array)[candidates]
    boxed = candidates[peaks <= limit]
    if len(boxed) < MIN_GROUP:
        return nothing()
    width = limit / array.shape[1]
    inside = int(np.count_nonzero(peaks > limit - width)) - int(np.count_nonzero(peaks > limit))
    beyond = int(np.count_nonzero((peaks > limit) & (peaks <= limit + width)))
    chance = fewer_chance(beyond, inside + beyond)
    if chance >= EDGE_CHANCE:
        return nothing()
    said_chance = f"{chance:.1g}" if chance > 0 else "under 1e-300"
    edge = (f"; the box's edge a gap: of the band's rows with largest |x| within {width:.3g} of the bound, {inside:,} "
            f"inside it, {beyond:,} beyond (rows crossing it by chance fall so unevenly with a chance of "
            f"{said_chance}), {len(candidates) - len(boxed):,} rows of the band beyond it in all")
    said_drawn = even_in_box(array, boxed, limit, said)
    return drawn_group(array, norms, valid, sigma, scale, said_drawn + edge, boxed) if said_drawn else nothing()


def shrunk_box(array: np.ndarray, norms: np.ndarray, valid: np.ndarray, scale_of: tuple[float | None, float, str],
               candidates: np.ndarray, limit: float) -> Untrained:
    """The rows of the band inside a smaller box than the draw's, of a bound their own peaks give, judged as
    boxed_group judges a box: a uniform draw scaled alike, as decoupled weight decay leaves the rows no lookup moves,
    each by (1 - lr wd)^t (attack20's Keras model, AdamW at lr 3e-3, weight decay 0.1, 300 steps: its 500 unseen rows
    within 0.0457 = 0.914 x 0.05, their coordinates spread evenly in that box; one of its 1,500 seen rows within it).
    The bound is the largest peak within 1/d above the median of the boxed rows' largest |x| over a uniform draw's
    median of it, 0.5^(1/d) of the bound; judged only where it lies below the draw's by more than a row's peak spreads (1/d of it)."""
    sigma, scale, said = scale_of
    dim = array.shape[1]
    peaks = peaks_of(array)[candidates]
    inside = peaks[peaks <= limit]
    if len(inside) < MIN_GROUP:
        return nothing()
    estimate = median_of(inside) / 0.5 ** (1 / dim)
    bound = float(np.max(inside[inside <= estimate * (1 + 1 / dim)]))  # the largest peak near it: the draw's edge
    if bound >= limit * (1 - 2 / dim):
        return nothing()
    factor = bound / limit
    shrunk = candidates[band(norms[candidates], scale * factor, dim)]
    said = (f"{said}, shrunk alike by {factor:.3g} (the bound {bound:.3g} of their box: the largest of their peak "
            f"|x| near where a draw's median peak puts it), as weight decay leaves rows that no lookup moves")
    found = boxed_group(array, norms, valid, (sigma, scale * factor, said), shrunk, bound)
    return Untrained(found.rows, RULE, found.evidence, SHRUNK) if found.count else found


def fewer_chance(fewer: int, count: int) -> float:
    """P(X <= fewer) for X ~ Binomial(count, 1/2): the chance that `count` rows fall as unevenly on two sides."""
    if fewer * 2 >= count:
        return 1.0
    ks = np.arange(fewer + 1)
    logs = (math.lgamma(count + 1) - np.array([math.lgamma(k + 1) + math.lgamma(count - k + 1) for k in ks])
            - count * math.log(2))
    return float(min(1.0, np.exp(logs).sum()))


def even_in_box(array: np.ndarray, rows: np.ndarray, limit: float, said: str) -> str:
    """`said` and what the coordinates of `rows`, each within the bound of a uniform(-limit, limit) draw, show of
    it: a draw's |x| / limit are uniform on [0, 1], where rows trained a little inside the box have lost some of
    their coordinates near its edges (Keras models trained briefly: Kolmogorov-Smirnov sqrt(n) D 2.5 to 3.8 on the
    rows seen, 0.7 to 1.2 on those never seen). "" where a draw's would pass the line with a chance under
    UNIFORM_CHANCE."""
    if not len(rows):
        return ""
    sample = rows if len(rows) <= UNIFORM_SAMPLE else np.sort(np.random.default_rng(0).choice(
        rows, size=UNIFORM_SAMPLE, replace=False))
    spread = np.sort(np.abs(np.asarray(array[sample], dtype=np.float64)).ravel() / limit)
    count = len(spread)
    distance = float(max(np.max(np.arange(1, count + 1) / count - spread), np.max(spread - np.arange(count) / count)))
    line = math.sqrt(math.log(2 / UNIFORM_CHANCE) / 2)  # Kolmogorov's P(sqrt(n) D > x) ~ 2 exp(-2 x^2)
    if math.sqrt(count) * distance > line:
        return ""
    return (f"{said}; every coordinate within the uniform(-{limit:g}, {limit:g}) draw's bound and spread evenly in it "
            f"(Kolmogorov-Smirnov sqrt(n) D {math.sqrt(count) * distance:.2f} over {count:,} coordinates, where a "
            f"draw passes {line:.3g} with a chance of {UNIFORM_CHANCE:g})")


def plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def drawn_group(array: np.ndarray, norms: np.ndarray, valid: np.ndarray, sigma: float | None, scale: float, said: str,
                candidates: np.ndarray, tail_of_table: bool = False, apart_reaches: float = 2.0) -> Untrained:
    """The rows in the band (`candidates`) judged as a group: MIN_GROUP or more, most of a sample of them unlike
    their nearest row, and no shared direction among them. `tail_of_table`: a minority whose scale was estimated
    from its own norms (low_tail_draw), judged only where the other rows stand apart."""
    dim, valid_rows = array.shape[1], int(valid.sum())
    minority = len(candidates) <= ESTIMATED_SHARE * valid_rows
    if len(candidates) < MIN_GROUP or (sigma is None and minority and not tail_of_table):
        return nothing()
    # without a scale, a table nine tenths of whose rows are in the band is judged whole; a smaller majority alone,
    # when the other rows' norms stand apart from the band
    whole = len(candidates) == valid_rows or (sigma is None and len(candidates) >= AT_INIT_SHARE * valid_rows)
    contrast = the_rest(norms, valid, candidates, sigma, (scale, dim, apart_reaches), whole)
    if contrast is None:
        return nothing()
    apart, undecided = contrast
    if sigma is None and too_alike(norms if len(candidates) == len(norms) else norms[candidates], scale, dim):
        return nothing()
    sample = np.sort(np.random.default_rng(0).choice(candidates, size=min(NEAREST_SAMPLE, len(candidates)),
                                                     replace=False))
    nearest = nearest_cosines(array, norms, valid, sample)
    bound = nearest_bound(dim, int(valid.sum()))
    if float(np.mean(np.abs(np.nan_to_num(nearest, nan=1.0)) <= bound)) < AT_INIT_SHARE:
        return nothing()
    shared, shared_line, summed = shared_direction(array, norms, candidates)
    summed_text = sampled(summed, len(candidates))
    if shared > shared_line:  # a draw's directions have no common mean: training gave these one
        return nothing()
    if whole and len(candidates) < valid_rows:  # (as many are every valid row already)
        candidates = np.flatnonzero(valid)
    head = (WHOLE_TABLE if whole else f"{len(candidates):,} rows, {MOST_ROWS}" if undecided else
            f"{len(candidates):,} rows never trained")
    chosen = norms if len(candidates) == len(norms) else norms[candidates]  # every row: no copy of them
    evidence = (f"{head}: norm {spread_text(chosen)}, {said}; no row alike (nearest-row "
                f"cosine {float(np.nanmean(nearest)):.2g} on a sample of {len(sample)}, where a random draw's "
                f"passes {bound:.2g} with a chance of {NEAREST_CHANCE:g}); no shared direction (d |sum of unit "
                f"rows|^2 / rows {shared:.3g}{summed_text}, chi-square with {dim} degrees, where a draw passes "
                f"{shared_line:.3g} with a chance of {SHARED_CHANCE:g}){apart}")
    return Untrained(candidates, RULE, evidence, "at init", whole, undecided)


def the_rest(norms: np.ndarray, valid: np.ndarray, candidates: np.ndarray, sigma: float | None,
             band_of: tuple[float, int, float], whole: bool) -> tuple[str, bool] | None:
    """How the rows outside the band stand against a majority in it: (what the evidence says of them, whether the
    majority is undecided), or None for no verdict. Without a scale a majority is judged only where the others'
    norms stand apart; at a known scale, where they do not, nothing trained stands against it: undecided.
    `band_of`: the scale, the table's width and how many of the band's reaches the others must stand beyond."""
    if whole or (sigma is not None and len(candidates) <= ESTIMATED_SHARE * int(valid.sum())):
        return "", False
    stand_apart, said = standing_apart(norms, valid, candidates, *band_of)
    if stand_apart:
        return said, False
    return (said, True) if sigma is not None else None


def standing_apart(norms: np.ndarray, valid: np.ndarray, candidates: np.ndarray, scale: float,
                   dim: int, reaches: float = 2.0) -> tuple[bool, str]:
    """With a majority of the rows in the band, whether the others' norms stand apart from it
    (at most APART_SHARE of them within twice its reach, or `reaches` times): a draw's rows left alone by training leave a gap to the
    trained ones (LAC: none of 8,060 within it), where in a table trained throughout the band's edges are crowded
    (a tied model trained with decay: all of its 64 other rows). The evidence ('; ...') says how many are near,
    either way: shakkala 1.7's simple_model.h5 said only that 'the other rows' norms do not stand apart'."""
    others = valid.copy()
    others[candidates] = False
    reach = BAND_SPREADS / math.sqrt(2 * dim)
    outside = norms[others]
    near = int(np.count_nonzero(np.abs(outside / scale - 1) <= reaches * reach))
    times = "twice the band's reach" if reaches == 2 else "the band's reach" if reaches == 1 else \
        f"{reaches:g} times the band's reach"
    if not len(outside) or near > APART_SHARE * len(outside):
        return False, (f"; {near:,} of the other {len(outside):,} rows have norms within {times} "
                       f"({reaches * reach:.2g} of the scale; {APART_SHARE:.0%} may); the other rows' norms do not "
                       "stand apart from theirs")
    return True, (f"; the other {len(outside):,} rows stand apart (norms {float(outside.min()):.4g} to "
                  f"{float(outside.max()):.4g}, {near:,} within {times}, {reaches * reach:.2g} of the scale)")


def lone_draws(array: np.ndarray, norms: np.ndarray, valid: np.ndarray, candidates: np.ndarray, limit: float,
               said: str) -> Untrained:
    """Rows in the band of a uniform(-limit, limit) draw that are no group (too few: rnnmorph's one row for an
    unknown character; or among trained rows of the same norms), each judged alone: a uniform draw never leaves the
    box |x| <= limit, so the row must lie in it; its nearest row must be no closer than a random draw's; and few of
    the table's other rows, scaled to the row's norm, may lie in the box too (the share of them that would is the
    chance a trained row of that norm is taken for a draw)."""
    peaks = np.max(np.abs(np.asarray(array[candidates], dtype=np.float64)), axis=1)
    boxed = candidates[peaks <= limit]
    # as many in the box as make a group are no lone rows: a Keras model trained briefly keeps hundreds of rare
    # tokens' rows in it (one seen a few times moves a few thousandths), which one by one no test tells from a draw
    if not len(boxed) or len(boxed) >= MIN_GROUP:
        return nothing()
    nearest = nearest_cosines(array, norms, valid, boxed)
    bound = nearest_bound(array.shape[1], int(valid.sum()))
    unlike = np.abs(np.nan_to_num(nearest, nan=1.0)) <= bound
    others = valid.copy()
    others[candidates] = False
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = peaks_of(array)[others] / norms[others]  # each other row's largest |x| per unit of norm
    spread = np.sort(spread[np.isfinite(spread)])
    shares = np.searchsorted(spread, limit / norms[boxed], side="right") / len(spread) if len(spread) else \
        np.ones(len(boxed))
    keep = unlike & (shares <= LONE_BOX_SHARE)
    # a row of the band in the box that the tests cannot call a draw is one training left there, as it may have left
    # the others (rnnmorph's English table: five rare characters of its text in the box, the one of largest norm
    # passing): rows are judged alone only where every row of the band in the box is judged
    if not keep.all():
        return nothing()
    rows = boxed
    norm_text = f"{float(norms[rows[0]]):.4g}" if len(rows) == 1 else spread_text(norms[rows])
    evidence = (f"{'row' if len(rows) == 1 else 'rows'} {', '.join(map(str, rows.tolist()))} never trained: every "
                f"coordinate within the uniform(-{limit:g}, {limit:g}) draw's bound (largest |x| "
                f"{float(peaks[np.isin(candidates, rows)].max()):.4g}), norm {norm_text}, {said}; no row alike "
                f"(nearest-row cosine {float(np.nanmax(nearest)):.2g}, where a random draw's passes {bound:.2g} "
                f"with a chance of {NEAREST_CHANCE:g}); of the table's {len(spread):,} other rows, scaled to its norm, "
                f"{float(shares.max()):.1%} would lie within the bound ({LONE_BOX_SHARE:.0%} allowed)")
    return Untrained(rows, RULE, evidence, "at init")


def peaks_of(array: np.ndarray) -> np.ndarray:
    """Each row's largest |x| (NaN rows give NaN), read a block at a time."""
    step = max(1, BLOCK_BYTES // (8 * max(1, array.shape[1])))
    found = np.zeros(array.shape[0])
    for start in range(0, array.shape[0], step):
        found[start:start + step] = np.max(np.abs(np.asarray(array[start:start + step], dtype=np.float64)), axis=1)
    return found


def shared_direction(array: np.ndarray, norms: np.ndarray, rows: np.ndarray) -> tuple[float, float, int]:
    """How far the unit rows `rows` share a direction, the line a draw at init passes with SHARED_CHANCE, and the
    rows summed (at most SHARED_SAMPLE, drawn with a fixed seed).
    n directions drawn at random (any isotropic draw, or one symmetric under sign flips and swaps of columns, as
    Keras' uniform is) sum to S with d |S|^2 / n distributed as chi-square with d degrees; a trained table's rows
    keep a common mean direction (attacut's Thai characters: 327 in 48 dimensions). The line is chi-square's
    upper SHARED_CHANCE quantile by Wilson and Hilferty's cube-root normal form."""
    dim = array.shape[1]
    if len(rows) > SHARED_SAMPLE:  # the statistic is chi-square at any number of rows: a sample keeps its power
        rows = np.sort(np.random.default_rng(0).choice(rows, size=SHARED_SAMPLE, replace=False))
    total = total_of(array, norms, rows)
    line = dim * (1 - 2 / (9 * dim) + SHARED_NORMAL * math.sqrt(2 / (9 * dim))) ** 3
    return float(dim * (total @ total) / max(len(rows), 1)), line, len(rows)


def sampled(used: int, rows: int) -> str:
    """Where the shared-direction statistic was worked out on a sample of the rows, how many."""
    return f" on a sample of {used:,}" if used < rows else ""


def too_alike(norms: np.ndarray, scale: float, dim: int) -> bool:
    """Whether the norms' robust relative spread is far below a Gaussian draw's 1/sqrt(2d) (a uniform draw's is
    0.63 of it): rows scaled to one norm, as a normalised export is, whatever their directions."""
    off = norms / scale  # |norm / scale - 1| worked in one array
    off -= 1
    spread = MAD_SCALE * median_of(np.abs(off, out=off), overwrite=True)
    return bool(spread < NARROWEST_SPREAD / math.sqrt(2 * dim))


def nearest_bound(dim: int, rows: int, chance: float = NEAREST_CHANCE) -> float:
    """The cosine t that a row drawn at random (any isotropic draw: its direction is uniform on the sphere) has a
    nearest row above, among `rows - 1` others, with probability `chance`: (rows - 1) P(cos > t) = chance, where
    cos has the density (1 - t^2)^((d - 3) / 2) on [-1, 1] (d = 3: uniform, Archimedes), integrated here on a
    grid in place of the regularised incomplete beta function."""
    grid = np.linspace(0.0, 1.0, 20_001)
    density = (1.0 - grid * grid) ** ((max(dim, 3) - 3) / 2)  # underflows to 0 in the far tail of a wide table
    steps = (density[1:] + density[:-1]) / 2  # the trapezoids, each of width 1/20,000
    above = np.concatenate([np.cumsum(steps[::-1])[::-1], [0.0]])  # the integral from each grid point to 1
    tail = above / (2 * above[0])  # P(cos > t): the density is even, so the whole is twice [0, 1]'s
    return float(grid[np.argmax(tail * max(rows - 1, 1) <= chance)])


def nearest_cosines(array: np.ndarray, norms: np.ndarray, valid: np.ndarray, sample: np.ndarray) -> np.ndarray:
    """float32 cosine of each `sample` row (valid, ascending) to its nearest other valid row, NaN when there is
    none: as `topk_rows(k=1)` gives it, but each block of rows as stored is multiplied by the sample's unit rows
    and the scores divided by the rows' norms (known already), so no unit copy of the table is made. Rows of
    extreme norms, which float32 products could lose or overflow, go through topk_rows instead."""
    ordinary = norms[valid]
    if ordinary.size and (ordinary.min() < ORDINARY_NORMS[0] or ordinary.max() > ORDINARY_NORMS[1]):
        found: np.ndarray = compute.topk_rows(array, 1, rows=sample, device="cpu").scores[:, 0]
        return found
    # the sample's unit rows as columns: float32, normalised in float64 as topk_rows does
    queries = np.ascontiguousarray(compute.unit_rows(array, rows=sample)[0].T)
    inverse = np.zeros(len(norms), dtype=np.float32)
    np.divide(1.0, norms, out=inverse, where=valid)  # 0 for invalid rows: their scores are set apart below
    best = np.full(len(sample), -np.inf, dtype=np.float32)
    lines = np.arange(len(sample))
    step = max(1, NEAREST_BLOCK_BYTES // (4 * max(len(sample), array.shape[1])))
    buffer = np.empty((step, len(sample)), dtype=np.float32)  # a row's scores side by side
    for start, raw in compute.raw_blocks(array, block_rows=step):
        stop = start + raw.shape[0]
        scores = buffer[:raw.shape[0]]
        with np.errstate(invalid="ignore", over="ignore"):  # NaN and Inf rows are set aside just after
            thin_product(np.asarray(raw, dtype=np.float32), queries, scores)
            scores *= inverse[start:stop, None]
        scores[~valid[start:stop]] = -np.inf
        own = (sample >= start) & (sample < stop)
        scores[sample[own] - start, lines[own]] = -np.inf  # a row is not its own nearest
        np.maximum(best, column_reduced(np.maximum, scores), out=best)
    return np.where(best == -np.inf, np.float32(np.nan), best)


# ---------------------------------------------------------------- moved only together


def unit_blocks(array: np.ndarray, norms: np.ndarray) -> Any:
    """(start, float64 unit rows) blocks; invalid rows come as zeros."""
    step = max(1, BLOCK_BYTES // (8 * max(1, array.shape[1])))
    for start in range(0, array.shape[0], step):
        block = np.array(array[start:start + step], dtype=np.float64)
        scale = norms[start:start + len(block)]
        ok = np.isfinite(scale) & (scale > 0)
        block[~ok] = 0.0  # NaN and Inf values too
        inverse = np.zeros(len(block))
        np.divide(1.0, scale, out=inverse, where=ok)
        block *= inverse[:, None]
        yield start, block


def mutual(total: np.ndarray, count: int) -> float:
    """The mean cosine between distinct unit rows whose sum is `total`."""
    return float((total @ total - count) / (count * (count - 1))) if count > 1 else math.nan


def moved_together(array: np.ndarray, norms: np.ndarray, valid: np.ndarray) -> Untrained:
    """The group of rows that point one way with norms in a narrow band (see the module's rule)."""
    ids = np.flatnonzero(valid)
    if len(ids) < 4 * MIN_GROUP:
        return nothing()
    size = max(2 * MIN_GROUP, len(ids) // 100)
    bins = len(ids) // size
    bin_of = np.full(len(norms), -1)
    bin_of[ids[np.argsort(norms[ids], kind="stable")]] = np.minimum(np.arange(len(ids)) // size, bins - 1)
    # each bin's unit rows summed, gathered in row order: one read of the valid rows in all
    sums = np.stack([total_of(array, norms, np.sort(ids[bin_of[ids] == b])) for b in range(bins)])
    counts = np.bincount(bin_of[ids], minlength=bins)
    tight = np.array([mutual(sums[b], int(counts[b])) >= TOGETHER_COSINE for b in range(bins)])
    runs = runs_of(tight)
    if not runs:
        return nothing()
    first, last = seed_bins(sums, counts, runs)
    direction = sums[first:last + 1].sum(axis=0)
    direction /= np.linalg.norm(direction)
    cosine = np.full(len(norms), np.nan)
    for start, block in unit_blocks(array, norms):
        cosine[start:start + len(block)] = block @ direction
    cosine[~valid] = np.nan
    seed = ids[(bin_of[ids] >= first) & (bin_of[ids] <= last)]
    return group_from_seed(array, norms, valid, cosine, seed)


def seed_bins(sums: np.ndarray, counts: np.ndarray, runs: list[tuple[int, int]]) -> tuple[int, int]:
    """The bins that seed the group: the largest run of tight bins, cut to the bins about its tightest whose mutual
    cosine is within SEED_SLACK of it. Rows moved only together point alike in every bin; a tied table's trained
    rows share the softmax's push too, less alike, in bins that may adjoin theirs (attack20's tied torch and GPT-2
    models, 2,000 x 64 with AdamW: bins of trained rows at mutual cosine 0.6 to 0.88 up to the 500 unseen rows' bins
    at 0.97; seeded from both, the group failed its tests and the unseen rows went unfound)."""
    mutuals = np.array([mutual(sums[b], int(counts[b])) for b in range(len(counts))])
    first, last = max(runs, key=lambda run: int(counts[run[0]:run[1] + 1].sum()))
    tightest = max((max(range(a, b + 1), key=lambda b: mutuals[b]) for a, b in runs), key=lambda b: mutuals[b])
    if mutuals[tightest] - SEED_SLACK <= float(np.min(mutuals[first:last + 1])):
        return first, last  # the largest run's bins alike: as before
    low, high = tightest, tightest
    while low > 0 and mutuals[low - 1] >= mutuals[tightest] - SEED_SLACK:
        low -= 1
    while high < len(mutuals) - 1 and mutuals[high + 1] >= mutuals[tightest] - SEED_SLACK:
        high += 1
    # a plateau: rows moved by one shared update point alike in every bin, and the bins beside them drop by
    # SEED_SLACK more; a trend of mutual cosine rising with the norm is none (attack20's Keras model, AdamW: its
    # seen rows' bins rise smoothly from 0.4 to 0.89, and a cut of them seeded 680 trained rows)
    floor = float(np.min(mutuals[low:high + 1])) - SEED_SLACK
    beside = [mutuals[b] for b in (low - 1, high + 1) if 0 <= b < len(mutuals)]
    return (low, high) if all(value < floor for value in beside) else (first, last)


def within(values: np.ndarray, seed: np.ndarray, low_only: bool = False) -> np.ndarray:
    center = median_of(seed)
    reach = GROUP_SPREADS * MAD_SCALE * median_of(np.abs(seed - center))
    with np.errstate(invalid="ignore"):
        return values >= center - reach if low_only else np.abs(values - center) <= reach


def group_from_seed(array: np.ndarray, norms: np.ndarray, valid: np.ndarray, cosine: np.ndarray,
                    seed: np.ndarray) -> Untrained:
    """The rows as close to the seed's direction, and at as narrow a band of norms, as the seed's own rows."""
    close = seed[cosine[seed] >= TOGETHER_COSINE]
    if len(close) < MIN_GROUP:
        return nothing()
    member = valid & (cosine >= TOGETHER_COSINE) & within(cosine, cosine[close], low_only=True)
    member &= within(norms, norms[close])
    rows = np.flatnonzero(member)
    if len(rows) < MIN_GROUP or len(rows) > MAX_GROUP_SHARE * int(valid.sum()):
        return nothing()
    spread = MAD_SCALE * median_of(np.abs(norms[rows] / median_of(norms[rows]) - 1))
    inside, outside = total_of(array, norms, rows), total_of(array, norms, np.flatnonzero(valid & ~member))
    together, rest = mutual(inside, len(rows)), mutual(outside, int((valid & ~member).sum()))
    if not together >= TOGETHER_COSINE or spread > 0.1 or (math.isfinite(rest) and together < rest + 0.3):
        return nothing()
    rest_text = f" against {rest:.2g} among the other rows" if math.isfinite(rest) else ""
    evidence = (f"{len(rows):,} rows never trained: they moved only together, mutual cosine {together:.3g}{rest_text}, "
                f"norms in a narrow band ({spread_text(norms[rows])}, median of all rows "
                f"{median_of(norms[valid]):.4g}): the updates every row shares, never their own")
    return Untrained(rows, RULE, evidence, "moved together")


def total_of(array: np.ndarray, norms: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The sum of the unit rows `rows` (sorted ids), read a block at a time: each block's rows weighted by their
    inverse norms in one float32 product, the blocks summed in float64 (a float64 copy of each block cost nine
    times as much: 0.10 s against 0.011 on 400,000 x 50). A run of rows is read as slices, others gathered; a
    table holding extreme norms, whose float32 weights could overflow, in float64."""
    total = np.zeros(array.shape[1])
    step = max(1, BLOCK_BYTES // (8 * max(1, array.shape[1])))
    scale = norms[rows]
    if not len(rows) or scale.min() < ORDINARY_NORMS[0] or scale.max() > ORDINARY_NORMS[1]:
        for start in range(0, len(rows), step):
            part = rows[start:start + step]
            total += (np.asarray(array[part], dtype=np.float64) / norms[part, None]).sum(axis=0)
        return total
    # float32 blocks small enough that OpenBLAS runs each product on one thread: waking the others cost more CPU
    step = max(1, SINGLE_THREAD_PRODUCT // max(1, array.shape[1]))
    first, end = int(rows[0]), int(rows[-1]) + 1
    if len(rows) == end - first:  # a run of rows: slices, no gather (a row left out could hold NaN, and NaN x 0 is NaN)
        weights = (1.0 / scale).astype(np.float32)
        for start in range(first, end, step):
            stop = min(start + step, end)
            total += np.asarray(array[start:stop], dtype=np.float32).T @ weights[start - first:stop - first]
        return total
    for start in range(0, len(rows), step):
        part = rows[start:start + step]
        total += np.asarray(array[part], dtype=np.float32).T @ (1.0 / scale[start:start + step]).astype(np.float32)
    return total
