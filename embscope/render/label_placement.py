"""Point labels that never overlap (the probe words of `map`): a greedy placement. Each label, in the order given,
takes the first of a few places around its point where its box, as the renderer measures it, meets no label
placed before it and stays inside the figure; a label with no free place, or past the first MAX_LABELS, is left
out, and the figure says how many were. The figure's layout is fixed first, so the boxes measured are where the
labels are drawn."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .plot_style import drawable
from .plots import fix_layout

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.text import Annotation
    from matplotlib.transforms import Bbox

# offsets tried, in points from the point: above right first, then the other corners, then straight above/below
OFFSETS = ((6, 6), (6, -6), (-6, 6), (-6, -6), (0, 10), (0, -10), (12, 0), (-12, 0))
GAP = 1.0  # pixels kept between two labels' boxes
MAX_LABELS = 10  # labels drawn at most: more are read in the answer's table, not in a crowd of text


def fixed_layout(figure: Figure) -> None:
    """Lay the figure out now and keep it so: boxes measured after this are where the labels are drawn."""
    fix_layout(figure)


def place_labels(figure: Figure, ax: Axes, labels: Sequence[tuple[str, float, float]], limit: int = MAX_LABELS,
                 **style: Any) -> list[Annotation]:
    """Each (text, x, y), of the first `limit`, labelled at the first free place around (x, y), or left out;
    returns the labels drawn."""
    fixed_layout(figure)
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]  # the Agg canvas plots.new_figure sets
    inside = figure.bbox
    taken: list[Bbox] = []
    placed: list[Annotation] = []
    for text, x, y in labels[:limit]:
        for dx, dy in OFFSETS:
            note = ax.annotate(drawable(text), xy=(x, y), xytext=(dx, dy), textcoords="offset points", fontsize=8,
                               ha="left" if dx > 0 else "right" if dx < 0 else "center",
                               va="bottom" if dy > 0 else "top" if dy < 0 else "center", parse_math=False, **style)
            box = note.get_window_extent(renderer).padded(GAP)
            fits = inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1
            if fits and not any(box.overlaps(other) for other in taken):
                taken.append(box)
                placed.append(note)
                break
            note.remove()
    left_out = len(labels) - len(placed)
    if left_out:
        ax.text(0.99, 0.01, f"{left_out} label{'s' * (left_out != 1)} left out (at most {limit} drawn, none over "
                "another)", transform=ax.transAxes, ha="right", va="bottom", fontsize=8)
    return placed
