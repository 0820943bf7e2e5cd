"""`embscope compare`: per-row change, bitwise unchanged rows, neighbour overlap, trajectories over a folder of
mixed formats, Procrustes alignment, token matching and differing shapes; every figure against plain numpy."""

from __future__ import annotations

import json
import pickle
import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from conftest import run, run_json, write_npz

from embscope.analysis.compare import by_index, neighbor_overlap, procrustes, row_changes

V, D, T = 400, 24, 48


def usage_error(result) -> str:
    """A usage error's text as one line, whether typer draws it in a box or not."""
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    return " ".join(result.stderr.translate({ord(c): " " for c in "│╭╮╰╯─"}).split())


def numpy_rows(a, b):
    """Cosine, norms and relative change of each row pair, the plain way."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.sum(a * b, axis=1) / (na * nb)
        rel = np.linalg.norm(b - a, axis=1) / na
    return cos, na, nb, rel


def planted_series(seed: int = 0):
    """A start, and a later table with 12 rows never touched, 5 planted movers, a zero row, and drift elsewhere."""
    rng = np.random.default_rng(seed)
    start = rng.standard_normal((V, D)).astype(np.float32)
    start[7] = 0.0  # a zero row in A: cosine undefined, relative change Inf
    later = start + np.float32(0.05) * rng.standard_normal((V, D)).astype(np.float32)
    untouched = np.arange(300, 312)
    later[untouched] = start[untouched]
    movers = np.array([20, 99, 150, 222, 351])
    later[movers] = rng.standard_normal((len(movers), D)).astype(np.float32) * 3
    return start, later, untouched, movers


def test_rows_against_numpy(tmp_path):
    start, later, untouched, movers = planted_series()
    rng = np.random.default_rng(1)
    pos_a = rng.standard_normal((T, D)).astype(np.float32)
    pos_b = pos_a + np.float32(0.1) * rng.standard_normal((T, D)).astype(np.float32)
    a = write_npz(tmp_path / "a.npz", start, pos_a)
    b = write_npz(tmp_path / "b.npz", later, pos_b)
    doc = run_json("compare", a, b, "--sample", "50", "--top", "8")

    cos, na, nb, rel = numpy_rows(start, later)
    defined = ~np.isnan(cos)
    token = doc["tables"]["token"]
    assert token["rows_compared"] == V and token["rows_with_cosine"] == V - 1
    assert token["mean_row_cosine"] == pytest.approx(cos[defined].mean(), rel=1e-12)
    assert token["median_row_cosine"] == pytest.approx(np.median(cos[defined]), rel=1e-12)
    for p, value in zip((1, 5, 95), np.percentile(cos[defined], [1, 5, 95])):
        assert token["percentiles"][str(p)] == pytest.approx(value, rel=1e-12)
    assert token["unchanged_rows"] == len(untouched)
    assert token["unchanged_ids"] == untouched.tolist()
    assert token["mean_norm_a"] == pytest.approx(na.mean(), rel=1e-12)
    assert token["mean_norm_b"] == pytest.approx(nb.mean(), rel=1e-12)

    # the zero row leads (Inf, shown as null), then the planted movers, largest relative change first
    ranked = [m["id"] for m in token["movers"]]
    assert ranked[0] == 7 and token["movers"][0]["relative_change"] is None and token["movers"][0]["cosine"] is None
    assert sorted(ranked[1:6]) == sorted(movers.tolist())
    assert ranked[1:6] == sorted(movers.tolist(), key=lambda r: -rel[r])
    for mover in token["movers"][1:]:
        i = mover["id"]
        assert mover["cosine"] == pytest.approx(cos[i], rel=1e-12)
        assert mover["norm_a"] == pytest.approx(na[i], rel=1e-12)
        assert mover["norm_b"] == pytest.approx(nb[i], rel=1e-12)
        assert mover["relative_change"] == pytest.approx(rel[i], rel=1e-12)
        assert mover["token"] == f"#{i}"  # no tokenizer beside the files
    changed = np.setdiff1d(np.flatnonzero(np.isfinite(rel)), untouched)
    expected_stable = changed[np.argsort(rel[changed], kind="stable")][:8]
    assert [s["id"] for s in token["stable"]] == expected_stable.tolist()

    position = doc["tables"]["position"]
    pcos, pna, _, _ = numpy_rows(pos_a, pos_b)
    assert position["mean_row_cosine"] == pytest.approx(pcos.mean(), rel=1e-12)
    assert position["neighbor_overlap"] is None
    first_state = doc["states"]["position"][0]
    assert first_state["position0_norm"] == pytest.approx(pna[0], rel=1e-12)
    assert first_state["mean_norm"] == pytest.approx(pna.mean(), rel=1e-12)


def test_json_keys_and_console(tmp_path):
    start, later, _, _ = planted_series()
    a, b = write_npz(tmp_path / "a.npz", start), write_npz(tmp_path / "b.npz", later)
    doc = run_json("compare", a, b, "--sample", "20")
    assert doc["checkpoint"] == str(a) and doc["step"] is None
    assert doc["checkpoints"] == [{"path": str(a), "step": None, "step_from": None},
                                  {"path": str(b), "step": None, "step_from": None}]
    assert "trajectory" not in doc  # two checkpoints: no trajectory
    assert list(doc["tables"]) == ["token"]
    token = doc["tables"]["token"]
    for key in ("mean_row_cosine", "median_row_cosine", "percentiles", "unchanged_rows", "movers", "stable",
                "neighbor_overlap"):
        assert key in token
    assert set(token["movers"][1]) == {"id", "token", "cosine", "norm_a", "norm_b", "relative_change"}
    text = run("compare", a, b, "--sample", "20").stdout
    assert text.splitlines()[0] == f"compare: A = {a} (step unknown), B = {b} (step unknown)"
    assert "rows bitwise unchanged: 12: #300, #301," in text
    assert "top movers (largest relative change first)" in text


def test_neighbor_overlap_against_brute_force(tmp_path):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((120, 8)).astype(np.float32)
    b = a.copy()
    b[:40] += np.float32(0.8) * rng.standard_normal((40, 8)).astype(np.float32)
    k = 5

    def top(table):
        unit = table / np.linalg.norm(table, axis=1, keepdims=True)
        scores = unit @ unit.T
        np.fill_diagonal(scores, -np.inf)
        return [set(np.argsort(-row, kind="stable")[:k].tolist()) for row in scores]

    na, nb = top(a.astype(np.float64)), top(b.astype(np.float64))
    expected = np.mean([len(x & y) / len(x | y) for x, y in zip(na, nb)])
    pa, pb = write_npz(tmp_path / "a.npz", a), write_npz(tmp_path / "b.npz", b)
    doc = run_json("compare", pa, pb, "-k", str(k), "--sample", "1000")
    overlap = doc["tables"]["token"]["neighbor_overlap"]
    assert overlap["rows"] == 120 and overlap["k"] == k
    assert overlap["mean_jaccard"] == pytest.approx(expected, rel=1e-12)
    assert 0.2 < expected < 0.95  # the planted change moved some neighbour sets, not all


def test_neighbor_overlap_counts_unpaired_neighbours_in_the_union():
    a = np.eye(6, dtype=np.float32) + 0.1
    b = a.copy()
    pairing = by_index(6, 6)
    found = neighbor_overlap(a, b, pairing, np.ones(6, dtype=bool), [], k=2, sample=6)
    assert np.allclose(found.jaccard, 1.0)
    shorter = by_index(6, 4)  # B has rows 0-3 only: A's neighbours 4 and 5 have no partner
    found = neighbor_overlap(a, b[:4], shorter, np.ones(4, dtype=bool), [], k=5, sample=4)
    # row 0 in A: neighbours {1, 2, 3, 4, 5}; in B: {1, 2, 3}; 3 shared of 5
    assert found.jaccard[0] == pytest.approx(3 / 5)


def test_procrustes_recovers_the_rotation(tmp_path):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((1500, 64))
    rotation, _ = np.linalg.qr(rng.standard_normal((64, 64)))
    b = a @ rotation + 0.01 * rng.standard_normal(a.shape)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    found = procrustes(a32, b32, by_index(1500, 1500))
    # B R_found ~ A, so R_found undoes the rotation: R_found ~ rotation^T
    assert np.abs(found.rotation - rotation.T).max() < 0.01
    assert np.allclose(found.rotation @ found.rotation.T, np.eye(64), atol=1e-10)
    direct = np.linalg.norm(b32.astype(np.float64) @ found.rotation - a32) / np.linalg.norm(a32.astype(np.float64))
    assert found.residual == pytest.approx(direct, rel=1e-6)
    assert 0.005 < found.residual < 0.02  # the noise: 0.01 per value against values of about 1

    pa, pb = write_npz(tmp_path / "a.npz", a32), write_npz(tmp_path / "b.npz", b32)
    raw = run_json("compare", pa, pb, "--sample", "10")
    token = raw["tables"]["token"]
    assert abs(token["mean_row_cosine"]) < 0.1 and token["looks_like_different_runs"] is True
    assert any("try --align procrustes" in note for note in raw["notes"])
    aligned = run_json("compare", pa, pb, "--sample", "10", "--align", "procrustes")["tables"]["token"]
    assert aligned["alignment"]["residual"] == pytest.approx(direct, rel=1e-6)
    assert aligned["alignment"]["mean_row_cosine_unaligned"] == pytest.approx(token["mean_row_cosine"], rel=1e-12)
    cos, _, _, _ = numpy_rows(a32, b32.astype(np.float64) @ found.rotation)
    assert aligned["mean_row_cosine"] == pytest.approx(cos.mean(), rel=1e-9)
    assert aligned["looks_like_different_runs"] is False


def test_differing_shapes_compare_the_overlap(tmp_path):
    rng = np.random.default_rng(6)
    tok = rng.standard_normal((300, D)).astype(np.float32)
    grown = np.concatenate([tok, rng.standard_normal((50, D)).astype(np.float32)])
    pos = rng.standard_normal((64, D)).astype(np.float32)
    a = write_npz(tmp_path / "a.npz", tok, pos[:32])
    b = write_npz(tmp_path / "b.npz", grown, pos)
    doc = run_json("compare", a, b, "--sample", "10")
    assert doc["tables"]["token"]["rows_compared"] == 300
    assert doc["tables"]["token"]["unchanged_rows"] == 300
    assert doc["tables"]["position"]["rows_compared"] == 32
    assert "token table: A has 300 rows and B has 350: the first 300 are compared" in doc["notes"]
    assert "position table: A has 32 positions and B has 64: the first 32 are compared" in doc["notes"]
    wide = write_npz(tmp_path / "wide.npz", rng.standard_normal((300, 2 * D)).astype(np.float32))
    result = run("compare", a, wide, "--json")
    assert json.loads(result.stdout)["tables"] == {}
    assert (f"the token tables are {D} and {2 * D} wide: rows of different widths cannot be compared, so this table "
            "is left out") in json.loads(result.stdout)["notes"]


def write_wordlevel(directory, words):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    tokenizer = tokenizers.Tokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()
    directory.mkdir()
    tokenizer.save(str(directory / "tokenizer.json"))


def test_match_tokens_pairs_rows_by_string(tmp_path):
    rng = np.random.default_rng(7)
    words_a = ["[UNK]", "king", "queen", "dog", "cat", "house", "tree", "river"]
    words_b = ["[UNK]", "river", "cat", "moon", "king", "dog", "sun", "queen", "tree"]
    vectors = {w: rng.standard_normal(D).astype(np.float32) for w in set(words_a) | set(words_b)}
    for name, words in (("a", words_a), ("b", words_b)):
        write_wordlevel(tmp_path / name, words)
        np.savez(tmp_path / name / "model.npz", token_emb=np.stack([vectors[w] for w in words]))
    doc = run_json("compare", tmp_path / "a", tmp_path / "b", "--match", "tokens", "--words", "king", "-k", "4")
    token = doc["tables"]["token"]
    shared = sorted(set(words_a) & set(words_b))
    assert token["rows_compared"] == len(shared) == 7
    assert token["unchanged_rows"] == 7 and token["mean_row_cosine"] == pytest.approx(1.0)
    assert "token table: --match tokens paired 7 rows by token string, of 8 tokens in A and 9 in B" in doc["notes"]

    def nearest(word, words):  # by string: moon and sun, only in B, can only be in the union
        others = [w for w in words if w != word]
        cos = [vectors[w] @ vectors[word] / (np.linalg.norm(vectors[w]) * np.linalg.norm(vectors[word])) for w in others]
        return [others[i] for i in np.argsort(cos)[::-1][:4]]

    by_word = token["neighbor_overlap"]["by_word"]
    near_a, near_b = set(nearest("king", words_a)), set(nearest("king", words_b))
    assert by_word[0]["word"] == "king" and set(by_word[0]["neighbors_a"]) == near_a
    assert set(by_word[0]["neighbors_b"]) == near_b
    assert by_word[0]["jaccard"] == pytest.approx(len(near_a & near_b) / len(near_a | near_b))
    unmatched = run_json("compare", tmp_path / "a", tmp_path / "b", "--sample", "5")["tables"]["token"]
    assert unmatched["rows_compared"] == 8 and unmatched["unchanged_rows"] == 1  # only [UNK] sits at the same index


def write_mixed_run(folder, tables):
    """(step, token, position) written as an nlm pickle, a nanoGPT torch.save dict, an ANDREA dump, an npz whose
    step is in its name only and a Trainer checkpoint-N/ folder; names sort in another order than steps."""
    torch = pytest.importorskip("torch")
    from safetensors.numpy import save_file
    folder.mkdir()
    (s0, t0, p0), (s1, t1, p1), (s2, t2, p2), (s3, t3, p3), (s4, t4, p4) = tables
    with open(folder / "zz_nlm.pkl", "wb") as f:
        pickle.dump({"params": {"token_emb": t0, "pos_emb": p0}, "step": s0}, f)
    torch.save({"model": {"transformer.wte.weight": torch.from_numpy(t1), "transformer.wpe.weight": torch.from_numpy(p1)},
                "iter_num": s1}, folder / "ckpt.pt")
    flat = np.concatenate([t2.ravel(), p2.ravel()]).astype("<f4")
    (folder / "a_dump.bin").write_bytes(struct.pack("<ii", s2, flat.size) + flat.tobytes())
    (folder / "config.json").write_text(json.dumps({"vocab_size": t2.shape[0], "d_model": D, "context": T}))
    np.savez(folder / f"snapshot_{s3}.npz", token_emb=t3, pos_emb=p3)
    (folder / f"checkpoint-{s4}").mkdir()
    save_file({"wte.weight": t4, "wpe.weight": p4}, str(folder / f"checkpoint-{s4}" / "model.safetensors"))


def test_folder_of_mixed_formats_is_a_trajectory_in_step_order(tmp_path):
    rng = np.random.default_rng(8)
    token = rng.standard_normal((V, D)).astype(np.float32)
    position = rng.standard_normal((T, D)).astype(np.float32)
    tables = []
    for step in (0, 100, 200, 300, 400):
        tables.append((step, token.copy(), position.copy()))
        token = token.copy()
        token[50:] += np.float32(0.2) * rng.standard_normal((V - 50, D)).astype(np.float32)
        position = position + np.float32(0.05) * rng.standard_normal((T, D)).astype(np.float32)
    write_mixed_run(tmp_path / "run", tables)
    doc = run_json("compare", tmp_path / "run", "--sample", "10")
    names = ["/".join(c["path"].split("/")[-2:]) for c in doc["checkpoints"]]
    assert names == ["run/zz_nlm.pkl", "run/ckpt.pt", "run/a_dump.bin", "run/snapshot_300.npz",
                     "checkpoint-400/model.safetensors"]
    assert [c["step"] for c in doc["checkpoints"]] == [0, 100, 200, 300, 400]
    assert [c["step_from"] for c in doc["checkpoints"]] == ["file", "file", "file", "name", "name"]
    assert doc["checkpoint"] == str(tmp_path / "run") and doc["step"] == 400
    steps = doc["trajectory"]
    assert [s["step"] for s in steps] == [0, 100, 200, 300, 400]
    assert steps[0]["tables"]["token"]["mean_row_cosine_to_previous"] is None
    for i in range(1, 5):
        entry = steps[i]["tables"]["token"]
        to_previous, _, _, _ = numpy_rows(tables[i - 1][1], tables[i][1])
        to_first, _, _, _ = numpy_rows(tables[0][1], tables[i][1])
        assert entry["mean_row_cosine_to_previous"] == pytest.approx(to_previous.mean(), rel=1e-12)
        assert entry["mean_row_cosine_to_first"] == pytest.approx(to_first.mean(), rel=1e-12)
        assert entry["unchanged_rows"] == 50
        assert entry["mean_norm"] == pytest.approx(np.linalg.norm(tables[i][1].astype(np.float64), axis=1).mean(),
                                                   rel=1e-12)
        pos_entry = steps[i]["tables"]["position"]
        assert pos_entry["position0_norm"] == pytest.approx(np.linalg.norm(tables[i][2][0].astype(np.float64)),
                                                            rel=1e-12)
        assert pos_entry["unchanged_rows"] == 0
    last, _, _, _ = numpy_rows(tables[0][1], tables[4][1])
    assert doc["tables"]["token"]["mean_row_cosine"] == pytest.approx(last.mean(), rel=1e-12)
    assert doc["tables"]["token"]["unchanged_ids"] == list(range(50))

    text = run("compare", tmp_path / "run", "--sample", "10").stdout
    assert text.splitlines()[0] == f"compare: 5 checkpoints from {tmp_path / 'run'}, step 0 to step 400 (from the name)"
    assert "trajectory of the token table" in text


def test_a_run_s_steps_come_from_the_step_its_names_say(tmp_path):
    # step500_fp16 ... step2000_fp16 were all "step 16 (from the name)" (their dtype), ordered by name, 1000 before
    # 500, and the audit called the last of them out of order
    folder = tmp_path / "run"
    folder.mkdir()
    rng = np.random.default_rng(0)
    table = rng.standard_normal((40, 8)).astype(np.float32)
    for step in (500, 1000, 1500, 2000):
        table = table + np.float32(0.3) * rng.standard_normal(table.shape).astype(np.float32)
        np.savez(folder / f"step{step}_fp16.npz", token_emb=table)
    np.savez(tmp_path / "gpt2.npz", token_emb=table)
    doc = run_json("compare", folder, "--sample", "0")
    assert [c["step"] for c in doc["checkpoints"]] == [500, 1000, 1500, 2000]
    assert [Path(c["path"]).name for c in doc["checkpoints"]] == [f"step{s}_fp16.npz" for s in (500, 1000, 1500, 2000)]
    assert doc["audit"]["out_of_order"] == []
    assert run_json("compare", folder / "step500_fp16.npz", tmp_path / "gpt2.npz",
                    "--sample", "0")["checkpoints"][1]["step"] is None  # gpt2's 2 is the model's, no step


def test_plot_bare_and_named(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    rng = np.random.default_rng(9)
    tables = [(s, rng.standard_normal((V, D)).astype(np.float32), rng.standard_normal((T, D)).astype(np.float32))
              for s in (0, 100, 200, 300, 400)]
    (tmp_path / "run").mkdir()
    for step, token, position in tables:
        write_npz(tmp_path / "run" / f"step{step}.npz", token, position)
    monkeypatch.chdir(tmp_path)
    before = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir()}
    result = run("compare", "--plot", "run", "--sample", "5")
    assert (tmp_path / "run-compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "plot written to run-compare.png" in result.stdout
    doc = run_json("compare", "--plot", "trend.svg", "run", "--sample", "5")
    assert doc["plot"] == "trend.svg" and (tmp_path / "trend.svg").read_text().lstrip().startswith("<?xml")
    assert {p.name for p in tmp_path.iterdir()} == {"run", "run-compare.png", "trend.svg"}  # only where asked
    assert {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir()} == before
    from embscope.analysis.compare import CompareOptions, TableInput, compare
    from embscope.render.compare import Labels
    from embscope.render.compare_plot import figure
    from embscope.series import Step
    comparison = compare([{"token": TableInput(t), "position": TableInput(p)} for _, t, p in tables],
                         CompareOptions(sample=0))
    labels = Labels([(tmp_path / f"c{s}", Step(s, "file")) for s, _, _ in tables], tmp_path, {}, {}, {})
    fig = figure(comparison, labels)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["mean row cosine", "row norms", "rows flagged by norms; rows bitwise unchanged",
                      "position similarity by distance (first, middle, last)"]
    profile_lines = fig.axes[3].get_lines()
    assert [line.get_label() for line in profile_lines if not line.get_label().startswith("_")] == \
        ["step 0", "step 200", "step 400"]


def test_errors(tmp_path):
    start, later, _, _ = planted_series()
    a, b = write_npz(tmp_path / "a.npz", start), write_npz(tmp_path / "b.npz", later)
    assert "expected two or more checkpoints, or one folder of checkpoints" in usage_error(run("compare", a, code=2))
    folder = tmp_path / "one"
    folder.mkdir()
    write_npz(folder / "only.npz", start)
    result = run("compare", folder, code=1)
    assert result.exit_code == 1
    assert result.stderr.strip() == f"Error: expected two or more checkpoints in the folder '{folder}', found 1 ('only.npz')"
    c = write_npz(tmp_path / "c.npz", later)
    assert "--align and --match compare two runs: give exactly two checkpoints" in \
        usage_error(run("compare", a, b, c, "--align", "procrustes", code=2))
    assert "expected a plot file ending in .png, .svg or .pdf, found 'out.jpg'" in \
        usage_error(run("compare", a, b, "--plot=out.jpg", code=2))
    png = tmp_path / "x.png"  # a checkpoint that happens to end in .png is never written over
    with open(png, "wb") as f:
        np.savez(f, token_emb=start)
    result = run("compare", a, png, f"--plot={png}", code=1)
    assert "a file this answer was read from: it is never written over" in result.stderr
    assert np.load(png)["token_emb"].shape == start.shape
    result = run("compare", a, b, "--words", "dog", code=1)
    assert result.exit_code == 1 and "--words needs a tokenizer to find the words' rows" in result.stderr
    result = run("compare", a, b, "--match", "tokens", code=1)
    assert result.exit_code == 1 and "--match tokens pairs rows by token string and needs a tokenizer for A" in result.stderr


def test_rows_are_walked_without_a_float64_copy():
    rng = np.random.default_rng(10)
    a = rng.standard_normal((40_000, 64)).astype(np.float32)  # 10 MB; a float64 copy would be 20 MB
    b = a + np.float32(0.01)
    tracemalloc.start()
    try:
        changes = row_changes(a, b, by_index(len(a), len(b)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < a.nbytes  # the per-row results (1.6 MB) and a few blocks, never a whole float64 table
    assert changes.unchanged.sum() == 0


def test_unchanged_means_equal_bits():
    a = np.ones((5, 4), dtype=np.float32)
    a[3] = np.nan
    b = a.copy()
    b[1, 0] = np.nextafter(np.float32(1), np.float32(2))  # one ulp
    a[4, 1], b[4, 1] = 0.0, -0.0  # equal values, different bits
    changes = row_changes(a, b, by_index(5, 5))
    assert changes.unchanged.tolist() == [True, False, True, True, False]
    assert changes.relative[1] > 0 and changes.relative[4] == 0.0 and np.isnan(changes.cosine[3])
    rotated = row_changes(a, b, by_index(5, 5), rotation=np.eye(4)[::-1].copy())
    assert rotated.unchanged.tolist() == [True, False, True, True, False]  # the stored rows, not the rotated ones


def test_the_sample_in_two_formats_is_unchanged():
    root = Path(__file__).resolve().parents[1] / "sample_checkpoints"
    doc = run_json("compare", root / "nlm", root / "andrea", "--sample", "0")
    assert [c["step"] for c in doc["checkpoints"]] == [3000, 3000]
    assert doc["tables"]["token"]["unchanged_rows"] == 1024 and doc["tables"]["position"]["unchanged_rows"] == 256
    assert doc["tables"]["token"]["movers"] == [] and doc["tables"]["token"]["neighbor_overlap"] is None


def test_the_commands_defaults_are_the_librarys():
    from embscope.analysis import compare as library
    from embscope.commands import compare as command
    assert (command.LISTED, command.NEIGHBOR_K, command.NEIGHBOR_SAMPLE) == (
        library.LISTED, library.NEIGHBOR_K, library.NEIGHBOR_SAMPLE)


def test_the_checkpoints_given_are_named_with_their_own_steps():
    root = Path(__file__).resolve().parents[1] / "sample_checkpoints"
    doc = run_json("compare", root / "nlm", root / "nlm_step1000", "--sample", "0")
    assert (doc["checkpoint"], doc["step"]) == (str(root / "nlm"), 3000)  # A and A's step, not B's
    text = run("compare", root / "nlm_step1000", root / "nlm", root / "andrea", "--sample", "0").stdout
    assert " ".join(text.splitlines()[0].split()) == (
        f"compare: 3 checkpoints, step 1,000 to step 3,000: {root / 'nlm_step1000' / 'model.pkl'}, "
        f"{root / 'nlm' / 'model.pkl'}, {root / 'andrea' / 'model.bin'}")


def test_the_plot_never_replaces_a_checkpoint_found_in_a_folder(tmp_path):
    start, later, _, _ = planted_series()
    (tmp_path / "a").mkdir()
    with open(tmp_path / "a" / "model.png", "wb") as f:  # a checkpoint is known by its bytes, whatever its name
        np.savez(f, token_emb=start)
    b = write_npz(tmp_path / "b.npz", later)
    before = (tmp_path / "a" / "model.png").read_bytes()
    result = run("compare", tmp_path / "a", b, "--sample", "0", "--plot", tmp_path / "a" / "model.png", code=1)
    assert result.stderr == (f"Error: expected the plot file to name a new file, found "
                             f"'{tmp_path / 'a' / 'model.png'}', a file this answer was read from: it is never "
                             "written over\n")
    assert (tmp_path / "a" / "model.png").read_bytes() == before


# ---------------------------------------------------------------- one read per checkpoint


def dyadic_rows(rows: int, seed: int, dim: int = 16) -> np.ndarray:
    """Rows whose unit vectors and dot products are exact in float32 (1, 4 or 16 entries of +-1, times 1, 3 or
    0.5): every matmul gives the same bits, and there are many exact ties."""
    rng = np.random.default_rng(seed)
    nonzero = rng.choice([1, 4, 16], size=rows)
    chosen = np.argsort(rng.random((rows, dim)), axis=1) < nonzero[:, None]
    values = rng.choice([-1.0, 1.0], size=(rows, dim)) * rng.choice([1.0, 3.0, 0.5], size=(rows, 1))
    return np.where(chosen, values, 0.0).astype(np.float32)


def test_one_read_against_two_tables_is_two_comparisons():
    from embscope.analysis.sweep import sweep
    rng = np.random.default_rng(20)
    first = rng.standard_normal((5000, 40)).astype(np.float32)
    before = first + np.float32(0.1) * rng.standard_normal(first.shape).astype(np.float32)
    now = before + np.float32(0.1) * rng.standard_normal(first.shape).astype(np.float32)
    now[:50] = before[:50]
    first[7], before[9, 3], now[11] = 0.0, np.nan, 0.0
    pairing = by_index(5000, 5000)
    together = sweep(now, [before, first], pairing)
    for old, found in zip((before, first), together):
        alone = row_changes(old, now, pairing)
        for name in ("cosine", "norm_a", "norm_b", "relative", "unchanged"):
            np.testing.assert_array_equal(getattr(found, name), getattr(alone, name))  # bit for bit
    cos, *_ = numpy_rows(first, now)
    np.testing.assert_allclose(together[1].cosine, cos, rtol=1e-12)
    assert together[0].unchanged.sum() == 48  # rows 9 and 11 were changed after the copy


def test_the_read_hands_the_searches_unit_rows_as_unit_rows_makes_them():
    from embscope.analysis.sweep import sweep
    from embscope.compute import unit_rows

    class Kept:  # stands in for a neighbour search: keeps what it is given
        def __init__(self):
            self.blocks = []

        def add(self, start, unit, valid):
            self.blocks.append((start, unit.copy(), valid.copy()))

    rng = np.random.default_rng(21)
    a = rng.standard_normal((3000, 24)).astype(np.float32)
    b = a + rng.standard_normal(a.shape).astype(np.float32)
    a[3], b[5, 2] = 0.0, np.inf
    kept = {0: Kept(), 1: Kept()}
    sweep(b, [a], by_index(3000, 3000), searches=kept)
    for table, found in zip((a, b), kept.values()):
        unit, _, valid = unit_rows(table)
        assert [start for start, _, _ in found.blocks] == sorted(start for start, _, _ in found.blocks)
        np.testing.assert_array_equal(np.concatenate([u for _, u, _ in found.blocks]), unit)
        assert np.array_equal(np.concatenate([v for _, _, v in found.blocks]), valid)


@pytest.mark.parametrize("bad", [False, True])
def test_neighbours_found_in_the_last_read_are_those_of_their_own_read(bad):
    # Dyadic rows make every cosine exact, so the two ways must agree bit for bit, ties included; a zero row
    # (bad) means the sample drawn before the read is not the one drawn after: the sets are found afterwards.
    from embscope.analysis.compare import CompareOptions, TableInput, compare
    tables = [dyadic_rows(900, seed) for seed in (30, 31, 32)]
    tables[2][:300] = tables[0][:300]
    if bad:
        tables[0][17] = 0.0
    for options in (CompareOptions(sample=200, k=10, device="cpu"), CompareOptions(sample=50, k=900, device="cpu")):
        for count in (2, 3):
            series = tables[:1] + tables[3 - count + 1:]
            results = [compare(({"token": TableInput(t)} for t in series), options, word_rows=[17, 4, 4],
                               checkpoints=known).tables["token"] for known in (count, None)]
            fused, alone = (r.neighbors for r in results)
            assert fused is not None and alone is not None
            for name in ("rows_a", "rows_b", "neighbors_a", "neighbors_b", "jaccard"):
                np.testing.assert_array_equal(getattr(fused, name), getattr(alone, name))
            assert fused.words == 2
            np.testing.assert_array_equal(results[0].changes.cosine, results[1].changes.cosine)


def test_a_tokenizer_that_does_not_load_is_said_not_dropped(tmp_path):
    """--tokenizer naming nothing loadable: the rows print as #id, and the answer says why (it was silent)."""
    root = Path(__file__).resolve().parents[1] / "sample_checkpoints"
    missing = tmp_path / "nothing.json"
    doc = run_json("compare", root / "nlm", root / "andrea", "--sample", "0", "--tokenizer", missing)
    assert doc["notes"] == [(f"tokenizer not loaded: expected a tokenizer file at {missing}, found nothing there; "
                             "token rows print as #id")]
    text = run("compare", root / "nlm", root / "andrea", "--sample", "0", "--tokenizer", missing).stdout
    assert "rows bitwise unchanged: 1,024 (all): #0, #1," in text and "note: tokenizer not loaded" in text


@pytest.mark.parametrize("field, value", [("sample", -1), ("sample", 1.5), ("seed", -1), ("listed", -1), ("listed", 0)])
def test_library_compare_options_outside_the_flags_bounds_are_refused(field, value):
    # sample=-1 and seed=-1 raised ValueError from numpy, 1.5 TypeError, and listed=-1 listed every row but one
    from embscope import CompareOptions, OptionError

    with pytest.raises(OptionError, match=f"^expected {field} of at least ") as err:
        CompareOptions(**{field: value})
    assert err.value.option == field


def test_library_one_path_where_a_list_of_checkpoints_goes_is_refused(tmp_path):
    # compare_series('run/a.npy', ...) opened 'r', 'u', 'n', ...; report('.../nlm', ...) the checkpoint 'm'; a Path
    # raised TypeError (no len)
    import embscope

    path = tmp_path / "a.npy"
    np.save(path, np.ones((4, 3), np.float32))
    for call, option in ((lambda given: embscope.compare_series(given, embscope.open), "paths"),
                         (lambda given: embscope.report(given, embscope.open), "checkpoints")):
        for given in (str(path), path):
            with pytest.raises(embscope.OptionError, match="^expected a list of checkpoints for ") as err:
                call(given)
            assert err.value.option == option


def test_a_run_named_by_epoch_is_ordered_by_its_epochs(tmp_path):
    # epoch1, epoch2, epoch10: the rule that a number glued to letters names no step (step500_fp16's 16, gpt2's 2)
    # left them 'step unknown', placed in name order, epoch10 before epoch2, and the audit called it out of order;
    # a name that says its epoch orders the run by it, a step said beside it first (step500_epoch3 is step 500)
    folder = tmp_path / "run"
    folder.mkdir()
    rng = np.random.default_rng(0)
    table = rng.standard_normal((40, 8)).astype(np.float32)
    for epoch in (1, 2, 10):
        table = table + np.float32(0.3) * rng.standard_normal(table.shape).astype(np.float32)
        np.savez(folder / f"epoch{epoch}.npz", token_emb=table)
    doc = run_json("compare", folder, "--sample", "0")
    assert [Path(c["path"]).name for c in doc["checkpoints"]] == ["epoch1.npz", "epoch2.npz", "epoch10.npz"]
    assert [c["step"] for c in doc["checkpoints"]] == [1, 2, 10] and doc["audit"]["out_of_order"] == []
    np.savez(tmp_path / "step500_epoch3.npz", token_emb=table)
    assert run_json("compare", folder / "epoch1.npz", tmp_path / "step500_epoch3.npz",
                    "--sample", "0")["checkpoints"][1]["step"] == 500
