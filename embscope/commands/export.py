"""`embscope export`: a table's rows as files other tools open: the TensorFlow Embedding Projector, word2vec text."""

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from ..analysis.export import RowSpec, export_rows, parse_rows
from ..analysis.undertrained import undertrained_tables
from ..core.role import Role
from ..registry import named
from ..render import export as render
from ..render.export_files import WRITERS
from ..render.files import input_files
from ..render.names import emb_title
from ..render.progress import stages
from .command import SourceCommand
from .options import JsonFlag, as_usage_error, output_path, refuse, source_of


class ExportFormat(str, Enum):
    projector = "projector"
    word2vec = "word2vec"


def row_spec(rows: str | None, top_norms: int | None) -> RowSpec:
    """--rows or --top-norms (not both), checked before the checkpoint is opened."""
    if rows is not None and top_norms is not None:
        raise refuse("give --rows or --top-norms, not both", "--rows")
    if top_norms is not None:
        return RowSpec(top_norms=top_norms)
    if rows is None:
        return RowSpec()
    return as_usage_error(lambda: parse_rows(rows), "--rows")


def export(
    ctx: typer.Context,
    out: Annotated[Path, typer.Option(
        "--out", parser=output_path, metavar="<path>",
        help="projector: a folder (made if missing) for vectors.tsv, metadata.tsv and "
             "projector_config.pbtxt; word2vec: the file to write.", show_default=False)],
    format: Annotated[ExportFormat, typer.Option("--format", help="projector: the TensorFlow Embedding Projector; "
                                                                  "word2vec: the word2vec text format.")]
    = ExportFormat.projector,
    table: Annotated[Role, typer.Option("--table", help="The table to export; position rows are labelled by "
                                                        "position.")] = Role.token,
    rows: Annotated[str | None, typer.Option(
        "--rows", metavar="IDS", help="Only these rows: ids and half-open ranges, e.g. 5,17,100:200.")] = None,
    top_norms: Annotated[int | None, typer.Option(
        "--top-norms", min=1, metavar="N",
        help="How many rows to export: the N with the largest norms, largest first.")] = None,
    undertrained: Annotated[bool, typer.Option(
        "--undertrained/--no-undertrained", help="Fill the Projector metadata's undertrained column with the "
                                                 "candidates of `embscope undertrained` (one more pass), or leave it "
                                                 "empty.")] = True,
    json: JsonFlag = False,
) -> None:
    """Write a table's rows for other tools: a folder the TensorFlow Embedding Projector loads as is
    (vectors, metadata with token, id, norm and flags, config), or the word2vec text format gensim reads."""
    source = source_of(ctx)
    if str(out) == "-":  # neighbors' `--out -` is standard output: here it would make a folder named "-"
        raise refuse("expected a folder (projector) or a file (word2vec), found '-': export writes files, not "
                     "standard output", "--out")
    if undertrained and getattr(ctx.get_parameter_source("undertrained"), "name", "DEFAULT") != "DEFAULT" and (
            format is ExportFormat.word2vec or table is Role.position):  # typed, and then left out without a word
        raise refuse("--undertrained fills the Projector metadata's column of a token or output table: neither "
                     "word2vec nor the position table has it", "--undertrained")
    spec = row_spec(rows, top_norms)
    emb = source.open()
    flagged = None
    if undertrained and format is ExportFormat.projector and table is not Role.position:
        with stages() as stage:
            found = undertrained_tables(emb, [table.value], stages=stage)
        flagged = {int(row) for report in found.reports for row in report.candidates.indices}
    chosen = export_rows(emb, table, spec, undertrained=flagged)
    files = named(WRITERS, format.value)(out, emb.table(table).array, chosen, input_files(emb),
                                                emb_title(emb))
    render.show(emb, chosen, format.value, files, json)


def register(app: typer.Typer) -> None:
    app.command(cls=SourceCommand)(export)
