"""map: PCA coordinates and explained variance against numpy's SVD worked out here, both routes (SVD and the
d x d covariance) alike, probe words and positions where numpy puts them, flagged rows, the plot, UMAP's extra."""

from __future__ import annotations

import importlib.metadata
import sys

import numpy as np
import pytest
from byte_tokenizer import ByteWordTokenizer
from conftest import run, run_json

import embscope
from embscope.analysis.map import pca_2d
from embscope.analysis.probes import default_probe_words
from embscope.render.map import map_figure

ROWS, DIM, POSITIONS = 300, 10, 40
WORDS = ("dog", "cat", "house", "thing", "ing", "hand", "and", "doghouse")
NAN_ROW = 17


def tables() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    tok = (rng.standard_normal((ROWS, DIM)) * np.linspace(3, 0.5, DIM)).astype(np.float32)  # distinct spreads
    tok[40] *= 30  # a norm anomaly
    walk = np.cumsum(rng.standard_normal((POSITIONS, DIM)), axis=0).astype(np.float32)
    return tok, walk


def numpy_pca(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(coordinates, variance ratio, components) of the two leading components, from numpy's SVD."""
    x = rows.astype(np.float64)
    x -= x.mean(axis=0)
    _, s, vt = np.linalg.svd(x, full_matrices=False)
    return x @ vt[:2].T, (s ** 2 / (s ** 2).sum())[:2], vt[:2]


def aligned(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """`theirs` with each column's sign turned to agree with `ours` (a component's sign is a convention)."""
    return theirs * np.sign(np.sum(ours * theirs, axis=0))


@pytest.fixture
def ckpt(tmp_path, monkeypatch):
    tok, pos = tables()
    path = tmp_path / "model.npz"
    np.savez(path, token_emb=tok, pos_emb=pos)
    monkeypatch.setattr(embscope.Embeddings, "tokenizer", property(lambda self: ByteWordTokenizer(words=WORDS)))
    return path


def test_pca_matches_numpy_svd_on_both_routes():
    tok, _ = tables()
    expected, ratio, components = numpy_pca(tok)
    by_svd = pca_2d(tok)
    by_covariance = pca_2d(tok, max_svd_bytes=0)
    assert (by_svd.route, by_covariance.route) == ("svd", "covariance")
    for found in (by_svd, by_covariance):
        np.testing.assert_allclose(found.coords, aligned(found.coords, expected), atol=1e-9)
        assert found.ratio == pytest.approx(ratio, rel=1e-9)
        assert found.variance == pytest.approx(ratio * np.var(tok.astype(np.float64), axis=0, ddof=1).sum(), rel=1e-9)
    np.testing.assert_allclose(by_svd.coords, by_covariance.coords, atol=1e-9)  # the sign rule makes them agree
    # the sign rule: each component's largest loading is positive
    signs = np.sign(np.sum(by_svd.coords * expected, axis=0))
    turned = components * signs[:, None]
    assert all(row[np.argmax(np.abs(row))] > 0 for row in turned)


def test_rows_holding_nan_are_left_out():
    tok, _ = tables()
    tok[NAN_ROW, 3] = np.nan
    found = pca_2d(tok)
    keep = np.arange(ROWS) != NAN_ROW
    expected, ratio, _ = numpy_pca(tok[keep])
    assert found.left_out.tolist() == [NAN_ROW] and found.used == ROWS - 1
    assert np.isnan(found.coords[NAN_ROW]).all()
    np.testing.assert_allclose(found.coords[keep], aligned(found.coords[keep], expected), atol=1e-9)
    assert found.ratio == pytest.approx(ratio, rel=1e-9)


def test_cli_json_places_probe_words_and_flags(ckpt):
    tok, _ = tables()
    doc = run_json("map", "-c", ckpt, "--words", "dog,house,doghouse")
    assert doc["checkpoint"] == str(ckpt) and doc["step"] is None
    assert doc["method"] == "pca" and doc["table"] == "token" and doc["used"] == ROWS
    expected, ratio, _ = numpy_pca(tok)
    coords = np.array([[p["x"], p["y"]] for p in doc["probes"] if len(p["ids"]) == 1])
    rows = [p["ids"][0] for p in doc["probes"] if len(p["ids"]) == 1]
    assert rows == [256, 258, 263]
    np.testing.assert_allclose(coords, aligned(coords, expected[rows]), atol=1e-9)
    assert doc["explained_variance_ratio"] == pytest.approx(ratio, rel=1e-9)
    norms = run_json("norms", "-c", ckpt, "--table", "token")
    assert [f["id"] for f in doc["flagged"]] == [a["index"] for a in norms["anomalies"]] == [40]
    assert doc["flagged"][0]["label"] == "("  # byte 40


def test_a_word_of_several_tokens_sits_at_the_mean_of_its_points(ckpt):
    doc = run_json("map", "-c", ckpt, "--words", "dogcat,dog,cat")
    merged, dog, cat = doc["probes"]
    assert merged["ids"] == [256, 257]
    assert (merged["x"], merged["y"]) == pytest.approx(((dog["x"] + cat["x"]) / 2, (dog["y"] + cat["y"]) / 2))
    assert "2 tokens (256 'dog', 257 'cat'): placed at the mean of their points" in merged["note"]


def test_default_probe_words_follow_the_rule():
    # the common English words of the list, in its order, that the vocabulary keeps as one token
    assert default_probe_words(ByteWordTokenizer(words=WORDS)) == ["and", "house", "hand", "dog", "cat"]
    assert default_probe_words(embscope.open().tokenizer) == ["the", "and", "king", "man", "woman", "father", "mother",
                                                               "good"]
    # too few of them: lowest ids first; 'ing', 'ush' and 'orb' end 'thing', 'brush' and 'zorb': fragments by the rule
    invented = ("zorb", "orb", "thing", "ing", "brush", "ush", "quen")
    assert default_probe_words(ByteWordTokenizer(words=invented)) == ["zorb", "thing", "brush", "quen"]


def test_position_table_gives_its_path(ckpt):
    _, pos = tables()
    doc = run_json("map", "-c", ckpt, "--table", "position")
    expected, _, _ = numpy_pca(pos)
    path = np.array([[p["x"], p["y"]] for p in doc["path"]])
    assert [p["position"] for p in doc["path"]] == list(range(POSITIONS))
    np.testing.assert_allclose(path, aligned(path, expected), atol=1e-9)
    assert [p["label"] for p in doc["probes"]] == ["0", "1", "2", "9", "19", "29", "39"]
    words = run("map", "-c", ckpt, "--table", "position", "--words", "dog", code=2)  # a combination of options
    assert words.stderr.splitlines()[0] == ("Error: Invalid value for '--words': expected no --words for the position "
                                            "table: its points are positions")


def test_console_names_the_checkpoint_and_the_variance(ckpt):
    tok, _ = tables()
    _, ratio, _ = numpy_pca(tok)
    text = run("map", "-c", ckpt, "--words", "dog").stdout
    lines = text.splitlines()
    assert lines[0] == f"checkpoint: {ckpt} (step unknown)"
    assert lines[1] == f"PCA of the token table 'token_emb': {ROWS} rows x {DIM} (centred rows, numpy SVD)"
    assert lines[2].startswith(f"component 1 explains {ratio[0]:.2%} of the variance")
    flat = " ".join(text.split())  # rich wraps long lines at the terminal's width
    assert "note: dog: the space before 'dog' is a token of its own (id 32), so it was left out" in flat
    assert "1 row flagged as norm anomalies (the rule of `embscope norms`); --plot draws them in red" in flat


def test_plot_draws_rows_flags_and_probe_labels(ckpt, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    from embscope.analysis.map import table_map
    emb = embscope.open(ckpt)
    figure = map_figure(table_map(emb, "token", words=["dog", "cat"]), "model.npz")
    (ax,) = figure.axes
    assert [t.get_text() for t in ax.texts] == ["dog", "cat"]
    assert ax.get_title() == "model.npz - token table token_emb: PCA (centred rows, numpy SVD)"
    assert ax.get_xlabel().startswith("PC1 (") and "of variance" in ax.get_ylabel()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [f"rows ({ROWS})", "norm anomalies (1)"]
    figure = map_figure(table_map(emb, "position"), "model.npz")
    assert len(figure.axes) == 2 and figure.axes[1].get_ylabel() == "position"  # the colour bar
    out = tmp_path / "map.svg"
    doc = run_json("map", "-c", ckpt, "--plot", out)
    assert doc["plot"] == str(out) and out.read_text().rstrip().endswith("</svg>")
    monkeypatch.chdir(tmp_path)
    # `--plot` alone reaches the command as "" (commands.options.with_optional_values fills it in for a bare --plot)
    text = run("map", "-c", ckpt, "--table", "position", "--plot", "").stdout
    name = f"{tmp_path.name}-position-map.png"  # model.npz names no model: its folder does (render.names)
    assert f"plot written to {name}" in text
    assert (tmp_path / name).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    bad = run("map", "-c", ckpt, "--plot", tmp_path / "map.gif", code=2)
    assert bad.exit_code == 2


def test_umap_without_the_extra_names_it(ckpt, monkeypatch):
    monkeypatch.setitem(sys.modules, "umap", None)  # import umap now raises ImportError
    result = run("map", "-c", ckpt, "--method", "umap", code=1)
    assert result.exit_code == 1
    assert result.stderr == "Error: --method umap needs the 'umap-learn' package (pip install 'embscope[umap]')\n"


@pytest.mark.slow  # UMAP compiles with numba for ~15-25 s a process
def test_umap_places_every_finite_row(ckpt):
    pytest.importorskip("umap", reason="umap-learn is not installed")
    doc = run_json("map", "-c", ckpt, "--method", "umap", "--words", "dog,cat")
    assert doc["method"] == "umap" and doc["explained_variance"] is None and doc["used"] == ROWS
    assert all(p["x"] is not None for p in doc["probes"])
    installed = importlib.metadata.version("umap-learn")  # the version the note names, from pip's own record
    assert any(n.startswith(f"UMAP (umap-learn {installed}, cosine metric") for n in doc["notes"])


def test_flagged_rows_cost_no_object_each_until_read(tmp_path):
    import tracemalloc

    from embscope.analysis.map import table_map
    from embscope.core.role import Role
    table = np.random.default_rng(5).standard_normal((200_000, 2)).astype(np.float32)
    table[::2] = 0  # 100,000 zero rows: norm anomalies, as a 1 KB compressed file can hold millions
    np.savez(tmp_path / "zeros.npz", token_emb=table)
    emb = embscope.open(tmp_path / "zeros.npz")
    tracemalloc.start()
    try:
        found = table_map(emb, Role.token)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(found.flagged) >= 100_000 and found.flagged[-1].reason == "zero row"
    assert peak < 15 * table.nbytes  # arrays of the rows, not a FlaggedPoint and a label for each


def test_the_plot_draws_a_bounded_number_of_rows(ckpt, monkeypatch):
    # Agg cannot draw a path through millions of points (OverflowError), and a plot of them takes GBs
    pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    from embscope.analysis.map import table_map
    from embscope.render import map as render_map
    monkeypatch.setattr(render_map, "MAX_DRAWN", 100)
    emb = embscope.open(ckpt)
    (ax,) = map_figure(table_map(emb, "token"), "model.npz").axes
    assert len(ax.collections[0].get_offsets()) == 100  # rows 0, 3, 6, ...
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [f"rows ({ROWS}; 1 in 3 drawn)", "norm anomalies (1)"]
    monkeypatch.setattr(render_map, "MAX_DRAWN", 10)
    ax = map_figure(table_map(emb, "position"), "model.npz").axes[0]
    assert len(ax.lines[0].get_xdata()) == len(ax.collections[0].get_offsets()) == 10
    assert "1 position in 4 drawn" in [t.get_text() for t in ax.texts]


class FakeUmap:
    """umap-learn's face as map uses it: a layout that is each row's first two values."""

    __version__ = "0.0-test"

    class UMAP:
        def __init__(self, **options):
            self.options = options

        def fit_transform(self, rows):
            return np.asarray(rows)[:, :2]


def test_umap_is_a_stage_the_command_shows(ckpt, monkeypatch):
    # umap-learn's import and fit took 20-25 s on the sample with nothing on the terminal: no stage reached it
    monkeypatch.setitem(sys.modules, "umap", FakeUmap)
    heard = []
    result = embscope.table_map(embscope.open(ckpt), embscope.Role.token, method="umap",
                                stages=lambda name: lambda done, total: heard.append((name, done, total)))
    assert heard == [("token table: UMAP", 1, 1)]
    tok, _ = tables()
    assert np.allclose([p.x for p in result.points if p.x is not None][:1], tok[[result.points[0].ids[0]], 0])


def test_library_roles_that_are_none_are_refused_in_one_line(ckpt):
    # table_map(emb, "bogus") raised ValueError from Role(); undertrained_tables(emb, roles="token") went through
    # the string and said "found 't'"
    emb = embscope.open(ckpt)
    with pytest.raises(embscope.TableError, match="^expected a table role token, position or output, found 'bogus'$"):
        embscope.table_map(emb, "bogus")
    with pytest.raises(embscope.OptionError, match=r"found the string 'token': pass \['token'\]$") as err:
        embscope.undertrained_tables(emb, roles="token")
    assert err.value.option == "roles"
