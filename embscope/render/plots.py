"""Plot files, drawn with matplotlib's Agg canvas. matplotlib is imported inside the functions only, so the
CLI starts without it; figures are built without pyplot, so no global backend or state is touched.
Each `*_figure` function returns the Figure (tests read its titles, labels and annotations); `save` builds one
in embscope's own style (plot_style) and writes it. Strings from the file go through `drawable`."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .files import written_whole
from .margins import engine as margin_engine
from .minor_marks import marks as minor_marks
from .names import RECORD_KEY, Output
from .plot_files import plot_format
from .plot_style import drawable, log_scale, matplotlib_quietly, style, wrapped
from .tick_labels import labelled_once
from .ticks_in_view import in_view

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.text import Annotation

    from ..analysis.positions import Heatmap

DENSE_POINTS = 5000  # in an SVG or PDF, a line or scatter with more points than this is one image, not a path each
# a heatmap of at most this many cells a side goes into an SVG or PDF as its cells, a pixel each, which the viewer
# scales without smoothing (matplotlib's interpolation "none"); a larger one is rasterized at the file's image dpi,
# in fewer pixels than it has cells (the report's: about 660 a side)
CELL_IMAGE_MOST = 512


def new_figure(width: float, height: float) -> Figure:
    matplotlib_quietly()  # first: a bad $MPLBACKEND is set aside while matplotlib is imported
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    figure = Figure(figsize=(width, height), layout=margin_engine()())  # margins from the texts' extents (render.margins)
    FigureCanvasAgg(figure)
    return figure


def label(ax: Axes, text: str, xy: tuple[float, float], offset: tuple[float, float] = (6, 6),
          **kwargs: Any) -> Annotation:
    """An annotation whose text (possibly a token string from the file) is drawn literally, never as math."""
    return ax.annotate(drawable(text), xy=xy, xytext=offset, textcoords="offset points", fontsize=8,
                       parse_math=False, **kwargs)


def colour_bar(figure: Figure, mappable: Any, ax: Axes, label: str) -> None:
    """A colour bar right of `ax`: its own axes in `ax`'s cell of the grid, so the margins (render.margins) count its
    labels with that cell, drawn just beside `ax`'s drawn box and as tall (an image keeps its aspect, so that box
    may be smaller than the cell)."""
    from matplotlib.transforms import Bbox
    bar = figure.colorbar(mappable, ax=ax, label=label, fraction=0.05, pad=0.02)  # matplotlib's own: aspect 20

    def beside(bar_ax: Any, renderer: Any) -> Bbox:  # at each draw; wide enough for the bar's aspect, which narrows it
        return Bbox.from_bounds(1.03, 0, 0.2, 1).transformed(ax.transAxes - figure.transSubfigure)

    bar.ax.set_anchor("W")
    bar.ax.set_axes_locator(beside)


def positions_figure(heatmap: Heatmap, mean: np.ndarray, std: np.ndarray, nearest_is_adjacent: float,
                     checkpoint: str, table: str) -> Figure:
    """The T x T cosine heatmap (averaged down to at most 1024 cells a side as the profile was computed)
    beside the mean (and spread) of cos(p_i, p_i+k) by distance k."""
    positions = heatmap.positions
    figure = new_figure(13, 5.5)
    figure.suptitle(wrapped(f"{drawable(checkpoint)} - position table {drawable(table)}", 13), parse_math=False)
    heat_ax, curve_ax = figure.subplots(1, 2, width_ratios=[1, 1.2])
    image = heat_ax.imshow(heatmap.cells, cmap="RdBu_r", vmin=-1, vmax=1, interpolation="none",
                           rasterized=max(heatmap.cells.shape) > CELL_IMAGE_MOST,
                           extent=(-0.5, positions - 0.5, positions - 0.5, -0.5))
    colour_bar(figure, image, heat_ax, "cosine")
    heat_ax.set_title(f"cosine between positions ({positions} x {positions})")
    heat_ax.set_xlabel("position j")
    heat_ax.set_ylabel("position i")
    offsets = np.arange(1, len(mean) + 1)
    curve_ax.plot(offsets, mean, color="tab:blue", label="mean")
    curve_ax.fill_between(offsets, mean - std, mean + std, color="tab:blue", alpha=0.2, label="mean +- std")
    curve_ax.axhline(0, color="grey", linewidth=0.8)
    if not np.isfinite(mean).any():  # one position, or every row zero or NaN: no point gives a log axis its limits
        curve_ax.set_xlim(1, max(2, len(mean)))
    log_scale(curve_ax, "x")
    curve_ax.set_title("similarity by distance")
    curve_ax.set_xlabel("distance k (positions, log scale)")
    curve_ax.set_ylabel("cos(p_i, p_i+k)")
    curve_ax.legend(loc="upper right")
    for k in sorted({1, len(mean)}):
        if len(mean) and np.isfinite(mean[k - 1]):
            at_end = k == len(mean) and k > 1  # the last point sits on the right edge: label to its left
            # the longest distance has one pair, (0, T-1): a single cosine, not a mean, drawn hollow
            curve_ax.plot([k], [mean[k - 1]], "o", color="tab:red", markerfacecolor="white" if at_end else "tab:red")
            text = f"k={k}: {mean[k - 1]:+.3f}" + (" (one pair)" if at_end else "")
            label(curve_ax, text, (k, mean[k - 1]), offset=(-6, 6) if at_end else (6, 6),
                  ha="right" if at_end else "left")
    if math.isfinite(nearest_is_adjacent):
        curve_ax.text(0.02, 0.03, f"nearest neighbour is adjacent (i+-1) for {nearest_is_adjacent:.1%} of positions",
                      transform=curve_ax.transAxes, fontsize=9)
    return figure


def fix_layout(figure: Figure) -> None:
    """Make the figure's margins now (render.margins), once, and keep them: with a layout engine set, savefig draws
    the whole figure twice and lays it out at each draw. Its axes make only the ticks in view from here on
    (ticks_in_view), work out their tick labels once per view (tick_labels), and draw minor ticks without labels as
    one mark each (minor_marks)."""
    in_view(figure)
    labelled_once(figure)
    minor_marks(figure)
    engine = figure.get_layout_engine()
    if engine is not None:
        for ax in figure.axes:  # a spine's box is its axis's ticks, measured again: within the axis's own box
            for spine in ax.spines.values():
                spine.set_in_layout(False)
        engine.execute(figure)
    figure.set_layout_engine(None)  # None, not "none": a placeholder engine still makes savefig draw twice


def rasterize_dense(figure: Figure) -> None:
    """Lines and scatters of many points become one image inside a vector file, instead of a path per point."""
    for ax in figure.axes:  # every Axes, those of subfigures too
        for artist in ax.collections:
            if len(np.asarray(artist.get_offsets())) > DENSE_POINTS:
                artist.set_rasterized(True)
        for line in ax.lines:
            if len(np.asarray(line.get_xdata())) > DENSE_POINTS:
                line.set_rasterized(True)


def save(make: Callable[[], Figure], target: Output, dpi: float | None = None, inputs: Iterable[Path] = ()) -> Path:
    """Build the figure (`make`) in embscope's style and write it whole (see render.files), never over one of
    `inputs`, the files the answer was read from; a PNG records the checkpoints it is about (names.record).
    dpi None keeps matplotlib's default."""
    path = Path(target.path)
    fmt = plot_format(path)
    metadata = {RECORD_KEY: target.record} if fmt == "png" and target.record else None
    with style(), written_whole(path, "the plot file", inputs=inputs) as f:  # refused before anything is drawn
        figure = make()
        fix_layout(figure)
        if fmt != "png":
            rasterize_dense(figure)
        figure.savefig(f, format=fmt, dpi="figure" if dpi is None else dpi, metadata=metadata)
    return path
