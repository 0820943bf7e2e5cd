"""The commands' answers at their edges: plots with nothing to draw, tokens shown as ids (and saying why), rows
cut before the figures, a table too wide for the d x d limit refused before allocating, a run of save_pretrained
steps, and the default output name said alike on the console and in JSON."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from conftest import run, run_json
from safetensors.numpy import save_file


def gpt2_folder(path, token: np.ndarray, position: np.ndarray):
    path.mkdir()
    save_file({"wte.weight": token, "wpe.weight": position}, str(path / "model.safetensors"))
    return path


@pytest.mark.parametrize("position", [np.ones((1, 4)), np.zeros((8, 4)), np.full((8, 4), np.nan)],
                         ids=["one position", "all zero", "all NaN"])
def test_positions_plot_with_no_cosine_at_any_distance(tmp_path, monkeypatch, position):
    # the curve had no finite point, and matplotlib's log axis raised "Data cannot be log-scaled" (a traceback)
    token = np.random.default_rng(0).standard_normal((10, 4)).astype(np.float32)
    folder = gpt2_folder(tmp_path / "run", token, position.astype(np.float32))
    monkeypatch.chdir(tmp_path)
    out = run("positions", "--plot", "-c", folder).stdout
    assert "plot written to run-position-heatmap.png" in out
    assert (tmp_path / "run-position-heatmap.png").stat().st_size > 0


@pytest.mark.parametrize("value", [np.nan, np.inf], ids=["all NaN", "all Inf"])
def test_token_norms_plot_with_no_finite_row(tmp_path, monkeypatch, value):
    # no bar was drawn, so the legend had no entry, and matplotlib's legend of 0 columns raised ValueError (a
    # traceback, from norms --plot and from report)
    folder = gpt2_folder(tmp_path / "run", np.full((10, 4), value, np.float32), np.ones((8, 4), np.float32))
    monkeypatch.chdir(tmp_path)
    out = run("norms", "--table", "token", "--plot", "-c", folder).stdout
    assert "plot written to run-token-norms.png" in out
    assert (tmp_path / "run-token-norms.png").stat().st_size > 0


def with_broken_tokenizer(tmp_path, seed: int):
    """A GPT-2 folder (12 token rows, 8 positions) and a --tokenizer file that fails to load."""
    rng = np.random.default_rng(seed)
    folder = gpt2_folder(tmp_path / "m", rng.standard_normal((12, 4)).astype(np.float32),
                         rng.standard_normal((8, 4)).astype(np.float32))
    broken = tmp_path / "vocab_map.json"
    broken.write_text('{"": 10}')
    return folder, broken


def test_neighbors_all_says_why_its_tokens_are_ids(tmp_path):
    # a --tokenizer that failed to load was dropped without a word: the TSV held #ids and the answer no note
    folder, broken = with_broken_tokenizer(tmp_path, seed=1)
    doc = run_json("neighbors", "--all", "-k", "2", "--out", tmp_path / "nb.tsv", "-c", folder, "--tokenizer", broken)
    assert any(note.startswith("tokenizer not loaded") for note in doc["notes"]), doc["notes"]
    assert "\t#0\t" in (tmp_path / "nb.tsv").read_text()


def test_a_pair_in_the_baseline_sample_gets_the_share_strictly_below_its_own_cosine(tmp_path):
    # 40 rows: 780 pairs, so the 10,000 sampled pairs hold each asked pair about 13 times; summed in another order
    # those copies round differently from the pair asked, and strictly below must not count them
    import embscope
    from embscope.analysis import similarity as similarity_module
    rng = np.random.default_rng(7)
    table = (rng.standard_normal((40, 6)) * np.array([1, 1e3, 1e-3, 1, 5, 1])).astype(np.float32)
    np.save(tmp_path / "token_emb.npy", table)
    emb = embscope.open(tmp_path / "token_emb.npy")
    found = embscope.similarity(emb, list(range(12)), ids=True)
    from embscope import compute
    sample = np.sort(compute.random_pairs(table, n_pairs=similarity_module.BASELINE_PAIRS,
                                          seed=similarity_module.BASELINE_SEED).sample)
    unit = table.astype(np.float64) / np.linalg.norm(table.astype(np.float64), axis=1)[:, None]
    for pair in found.pairs:
        exact = float(unit[pair.a.ids[0]] @ unit[pair.b.ids[0]])  # the share below, the pair's own copies not counted
        assert pair.percentile == pytest.approx(100 * np.mean(sample < exact - 1e-9))


def test_compare_output_says_the_rows_were_cut_before_its_figures(tmp_path):
    # the rule for compare A B (the notes that decide how to read it come first) did not hold for
    # compare CKPT --output: "A has 50 rows and B has 64" came after every figure
    rng = np.random.default_rng(4)
    folder = tmp_path / "uneq"
    folder.mkdir()
    save_file({"wte.weight": rng.standard_normal((50, 8)).astype(np.float32),
               "lm_head.weight": rng.standard_normal((64, 8)).astype(np.float32)}, str(folder / "model.safetensors"))
    lines = run("compare", folder, "--output").stdout.splitlines()
    cut = lines.index("note: A has 50 rows and B has 64: the first 50 are compared")
    figures = next(n for n, line in enumerate(lines) if "50 rows compared" in line)
    assert cut < figures
    assert run_json("compare", folder, "--output")["notes"] == [lines[cut].removeprefix("note: ")]


def test_a_table_wider_than_the_d_x_d_limit_is_refused_before_anything_is_allocated(tmp_path, monkeypatch):
    # geometry, --remove-top and compare's linear CKA built d x d (CKA: (d1 + d2)^2) float64 matrices unchecked: a
    # 4 x 30,000 table, a 1.4 MB file, asked for 6.7 GiB (26.8 GiB in compare), a traceback where memory was short.
    # A table of fewer rows than columns is answered from its rows' Gram matrix instead (below); this one is taller
    # than wide, and than the two tables side by side, so only the d x d forms can answer it
    from embscope.analysis import cka
    from embscope.compute import moments
    monkeypatch.setattr(moments, "MAX_SIDE", 16, raising=False)
    monkeypatch.setattr(cka, "MAX_SIDE", 16, raising=False)
    rng = np.random.default_rng(0)
    folder = gpt2_folder(tmp_path / "wide", rng.standard_normal((40, 17)).astype(np.float32),
                         rng.standard_normal((40, 17)).astype(np.float32))
    for args in (("geometry",), ("geometry", "--table", "position"), ("similarity", "0", "1", "--ids", "--remove-top", "1"),
                 ("neighbors", "0", "--ids", "--remove-top", "1")):
        err = run(*args, "-c", folder, code=1).stderr
        assert "expected at most 16 columns" in err and "found 17" in err, (args, err)
    doc = run_json("compare", folder, folder)
    assert doc["tables"]["token"]["cka"] is None
    assert any("linear CKA not computed: the tables are 17 and 17 wide" in note for note in doc["notes"]), doc["notes"]
    narrow = gpt2_folder(tmp_path / "narrow", rng.standard_normal((6, 16)).astype(np.float32),
                         rng.standard_normal((6, 16)).astype(np.float32))
    assert run_json("geometry", "-c", narrow)["mean_cosine"] is not None
    assert run_json("compare", narrow, narrow)["tables"]["token"]["cka"] == pytest.approx(1.0)
    short = gpt2_folder(tmp_path / "short", rng.standard_normal((6, 17)).astype(np.float32),
                        rng.standard_normal((6, 17)).astype(np.float32))
    assert run_json("geometry", "-c", short)["mean_cosine"] is not None  # 6 x 6 Gram matrices, no 17 x 17 one


def test_similarity_of_ids_says_why_its_tokens_are_ids(tmp_path):
    # as neighbors --all: a --tokenizer that failed to load was dropped without a word (info and export said it)
    folder, broken = with_broken_tokenizer(tmp_path, seed=2)
    doc = run_json("similarity", "3", "4", "--ids", "-c", folder, "--tokenizer", broken)
    assert [note[:21] for note in doc["notes"]] == ["tokenizer not loaded:"]
    assert "note: tokenizer not loaded:" in run("similarity", "3", "4", "--ids", "-c", folder, "--tokenizer", broken).stdout
    assert run_json("similarity", "3", "4", "--ids", "-c", folder)["notes"] == []  # none at all: the #ids say it


def test_an_unanswered_question_of_ids_still_says_why_its_tokens_are_ids(tmp_path):
    """The query row is zero (neighbors), an input row is (analogy), or the three inputs are the whole table: no
    answer, and the inputs still print as #ids, so the reason the tokenizer gave none stays (the commands added it
    to every answer before the library did; the library gave it only with answers)."""
    folder, broken = with_broken_tokenizer(tmp_path, seed=3)
    table_path = folder / "model.safetensors"
    from safetensors.numpy import load_file, save_file
    tensors = load_file(table_path)
    tensors["wte.weight"][3] = 0
    save_file(tensors, table_path)
    doc = run_json("neighbors", "3", "--ids", "-c", folder, "--tokenizer", broken)
    assert doc["reason"] == "row 3 ('#3') has zero norm" and doc["note"].startswith("tokenizer not loaded:")
    doc = run_json("analogy", "3", "1", "2", "--ids", "-c", folder, "--tokenizer", broken)
    assert doc["reason"].startswith("row 3 ('#3') for '3' is zero")
    assert [note[:21] for note in doc["notes"]] == ["tokenizer not loaded:"]
    three = gpt2_folder(tmp_path / "three", np.eye(3, 4, dtype=np.float32), np.ones((8, 4), np.float32))
    doc = run_json("analogy", "0", "1", "2", "--ids", "-c", three, "--tokenizer", broken)
    assert doc["reason"].startswith("no row is left to answer: the table has 3 rows")
    assert [note[:21] for note in doc["notes"]] == ["tokenizer not loaded:"]


def test_a_run_of_save_pretrained_steps_lists_each_step_by_its_folder(tmp_path):
    # generic stems: "checkpoints in order: model.safetensors (step 100 ...), model.safetensors (...)"
    # named every step of a run of save_pretrained folders the same
    rng = np.random.default_rng(5)
    run_folder = tmp_path / "run"
    run_folder.mkdir()
    for step in (100, 200, 300):
        gpt2_folder(run_folder / f"checkpoint-{step}", rng.standard_normal((20, 4)).astype(np.float32),
                    rng.standard_normal((8, 4)).astype(np.float32))
    line = next(line for line in run("compare", run_folder).stdout.splitlines() if line.startswith("checkpoints in"))
    for step in (100, 200, 300):
        assert f"checkpoint-{step}/model.safetensors (step {step}" in line, line
    given = [run_folder / f"checkpoint-{step}" for step in (100, 200, 300)]
    line = next(line for line in run("compare", *given).stdout.splitlines() if line.startswith("checkpoints in"))
    for step in (100, 200, 300):
        assert f"checkpoint-{step}/model.safetensors (step {step}" in line, line


@pytest.mark.slow  # seconds of subprocesses: CI's slow step runs it; a cheaper test of the same feature stays in the suite
def test_json_says_what_the_console_says_of_a_default_name(tmp_path, monkeypatch):
    # a default name is replaced only for the same checkpoint "and the answer says replaced"; the console
    # said it, a --json answer only gave the path
    rng = np.random.default_rng(6)
    a = gpt2_folder(tmp_path / "a", rng.standard_normal((10, 4)).astype(np.float32),
                    rng.standard_normal((8, 4)).astype(np.float32))
    (tmp_path / "b").mkdir()
    b = gpt2_folder(tmp_path / "b" / "a", rng.standard_normal((10, 4)).astype(np.float32),
                    rng.standard_normal((8, 4)).astype(np.float32))  # another checkpoint, the same default name
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    first = run_json("norms", "--plot", "-c", a)
    assert (first["plot"], first["plot_replaced"], first["plot_instead_of"]) == ("a-position-norms.png", False, None)
    again = run_json("norms", "--plot", "-c", a)
    assert (again["plot"], again["plot_replaced"], again["plot_instead_of"]) == ("a-position-norms.png", True, None)
    other = run_json("norms", "--plot", "-c", b)
    assert (other["plot"], other["plot_replaced"], other["plot_instead_of"]) == (
        "a-position-norms-2.png", False, "a-position-norms.png")
    # the report's own name is the point: its figures (three quarters of its CPU) are left out as on an install
    # without matplotlib; tests/test_report.py checks pages with them
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    run_json("report", "-c", a)
    report = run_json("report", "-c", a)
    assert (report["out"], report["out_replaced"], report["out_instead_of"]) == ("a-report.html", True, None)


def test_neighbors_of_an_id_says_why_its_tokens_are_ids(tmp_path):
    folder, broken = with_broken_tokenizer(tmp_path, seed=3)
    doc = run_json("neighbors", "3", "--ids", "-k", "2", "-c", folder, "--tokenizer", broken)
    assert doc["note"].startswith("tokenizer not loaded:"), doc["note"]
    assert run_json("neighbors", "3", "--ids", "-k", "2", "-c", folder)["note"] is None


def test_analogy_of_ids_says_why_its_tokens_are_ids(tmp_path):
    folder, broken = with_broken_tokenizer(tmp_path, seed=8)
    doc = run_json("analogy", "3", "4", "5", "--ids", "-k", "2", "-c", folder, "--tokenizer", broken)
    assert any(note.startswith("tokenizer not loaded:") for note in doc["notes"]), doc["notes"]
    assert not any("tokenizer" in note for note in run_json("analogy", "3", "4", "5", "--ids", "-k", "2", "-c",
                                                              folder)["notes"])


def test_compare_plot_of_zero_position_tables_and_its_title(tmp_path, monkeypatch):
    # a position profile of NaN alone gave the log axis no limits (matplotlib's traceback), and the title cut whole
    # at 80 characters kept A's name and lost B's ("B =....safetensors")
    import matplotlib.figure
    titles = []
    suptitle = matplotlib.figure.Figure.suptitle
    monkeypatch.setattr(matplotlib.figure.Figure, "suptitle",
                        lambda self, text, **kw: titles.append(text) or suptitle(self, text, **kw))
    zero = gpt2_folder(tmp_path / "zero", np.zeros((20, 8), np.float32), np.zeros((16, 8), np.float32))
    gpt2_folder(tmp_path / "other", np.ones((20, 8), np.float32), np.ones((16, 8), np.float32))
    monkeypatch.chdir(tmp_path)
    run("compare", "zero", "zero", "--plot", "zz.png")
    run("compare", "zero", "other", "--plot", "zo.png")
    assert titles[-1] == "A = zero/model.safetensors (step unknown)  vs  B = other/model.safetensors (step unknown)"
    assert zero.exists() and (tmp_path / "zz.png").stat().st_size > 0
