"""`embscope positions`: pair cosines, the default pairs, the profile by distance, and the errors,
checked against plain numpy on real files."""

import json
import pickle

import numpy as np
import pytest
from conftest import cosine, drifting, run, run_json
from safetensors.numpy import save_file

import embscope
from embscope.analysis.positions import default_pairs, position_profile


@pytest.fixture
def gpt_file(tmp_path):
    pos = drifting(512, 24, seed=1)
    path = tmp_path / "model.npz"
    np.savez(path, token_emb=np.random.default_rng(2).standard_normal((50, 24)).astype(np.float32), pos_emb=pos)
    return path, pos


def test_default_pairs_for_512_positions_are_the_nominal_set(gpt_file):
    path, pos = gpt_file
    doc = json.loads(run("positions", "-c", str(path), "--json").stdout)
    expected = [(10, 11), (250, 251), (250, 260), (500, 511), (10, 100), (250, 500), (10, 500), (0, 511)]
    assert [(p["i"], p["j"]) for p in doc["pairs"]] == expected
    assert [p["distance"] for p in doc["pairs"]] == [1, 1, 10, 11, 90, 250, 490, 511]
    for p in doc["pairs"]:
        assert p["cosine"] == pytest.approx(cosine(pos[p["i"]], pos[p["j"]]), abs=1e-12)
    assert doc["rows"] == 512 and doc["positions"] == 512 and doc["first_row"] == 0
    assert "profile" not in doc


@pytest.mark.parametrize("positions", [2, 3, 16, 100, 1024, 2048, 8192])
def test_default_pairs_span_any_table(positions):
    pairs = default_pairs(positions)
    last = positions - 1
    assert pairs, positions
    assert all(0 <= i < j <= last for i, j in pairs)
    assert (0, last) in pairs  # the farthest pair
    assert pairs[0][1] - pairs[0][0] == 1  # the nearest pair: neighbours
    distances = [j - i for i, j in pairs]
    assert distances == sorted(distances)
    assert len(set(pairs)) == len(pairs)


def test_default_pairs_scale_with_the_table():
    assert default_pairs(1024) == [(20, 21), (500, 501), (500, 510), (1012, 1023), (20, 200), (500, 1001),
                                   (20, 1001), (0, 1023)]
    assert default_pairs(1) == []


def test_explicit_pairs_print_numpy_cosines(gpt_file):
    path, pos = gpt_file
    result = run("positions", "-c", str(path), "--pairs", "3:4, 7:300,511:0")
    for i, j in [(3, 4), (7, 300), (511, 0)]:
        assert f"{cosine(pos[i], pos[j]):+.4f}" in result.stdout
    doc = json.loads(run("positions", "-c", str(path), "--pairs", "3:4,7:300,511:0", "--json").stdout)
    assert [(p["i"], p["j"], p["distance"]) for p in doc["pairs"]] == [(3, 4, 1), (7, 300, 293), (511, 0, 511)]
    assert [p["cosine"] for p in doc["pairs"]] == pytest.approx(
        [cosine(pos[3], pos[4]), cosine(pos[7], pos[300]), cosine(pos[511], pos[0])], abs=1e-12)


def nlm_pickle(directory):
    path = directory / "model.pkl"
    with open(path, "wb") as f:
        pickle.dump({"params": {"token_emb": np.ones((300, 24), np.float32), "pos_emb": drifting(512, 24, 9)}}, f)
    return path


def test_pairs_alone_gives_the_default_pairs_exactly_as_typed(tmp_path):
    for extra in ([], ["-c", nlm_pickle(tmp_path)]):  # the bundled sample, then a nlm pickle of 512 positions
        result = run("positions", "--pairs", *extra)  # `--pairs` the last word
        rows = [line.split("│")[1:3] for line in result.stdout.splitlines() if line.startswith("│")]
        expected = default_pairs(256 if not extra else 512)
        assert [(int(i), int(j)) for i, j in rows] == expected
    doc = run_json("positions", "--pairs")  # `--pairs --json`: the value left out before another option
    assert [(p["i"], p["j"]) for p in doc["pairs"]] == default_pairs(256)


def test_pairs_repeated_add_up(gpt_file):
    path, pos = gpt_file
    doc = run_json("positions", "-c", path, "--pairs", "3:4", "--pairs", "7:300,1:2", "--pairs")
    assert [(p["i"], p["j"]) for p in doc["pairs"]] == default_pairs(512) + [(3, 4), (7, 300), (1, 2)]
    assert doc["pairs"][-1]["cosine"] == pytest.approx(cosine(pos[1], pos[2]), abs=1e-12)


def test_a_position_of_5000_digits_is_a_usage_error(gpt_file):
    path, _ = gpt_file
    result = run("positions", "-c", path, "--pairs", "1:" + "9" * 5000, code=2)
    line = result.stderr.splitlines()[0]
    assert line.startswith("Error: Invalid value for '--pairs': expected positions of at most 9 digits, found '1:999")
    assert line.endswith(" (5,002 characters)'") and len(line) < 240


def test_pairs_default_keyword_with_profile(gpt_file):
    path, _ = gpt_file
    doc = json.loads(run("positions", "-c", str(path), "--pairs", "default", "--profile", "--json").stdout)
    assert len(doc["pairs"]) == 8 and "profile" in doc
    doc = json.loads(run("positions", "-c", str(path), "--profile", "--json").stdout)
    assert doc["pairs"] == [] and "profile" in doc


def test_position_past_the_end_says_why(gpt_file):
    path, _ = gpt_file
    result = run("positions", "-c", str(path), "--pairs", "10:11,3:512", code=1)
    assert result.stderr == (
        "Error: expected a position below 512, found 512: the position table 'pos_emb' has 512 rows, and a "
        "learned table holds one row per position up to the model's fixed context length, so there is no row "
        "for position 512\n")
    assert result.stdout == ""


@pytest.mark.parametrize("text, found", [("5:-1", "'5:-1'"), ("-3:4", "'-3:4'")])
def test_negative_positions_are_usage_errors(gpt_file, text, found):
    path, _ = gpt_file
    result = run("positions", "-c", str(path), "--pairs", text, code=2)
    assert "expected positions of 0 or more" in result.stderr and found in result.stderr


@pytest.mark.parametrize("text", ["10", "a:b", "1:2,", "1:2:3", "1;2", ""])
def test_malformed_pairs_are_usage_errors(gpt_file, text):
    path, _ = gpt_file
    result = run("positions", "-c", str(path), "--pairs", text, code=2)
    assert "expected position pairs written I:J,I:J" in result.stderr


@pytest.mark.parametrize("pair, found", [((1.5, 3), "integers"), ((float("nan"), 3), "integers"),
                                         (("3", 4), "integers"), ((True, 4), "integers"), ((1, 2, 3), "two positions"),
                                         (5, "two positions")])
def test_library_positions_that_are_no_integers_are_refused(gpt_file, pair, found):
    # (1.5, 3) answered the cosine of rows 1 and 3 as the pair 1.5:3 at distance 1.5; NaN and "3" raised from numpy
    emb = embscope.open(gpt_file[0])
    with pytest.raises(embscope.OptionError, match=found) as err:
        embscope.positions(emb, [pair])
    assert err.value.option == "pairs"


def test_library_positions_take_numpy_integers_as_ints(gpt_file):
    path, pos = gpt_file
    (pair,) = embscope.positions(embscope.open(path), np.array([[3, 40]])).pairs
    assert (type(pair.i), type(pair.j), type(pair.distance)) == (int, int, int) and (pair.i, pair.j) == (3, 40)
    assert pair.cosine == pytest.approx(cosine(pos[3], pos[40]), abs=1e-12)


def test_model_without_position_table(tmp_path):
    path = tmp_path / "rotary.npz"
    np.savez(path, token_emb=np.ones((10, 4), dtype=np.float32))
    result = run("positions", "-c", str(path), code=1)
    assert "expected a learned position table, found none" in result.stderr


def test_opt_offset_reads_rows_from_two_on(tmp_path):
    pos = drifting(66, 16, seed=3)
    tok = np.random.default_rng(4).standard_normal((40, 16)).astype(np.float32)
    path = tmp_path / "opt.safetensors"
    save_file({"model.decoder.embed_positions.weight": pos, "model.decoder.embed_tokens.weight": tok}, str(path))
    doc = json.loads(run("positions", "-c", str(path), "--pairs", "0:1,5:63", "--json").stdout)
    assert doc["first_row"] == 2 and doc["positions"] == 64 and doc["rows"] == 66
    assert [p["cosine"] for p in doc["pairs"]] == pytest.approx(
        [cosine(pos[2], pos[3]), cosine(pos[7], pos[65])], abs=1e-12)
    assert any("position p is row p+2" in note for note in doc["notes"])
    result = run("positions", "-c", str(path), "--pairs", "0:64", code=1)
    assert result.stderr == (
        "Error: expected a position below 64, found 64: the position table 'model.decoder.embed_positions.weight' "
        "has 66 rows (2 reserved rows come before position 0), and a learned table holds one row per position up "
        "to the model's fixed context length, so there is no row for position 64\n")
    doc = json.loads(run("positions", "-c", str(path), "--json").stdout)
    assert (0, 63) in [(p["i"], p["j"]) for p in doc["pairs"]]


def test_undefined_cosine_is_null_with_a_reason(tmp_path):
    pos = drifting(64, 8, seed=5)
    pos[5] = 0
    pos[9, 3] = np.nan
    path = tmp_path / "holes.npz"
    np.savez(path, token_emb=np.ones((4, 8), dtype=np.float32), pos_emb=pos)
    result = run("positions", "-c", str(path), "--pairs", "5:6,9:10,1:2", "--json")
    doc = json.loads(result.stdout, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    p5, p9, p1 = doc["pairs"]
    assert p5["cosine"] is None and p5["reason"] == "position 5 is a zero row"
    assert p9["cosine"] is None and p9["reason"] == "position 9 has NaN values"
    assert p1["cosine"] == pytest.approx(cosine(pos[1], pos[2]), abs=1e-12) and p1["reason"] is None


def numpy_profile(pos: np.ndarray):
    """Mean and spread of the cosines on each diagonal, and how often the argmax of a row (self left out,
    NaN left out, ties to the lower index) is next to it, from the full float64 matrix."""
    t = pos.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        unit = t / np.linalg.norm(t, axis=1, keepdims=True)
    sims = unit @ unit.T
    n = len(pos)
    diagonals = [np.diagonal(sims, k) for k in range(1, n)]
    mean = [np.nanmean(d) if not np.isnan(d).all() else np.nan for d in diagonals]
    std = [np.nanstd(d) if not np.isnan(d).all() else np.nan for d in diagonals]
    np.fill_diagonal(sims, -np.inf)
    sims[np.isnan(sims)] = -np.inf
    best = np.argmax(sims, axis=1)
    found = np.isfinite(sims[np.arange(n), best])
    adjacent = (found & (np.abs(best - np.arange(n)) == 1)).sum() / found.sum()
    return mean, std, adjacent


def test_profile_matches_numpy(tmp_path):
    pos = drifting(130, 12, seed=6)
    path = tmp_path / "p.npz"
    np.savez(path, token_emb=np.ones((4, 12), dtype=np.float32), pos_emb=pos)
    doc = json.loads(run("positions", "-c", str(path), "--profile", "--json").stdout)
    mean, std, adjacent = numpy_profile(pos)
    profile = doc["profile"]
    assert profile["by_offset"]["offset"] == list(range(1, 130))
    assert profile["by_offset"]["mean"] == pytest.approx(mean, abs=2e-6)
    assert profile["by_offset"]["std"] == pytest.approx(std, abs=2e-6)
    assert profile["by_offset"]["pairs"] == list(range(129, 0, -1))
    assert profile["by_offset"]["std"][-1] == 0.0  # one pair: no spread at all
    assert [o["offset"] for o in profile["offsets"]] == [1, 2, 4, 8, 16, 32, 64, 128, 129]
    assert profile["offsets"][0]["mean"] == pytest.approx(mean[0], abs=2e-6)
    assert profile["nearest_is_adjacent"] == pytest.approx(adjacent)
    assert profile["positions_counted"] == 130
    console = run("positions", "-c", str(path), "--profile").stdout
    assert "similarity by distance" in console and f"{mean[0]:+.4f}" in console
    assert f"nearest neighbour is i-1 or i+1 for {adjacent * 100:.2f}% of 130 positions" in " ".join(console.split())


@pytest.mark.parametrize("block_rows", [1, 7, None])
def test_profile_block_by_block_leaves_out_bad_rows_and_reserved_rows(block_rows):
    table = drifting(62, 6, seed=9)
    table[4] = 0  # position 2
    table[20, 1] = np.nan  # position 18
    profile, heatmap = position_profile(table, first_row=2, block_rows=block_rows)
    mean, std, adjacent = numpy_profile(table[2:])
    np.testing.assert_allclose(profile.mean, mean, atol=2e-6)
    np.testing.assert_allclose(profile.std, std, atol=2e-6)
    assert profile.count[0] == 55 and profile.count[-1] == 1  # 59 pairs at distance 1, less 2 per bad row
    assert profile.nearest_is_adjacent == pytest.approx(adjacent) and profile.positions_counted == 58
    assert heatmap.positions == 60 and heatmap.cell == 1 and heatmap.cells.shape == (60, 60)
    assert np.isnan(heatmap.cells[2]).all() and np.isnan(heatmap.cells[:, 18]).all()
    assert heatmap.cells[5, 6] == pytest.approx(cosine(table[7], table[8]), abs=1e-6)


def test_heatmap_is_averaged_down_while_the_profile_is_computed():
    table = drifting(2500, 8, seed=10)
    table[0] = np.nan
    profile, heatmap = position_profile(table)
    assert heatmap.cell == 3 and heatmap.cells.shape == (834, 834)  # cells of 3 x 3 positions
    unit = table.astype(np.float64) / np.linalg.norm(table.astype(np.float64), axis=1, keepdims=True)
    sims = unit @ unit.T
    assert heatmap.cells[1, 2] == pytest.approx(sims[3:6, 6:9].mean(), abs=1e-6)
    assert heatmap.cells[0, 0] == pytest.approx(np.nanmean(sims[:3, :3]), abs=1e-6)  # NaN row left out
    assert heatmap.cells[-1, -1] == pytest.approx(1.0)  # the last cell holds one position: itself
    assert profile.count[0] == 2498 and profile.count[-1] == 0 and np.isnan(profile.mean[-1])  # row 0 is NaN
    assert profile.mean[-2] == pytest.approx(cosine(table[1], table[-1]), abs=2e-6)
    assert profile.mean[0] > profile.mean[1000]  # similarity falls with distance in a drifting table
    assert position_profile(table[:50], heatmap=False)[1] is None


def test_a_long_table_is_profiled_from_spread_blocks(monkeypatch):
    """r23's class in time: 200,000 positions are 20 billion pairs; past PROFILE_MAX_PAIRS only evenly spread
    blocks of positions are compared (each with every later one), and the profile says so."""
    from embscope.analysis import positions as module
    monkeypatch.setattr(module, "PROFILE_MAX_PAIRS", 600 * 600 // 2 // 4)  # a quarter of the pairs of 600 rows
    table = np.random.default_rng(9).standard_normal((600, 8)).astype(np.float32)
    profile, _ = module.position_profile(table, heatmap=False, block_rows=50)
    assert profile.sampled_every == 4
    # blocks of 50 anchors at rows 0, 200 and 400: offset 1 holds their 150 pairs, each exactly as numpy has it
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    anchors = np.concatenate([np.arange(s, s + 50) for s in (0, 200, 400)])
    assert profile.count[0] == 150
    assert profile.mean[0] == pytest.approx(float(np.mean((unit[anchors] * unit[anchors + 1]).sum(axis=1))), abs=1e-6)
    assert profile.positions_counted == 150  # every 4th position asked for its nearest


def test_a_distance_whose_only_pair_holds_a_zero_row_is_null_and_said(tmp_path):
    # g2p_id 0.0.4's BERT (keras.io's masked-LM example): positions are the sinusoid get_pos_encoding_matrix
    # builds, position 0 all zeros, 32 x 128; distance 31's one pair, (0, 31), has no cosine
    t, d = 32, 128
    angles = np.array([[p / 10000 ** (2 * (j // 2) / d) for j in range(d)] for p in range(t)])
    table = np.where(np.arange(d) % 2 == 0, np.sin(angles), np.cos(angles))
    table[0] = 0
    save_file({"wte.weight": np.ones((8, d), np.float32), "wpe.weight": table.astype(np.float32)},
              tmp_path / "model.safetensors")
    doc = run_json("positions", "--profile", "-c", tmp_path / "model.safetensors")
    unit = table[1:] / np.linalg.norm(table[1:], axis=1, keepdims=True)
    by_distance = {o["offset"]: o for o in doc["profile"]["offsets"]}
    assert by_distance[1]["pairs"] == 30 and by_distance[1]["mean"] == pytest.approx(
        np.mean(np.sum(unit[:-1] * unit[1:], axis=1)), abs=1e-6)
    assert (by_distance[31]["mean"], by_distance[31]["std"], by_distance[31]["pairs"]) == (None, None, 0)
    note = ("distance 31: no pair has a cosine (every pair there holds a zero, NaN or Inf row), so mean and std "
            "are null")
    assert doc["notes"] == [note]
    console = run("positions", "--profile", "-c", tmp_path / "model.safetensors").stdout
    assert "│ 31         │ null                 │ null   │ 0     │" in console and "nan" not in console


def test_pairs_that_hold_a_never_trained_position_are_marked_and_the_evidence_named():
    """AntiBERTy (antiberty 0.1.3, trained_models/AntiBERTy_md_smooth/pytorch_model.bin, BERT, 512 positions) and
    IgLM (iglm 0.1.0, trained_models/IgLM*/pytorch_model.bin, GPT-2): positions 214-511 and 166-511 never trained,
    as norms says, yet positions showed the default pairs 250:251, 250:500, 0:511 ... as if they told how the model
    sees those positions: cosines between rows as initialised. Here transformers' BERT trained on sequences of at
    most 40 tokens (tests/data/make_short_bert.py): positions 40-127 keep N(0, 0.02)."""
    from pathlib import Path

    from safetensors.numpy import load_file
    folder = Path(__file__).parent / "data" / "short_bert"
    table = load_file(folder / "model.safetensors")["bert.embeddings.position_embeddings.weight"].astype(np.float64)
    norms = np.linalg.norm(table, axis=1)
    assert abs(norms[40:].mean() / (0.02 * np.sqrt(64)) - 1) < 0.05 < norms[:40].min() / norms[40:].max() - 1
    doc = run_json("positions", "-c", str(folder))
    marked = [p["never_trained"] for p in doc["pairs"]]
    assert marked == [max(p["i"], p["j"]) >= 40 for p in doc["pairs"]] and any(marked) and not all(marked)
    held = ", ".join(f"{p['i']}:{p['j']}" for p in doc["pairs"] if p["never_trained"])
    (note,) = [n for n in doc["notes"] if "never trained" in n]
    assert note.startswith("positions 40-127 (88 rows) never trained: ")
    assert f"the pairs {held} hold such a position" in note
    text = " ".join(run("positions", "-c", str(folder)).stdout.split())
    assert "never trained" in text and f"the pairs {held} hold such a position" in text


def test_the_profile_of_the_trained_positions_alone_is_given_beside_the_whole_tables():
    """AntiBERTy (antiberty 0.1.3, AntiBERTy_md_smooth/pytorch_model.bin): with positions 214-511 as initialised, the
    profile said the nearest neighbour is adjacent for 29.30% of 512 positions and mean cos at distance 1 +0.1941;
    among the 214 trained positions it is 67.76% and +0.4606 (plain numpy). Here transformers' BERT trained on
    sequences of at most 40 tokens (tests/data/make_short_bert.py)."""
    from pathlib import Path

    from safetensors.numpy import load_file
    folder = Path(__file__).parent / "data" / "short_bert"
    table = load_file(folder / "model.safetensors")["bert.embeddings.position_embeddings.weight"].astype(np.float64)
    unit = table[:40] / np.linalg.norm(table[:40], axis=1, keepdims=True)
    cos = unit @ unit.T
    np.fill_diagonal(cos, -np.inf)
    adjacent = (np.abs(cos.argmax(axis=1) - np.arange(40)) == 1).mean()
    following = (unit[1:] * unit[:-1]).sum(axis=1).mean()  # the profile sums float32 cosines
    doc = run_json("positions", "-c", str(folder), "--profile")
    trained = doc["trained_profile"]
    assert trained["positions_counted"] == 40 and trained["nearest_is_adjacent"] == pytest.approx(adjacent, abs=1e-12)
    assert trained["offsets"][0]["mean"] == pytest.approx(following, abs=1e-6) and len(trained["by_offset"]["mean"]) == 39
    assert doc["profile"]["positions_counted"] == 128
    assert (f"among positions 0-39 alone (those before the never-trained ones): mean cos(p_i, p_i+1) {following:+.4f}, "
            f"nearest neighbour is i-1 or i+1 for {100 * adjacent:.2f}% of 40 positions") in doc["notes"]


def test_a_position_table_wholly_at_its_init_marks_no_pair_never_trained(tmp_path):
    """A BERT position table that is N(0, 0.02) throughout (initializer_range 0.02) is 'the whole table cannot be told
    from its initialisation (never trained, or trained too little to tell)': positions marked every pair 'never
    trained' and said each was 'not between positions the model learnt', which the verdict does not say."""
    rng = np.random.default_rng(0)
    save_file({"bert.embeddings.position_embeddings.weight": rng.normal(0, 0.02, (128, 64)).astype(np.float32)},
              tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", "initializer_range": 0.02}))
    doc = run_json("positions", "-c", tmp_path)
    assert doc["pairs"] and not any(p["never_trained"] for p in doc["pairs"])
    (note,) = [n for n in doc["notes"] if "initialisation" in n]
    assert note.startswith("the whole table cannot be told from its initialisation (never trained, or trained too "
                           "little to tell) (128 rows): ") and "hold such a position" not in note
    assert "never trained │" not in run("positions", "-c", tmp_path).stdout


@pytest.mark.parametrize("broken", [60, 127])
def test_a_nan_row_in_the_never_trained_tail_keeps_the_trained_profile(tmp_path, broken):
    """short_bert (positions 40-127 at their init) with one NaN row in the tail, inside it or its last: the never-trained
    rows were no longer one run reaching the table's end (40-59 and 61-127, or 40-126), and the trained positions'
    profile was dropped, though positions 0-39 are the same rows as in the intact table."""
    from pathlib import Path

    from safetensors.numpy import load_file
    folder = Path(__file__).parent / "data" / "short_bert"
    weights = load_file(folder / "model.safetensors")
    weights["bert.embeddings.position_embeddings.weight"][broken] = np.nan
    save_file(weights, tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text((folder / "config.json").read_text())
    intact = run_json("positions", "-c", str(folder), "--profile")["trained_profile"]
    assert intact is not None and run_json("positions", "-c", tmp_path, "--profile")["trained_profile"] == intact
