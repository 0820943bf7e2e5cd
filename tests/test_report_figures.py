"""The report's figures are the ones `--plot` draws, made by the same functions with matplotlib: inline as SVG in
the page (one per figure of each section, dense panels rasterised), each naming its checkpoint, and a line in
place of each when matplotlib is missing."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
from conftest import run, run_json
from matplotlib.figure import Figure as Drawing

import embscope
from embscope.analysis.report import gather
from embscope.render.plot_style import style
from embscope.render.report_content import Figure, sections
from embscope.sample import default_checkpoint

SAMPLE_FIGURES = ["norms-token", "norms-position", "positions", "undertrained", "map-token", "map-position",
                  "geometry-token", "geometry-position"]
SAMPLE_TITLE = "nlm/model.pkl, step 3000"  # names.emb_title of the sample opened by the library


def texts(figure: Drawing) -> list[str]:
    """Every string a figure draws: its titles, axis labels, annotations and legends."""
    found = [text.get_text() for text in figure.texts]
    found += [text.get_text() for sub in figure.subfigs for text in sub.texts]
    for ax in figure.axes:
        found += [ax.get_title(loc) for loc in ("left", "center", "right")] + [ax.get_xlabel(), ax.get_ylabel()]
        found += [text.get_text() for text in ax.texts]
        legend = ax.get_legend()
        found += [text.get_text() for text in legend.get_texts()] if legend is not None else []
    return [text for text in found if text]


@pytest.fixture(scope="module")
def sample_figures() -> dict[str, Drawing]:
    report = gather([], lambda path: embscope.open(default_checkpoint()))
    with style():
        return {block.name: block.draw() for section in sections(report) for block in section.blocks
                if isinstance(block, Figure)}


def page_figures(page: str) -> dict[str, str]:
    return dict(re.findall(r'<figure id="figure-([\w-]+)"[^>]*>(.*?)</figure>', page, flags=re.DOTALL))


@pytest.mark.slow  # seconds of subprocesses: CI's slow step runs it; a cheaper test of the same feature stays in the suite
def test_the_page_holds_one_matplotlib_svg_per_figure(tmp_path):
    run("report", "--out", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    figures = page_figures(page)
    assert list(figures) == SAMPLE_FIGURES and page.count("<svg") == len(SAMPLE_FIGURES)
    assert all(figure.count("<svg") == 1 and "</svg>" in figure for figure in figures.values())
    assert list(tmp_path.iterdir()) == [tmp_path / "r.html"]
    # the heatmap is one PNG inside its SVG (and its colour bar another), never a rectangle per cell
    assert figures["positions"].count("data:image/png;base64,") == 2


def test_the_figures_are_those_plot_draws_each_naming_its_checkpoint(sample_figures):
    assert list(sample_figures) == SAMPLE_FIGURES
    assert all(any(SAMPLE_TITLE in text for text in texts(figure)) for figure in sample_figures.values())
    geometry = texts(sample_figures["geometry-token"])
    assert f"{SAMPLE_TITLE} - token table token_emb: geometry" in geometry
    top = run_json("geometry")["dimensions"][:3]  # the dimensions the figure names are those geometry lists first
    assert all(f"dim {d['dim']}: {d['share']:.1%}" in geometry for d in top)
    assert "cosine between positions (256 x 256)" in texts(sample_figures["positions"])


def test_without_matplotlib_the_page_says_what_each_figure_needs(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    run("report", "--out", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    figures = page_figures(page)
    assert list(figures) == SAMPLE_FIGURES and "<svg" not in page
    assert all("not made: this figure needs the &#x27;matplotlib&#x27; package" in figure for figure in figures.values())


def test_two_checkpoints_compare_figure_names_both_and_draws_every_row(tmp_path):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((300, 8)).astype(np.float32)
    b = a + np.float32(0.3) * rng.standard_normal(a.shape).astype(np.float32)
    np.savez(tmp_path / "a.npz", token_emb=a)
    np.savez(tmp_path / "b.npz", token_emb=b)
    opened = {tmp_path / "a.npz": embscope.open(tmp_path / "a.npz"), tmp_path / "b.npz": embscope.open(tmp_path / "b.npz")}
    report = gather([tmp_path / "a.npz", tmp_path / "b.npz"], lambda path: opened[path])
    with style():
        (compare,) = [block.draw() for section in sections(report) for block in section.blocks
                      if isinstance(block, Figure) and block.name == "compare"]
    drawn = texts(compare)
    assert any("A = a.npz (step unknown)" in text and "B = b.npz (step unknown)" in text for text in drawn)
    scatters = [len(c.get_offsets()) for ax in compare.axes for c in ax.collections if len(c.get_offsets())]
    assert scatters == [300, 300]  # every row in the norm scatter and in the change by row
    cosines = np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert f"token: mean {cosines.mean():+.3f} over 300 rows" in drawn
    # that the page holds it: tests/test_report.py, on the report of a run's folder it makes anyway


def test_a_dense_plot_file_in_svg_is_rasterized(tmp_path):
    rows = 6000  # past plots.DENSE_POINTS
    np.savez(tmp_path / "big.npz", token_emb=np.random.default_rng(4).standard_normal((rows, 8)).astype(np.float32))
    run("map", "-c", tmp_path / "big.npz", "--plot", tmp_path / "map.svg")
    svg = (tmp_path / "map.svg").read_text()
    markers = len(re.findall(r'<use xlink:href="#m', svg))  # a marker drawn per point (glyphs are #DejaVu...)
    assert "<image" in svg and markers < 50  # one picture of the dots, not a marker per row


@pytest.mark.slow  # a report of 6,000 rows (three seconds of CPU): the plot file above is rasterized by the same code
def test_a_dense_figure_in_the_page_is_rasterized(tmp_path):
    rows = 6000  # past plots.DENSE_POINTS
    np.savez(tmp_path / "big.npz", token_emb=np.random.default_rng(4).standard_normal((rows, 8)).astype(np.float32))
    run("report", "-c", tmp_path / "big.npz", "--out", tmp_path / "r.html")
    in_page = page_figures((tmp_path / "r.html").read_text(encoding="utf-8"))["map-token"]
    assert "<image" in in_page and len(re.findall(r'<use xlink:href="#f\d+-m', in_page)) < 50


def test_the_figures_text_is_svg_text_escaped_as_xml(tmp_path):
    # text as <text> elements (svg.fonttype none), in DejaVu Sans or a viewer's sans-serif; a table named like
    # markup is text in the figure, never an element
    path = tmp_path / "m.npz"
    np.savez(path, **{"<b>x</b>": np.random.default_rng(8).standard_normal((300, 8)).astype(np.float32)})
    run("report", "-c", path, "--token-key", "<b>x</b>", "--out", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<b>" not in page
    norms = page_figures(page)["norms-token"]
    drawn = re.findall(r"<text\b[^>]*>([^<]*)</text>", norms)
    assert "token table &lt;b&gt;x&lt;/b&gt;: L2 norms of token rows" in " ".join(drawn)
    assert {"L2 norm", "rows (log scale)", "distribution of row norms"} <= set(drawn)
    assert "font-family: 'DejaVu Sans', sans-serif" in norms and "DejaVuSans-" not in norms  # no glyph as a path


def test_the_heatmap_goes_into_the_page_as_its_cells_a_pixel_each(sample_figures):
    # 256 x 256 cosines: a PNG of that many pixels, each its cell's colour, that the viewer scales without smoothing
    # (not a raster of the axes at the page's image dpi, 2.6 pixels a cell)
    import base64
    import io

    import matplotlib
    from PIL import Image

    from embscope.render.report_html import svg
    drawn = svg(sample_figures["positions"], "f1-")
    heatmap = re.search(r'<image [^>]*xlink:href="data:image/png;base64,\n([^"]+)"[^>]*>', drawn)
    assert heatmap is not None and "image-rendering:pixelated" in heatmap.group()
    pixels = np.asarray(Image.open(io.BytesIO(base64.b64decode(heatmap.group(1)))).convert("RGBA"))
    positions = embscope.open(default_checkpoint()).require_position().array.astype(np.float64)
    unit = positions / np.linalg.norm(positions, axis=1, keepdims=True)
    expected = matplotlib.colormaps["RdBu_r"]((unit @ unit.T + 1) / 2, bytes=True)
    assert pixels.shape == (256, 256, 4)
    assert np.abs(pixels.astype(int) - expected).max() <= 1  # a cosine on a colour's edge may round to its neighbour


def test_ids_are_prefixed_where_they_name_or_point_to_an_element_only():
    from embscope.render.report_html import prefixed
    given = ('<g id="a"><path gid="b" _id="c" id="d"/><use xlink:href="#e"/><a href="#f" ahref="#g"/>'
             '<path clip-path="url(#h)"/><text>id=&quot;x&quot;</text></g>')
    assert prefixed(given, "p-") == ('<g id="p-a"><path gid="b" _id="c" id="p-d"/><use xlink:href="#p-e"/>'
                                     '<a href="#p-f" ahref="#g"/><path clip-path="url(#p-h)"/>'
                                     '<text>id=&quot;x&quot;</text></g>')


@pytest.mark.parametrize("dpi", [72, 150])
def test_a_label_line_starts_where_matplotlib_clipping_it_to_the_label_would_start_it(dpi):
    # the reference: matplotlib's own placement, the line from the text's centre clipped to its padded box, then
    # shrunk by 2 points; connector() starts it at the text's lower edge, 4 points down, with no clipping
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from embscope.render.norms_plot import connector
    figure = Drawing(figsize=(6, 4), dpi=dpi)
    FigureCanvasAgg(figure)
    ax = figure.subplots()
    ax.plot(np.arange(10.0))
    common = {"xy": (3, 3), "textcoords": "offset points", "ha": "center", "fontsize": 8}
    starts = []
    for rise in (8, 19, 30):  # the ranked norms' three label heights
        ours = ax.annotate("position 3: z +9.1", xytext=(0, rise), arrowprops=connector("tab:red"), **common)
        theirs = ax.annotate("position 3: z +9.1", xytext=(0, rise), **common,
                             arrowprops={"arrowstyle": "-", "color": "tab:red", "alpha": 0.4, "lw": 0.6})
        starts.append((ours, theirs))
    figure.canvas.draw()
    for ours, theirs in starts:
        drawn, reference = ours.arrow_patch.get_path().vertices, theirs.arrow_patch.get_path().vertices
        assert np.abs(drawn[0] - reference[0]).max() < 0.05 * dpi / 72  # where the line leaves the label
        assert np.abs(drawn[-1] - reference[-1]).max() < 0.05 * dpi / 72  # and where it ends, at the point


def test_a_map_of_few_rows_draws_its_dots_in_the_page_as_vector_marks(sample_figures):
    # 1,024 rows, below plots.DENSE_POINTS: a mark each, no picture (a dense one is: the tests above)
    from embscope.render.report_html import svg
    drawn = svg(sample_figures["map-token"], "f1-")
    assert "<image" not in drawn
    assert len(re.findall(r'<use xlink:href="#f1-m', drawn)) >= 1024


def test_a_column_label_line_starts_at_the_text_end_nearer_its_point():
    # the token histogram's labels stand in a column far from their rows: a line leaves the lower corner of the
    # text's end that faces the point, 4 points along, toward it
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    from embscope.render.norms_plot import connector
    figure = Drawing(figsize=(6, 4), dpi=100)
    FigureCanvasAgg(figure)
    ax = figure.subplots()
    ax.set_xlim(0, 10)
    for start, (x, ha) in ((1.0, (0.02, "left")), (0.0, (0.98, "right"))):
        note = ax.annotate("* (row 42): z +10.4", xy=(5, 0), xycoords=("data", "axes fraction"), xytext=(x, 0.9),
                           textcoords="axes fraction", ha=ha, fontsize=7, arrowprops=connector("tab:red", start))
        figure.canvas.draw()
        box = Text.get_window_extent(note)  # the text alone (an annotation's own extent holds its line too)
        corner = np.array([box.x1 if start else box.x0, box.y0])
        point = ax.transData.transform((5, 0))[0], ax.transAxes.transform((0, 0))[1]
        begin = note.arrow_patch.get_path().vertices[0]
        along = (np.asarray(point) - corner) / np.linalg.norm(np.asarray(point) - corner)
        np.testing.assert_allclose(begin, corner + along * 4 * 100 / 72, atol=0.05)
