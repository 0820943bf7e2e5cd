"""`embscope undertrained`: tokens the model never learned, from the weights (Land & Bartolo 2024's
indicator), checked against the tokenizer, and across checkpoints of the same run when given."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from typer.core import TyperCommand

from .. import compute
from ..analysis.token_kinds import TokenKinds, token_kinds
from ..analysis.undertrained import UndertrainedReport, find_undertrained
from ..embeddings import Embeddings
from ..errors import EmbscopeError, TableError
from ..render import console, jsonout
from ..render.undertrained import document, render
from ..text import quote
from .options import JsonFlag, Source, with_source

BARE_PLOT = ""  # what a --plot given without a file name stands for


class TableChoice(str, Enum):
    token = "token"
    output = "output"
    both = "both"


class BarePlotCommand(TyperCommand):
    """Lets --plot come without a value: the parser typer vendors has no optional option values."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # ctx: the click Context typer vendors
        given = list(args)
        for index, arg in enumerate(given):
            if arg == "--":
                break
            if arg == "--plot" and (index + 1 == len(given) or given[index + 1].startswith("-")):
                given[index] = f"--plot={BARE_PLOT}"
        return super().parse_args(ctx, given)


def plot_path(plot: str | None, emb: Embeddings | None) -> Path | None:
    """The file --plot names; bare --plot: <checkpoint stem>-undertrained.png in the working directory.
    With emb None only the extension is checked, before any work."""
    if plot is None:
        return None
    if plot == BARE_PLOT:
        return None if emb is None else Path.cwd() / f"{emb.checkpoint.path.stem}-undertrained.png"
    from ..render.plots import plot_format  # the module imports matplotlib only when drawing
    try:
        plot_format(Path(plot))
    except EmbscopeError as err:
        raise typer.BadParameter(str(err), param_hint="'--plot'") from None
    return Path(plot)


def roles(emb: Embeddings, choice: TableChoice | None) -> list[str]:
    """The output table when the head is untied (magikarp: the stronger signal), else the token table."""
    if choice is None:
        return ["output" if emb.output is not None else "token"]
    if choice is TableChoice.both:
        if emb.output is None:
            raise TableError("expected an untied output projection for --table both, found none: the head is tied "
                             "to the token table (or the file has no language-model head); use --table token")
        return ["output", "token"]
    return [choice.value]


def _token_name(tokenizer: object | None, index: int) -> str:
    """The token string, or #id where there is none; never raises."""
    if tokenizer is None or index >= getattr(tokenizer, "vocab_size", 0):
        return f"#{index}"
    try:
        return tokenizer.token_string(index)  # type: ignore[attr-defined]
    except (EmbscopeError, ValueError, IndexError, KeyError):
        return f"#{index}"


def _nearest(device: str, progress: Callable[[int, int], None]) -> Callable:
    """The batched top-k the cluster search uses."""
    def search(table: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        found = compute.topk_rows(table, k, device=device, progress=progress)
        return found.ids, found.scores
    return search


@contextmanager
def _progress(what: str) -> Iterator[Callable[[int, int], None]]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
    with Progress(TextColumn(what), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), console=console.err,
                  transient=True, disable=not console.err.is_terminal) as bar:
        task = bar.add_task(what, total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


def other_tables(source: Source, paths: list[Path], role: str, shape: tuple[int, ...]) -> list:
    """The same table from each other checkpoint, opened with the same options; shapes must agree."""
    found = []
    for path in paths:
        table = dataclasses.replace(source, checkpoint=path).open().table(role)
        if table.tensor.shape != shape:
            raise TableError(f"expected the {role} table of {quote(path)} to have the shape {tuple(shape)} of the "
                             f"checkpoint it is compared with, found {table.tensor.shape}")
        found.append(table.array)
    return found


def undertrained(
    source: Source,
    table: Annotated[TableChoice | None, typer.Option(
        "--table", help="token, output (an untied head) or both; default: output when the head is untied, else "
                        "token.", show_default=False)] = None,
    against: Annotated[list[Path] | None, typer.Option(
        "--against", metavar="PATH", help="Another checkpoint of the same run (repeatable): rows bitwise unchanged "
                                          "in all of them are under-trained for certain.", show_default=False)] = None,
    plot: Annotated[str | None, typer.Option(
        "--plot", metavar="[FILE]", help="Draw the indicator histogram, reference rows and threshold marked, to FILE "
                                         "(.png, .svg or .pdf); without FILE, <checkpoint>-undertrained.png here.",
        show_default=False)] = None,
    json: JsonFlag = False,
) -> None:
    """Under-trained token candidates: magikarp's indicator, a data-driven threshold, norms far from the rest,
    rows unchanged across checkpoints, each verified against the tokenizer."""
    plot_path(plot, None)
    emb = source.open()
    target = plot_path(plot, emb)
    tokenizer, why_none = emb.tokenizer_for_names()
    notes = [why_none] if why_none else []
    device = compute.resolve_device(source.device.value)
    reports: list[UndertrainedReport] = []
    kinds: TokenKinds | None = None
    for role in roles(emb, table):
        chosen = emb.table(role)
        if tokenizer is not None and (kinds is None or kinds.rows != chosen.rows):
            with _progress("tokenizer round trip") as progress:
                kinds = token_kinds(tokenizer, chosen.rows, progress)
        others = other_tables(source, against or [], role, chosen.tensor.shape)
        with _progress(f"nearest rows of the {role} table") as progress:
            reports.append(find_undertrained(chosen.array, kinds, table=role, name=chosen.name, others=others,
                                             topk=_nearest(device, progress)))
    notes += [note for report in reports for note in emb.table(report.table).notes]

    def name(index: int) -> str:
        return _token_name(tokenizer, index)

    if target is not None:
        from ..render.plots import save
        from ..render.undertrained_plot import undertrained_figure
        save(undertrained_figure(reports, emb.checkpoint.path.name), target)
    if json:
        jsonout.emit(document(emb.checkpoint.path, emb.checkpoint.step, reports, kinds, name, notes, target))
    else:
        render(emb.checkpoint.path, emb.checkpoint.step, reports, kinds, name, notes, target)


def register(app: typer.Typer) -> None:
    app.command(cls=BarePlotCommand)(with_source(undertrained))
