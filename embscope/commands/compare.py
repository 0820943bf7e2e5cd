"""`embscope compare A B [C ...]`: what training changed between checkpoints, row by row and over steps."""

import os
from dataclasses import replace
from enum import Enum
from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from ..analysis.compare import CompareOptions
from ..analysis.compare_run import checkpoints_of, compare_own_output, compare_run
from ..core.errors import Message
from ..naming import token_name
from ..render import compare as render
from ..render import compare_output as render_output
from ..render import progress
from ..render.compare_plot import draw
from ..render.files import input_files
from .command import CheckpointsCommand
from .device_options import AUTO_DEVICE, DeviceOption
from .options import (
    CHECKPOINT_VARIABLE,
    JsonFlag,
    Source,
    checkpoint_path,
    opener,
    parse_words,
    source_of,
)
from .plot_option import PlotOption, check_plot, plot_path

# shown in --help; the library's own defaults (analysis.compare) are checked equal by a test
LISTED, NEIGHBOR_K, NEIGHBOR_SAMPLE = 20, 10, 1000


class Align(str, Enum):
    procrustes = "procrustes"


class Match(str, Enum):
    tokens = "tokens"


def given_checkpoints(arguments: list[Path] | None, named: list[Path] | None) -> list[Path]:
    """The checkpoints as given: the arguments, then each -c; with neither, $EMBSCOPE_CHECKPOINT (one path, read
    whole: click would split a list option's variable at spaces)."""
    found = [*(arguments or []), *(named or [])]
    if not found and os.environ.get(CHECKPOINT_VARIABLE):
        found = [checkpoint_path(os.environ[CHECKPOINT_VARIABLE])]
    if not found:
        raise typer.BadParameter("expected checkpoints to compare (arguments, -c or $EMBSCOPE_CHECKPOINT)",
                                 param_hint="'CHECKPOINT...'")
    return found


def compare_command(
    ctx: typer.Context,
    checkpoints: Annotated[list[Path] | None, typer.Argument(
        parser=checkpoint_path,
        help="Two or more checkpoints (files or folders), compared in the order given; or one folder holding a "
             "run's checkpoints (ckpt*.pt, ANDREA dumps, nlm pickles, checkpoint-N/ folders), ordered by step.",
        metavar="CHECKPOINT...", show_default=False)] = None,
    named: Annotated[list[Path] | None, typer.Option(
        "--checkpoint", "-c", parser=checkpoint_path, metavar="PATH",
        help="A checkpoint, as every command takes it; repeatable, after the CHECKPOINT arguments. Default: "
             "$EMBSCOPE_CHECKPOINT (one checkpoint: --output, or a run's folder).", show_default=False)] = None,
    words: Annotated[list[str] | None, typer.Option(
        "--words", help="Words whose top-k neighbour sets are compared first, beside the sample (comma-separated or "
                        "repeated).")] = None,
    sample: Annotated[int, typer.Option(
        "--sample", min=0, help="How many rows are drawn (with a fixed seed) for the neighbour comparison.")] = NEIGHBOR_SAMPLE,
    k: Annotated[int, typer.Option("-k", min=1, help="How many neighbours of each row the neighbour sets hold.")] = NEIGHBOR_K,
    top: Annotated[int, typer.Option("--top", min=1, help="How many movers and stable rows are listed per table.")] = LISTED,
    align: Annotated[Align | None, typer.Option(
        "--align", help="procrustes: rotate B onto A (orthogonal Procrustes over the shared rows) before comparing; "
                        "for two different runs. Two checkpoints only.", show_default=False)] = None,
    match: Annotated[Match | None, typer.Option(
        "--match", help="tokens: pair token rows by token string, for vocabularies that differ. Two checkpoints only.",
        show_default=False)] = None,
    cka: Annotated[bool, typer.Option(
        "--cka/--no-cka", help="Linear CKA of each table pair: d x d products of both tables, about what the neighbour sample "
                               "costs; --no-cka skips it for a quicker answer on large tables.")] = True,
    output: Annotated[bool, typer.Option(
        "--output", help="One checkpoint: its token table against its own untied output projection (row cosine as "
                         "stored and after Procrustes, linear CKA, neighbour overlap).")] = False,
    plot: PlotOption = None,
    device: DeviceOption = AUTO_DEVICE,
    scheduler: Annotated[str | None, typer.Option(
        "--scheduler", help="Run each checkpoint's comparison as a task on the dask.distributed scheduler at this "
                            "address (tcp://host:port, or its scheduler file), or 'local' for worker processes here. "
                            "Every worker must read the checkpoints at the same paths.", metavar="ADDRESS",
        show_default=False)] = None,
    json: JsonFlag = False,
) -> None:
    """What changed between checkpoints: per-row cosine, norm and relative change, rows bitwise unchanged,
    neighbour-set overlap, linear CKA, position profiles; a trajectory over three or more steps. With --output,
    one checkpoint's token table against its output projection."""
    source = source_of(ctx)
    checkpoints = given_checkpoints(checkpoints, named)
    if output:
        check_output_alone(ctx, len(checkpoints), align, match, plot, scheduler)
        return compare_output_command(replace(source, checkpoint=checkpoints[0]), probe_words=parse_words(words),
                                      sample=sample, k=k, device=device.value, json=json, cka=cka)
    if (align is not None or match is not None) and len(checkpoints) != 2:
        raise typer.BadParameter("--align and --match compare two runs: give exactly two checkpoints")
    if scheduler is not None and (align is not None or match is not None):
        raise typer.BadParameter("--scheduler runs a series of checkpoints: it takes neither --align nor --match")
    check_plot(plot)
    probe_words = parse_words(words)
    if len(checkpoints) == 1 and not checkpoints[0].is_dir():
        raise typer.BadParameter("expected two or more checkpoints, or one folder of checkpoints",
                                 param_hint="'CHECKPOINTS...'")

    open_path = opener(source)

    run = checkpoints_of(checkpoints, open_path)
    plot_file = plot_path(plot, run.origin, None, "compare", covers=run.paths)
    options = CompareOptions(align=align is not None, k=k, sample=sample, listed=top, device=device.value, cka=cka)
    with progress.stages() as stages:
        found = compare_run(run, open_path, options, words=probe_words, match_tokens=match is not None,
                            files_of=input_files, scheduler=scheduler, stages=stages)
    series = found.found
    labels = render.Labels(series.checkpoints, run.origin, series.table_names, series.names, series.names_b,
                           found.words, found.notes, plot_file, run=len(checkpoints) == 1,
                           audit=series.audit)
    if plot_file is not None:
        draw(series.comparison, labels, plot_file, inputs=found.read)
    if json:
        render.emit(series.comparison, labels)
    else:
        render.show(series.comparison, labels)


def check_output_alone(ctx: typer.Context, checkpoints: int, *options: object) -> None:
    """--output takes one checkpoint and none of the options of two (`options`: --align, --match, --plot and
    --scheduler as given, None when not): --top lists movers and --scheduler spreads a series, which --output has
    neither of, and it took both without a word."""
    top_given = getattr(ctx.get_parameter_source("top"), "name", "DEFAULT") != "DEFAULT"
    if checkpoints != 1 or top_given or any(option is not None for option in options):
        raise typer.BadParameter("--output compares the two tables of one checkpoint: give one checkpoint, "
                                 "without --align, --match, --plot, --top or --scheduler")


def compare_output_command(source: Source, *, probe_words: list[str] | None, sample: int, k: int, device: str,
                           json: bool, cka: bool) -> None:
    """`compare CKPT --output`: the token table (A) against the untied output projection (B) of one file."""
    emb = source.open()
    with progress.stages() as stages:
        found, found_words = compare_own_output(emb, CompareOptions(k=k, sample=sample, device=device, cka=cka),
                                                words=probe_words, stages=stages)
    tokenizer = emb.tokenizer_for_names(emb.token)[0]
    # the output table's rows are named only by a tokenizer that is its own too (it may be of another height)
    output_tokenizer, why = emb.tokenizer_for_names(emb.output) if emb.output is not None else (tokenizer, None)
    named = any(row is not None for _, row, _ in found_words)  # words' neighbours are listed: rows are named
    said = [Message(why, "; output rows print as #id")] if named and why else []
    render_output.show(emb, found, found_words, (partial(token_name, tokenizer), partial(token_name, output_tokenizer)),
                       json=json, said=said)


def register(app: typer.Typer) -> None:
    app.command("compare", cls=CheckpointsCommand)(compare_command)
