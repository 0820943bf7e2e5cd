"""Tick labels worked out once per view (tick_labels): the same labels and offset text as matplotlib's own
formatters give, fewer times, and worked out again when the view changes."""

from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatter, LogFormatterSciNotation, ScalarFormatter

from embscope.render.plot_style import log_scale, style
from embscope.render.tick_labels import labelled_once


def offset_and_log() -> Figure:
    figure = Figure(figsize=(6, 3))
    FigureCanvasAgg(figure)
    offset, log = figure.subplots(1, 2)
    offset.plot([1_000_000.1, 1_000_000.5], [0.2, 0.9])  # labels "0.1".."0.5" under an offset text "+1e6"
    log.plot([3, 700], [1, 2])
    log_scale(log, "x")
    return figure


def shown(figure: Figure) -> tuple[np.ndarray, list[list[str]], list[str]]:
    """The figure's pixels, each axis's drawn tick labels, and each axis's offset text."""
    figure.canvas.draw()
    labels = [[t.label1.get_text() for t in axis._update_ticks()] for ax in figure.axes for axis in (ax.xaxis, ax.yaxis)]
    offsets = [axis.offsetText.get_text() for ax in figure.axes for axis in (ax.xaxis, ax.yaxis)]
    return np.asarray(figure.canvas.buffer_rgba()).copy(), labels, offsets


def test_the_labels_and_the_figure_are_matplotlibs_own():
    with style():
        plain, once = offset_and_log(), offset_and_log()
        labelled_once(once)
        pixels, labels, offsets = shown(plain)
        once_pixels, once_labels, once_offsets = shown(once)
    assert offsets[0] == "+1e6" and once_offsets == offsets
    assert labels[0][:2] == ["0.1", "0.2"] and once_labels == labels
    assert "1000" not in labels[2] and "100" in labels[2]  # the log axis's decades, in view only
    assert np.array_equal(once_pixels, pixels)


def test_labels_are_worked_out_once_per_view_and_again_when_it_changes():
    calls: list[int] = []

    class Counted(ScalarFormatter):
        def set_locs(self, locs):
            calls.append(len(locs))
            super().set_locs(locs)

    with style():
        figure = offset_and_log()
        ax = figure.axes[0]
        ax.xaxis.set_major_formatter(Counted())
        labelled_once(figure)
        assert not isinstance(ax.xaxis.get_major_formatter(), (ScalarFormatter, LogFormatter))  # wrapped
        for _ in range(3):
            figure.canvas.draw()
        once = len(calls)
        assert 1 <= once <= 2  # three draws, each asking for the labels at least twice: worked out once per view
        plain = offset_and_log()
        for each in (ax, plain.axes[0]):
            each.set_xlim(1_000_000.2, 1_000_000.3)
        figure.canvas.draw()
        assert len(calls) > once
        _, labels, offsets = shown(plain)
        assert [t.label1.get_text() for t in ax.xaxis._update_ticks()] == labels[0]
        assert labels[0][0] == "0.200" and ax.xaxis.offsetText.get_text() == offsets[0] == "+1e6"
        # every other question goes to the formatter
        assert ax.xaxis.get_major_formatter()(1_000_000.25) == plain.axes[0].xaxis.get_major_formatter()(1_000_000.25)


def test_a_figure_drawn_again_under_other_settings_gets_the_labels_those_settings_give():
    """matplotlib's formatters read some settings as they write each label (axes.unicode_minus: "−2" or "-2";
    text.usetex and axes.formatter.min_exponent, for LogFormatterMathtext): the labels of the last call, kept
    across them, were those of the settings before."""
    with style():
        plain, once = offset_and_log(), offset_and_log()
        for figure in (plain, once):
            figure.axes[0].plot([1_000_000.1], [-2.5])  # negative y labels
            figure.axes[1].xaxis.set_major_formatter(LogFormatterSciNotation())  # "$\mathdefault{10^{2}}$"
        labelled_once(once)
        first = shown(once)
        for changed in ({"axes.unicode_minus": False}, {"axes.formatter.min_exponent": 3}):
            with matplotlib.rc_context(changed):
                _, labels, offsets = shown(plain)
                _, once_labels, once_offsets = shown(once)
            assert labels != first[1]  # the setting shows in matplotlib's own labels
            assert (once_labels, once_offsets) == (labels, offsets)
