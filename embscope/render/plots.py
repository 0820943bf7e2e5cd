"""Plot files, drawn with matplotlib's Agg canvas. matplotlib is imported inside the functions only, so the
CLI starts without it; figures are built without pyplot, so no global backend or state is touched.
Each `*_figure` function returns the Figure (tests read its titles, labels and annotations); `save` writes it."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import EmbscopeError
from ..text import printable, quote, shortened
from .files import written_whole

FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
HEATMAP_MAX_SIDE = 1024  # larger cosine matrices are averaged down to this many cells a side for drawing
LABELLED_ROWS = 10  # lowest and highest token rows drawn by name


def plot_format(path: Path) -> str:
    """The file format named by the extension; checked before any work is done."""
    found = FORMATS.get(Path(path).suffix.lower())
    if found is None:
        raise EmbscopeError(f"expected a plot file ending in .png, .svg or .pdf, found {quote(shortened(str(path)))}")
    return found


def default_plot_path(checkpoint: Path, table: str, plot: str) -> Path:
    """Where `--plot` with no file writes, for every plot: `<checkpoint-stem>-<table>-<plot>.png` in the working
    directory (never beside the checkpoint)."""
    checkpoint = Path(checkpoint)
    stem = checkpoint.name if checkpoint.is_dir() else checkpoint.stem
    return Path(f"{stem}-{table}-{plot}.png")


def new_figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def label(ax: Any, text: str, xy: tuple[float, float], offset: tuple[float, float] = (6, 6),
          **kwargs: Any) -> Any:
    """An annotation whose text (possibly a token string from the file) is drawn literally, never as math."""
    return ax.annotate(printable(text), xy=xy, xytext=offset, textcoords="offset points", fontsize=8,
                       parse_math=False, **kwargs)


def pooled(matrix: np.ndarray, max_side: int = HEATMAP_MAX_SIDE) -> np.ndarray:
    """The matrix averaged over square cells so that it is at most max_side a side (NaN cells ignored),
    one strip of rows at a time, so a large matrix is not copied whole."""
    n = matrix.shape[0]
    factor = math.ceil(n / max_side) if n > max_side else 1
    if factor == 1:
        return matrix
    cells = math.ceil(n / factor)
    out = np.empty((cells, cells), dtype=np.float32)
    pad = cells * factor - n
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN cell stays NaN
        for cell in range(cells):
            strip = matrix[cell * factor:(cell + 1) * factor].astype(np.float32)
            strip = np.pad(strip, ((0, factor - len(strip)), (0, pad)), constant_values=np.nan)
            out[cell] = np.nanmean(strip.reshape(factor, cells, factor), axis=(0, 2))
    return out


def positions_figure(matrix: np.ndarray, mean: np.ndarray, std: np.ndarray, nearest_is_adjacent: float,
                     checkpoint: str, table: str):
    """The T x T cosine heatmap beside the mean (and spread) of cos(p_i, p_i+k) by distance k."""
    positions = matrix.shape[0]
    figure = new_figure(13, 5.5)
    figure.suptitle(f"{printable(checkpoint)} - position table {printable(table)}", parse_math=False)
    heat_ax, curve_ax = figure.subplots(1, 2, width_ratios=[1, 1.2])
    image = heat_ax.imshow(pooled(matrix), cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest",
                           extent=(-0.5, positions - 0.5, positions - 0.5, -0.5))
    figure.colorbar(image, ax=heat_ax, label="cosine")
    heat_ax.set_title(f"cosine between positions ({positions} x {positions})")
    heat_ax.set_xlabel("position j")
    heat_ax.set_ylabel("position i")
    offsets = np.arange(1, len(mean) + 1)
    curve_ax.plot(offsets, mean, color="tab:blue", label="mean")
    curve_ax.fill_between(offsets, mean - std, mean + std, color="tab:blue", alpha=0.2, label="mean +- std")
    curve_ax.axhline(0, color="grey", linewidth=0.8)
    curve_ax.set_xscale("log")
    curve_ax.set_title("similarity by distance")
    curve_ax.set_xlabel("distance k (positions, log scale)")
    curve_ax.set_ylabel("cos(p_i, p_i+k)")
    curve_ax.legend(loc="upper right")
    for k in sorted({1, len(mean)}):
        if len(mean) and np.isfinite(mean[k - 1]):
            curve_ax.plot([k], [mean[k - 1]], "o", color="tab:red")
            at_end = k == len(mean) and k > 1  # the last point sits on the right edge: label to its left
            label(curve_ax, f"k={k}: {mean[k - 1]:+.3f}", (k, mean[k - 1]), offset=(-6, 6) if at_end else (6, 6),
                  ha="right" if at_end else "left")
    if math.isfinite(nearest_is_adjacent):
        curve_ax.text(0.02, 0.03, f"nearest neighbour is adjacent (i+-1) for {nearest_is_adjacent:.1%} of positions",
                      transform=curve_ax.transAxes, fontsize=9)
    return figure


def flagged_text(name: str, norm: float, ratio: float) -> str:
    return f"{name}: {norm:.3g}, {ratio:.1f}x mean"


def unplottable_note(ax: Any, flagged: list[tuple[int, float, float]],
                     name: Callable[[int], str]) -> list[tuple[int, float, float]]:
    """Flagged rows with a NaN or Inf norm have no place on a norm axis: they are listed in a corner."""
    lost = [f"{name(row)} ({'NaN' if math.isnan(norm) else 'Inf'})" for row, norm, _ in flagged if not math.isfinite(norm)]
    if lost:
        ax.text(0.01, 0.99, "not drawn: " + ", ".join(lost), transform=ax.transAxes, va="top", fontsize=8,
                color="tab:red", parse_math=False)
    return [entry for entry in flagged if math.isfinite(entry[1])]


def position_norms_figure(norms: np.ndarray, mean: float, median: float, flagged: list[tuple[int, float, float]],
                          checkpoint: str, table: str, first_row: int = 0):
    """Norm by position, with the flagged rows marked and labelled. `flagged`: (row, norm, ratio to mean)."""
    figure = new_figure(11, 5)
    ax = figure.subplots()
    ax.plot(np.arange(len(norms)) - first_row, np.where(np.isfinite(norms), norms, np.nan), color="tab:blue",
            linewidth=1)
    ax.axhline(mean, color="grey", linestyle="--", linewidth=0.8, label=f"mean {mean:.3g}")
    ax.axhline(median, color="grey", linestyle=":", linewidth=0.8, label=f"median {median:.3g}")

    def name(row: int) -> str:
        return f"position {row - first_row}" if row >= first_row else f"reserved row {row}"

    for row, norm, ratio in unplottable_note(ax, flagged, name):
        ax.plot([row - first_row], [norm], "o", color="tab:red", markersize=6)
        label(ax, flagged_text(name(row), norm, ratio), (row - first_row, norm), color="tab:red")
    ax.set_title(f"{printable(checkpoint)} - {printable(table)}: L2 norm by position", parse_math=False)
    ax.set_xlabel("position" if not first_row else f"position (row - {first_row})")
    ax.set_ylabel("L2 norm")
    ax.legend(loc="upper right")
    return figure


def ranked_rows(norms: np.ndarray, count: int = LABELLED_ROWS) -> list[int]:
    """The rows with the lowest and the highest finite norms, lowest first: the rows drawn by name."""
    order = np.argsort(np.where(np.isfinite(norms), norms, np.inf), kind="stable")[:int(np.isfinite(norms).sum())]
    lowest = [int(row) for row in order[:count]]
    return lowest + [int(row) for row in order[-count:] if row not in lowest]


def token_norms_figure(norms: np.ndarray, mean: float, flagged: list[tuple[int, float, float]],
                       names: dict[int, str], checkpoint: str, table: str):
    """A histogram of the norms with the flagged rows marked, beside the lowest and highest rows by name.
    `names`: row -> token string for the rows drawn by name."""
    figure = new_figure(13, 5.5)
    figure.suptitle(f"{printable(checkpoint)} - {printable(table)}: L2 norms of token rows", parse_math=False)
    hist_ax, rank_ax = figure.subplots(1, 2)
    finite = norms[np.isfinite(norms)]
    hist_ax.hist(finite, bins=min(100, max(10, len(finite) // 20)), color="tab:blue")
    hist_ax.axvline(mean, color="grey", linestyle="--", linewidth=0.8, label=f"mean {mean:.3g}")
    hist_ax.set_yscale("log")
    hist_ax.set_title("distribution of row norms")
    hist_ax.set_xlabel("L2 norm")
    hist_ax.set_ylabel("rows (log scale)")
    hist_ax.legend(loc="upper right")

    def name(row: int) -> str:
        return f"{names.get(row, f'#{row}')} (row {row})"

    middle = (np.nanmin(finite) + np.nanmax(finite)) / 2 if len(finite) else 0.0
    for row, norm, ratio in unplottable_note(hist_ax, flagged, name):
        right = norm > middle  # a label near the right edge goes to the line's left
        hist_ax.axvline(norm, color="tab:red", linewidth=0.8)
        label(hist_ax, flagged_text(name(row), norm, ratio), (norm, 0.9), color="tab:red", rotation=90,
              xycoords=("data", "axes fraction"), offset=(-3 if right else 3, 0), va="top",
              ha="right" if right else "left")
    shown = ranked_rows(norms)
    flagged_rows = {row for row, _, _ in flagged}
    y = np.arange(len(shown))
    colours = ["tab:red" if row in flagged_rows else "tab:blue" for row in shown]
    rank_ax.barh(y, [norms[row] for row in shown], color=colours)
    rank_ax.set_yticks(y, [printable(name(row)) for row in shown])
    for tick in rank_ax.get_yticklabels():
        tick.set_parse_math(False)
    rank_ax.invert_yaxis()
    rank_ax.set_title(f"lowest and highest {LABELLED_ROWS} rows")
    rank_ax.set_xlabel("L2 norm")
    rank_ax.set_ylabel("token (row)")
    return figure


def save(figure: Any, path: Path, inputs: Iterable[Path] = ()) -> Path:
    """Write the figure whole (see render.files), never over one of `inputs`, the files the answer was read from."""
    path = Path(path)
    fmt = plot_format(path)
    with written_whole(path, "the plot file", inputs=inputs) as f:
        figure.savefig(f, format=fmt)
    return path
