"""A figure's margins made from the measured extents of its texts, once, in place of matplotlib's constrained layout.

embscope's figures put their axes in one grid (`subplots`), of the figure or of each subfigure of a column of them
(undertrained: a row of two panels a table, each row with its own title). What may stand outside an axes is its
tick labels, axis labels and title, a legend below it, annotations near its edges, and, in its cell of the grid, a
twin's labels (geometry's spectrum) and a colour bar with its labels (`plots.colour_bar`). `fit` measures each axes
once, with the renderer that draws it (`Axes.get_tightbbox`: all of the above), against its cell, and makes every
margin and gap of the grid as wide as the farthest text past that side plus PAD (GAP between cells); a figure's or
subfigure's title sits PAD below its top edge, above the grid. The constrained layout measured every axes twice
(two solver passes) before the draw; here the draw reuses the one measurement (matplotlib caches a text's extent
per renderer). The ticks measured are those the axes make at matplotlib's default margins; the drawn result is
what tests/test_figure_margins.py checks, on matplotlib's own extents.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from matplotlib.layout_engine import LayoutEngine

# matplotlib's figures, subfigures and axes are typed Any here: what this module reads of them (a subfigure's grid
# cell, a figure's renderer, an axes' position setter) is matplotlib's own layout API, which its stubs leave out

PAD = 5.0  # points between a text and the figure's edge, and between a title and what is below it
GAP = 16.0  # points between the texts of neighbouring cells (the tick labels of one, the axis label of the next)
MIN_SHARE = 0.1  # of a figure's width or height its axes keep together, however long a label (one that long spills)


@functools.cache
def engine() -> type[LayoutEngine]:
    """The layout engine that runs `fit` (a class made once matplotlib is imported: embscope starts without it).
    plots.fix_layout runs it once and takes it off the figure, so a later draw keeps the margins."""
    from matplotlib.layout_engine import LayoutEngine

    class Margins(LayoutEngine):
        _adjust_compatible = True  # subplots_adjust may move the grid after
        _colorbar_gridspec = True  # a colour bar made with ax= takes part of its axes' cell, so it is measured there

        def execute(self, fig: Any) -> None:
            fit(fig, fig._get_renderer())

    return Margins


def fit(figure: Any, renderer: Any) -> None:
    """Lay out `figure` (the grid of its own axes, or its subfigures and each one's grid) for `renderer`."""
    subfigures = list(figure.subfigs)
    if subfigures:
        stack(figure, subfigures, title_room(figure, renderer))
    for container in [figure, *subfigures]:
        fit_grid(container, renderer)


def pixels(container: Any, points: float) -> float:
    return float(points * container.dpi / 72)


def title_room(container: Any, renderer: Any) -> float:
    """Pixels the container's title takes at its top (with PAD above and below it), and the title put there."""
    title = container._suptitle  # None until `suptitle` is called
    if title is None or not title.get_visible() or not title.get_text():
        return 0.0
    pad = pixels(container, PAD)
    title.set_y(1 - pad / container.bbox.height)
    title.set_verticalalignment("top")
    return float(title.get_window_extent(renderer).height) + 2 * pad


def stack(figure: Any, subfigures: list[Any], top: float) -> None:
    """The subfigures' grid placed below the figure's title (`top` pixels), with no gaps: each has its own margins."""
    from matplotlib.transforms import Bbox
    grid = subfigures[0]._subplotspec.get_gridspec()  # a subfigure's cell has no public getter
    grid.update(top=1 - min(top / figure.bbox.height, 1 - MIN_SHARE), wspace=0, hspace=0)
    bottoms, tops, lefts, rights = grid.get_grid_positions(figure)
    for sub in subfigures:
        rows, columns = sub._subplotspec.rowspan, sub._subplotspec.colspan
        sub._redo_transform_rel_fig(bbox=Bbox.from_extents(lefts[columns.start], bottoms[rows.stop - 1],
                                                           rights[columns.stop - 1], tops[rows.start]))


def gridded(container: Any) -> list[Any]:
    """The axes of the container's grid: those of the grid of its first axes, twins and colour bars included."""
    axes = [ax for ax in container.axes if ax.get_figure(root=False) is container and ax.get_subplotspec() is not None]
    grid = axes[0].get_subplotspec().get_topmost_subplotspec().get_gridspec() if axes else None
    return [ax for ax in axes if ax.get_subplotspec().get_topmost_subplotspec().get_gridspec() is grid]


def fit_grid(container: Any, renderer: Any) -> None:
    """The margins and gaps of the container's grid, each as wide as the farthest text past that side plus PAD (or
    GAP between cells)."""
    axes = gridded(container)
    if not axes:
        return
    grid = axes[0].get_subplotspec().get_topmost_subplotspec().get_gridspec()
    rows, columns = grid.get_geometry()
    # how far the texts reach past the cells on each side, in pixels: per column (left, right), per row (top, bottom)
    left, right, top, bottom = np.zeros(columns), np.zeros(columns), np.zeros(rows), np.zeros(rows)
    for ax in axes:
        spec = ax.get_subplotspec().get_topmost_subplotspec()
        cell = spec.get_position(container).transformed(container.transSubfigure)
        drawn = ax.get_tightbbox(renderer)  # the axes and every text around it, as the renderer measures them
        if drawn is None:
            continue
        first_column, last_column = spec.colspan.start, spec.colspan.stop - 1
        first_row, last_row = spec.rowspan.start, spec.rowspan.stop - 1
        left[first_column] = max(left[first_column], cell.x0 - drawn.x0)
        right[last_column] = max(right[last_column], drawn.x1 - cell.x1)
        top[first_row] = max(top[first_row], drawn.y1 - cell.y1)
        bottom[last_row] = max(bottom[last_row], cell.y0 - drawn.y0)
    pad, gap = pixels(container, PAD), pixels(container, GAP)
    across = spacing(left[0] + pad, right[-1] + pad, left[1:] + right[:-1] + gap, container.bbox.width)
    down = spacing(top[0] + pad + title_room(container, renderer), bottom[-1] + pad, top[1:] + bottom[:-1] + gap,
                   container.bbox.height)
    (left_share, right_share, wspace), (top_share, bottom_share, hspace) = across, down
    grid.update(left=left_share, right=1 - right_share, top=1 - top_share, bottom=bottom_share, wspace=wspace,
                hspace=hspace)
    for ax in axes:  # GridSpec.update moves only the axes of pyplot's figures
        ax._set_position(ax.get_subplotspec().get_position(container))  # a twin moves with it


def spacing(start: float, end: float, gaps: np.ndarray, length: float) -> tuple[float, float, float]:
    """(start, end, as shares of `length`; the gap between cells, as a share of a cell), the gap the widest of
    `gaps`; all shrunk together where the cells would keep less than MIN_SHARE of `length`."""
    cells = len(gaps) + 1
    gap = float(gaps.max()) if len(gaps) else 0.0
    taken = start + end + gap * (cells - 1)
    if taken > length * (1 - MIN_SHARE):
        shrink = length * (1 - MIN_SHARE) / taken
        start, end, gap = start * shrink, end * shrink, gap * shrink
    cell = (length - start - end - gap * (cells - 1)) / cells
    return start / length, end / length, gap / cell
