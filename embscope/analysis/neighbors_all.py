"""`neighbors --all`: the top-k of every row of a table (or of the queries in a file), with what the answer must
say about how it was found: the device and arithmetic that ran, a shortened list, queries skipped."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .. import compute
from ..core.errors import Message, Option
from ..hardware import bf16_note
from ..inputs import QUERIES, Skipped, none_used, read_queries
from ..listing import clipped_list
from ..naming import tokenizer_failure
from ..options import ANYWHERE, AS_TYPED, DeviceOptions, LookupOptions
from .neighbors import topk_all

if TYPE_CHECKING:
    from ..embeddings import Embeddings
    from .stages import Progress


@dataclass(frozen=True)
class AllNeighbors:
    topk: compute.TopK
    table: str
    device: str  # the device that ran the products ("auto" resolved)
    precision: str  # the arithmetic that ran, as the answer names it ("bf16, exact by re-rank")
    seconds: float  # the batched search alone
    notes: list[str]


def most_queries(queries_file: Path | None, rows: int) -> int:
    """The searches a run makes at most: every row, or one a line of the queries file (a line holds a byte and its
    newline at least), read from its size alone, since the file streams."""
    if queries_file is None:
        return rows
    try:
        return min(rows, queries_file.stat().st_size // 2 + 1)
    except OSError:  # reading it says why, in its own words
        return rows


def unanswered(topk: compute.TopK) -> list[str]:
    """The note naming the rows searched that got no neighbour (a TSV file has no line for them, a JSONL file an
    empty list), or none."""
    if not topk.ids.shape[1]:
        return []
    empty = topk.query_ids[(topk.ids < 0).all(axis=1)]
    if not len(empty):
        return []
    rows = clipped_list([f"{int(row):,}" for row in empty], "rows", where=None)
    return [(f"{len(empty):,} of the {len(topk.ids):,} rows searched have no neighbours ({rows}): a row of zeros or "
            "of NaN or Inf has no cosine with any row")]


def neighbors_all(emb: Embeddings, k: int, *, queries_file: Path | None = None, table: str = "token",
                  lookup: LookupOptions = AS_TYPED, run_on: DeviceOptions = ANYWHERE,
                  strict: bool = False, remove_top: int | None = None,
                  progress: Progress | None = None) -> AllNeighbors:
    """Top-k neighbours of every row, or of each one-token query in `queries_file` (one a line; a line that cannot
    be used is skipped with a note, or with `strict` stops the run)."""
    device = compute.resolve_device(run_on.device)
    skipped = None if strict else Skipped()
    queries = read_queries(queries_file, skipped) if queries_file is not None else None
    searched = emb.table(table)
    work = most_queries(queries_file, searched.rows) * searched.rows * searched.dim  # multiply-adds, at most
    asked = compute.resolve_precision(run_on.precision, device, work)
    precision = compute.precision_run(asked, device)  # asked is resolved: auto is not weighed again
    started = time.perf_counter()
    topk = topk_all(emb, k, queries=queries, ids=lookup.ids, exact=lookup.exact, table=table, device=device,
                    precision=precision, allow_unk=lookup.allow_unk, progress=progress, on_skip=skipped,
                    remove_top=remove_top)
    seconds = time.perf_counter() - started
    if skipped is not None and queries_file is not None and skipped.count and not len(topk.ids):
        raise none_used(queries_file, QUERIES, skipped)
    notes = [n for n in (bf16_note(device, precision), tokenizer_failure(emb, searched)) if n]
    if remove_top:
        notes.append(f"cosines in the all-but-the-top space of the {table} table: the mean row and the top "
                     f"{remove_top} principal direction{'s' * (remove_top != 1)} removed from every row")
    if asked != precision:
        notes.append(Message(Option("precision", asked), f" is a GPU tensor-core mode: on the {device} the products "
                             f"ran in {precision}"))
    if topk.ids.shape[1] < k:
        notes.append(Message(Option("k", k, text=f"{k:,}"), f" is more than the table's {topk.ids.shape[1]:,} rows: "
                             "each list holds at most that many"))
    notes += skipped.notes(queries_file) if skipped and queries_file else []
    notes += unanswered(topk)
    return AllNeighbors(topk, table, device, compute.precision_label(precision), seconds, notes)
