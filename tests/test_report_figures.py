"""The HTML report's own SVG figures (render.svg_chart, render.report_figures): their PNG against Pillow's decoder,
their colours against matplotlib's colormaps, histograms against numpy, dense series thinned, and the report's
figures drawn without matplotlib, each naming its checkpoint."""

from __future__ import annotations

import base64
import io
import re
import sys

import numpy as np
import pytest
from conftest import run, run_json

from embscope.render import svg_chart
from embscope.render.svg_chart import RDBU_R, VIRIDIS, Axis, Figure, Panel, nice_ticks, png, rgb


def test_png_decodes_to_its_pixels():
    from PIL import Image  # matplotlib's own image library, as the reference decoder
    pixels = np.random.default_rng(0).integers(0, 256, (7, 5, 3), dtype=np.uint8)
    decoded = np.asarray(Image.open(io.BytesIO(base64.b64decode(png(pixels)))).convert("RGB"))
    assert np.array_equal(decoded, pixels)


@pytest.mark.parametrize("name, palette, tolerance", [("RdBu_r", RDBU_R, 3), ("viridis", VIRIDIS, 4)])
def test_palettes_follow_matplotlibs(name, palette, tolerance):
    import matplotlib
    values = np.linspace(0, 1, 101)
    ours = rgb(values, 0.0, 1.0, palette).astype(int)
    theirs = np.round(matplotlib.colormaps[name](values)[:, :3] * 255).astype(int)
    assert np.abs(ours - theirs).max() <= tolerance  # matplotlib's own table has 256 steps; ours interpolates
    assert rgb(np.array([np.nan]), 0, 1, palette).tolist() == [[255, 255, 255]]


def test_ticks_are_round_and_span_the_axis():
    assert nice_ticks(0.0, 1.0) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(-0.53, 2.9) == [0.0, 1.0, 2.0] or nice_ticks(-0.53, 2.9) == [-0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
    assert [t for t, _ in Axis(log=True, low=1, high=1000).ticks()] == [1, 10, 100, 1000]


def test_a_histogram_draws_numpys_counts():
    values = np.random.default_rng(1).standard_normal(500)
    edges = np.linspace(-4, 4, 17)
    panel = Panel("h", Axis(), Axis())
    panel.histogram(values, edges, "tab:blue")
    svg = Figure("t", [[panel]]).svg()
    counts, _ = np.histogram(values, edges)
    (path,) = re.findall(r'<path d="([^"]+)"', svg)
    assert path.count("M") == int((counts > 0).sum())
    heights = [float(b) - float(t) for b, t in re.findall(r"M[\d.]+ ([\d.]+)V([\d.]+)", path)]
    tallest = max(heights)
    assert np.allclose(np.array(heights) / tallest, counts[counts > 0] / counts.max(), atol=0.01)


def test_a_dense_scatter_is_thinned_and_says_so():
    rng = np.random.default_rng(2)
    panel = Panel("map", Axis(), Axis())
    panel.dots(rng.standard_normal(50_000), rng.standard_normal(50_000), "tab:blue", "rows (50,000)")
    svg = Figure("t", [[panel]]).svg()
    assert svg.count("<circle") == svg_chart.MAX_POINTS
    assert f"rows (50,000); {svg_chart.MAX_POINTS:,} of them drawn, evenly spaced" in svg


def test_strings_from_the_file_are_escaped_and_cut():
    panel = Panel("<b>title</b>", Axis("x"), Axis("y"))
    panel.bars([1.0, 2.0], ["<script>", "a" * 500], ["tab:blue", "tab:red"])
    svg = Figure("\x1b[2J", [[panel]]).svg()
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "\\x1b[2J" in svg and "a" * 60 not in svg


def test_the_report_draws_its_figures_without_matplotlib(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # the page must not need it
    run("report", "--out", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    figures = re.findall(r"<svg.*?</svg>", page, flags=re.DOTALL)
    assert len(figures) == page.count("<svg") == 8  # two of them the geometry of the token and position tables
    assert list(tmp_path.iterdir()) == [tmp_path / "r.html"]
    geometry = [figure for figure in figures if ": geometry" in figure]
    assert len(geometry) == 2 and "token table token_emb: geometry" in geometry[0]
    top = run_json("geometry")["dimensions"][:3]  # the dimensions the figure names are those geometry lists first
    assert all(f"dim {d['dim']}: {d['share']:.1%}" in geometry[0] for d in top)
    title = "bundled sample (Shakespeare GPT), step 3000"
    assert all(title in figure for figure in figures)
    heatmap = next(f for f in figures if "cosine between positions (256 x 256)" in f)
    assert heatmap.count("data:image/png;base64,") == 2  # the heatmap and its colour bar, one image each
    assert "<rect" not in heatmap.split("<image")[0].split("clipPath")[-1]


def test_two_checkpoints_compare_figure_draws_every_row(tmp_path):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((300, 8)).astype(np.float32)
    b = a + np.float32(0.3) * rng.standard_normal(a.shape).astype(np.float32)
    np.savez(tmp_path / "a.npz", token_emb=a)
    np.savez(tmp_path / "b.npz", token_emb=b)
    run("report", "-c", tmp_path / "a.npz", "-c", tmp_path / "b.npz", "--out", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    compare = re.findall(r'<figure id="figure-compare".*?</figure>', page, flags=re.DOTALL)[0]
    assert "A = a.npz (step unknown)  vs  B = b.npz (step unknown)" in compare  # each named by its stem
    assert compare.count("<circle") == 2 * 300  # every row in the norm scatter and in the change by row
    cosines = np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert f"token: mean {cosines.mean():+.3f} over 300 rows" in compare


def test_a_dense_plot_file_in_svg_is_rasterized(tmp_path):
    rows = 6000  # past plots.DENSE_POINTS
    np.savez(tmp_path / "big.npz", token_emb=np.random.default_rng(4).standard_normal((rows, 8)).astype(np.float32))
    run("map", "-c", tmp_path / "big.npz", "--plot", tmp_path / "map.svg")
    svg = (tmp_path / "map.svg").read_text()
    markers = len(re.findall(r'<use xlink:href="#m', svg))  # a marker drawn per point (glyphs are #DejaVu...)
    assert "<image" in svg and markers < 50  # one picture of the dots, not a marker per row
