"""Every report figure, laid out by render.margins and drawn as the page draws it (SVG) and as `--plot` draws a PNG
(Agg), keeps all of its texts inside the figure, and no axes, with its texts, over another: checked on the extents
matplotlib gives for what it drew, not on the margins computed."""

from __future__ import annotations

import io
from functools import partial
from itertools import combinations

import numpy as np
import pytest
from matplotlib.figure import Figure as Drawing
from matplotlib.text import Text
from matplotlib.transforms import Bbox

import embscope
from embscope.analysis.report import Report, gather
from embscope.analysis.undertrained import UndertrainedTables
from embscope.render.plot_style import style
from embscope.render.plots import fix_layout
from embscope.render.report_content import Figure, sections
from embscope.render.svg_canvas import write_svg
from embscope.render.undertrained_plot import undertrained_figure
from embscope.sample import default_checkpoint

TOLERANCE = 0.5  # pixels: a text's box is measured in floats, and one on the edge is inside


def report_figures(checkpoints: list) -> tuple[Report, dict]:
    opened: dict = {}

    def open_path(path):
        return opened.setdefault(path, embscope.open(path if path is not None else default_checkpoint()))

    report = gather(checkpoints, open_path)
    return report, {block.name: block.draw for section in sections(report) for block in section.blocks
                    if isinstance(block, Figure)}


@pytest.fixture(scope="module")
def makers(tmp_path_factory) -> dict:
    """The sample's figures (norms, positions, undertrained, map, geometry), undertrained's with a row of subfigures a
    table (--table both), and compare's two kinds."""
    folder = tmp_path_factory.mktemp("run")
    rng = np.random.default_rng(11)
    token, position = rng.standard_normal((300, 8)), rng.standard_normal((64, 8))
    paths = []
    for n, step in enumerate((1000, 2000, 3000)):
        paths.append(folder / f"ckpt_{step}.npz")
        np.savez(paths[-1], token_emb=(token + 0.3 * n * rng.standard_normal(token.shape)).astype(np.float32),
                 pos_emb=(position + 0.2 * n * rng.standard_normal(position.shape)).astype(np.float32))
    sample, found = report_figures([])
    assert isinstance(sample.undertrained, UndertrainedTables)
    found["undertrained-two"] = partial(undertrained_figure, list(sample.undertrained.reports) * 2, "nlm/model.pkl")
    found["compare-pair"] = report_figures(paths[::2])[1]["compare"]
    found["compare-run"] = report_figures(paths)[1]["compare"]
    return found


def drawn_texts(figure: Drawing) -> list[Text]:
    """Every text the figure drew: titles, axis labels, the tick labels of the ticks drawn, annotations, legends."""
    texts = [text for container in (figure, *figure.subfigs) for text in container.texts]
    for ax in figure.axes:
        texts += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis._update_ticks():  # the ticks matplotlib draws (those in view)
                texts += [tick.label1, tick.label2]
        legend = ax.get_legend()
        texts += legend.get_texts() if legend is not None else []
    return [text for text in texts if text.get_visible() and text.get_text()]


def inside(box: Bbox, page: Bbox) -> bool:
    return (page.x0 - TOLERANCE <= box.x0 and box.x1 <= page.x1 + TOLERANCE
            and page.y0 - TOLERANCE <= box.y0 and box.y1 <= page.y1 + TOLERANCE)


def meet(a: Bbox, b: Bbox) -> bool:
    return min(a.x1, b.x1) - max(a.x0, b.x0) > TOLERANCE and min(a.y1, b.y1) - max(a.y0, b.y0) > TOLERANCE


def check(name: str, figure: Drawing, renderer) -> None:
    page = figure.bbox
    for text in drawn_texts(figure):
        assert inside(text.get_window_extent(renderer), page), (name, text)
    for ax in figure.axes:
        legend = ax.get_legend()
        if legend is not None:
            assert inside(legend.get_window_extent(renderer), page), (name, legend)
    frames = {ax: ax.get_window_extent(renderer) for ax in figure.axes}
    drawn = {ax: ax.get_tightbbox(renderer) for ax in figure.axes}  # each axes with all it draws around it
    for a, b in combinations(figure.axes, 2):
        if frames[a].bounds == frames[b].bounds:  # a twin: one frame, two sets of labels
            continue
        assert not meet(frames[a], frames[b]), (name, a, b)
        assert not meet(drawn[a], drawn[b]), (name, a.get_title(), b.get_title(), drawn[a], drawn[b])
    titles = [container._suptitle for container in (figure, *figure.subfigs) if container._suptitle is not None]
    for title in titles:
        assert not any(meet(title.get_window_extent(renderer), box) for box in drawn.values()), (name, title)


FIGURES = ("norms-token", "norms-position", "positions", "undertrained", "map-token", "map-position", "geometry-token",
           "geometry-position", "undertrained-two", "compare-pair", "compare-run")


def test_every_report_figure_is_checked(makers):
    assert set(makers) == set(FIGURES)  # a new figure joins FIGURES, and the test below checks it


@pytest.mark.parametrize("name", FIGURES)  # one test a figure: xdist spreads the drawing over its workers
def test_every_report_figure_keeps_its_texts_inside_and_its_axes_apart(makers, name):
    make = makers[name]
    with style():
        figure = make()
        write_svg(figure, io.StringIO(), 72)  # as the page draws it
        check(name, figure, figure.canvas.get_renderer())
        figure = make()  # as `--plot` draws a PNG: Agg, at the figure's dpi
        fix_layout(figure)
        figure.canvas.draw()
        check(name, figure, figure.canvas.get_renderer())
