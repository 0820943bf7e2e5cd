"""`embscope undertrained`: tokens the model never learned, from the weights (Land & Bartolo 2024's
indicator), checked against the tokenizer, and across checkpoints of the same run when given."""

import dataclasses
from enum import Enum
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from ..analysis.undertrained import default_roles, undertrained_tables
from ..core.errors import TableError
from ..core.text import quote
from ..embeddings import Embeddings
from ..render import undertrained as render
from ..render.files import input_files
from ..render.progress import stages
from .command import SourceCommand
from .device_options import AUTO_DEVICE, DeviceOption
from .options import JsonFlag, checkpoint_path, source_of
from .plot_option import PlotOption, check_plot, plot_path


class TableChoice(str, Enum):
    token = "token"
    output = "output"
    both = "both"


def roles(emb: Embeddings, choice: TableChoice | None) -> list[str] | None:
    """The tables --table names; None: the library's default (the output table when the head is untied)."""
    if choice is None:
        return None
    if choice is TableChoice.both:
        if emb.output is None:
            raise TableError("expected an untied output projection for --table both, found none: the head is tied "
                             "to the token table (or the file has no language-model head); use --table token")
        return ["output", "token"]
    return [choice.value]


def other_tables(others: list[Embeddings], role: str, shape: tuple[int, ...]) -> list[np.ndarray]:
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
    ctx: typer.Context,
    table: Annotated[TableChoice | None, typer.Option(
        "--table", help="token, output (an untied head) or both; default: output when the head is untied, else "
                        "token.", show_default=False)] = None,
    against: Annotated[list[Path] | None, typer.Option(
        "--against", parser=checkpoint_path, metavar="PATH",
        help="Another checkpoint of the same run (repeatable): rows bitwise unchanged "
             "in all of them are under-trained for certain.", show_default=False)] = None,
    plot: PlotOption = None,
    device: DeviceOption = AUTO_DEVICE,
    json: JsonFlag = False,
) -> None:
    """Under-trained token candidates: magikarp's indicator, a data-driven threshold, norms far from the rest,
    rows unchanged across checkpoints, each verified against the tokenizer."""
    source = source_of(ctx)
    check_plot(plot)
    emb = source.open()
    others = [dataclasses.replace(source, checkpoint=path).open() for path in against or []]  # same options
    chosen_roles = roles(emb, table)
    target = plot_path(plot, emb.checkpoint.path, table.value if table is not None else default_roles(emb)[0],
                       "undertrained")
    with stages() as stage:
        found = undertrained_tables(emb, chosen_roles, device=device.value, stages=stage,
                                    others=lambda role, shape: other_tables(others, role, shape))
    if target is not None:
        inputs = [path for opened in (emb, *others) for path in input_files(opened)]  # --against's files too
        render.draw(emb, found, target, inputs)
    render.show(emb, found, target, json)


def register(app: typer.Typer) -> None:
    app.command(cls=SourceCommand)(undertrained)
