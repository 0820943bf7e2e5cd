"""Plots: files written whole in the format their extension names, and figures whose titles, labels and
annotations say what they show. Figures are checked, not pixels."""

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from conftest import drifting, run, run_json

from embscope.analysis.norms import row_norms, summarize
from embscope.analysis.positions import position_profile
from embscope.render import norms_plot, plots
from embscope.render.names import Output

MAGIC = {"png": b"\x89PNG\r\n\x1a\n", "pdf": b"%PDF-"}


def texts(figure) -> list[str]:
    return [t.get_text() for ax in figure.axes for t in ax.texts]


def assert_format(path, fmt):
    data = path.read_bytes()
    if fmt == "svg":
        assert b"<svg" in data[:2000] and data.rstrip().endswith(b"</svg>")
    else:
        assert data.startswith(MAGIC[fmt])
        if fmt == "pdf":
            assert data.rstrip().endswith(b"%%EOF")


@pytest.fixture
def model(tmp_path):
    pos = drifting(96, 16, seed=1)
    pos[0] *= 5.7
    tok = np.random.default_rng(2).standard_normal((200, 16)).astype(np.float32)
    tok[13] = 0
    path = tmp_path / "tiny.npz"
    np.savez(path, token_emb=tok, pos_emb=pos)
    return path, pos, tok


@pytest.mark.parametrize("fmt", ["png", "svg"])
def test_positions_plot_file_in_each_format(model, tmp_path, fmt):
    path, _, _ = model
    out = tmp_path / f"heat.{fmt}"
    result = run("positions", "-c", str(path), "--plot", str(out))
    assert_format(out, fmt)
    assert f"plot written to {out}" in " ".join(result.stdout.split())
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


@pytest.mark.parametrize("table, fmt", [("position", "png"), ("token", "pdf")])
def test_norms_plot_file(model, tmp_path, table, fmt):
    path, _, _ = model
    out = tmp_path / f"norms.{fmt}"
    result = run("norms", "-c", str(path), "--table", table, "--plot", str(out), "--json")
    assert_format(out, fmt)
    assert f'"plot": "{out}"' in result.stdout


def test_unknown_plot_extension_is_refused_before_any_work(tmp_path):
    missing = tmp_path / "missing.npz"  # were the checkpoint opened first, this would be exit 1
    for command in ("positions", "norms"):
        result = run(command, "-c", str(missing), "--plot", str(tmp_path / "x.jpg"), code=2)
        assert result.stderr.splitlines()[0] == ("Error: Invalid value for '--plot': expected a plot file ending in "
                                                 f".png, .svg or .pdf, found {str(tmp_path / 'x.jpg')!r}")
    assert list(tmp_path.glob("x*")) == []


def nlm_pickle(directory):
    """A from-scratch model's pickled params dict, as nlm writes it."""
    rng = np.random.default_rng(5)
    params = {"token_emb": rng.standard_normal((300, 16)).astype(np.float32), "pos_emb": drifting(64, 16, seed=6),
              "ln_final_g": np.ones(16, dtype=np.float32)}
    path = directory / "run7.pkl"
    with open(path, "wb") as f:
        pickle.dump({"params": params, "step": 1200}, f)
    return path


@pytest.mark.parametrize("argv, name", [(["norms", "--plot"], "-position-norms.png"),
                                        (["positions", "--plot"], "-position-heatmap.png")])
def test_plot_alone_writes_a_png_named_after_the_checkpoint_in_the_working_directory(argv, name, tmp_path,
                                                                                     monkeypatch):
    work, checkpoints = tmp_path / "work", tmp_path / "checkpoints"
    work.mkdir()
    checkpoints.mkdir()
    monkeypatch.chdir(work)
    for checkpoint, stem in ((None, "nlm"), (nlm_pickle(checkpoints), "run7")):  # the sample is nlm/model.pkl
        result = run(*argv, *(["-c", checkpoint] if checkpoint else []))  # exactly as typed, nothing more
        assert_format(work / f"{stem}{name}", "png")
        assert f"plot written to {stem}{name}" in result.stdout
    assert sorted(p.name for p in checkpoints.iterdir()) == ["run7.pkl"]  # nothing beside the checkpoint


def test_plot_alone_before_another_option(model, tmp_path, monkeypatch):
    path, _, _ = model
    monkeypatch.chdir(tmp_path)
    doc = run_json("norms", "--plot", "-c", path)
    assert doc["plot"] == "tiny-position-norms.png" and (tmp_path / "tiny-position-norms.png").is_file()


def test_a_plot_never_replaces_a_file_that_was_read(model, tmp_path):
    path, _, _ = model
    before = path.read_bytes()
    link = tmp_path / "same.png"
    os.link(path, link)  # the checkpoint under another name, and an extension a plot may take
    for target in (link, tmp_path / "." / "same.png"):
        result = run("norms", "-c", path, "--plot", target, code=1)
        assert result.stderr == (f"Error: expected the plot file to name a new file, found {str(target)!r}, a file "
                                 "this answer was read from: it is never written over\n")
    assert path.read_bytes() == before


def test_a_legal_long_plot_name_is_written(model, tmp_path):
    path, _, _ = model
    out = tmp_path / ("b" * 240 + ".png")  # 244 characters: a temporary name built from it would not fit
    run("norms", "-c", path, "--plot", out)
    assert_format(out, "png")
    result = run("norms", "-c", path, "--plot", tmp_path / ("b" * 300 + ".png"), code=1)
    assert result.stderr.startswith("Error: expected to write the plot file ") and "File name too long" in result.stderr
    assert result.stderr.count("\n") == 1


def test_missing_plot_directory_is_an_error(model, tmp_path):
    path, _, _ = model
    result = run("norms", "-c", str(path), "--plot", str(tmp_path / "nowhere" / "n.png"), code=1)
    assert "expected an existing directory for the plot file" in result.stderr


def test_positions_figure_says_what_it_shows():
    table = drifting(80, 8, seed=3)
    profile, matrix = position_profile(table)
    figure = plots.positions_figure(matrix, profile.mean, profile.std, profile.nearest_is_adjacent,
                                    "ckpt.pt", "transformer.wpe.weight")
    heat, curve, _colorbar = figure.axes
    assert figure._suptitle.get_text() == "ckpt.pt - position table transformer.wpe.weight"
    assert heat.get_title() == "cosine between positions (80 x 80)"
    assert (heat.get_xlabel(), heat.get_ylabel()) == ("position j", "position i")
    assert curve.get_title() == "similarity by distance"
    assert curve.get_xlabel() == "distance k (positions, log scale)" and curve.get_ylabel() == "cos(p_i, p_i+k)"
    unit = table.astype(np.float64) / np.linalg.norm(table.astype(np.float64), axis=1, keepdims=True)
    first = np.mean(np.einsum("ij,ij->i", unit[:-1], unit[1:]))
    last = unit[0] @ unit[-1]
    assert f"k=1: {first:+.3f}" in texts(figure) and f"k=79: {last:+.3f} (one pair)" in texts(figure)
    end = [line for line in curve.get_lines() if list(line.get_xdata()) == [79]]
    assert end and end[0].get_markerfacecolor() == "white"  # the one-pair end point is drawn hollow
    assert any(t.startswith("nearest neighbour is adjacent (i+-1) for ") for t in texts(figure))


def test_position_norms_figure_labels_the_flagged_row():
    table = drifting(120, 8, seed=4)
    table[7] *= 5.7
    summary = summarize(row_norms(table))
    flagged = [(a.index, a.norm, a.z) for a in summary.anomalies]
    assert [f[0] for f in flagged] == [7]
    figure = position_figure(summary, flagged, "m.safetensors", "position table wpe", first_row=2)
    ax = figure.axes[0]
    assert ax.get_title() == "m.safetensors - position table wpe: L2 norm by position"
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("position (row - 2)", "L2 norm")
    norm = float(np.linalg.norm(table[7].astype(np.float64)))
    assert texts(figure) == [f"position 5: {norm:.3g}, z {summary.anomalies[0].z:+.3g}"]


def position_figure(summary, flagged, checkpoint, table, first_row=0):
    """The position-norms figure `norms --plot` draws, with no never-trained range and no trend line."""
    return norms_plot.position_norms_figure(summary.norms, summary.median, flagged, [], "", None, checkpoint, table,
                                            first_row)


def token_figure(summary, names, padding_from=None, **kwargs):
    return norms_plot.token_norms_figure(summary.norms, summary.median, summary.mad, summary.threshold,
                                         summary.flagged, summary.robust_z, names, "ckpt", "token table wte",
                                         padding_from, **kwargs)


def test_token_norms_figure_draws_names_literally():
    table = np.random.default_rng(5).standard_normal((300, 8)).astype(np.float32)
    table[42] *= 40
    summary = summarize(row_norms(table))
    assert [a.index for a in summary.anomalies] == [42]
    names = {row: f"$tok{row}$" for row in norms_plot.ranked_rows(summary.norms)}
    names[42] = "a$b\\c\x1b"
    figure = token_figure(summary, names)
    hist, ranked = figure.axes
    assert figure._suptitle.get_text() == "ckpt - token table wte: L2 norms of token rows"
    assert (hist.get_xlabel(), hist.get_ylabel()) == ("L2 norm", "rows (log scale)")
    assert ranked.get_title() == "lowest and highest 10 rows"
    assert texts(figure) == [f"a$b\\c\\x1b (row 42): z {summary.anomalies[0].z:+.3g}"]
    labels = [t.get_text() for t in ranked.get_yticklabels()]
    lowest = int(np.argmin(summary.norms))
    assert labels[0] == f"$tok{lowest}$ (row {lowest})" and labels[-1] == "a$b\\c\\x1b (row 42)"
    figure.canvas.draw()  # "$" and "\\" must not be parsed as math


def test_token_norms_figure_stays_readable_with_many_flagged_rows():
    rng = np.random.default_rng(7)
    table = rng.standard_normal((2000, 16)).astype(np.float32)
    table[:175] *= 3  # rows that kept a large initial norm
    summary = summarize(row_norms(table))
    assert len(summary.anomalies) >= 150
    figure = token_figure(summary, {}, padding_from=1990)
    hist, ranked = figure.axes
    assert len(hist.texts) == 10  # at most 10 labels, the most extreme rows
    z = sorted((abs(a.z) for a in summary.anomalies), reverse=True)
    assert hist.texts[0].get_text().endswith(f"z {summary.anomalies[0].z:+.3g}") and abs(summary.anomalies[0].z) == z[0]
    labels = hist.get_legend_handles_labels()[1]
    assert f"flagged: |robust z| > 6 ({len(summary.anomalies)})" in labels
    assert "|robust z| <= 6: not flagged" in labels and "padding rows past the tokenizer (10)" in labels
    for ax in (hist, ranked):  # legends below the data
        assert ax.get_legend().get_bbox_to_anchor().y0 < ax.bbox.y0
    assert [p.get_label() for p in ranked.get_legend().get_patches()][:2] == ["not flagged", "flagged"]
    shown = norms_plot.ranked_rows(summary.norms)
    bars = ranked.patches[:len(shown)]
    red = [bar.get_facecolor() for bar, row in zip(bars, shown) if row < 175]
    assert red and all(colour == red[0] for colour in red) and red[0] != bars[0].get_facecolor()
    assert 0 < ranked.get_xlim()[0] < summary.norms[shown].min()  # the bars start where differences show, not at 0


def test_a_legend_names_only_what_its_panel_draws():
    """A table every row of which never trained (a Gaussian draw): no "rows (0)" histogram in the legend, no
    "not flagged" bar among the ranked rows; a row with no token string is named by its number once."""
    table = np.random.default_rng(5).standard_normal((300, 8)).astype(np.float32)
    table[42] *= 40
    summary = summarize(row_norms(table))
    figure = token_figure(summary, {}, untrained=np.arange(300))
    hist, ranked = figure.axes
    labels = hist.get_legend_handles_labels()[1]
    assert labels == ["never trained (300)", f"flagged: |robust z| > 6 ({len(summary.anomalies)})",
                      "|robust z| <= 6: not flagged"]
    assert [p.get_label() for p in ranked.get_legend().get_patches()] == ["flagged", "never trained",
                                                                          "band of unflagged norms"]
    assert texts(figure)[0] == f"row 42: z {summary.anomalies[0].z:+.3g}"
    assert [t.get_text() for t in ranked.get_yticklabels()][-1] == "row 42"


def test_rows_without_a_finite_norm_are_listed_not_drawn():
    table = drifting(60, 4, seed=6)
    table[3, 0] = np.nan
    table[9, 1] = np.inf
    summary = summarize(row_norms(table))
    flagged = [(a.index, a.norm, a.z) for a in summary.anomalies]
    figure = position_figure(summary, flagged, "c", "t")
    assert texts(figure) == ["not drawn: position 3 (NaN), position 9 (Inf)"]
    figure = token_figure(summary, {3: "dog"})
    assert texts(figure) == ["no finite norm: dog (row 3), row 9"]


def test_norms_plot_size_and_dpi(model, tmp_path):
    path, _, _ = model
    out = tmp_path / "n.png"
    run("norms", "-c", str(path), "--table", "token", "--plot", str(out), "--size", "8x4", "--dpi", "50")
    header = out.read_bytes()[16:24]  # PNG IHDR: width, height
    assert (int.from_bytes(header[:4], "big"), int.from_bytes(header[4:], "big")) == (400, 200)
    result = run("norms", "-c", str(path), "--plot", str(out), "--size", "4by3", code=2)
    assert result.stderr.startswith("Error: Invalid value for '--size': expected WxH in inches")


def test_norms_plot_pixels_are_bounded(model, tmp_path):
    path, _, _ = model
    out = tmp_path / "n.png"
    result = run("norms", "-c", path, "--plot", out, "--size", "100x100", "--dpi", "1200", code=2)  # 58 GB of RGBA
    assert result.stderr.splitlines()[0] == ("Error: Invalid value for '--dpi': expected a plot of at most 120 million "
                                             "pixels, found 100x100 inches at 1200 dpi: 14,400 million")
    assert not out.exists()


def test_size_and_dpi_go_with_plot(model):
    path, _, _ = model
    for option, value in (("--size", "8x4"), ("--dpi", "50")):
        result = run("norms", "-c", path, option, value, code=2)
        assert result.stderr.splitlines()[0] == "Error: --size and --dpi size the plot: they go with --plot"


def test_profile_says_it_does_not_change_the_plot():
    assert "It does not change --plot" in " ".join(run("positions", "--help").stdout.split())


def test_save_replaces_the_file_whole(tmp_path):
    target = tmp_path / "fig.png"
    target.write_bytes(b"old")
    figure = plots.new_figure(2, 2)
    figure.subplots().plot([0, 1], [0, 1])
    assert plots.save(lambda: figure, Output(target)) == target
    assert target.read_bytes().startswith(MAGIC["png"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig.png"]
    assert target.stat().st_mode & 0o044  # readable like any file the user writes, not mkstemp's 0600


def test_starting_the_cli_does_not_import_matplotlib():
    code = "import sys, embscope.cli; print('matplotlib' in sys.modules, 'torch' in sys.modules)"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert found.stdout.split() == ["False", "False"]
