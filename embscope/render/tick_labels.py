"""Tick labels worked out once per view: an axis asks its formatter for every label again at each measurement and
draw (the margins, the axis label's placement, the spines' extent: six times an axis in a report figure), and
matplotlib's ScalarFormatter and LogFormatter work out an offset, an order of magnitude and a number format from
the locations and the view each time. `labelled_once` wraps them so that the labels of the last call are given
again while the locations, all the formatter reads of the axis (ticks_in_view.placing) and the settings it reads
for each label (READ_PER_LABEL) are unchanged; the wrapped formatter then holds the state that call left (its
offset, read for the offset text), as it would have after working it out again. The figure drawn is the same."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .ticks_in_view import placing

# the settings matplotlib's ScalarFormatter and LogFormatters read as they write each label (the rest they read
# when made): a figure drawn again under others gets other labels
READ_PER_LABEL = ("axes.unicode_minus", "text.usetex", "axes.formatter.min_exponent")

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from matplotlib.ticker import Formatter


def labelled_once(figure: Figure) -> None:
    """Every axis of the figure (subfigures' too) whose formatter is matplotlib's ScalarFormatter or LogFormatter
    works out its labels once per view."""
    from matplotlib.ticker import LogFormatter, ScalarFormatter
    wrapper = once_formatter()
    for ax in figure.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if isinstance(axis.get_major_formatter(), (ScalarFormatter, LogFormatter)):
                axis.set_major_formatter(wrapper(axis.get_major_formatter()))
            if isinstance(axis.get_minor_formatter(), (ScalarFormatter, LogFormatter)):
                axis.set_minor_formatter(wrapper(axis.get_minor_formatter()))


@functools.cache
def once_formatter() -> Callable[[Formatter], Formatter]:
    """The Formatter class that wraps another and keeps the labels of its last call (made once, once matplotlib is
    imported: embscope starts without it)."""
    import matplotlib
    from matplotlib.ticker import Formatter
    settings: Any = matplotlib.rcParams  # one object, changed in place (rc_context): read at each call

    class Once(Formatter):
        def __init__(self, formatter: Any) -> None:
            self.formatter = formatter
            self.last: tuple[tuple[Any, ...], list[str]] | None = None

        def set_axis(self, axis: Any) -> None:
            super().set_axis(axis)
            self.formatter.set_axis(axis)
            self.last = None

        def format_ticks(self, values: Any) -> list[str]:
            inputs = (tuple(np.asarray(values, dtype=float).tolist()), placing(self.axis),
                      tuple(settings[name] for name in READ_PER_LABEL))
            if self.last is None or self.last[0] != inputs:
                self.last = inputs, list(self.formatter.format_ticks(values))
            return list(self.last[1])

        def set_locs(self, locs: Any) -> None:
            self.formatter.set_locs(locs)
            self.last = None  # its state is now that of these locations

        def __call__(self, x: Any, pos: Any = None) -> str:
            return str(self.formatter(x, pos))

        def format_data(self, value: Any) -> str:
            return str(self.formatter.format_data(value))

        def format_data_short(self, value: Any) -> str:
            return str(self.formatter.format_data_short(value))

        def get_offset(self) -> str:
            return str(self.formatter.get_offset())

        def __getattr__(self, name: str) -> Any:  # any other question: the wrapped formatter's answer
            if name in ("formatter", "last"):
                raise AttributeError(name)
            return getattr(self.formatter, name)

    return Once
