"""Nearest neighbours: the rows most similar to a word or id, or to every row of a table (the batched top-k).
Words are resolved as similarity resolves them; a word of several tokens is the mean of their rows."""

from __future__ import annotations

from array import array as packed
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .. import compute
from ..core.errors import Message, Option, OptionError, TokenError, joined, message_of
from ..core.role import Role
from ..core.text import quote
from ..lookup import word_list
from ..naming import token_name, tokenizer_failure
from ..options import LookupOptions
from .all_but_the_top import remove_top as all_but_the_top
from .similarity import (
    Query,
    Resolver,
    is_padding,
    lookup_note,
    merge_note,
    pick_table,
    query_vectors,
    table_rows,
    with_reasons,
)

if TYPE_CHECKING:

    from ..embeddings import Embeddings
    from .all_but_the_top import RemovedTop
    from .stages import Progress


@dataclass(frozen=True)
class Neighbor:
    id: int
    token: str
    cosine: float
    padding: bool  # a row past the tokenizer's vocabulary


@dataclass(frozen=True)
class NeighborsResult:
    query: Query
    neighbors: tuple[Neighbor, ...]
    note: str | None  # how the query vector was formed, when that needs saying
    reason: str | None  # why there are no neighbours (the query row is zero or not finite)
    table: Role
    table_name: str
    removed: RemovedTop | None = None  # --remove-top: the cosines are in the all-but-the-top space


def rows_asked(emb: Embeddings, table: str, remove_top: int | None) -> tuple[np.ndarray, str, RemovedTop | None]:
    """The table's rows as stored, or in the all-but-the-top space with `remove_top` directions removed."""
    array, name = table_rows(emb, table)
    if not remove_top:
        return array, name, None
    removed = all_but_the_top(array, remove_top)
    return removed.table, name, removed


def neighbors(emb: Embeddings, query: str | int, k: int = 10, *, ids: bool = False, exact: bool = False,
              table: str = "token", allow_unk: bool = False, remove_top: int | None = None) -> NeighborsResult:
    """The k rows most similar (cosine) to a word or id, leaving out the query's own rows; with `remove_top` D,
    in the all-but-the-top space (analysis.all_but_the_top)."""
    if k < 1:
        raise OptionError(f"expected k of at least 1, found {k}", option="k")
    array, name, removed = rows_asked(emb, table, remove_top)
    resolve = Resolver(emb, pick_table(emb, table), LookupOptions(ids, exact, allow_unk), merge=True)
    found = resolve(query)
    note = "; ".join(n for n in (lookup_note(found), merge_note(found)) if n) or None
    vectors = query_vectors(array, [found], None)
    (found,) = with_reasons(array, [found], vectors, removed is not None)
    unnamed = tokenizer_failure(emb, resolve.table) if ids else None  # the tokens are #ids, answered or not: say why
    if found.reason is not None:
        return NeighborsResult(found, (), joined("; ", filter(None, (note, unnamed))) or None, found.reason,
                               Role(table), name, removed)
    # one query streams the table through the top-k once: no normalised copy of it; the k reported cosines
    # are worked out again in float64, as similarity gives them
    top = compute.topk_vectors(array, vectors, k, exclude=[found.ids], device="cpu")
    picked = top.ids[0][top.ids[0] >= 0]
    cosines = compute.cosines_to(array, picked, vectors[0])
    tokenizer = resolve.tokenizer
    chosen = tuple(Neighbor(int(i), token_name(tokenizer, int(i)), float(c), is_padding(tokenizer, int(i)))
                   for i, c in zip(picked, cosines))
    short = None
    if len(chosen) < k:  # the list is shorter than asked: say so rather than let it look complete by choice
        short = Message(Option("k", k, text=f"{k:,}"), f" asks for more rows than there are: all {len(chosen):,} "
                        "rows with a cosine are listed")
    note = joined("; ", filter(None, (note, short, unnamed))) or None
    return NeighborsResult(found, chosen, note, None, Role(table), name, removed)


def topk_all(emb: Embeddings, k: int, *, queries: Iterable[object] | None = None, ids: bool = False, exact: bool = False,
             table: str = "token", device: str = "auto", precision: str = "fp32", allow_unk: bool = False,
             progress: Progress | None = None, on_skip: Callable[[str], None] | None = None,
             remove_top: int | None = None) -> compute.TopK:
    """Top-k neighbours of every row (or of the one-token words / ids in `queries`), in batches; k is at most the
    table's rows. A query that is several tokens, or cannot be looked up, raises TokenError, or, when `on_skip`
    is given, is handed to it as one line saying why and left out. `remove_top` D: in the all-but-the-top space."""
    if k < 1:
        raise OptionError(f"expected k of at least 1, found {k}", option="k")
    array, _, _ = rows_asked(emb, table, remove_top)
    k = min(k, array.shape[0])  # a list longer than the table holds nothing more
    query_ids = None
    if queries is not None:
        resolve = Resolver(emb, pick_table(emb, table), LookupOptions(ids, exact, allow_unk), merge=True)
        chosen = packed("q")
        for n, text in enumerate(word_list(queries, "queries")):
            try:
                found = resolve(text)
                if found.merged:
                    pieces = " ".join(quote(t) for t in found.tokens)
                    raise TokenError(f"expected each query to be one token, found {quote(found.text)} as "
                                     f"{len(found.ids)} ({pieces}); ask `embscope neighbors` about it on its own")
            except TokenError as err:
                if on_skip is None:
                    raise
                on_skip(Message(f"query {n + 1}: ", message_of(err)))
                continue
            chosen.append(found.ids[0])
        query_ids = np.frombuffer(chosen, dtype=np.int64) if chosen else np.empty(0, dtype=np.int64)
    return compute.topk_rows(array, k, rows=query_ids, exclude_self=True, device=device, precision=precision,
                             progress=progress)
