"""Minor ticks without labels drawn as one artist per axis, not a Tick each.

A log axis has up to eight minor ticks a decade, and matplotlib makes each a Tick (three lines and two texts) that it
moves, labels and measures at each layout pass and each draw, though none has a label on an axis of more than about a
decade (LogFormatter labels minor ticks only on a shorter one). `marks` hands such an axis's minor ticks to one Line2D
per tick line drawn (the minor tick's own line, copied: marker, size, width, colour, transform) that puts a mark where
each minor tick in view would be, when the figure is drawn; the axis keeps its minor Ticks at any draw where one of
them would have a label, and the marks then draw nothing. The figure drawn is the same.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from .ticks_in_view import Wrapping, placing

if TYPE_CHECKING:
    from matplotlib.figure import Figure

VIEW_TOLERANCE = 1e-10  # of the view's width on the axis's scale: matplotlib draws a tick this close outside an end


def marks(figure: Figure) -> None:
    """Every axis of the figure (subfigures' too) whose minor ticks have automatic places and no grid line draws
    them as marks while none of them has a label."""
    from matplotlib.ticker import FixedLocator, NullLocator
    split, drawn = classes()
    for ax in figure.axes:
        for axis in (ax.xaxis, ax.yaxis):
            locator = axis.get_minor_locator()
            # a fixed locator's labels are matched to its ticks by their order; a split one is split already
            if isinstance(locator, (NullLocator, FixedLocator, split)):
                continue
            template = axis.minorTicks[0]  # the tick every minor tick copies (matplotlib makes it at first use)
            if template.gridline.get_visible():
                continue
            unlabelled = split(locator)
            axis.set_minor_locator(unlabelled)
            for line in (template.tick1line, template.tick2line):
                if line.get_visible():
                    ax.add_artist(drawn(axis, unlabelled, line))


def minor_places(axis: Any, locs: np.ndarray) -> np.ndarray:
    """The minor tick places `axis` (a matplotlib Axis) keeps of `locs`: those no major tick takes, as
    Axis.get_minorticklocs leaves them."""
    if not axis.remove_overlapping_locs or not len(locs):
        return locs
    scale = axis.get_transform()
    minor, major = scale.transform(locs), scale.transform(np.asarray(axis.get_majorticklocs()))
    low, high = sorted(scale.transform(axis.get_view_interval()))
    taken = np.isclose(minor[:, None], major[None, :], atol=(high - low) * 1e-5, rtol=0).any(axis=1)
    return np.asarray(locs[~taken])


def in_view(axis: Any, locs: np.ndarray) -> np.ndarray:
    """The places matplotlib draws a tick at: inside the view, or outside it by a hair (Axis._update_ticks)."""
    scale = axis.get_transform()
    low, high = sorted(scale.transform(axis.get_view_interval()))
    places = scale.transform(locs)
    edge = (high - low) * VIEW_TOLERANCE
    return np.asarray(locs[(places >= low - edge) & (places <= high + edge)])


@functools.cache
def classes() -> tuple[type, type]:
    """The locator that gives an axis its minor ticks only when one of them has a label, and the artist that draws
    them otherwise (made once, once matplotlib is imported: embscope starts without it)."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import Locator

    class Split(Wrapping, Locator):
        def unlabelled(self) -> np.ndarray | None:
            """The minor ticks' places (those no major tick takes) while none has a label; None when one has. Kept
            while the axis's view and size stay (ticks_in_view.placing): asked at each measurement and draw."""
            axis: Any = self.axis  # a matplotlib Axis: set_axis gave it
            inputs = placing(axis)
            if self.last is None or self.last[0] != inputs:
                places = minor_places(axis, np.asarray(self.locator()))
                self.last = inputs, None if any(axis.minor.formatter.format_ticks(places)) else places
            return self.last[1]

        def __call__(self) -> Any:
            return np.asarray(self.locator()) if self.unlabelled() is None else np.array([])

    class Marks(Line2D):
        def __init__(self, axis: Any, places: Split, line: Line2D) -> None:
            super().__init__([], [])
            self.update_from(line)  # the tick line's look and transform
            self.set_zorder(axis.get_zorder())  # drawn where the axis draws its ticks: under the spines
            self.set_in_layout(False)  # as a tick line: the margins hold the tick labels, not the ticks
            self.set_clip_on(False)  # as a tick line, outside the axes: not clipped to them as an axes' artist is
            self.axis, self.places = axis, places
            self.across = np.asarray(line.get_ydata() if axis.axis_name == "x" else line.get_xdata())[0]  # 0 or 1: side

        def draw(self, renderer: Any) -> None:
            places = self.places.unlabelled()
            if places is None or not len(places := in_view(self.axis, places)):
                return
            across = np.full(len(places), self.across)
            self.set_data((places, across) if self.axis.axis_name == "x" else (across, places))
            super().draw(renderer)

    return Split, Marks
