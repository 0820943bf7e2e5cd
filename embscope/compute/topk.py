"""The one top-k: the k most cosine-similar rows of a table for each query, where a query is a row of the
table (topk_rows) or a vector (topk_vectors: a merged word's mean, a rotated row, a reference mean).

Queries go in blocks; each block is multiplied against the whole normalised table and only its top-k is
kept, so the Q x V score matrix never exists. Which engine does the work is a table lookup on the device
and the precision (ENGINES: the first that supports both); a search small enough for one block of scores streams the
table instead (numpy engine) and never holds a normalised copy of it.

Results: row ids best first, ties broken by the lower row id on every engine; id -1 and score NaN where
there is no neighbour (an invalid query, or fewer rows to choose from than k).

Its other two forms share the same selection: topk_stream, fed the table's unit rows block by block by a
caller that reads the table for its own sake (compare's sweep), and topk_scores, the k best columns of a block
of any scores (3CosMul's ratios, which are not cosines).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..core.errors import OptionError
from ..registry import Entry, entries
from .bf16_engine import CpuBf16Engine
from .devices import cpu_threads, precision_run, resolve_device, resolve_precision
from .engine import Engine, Queries
from .numpy_engine import NumpyEngine
from .rows import as_table, check_ids, normalise, unit_rows
from .select import select_top
from .streamed import StreamedTopK
from .torch_engine import TorchEngine

Progress = Callable[[int, int], None]

# Which engine runs where: the first of these that supports the device and the precision run.
ENGINES: tuple[Entry[Engine], ...] = entries(
    Entry(NumpyEngine.name, NumpyEngine(),
          "fp32 on the CPU, before torch: numpy's BLAS beat torch-cpu (181 vs 138 GFLOP/s on 2 cores)"),
    Entry(CpuBf16Engine.name, CpuBf16Engine(), "bf16 on the CPU: numpy's rows, borrowing only torch's bf16 matmul"),
    Entry(TorchEngine.name, TorchEngine(), "last, as it supports everything: a GPU runs every precision in torch"),
)

Excluded = Sequence[Sequence[int]] | np.ndarray  # per query, the row ids it must not return
# A search streams the table when it has at least this many times fewer queries than the table has rows, and no
# more than STREAM_MOST (the table's blocks, 32 MiB of scores against them, stay wide enough for BLAS).
STREAM_FEWER = 4
STREAM_MOST = 4096


@dataclass
class TopK:
    """Nearest neighbours of each query, best first.

    ids: int64 (Q, k) row ids, -1 where there is no neighbour (invalid query, or fewer than k rows to
    choose from); scores: float32 (Q, k) cosines, NaN where id is -1; query_ids: int64 (Q,) the row each
    line belongs to, -1 for a query vector. k is never more than the table's rows.
    """

    ids: np.ndarray
    scores: np.ndarray
    query_ids: np.ndarray


def topk_rows(table: object, k: int, *, rows: Sequence[int] | np.ndarray | None = None, exclude_self: bool = True,
              device: str = "auto", precision: str = "fp32", block_rows: int | None = None,
              progress: Progress | None = None, _engine: Engine | None = None) -> TopK:
    """The k most cosine-similar valid rows of each of the table's rows (rows=None: every row, else the
    row ids given, in that order), leaving the row itself out when exclude_self.

    precision: "fp32" exact; "bf16" (cuda, mps, or cpu via torch) keeps every column a proven error bound
    cannot rule out and re-ranks them in fp32: the fp32 answer id for id, ties aside (compute.bf16_exact);
    "tf32" (cuda) and "fp16" (cuda, mps) pick k + max(k, 32) candidates in low precision and re-rank them
    with exact fp32 cosines (exact but for near-ties at the cut; rows tied exactly at the cut are redone in
    fp32); "auto" is resolve_precision's choice for the device. block_rows: queries per block (default: a byte budget per
    engine; a search given block_rows is never streamed). progress(done, total) is called after each block.
    _engine: tests only, to run one engine where another would be picked (the GPU path on a CPU).
    """
    array = as_table(table)
    query_ids = (np.arange(array.shape[0], dtype=np.int64) if rows is None
                 else check_ids(np.asarray(rows).reshape(-1), array.shape[0], "query row ids", "rows"))
    return _search(array, k, query_ids, None, None, exclude_self, device, precision, block_rows, progress, _engine)


def topk_vectors(table: object, vectors: object, k: int, *,
                 exclude: Excluded | None = None,
                 device: str = "auto", precision: str = "fp32", progress: Progress | None = None,
                 _engine: Engine | None = None) -> TopK:
    """The k table rows most cosine-similar to each query vector (Q, d); exclude[i] lists the row ids
    query i must not return (a merged word's own tokens). query_ids are -1. See topk_rows."""
    array = as_table(table)
    found = np.asarray(vectors)
    if found.ndim != 2 or found.shape[1] != array.shape[1]:
        raise OptionError(f"expected query vectors of shape (n, {array.shape[1]}); "
                          f"found shape {tuple(found.shape)}", option="vectors")
    if exclude is not None and len(exclude) != found.shape[0]:
        raise OptionError(f"expected one list of excluded rows per query vector ({found.shape[0]}); "
                          f"found {len(exclude)}", option="exclude")
    return _search(array, k, np.full(found.shape[0], -1, dtype=np.int64), found, exclude, False, device, precision,
                   None, progress, _engine)


def topk_stream(queries: np.ndarray, k: int, left_out: tuple[np.ndarray, np.ndarray] | None = None) -> StreamedTopK:
    """The top k of float32 unit query vectors (Q, d) among table rows added block by block (StreamedTopK.add):
    the numpy engine's streamed search, for a caller that reads the table anyway. left_out: (query line, row id)
    pairs never returned. Its result() equals topk_rows' / topk_vectors' ids and scores for those queries."""
    return StreamedTopK(queries, check_k(k), left_out, cpu_threads())


def topk_scores(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best columns of each row of a float32 block of any scores (not clipped: 3CosMul's ratios exceed
    1), best first, ties to the lower column, -inf marking a column that is no candidate: (int64 ids, float64
    scores), id -1 and score NaN past the last candidate."""
    width = min(check_k(k), scores.shape[1])
    ids, found = select_top(np.ascontiguousarray(scores, dtype=np.float32), width, clip=False)
    values = found.astype(np.float64)
    missing = ~np.isfinite(values)
    ids[missing] = -1
    values[missing] = np.nan
    return ids, values


def pick_engine(device: str, precision: str, forced: Engine | None) -> tuple[Engine, str]:
    """The engine for a device and precision, and the precision it will run."""
    if forced is not None:
        if not forced.supports(device, precision):
            raise OptionError(f"the {forced.name} engine does not run {precision} on {device}", option="precision")
        return forced, precision
    if device == "cpu" and precision == "fp16":
        raise OptionError("precision fp16 needs a GPU (cuda or mps); use fp32 or bf16 on cpu", option="precision")
    run = precision_run(precision, device) if device == "cpu" else precision
    return next(entry.item for entry in ENGINES if entry.item.supports(device, run)), run


def check_k(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise OptionError(f"k must be a positive integer; got {k!r}", option="k")
    return int(k)


def left_out_pairs(query_ids: np.ndarray, exclude: Excluded | None, exclude_self: bool,
                   lines: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(line among the valid queries, row id) pairs each query must not return, sorted by line."""
    if exclude_self:
        return np.arange(lines.size, dtype=np.int64), query_ids[lines]
    if exclude is None:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    chosen = [np.asarray(exclude[line], dtype=np.int64).reshape(-1) for line in lines]
    row_ids = check_ids(np.concatenate(chosen) if chosen else np.empty(0, np.int64), n_rows, "excluded row ids",
                        "exclude")
    return np.repeat(np.arange(lines.size, dtype=np.int64), [c.size for c in chosen]), row_ids


@dataclass(frozen=True, eq=False)
class SearchPlan:
    """One search as _search checked it: the table, the engine and precision, the queries (rows, or unit vectors
    with their validity in `asked`) and what each leaves out, and the result's width."""

    array: np.ndarray
    engine: Engine
    device: str
    precision: str
    query_ids: np.ndarray
    asked: tuple[np.ndarray, np.ndarray] | None
    exclude: Excluded | None
    exclude_self: bool
    block_rows: int | None
    width: int
    progress: Progress | None

    def streams(self) -> bool:
        """Few queries (compare's sample, a word's neighbours), or a small search, read the table once and
        normalise it as it goes rather than make a normalised copy of it; the answer is the same."""
        n_rows, dim = self.array.shape
        n_queries = self.query_ids.size
        return self.block_rows is None and self.engine.streams and (
            n_queries * STREAM_FEWER <= n_rows and n_queries <= STREAM_MOST
            or n_queries * n_rows * 4 <= self.engine.block_bytes(self.device, n_rows, dim))

    def every_row(self, lines: np.ndarray, valid_ids: np.ndarray) -> bool:
        """Every valid row, each leaving itself out: the cosine matrix is symmetric, and an engine that can works
        out half of it."""
        return bool(self.block_rows is None and self.asked is None and self.exclude_self
                    and self.precision in getattr(self.engine, "halves", ()) and lines.size == valid_ids.size
                    and np.array_equal(self.query_ids[lines], valid_ids))


def _search(array: np.ndarray, k: object, query_ids: np.ndarray, vectors: np.ndarray | None,
            exclude: Excluded | None, exclude_self: bool, device: str, precision: str,
            block_rows: int | None, progress: Progress | None, forced: Engine | None) -> TopK:
    """query_ids: the query rows, or -1 for each query vector (then vectors holds them)."""
    k = check_k(k)
    n_rows, _ = array.shape  # a 2-D table
    device = resolve_device(device)
    work = query_ids.size * n_rows * array.shape[1]  # multiply-adds of the whole search
    engine, precision = pick_engine(device, resolve_precision(precision, device, work), forced)
    if block_rows is not None and int(block_rows) < 1:
        raise OptionError(f"block_rows must be at least 1; got {block_rows}", option="block_rows")
    n_queries = query_ids.size
    width = min(k, n_rows)  # no query has more neighbours than the table has rows
    result = TopK(np.full((n_queries, width), -1, dtype=np.int64),
                  np.full((n_queries, width), np.nan, dtype=np.float32), query_ids)
    asked = unit_vectors(vectors) if vectors is not None else None  # normalised as rows are
    plan = SearchPlan(array, engine, device, precision, query_ids, asked, exclude, exclude_self, block_rows, width,
                      progress)
    count, lines = _search_streamed(plan, result) if plan.streams() else _search_prepared(plan, result)
    if progress is not None and (count <= 0 or lines.size == 0):
        progress(n_queries, n_queries)
    return result


def _search_streamed(plan: SearchPlan, result: TopK) -> tuple[int, np.ndarray]:
    """The table read once, normalised as it goes; (neighbours a query, the lines of the valid queries)."""
    array, query_ids, asked = plan.array, plan.query_ids, plan.asked
    query_unit, _, query_valid = unit_rows(array, rows=query_ids) if asked is None else (asked[0], None, asked[1])
    lines = np.flatnonzero(query_valid)
    left_lines, left_rows = left_out_pairs(query_ids, plan.exclude, plan.exclude_self, lines, array.shape[0])
    count = plan.width if lines.size else 0
    if lines.size:
        record(result, lines, 0, *plan.engine.stream(array, query_unit[lines], plan.width, (left_lines, left_rows)),
               None, plan.progress)
    return count, lines


def _search_prepared(plan: SearchPlan, result: TopK) -> tuple[int, np.ndarray]:
    """The table prepared by the engine (normalised, on its device), then searched in blocks of queries;
    (neighbours a query, the lines of the valid queries)."""
    engine, query_ids, asked = plan.engine, plan.query_ids, plan.asked
    prepared = engine.prepare(plan.array, plan.device)
    valid = prepared.valid
    query_valid = valid[query_ids] if asked is None else asked[1]
    lines = np.flatnonzero(query_valid)
    left_lines, left_rows = left_out_pairs(query_ids, plan.exclude, plan.exclude_self, lines, plan.array.shape[0])
    valid_ids = np.flatnonzero(valid)
    position = np.cumsum(valid, dtype=np.int64) - 1  # row id -> column of the prepared table
    kept = valid[left_rows]  # an invalid row is no column: nothing to leave out
    queries = Queries(position[query_ids[lines]] if asked is None else asked[0][lines],
                      left_lines[kept], position[left_rows[kept]])
    self_left_out = 1 if asked is None and plan.exclude_self else 0
    count = min(plan.width, valid_ids.size - self_left_out)
    every_row = plan.every_row(lines, valid_ids)
    if count > 0 and lines.size:
        def emit(start: int, ids: np.ndarray, vals: np.ndarray) -> None:
            record(result, lines, start, ids, vals, valid_ids, plan.progress)

        block = int(plan.block_rows) if plan.block_rows is not None else max(
            1, engine.block_bytes(plan.device, valid_ids.size, plan.array.shape[1]) // (4 * max(1, valid_ids.size)))
        if every_row:
            engine.search_every_row(prepared, count, emit)  # type: ignore[attr-defined]  # checked above
        else:
            engine.search(prepared, queries, count, block, plan.precision, emit)
    return count, lines


def unit_vectors(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(float32 unit vectors, valid): normalised in float64 as table rows are."""
    unit, _, valid = normalise(np.array(vectors, dtype=np.float64))
    return unit.astype(np.float32), valid


def record(result: TopK, lines: np.ndarray, start: int, ids: np.ndarray, vals: np.ndarray,
           columns: np.ndarray | None, progress: Progress | None) -> None:
    """Write one block of an engine's answer into the result: its columns become row ids (columns[ids]), and
    a left-out row, picked only when nothing else was left, becomes padding."""
    chosen = lines[start:start + ids.shape[0]]
    found = columns[ids] if columns is not None else ids
    missing = vals == -np.inf
    result.ids[chosen, :ids.shape[1]] = np.where(missing, -1, found)
    result.scores[chosen, :ids.shape[1]] = np.where(missing, np.nan, vals)
    if progress is not None:
        total = len(result.query_ids)
        progress(total if start + ids.shape[0] >= lines.size else int(chosen[-1]) + 1, total)
