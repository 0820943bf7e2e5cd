"""`neighbors` results: one query's nearest rows (a table, or JSON), and the summary of a batched --all run
(its progress bar is render.progress's)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..analysis.neighbors import NeighborsResult
from ..core.text import quote
from . import console, header
from .jsonout import Document

if TYPE_CHECKING:
    from ..embeddings import Embeddings


def document(result: NeighborsResult) -> Document:
    query = result.query
    return {"query": query.text, "ids": list(query.ids), "tokens": list(query.tokens),
            "neighbors": [{"id": n.id, "token": n.token, "cosine": n.cosine, "padding": n.padding}
                          for n in result.neighbors],
            "note": result.note, "reason": result.reason, "table": result.table, "table_name": result.table_name,
            "remove_top": result.removed.removed if result.removed is not None else None}


def show(emb: Embeddings, result: NeighborsResult, *, json: bool) -> None:
    if json:
        header.emit(document(result), emb)
        return
    header.show(emb)
    out = console.out
    query = result.query
    out.print(f"{console.safe(query.text)} -> {console.tokens_text(query.ids, query.tokens)}  "
              f"({result.table} table {console.safe(quote(result.table_name))})", soft_wrap=True)
    if result.reason is not None:
        out.print(f"no neighbours: {console.safe(result.reason)}")
    else:
        grid = console.table("rank", "id", "token", "cosine", "note")
        for rank, n in enumerate(result.neighbors, start=1):
            grid.add_row(str(rank), str(n.id), console.token_text(n.id, n.token), console.cosine_text(n.cosine),
                         "padding" if n.padding else "")
        out.print(grid)
    if result.removed is not None:
        out.print(console.safe(result.removed.describe(result.table)), soft_wrap=True)
    console.notes([result.note] if result.note else [])


def show_all(emb: Embeddings, *, out: Path, kind: str, queries: int, k: int, table: str, device: str, precision: str,
             seconds: float, json: bool, notes: Sequence[str] = ()) -> None:
    """What a batched run wrote. With `--out -` the rows went to stdout, so this goes to stderr."""
    table_name = emb.table(table).name
    if json:
        header.emit({"out": str(out), "format": kind, "queries": queries, "k": k, "table": table,
                     "table_name": table_name, "device": device, "precision": precision, "seconds": seconds,
                     "notes": list(notes)}, emb)
        return
    to = console.err if str(out) == "-" else console.out
    to.print(console.safe(header.checkpoint_line(emb)), soft_wrap=True)
    where = "standard output" if str(out) == "-" else console.safe(out)
    to.print(f"wrote the top-{k} neighbours of {queries:,} {table} rows to {where} ({kind}) "
             f"in {seconds:.2f} s on {device}, {precision}", soft_wrap=True)
    for line in notes:
        to.print(f"note: {console.safe(line)}")
