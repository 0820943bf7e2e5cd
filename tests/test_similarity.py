"""similarity: cosines between token rows (words, ids, merged pieces), the random-pair baseline, and the CLI.
Tables are written to real files; every expected number is worked out again here with plain numpy."""

from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
import warnings
from itertools import combinations

import numpy as np
import pytest
from byte_tokenizer import ByteWordTokenizer
from conftest import cosine, harris_tokenizer, invoke, run, run_json
from safetensors.numpy import save_file

import embscope
from embscope import compute
from embscope.analysis.similarity import BASELINE_PAIRS, BASELINE_SEED, similarity, similarity_pairs
from embscope.core.errors import TableError, TokenError
from embscope.core.role import Role

ROWS, DIM = 264, 8  # the test tokenizer has 260 ids: rows 260..263 are padding
ZERO, NAN, INF = 65, 66, 67  # bytes "A", "B", "C"
DOG, CAT, PUPPY, HOUSE = 256, 257, 258, 259


def make_table(seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((ROWS, DIM)).astype(np.float32)
    table[PUPPY] = table[DOG] + 0.1 * rng.standard_normal(DIM).astype(np.float32)  # a close pair
    table[ZERO] = 0.0
    table[NAN, 3] = np.nan
    table[INF, 0] = np.inf
    return table


def valid_rows(table) -> np.ndarray:
    t = np.asarray(table, np.float64)
    finite = np.isfinite(t).all(axis=1)
    return finite & (np.linalg.norm(np.where(finite[:, None], t, 0), axis=1) > 0)


def numpy_sample(table, n_pairs: int = 10000, seed: int = 0) -> np.ndarray:
    """The baseline's sampling rule written out: pairs of distinct valid rows drawn with the seed, float64 cosines."""
    t = np.asarray(table, np.float64)
    valid_ids = np.flatnonzero(valid_rows(table))
    rng = np.random.default_rng(seed)
    first = rng.integers(0, valid_ids.size, size=n_pairs)
    second = rng.integers(0, valid_ids.size - 1, size=n_pairs)
    second += second >= first
    a, b = t[valid_ids[first]], t[valid_ids[second]]
    return np.einsum("ij,ij->i", a, b) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def brute_mean_random_cosine(table) -> float:
    """Mean cosine over every ordered pair of distinct valid rows, the slow way."""
    t = np.asarray(table, np.float64)[valid_rows(table)]
    unit = t / np.linalg.norm(t, axis=1, keepdims=True)
    sims = unit @ unit.T
    n = len(unit)
    return float((sims.sum() - np.trace(sims)) / (n * (n - 1)))


@pytest.fixture
def table():
    return make_table()


@pytest.fixture
def npz_path(tmp_path, table):
    path = tmp_path / "model.npz"
    np.savez(path, token_emb=table, pos_emb=np.ones((16, DIM), np.float32))
    return path


@pytest.fixture
def emb(npz_path):
    opened = embscope.open(npz_path)
    opened.tokenizer = ByteWordTokenizer()  # the library takes any object with the tokenizer interface
    return opened




# --- library: words, ids, merged words ---

def test_two_words_give_one_pair_with_the_ids_and_tokens_used(emb, table):
    result = similarity(emb, ["dog", "cat"])
    (pair,) = result.pairs
    assert pair.a.ids == (DOG,) and pair.a.tokens == ("dog",)
    assert pair.b.ids == (CAT,) and pair.b.tokens == ("cat",)
    assert pair.cosine == pytest.approx(cosine(table[DOG], table[CAT]), abs=1e-6)
    assert pair.reason is None
    # the test tokenizer makes the space a token of its own: said once for the answer, not as a note on each word
    assert pair.a.note is None and pair.a.space_id == pair.b.space_id == 32 and pair.choice.name == "either"
    assert result.space_note == "the space is a token of its own (id 32); words are looked up without the space before them"
    assert result.table is Role.token and result.table_name == "token_emb" and not result.centered


@pytest.mark.parametrize("call, option", [
    (lambda emb: similarity(emb, "dog cat"), "words_or_ids"),
    (lambda emb: embscope.topk_all(emb, 3, queries="dog"), "queries"),
    (lambda emb: embscope.table_map(emb, Role.token, words="dog"), "words"),
], ids=["similarity", "topk_all", "table_map"])
def test_one_string_where_a_list_of_words_goes_is_refused(emb, call, option):
    # "dog cat" was gone through one character at a time: similarity answered about 'd', 'o', 'g', ' ', 'c', ...
    with pytest.raises(embscope.OptionError, match="found the string .*one character at a time") as err:
        call(emb)
    assert err.value.option == option


@pytest.mark.parametrize("word", [["dog"], None, 2.5, True])
def test_a_word_that_is_no_str_is_refused(emb, word):
    # neighbors(emb, ["dog"]) looked up the text "['dog']", bytes of brackets and quotes, and answered about it
    with pytest.raises(TokenError, match=r"expected a word \(a str\), found"):
        embscope.neighbors(emb, word)
    with pytest.raises(TokenError, match=r"expected a word \(a str\)( or an id)?, found"):
        similarity(emb, ["dog", word])


def test_a_word_of_several_tokens_is_the_mean_of_its_rows(emb, table):
    (pair,) = similarity(emb, ["dogcat", "puppy"]).pairs
    assert pair.a.ids == (DOG, CAT) and pair.a.tokens == ("dog", "cat") and pair.a.merged
    expected = cosine((table[DOG].astype(np.float64) + table[CAT]) / 2, table[PUPPY])
    assert pair.cosine == pytest.approx(expected, abs=1e-6)


def test_a_merged_word_is_the_mean_not_the_sum_once_centered(emb, table):
    # cosine cannot tell a mean from a sum, but after subtracting the mean row it can
    (pair,) = similarity(emb, ["dogcat", "puppy"], center=True).pairs
    mean = table[np.isfinite(table).all(axis=1)].astype(np.float64).mean(axis=0)
    merged = (table[DOG].astype(np.float64) + table[CAT]) / 2
    assert pair.cosine == pytest.approx(cosine(merged - mean, table[PUPPY] - mean), abs=1e-6)
    assert pair.cosine != pytest.approx(cosine(2 * merged - mean, table[PUPPY] - mean), abs=1e-3)


def test_bytes_of_an_unknown_word_are_merged_and_named(emb, table):
    (pair,) = similarity(emb, ["ox", "dog"]).pairs
    assert pair.a.ids == (ord("o"), ord("x")) and pair.a.tokens == ("o", "x")
    assert pair.cosine == pytest.approx(cosine(table[[ord("o"), ord("x")]].astype(np.float64).mean(0), table[DOG]), abs=1e-6)


def test_no_merge_refuses_a_word_of_several_tokens(emb):
    with pytest.raises(TokenError) as err:
        similarity(emb, ["dogcat", "puppy"], merge=False)
    assert str(err.value) == ("expected 'dogcat' to be one token, found 2 ('dog' 'cat'); "
                              "merging them is turned off (merge=False)")  # the library's words: its keyword
    assert err.value.option == "merge"


def test_exact_encodes_the_word_as_typed(emb, table):
    (pair,) = similarity(emb, [" dog", "cat"], exact=True).pairs
    assert pair.a.ids == (32, DOG)  # the space stays a token of its own
    assert pair.cosine == pytest.approx(cosine(table[[32, DOG]].astype(np.float64).mean(0), table[CAT]), abs=1e-6)


def test_more_words_give_every_pair_and_a_symmetric_matrix(emb, table):
    words = ["dog", "cat", "puppy", "house"]
    result = similarity(emb, words)
    assert [(p.a.text, p.b.text) for p in result.pairs] == list(combinations(words, 2))
    rows = [DOG, CAT, PUPPY, HOUSE]
    for pair in result.pairs:
        i, j = words.index(pair.a.text), words.index(pair.b.text)
        assert pair.cosine == pytest.approx(cosine(table[rows[i]], table[rows[j]]), abs=1e-6)
        assert result.matrix[i][j] == result.matrix[j][i] == pair.cosine
    assert [result.matrix[i][i] for i in range(4)] == [1.0] * 4


def test_a_matrix_wider_than_the_console_is_left_out_whole(npz_path, table):
    # past the width rich folded each cosine over lines: +0.0588 printed as '+0.058' above '8' at 8 words, and 300
    # words gave an empty grid of borders
    ids = [str(i) for i in range(100, 108)]
    printed = run("similarity", "-c", npz_path, "--ids", *ids).stdout
    found = re.search(r"cosine matrix left out: 8 words need (\d+) columns, the console has (\d+) \(--json lists "
                      r"every pair\)", " ".join(printed.split()))
    assert found and int(found[1]) > int(found[2]) and "┃ 100" not in printed
    three = run("similarity", "-c", npz_path, "--ids", "100", "101", "102").stdout
    matrix = three[three.index("cosine matrix"):]
    unit = table[100:103] / np.linalg.norm(table[100:103], axis=1, keepdims=True)
    for i, row in enumerate(unit @ unit.T):
        assert f"│ {100 + i} │ " + " │ ".join(f"{v:+.4f}" for v in row) + " │" in matrix


def test_ids_take_raw_rows_and_name_them_through_the_tokenizer(emb, table):
    (pair,) = similarity(emb, [DOG, "97"], ids=True).pairs
    assert pair.a.tokens == ("dog",) and pair.b.tokens == ("a",) and pair.b.ids == (97,)
    assert pair.cosine == pytest.approx(cosine(table[DOG], table[97]), abs=1e-6)


def test_padding_ids_print_as_hash_numbers(emb):
    (pair,) = similarity(emb, [262, 263], ids=True).pairs
    assert pair.a.tokens == ("#262",) and pair.b.tokens == ("#263",)


# --- undefined cosines ---

@pytest.mark.parametrize("row, reason", [
    (ZERO, "row 65 ('A') has zero norm"),
    (NAN, "row 66 ('B') holds NaN or Inf"),
    (INF, "row 67 ('C') holds NaN or Inf"),
])
def test_zero_nan_and_inf_rows_give_null_and_a_reason(emb, row, reason):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning from numpy either
        (pair,) = similarity(emb, [1, row], ids=True).pairs
    assert pair.cosine is None and pair.percentile is None
    assert pair.reason == reason


def test_a_merged_word_whose_rows_cancel_has_zero_norm(tmp_path):
    table = make_table()
    table[ord("x")] = -table[ord("o")]
    path = tmp_path / "cancel.npz"
    np.savez(path, token_emb=table)
    emb = embscope.open(path)
    emb.tokenizer = ByteWordTokenizer()
    (pair,) = similarity(emb, ["ox", "dog"]).pairs
    assert pair.cosine is None
    assert pair.reason == "the mean of rows 111, 120 for 'ox' has zero norm"


# --- errors ---

def test_an_id_outside_the_table_is_a_token_error(emb):
    with pytest.raises(TokenError, match=r"^expected token ids 0\.\.263 \(the table has 264 rows\), found 264$"):
        similarity(emb, [1, 264], ids=True)
    with pytest.raises(TokenError, match="found -1$"):
        similarity(emb, [1, -1], ids=True)


def test_an_id_that_is_not_a_number_is_a_token_error(emb):
    with pytest.raises(TokenError, match=r"^expected a token id \(a whole number\), found 'dog'$"):
        similarity(emb, [1, "dog"], ids=True)


def test_a_word_beyond_a_short_table_is_a_token_error(tmp_path):
    path = tmp_path / "short.npz"
    np.savez(path, token_emb=make_table()[:257])  # no row for "cat" (257)
    emb = embscope.open(path)
    emb.tokenizer = ByteWordTokenizer()
    with pytest.raises(TokenError) as err:
        similarity(emb, ["dog", "cat"])
    assert str(err.value) == "expected token ids 0..256 (the table has 257 rows), found 257 for 'cat'"


class RefusingTokenizer(ByteWordTokenizer):
    def encode(self, text):
        if "☃" in text:
            raise ValueError("no token for a snowman")
        return super().encode(text)


def test_a_word_the_tokenizer_cannot_encode_is_a_token_error_naming_it(npz_path):
    emb = embscope.open(npz_path)
    emb.tokenizer = RefusingTokenizer()
    with pytest.raises(TokenError, match="'☃'"):
        similarity(emb, ["☃", "dog"])


def test_words_without_a_tokenizer_say_use_ids(npz_path):
    emb = embscope.open(npz_path)
    emb.tokenizer = None
    with pytest.raises(TokenError) as err:
        similarity(emb, ["dog", "cat"])
    assert str(err.value) == ("expected a tokenizer to look up 'dog', found none beside the checkpoint: "
                              "pass tokenizer=FILE, or use ids=True")
    assert err.value.option == "tokenizer"


def test_one_word_is_not_enough(emb):
    with pytest.raises(TokenError, match="at least two"):
        similarity(emb, ["dog"])


# --- the random-pair baseline ---

def test_baseline_mean_is_exact_and_the_sample_agrees_with_it(emb, table):
    result = similarity(emb, [1, 2], ids=True)
    exact = brute_mean_random_cosine(table)
    assert result.baseline.mean_random_cosine == pytest.approx(exact, abs=1e-9)
    assert result.baseline.seed == 0 and result.baseline.sample_size == 10000
    sample = numpy_sample(table)
    assert abs(np.mean(sample) - exact) < 5 * np.std(sample) / np.sqrt(len(sample))


def test_percentile_is_the_share_of_random_pairs_below_the_cosine(emb, table):
    result = similarity(emb, [1, 2, DOG, PUPPY], ids=True)
    sample = numpy_sample(table)
    for pair in result.pairs:
        assert pair.percentile == pytest.approx(100 * np.mean(sample < pair.cosine))
    close = next(p for p in result.pairs if {p.a.ids[0], p.b.ids[0]} == {DOG, PUPPY})
    assert close.percentile > 99  # the near-duplicate pair beats nearly every random pair
    assert 0 < min(p.percentile for p in result.pairs) < 100


def test_without_the_baseline_there_is_no_percentile(emb, table):
    result = similarity(emb, [1, 2, 3], ids=True, baseline=False)
    assert result.baseline is None
    assert [p.percentile for p in result.pairs] == [None, None, None]
    assert result.pairs[0].cosine == pytest.approx(cosine(table[1], table[2]), abs=1e-6)


def test_center_subtracts_the_mean_row_for_pairs_and_baseline(emb, table):
    result = similarity(emb, [1, 2], ids=True, center=True)
    finite = np.isfinite(table).all(axis=1)
    mean = table[finite].astype(np.float64).mean(axis=0)
    assert result.centered
    assert result.pairs[0].cosine == pytest.approx(cosine(table[1] - mean, table[2] - mean), abs=1e-6)
    centered = (table - mean.astype(np.float32))
    assert result.baseline.mean_random_cosine == pytest.approx(brute_mean_random_cosine(centered), abs=1e-6)


def test_a_table_whose_rows_point_one_way_has_a_high_baseline(tmp_path):
    rng = np.random.default_rng(3)
    table = (rng.standard_normal((64, DIM)) * 0.1 + 1.0).astype(np.float32)
    path = tmp_path / "aligned.npz"
    np.savez(path, token_emb=table)
    plain = similarity(embscope.open(path), [1, 2], ids=True)
    centered = similarity(embscope.open(path), [1, 2], ids=True, center=True)
    assert plain.baseline.mean_random_cosine > 0.9  # every row points along (1, 1, ..., 1)
    assert abs(centered.baseline.mean_random_cosine) < 0.05  # centering removes the shared direction


# --- pairs in one batch, and the output table ---

def test_similarity_pairs_computes_each_listed_pair(emb, table):
    pairs = [("dog", "cat"), ("dog", "puppy"), ("dogcat", "house"), ("dog", "cat")]
    result = similarity_pairs(emb, pairs)
    assert [(p.a.text, p.b.text) for p in result.pairs] == pairs
    assert [q.text for q in result.queries] == ["dog", "cat", "puppy", "dogcat", "house"]
    rows = {"dog": table[DOG], "cat": table[CAT], "puppy": table[PUPPY], "house": table[HOUSE],
            "dogcat": (table[DOG].astype(np.float64) + table[CAT]) / 2}
    for pair in result.pairs:
        assert pair.cosine == pytest.approx(cosine(rows[pair.a.text], rows[pair.b.text]), abs=1e-6)


@pytest.fixture
def untied_path(tmp_path, table):
    rng = np.random.default_rng(7)
    path = tmp_path / "model.safetensors"
    save_file({"transformer.wte.weight": table, "transformer.wpe.weight": np.ones((16, DIM), np.float32),
               "lm_head.weight": rng.standard_normal((ROWS, DIM)).astype(np.float32)}, str(path))
    return path


def test_output_table_uses_the_untied_head(untied_path):
    head = np.random.default_rng(7).standard_normal((ROWS, DIM)).astype(np.float32)
    result = similarity(embscope.open(untied_path), [3, 4], ids=True, table="output")
    assert result.table is Role.output and result.table_name == "lm_head.weight"
    assert result.pairs[0].cosine == pytest.approx(cosine(head[3], head[4]), abs=1e-6)


def test_output_table_of_a_tied_model_is_a_table_error(emb):
    with pytest.raises(TableError):
        similarity(emb, [3, 4], ids=True, table="output")


# --- the command ---

def test_cli_ids_json(npz_path, table):
    result = run("similarity", "-c", npz_path, "--ids", 1, 2, "--json")
    doc = json.loads(result.stdout)
    (pair,) = doc["pairs"]
    assert pair["a_ids"] == [1] and pair["b_ids"] == [2]
    assert pair["a_tokens"] == ["#1"] and pair["b_tokens"] == ["#2"]  # no tokenizer beside the file
    assert pair["cosine"] == pytest.approx(cosine(table[1], table[2]), abs=1e-6)
    assert pair["reason"] is None
    assert doc["baseline"]["mean_random_cosine"] == pytest.approx(brute_mean_random_cosine(table), abs=1e-9)
    assert doc["baseline"]["sample_size"] == 10000 and doc["baseline"]["seed"] == 0
    assert doc["centered"] is False and doc["table"] == "token"


def test_cli_zero_row_is_null_with_reason(npz_path):
    result = run("similarity", "-c", npz_path, "--ids", 1, ZERO, "--json")
    (pair,) = json.loads(result.stdout)["pairs"]
    assert pair["cosine"] is None and pair["percentile"] is None
    assert pair["reason"] == "row 65 ('#65') has zero norm"


def test_cli_id_out_of_range_exits_1_with_one_line(npz_path):
    result = run("similarity", "-c", npz_path, "--ids", 1, 999, code=1)
    assert result.stderr == "Error: expected token ids 0..263 (the table has 264 rows), found 999\n"
    assert result.stdout == ""


def test_cli_words_without_tokenizer_exit_1(npz_path):
    result = run("similarity", "-c", npz_path, "dog", "cat", code=1)
    assert "use --ids" in result.stderr


def test_cli_one_word_is_a_usage_error(npz_path):
    run("similarity", "-c", npz_path, "--ids", 1, code=2)


def test_cli_many_ids_print_pairs_baseline_and_matrix(npz_path, table):
    result = run("similarity", "-c", npz_path, "--ids", 1, 2, 3)
    assert "cosine matrix" in result.stdout
    assert f"{cosine(table[1], table[2]):+.4f}" in result.stdout
    assert f"mean cosine {brute_mean_random_cosine(table):+.4f} (exact)" in result.stdout
    assert "10,000 pairs sampled with seed 0" in result.stdout


def test_cli_pairs_file(npz_path, table, tmp_path):
    pairs_file = tmp_path / "pairs.txt"
    pairs_file.write_text("# id pairs\n1\t2\n\n3 4\n  # indented comment\n1 65\n")
    result = run("similarity", "-c", npz_path, "--ids", "--pairs-file", pairs_file, "--json")
    doc = json.loads(result.stdout)
    assert [(p["a_ids"][0], p["b_ids"][0]) for p in doc["pairs"]] == [(1, 2), (3, 4), (1, ZERO)]
    assert doc["pairs"][0]["cosine"] == pytest.approx(cosine(table[1], table[2]), abs=1e-6)
    assert doc["pairs"][1]["cosine"] == pytest.approx(cosine(table[3], table[4]), abs=1e-6)
    assert doc["pairs"][2]["cosine"] is None and "zero norm" in doc["pairs"][2]["reason"]
    plain = run("similarity", "-c", npz_path, "--ids", "--pairs-file", pairs_file)
    assert "cosine matrix" not in plain.stdout


def test_cli_pairs_file_skips_bad_lines_with_a_note_and_strict_stops(npz_path, table, tmp_path):
    pairs_file = tmp_path / "pairs.txt"
    pairs_file.write_bytes(b"1 2\n3 4 5\n\xff\xfe 1\n2 999\n" + b"7" * 5000 + b"\n3 4\n")
    doc = run_json("similarity", "-c", npz_path, "--ids", "--pairs-file", pairs_file)
    assert [(p["a"], p["b"]) for p in doc["pairs"]] == [("1", "2"), ("3", "4")]
    assert doc["pairs"][1]["cosine"] == pytest.approx(cosine(table[3], table[4]), abs=1e-6)
    assert doc["notes"] == [
        (f"skipped 4 lines of {str(pairs_file)!r} that could not be used (line 2: expected two words or ids, found 3 "
        "fields; line 3: not UTF-8 text; pair 2 ('2' '999'): expected token ids 0..263 (the table has 264 rows), "
        "found 999; and 1 more); --strict stops at the first instead")]
    console = run("similarity", "-c", npz_path, "--ids", "--pairs-file", pairs_file).stdout
    assert "note: skipped 4 lines" in console
    strict = run("similarity", "-c", npz_path, "--ids", "--pairs-file", pairs_file, "--strict", code=1)
    assert strict.stderr == f"Error: {str(pairs_file)!r} line 2: expected two words or ids, found 3 fields\n"


def test_cli_pairs_file_must_be_a_regular_file(npz_path):
    result = run("similarity", "-c", npz_path, "--ids", "--pairs-file", "/dev/zero", code=1)
    assert result.stderr == "Error: expected a regular file for --pairs-file, found a character device at '/dev/zero'\n"


def test_a_pairs_file_is_read_as_a_stream(emb, table, tmp_path):
    """similarity_pairs takes any iterable once: a generator is never turned into a list of lines."""
    consumed = []

    def pairs():
        for n in range(1000):
            consumed.append(n)
            yield str(n % 200), str((n * 7) % 200)
    result = similarity_pairs(emb, pairs(), ids=True)
    assert len(consumed) == 1000 and len(result.pairs) == 1000
    assert result.pairs.positions.nbytes == 1000 * 2 * 8  # two positions a pair, nothing per pair beyond them
    pair = result.pairs[999]
    assert (pair.a.text, pair.b.text) == ("199", str(999 * 7 % 200))
    assert pair.cosine == pytest.approx(cosine(table[199], table[999 * 7 % 200]), abs=1e-6)


def test_cli_center_and_output_table(untied_path, table):
    head = np.random.default_rng(7).standard_normal((ROWS, DIM)).astype(np.float32)
    result = run("similarity", "-c", untied_path, "--ids", 3, 4, "--table", "output", "--center", "--json")
    doc = json.loads(result.stdout)
    mean = head.astype(np.float64).mean(axis=0)
    assert doc["centered"] is True and doc["table"] == "output"
    assert doc["pairs"][0]["cosine"] == pytest.approx(cosine(head[3] - mean, head[4] - mean), abs=1e-6)


def test_cli_empty_pairs_file(npz_path, tmp_path):
    pairs_file = tmp_path / "pairs.txt"
    pairs_file.write_text("# nothing yet\n\n")
    result = run("similarity", "-c", npz_path, "--ids", "--pairs-file", pairs_file, code=1)
    assert result.stderr == f"Error: expected pairs in {str(pairs_file)!r}, two words or ids a line, found none\n"


def test_cli_a_pairs_file_of_which_no_line_could_be_used_is_an_error(npz_path, tmp_path):
    # every line parsed, none in the table: an empty table and exit 0, the reasons only in a note
    pairs_file = tmp_path / "pairs.txt"
    pairs_file.write_text("999 1\n2 1000\n")
    result = run("similarity", "-c", npz_path, "--ids", "--pairs-file", pairs_file, code=1)
    assert result.stdout == "" and result.stderr == (
        f"Error: expected at least one line of {str(pairs_file)!r} that could be used, found none (pair 1 ('999' "
        "'1'): expected token ids 0..263 (the table has 264 rows), found 999; pair 2 ('2' '1000'): expected token "
        "ids 0..263 (the table has 264 rows), found 1000)\n")


def test_cli_words_show_ids_tokens_and_how_a_merged_word_was_formed(npz_path, table):
    ids = harris_tokenizer(npz_path.parent, ["dog", "cat", "puppy"])
    result = run("similarity", "-c", npz_path, "dogcat", "puppy")
    assert "257 'dog'" in result.stdout and "258 'cat'" in result.stdout and "259 'puppy'" in result.stdout
    assert ("note: 'dogcat' is 2 tokens (257 'dog', 258 'cat'): its vector is the mean of their rows"
            in " ".join(result.stdout.split()))
    expected = cosine((table[ids["dog"]].astype(np.float64) + table[ids["cat"]]) / 2, table[ids["puppy"]])
    assert f"{expected:+.4f}" in result.stdout


def test_cli_words_json_and_no_merge(npz_path):
    ids = harris_tokenizer(npz_path.parent, ["dog", "cat", "puppy"])
    (pair,) = run_json("similarity", "-c", npz_path, "dogcat", "puppy")["pairs"]
    assert pair["a_ids"] == [ids["dog"], ids["cat"]] and pair["a_tokens"] == ["dog", "cat"] and pair["a_merged"]
    assert pair["b_ids"] == [ids["puppy"]] and pair["a_note"] is None and pair["b_note"] is None
    assert (pair["form"], pair["form_reason"]) == ("either", "both words have the same ids with or without a space before")
    refused = run("similarity", "-c", npz_path, "dogcat", "puppy", "--no-merge", code=1)
    assert refused.stderr == ("Error: expected 'dogcat' to be one token, found 2 ('dog' 'cat'); "
                              "merging them is turned off (--no-merge)\n")


# --- the baseline's cache ---

def test_the_baseline_is_cached_per_file_in_the_users_cache_folder(npz_path, table, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first = similarity(embscope.open(npz_path), [1, 2, DOG, PUPPY], ids=True)
    entries = list((tmp_path / "cache" / "embscope").glob("*.entry"))
    assert len(entries) == 1 and sorted(p.name for p in npz_path.parent.iterdir()) == ["cache", "model.npz"]

    def no_pass(*args, **kwargs):
        raise AssertionError("the baseline was computed again")

    monkeypatch.setattr("embscope.compute.random_pairs", no_pass)
    again = similarity(embscope.open(npz_path), [1, 2, DOG, PUPPY], ids=True)
    assert again.baseline == first.baseline and again.baseline.mean_random_cosine == pytest.approx(
        brute_mean_random_cosine(table), abs=1e-9)
    assert [p.percentile for p in again.pairs] == [p.percentile for p in first.pairs]
    with pytest.raises(AssertionError, match="computed again"):  # centred is another entry
        similarity(embscope.open(npz_path), [1, 2], ids=True, center=True)
    changed = make_table(seed=2)
    np.savez(npz_path, token_emb=changed, pos_emb=np.ones((16, DIM), np.float32))
    with pytest.raises(AssertionError, match="computed again"):  # the file changed: the entry no longer applies
        similarity(embscope.open(npz_path), [1, 2], ids=True)


def test_an_unwritable_cache_costs_only_time(npz_path, table, tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    for _ in range(2):
        result = similarity(embscope.open(npz_path), [1, 2], ids=True)
        assert result.baseline.mean_random_cosine == pytest.approx(brute_mean_random_cosine(table), abs=1e-9)
# --- words the tokenizer cannot represent ---

@pytest.fixture
def bert_like(tmp_path):
    """A BERT-like checkpoint: a WordPiece tokenizer.json written by the tokenizers library, and its tables."""
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "dog": 3, "cat": 4, "##s": 5, "house": 6}
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordPiece(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = tokenizers.normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    rng = np.random.default_rng(3)
    table = rng.standard_normal((len(vocab), 8)).astype(np.float32)
    save_file({"embeddings.word_embeddings.weight": table,
               "embeddings.position_embeddings.weight": rng.standard_normal((16, 8)).astype(np.float32)},
              str(tmp_path / "model.safetensors"))
    return tmp_path, table


def test_a_word_that_becomes_the_unknown_token_is_an_error_naming_both(bert_like):
    path, table = bert_like
    result = run("similarity", "🐶", "🐱", "-c", path, code=1)
    assert result.stderr == ("Error: expected a word the tokenizer can represent, found '🐶', which the huggingface "
                             "tokenizer maps to its unknown token '[UNK]' (id 0): pass --allow-unk to use that row "
                             "anyway\n")
    run("neighbors", "dogs🐶", "-c", path, code=1)  # one unknown piece is enough
    assert run_json("similarity", "dog", "cats", "-c", path)["pairs"][0]["cosine"] == pytest.approx(
        cosine(table[3], (table[4].astype(np.float64) + table[5]) / 2), abs=1e-6)


def test_allow_unk_lets_the_unknown_token_through_with_a_note(bert_like):
    path, _ = bert_like
    doc = run_json("similarity", "🐶", "cat", "--allow-unk", "-c", path)
    (pair,) = doc["pairs"]
    assert pair["a_ids"] == [0] and pair["a_tokens"] == ["[UNK]"]
    assert pair["a_note"] == "'🐶' became the unknown token '[UNK]' (id 0), the row shared by every unknown word"
    console = run("similarity", "🐶", "cat", "--allow-unk", "-c", path).stdout
    assert "became the unknown token '[UNK]'" in console


def test_cli_many_pairs_list_fifty_in_the_console_and_all_in_json(npz_path, table, tmp_path):
    pairs_file = tmp_path / "pairs.txt"
    pairs = [(n, (n * 7 + 3) % 200) for n in range(1, 61)]
    pairs_file.write_text("".join(f"{a}\t{b}\n" for a, b in pairs))
    console = run("similarity", "-c", npz_path, "--ids", "--pairs-file", pairs_file).stdout
    assert "... and 10 more pairs (--json lists all)" in console
    doc = run_json("similarity", "-c", npz_path, "--ids", "--pairs-file", pairs_file)
    assert [(int(p["a"]), int(p["b"])) for p in doc["pairs"]] == pairs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the zero, NaN and Inf rows: no cosine
        expected = [cosine(table[a], table[b]) for a, b in pairs]
    assert [p["cosine"] for p in doc["pairs"]] == [pytest.approx(e, abs=1e-6) if np.isfinite(e) else None
                                                   for e in expected]


def test_cli_pairs_file_may_not_be_a_pipe(npz_path, tmp_path):
    fifo = tmp_path / "pairs"
    os.mkfifo(fifo)  # opening it to read would wait for a writer forever
    result = run("similarity", "-c", npz_path, "--ids", "--pairs-file", fifo, code=1)
    assert result.stderr == f"Error: expected a regular file for --pairs-file, found a named pipe (FIFO) at '{fifo}'\n"


def test_each_reader_gives_the_rows_the_writer_stored(tmp_path):
    table = np.random.default_rng(2).standard_normal((9, 4)).astype(np.float16)
    with open(tmp_path / "model.pkl", "wb") as handle:
        pickle.dump({"params": {"token_emb": table.astype(">f4")}}, handle)
    save_file({"wte.weight": table}, str(tmp_path / "model.safetensors"))
    np.save(tmp_path / "token_emb.npy", table.astype(np.float64))
    for name in ("model.pkl", "model.safetensors", "token_emb.npy"):
        token = embscope.open(tmp_path / name).token
        assert token.array[[8, 1]].tolist() == table[[8, 1]].astype(np.float32).tolist(), name


def test_a_few_pairs_by_id_against_plain_numpy(tmp_path):
    rng = np.random.default_rng(3)
    table = rng.standard_normal((3000, 24)).astype(np.float32)
    table[5] = 0.0
    table[6, 3] = np.nan
    np.savez(tmp_path / "model.npz", token_emb=table)
    found = embscope.similarity(embscope.open(tmp_path / "model.npz"), [1, 2, 5, 6, 30, 2999], ids=True)
    assert [q.reason for q in found.queries] == [None, None, "row 5 ('#5') has zero norm",
                                                 "row 6 ('#6') holds NaN or Inf", None, None]
    with np.errstate(invalid="ignore"):  # rows 5 (zero) and 6 (NaN) have no unit vector; they are not used
        unit = table.astype(np.float64) / np.linalg.norm(table.astype(np.float64), axis=1)[:, None]
    sample = np.sort(compute.random_pairs(table, n_pairs=BASELINE_PAIRS, seed=BASELINE_SEED).sample)
    sample = sample[np.isfinite(sample)]
    for pair in found.pairs:
        a, b = pair.a.ids[0], pair.b.ids[0]
        if a in (5, 6) or b in (5, 6):
            assert (pair.cosine, pair.percentile) == (None, None) and pair.reason
            continue
        exact = float(unit[a] @ unit[b])
        assert pair.cosine == pytest.approx(exact, abs=1e-12)
        assert pair.percentile == pytest.approx(100 * np.mean(sample < exact - 1e-9))


def test_the_cached_baseline_gives_the_answer_the_first_run_gave(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "EMBSCOPE_CHECKPOINT"}
    env["XDG_CACHE_HOME"] = str(tmp_path)
    command = [sys.executable, "-m", "embscope", "similarity", "dog", "cat", "--json"]
    first, second = (json.loads(subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout)
                     for _ in range(2))
    assert first == second and first["baseline"]["sample_size"] == 10000
    assert any(tmp_path.rglob("*"))  # the second answer came from the cache the first wrote


@pytest.mark.parametrize("center", [False, True])  # no RuntimeWarning, centred or not
def test_a_merged_word_of_plus_and_minus_inf_rows_is_a_reason_not_a_crash(tmp_path, center):
    table = np.random.default_rng(4).standard_normal((264, 8)).astype(np.float32)
    table[ord("o"), 2], table[ord("x"), 2] = np.inf, -np.inf  # their mean is NaN
    np.savez(tmp_path / "model.npz", token_emb=table)
    emb = embscope.open(tmp_path / "model.npz")
    emb.tokenizer = ByteWordTokenizer()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (pair,) = embscope.similarity(emb, ["ox", "dog"], center=center).pairs
    assert (pair.cosine, pair.percentile) == (None, None)
    assert pair.reason == "row 111 ('o') holds NaN or Inf"


@pytest.mark.parametrize("args, flags", [
    (["similarity", "--ids", "5", "6", "--exact"], "--exact says"),
    (["similarity", "--ids", "5", "6", "--allow-unk", "--no-merge"], "--allow-unk and --no-merge say"),
    (["neighbors", "--ids", "5", "--exact"], "--exact says"),
    (["neighbors", "--ids", "--all", "--out", "-", "--allow-unk"], "--allow-unk says"),
    (["analogy", "--ids", "1", "2", "3", "--exact"], "--exact says"),
])
def test_word_lookup_flags_with_ids_are_a_usage_error(args, flags):
    """--exact, --allow-unk and --no-merge say how words are looked up: with --ids there is no word, and they were
    accepted and dropped without a word."""
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[0] == (f"Error: {flags} how words are looked up: "
                                             f"{'they do' if ' and ' in flags else 'it does'} not go with --ids")


def test_exact_on_the_position_map_is_a_usage_error():
    result = invoke("map", "--table", "position", "--exact")
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[0] == ("Error: --exact says how words are looked up: the position table's "
                                             "points are positions")


@pytest.mark.parametrize("args, file_option", [
    (["similarity", "father", "mother", "--strict"], "--pairs-file"),
    (["neighbors", "--all", "--out", "-", "--strict"], "--queries"),
    (["neighbors", "father", "--strict"], "--queries"),
])
def test_strict_without_an_input_file_is_a_usage_error(args, file_option):
    """--strict says what to do with a line of the input file that cannot be used: without the file it did nothing."""
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[0] == f"Error: --strict goes with {file_option}: it says what to do with a " \
                                            "line of the file that cannot be used"


def test_a_pairs_line_of_one_word_is_said_in_the_singular(tmp_path):
    (tmp_path / "pairs.txt").write_text("father mother\nfather\nfather mother the\n")
    result = invoke("similarity", "--pairs-file", tmp_path / "pairs.txt", "--strict")
    assert result.exit_code == 1
    assert result.stderr == f"Error: '{tmp_path / 'pairs.txt'}' line 2: expected two words or ids, found 1 field\n"
    doc = run_json("similarity", "--pairs-file", tmp_path / "pairs.txt")
    assert any("(line 2: expected two words or ids, found 1 field; line 3: expected two words or ids, found 3 fields)"
               in note for note in doc["notes"]), doc["notes"]


def test_a_table_of_fewer_pairs_than_the_sample_takes_every_pair_once(tmp_path):
    """verdicts13: IgLM 0.1.0's 33-row amino-acid table (528 pairs) was given percentiles against 10,000 pairs drawn
    with repeats (31.11 where every pair gives 31.67). A table with no more pairs than the sample takes each once."""
    rows = 25  # 300 pairs
    table = np.random.default_rng(12).standard_normal((rows, 16)).astype(np.float32)
    np.save(tmp_path / "small.npy", table)
    doc = run_json("similarity", "-c", tmp_path / "small.npy", "--ids", "3", "7")
    unit = table.astype(np.float64) / np.linalg.norm(table.astype(np.float64), axis=1, keepdims=True)
    i, j = np.triu_indices(rows, 1)
    every = np.einsum("pd,pd->p", unit[i], unit[j])
    asked = float(unit[3] @ unit[7])
    assert doc["baseline"]["sample_size"] == 300 and doc["baseline"]["every_pair"] is True
    assert doc["pairs"][0]["percentile"] == pytest.approx(100 * np.mean(every < asked - 1e-9))
    assert doc["baseline"]["mean_random_cosine"] == pytest.approx(every.mean(), abs=1e-12)
    console = " ".join(run("similarity", "-c", tmp_path / "small.npy", "--ids", "3", "7").stdout.split())
    assert "percentiles against every one of its 300 pairs" in console
    assert run_json("similarity", "--ids", "1", "2")["baseline"]["every_pair"] is False  # the sample's 1,024 rows
