"""TSV cells a spreadsheet would run: a token that starts with =, +, - or @ (or a tab or a carriage return, as
OWASP lists them) is written CSV-quoted in every TSV embscope writes (neighbors --all --out, export's
metadata.tsv), and pandas and csv.reader read back exactly the tokenizer's token. Why quoting and not an
apostrophe: render/cells.py (pandas would read the apostrophe into the token)."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from conftest import harris_tokenizer, run

from embscope.render.cells import tsv_cell

FORMULAS = ["=cmd|' /C calc'!A0", '=HYPERLINK("http://x","y")', "+SUM(1,2)", "-2+3+cmd|' /C calc'!A0", "@SUM(A1)",
            "\tTAB", "\rCR", "-", "plain", "a=b"]


@pytest.mark.parametrize("text", FORMULAS)
def test_a_cell_is_quoted_exactly_when_it_starts_like_a_formula_or_holds_a_separator(text):
    cell = tsv_cell(text)
    starts = text[:1] in ("=", "+", "-", "@", "\t", "\r")
    assert cell.startswith('"') is starts
    assert next(csv.reader([cell], delimiter="\t")) == [text]  # csv undoes the quoting: the token comes back


@pytest.fixture
def formula_model(tmp_path):
    """A real tokenizer (harris_segments.json) whose segments are the formulas (ids 257..), beside a table."""
    ids = harris_tokenizer(tmp_path, FORMULAS)
    path = tmp_path / "model.npz"
    np.savez(path, token_emb=np.random.default_rng(4).standard_normal((270, 6)).astype(np.float32))
    return path, ids


def test_neighbors_tsv_quotes_formula_tokens_and_pandas_reads_them_back(formula_model, tmp_path):
    path, ids = formula_model
    out = tmp_path / "top.tsv"
    run("neighbors", "-c", path, "--all", "-k", 2, "--out", out)
    raw = out.read_bytes().decode("utf-8")  # not read_text: it would turn the token's \r into \n
    import pandas  # a second of CPU: imported where it reads back
    frame = pandas.read_csv(out, sep="\t", keep_default_na=False, dtype=str)
    queries = dict(zip(frame["query_id"].astype(int), frame["query_token"]))
    for token, token_id in ids.items():
        assert queries[token_id] == token  # the token exactly, no apostrophe, no quotes
        if token[:1] in "=+-@\t\r":
            assert f'\t"{token.replace(chr(34), chr(34) * 2)}"\t' in raw  # quoted in the file
    assert "\t=cmd" not in raw and "\t@SUM" not in raw and "\t+SUM" not in raw


def test_export_metadata_quotes_formula_tokens_and_pandas_reads_them_back(formula_model, tmp_path):
    path, ids = formula_model
    out = tmp_path / "projector"
    run("export", "-c", path, "--out", out, "--no-undertrained")
    import pandas
    frame = pandas.read_csv(out / "metadata.tsv", sep="\t", keep_default_na=False, dtype=str)
    tokens = dict(zip(frame["id"].astype(int), frame["token"]))
    raw = (out / "metadata.tsv").read_bytes().decode("utf-8")
    for token, token_id in ids.items():
        if "\t" in token or "\r" in token:
            continue  # the Projector's own escapes (\t, \r) come first: see render/export_files.py
        assert tokens[token_id] == token
        assert (f'\n"{token.replace(chr(34), chr(34) * 2)}"\t' in raw) is (token[:1] in "=+-@")
    assert tokens[ids["\tTAB"]] == '\\tTAB' and tokens[ids["\rCR"]] == "\\rCR"  # escaped: no formula start left
