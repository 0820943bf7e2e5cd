"""neighbors: one query against brute-force numpy (ties by id), padding rows, and --all written to
.tsv / .jsonl / .npz and read back. Tables are written to real files."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from byte_tokenizer import ByteWordTokenizer
from conftest import harris_tokenizer, run, run_json

import embscope
from embscope.analysis.neighbors import neighbors, topk_all
from embscope.core.errors import TokenError

ROWS, DIM = 264, 8  # the test tokenizer has 260 ids: rows 260..263 are padding
# the fixture table's zero row (65) and NaN row (66) have no neighbours, and --all says so
NO_COSINE = (f"2 of the {ROWS} rows searched have no neighbours (65, 66): a row of zeros or of NaN or Inf has no "
             "cosine with any row")
ZERO, NAN = 65, 66
DOG, CAT, PUPPY = 256, 257, 258
TWIN_A, TWIN_B = 40, 41  # identical rows: every query sees them tied


def make_table() -> np.ndarray:
    rng = np.random.default_rng(11)
    table = rng.standard_normal((ROWS, DIM)).astype(np.float32)
    table[TWIN_B] = table[TWIN_A]
    table[262] = table[DOG] + 0.05 * rng.standard_normal(DIM).astype(np.float32)  # a padding row near "dog"
    table[ZERO] = 0.0
    table[NAN, 1] = np.nan
    return table


def brute_force(table, vector, exclude, k):
    """Top k by cosine in float64; invalid rows and `exclude` left out; ties to the lower id."""
    t = np.asarray(table, np.float64)
    finite = np.isfinite(t).all(axis=1)
    t = np.where(finite[:, None], t, 0)
    norms = np.linalg.norm(t, axis=1)
    ok = finite & (norms > 0)
    ok[list(exclude)] = False
    ids = np.flatnonzero(ok)
    v = np.asarray(vector, np.float64)
    sims = t[ids] @ v / (norms[ids] * np.linalg.norm(v))
    order = np.lexsort((ids, -np.round(sims, 6)))[:k]  # round: float32 ties stay ties
    return ids[order], sims[order]


@pytest.fixture
def table():
    return make_table()


@pytest.fixture
def npz_path(tmp_path, table):
    path = tmp_path / "model.npz"
    np.savez(path, token_emb=table)
    return path


@pytest.fixture
def emb(npz_path):
    opened = embscope.open(npz_path)
    opened.tokenizer = ByteWordTokenizer()
    return opened




# --- one query ---

@pytest.mark.parametrize("query", [1, 17, TWIN_A, DOG, 263])
def test_id_neighbors_match_brute_force(emb, table, query):
    result = neighbors(emb, query, k=12, ids=True)
    ids, sims = brute_force(table, table[query], [query], 12)
    assert [n.id for n in result.neighbors] == ids.tolist()
    assert [n.cosine for n in result.neighbors] == pytest.approx(sims.tolist(), abs=1e-5)
    assert result.query.ids == (query,) and result.reason is None


def test_tied_rows_come_in_id_order(emb, table):
    # a twin asked about itself finds the other first, at cosine 1
    first = neighbors(emb, TWIN_B, k=3, ids=True).neighbors[0]
    assert first.id == TWIN_A and first.cosine == pytest.approx(1.0, abs=1e-6)
    tie_query = next(q for q in range(ROWS) if q not in (TWIN_A, TWIN_B, ZERO, NAN)
                     and TWIN_A in brute_force(table, table[q], [q], 4)[0])
    got = neighbors(emb, tie_query, k=5, ids=True).neighbors
    at = [n.id for n in got].index(TWIN_A)
    assert got[at + 1].id == TWIN_B and got[at + 1].cosine == got[at].cosine


def test_word_neighbors_name_tokens_and_mark_padding(emb, table):
    result = neighbors(emb, "dog", k=5)
    ids, _ = brute_force(table, table[DOG], [DOG], 5)
    assert [n.id for n in result.neighbors] == ids.tolist()
    assert result.neighbors[0].id == 262  # the padding row planted next to "dog"
    first = result.neighbors[0]
    assert first.padding and first.token == "#262"
    assert all(not n.padding for n in result.neighbors if n.id < 260)
    assert all(n.token == ByteWordTokenizer().token_string(n.id) for n in result.neighbors if n.id < 260)
    assert result.note  # lookup_word's note on the form used


def test_multi_token_word_uses_the_mean_and_excludes_its_own_ids(emb, table):
    result = neighbors(emb, "dogcat", k=8)
    assert result.query.ids == (DOG, CAT)
    ids, sims = brute_force(table, (table[DOG].astype(np.float64) + table[CAT]) / 2, [DOG, CAT], 8)
    assert [n.id for n in result.neighbors] == ids.tolist()
    assert [n.cosine for n in result.neighbors] == pytest.approx(sims.tolist(), abs=1e-5)
    assert DOG not in ids and CAT not in ids
    assert "is 2 tokens (256 'dog', 257 'cat'): its vector is the mean of their rows" in result.note


def test_invalid_rows_are_never_neighbours(emb):
    found = {n.id for q in (1, 2, 3) for n in neighbors(emb, q, k=ROWS, ids=True).neighbors}
    assert ZERO not in found and NAN not in found
    assert len(neighbors(emb, 1, k=ROWS, ids=True).neighbors) == ROWS - 3  # all but self, zero and NaN


def test_a_zero_query_has_no_neighbours_and_says_why(emb):
    result = neighbors(emb, ZERO, ids=True)
    assert result.neighbors == ()
    assert result.reason == "row 65 ('A') has zero norm"


def test_out_of_range_query_is_a_token_error(emb):
    with pytest.raises(TokenError, match=r"^expected token ids 0\.\.263 \(the table has 264 rows\), found 264$"):
        neighbors(emb, 264, ids=True)


# --- every row ---

def test_topk_all_every_row_matches_brute_force(emb, table):
    result = topk_all(emb, 6)
    assert result.ids.shape == (ROWS, 6) and result.query_ids.tolist() == list(range(ROWS))
    for q in range(ROWS):
        if q in (ZERO, NAN):
            assert (result.ids[q] == -1).all() and np.isnan(result.scores[q]).all()
            continue
        ids, sims = brute_force(table, table[q], [q], 6)
        assert result.ids[q].tolist() == ids.tolist(), q
        np.testing.assert_allclose(result.scores[q], sims, atol=1e-5)


def test_topk_all_takes_one_token_words_and_refuses_merged_ones(emb):
    result = topk_all(emb, 3, queries=["dog", "cat"])
    assert result.query_ids.tolist() == [DOG, CAT]
    with pytest.raises(TokenError, match="'dogcat'"):
        topk_all(emb, 3, queries=["dogcat"])


def read_tsv(path):
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "query_id\tquery_token\trank\tid\ttoken\tcosine"
    return [line.split("\t") for line in lines[1:]]


def test_cli_all_to_tsv(npz_path, table, tmp_path):
    out = tmp_path / "out" / "top.tsv"
    out.parent.mkdir()
    result = run("neighbors", "-c", npz_path, "--all", "-k", 4, "--out", out)
    head, summary, *note = result.stdout.rstrip("\n").split("\n")
    assert head == f"checkpoint: {npz_path} (step unknown)"
    assert summary.startswith(f"wrote the top-4 neighbours of {ROWS} token rows to ")
    assert " ".join(part.strip() for part in note) == f"note: {NO_COSINE}"  # the table's zero and NaN rows (65, 66): no line of theirs
    rows = read_tsv(out)
    assert len(rows) == (ROWS - 2) * 4  # the zero and NaN rows have no neighbours
    by_query = {}
    for query_id, query_token, rank, token_id, token, cosine in rows:
        assert query_token == f"#{query_id}" and token == f"#{token_id}"  # no tokenizer beside the file
        by_query.setdefault(int(query_id), []).append((int(rank), int(token_id), float(cosine)))
    for q, got in by_query.items():
        ids, sims = brute_force(table, table[q], [q], 4)
        assert [r for r, _, _ in got] == [1, 2, 3, 4]
        assert [i for _, i, _ in got] == ids.tolist()
        np.testing.assert_allclose([c for _, _, c in got], sims, atol=1e-5)
    assert sorted(p.name for p in out.parent.iterdir()) == ["top.tsv"]  # no temporary left behind


def test_auto_weighs_a_queries_file_by_the_lines_it_can_hold(npz_path, table, tmp_path, monkeypatch):
    from embscope import compute
    from embscope.analysis.neighbors_all import neighbors_all
    from embscope.options import LookupOptions

    weighed = []
    resolve = compute.resolve_precision
    monkeypatch.setattr(compute, "resolve_precision", lambda *a: weighed.append(a[2]) or resolve(*a))
    queries = tmp_path / "queries.txt"
    queries.write_text("3\n65\n")  # 5 bytes: at most 3 lines of a byte and a newline
    rows, dim = table.shape
    neighbors_all(embscope.open(npz_path), 2, queries_file=queries, lookup=LookupOptions(ids=True))
    neighbors_all(embscope.open(npz_path), 2)
    assert weighed == [3 * rows * dim, rows * rows * dim]


def test_cli_all_to_jsonl_with_queries_file(npz_path, table, tmp_path):
    queries = tmp_path / "queries.txt"
    queries.write_text("# ids\n3\n\n65\n263\n")
    out = tmp_path / "top.jsonl"
    result = run("neighbors", "-c", npz_path, "--all", "--ids", "--queries", queries, "-k", 5, "--out", out, "--json")
    summary = json.loads(result.stdout)
    assert summary["queries"] == 3 and summary["k"] == 5 and summary["format"] == "jsonl"
    # auto: fp32 for a search this small, whatever the CPU (bf16 pays torch's import only past BF16_LEAST_WORK)
    assert summary["device"] == "cpu" and summary["precision"] == "fp32"
    docs = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [d["query_id"] for d in docs] == [3, ZERO, 263]
    assert docs[1]["neighbors"] == []
    for doc in (docs[0], docs[2]):
        ids, sims = brute_force(table, table[doc["query_id"]], [doc["query_id"]], 5)
        assert [n["id"] for n in doc["neighbors"]] == ids.tolist()
        np.testing.assert_allclose([n["cosine"] for n in doc["neighbors"]], sims, atol=1e-5)


def test_cli_all_to_npz(npz_path, table, tmp_path):
    out = tmp_path / "top.npz"
    run("neighbors", "-c", npz_path, "--all", "-k", 3, "--out", out, "--device", "cpu")
    with np.load(out) as saved:
        ids, scores, query_ids = saved["ids"], saved["scores"], saved["query_ids"]
    assert ids.shape == (ROWS, 3) and scores.dtype == np.float32 and query_ids.tolist() == list(range(ROWS))
    for q in (0, 1, TWIN_A, DOG, 263):
        expected, sims = brute_force(table, table[q], [q], 3)
        assert ids[q].tolist() == expected.tolist()
        np.testing.assert_allclose(scores[q], sims, atol=1e-5)
    assert (ids[ZERO] == -1).all() and np.isnan(scores[NAN]).all()


def test_cli_all_pads_when_k_exceeds_the_rows(tmp_path):
    table = np.random.default_rng(2).standard_normal((5, 4)).astype(np.float32)
    path = tmp_path / "tiny.npz"
    np.savez(path, token_emb=table)
    out = tmp_path / "top.npz"
    run("neighbors", "-c", path, "--all", "-k", 7, "--out", out)
    with np.load(out) as saved:
        assert (saved["ids"][:, 4:] == -1).all() and np.isnan(saved["scores"][:, 4:]).all()
        assert (saved["ids"][:, :4] >= 0).all()


def test_cli_all_refuses_other_extensions_before_work(npz_path, tmp_path):
    out = tmp_path / "top.csv"
    result = run("neighbors", "-c", npz_path, "--all", "--out", out, code=2)
    assert result.stderr.splitlines()[0] == (f"Error: Invalid value for '--out': expected a file ending in .tsv, "
                                             f".jsonl or .npz, or - for TSV on standard output, found {str(out)!r}")
    assert not out.exists()


def test_cli_all_with_a_queries_file_of_which_no_line_could_be_used_is_an_error(npz_path, tmp_path):
    queries = tmp_path / "queries.txt"
    queries.write_text("5000\nseven\n")
    out = tmp_path / "top.jsonl"
    result = run("neighbors", "-c", npz_path, "--all", "--ids", "--queries", queries, "--out", out, code=1)
    assert result.stderr == (f"Error: expected at least one line of {str(queries)!r} that could be used, found none "
                             "(query 1: expected token ids 0..263 (the table has 264 rows), found 5000; query 2: "
                             "expected a token id (a whole number), found 'seven')\n")
    assert not out.exists()


def test_cli_all_needs_out_and_a_query_needs_a_word(npz_path):
    run("neighbors", "-c", npz_path, "--all", code=2)
    run("neighbors", "-c", npz_path, code=2)


# --- one query, the command ---

def test_cli_id_json(npz_path, table):
    result = run("neighbors", "-c", npz_path, "--ids", 17, "-k", 5, "--json")
    doc = json.loads(result.stdout)
    ids, sims = brute_force(table, table[17], [17], 5)
    assert doc["query"] == "17" and doc["ids"] == [17] and doc["tokens"] == ["#17"]
    assert [n["id"] for n in doc["neighbors"]] == ids.tolist()
    np.testing.assert_allclose([n["cosine"] for n in doc["neighbors"]], sims, atol=1e-5)
    assert all(n["padding"] is False and n["token"] == f"#{n['id']}" for n in doc["neighbors"])


def test_cli_id_console(npz_path, table):
    result = run("neighbors", "-c", npz_path, "--ids", 17, "-k", 3)
    ids, sims = brute_force(table, table[17], [17], 3)
    for token_id, sim in zip(ids, sims):
        assert f"#{token_id}" in result.stdout and f"{sim:+.4f}" in result.stdout


def test_cli_out_of_range_exits_1(npz_path):
    result = run("neighbors", "-c", npz_path, "--ids", 300, code=1)
    assert result.stderr == "Error: expected token ids 0..263 (the table has 264 rows), found 300\n"


def test_cli_word_json_marks_padding(tmp_path, table):
    ids = harris_tokenizer(tmp_path, ["dog", "cat", "puppy"])  # 260 ids: rows 260..263 are padding
    table[262] = table[ids["dog"]] + 0.05 * np.random.default_rng(3).standard_normal(DIM).astype(np.float32)
    path = tmp_path / "model.npz"
    np.savez(path, token_emb=table)
    doc = run_json("neighbors", "-c", path, "dog", "-k", 3)
    assert doc["query"] == "dog" and doc["ids"] == [ids["dog"]] and doc["tokens"] == ["dog"] and doc["note"]
    expected, _ = brute_force(table, table[ids["dog"]], [ids["dog"]], 3)
    assert [n["id"] for n in doc["neighbors"]] == expected.tolist()
    assert doc["neighbors"][0] == {"id": 262, "token": "#262", "cosine": pytest.approx(doc["neighbors"][0]["cosine"]),
                                   "padding": True}
    console = run("neighbors", "-c", path, "dog", "-k", 3)
    assert "padding" in console.stdout and "dog -> 257 'dog'" in console.stdout


# --- the --all output files ---

HOSTILE = ['say "hi"', '"', "tab\there", "new\nline", "cr\rx", "\x1b[2J", "", "#1", "NA"]


@pytest.fixture
def hostile_model(tmp_path):
    """A real tokenizer whose tokens hold tabs, line breaks and quotes (ids 257..265), beside a small table."""
    harris_tokenizer(tmp_path, HOSTILE)
    path = tmp_path / "model.npz"
    np.savez(path, token_emb=np.random.default_rng(8).standard_normal((270, 6)).astype(np.float32))
    return path


def test_tsv_reads_back_row_for_row_with_csv_and_pandas(hostile_model, tmp_path):
    import csv

    import pandas
    out = tmp_path / "top.tsv"
    run("neighbors", "-c", hostile_model, "--all", "-k", 3, "--out", out)
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    assert rows[0] == ["query_id", "query_token", "rank", "id", "token", "cosine"] and len(rows) == 1 + 270 * 3
    frame = pandas.read_csv(out, sep="\t", keep_default_na=False, dtype=str)
    assert frame.values.tolist() == rows[1:]
    names = {int(r[0]): r[1] for r in rows[1:]} | {int(r[3]): r[4] for r in rows[1:]}
    for n, token in enumerate(HOSTILE):
        assert names[257 + n] == token
    assert names[256] == "<BOS>" and names[3] == "\x03"


def test_jsonl_carries_the_real_token_strings(hostile_model, tmp_path):
    out = tmp_path / "top.jsonl"
    run("neighbors", "-c", hostile_model, "--all", "-k", 2, "--out", out)
    docs = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(docs) == 270
    for n, token in enumerate(HOSTILE):
        assert docs[257 + n]["query_token"] == token
    named = {m["id"]: m["token"] for d in docs for m in d["neighbors"]}
    assert all(named[i] == HOSTILE[i - 257] for i in named if 257 <= i < 257 + len(HOSTILE))
    assert "\x1b" not in out.read_text(encoding="utf-8")  # JSON escapes what could act on a terminal


def test_out_dash_writes_tsv_to_stdout_and_the_summary_to_stderr(npz_path, table):
    result = run("neighbors", "-c", npz_path, "--all", "-k", 2, "--out", "-")
    lines = result.stdout.splitlines()
    assert lines[0] == "query_id\tquery_token\trank\tid\ttoken\tcosine" and len(lines) == 1 + (ROWS - 2) * 2
    assert result.stderr.startswith(f"checkpoint: {npz_path} (step unknown)\nwrote the top-2 neighbours of ")
    assert "to standard output (tsv)" in result.stderr
    refused = run("neighbors", "-c", npz_path, "--all", "--out", "-", "--json", code=2)
    assert "cannot take --json" in refused.stderr


def test_out_never_replaces_a_file_that_was_read(tmp_path):
    """r12: --out naming the checkpoint itself, or the tokenizer beside it."""
    rng = np.random.default_rng(0)
    path = tmp_path / "params.npz"
    np.savez(path, token_emb=rng.standard_normal((50, 8)).astype(np.float32))
    harris_tokenizer(tmp_path, ["dog"])
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    result = run("neighbors", "--all", "-k", 2, "--out", path, "-c", path, code=1)
    assert result.stderr == (f"Error: expected --out to name a new file, found {str(path)!r}, a file this answer "
                             "was read from: it is never written over\n")
    queries = tmp_path / "queries.tsv"
    queries.write_text("1\n2\n")
    run("neighbors", "--all", "--ids", "--queries", queries, "--out", queries, "-c", path, code=1)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name != "queries.tsv"} == before
    assert queries.read_text() == "1\n2\n"


def test_a_planted_link_at_a_temporary_name_is_never_followed(npz_path, tmp_path):
    """r13: the temporary file is made with O_EXCL | O_NOFOLLOW, under a name nobody can plant in advance."""
    import os
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    shared = tmp_path / "shared"
    shared.mkdir()
    for pid in range(os.getpid() - 3, os.getpid() + 4):  # the old scheme's names, for this process and its neighbours
        (shared / f".out.tsv.{pid}.partial").symlink_to(victim)
    run("neighbors", "-c", npz_path, "--all", "-k", 2, "--out", shared / "out.tsv")
    assert victim.read_text() == "precious"
    assert (shared / "out.tsv").is_file() and not (shared / "out.tsv").is_symlink()
    assert len(list(shared.iterdir())) == 8  # the links planted, the output, and no temporary left


def test_a_legal_long_out_name_is_written(npz_path, tmp_path):
    out = tmp_path / ("b" * 240 + ".tsv")
    run("neighbors", "-c", npz_path, "--all", "-k", 1, "--out", out)
    assert out.read_text(encoding="utf-8").startswith("query_id\t")


def test_k_larger_than_the_table_is_cut_to_its_rows(npz_path):
    doc = run_json("neighbors", "-c", npz_path, "--all", "-k", 10**12, "--out", npz_path.parent / "top.npz")
    assert doc["k"] == ROWS
    assert doc["notes"] == [(f"-k 1,000,000,000,000 is more than the table's {ROWS} rows: each list holds at most "
                            "that many"), NO_COSINE]


def test_queries_of_several_tokens_are_skipped_with_a_note_or_stop_when_strict(tmp_path, table):
    ids = harris_tokenizer(tmp_path, ["dog", "cat", "puppy"])
    path = tmp_path / "model.npz"
    np.savez(path, token_emb=table)
    queries = tmp_path / "queries.txt"
    queries.write_text("dog\ndogcat\ncat\n")
    out = tmp_path / "top.jsonl"
    doc = run_json("neighbors", "-c", path, "--all", "--queries", queries, "-k", 2, "--out", out)
    assert doc["queries"] == 2
    assert [json.loads(line)["query_id"] for line in out.read_text().splitlines()] == [ids["dog"], ids["cat"]]
    assert doc["notes"] == [(f"skipped 1 line of {str(queries)!r} that could not be used (query 2: expected each "
                            "query to be one token, found 'dogcat' as 2 ('dog' 'cat'); ask `embscope neighbors` about "
                            "it on its own); --strict stops at the first instead")]
    result = run("neighbors", "-c", path, "--all", "--queries", queries, "--out", out, "--strict", code=1)
    assert result.stderr.startswith("Error: expected each query to be one token, found 'dogcat'")


def test_rows_searched_with_no_cosine_are_named_in_a_note_not_left_out_silently(tmp_path):
    # a zero row and a NaN row have no cosine: an empty list (no line in a TSV), and a note that names them (a
    # helper's attack found them left out of a TSV with nothing said)
    table = np.random.default_rng(3).standard_normal((50, 8)).astype(np.float32)
    table[3], table[5] = 0.0, np.nan
    path = tmp_path / "model.npy"
    np.save(path, table)
    queries = tmp_path / "queries.txt"
    queries.write_text("1\n3\n5\n7\n")
    out = tmp_path / "top.jsonl"
    doc = run_json("neighbors", "-c", path, "--all", "--ids", "--queries", queries, "-k", 2, "--out", out)
    found = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(line["query_id"], len(line["neighbors"])) for line in found] == [(1, 2), (3, 0), (5, 0), (7, 2)]
    assert doc["notes"] == [("2 of the 4 rows searched have no neighbours (3, 5): a row of zeros or of NaN or Inf has "
                            "no cosine with any row")]
    every = run_json("neighbors", "-c", path, "--all", "-k", 2, "--out", tmp_path / "all.tsv")
    assert every["notes"] == [("2 of the 50 rows searched have no neighbours (3, 5): a row of zeros or of NaN or Inf "
                              "has no cosine with any row")]
    table[3], table[5] = 1.0, 2.0  # every row has a cosine: no note
    np.save(path, table)
    assert run_json("neighbors", "-c", path, "--all", "-k", 2, "--out", tmp_path / "all.tsv")["notes"] == []


def test_ids_the_tokenizer_does_not_use_are_named_by_number(tmp_path):
    """r20: a minbpe tokenizer whose special token sits far above its merges leaves ids unused."""
    (tmp_path / "tokenizer.model").write_text("minbpe v1\n\n1\n<|endoftext|> 400\n104 101\n256 108\n257 108\n")
    table = np.random.default_rng(1).standard_normal((410, 8)).astype(np.float32)
    table[300] = table[1] * 2  # an unused id is the nearest neighbour of id 1
    path = tmp_path / "model.npz"
    np.savez(path, token_emb=table)
    doc = run_json("neighbors", "-c", path, "--ids", 1, "-k", 1)
    assert doc["neighbors"][0]["id"] == 300 and doc["neighbors"][0]["token"] == "#300"
    assert run_json("similarity", "-c", path, "--ids", 300, 1)["pairs"][0]["a_tokens"] == ["#300"]
    out = tmp_path / "top.tsv"
    run("neighbors", "-c", path, "--all", "-k", 1, "--out", out)
    assert "300\t#300\t1\t1\t\x01\t" in out.read_text(encoding="utf-8")  # the byte's own string, unescaped


def test_bf16_on_a_cpu_without_native_bf16_says_so_once(npz_path, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    import embscope.hardware
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f\n\nprocessor\t: 1\nflags\t\t: fpu avx2\n")
    monkeypatch.setattr(embscope.hardware, "CPU_INFO", cpuinfo)
    args = ("neighbors", "-c", npz_path, "--all", "-k", 2, "--out", tmp_path / "top.npz", "--device", "cpu",
            "--precision", "bf16")
    result = run(*args)
    assert result.stdout.count("note: --precision bf16 on this CPU: it has no native bf16 matmul") == 1
    cpuinfo.write_text("flags\t\t: fpu avx512_bf16\n")
    assert "no native bf16" not in run(*args).stdout


def test_tf32_on_the_cpu_says_it_ran_fp32(tmp_path):
    doc = run_json("neighbors", "--all", "-k", "2", "--out", tmp_path / "n.npz", "--precision", "tf32", "--device", "cpu")
    assert doc["precision"] == "fp32"
    assert "--precision tf32 is a GPU tensor-core mode: on the cpu the products ran in fp32" in doc["notes"]


def test_cli_queries_may_not_be_a_pipe(npz_path, tmp_path):
    fifo = tmp_path / "queries"
    os.mkfifo(fifo)
    result = run("neighbors", "-c", npz_path, "--all", "--out", tmp_path / "out.tsv", "--queries", fifo, code=1)
    assert result.stderr == f"Error: expected a regular file for --queries, found a named pipe (FIFO) at '{fifo}'\n"


def test_a_k_past_the_table_says_how_many_rows_it_found(npz_path):
    doc = run_json("neighbors", "-c", npz_path, "--ids", "1", "-k", 10**18)
    # the zero and the NaN row have no cosine, and the query is left out
    assert len(doc["neighbors"]) == ROWS - 3
    assert doc["note"] == f"-k {10**18:,} asks for more rows than there are: all {ROWS - 3} rows with a cosine are listed"


def test_the_tsv_on_stdout_is_utf8_whatever_the_terminal_says(tmp_path):
    """The rows are data: PYTHONIOENCODING=ascii once turned every non-ASCII token into an escape. (fp32: numpy's
    product; auto is bf16 on a CPU with it, and imports torch, two seconds of the child, for 257 rows.)"""
    import subprocess
    import sys
    vocab = tmp_path / "ckpt"
    vocab.mkdir()
    np.savez(vocab / "m.npz", token_emb=np.random.default_rng(4).standard_normal((257, 4)).astype(np.float32))
    (vocab / "merges.json").write_text(json.dumps({"merges": [[195, 169]]}))  # id 256 = "é" (bytes c3 a9)
    done = subprocess.run([sys.executable, "-m", "embscope", "neighbors", "-c", str(vocab / "m.npz"), "--all", "-k", "1",
                           "--out", "-", "--ids", "--precision", "fp32"], capture_output=True, env={**os.environ, "PYTHONIOENCODING": "ascii"},
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    import csv
    import io
    rows = list(csv.reader(io.StringIO(done.stdout.decode("utf-8"), newline=""), delimiter="\t"))
    assert rows[0] == ["query_id", "query_token", "rank", "id", "token", "cosine"] and len(rows) == 1 + 257
    assert rows[-1][:3] == ["256", "é", "1"]


def test_an_interrupt_during_the_last_flush_to_stdout_leaves_stdout_open(monkeypatch):
    # `--out -` behind a stopped reader: a first Ctrl-C or SIGTERM in the writing, a second in the flush that hands
    # stdout's buffer back; the text layer stayed attached and, collected, closed sys.stdout, so the exit's flush
    # printed "ValueError: I/O operation on closed file" as a traceback
    import gc

    from embscope.compute.topk import TopK
    from embscope.render.neighbors_out import write_neighbors

    class Stopped(io.RawIOBase):  # every write interrupted, as a signal would interrupt the blocked write
        def writable(self):
            return True

        def write(self, data):
            raise KeyboardInterrupt

    stdout = io.TextIOWrapper(io.BufferedWriter(Stopped()), encoding="utf-8")
    monkeypatch.setattr(sys, "stdout", stdout)
    topk = TopK(np.array([[1]]), np.array([[0.5]], dtype=np.float32), np.array([0]))
    with pytest.raises(KeyboardInterrupt):
        write_neighbors(Path("-"), topk, str)
    gc.collect()
    assert not stdout.buffer.closed
