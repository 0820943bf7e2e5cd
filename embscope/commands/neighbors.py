"""`embscope neighbors`: the rows most similar to one word or id, or to every row at once (--all --out FILE)."""

from __future__ import annotations

import time
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import compute
from ..analysis.similarity import NeighborsResult, neighbors, token_string, topk_all
from ..errors import EmbscopeError
from ..render import console, jsonout
from ..render.neighbors_out import out_format, write_neighbors
from ..text import quote
from .options import JsonFlag, Source, with_source
from .similarity import ExactFlag, IdsFlag, TableChoice, TableOption, token_text, tokens_text


class Precision(str, Enum):
    fp32 = "fp32"
    tf32 = "tf32"
    bf16 = "bf16"
    fp16 = "fp16"


def read_queries_file(path: Path) -> list[str]:
    """One word or id per line; blank lines and # comments skipped."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeError) as err:
        raise EmbscopeError(f"expected a readable UTF-8 queries file at {quote(path)}, found {err}") from None
    queries = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    if not queries:
        raise EmbscopeError(f"expected words or ids in {quote(path)}, one a line, found none")
    return queries


def document(result: NeighborsResult) -> dict:
    query = result.query
    return {"query": query.text, "ids": list(query.ids), "tokens": list(query.tokens),
            "neighbors": [{"id": n.id, "token": n.token, "cosine": n.cosine, "padding": n.padding}
                          for n in result.neighbors],
            "note": result.note, "reason": result.reason, "table": result.table, "table_name": result.table_name}


def render(result: NeighborsResult) -> None:
    out = console.out
    query = result.query
    out.print(f"{console.safe(query.text)} -> {tokens_text(query)}  "
              f"({result.table} table {console.safe(quote(result.table_name))})", soft_wrap=True)
    if result.reason is not None:
        out.print(f"no neighbours: {console.safe(result.reason)}")
    else:
        grid = console.table("rank", "id", "token", "cosine", "note")
        for rank, n in enumerate(result.neighbors, start=1):
            grid.add_row(str(rank), str(n.id), token_text(n.id, n.token), console.cosine_text(n.cosine),
                         "padding" if n.padding else "")
        out.print(grid)
    console.notes([result.note] if result.note else [])


def run_all(source: Source, k: int, out: Path, queries_file: Optional[Path], ids: bool, exact: bool, table: str,
            precision: str, json: bool) -> None:
    kind = out_format(out)  # refuse a bad extension before any work
    queries = read_queries_file(queries_file) if queries_file is not None else None
    emb = source.open()
    device = compute.resolve_device(source.device.value)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
    started = time.perf_counter()
    with Progress(TextColumn("top-{task.fields[k]}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console.err, transient=True, disable=not console.err.is_terminal) as bar:
        task = bar.add_task("neighbours", total=None, k=k)
        result = topk_all(emb, k, queries=queries, ids=ids, exact=exact, table=table, device=device,
                          precision=precision, progress=lambda done, total: bar.update(task, completed=done, total=total))
    seconds = time.perf_counter() - started
    tokenizer = emb.tokenizer_for_names()[0]
    write_neighbors(out, result, lambda token_id: token_string(tokenizer, token_id))
    rows = len(result.query_ids)
    if json:
        jsonout.emit({"out": str(out), "format": kind, "queries": rows, "k": k, "table": table,
                      "table_name": emb.table(table).name, "device": device, "precision": precision,
                      "seconds": seconds})
        return
    console.out.print(f"wrote the top-{k} neighbours of {rows:,} {table} rows to {console.safe(out)} ({kind}) "
                      f"in {seconds:.2f} s on {device}, {precision}", soft_wrap=True)


def neighbors_command(
    source: Source,
    word: Annotated[Optional[str], typer.Argument(help="A word (or an id with --ids).", show_default=False)] = None,
    k: Annotated[int, typer.Option("-k", min=1, help="How many neighbours.")] = 10,
    ids: IdsFlag = False,
    exact: ExactFlag = False,
    table: TableOption = TableChoice.token,
    all_rows: Annotated[bool, typer.Option("--all", help="Every row of the table (or --queries), in batches.")] = False,
    out: Annotated[Optional[Path], typer.Option(help="With --all: the file to write, .tsv, .jsonl or .npz.")] = None,
    queries: Annotated[Optional[Path], typer.Option(
        help="With --all: a file of words (or ids with --ids), one a line, instead of every row.")] = None,
    precision: Annotated[Precision, typer.Option(help="With --all: arithmetic for the batched products.")] = Precision.fp32,
    json: JsonFlag = False,
) -> None:
    """The K rows most similar to a word, or with --all --out FILE the top K of every row."""
    if all_rows:
        if word is not None:
            raise typer.BadParameter("--all takes its queries from --queries FILE, not a word")
        if out is None:
            raise typer.BadParameter("--all needs --out FILE (.tsv, .jsonl or .npz)")
        run_all(source, k, out, queries, ids, exact, table.value, precision.value, json)
        return
    if out is not None or queries is not None:
        raise typer.BadParameter("--out and --queries go with --all")
    if word is None:
        raise typer.BadParameter("expected a word (or an id with --ids), or --all")
    result = neighbors(source.open(), word, k, ids=ids, exact=exact, table=table.value)
    if json:
        jsonout.emit(document(result))
    else:
        render(result)


def register(app: typer.Typer) -> None:
    app.command("neighbors")(with_source(neighbors_command))
