"""The page's SVG renderer gives each font's line metrics once (svg_canvas): what matplotlib would read from the
font's tables for each text, the same floats, so every text is laid out and drawn the same."""

from __future__ import annotations

import io

import matplotlib
import pytest
from matplotlib.backends.backend_svg import RendererSVG
from matplotlib.figure import Figure
from matplotlib.text import Text

from embscope.render import svg_canvas
from embscope.render.plot_style import style

NEW_LAYOUT = tuple(int(part) for part in matplotlib.__version__.split(".")[:2]) >= (3, 11)  # Text reads the hook


def figure_with_texts() -> Figure:
    figure = Figure(figsize=(6, 4))
    figure.suptitle("a title\nof two lines")
    left, right = figure.subplots(1, 2)
    left.plot([1, 2, 3], [3, 1, 2], label="a line")
    left.set_xlabel("position")
    left.set_ylabel("norm\n(L2)")
    left.legend(loc="upper right")
    right.set_title("bold", fontweight="bold", fontsize=14.5)
    right.text(0.1, 0.5, "serif\nthree\nlines", family="DejaVu Serif", fontsize=7)
    right.text(0.5, 0.2, "mono", family="monospace")
    return figure


def test_the_line_metrics_are_those_of_the_fonts_tables():
    # DejaVu Sans: unitsPerEm 2048; OS/2 sTypoAscender 1556, sTypoDescender -492, sTypoLineGap 410
    prop = matplotlib.font_manager.FontProperties(family="DejaVu Sans", size=10)
    ascent, descent, gap = svg_canvas.line_metrics(prop, 72)
    assert ascent == pytest.approx(1556 / 2048 * 10)
    assert descent == pytest.approx(492 / 2048 * 10)
    assert gap == pytest.approx(410 / 2048 * 10)
    assert svg_canvas.line_metrics(prop, 144)[0] == pytest.approx(2 * 1556 / 2048 * 10)  # pixels at twice the dpi


def test_texts_measure_the_same_as_with_matplotlibs_own_svg_renderer():
    with style():
        figure = figure_with_texts()
        figure.dpi = svg_canvas.POINTS
        ours = svg_canvas.renderer_class()(figure, {}, 6 * 72, 4 * 72, io.StringIO())
        theirs = RendererSVG(6 * 72, 4 * 72, io.StringIO())
        ticks = [label for ax in figure.axes for label in (*ax.get_xticklabels(), *ax.get_yticklabels())]
        texts = [t for t in (*figure.findobj(Text), *ticks) if t.get_text()]
        assert len(texts) >= 15
        for text in texts:
            assert text.get_window_extent(ours).bounds == text.get_window_extent(theirs).bounds, text.get_text()
    # matplotlib from 3.11 asks the renderer: once per font and size, not once per text
    assert bool(ours.line_metrics) == NEW_LAYOUT
    assert len(ours.line_metrics) < len(texts)


def test_a_figure_is_written_the_same_byte_for_byte(monkeypatch):
    def written() -> str:
        out = io.StringIO()
        with style(), matplotlib.rc_context({"svg.hashsalt": "test"}):
            svg_canvas.write_svg(figure_with_texts(), out, 150, metadata={"Date": None})
        return out.getvalue()

    ours = written()
    monkeypatch.setattr(svg_canvas, "renderer_class", lambda: PlainRenderer)  # matplotlib's renderer, no hook
    assert written() == ours


class PlainRenderer(RendererSVG):
    def __init__(self, figure: Figure, sizes: dict, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)


def written_with(sizes: svg_canvas.TextSizes | None, make=figure_with_texts) -> str:
    out = io.StringIO()
    with style(), matplotlib.rc_context({"svg.hashsalt": "test"}):
        svg_canvas.write_svg(make(), out, 150, metadata={"Date": None}, sizes=sizes)
    return out.getvalue()


def other_figure() -> Figure:
    figure = Figure(figsize=(5, 3))
    ax = figure.subplots()
    ax.plot([1, 2, 3], [3, 1, 2])  # the same tick labels as figure_with_texts' left panel
    ax.set_xlabel("position")
    ax.set_title("another title")
    return figure


def test_the_figures_of_a_page_share_the_sizes_they_measure_and_are_written_the_same():
    alone = svg_canvas.TextSizes()
    second_alone = written_with(alone)
    page = svg_canvas.TextSizes()
    written_with(page, other_figure)
    before = dict(page.sizes)
    second = written_with(page)
    assert second == second_alone  # the same bytes with sizes measured for the figure before
    assert before.items() <= page.sizes.items()  # kept
    assert ("position", False) in {key[:2] for key in before}
    # the second figure measured only what the first had not: fewer strings than it measures alone
    assert 0 < len(page.sizes) - len(before) < len(alone.sizes)
    assert all(page.sizes[key] == size for key, size in alone.sizes.items())


def test_sizes_measured_under_other_settings_are_measured_again():
    sizes = svg_canvas.TextSizes()
    written_with(sizes)
    kept = sizes.sizes
    assert kept and sizes.under(dict(sizes.settings)) is kept  # the same settings: the same sizes
    with style(), matplotlib.rc_context({"font.size": 14}):  # every default-sized text measures larger
        assert sizes.under(matplotlib.rcParams.copy()) == {}
    assert sizes.sizes is not kept
