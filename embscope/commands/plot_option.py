"""--plot, the option of every command that draws: its declaration, the checks made before any work, and the file
the plot goes to. Apart from commands.options, so that a command that never draws starts without the output
files' modules."""

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer

from ..render.files import check_directory
from ..render.names import Output, default_output, named_output
from ..render.plot_files import default_plot_path, plot_format, require_matplotlib
from .base import PLOT_AUTO
from .options import as_usage_error

PlotOption = Annotated[str | None, typer.Option(
    "--plot", metavar="[FILE]", show_default=False,
    help="Draw a plot to FILE (.png, .svg or .pdf); alone, to <checkpoint>-<table>-<plot>.png in the working directory.")]


def check_plot(plot: str | None) -> None:
    """A --plot FILE names a format and an existing folder, and matplotlib is there: checked before any work."""
    if plot is None:
        return
    require_matplotlib("--plot")  # before any work
    if plot == PLOT_AUTO:
        return
    as_usage_error(lambda: plot_format(Path(plot)), "--plot")
    check_directory(Path(plot), "the plot file")


def plot_path(plot: str | None, checkpoint: Path, table: str | None, kind: str,
              covers: Sequence[Path] | None = None) -> Output | None:
    """The file a plot goes to: the one named, or for `--plot` alone the one rule every plot follows (a name
    that another checkpoint's plot holds is left alone: render.names). `checkpoint` names the plot; `covers`:
    the checkpoints it is about (default: that one)."""
    if plot is None:
        return None
    paths = list(covers) if covers is not None else [checkpoint]
    if plot == PLOT_AUTO:
        return default_output(default_plot_path(checkpoint, table, kind), paths)
    return named_output(Path(plot), paths)
