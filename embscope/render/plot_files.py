"""What a plot file is called and whether one can be drawn, checked before any work: the formats, `--plot`'s
default name, and matplotlib's presence. Without matplotlib or plots' style, so a command that may draw starts
without them (plots draws)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ..core.errors import MissingPackageError, OutputError
from ..core.text import quote, shortened
from .names import checkpoint_label

FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}


def plot_format(path: Path) -> str:
    """The file format named by the extension; checked before any work is done."""
    found = FORMATS.get(Path(path).suffix.lower())
    if found is None:
        raise OutputError(f"expected a plot file ending in .png, .svg or .pdf, found {quote(shortened(str(path)))}",
                          path=path, option="plot")
    return found


def require_matplotlib(what: str) -> None:
    """Figures need matplotlib (the [plot] extra): one line saying so before any work, not an ImportError after it."""
    if importlib.util.find_spec("matplotlib") is None:
        raise MissingPackageError(what, "matplotlib", "plot")


def default_plot_path(checkpoint: Path, table: str | None, plot: str) -> Path:
    """Where `--plot` with no file writes, for every plot: `<checkpoint>-<table>-<plot>.png` in the working
    directory (never beside the checkpoint), the checkpoint named as names.checkpoint_label names it; without
    the table part for a plot of every table. names.default_output decides whether that name may be taken."""
    label = checkpoint_label(Path(checkpoint))
    return Path(f"{label}-{table}-{plot}.png" if table else f"{label}-{plot}.png")
