"""Plots a person can read: titles wrapped, never cut; strings clipped with an ellipsis, never a length note;
probe-word labels that never overlap (boxes measured by the renderer); range bands with one label each; the
compare plot naming its checkpoints and saying when it shows Procrustes-aligned cosines; the spectrum's axis
running to min(V, d)."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from byte_tokenizer import ByteWordTokenizer

import embscope
from embscope.analysis.compare import CompareOptions
from embscope.analysis.geometry import geometry
from embscope.analysis.map import table_map
from embscope.render import compare as compare_text
from embscope.render.compare_plot import figure as compare_figure
from embscope.render.geometry_plot import figure as geometry_figure
from embscope.render.label_placement import place_labels
from embscope.render.map import map_figure
from embscope.render.plot_style import ELLIPSIS, clipped, range_bands, runs, wrapped
from embscope.render.plots import new_figure

pytest.importorskip("matplotlib", reason="matplotlib is not installed")

WORDS = tuple(f"word{n}" for n in range(14))


def overlapping(boxes: list) -> list[tuple[int, int]]:
    return [(i, j) for (i, a), (j, b) in combinations(enumerate(boxes), 2)
            if min(a.x1, b.x1) > max(a.x0, b.x0) and min(a.y1, b.y1) > max(a.y0, b.y0)]


def test_clipped_keeps_both_ends_and_says_no_length():
    assert clipped("short") == "short"
    long = clipped("/a/very/long/folder/" * 20 + "model.safetensors", 40)
    assert len(long) == 40 and ELLIPSIS in long and long.endswith("model.safetensors")
    assert "characters" not in long


def test_wrapped_titles_fit_their_width_and_lose_nothing():
    title = "checkpoints/" * 12 + "model.safetensors, step 3000 - token table model.embed_tokens.weight: geometry"
    lines = wrapped(title, 6.0).splitlines()
    assert len(lines) > 1 and all(len(line) <= 6.0 * 72 / (12 * 0.6) for line in lines)
    assert "".join(lines).replace(" ", "") == title.replace(" ", "")


def test_runs_collapse_rows_into_ranges():
    assert runs([5, 3, 4, 9, 215, 216, 217, 3]) == [(3, 5), (9, 9), (215, 217)]
    assert runs([]) == []
    assert runs([1, 3, 6, 7, 10], gap=1) == [(1, 3), (6, 7), (10, 10)]  # one missing row between joins them


def test_range_bands_shade_each_run_with_one_label():
    figure = new_figure(8, 4)
    ax = figure.subplots()
    ax.plot(np.arange(600), np.ones(600))
    labels = range_bands(ax, [(215, 511, "never trained"), (3, 3, "flagged")])
    assert [label.get_text() for label in labels] == ["215-511: never trained", "3: flagged"]
    spans = [patch.get_x() for patch in ax.patches], [patch.get_width() for patch in ax.patches]
    assert spans == ([214.5, 2.5], [297.0, 1.0])  # rows first..last, each row a unit wide
    many = range_bands(ax, [(n * 10, n * 10 + 2, "x") for n in range(15)])
    assert len(many) == 10 and len(ax.patches) == 2 + 15  # every band shaded, ten labelled


def test_labels_placed_on_one_point_never_overlap():
    figure = new_figure(6, 5)
    ax = figure.subplots()
    ax.plot([0, 1], [0, 1], "o")
    placed = place_labels(figure, ax, [(f"label number {n}", 0.5, 0.5) for n in range(20)], limit=20)
    renderer = figure.canvas.get_renderer()
    boxes = [label.get_window_extent(renderer) for label in placed]
    assert 1 < len(placed) < 20 and overlapping(boxes) == []
    assert f"{20 - len(placed)} labels left out (at most 20 drawn, none over another)" in [t.get_text() for t in ax.texts]
    spread = new_figure(6, 5)
    ax = spread.subplots()
    ax.plot([0, 14], [0, 14], "o")
    assert len(place_labels(spread, ax, [(f"w{n}", n, n) for n in range(14)])) == 10  # far apart, but ten at most


def test_the_map_labels_of_crowded_probe_words_do_not_overlap(tmp_path, monkeypatch):
    rng = np.random.default_rng(5)
    table = rng.standard_normal((256 + len(WORDS), 8)).astype(np.float32)
    table[256:] = table[256] + 1e-3 * rng.standard_normal((len(WORDS), 8)).astype(np.float32)  # one crowded spot
    np.savez(tmp_path / "model.npz", token_emb=table)
    monkeypatch.setattr(embscope.Embeddings, "tokenizer", property(lambda self: ByteWordTokenizer(words=WORDS)))
    found = table_map(embscope.open(tmp_path / "model.npz"), "token", words=list(WORDS))
    figure = map_figure(found, "model.npz")
    (ax,) = figure.axes
    labels = [t for t in ax.texts if t.get_text() in WORDS]
    figure.canvas.draw()  # boxes as the renderer draws them
    renderer = figure.canvas.get_renderer()
    assert 1 < len(labels) < len(WORDS) and overlapping([t.get_window_extent(renderer) for t in labels]) == []


def test_compare_plot_names_its_checkpoints_and_says_when_aligned(tmp_path):
    rng = np.random.default_rng(6)
    a = rng.standard_normal((60, 6)).astype(np.float32)
    rotation = np.linalg.qr(rng.standard_normal((6, 6)))[0].astype(np.float32)
    np.savez(tmp_path / "first.npz", token_emb=a)
    np.savez(tmp_path / "second.npz", token_emb=a @ rotation)
    paths = [tmp_path / "first.npz", tmp_path / "second.npz"]
    for align in (False, True):
        series = embscope.compare_series(paths, embscope.open, options=CompareOptions(align=align, sample=0))
        labels = compare_text.Labels(series.checkpoints, paths[0], series.table_names, series.names, series.names_b)
        figure = compare_figure(series.comparison, labels)
        title = figure.texts[0].get_text().replace("\n", " ")
        assert "A = first.npz" in title and "B = second.npz" in title
        assert ("Procrustes" in title) is align
        assert (figure.axes[0].get_title() == "row cosine A vs B, Procrustes-aligned") is align


def test_the_spectrum_axis_runs_to_the_smaller_of_rows_and_width(tmp_path):
    for rows, dim in ((40, 16), (10, 16)):
        np.savez(tmp_path / "model.npz", token_emb=np.random.default_rng(rows).standard_normal((rows, dim)).astype(np.float32))
        found = geometry(embscope.open(tmp_path / "model.npz"), "token")
        spectrum_ax = geometry_figure(found, "model.npz").axes[1]
        assert spectrum_ax.get_xlim() == (1, min(rows, dim))
