"""`embscope report`: one self-contained HTML page (or a Markdown folder) with every answer about a checkpoint,
and what changed across checkpoints when several are given."""

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from ..analysis.report import gather, report_checkpoints
from ..embeddings import resolve_path
from ..render import report as render
from ..render.files import input_files
from ..render.flags import flag
from ..render.names import named_output
from ..render.plot_files import require_matplotlib
from ..render.progress import stages
from .command import CheckpointsCommand
from .options import JsonFlag, as_usage_error, checkpoint_path, opener, output_path, parse_words, source_of


class ReportFormat(str, Enum):
    html = "html"
    md = "md"


def report(
    ctx: typer.Context,
    checkpoints: Annotated[list[Path] | None, typer.Option(
        "--checkpoint", "-c", parser=checkpoint_path,
        help="Checkpoint file or directory, or a model id in the local Hugging Face cache; repeat it (or give one "
             "folder of a run's checkpoints) to add a section comparing them. Default: $EMBSCOPE_CHECKPOINT, else the "
             "bundled sample model.", show_default=False)] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", parser=output_path, metavar="<path>",
        help="html: the file to write (.html); md: a folder (made if missing) for report.md and its "
             "SVG figures. Default: <checkpoint>-report.html, or the folder <checkpoint>-report, in the "
             "working directory.", show_default=False)] = None,
    format: Annotated[ReportFormat, typer.Option(
        "--format", help="html: one self-contained page (figures inline as SVG, no script, nothing fetched); "
                         "md: Markdown and SVG files, for GitHub and blogs.")] = ReportFormat.html,
    words: Annotated[str | None, typer.Option(
        "--words", metavar="W1,W2,...", help="Probe words for the neighbours and the map (default: a handful of "
                                             "frequent one-token words the tokenizer has).", show_default=False)] = None,
    json: JsonFlag = False,
) -> None:
    """Every answer about a checkpoint in one file: tables and rules, parameters, norms, positions, under-trained
    tokens, neighbours of probe words and a 2-D map; with several checkpoints, what changed across them (the
    other sections then describe the last)."""
    source = source_of(ctx)
    if out is not None:
        as_usage_error(lambda: render.check_name(out, format.value), "--out")
        render.check_place(out, format.value)
    if format is ReportFormat.md:  # the Markdown's figure files need matplotlib; the page says it in place of each figure
        require_matplotlib("embscope report --format md")
    probe_words = parse_words(words)

    open_path = opener(source)

    paths, origin, notes = report_checkpoints(checkpoints or [], open_path)
    # the checkpoint the sections describe (the last) names the report, as it titles it
    named_by = paths[-1] if paths else resolve_path(None)[0]
    covers = paths or [named_by]
    target = named_output(out, covers) if out is not None else render.default_target(format.value, named_by, covers)
    with stages() as stage:
        found = gather(paths, open_path, words=probe_words, origin=origin, notes=notes, stages=stage)
    inputs = [*input_files(found.emb), *paths]
    sections, files = render.write(found, target, format.value, inputs, spell=flag)
    render.show(found, target, format.value, sections, files, json)


def register(app: typer.Typer) -> None:
    app.command(cls=CheckpointsCommand)(report)
