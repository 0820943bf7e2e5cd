"""Ticks made only where they are drawn.

matplotlib's locators place ticks past both ends of the view (a linear axis's one step each side, a log axis's
minor ticks up to a decade each side); the axis makes each a Tick (three lines and two texts), labels and moves
it at every update, and draws only those in view. In the report's figures that is about a quarter of the ticks,
and making and updating ticks is the largest part of drawing them. `in_view` wraps the figure's automatic
locators so that only the ticks in view are made: the figure drawn is the same. An axis asks its locators again at
each measurement and draw (the margins, the axis label's placement, the spines): the wrapper keeps the locations
while all the locator reads of the axis is unchanged (`placing`; a locator's own settings are not changed once the
figure is laid out).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from matplotlib.ticker import Locator

EDGE = 1e-6  # of the view's width on the axis's scale: a tick this close outside an end is kept, as matplotlib keeps it


def in_view(figure: Figure) -> None:
    """Every axis of the figure (subfigures' too) makes only the ticks it draws."""
    from matplotlib.ticker import LogLocator, MaxNLocator
    wrapper = in_view_locator()
    for ax in figure.axes:
        for axis in (ax.xaxis, ax.yaxis):
            # only the automatic locators: a fixed one's labels are matched to its ticks by their order
            if isinstance(axis.get_major_locator(), (MaxNLocator, LogLocator)):
                axis.set_major_locator(wrapper(axis.get_major_locator()))
            if isinstance(axis.get_minor_locator(), (MaxNLocator, LogLocator)):
                axis.set_minor_locator(wrapper(axis.get_minor_locator()))


def within(axis: Any, locs: np.ndarray) -> np.ndarray:
    """The locations inside the view of `axis` (a matplotlib Axis), a hair beyond each end included; all of them
    where fewer than two are inside, since a formatter picks its decimals from the locations it is given and, for
    one, from the view's ends."""
    low, high = sorted(axis.get_view_interval())
    scale = axis.get_transform()
    (low_t, high_t), locs_t = scale.transform([low, high]), scale.transform(locs)
    edge = (high_t - low_t) * EDGE
    inside = (locs_t >= low_t - edge) & (locs_t <= high_t + edge)
    return locs[inside] if inside.sum() >= 2 else locs


def placing(axis: Any) -> tuple[Any, ...]:
    """All that matplotlib's automatic locators (MaxNLocator, LogLocator) and `within` read of `axis`, their own
    settings aside: its view, its scale, its smallest positive value (where a log axis's view starts at or below
    zero), and the axes' size in pixels, which with the tick labels' size (set before the layout) says how many
    ticks fit along it (Axis.get_tick_space, which costs as much to ask as the locator)."""
    size = axis.axes.bbox.size
    return tuple(axis.get_view_interval()), axis.get_scale(), axis.get_minpos(), float(size[0]), float(size[1])


class Wrapping:
    """What a locator that wraps another (`locator`, a matplotlib Locator) hands on to it: the axis, and the
    questions about a view's ends. Mixed in before matplotlib's Locator, which this module does not import at
    its top; `last` keeps a wrapper's (inputs, answer) of its last call, forgotten with a new axis."""

    def __init__(self, locator: Any) -> None:
        self.locator = locator
        self.last: tuple[tuple[Any, ...], Any] | None = None

    def set_axis(self, axis: Any) -> None:
        super().set_axis(axis)  # type: ignore[misc]  # Locator's, next in the wrapper's order
        self.locator.set_axis(axis)
        self.last = None

    def tick_values(self, vmin: float, vmax: float) -> Any:
        return self.locator.tick_values(vmin, vmax)

    def nonsingular(self, v0: float, v1: float) -> tuple[float, float]:
        return self.locator.nonsingular(v0, v1)  # type: ignore[no-any-return]

    def view_limits(self, vmin: float, vmax: float) -> tuple[float, float]:
        return self.locator.view_limits(vmin, vmax)  # type: ignore[no-any-return]


@functools.cache
def in_view_locator() -> Callable[[Locator], Locator]:
    """The Locator class that wraps another and gives only its locations in view (made once, once matplotlib is
    imported: embscope starts without it)."""
    from matplotlib.ticker import Locator

    class InView(Wrapping, Locator):
        def __call__(self) -> Any:
            # an axis asks its locator again at each measure and draw: the same inputs, the same locations
            inputs = placing(self.axis)
            if self.last is None or self.last[0] != inputs:
                self.last = inputs, within(self.axis, np.asarray(self.locator()))
            return self.last[1].copy()

    return InView
