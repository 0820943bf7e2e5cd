"""`embscope undertrained`: tokens the model never learned, from the weights (Land & Bartolo 2024's
indicator), checked against the tokenizer, and across checkpoints of the same run when given."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import numpy as np
import typer

from .. import compute
from ..errors import TableError
from ..naming import token_name
from ..text import quote
from .options import AUTO_DEVICE, DeviceOption, JsonFlag, PlotOption, Source, check_plot, plot_path, with_source

if TYPE_CHECKING:  # the library and rich are imported when the command answers, not for --help
    from ..analysis.token_kinds import TokenKinds
    from ..analysis.undertrained import UndertrainedReport
    from ..embeddings import Embeddings


class TableChoice(str, Enum):
    token = "token"
    output = "output"
    both = "both"


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


def _nearest(device: str, progress: Callable[[int, int], None]) -> Callable:
    """The batched top-k the cluster search uses."""
    def search(table: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        found = compute.topk_rows(table, k, device=device, progress=progress)
        return found.ids, found.scores
    return search


def other_tables(others: list[Embeddings], role: str, shape: tuple[int, ...]) -> list:
    """The same table from each other checkpoint; shapes must agree."""
    found = []
    for other in others:
        table = other.table(role)
        if table.tensor.shape != shape:
            raise TableError(f"expected the {role} table of {quote(other.checkpoint.path)} to have the shape "
                             f"{tuple(shape)} of the checkpoint it is compared with, found {table.tensor.shape}")
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
    plot: PlotOption = None,
    device: DeviceOption = AUTO_DEVICE,
    json: JsonFlag = False,
) -> None:
    """Under-trained token candidates: magikarp's indicator, a data-driven threshold, norms far from the rest,
    rows unchanged across checkpoints, each verified against the tokenizer."""
    check_plot(plot)
    from ..analysis.token_kinds import token_kinds
    from ..analysis.undertrained import find_undertrained
    from ..render import header
    from ..render.progress import bar
    from ..render.undertrained import document, render
    emb = source.open()
    others = [dataclasses.replace(source, checkpoint=path).open() for path in against or []]  # same options
    chosen_roles = roles(emb, table)
    target = plot_path(plot, emb.checkpoint.path, table.value if table is not None else chosen_roles[0],
                       "undertrained")
    tokenizer, why_none = emb.tokenizer_for_names()
    notes = [why_none] if why_none else []
    resolved = compute.resolve_device(device.value)
    reports: list[UndertrainedReport] = []
    kinds: TokenKinds | None = None
    for role in chosen_roles:
        chosen = emb.table(role)
        if tokenizer is not None and (kinds is None or kinds.rows != chosen.rows):
            with bar("tokenizer round trip") as progress:
                kinds = token_kinds(tokenizer, chosen.rows, progress)
        with bar(f"nearest rows of the {role} table") as progress:
            reports.append(find_undertrained(chosen.array, kinds, table=role, name=chosen.name,
                                             others=other_tables(others, role, chosen.tensor.shape),
                                             topk=_nearest(resolved, progress)))
    notes += [note for report in reports for note in emb.table(report.table).notes]

    def name(index: int) -> str:
        return token_name(tokenizer, index)

    if target is not None:
        from ..render.files import input_files
        from ..render.plots import save
        from ..render.undertrained_plot import undertrained_figure
        inputs = [path for opened in (emb, *others) for path in input_files(opened)]  # --against's files too
        save(undertrained_figure(reports, emb.checkpoint.path.name), target, inputs=inputs)
    if json:
        header.emit(document(reports, kinds, name, notes, target), emb)
    else:
        render(emb, reports, kinds, name, notes, target)


def register(app: typer.Typer) -> None:
    app.command()(with_source(undertrained))
