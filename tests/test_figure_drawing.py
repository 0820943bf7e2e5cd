"""Figures drawn for less and drawn the same: only the ticks in view are made (ticks_in_view), minor ticks without
labels are one artist's marks (minor_marks), and a report figure
is laid out with the SVG renderer that draws it (svg_canvas), its margins still holding every tick label and axis
label, a long token name's included."""

from __future__ import annotations

import io

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from embscope.analysis.norms import row_norms, summarize
from embscope.render import minor_marks, norms_plot
from embscope.render.plot_style import MAX_LABEL, log_scale, style
from embscope.render.svg_canvas import write_svg
from embscope.render.ticks_in_view import in_view


def lines_and_log(log_x: tuple[float, float] = (3, 700)) -> Figure:
    figure = Figure(figsize=(6, 3))
    FigureCanvasAgg(figure)
    linear, log = figure.subplots(1, 2)
    linear.plot([0.13, 9.71], [0.2, 0.9])
    log.plot(log_x, [1, 2])
    log_scale(log, "x")
    return figure


def drawn(figure: Figure) -> tuple[np.ndarray, list[list[tuple[float, str]]]]:
    """The figure's pixels, and each axis's drawn ticks as (location, label)."""
    figure.canvas.draw()
    ticks = [[(t.get_loc(), t.label1.get_text()) for t in axis._update_ticks()]  # the ticks matplotlib draws
             for ax in figure.axes for axis in (ax.xaxis, ax.yaxis)]
    return np.asarray(figure.canvas.buffer_rgba()).copy(), ticks


def test_only_the_ticks_in_view_are_made_and_the_figure_is_the_same():
    with style():
        plain, wrapped = lines_and_log(), lines_and_log()
        in_view(wrapped)
        plain_pixels, plain_ticks = drawn(plain)
        pixels, ticks = drawn(wrapped)
    assert np.array_equal(pixels, plain_pixels) and ticks == plain_ticks
    for before, after in zip(plain.axes, wrapped.axes):  # matplotlib's own ticks, those past the view's ends left out
        for axis, made in ((before.xaxis, after.xaxis), (before.yaxis, after.yaxis)):
            low, high = sorted(axis.get_view_interval())
            for own, kept in ((axis.get_major_ticks(), made.get_major_ticks()),
                              (axis.get_minor_ticks(), made.get_minor_ticks())):
                locs = np.array([t.get_loc() for t in own])
                if ((locs >= low) & (locs <= high)).sum() >= 2:
                    assert [t.get_loc() for t in kept] == list(locs[(locs >= low) & (locs <= high)])
    linear, log = wrapped.axes
    assert len(plain.axes[0].xaxis.get_major_ticks()) == len(linear.xaxis.get_major_ticks()) + 2  # one past each end
    # log x from 3 to 700 with 5% margins in decades (about 2.26 to 929): majors 10 and 100, minors 3..9, 20..90,
    # 200..900 (7 + 8 + 8); matplotlib's own locator also gives those of the decades either side
    low, high = log.get_xlim()
    assert 2 < low < 3 and 900 < high < 1000
    assert [t.get_loc() for t in log.xaxis.get_major_ticks()] == [10, 100]
    assert len(log.xaxis.get_minor_ticks()) == 7 + 8 + 8 < len(plain.axes[1].xaxis.get_minor_ticks())


def test_ticks_in_view_follow_a_new_view_and_a_new_size():
    # the locations are kept between calls while the view, the scale and the axis's length stay: each change
    # asks the wrapped locator again, as matplotlib's own would
    with style():
        plain, wrapped = lines_and_log(), lines_and_log()
        in_view(wrapped)
        for figure in (plain, wrapped):
            drawn(figure)
            figure.axes[0].set_xlim(0, 50)
            figure.axes[1].set_xlim(5, 5000)
        plain_pixels, plain_ticks = drawn(plain)
        pixels, ticks = drawn(wrapped)
        assert np.array_equal(pixels, plain_pixels) and ticks == plain_ticks
        assert [label for _, label in ticks[0]] == ["0", "10", "20", "30", "40", "50"]
        for figure in (plain, wrapped):
            figure.set_size_inches(2, 3)  # a narrow figure: fewer ticks fit
        plain_pixels, plain_ticks = drawn(plain)
        pixels, ticks = drawn(wrapped)
    assert np.array_equal(pixels, plain_pixels) and ticks == plain_ticks
    assert [label for _, label in ticks[0]] == ["0", "50"]


def marked_and_plain(log_x: tuple[float, float]) -> tuple[Figure, bool, list, list]:
    """A figure with its minor ticks handed to marks, whether it draws the same pixels as the figure without, and
    each one's drawn ticks."""
    with style():
        plain, marked = lines_and_log(log_x), lines_and_log(log_x)
        for figure in (plain, marked):
            in_view(figure)
        minor_marks.marks(marked)
        plain_pixels, plain_ticks = drawn(plain)
        pixels, ticks = drawn(marked)
    return marked, np.array_equal(pixels, plain_pixels), ticks, plain_ticks


def test_minor_ticks_without_labels_are_drawn_as_marks_and_the_figure_is_the_same():
    marked, same, ticks, plain_ticks = marked_and_plain((3, 700))
    assert same
    log = marked.axes[1]
    (mark,) = [a for a in log.get_children() if isinstance(a, minor_marks.classes()[1])]  # x's: no ticks on top
    # the view is about 2.26 to 929 (5% margins in decades): minor ticks 3..9, 20..90, 200..900, none labelled
    places = [*range(3, 10), *range(20, 100, 10), *range(200, 1000, 100)]
    assert list(mark.get_xdata()) == places and list(mark.get_ydata()) == [0] * len(places)
    assert ticks[2] == [(10, "10"), (100, "100")] == [t for t in plain_ticks[2] if t[1]]  # the majors alone
    assert len(plain_ticks[2]) == 2 + len(places) and len(log.xaxis.minorTicks) == 1  # the tick the others copy
    assert ticks[:2] == plain_ticks[:2] and ticks[3] == plain_ticks[3]  # the other axes as they were


def test_minor_ticks_with_labels_stay_ticks():
    # 3 to 5 is under 0.4 of a decade: LogFormatter labels each minor tick, so the axis keeps them as Ticks
    marked, same, ticks, plain_ticks = marked_and_plain((3, 5))
    assert same and ticks == plain_ticks
    assert [label for _, label in ticks[2]] == ["3", "4", "5"]
    (mark,) = [a for a in marked.axes[1].get_children() if isinstance(a, minor_marks.classes()[1])]
    assert not len(mark.get_xdata())  # it drew nothing


def test_minor_marks_follow_a_new_view():
    # drawn once over 3 decades (marks), then over a fifth of a decade (labelled minor ticks: Ticks again)
    with style():
        plain, marked = lines_and_log(), lines_and_log()
        for figure in (plain, marked):
            in_view(figure)
        minor_marks.marks(marked)
        for figure in (plain, marked):
            drawn(figure)
            figure.axes[1].set_xlim(3, 5)
        plain_pixels, plain_ticks = drawn(plain)
        pixels, ticks = drawn(marked)
    assert np.array_equal(pixels, plain_pixels) and ticks == plain_ticks
    assert [label for _, label in ticks[2]] == ["3", "4", "5"]


def test_ticks_placed_by_hand_are_left_alone():
    with style():
        figure = lines_and_log()
        linear = figure.axes[0]
        linear.set_yticks([-5, 0.5, 5], ["below", "inside", "above"])  # labels matched to ticks by their order
        in_view(figure)
        figure.canvas.draw()
    assert [(t.get_loc(), t.label1.get_text()) for t in linear.yaxis.get_major_ticks()] == [
        (-5, "below"), (0.5, "inside"), (5, "above")]


def test_a_report_figure_keeps_a_long_token_name_and_every_label_inside_it():
    table = np.random.default_rng(5).standard_normal((300, 8)).astype(np.float32)
    table[42] *= 40
    summary = summarize(row_norms(table))
    long_name = "abcdefghij" * 20  # cut to MAX_LABEL characters in the figure
    names = {row: long_name if row == 42 else f"t{row}" for row in norms_plot.ranked_rows(summary.norms)}
    with style():
        figure = norms_plot.token_norms_figure(summary.norms, summary.median, summary.mad, summary.threshold,
                                               summary.flagged, summary.robust_z, names, "ckpt", "token table wte",
                                               None)
        out = io.StringIO()
        write_svg(figure, out, 150)
    assert out.getvalue().count("<svg") == 1
    renderer = figure.canvas.get_renderer()  # the SVG renderer the figure was laid out and drawn with
    page = figure.bbox
    hist, ranked = figure.axes
    labels = [t for t in ranked.get_yticklabels() if t.get_text()]
    assert any(t.get_text().startswith(long_name[:MAX_LABEL // 2]) for t in labels)
    texts = [*labels, *ranked.get_xticklabels(), *hist.get_xticklabels(), *hist.get_yticklabels(),
             *(ax.xaxis.label for ax in figure.axes), *(ax.yaxis.label for ax in figure.axes),
             *(ax.title for ax in figure.axes), figure._suptitle]
    for text in texts:
        if text.get_text() and text.get_visible():
            box = text.get_window_extent(renderer)
            assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1, text
