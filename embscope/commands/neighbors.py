"""`embscope neighbors`: the rows most similar to one word or id, or to every row at once (--all --out FILE)."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from ..roles import Role
from .options import (
    AUTO_DEVICE,
    AUTO_PRECISION,
    AllowUnkFlag,
    DeviceOption,
    ExactFlag,
    IdsFlag,
    JsonFlag,
    ListedNeighbours,
    PrecisionOption,
    RemoveTopOption,
    Source,
    StrictFlag,
    TableOption,
    as_usage_error,
    refuse,
    tokenizer_failure,
    with_source,
)


def run_all(source: Source, k: int, out: Path, queries_file: Path | None, ids: bool, exact: bool, allow_unk: bool,
            table: str, strict: bool, device: str, precision: str, json: bool, remove_top: int | None) -> None:
    from .. import compute
    from ..analysis.neighbors import topk_all
    from ..hardware import bf16_note
    from ..inputs import Skipped, read_queries
    from ..naming import token_name
    from ..render import neighbors as render
    from ..render.files import check_directory, input_files
    from ..render.neighbors_out import STDOUT, out_format, write_neighbors
    from ..render.progress import bar

    kind = as_usage_error(lambda: out_format(out), "--out")  # a bad extension is refused before any work
    if str(out) == STDOUT and json:
        raise refuse("--out - writes the rows to standard output, so it cannot take --json too")
    if str(out) != STDOUT:
        check_directory(out, "--out")
    emb = source.open()
    device = compute.resolve_device(device)
    asked = compute.resolve_precision(precision, device)
    precision = compute.precision_run(precision, device)
    skipped = None if strict else Skipped()
    queries = read_queries(queries_file, skipped) if queries_file is not None else None
    started = time.perf_counter()
    with bar(f"top-{k}") as progress:
        topk = topk_all(emb, k, queries=queries, ids=ids, exact=exact, table=table, device=device,
                        precision=precision, allow_unk=allow_unk, progress=progress, on_skip=skipped,
                        remove_top=remove_top)
    seconds = time.perf_counter() - started
    tokenizer = emb.tokenizer_for_names()[0]
    write_neighbors(out, topk, lambda token_id: token_name(tokenizer, token_id), input_files(emb, queries_file))
    notes = [n for n in (bf16_note(device, precision), tokenizer_failure(emb)) if n]
    if remove_top:
        notes.append(f"cosines in the all-but-the-top space of the {table} table: the mean row and the top "
                     f"{remove_top} principal direction{'s' * (remove_top != 1)} removed from every row")
    if asked != precision:
        notes.append(f"--precision {asked} is a GPU tensor-core mode: on the {device} the products ran in {precision}")
    if topk.ids.shape[1] < k:
        notes.append(f"-k {k:,} is more than the table's {topk.ids.shape[1]:,} rows: each list holds at most that many")
    notes += skipped.notes(queries_file) if skipped and queries_file else []
    render.show_all(emb, out=out, kind=kind, queries=len(topk.query_ids), k=topk.ids.shape[1], table=table,
                    device=device, precision=compute.precision_label(precision), seconds=seconds, json=json,
                    notes=notes)


def neighbors_command(
    source: Source,
    word: Annotated[str | None, typer.Argument(help="A word (or an id with --ids).", show_default=False)] = None,
    k: ListedNeighbours = 10,
    ids: IdsFlag = False,
    exact: ExactFlag = False,
    allow_unk: AllowUnkFlag = False,
    table: TableOption = Role.token,
    all_rows: Annotated[bool, typer.Option("--all", help="Every row of the table (or --queries), in batches.")] = False,
    out: Annotated[Path | None, typer.Option(
        help="With --all: the file to write, .tsv, .jsonl or .npz; - writes TSV to standard output.")] = None,
    queries: Annotated[Path | None, typer.Option(
        help="With --all: a file of words (or ids with --ids), one a line, instead of every row. A word of several "
             "tokens is skipped with a note.")] = None,
    strict: StrictFlag = False,
    remove_top: RemoveTopOption = None,
    device: DeviceOption = AUTO_DEVICE,
    precision: PrecisionOption = AUTO_PRECISION,
    json: JsonFlag = False,
) -> None:
    """The K rows most similar to a word, or with --all --out FILE the top K of every row."""
    if table is Role.position:
        raise refuse("expected token or output (neighbours among positions: embscope positions --profile)", "--table")
    if all_rows:
        if word is not None:
            raise refuse("--all takes its queries from --queries FILE, not a word")
        if out is None:
            raise refuse("--all needs --out FILE (.tsv, .jsonl or .npz, or - for standard output)")
        run_all(source, k, out, queries, ids, exact, allow_unk, table.value, strict, device.value, precision.value, json,
                remove_top)
        return
    if out is not None or queries is not None:
        raise refuse("--out and --queries go with --all")
    if device is not AUTO_DEVICE or precision is not AUTO_PRECISION:
        raise refuse("--device and --precision go with --all, the batched run")
    if word is None:
        raise refuse("expected a word (or an id with --ids), or --all")
    from ..analysis.neighbors import neighbors
    from ..render import neighbors as render
    emb = source.open()
    result = neighbors(emb, word, k, ids=ids, exact=exact, table=table.value, allow_unk=allow_unk,
                       remove_top=remove_top)
    failure = tokenizer_failure(emb) if ids else None  # the tokens print as #ids: say why
    if failure:
        result = replace(result, note="; ".join(filter(None, (result.note, failure))))
    render.show(emb, result, json=json)


def register(app: typer.Typer) -> None:
    app.command("neighbors")(with_source(neighbors_command))
