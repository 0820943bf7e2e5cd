"""A 2-D map of a table: PCA (the two directions along which the centred rows spread most), or UMAP where
umap-learn is installed. Probe words (or, for the position table, a few positions) are placed on it, and
the rows `embscope norms` flags are marked.

PCA works on the rows holding no NaN or Inf. A table whose centred float64 copy fits in SVD_MAX_BYTES goes
through numpy's SVD; a larger one through its d x d covariance, summed block by block, then eigh: never a
V x V matrix, never a float64 copy of the whole table. Past d = SQUARE_MAX_SIDE (a wide table: eigh of a
d x d matrix is cubic in d, and a 85 KB file declared d = 8,000) the n x n Gram matrix of the rows takes its
place, exact when there are at most SQUARE_MAX_SIDE rows; with more rows too, the components are those of
SQUARE_MAX_SIDE rows drawn with a fixed seed (every row is still placed by them), and the map says so.
Variances are sample variances (divided by n - 1); each component's sign is chosen so that its largest loading
is positive, so a map does not flip between runs.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .. import compute
from ..core.errors import Message, MissingPackageError, Option, OptionError, TableError, TokenError
from ..core.role import Role
from ..core.text import quote
from ..lookup import check_id, lookup_word, word_list
from ..naming import row_name
from ..options import LookupOptions
from ..roles import role_of
from .norms import NormSummary, RowListing, judged, row_norms
from .probes import given_rule, probe_words
from .stages import Progress, Stages, quiet
from .untrained import Untrained

if TYPE_CHECKING:
    from ..core.checkpoint import Table
    from ..embeddings import Embeddings

METHODS = ("pca", "umap")
SVD_MAX_BYTES = 64 << 20  # a centred float64 copy up to this size goes through the SVD
BLOCK_BYTES = 32 << 20  # float64 rows read at a time on the covariance route
SQUARE_MAX_SIDE = 2048  # the side of the d x d (or n x n) matrix eigh decomposes at most: seconds, 32 MiB
SAMPLE_SEED = 0  # the rows a table past it in both directions is mapped by are drawn with this seed
UMAP_NEIGHBORS = 15
UMAP_SEED = 0  # fixed, so the same table gives the same map (umap-learn then runs on one thread)


@dataclass(frozen=True, eq=False)
class Projection:
    coords: np.ndarray  # float64 (rows, 2); NaN for the rows left out
    method: str  # pca or umap
    route: str  # svd, covariance or umap
    variance: tuple[float, float] | None  # sample variance along each component (PCA)
    ratio: tuple[float, float] | None  # each component's share of the total variance; None when it is 0
    used: int  # rows on the map
    left_out: np.ndarray  # rows holding NaN or Inf
    sampled: int | None = None  # rows the components were found from, when not every row (route "sampled gram")
    library: str | None = None  # what laid the map out, when not embscope: "umap-learn 0.5.7"


@dataclass(frozen=True)
class Point:
    """A labelled point: a probe word (the mean of its tokens' points), or a position."""

    label: str
    ids: tuple[int, ...]
    tokens: tuple[str, ...]
    x: float | None  # None when a row is left out
    y: float | None
    note: str | None = None


@dataclass(frozen=True)
class FlaggedPoint:
    id: int
    label: str
    x: float | None
    y: float | None
    reason: str


@dataclass(frozen=True, eq=False)
class TableMap:
    role: Role
    name: str
    rows: int
    dim: int
    first_row: int  # rows before position 0 (position tables)
    projection: Projection
    points: tuple[Point, ...]  # probe words, or positions
    probe_rule: str  # how the points were chosen
    flagged: RowListing[FlaggedPoint]  # a row's object is made when it is read
    notes: tuple[str, ...]
    untrained: Untrained | None = None  # the rows that never trained, as `norms` finds them


def finite_rows(array: np.ndarray) -> np.ndarray:
    finite: np.ndarray = np.isfinite(row_norms(array))
    return finite


def row_blocks(array: np.ndarray, ids: np.ndarray, center: np.ndarray | None = None) -> Iterator[tuple[int, np.ndarray]]:
    """(start, float64 rows ids[start:...] less `center`) in blocks of about BLOCK_BYTES (compute.row_blocks:
    the buffer is reused, the pages of a memory map let go)."""
    every_row = len(ids) == array.shape[0]  # then a slice reads the rows, with no gather
    blocks: Iterator[tuple[int, np.ndarray]] = compute.row_blocks(
        array, center=center, rows=None if every_row else ids,
        block_rows=max(1, BLOCK_BYTES // (8 * max(1, array.shape[1]))))
    return blocks


def signed(components: np.ndarray) -> np.ndarray:
    """Each component (a row) turned so that its entry of largest magnitude is positive."""
    largest = components[np.arange(len(components)), np.argmax(np.abs(components), axis=1)]
    return components * np.where(largest < 0, -1.0, 1.0)[:, None]


def gram_components(array: np.ndarray, ids: np.ndarray, mean: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(the two leading principal directions (2, d), their spreads, the total spread) of rows `ids` less `mean`,
    through their n x n Gram matrix: with X = U S V^T, X X^T = U S^2 U^T and V = X^T U / S. Columns are read in
    blocks of about BLOCK_BYTES, so memory is n x n plus one block."""
    n, dim = len(ids), array.shape[1]
    width = max(1, BLOCK_BYTES // (8 * max(n, 1)))
    gram = np.zeros((n, n))
    for start in range(0, dim, width):
        block = np.asarray(array[ids, start:start + width], dtype=np.float64) - mean[start:start + width]
        gram += block @ block.T
    values, vectors = np.linalg.eigh(gram)  # ascending
    top = np.clip(values[::-1][:2], 0, None)
    lead = vectors[:, ::-1][:, :2]
    scale = np.where(top > 0, np.sqrt(top), np.inf)  # a direction of no spread stays zero
    components = np.zeros((2, dim))
    for start in range(0, dim, width):
        block = np.asarray(array[ids, start:start + width], dtype=np.float64) - mean[start:start + width]
        components[:, start:start + width] = (lead.T @ block) / scale[:, None]
    return signed(components), top, float(np.trace(gram))


def pca_2d(array: np.ndarray, max_svd_bytes: int | None = None, max_side: int | None = None,
           norms: np.ndarray | None = None) -> Projection:
    """The rows' coordinates along the two principal components of the centred finite rows; `max_svd_bytes`: the
    largest copy decomposed by SVD, `max_side`: the largest square matrix decomposed (None: the module's limits);
    `norms`: the rows' norms when the caller has them (row_norms)."""
    max_svd_bytes = SVD_MAX_BYTES if max_svd_bytes is None else max_svd_bytes
    max_side = SQUARE_MAX_SIDE if max_side is None else max_side
    ok = finite_rows(array) if norms is None else np.isfinite(norms)
    ids = np.flatnonzero(ok)
    n, dim = len(ids), array.shape[1]
    if n < 2 or dim < 2:
        raise TableError(f"expected at least 2 rows without NaN or Inf and 2 columns to map, found {n} rows "
                         f"x {dim}")
    coords = np.full((array.shape[0], 2), np.nan)
    sampled = None
    if n * dim * 8 <= max_svd_bytes:
        centred = np.asarray(array[ids], dtype=np.float64)
        centred -= centred.mean(axis=0)
        _, singular, vt = np.linalg.svd(centred, full_matrices=False)
        spread = singular ** 2
        components, top, route = signed(vt[:2]), spread[:2], "svd"
        coords[ids] = centred @ components.T
    elif dim > max_side:
        mean = column_mean(array, ids)
        basis = ids
        if n > max_side:
            basis = np.sort(np.random.default_rng(SAMPLE_SEED).choice(ids, max_side, replace=False))
            sampled = max_side
        components, top, trace = gram_components(array, basis, mean)
        spread, route = np.array([trace]), "gram" if sampled is None else "sampled gram"
        for start, block in row_blocks(array, ids, mean):
            coords[ids[start:start + len(block)]] = block @ components.T
        if sampled is not None:  # the variances are the sample's
            n = sampled
    else:
        mean, scatter = mean_and_scatter(array, ids)
        values, vectors = np.linalg.eigh(scatter)  # ascending
        spread = values
        components, top, route = signed(vectors[:, ::-1][:, :2].T), values[::-1][:2], "covariance"
        every_row = len(ids) == len(coords)  # then a block's rows are a slice, with no gather or scatter
        for start, block in row_blocks(array, ids, mean):
            placed = slice(start, start + len(block)) if every_row else ids[start:start + len(block)]
            coords[placed] = block @ components.T
    total_spread = float(np.sum(np.clip(spread, 0, None)))
    variance = (float(top[0]) / (n - 1), float(max(top[1], 0.0)) / (n - 1))
    ratio = (variance[0] * (n - 1) / total_spread, variance[1] * (n - 1) / total_spread) if total_spread > 0 else None
    return Projection(coords, "pca", route, variance, ratio, len(ids), np.flatnonzero(~ok), sampled)


def mean_and_scatter(array: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The mean of rows `ids` and their scatter about it, in one pass: summed about the first block's mean, so a
    large common offset costs no precision, and corrected once at the end (as compute.moments does)."""
    dim = array.shape[1]
    total, scatter, shift = np.zeros(dim), np.zeros((dim, dim)), np.zeros(dim)
    for start, block in row_blocks(array, ids):
        if start == 0:
            shift = block.mean(axis=0)
        block -= shift
        total += block.sum(axis=0)
        scatter += block.T @ block
    offset = total / max(len(ids), 1)  # the mean less the shift
    scatter -= len(ids) * np.outer(offset, offset)
    return offset + shift, scatter


def column_mean(array: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The mean of rows `ids`, summed block by block in float64."""
    total = np.zeros(array.shape[1])
    for _, block in row_blocks(array, ids):
        total += block.sum(axis=0)
    return total / max(len(ids), 1)


def umap_2d(array: np.ndarray, progress: Progress | None = None) -> Projection:
    """UMAP's 2-D layout of the finite rows (cosine metric, fixed seed); `progress` hears when it is done."""
    try:
        import umap
    except ImportError:
        umap_method = Option("method", "umap")
        raise MissingPackageError(Message(umap_method), "umap-learn", "umap", option=umap_method) from None
    ok = finite_rows(array)
    ids = np.flatnonzero(ok)
    if len(ids) <= UMAP_NEIGHBORS:
        raise TableError(f"expected more than {UMAP_NEIGHBORS} rows without NaN or Inf for UMAP, found {len(ids)}")
    reducer = umap.UMAP(n_components=2, n_neighbors=UMAP_NEIGHBORS, metric="cosine", random_state=UMAP_SEED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # umap-learn warns that a fixed seed runs on one thread
        layout = reducer.fit_transform(np.asarray(array[ids], dtype=np.float32))
    coords = np.full((array.shape[0], 2), np.nan)
    coords[ids] = layout
    if progress is not None:
        progress(1, 1)
    return Projection(coords, "umap", "umap", None, None, len(ids), np.flatnonzero(~ok),
                      library=f"umap-learn {umap.__version__}")


def point(coords: np.ndarray, label: str, ids: tuple[int, ...], tokens: tuple[str, ...],
          note: str | None = None) -> Point:
    """A point at the mean of its rows' points (for PCA, the projection of their mean row)."""
    where = coords[list(ids)].mean(axis=0)
    if not np.isfinite(where).all():
        missing = "a row holds NaN or Inf: not on the map"
        return Point(label, ids, tokens, None, None, Message(note, "; ", missing) if note else missing)
    return Point(label, ids, tokens, float(where[0]), float(where[1]), note)


def probe_points(emb: Embeddings, table: Table, coords: np.ndarray, words: list[str] | None,
                 asked: LookupOptions) -> tuple[list[Point], str]:
    """The probe words on the map, and how they were chosen."""
    if words:
        tokenizer = emb.tokenizer_for_words(table)  # a broken or misfit tokenizer is an error when words were asked for
        if tokenizer is None:
            raise TokenError(Message("expected a tokenizer to look up ", Option("words"), ", found none beside the "
                                     "checkpoint: pass ", Option("tokenizer", metavar="FILE")), option="tokenizer")
    else:
        tokenizer = emb.tokenizer_for_names(table)[0]
        if tokenizer is None:
            return [], "no probe words: the tokenizer is missing or not the table's (see the note)"
    rule = given_rule()
    if not words:
        words, rule = probe_words(tokenizer, coords.shape[0])
    points = []
    rows = coords.shape[0]
    for word in words:
        found = lookup_word(tokenizer, word, exact=asked.exact)
        for token_id in found.ids:
            check_id(int(token_id), rows, word)
        note = found.note
        if len(found.ids) > 1:
            pieces = ", ".join(f"{i} {quote(t)}" for i, t in zip(found.ids, found.tokens))
            merged = f"{len(found.ids)} tokens ({pieces}): placed at the mean of their points"
            note = Message(note, "; ", merged) if note else merged
        points.append(point(coords, word, tuple(int(i) for i in found.ids), tuple(found.tokens), note))
    return points, rule


def position_points(coords: np.ndarray, first_row: int) -> list[Point]:
    """Position 0, 1, 2, the quarters and the last position."""
    last = coords.shape[0] - 1 - first_row
    chosen = sorted({p for p in (0, 1, 2, last // 4, last // 2, 3 * last // 4, last) if 0 <= p <= last})
    return [point(coords, str(p), (p + first_row,), ()) for p in chosen]


def table_map(emb: Embeddings, role: Role, *, method: str = "pca", words: list[str] | None = None,
              exact: bool = False, verdicts: tuple[NormSummary, Untrained] | None = None,
              stages: Stages = quiet) -> TableMap:
    """The 2-D map of the `role` table, its labelled points and its flagged rows; `verdicts`: what norms.judged
    gives the table (its default threshold), when the caller has it (the report's norms section); `stages`: a
    stage for UMAP's layout, the long part (umap-learn's import and fit took 20-25 s on the sample)."""
    if method not in METHODS:
        raise OptionError(f"expected a method {' or '.join(METHODS)}, found {quote(method)}", option="method")
    role = role_of(role)  # Role('bogus') raised ValueError
    words = word_list(words, "words") if words is not None else None
    if role is Role.position and words:  # refused before any work
        raise OptionError(Message("expected no ", Option("words"), " for the position table: its points are positions"),
                          option="words", role=role)
    table = emb.table(role)
    array = table.array
    norms = row_norms(array)  # for the map's finite rows and the flagged ones
    projection = pca_2d(array, norms=norms) if method == "pca" else umap_2d(array, stages(f"{role.value} table: UMAP"))
    coords = projection.coords
    notes = list(table.notes)
    tokenizer = None
    if role is Role.position:
        points, rule = position_points(coords, table.first_row), "positions 0, 1, 2, the quarters and the last"
    else:
        points, rule = probe_points(emb, table, coords, words, LookupOptions(exact=exact))
        tokenizer, why_none = emb.tokenizer_for_names(table)
        if why_none:
            notes.append(why_none)

    summary, untrained = verdicts or judged(array, norms, role, emb.checkpoint.config, table.first_row)

    def flagged_point(position: int) -> FlaggedPoint:
        anomaly = summary.anomalies[position]
        x, y = coords[anomaly.index]
        on_map = bool(np.isfinite(x) and np.isfinite(y))
        return FlaggedPoint(anomaly.index, row_name(tokenizer, role, anomaly.index, table.first_row),
                            float(x) if on_map else None, float(y) if on_map else None, anomaly.reason)

    flagged = RowListing(summary.flagged, flagged_point)  # millions of zero rows cost 8 bytes each, not an object
    if len(projection.left_out):
        notes.append(f"{len(projection.left_out):,} rows hold NaN or Inf and are not on the map")
    if projection.sampled is not None:
        notes.append(f"the table is {table.dim:,} wide with {projection.used:,} rows, both past {SQUARE_MAX_SIDE:,}: "
                     f"the components are those of {projection.sampled:,} rows drawn with seed {SAMPLE_SEED} (a "
                     "decomposition of every row would cost minutes and gigabytes); every row is placed by them")
    if projection.method == "pca" and projection.ratio is None:
        notes.append("every row is the same after centring: the components explain nothing")
    if projection.method == "umap":
        notes.append(f"UMAP ({projection.library}, cosine metric, "
                     f"{UMAP_NEIGHBORS} neighbours, seed {UMAP_SEED}): near points are near rows; distances "
                     "between clusters and the axes mean little")
    return TableMap(role, table.name, table.rows, table.dim, table.first_row, projection, tuple(points), rule,
                    flagged, tuple(notes), untrained)
