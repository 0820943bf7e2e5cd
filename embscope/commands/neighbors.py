"""`embscope neighbors`: the rows most similar to one word or id, or to every row at once (--all --out FILE)."""

from pathlib import Path
from typing import Annotated

import typer

from ..analysis.neighbors import neighbors
from ..analysis.neighbors_all import neighbors_all
from ..naming import token_name
from ..options import DeviceOptions, LookupOptions
from ..render import neighbors as render
from ..render.files import check_directory, input_files
from ..render.neighbors_out import STDOUT, out_format, write_neighbors
from ..render.progress import bar
from .command import SourceCommand
from .device_options import AUTO_DEVICE, AUTO_PRECISION, DeviceOption, PrecisionOption
from .options import (
    TOKEN_TABLE,
    AllowUnkFlag,
    ExactFlag,
    IdsFlag,
    JsonFlag,
    ListedNeighbours,
    RemoveTopOption,
    Source,
    StrictFlag,
    TableOption,
    as_usage_error,
    check_lookup_flags,
    input_file,
    output_path,
    refuse,
    source_of,
)


def run_all(source: Source, k: int, out: Path, queries_file: Path | None, table: str, strict: bool,
            lookup: LookupOptions, run_on: DeviceOptions, remove_top: int | None, json: bool) -> None:
    """`--all --out FILE`: the output checked before any work, one library call, the file written, a summary."""
    kind = as_usage_error(lambda: out_format(out), "--out")  # a bad extension is refused before any work
    if str(out) == STDOUT and json:
        raise refuse("--out - writes the rows to standard output, so it cannot take --json too")
    if str(out) != STDOUT:
        check_directory(out, "--out")
    emb = source.open()
    with bar(f"top-{k}") as progress:
        found = neighbors_all(emb, k, queries_file=queries_file, table=table, lookup=lookup, run_on=run_on,
                              strict=strict, remove_top=remove_top, progress=progress)
    tokenizer = emb.tokenizer_for_names(emb.table(table))[0]
    write_neighbors(out, found.topk, lambda token_id: token_name(tokenizer, token_id), input_files(emb, queries_file))
    render.show_all(emb, out=out, kind=kind, queries=len(found.topk.query_ids), k=found.topk.ids.shape[1],
                    table=table, device=found.device, precision=found.precision, seconds=found.seconds, json=json,
                    notes=found.notes)


def neighbors_command(
    ctx: typer.Context,
    word: Annotated[str | None, typer.Argument(help="A word (or an id with --ids).", show_default=False)] = None,
    k: ListedNeighbours = 10,
    ids: IdsFlag = False,
    exact: ExactFlag = False,
    allow_unk: AllowUnkFlag = False,
    table: TableOption = TOKEN_TABLE,
    all_rows: Annotated[bool, typer.Option("--all", help="Every row of the table (or --queries), in batches.")] = False,
    out: Annotated[Path | None, typer.Option(
        parser=output_path, metavar="<path>",
        help="With --all: the file to write, .tsv, .jsonl or .npz; - writes TSV to standard output.")] = None,
    queries: Annotated[Path | None, typer.Option(
        parser=input_file, metavar="<path>",
        help="With --all: a file of words (or ids with --ids), one a line, instead of every row. A word of several "
             "tokens is skipped with a note.")] = None,
    strict: StrictFlag = False,
    remove_top: RemoveTopOption = None,
    device: DeviceOption = AUTO_DEVICE,
    precision: PrecisionOption = AUTO_PRECISION,
    json: JsonFlag = False,
) -> None:
    """The K rows most similar to a word, or with --all --out FILE the top K of every row."""
    source = source_of(ctx)
    check_lookup_flags("{} not go with --ids" if ids else None, exact=exact, allow_unk=allow_unk)
    if queries is None and strict:
        raise refuse("--strict goes with --queries: it says what to do with a line of the file that "
                     "cannot be used")
    if all_rows:
        if word is not None:
            raise refuse("--all takes its queries from --queries FILE, not a word")
        if out is None:
            raise refuse("--all needs --out FILE (.tsv, .jsonl or .npz, or - for standard output)")
        run_all(source, k, out, queries, table.value, strict, LookupOptions(ids, exact, allow_unk),
                DeviceOptions(device.value, precision.value), remove_top, json)
        return
    if out is not None or queries is not None:
        raise refuse("--out and --queries go with --all")
    if device is not AUTO_DEVICE or precision is not AUTO_PRECISION:
        raise refuse("--device and --precision go with --all, the batched run")
    if word is None:
        raise refuse("expected a word (or an id with --ids), or --all")
    emb = source.open()
    result = neighbors(emb, word, k, ids=ids, exact=exact, table=table.value, allow_unk=allow_unk,
                       remove_top=remove_top)
    render.show(emb, result, json=json)


def register(app: typer.Typer) -> None:
    app.command("neighbors", cls=SourceCommand)(neighbors_command)
