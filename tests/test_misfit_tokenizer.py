"""A tokenizer that names under a quarter of a table's rows is not that table's (naming.misfit_note): no command
names the table's rows by it, words are not looked up in it, and the answer says why once; a tokenizer that fits
still names every row. The layout is attacut 1.0.6's (PyPI): attacut-sc/model.pth holds a 139-row character table
and a 6,227-row syllable table, with a 139-id characters.json beside them; `norms` named syllable row 0 '<PAD>'."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import cosine, run, run_json, write_npz

# attacut's characters.json: its three specials, then Thai characters; 139 ids
CHARACTERS = {"<PAD>": 0, "<UNK>": 1, "<PUNC>": 2, **{chr(0x0E01 + i): i + 3 for i in range(136)}}
NAMES = {i: token for token, i in CHARACTERS.items()}
MISFIT_ROWS = 1000  # 139 ids name under a quarter of 1,000 rows (250)
FIT_ROWS = 150  # 139 ids of 150 rows: the tokenizer's own table, 11 rows of padding past it
NOTE = "the tokenizer names 139 ids, under a quarter of the token table's 1,000 rows"


def table(rows: int, seed: int = 3) -> np.ndarray:
    """A Gaussian table 16 wide, its row 0 ten times as long as the rest (a norm anomaly every command flags)."""
    array = np.random.default_rng(seed).standard_normal((rows, 16)).astype(np.float32)
    array[0] *= 10
    return array


def beside_characters(folder: Path, rows: int, seed: int = 3, name: str = "model.npz") -> tuple[Path, np.ndarray]:
    """An np.savez checkpoint of one token table with attacut's character map beside it."""
    folder.mkdir(exist_ok=True)
    (folder / "characters.json").write_text(json.dumps(CHARACTERS, ensure_ascii=False), encoding="utf-8")
    array = table(rows, seed)
    return write_npz(folder / name, array), array


def top_cosines(array: np.ndarray, row: int, k: int) -> list[int]:
    """The k rows of highest cosine to `row`, itself left out, in plain numpy."""
    unit = array.astype(np.float64) / np.linalg.norm(array.astype(np.float64), axis=1, keepdims=True)
    scores = unit @ unit[row]
    scores[row] = -np.inf
    return np.argsort(-scores, kind="stable")[:k].tolist()


@pytest.mark.parametrize("writer", ["torch", "safetensors", "npz"])
def test_norms_of_attacuts_syllable_table_names_no_row_by_its_character_map(tmp_path, writer):
    rng = np.random.default_rng(5)
    tables = {"ch_embeddings.weight": rng.standard_normal((139, 32)).astype(np.float32),
              "sy_embeddings.weight": rng.standard_normal((MISFIT_ROWS, 16)).astype(np.float32)}
    tables["sy_embeddings.weight"][0] *= 10
    tables["ch_embeddings.weight"][0] *= 10
    (tmp_path / "characters.json").write_text(json.dumps(CHARACTERS, ensure_ascii=False), encoding="utf-8")
    if writer == "torch":
        torch = pytest.importorskip("torch")
        path = tmp_path / "model.pth"
        torch.save({name: torch.from_numpy(array) for name, array in tables.items()}, path)
    elif writer == "safetensors":
        from safetensors.numpy import save_file
        path = tmp_path / "model.safetensors"
        save_file(tables, path)
    else:
        path = tmp_path / "model.npz"
        np.savez(path, **tables)
    doc = run_json("norms", "-c", path, "--token-key", "sy_embeddings.weight")
    assert [(a["index"], a["label"]) for a in doc["anomalies"]] == [(0, "#0")]
    assert doc["anomalies"][0]["norm"] == pytest.approx(np.linalg.norm(tables["sy_embeddings.weight"][0].astype(np.float64)))
    assert sum(NOTE in note for note in doc["notes"]) == 1
    console = run("norms", "-c", path, "--token-key", "sy_embeddings.weight").stdout
    assert "<PAD>" not in console and " ".join(console.split()).count(NOTE) == 1
    # the character table is the map's own: its row 0 is <PAD>, and nothing is said
    doc = run_json("norms", "-c", path, "--token-key", "ch_embeddings.weight")
    assert [(a["index"], a["label"]) for a in doc["anomalies"]] == [(0, "<PAD>")]
    assert not any("under a quarter" in note for note in doc["notes"])


@pytest.mark.parametrize("rows", [MISFIT_ROWS, FIT_ROWS])
def test_neighbors_of_an_id(tmp_path, rows):
    path, array = beside_characters(tmp_path, rows)
    doc = run_json("neighbors", "--ids", "0", "-k", "3", "-c", path)
    expected = top_cosines(array, 0, 3)
    assert [n["id"] for n in doc["neighbors"]] == expected
    assert [n["cosine"] for n in doc["neighbors"]] == pytest.approx([cosine(array[0], array[i]) for i in expected])
    if rows == MISFIT_ROWS:
        assert doc["tokens"] == ["#0"] and [n["token"] for n in doc["neighbors"]] == [f"#{i}" for i in expected]
        assert not any(n["padding"] for n in doc["neighbors"])  # rows past 139 are not padding of a table it is not
        assert NOTE in doc["note"]
    else:
        assert doc["tokens"] == ["<PAD>"]
        assert [n["token"] for n in doc["neighbors"]] == [NAMES.get(i, f"#{i}") for i in expected]
        assert [n["padding"] for n in doc["neighbors"]] == [i >= 139 for i in expected]
        assert "under a quarter" not in (doc["note"] or "")


@pytest.mark.parametrize("command", [("neighbors", "ก"), ("similarity", "ก", "ข"), ("analogy", "ก", "ข", "ค"),
                                     ("map", "--words", "ก")])
def test_a_word_is_refused_in_a_table_the_tokenizer_does_not_fit(tmp_path, command):
    path, _ = beside_characters(tmp_path, MISFIT_ROWS)
    result = run(*command, "-c", path, code=1)
    assert result.stdout == "" and len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("Error: expected the table's own tokenizer to look words up: " + NOTE)
    assert "--tokenizer" in result.stderr


def test_words_in_the_tokenizers_own_table(tmp_path):
    path, array = beside_characters(tmp_path, FIT_ROWS)
    doc = run_json("similarity", "ก", "ข", "-c", path)
    (pair,) = doc["pairs"]
    assert (pair["a_ids"], pair["b_ids"], pair["a_tokens"], pair["b_tokens"]) == ([3], [4], ["ก"], ["ข"])
    assert pair["cosine"] == pytest.approx(cosine(array[3], array[4]))
    assert run_json("neighbors", "ก", "-k", "2", "-c", path)["ids"] == [3]


@pytest.mark.parametrize("rows", [MISFIT_ROWS, FIT_ROWS])
def test_similarity_of_ids(tmp_path, rows):
    path, array = beside_characters(tmp_path, rows)
    doc = run_json("similarity", "--ids", "0", "1", "-c", path)
    (pair,) = doc["pairs"]
    assert pair["cosine"] == pytest.approx(cosine(array[0], array[1]))
    misfit = rows == MISFIT_ROWS
    assert (pair["a_tokens"], pair["b_tokens"]) == ((["#0"], ["#1"]) if misfit else (["<PAD>"], ["<UNK>"]))
    assert sum(NOTE in note for note in doc["notes"]) == (1 if misfit else 0)


@pytest.mark.parametrize("rows", [MISFIT_ROWS, FIT_ROWS])
def test_analogy_of_ids(tmp_path, rows):
    path, array = beside_characters(tmp_path, rows)
    doc = run_json("analogy", "--ids", "4", "5", "6", "-k", "2", "-c", path)
    unit = array.astype(np.float64) / np.linalg.norm(array.astype(np.float64), axis=1, keepdims=True)
    scores = unit @ (unit[4] - unit[5] + unit[6])  # 3CosAdd: a - b + c, the inputs left out
    scores[[4, 5, 6]] = -np.inf
    expected = np.argsort(-scores, kind="stable")[:2].tolist()
    assert [r["id"] for r in doc["results"]] == expected
    misfit = rows == MISFIT_ROWS
    assert [r["token"] for r in doc["results"]] == [f"#{i}" if misfit or i >= 139 else NAMES[i] for i in expected]
    assert doc["query"]["a"]["token"] == ("#4" if misfit else NAMES[4])
    assert sum(NOTE in note for note in doc["notes"]) == (1 if misfit else 0)


@pytest.mark.parametrize("rows", [MISFIT_ROWS, FIT_ROWS])
def test_the_library_says_why_ids_are_unnamed(tmp_path, rows):
    """The library's neighbors, similarity and analogy with ids=True named the rows #id by a misfit tokenizer and
    said nothing of why: only the commands added the note (naming.tokenizer_failure) to what the library gave."""
    import embscope
    path, array = beside_characters(tmp_path, rows)
    emb = embscope.open(path)
    found = [embscope.neighbors(emb, 0, k=3, ids=True).note,
             embscope.similarity(emb, [0, 1], ids=True).unnamed,
             embscope.analogy(emb, "4", "5", "6", k=2, ids=True).note]
    misfit = rows == MISFIT_ROWS
    assert [NOTE in (note or "") for note in found] == [misfit] * 3
    assert embscope.neighbors(emb, 0, k=3, ids=True).neighbors[0].id == top_cosines(array, 0, 1)[0]


@pytest.mark.parametrize("rows", [MISFIT_ROWS, FIT_ROWS])
def test_neighbors_all_writes_names_only_from_the_tables_tokenizer(tmp_path, rows):
    path, array = beside_characters(tmp_path / "in", rows)
    out = tmp_path / "top.tsv"
    doc = run_json("neighbors", "--all", "--out", out, "-k", "1", "-c", path)
    lines = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()[1:]]
    assert len(lines) == rows and lines[0][:5] == ["0", "#0" if rows == MISFIT_ROWS else "<PAD>", "1",
                                                    str(top_cosines(array, 0, 1)[0]), lines[0][4]]
    named = {line[1] for line in lines} | {line[4] for line in lines}
    if rows == MISFIT_ROWS:
        assert all(name.startswith("#") for name in named)
        assert sum(NOTE in note for note in doc["notes"]) == 1
    else:
        assert "<PAD>" in named and "ก" in named
        assert not any("under a quarter" in note for note in doc["notes"])


@pytest.mark.parametrize("rows", [MISFIT_ROWS, FIT_ROWS])
def test_map_names_its_flagged_rows_only_by_the_tables_tokenizer(tmp_path, rows):
    path, _ = beside_characters(tmp_path, rows)
    doc = run_json("map", "-c", path)
    assert [(f["id"], f["label"]) for f in doc["flagged"]] == [(0, "#0" if rows == MISFIT_ROWS else "<PAD>")]
    if rows == MISFIT_ROWS:
        assert doc["probes"] == [] and "not the table's" in doc["probe_rule"]
        assert sum(NOTE in note for note in doc["notes"]) == 1
    else:
        assert not any("under a quarter" in note for note in doc["notes"])


@pytest.mark.parametrize("rows", [MISFIT_ROWS, FIT_ROWS])
def test_export_labels(tmp_path, rows):
    path, array = beside_characters(tmp_path / "in", rows)
    doc = run_json("export", "--format", "projector", "--out", tmp_path / "out", "-c", path, "--no-undertrained")
    lines = [line.split("\t") for line in (tmp_path / "out" / "metadata.tsv").read_text(encoding="utf-8").splitlines()]
    assert lines[0][:3] == ["token", "id", "norm"] and len(lines) == rows + 1
    labels = [line[0] for line in lines[1:]]
    assert float(lines[1][2]) == pytest.approx(np.linalg.norm(array[0].astype(np.float64)))
    if rows == MISFIT_ROWS:
        assert labels == [f"#{i}" for i in range(rows)]
        assert sum(NOTE in note for note in doc["notes"]) == 1
    else:
        assert labels[:4] == ["<PAD>", "<UNK>", "<PUNC>", "ก"] and labels[139:] == [f"#{i}" for i in range(139, rows)]


@pytest.mark.parametrize("rows", [MISFIT_ROWS, FIT_ROWS])
def test_undertrained_names_its_candidates_only_by_the_tables_tokenizer(tmp_path, rows):
    path, _ = beside_characters(tmp_path, rows)
    doc = run_json("undertrained", "-c", path)
    tokens = {c["id"]: c["token"] for c in doc["candidates"]}
    assert 0 in tokens  # row 0's norm stands far above the rest
    if rows == MISFIT_ROWS:
        assert all(token == f"#{i}" for i, token in tokens.items())
        assert sum(NOTE in note for note in doc["notes"]) == 1 and doc["tokenizer"] is None
    else:
        assert all(token == NAMES.get(i, f"#{i}") for i, token in tokens.items()) and tokens[0] == "<PAD>"
        assert doc["tokenizer"]["ids"] == 139 and doc["tokenizer"]["kinds"]["padding"] == FIT_ROWS - 139


@pytest.mark.parametrize("rows", [MISFIT_ROWS, FIT_ROWS])
def test_report_names_rows_only_by_the_tables_tokenizer(tmp_path, rows):
    path, _ = beside_characters(tmp_path / "in", rows)
    run("report", "--format", "md", "--out", tmp_path / "out", "-c", path)
    text = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    if rows == MISFIT_ROWS:
        assert "PAD" not in text and "| \\#0 |" in text and NOTE in text
        assert "no probe words to look up: " + NOTE in text
        # the note in full once (and in the missing section's reason); each later section points back to it (info,
        # norms, undertrained and map each gave it in full)
        whole = NOTE + ": it is not that table's"
        assert text.count(whole) == 2 and text.count(NOTE + " (the note under Checkpoint and tables above)") == 3
    else:
        assert "| 0 | \\<PAD\\> |" in text and "under a quarter" not in text  # Markdown escapes the brackets


@pytest.mark.parametrize("rows", [MISFIT_ROWS, FIT_ROWS])
def test_compare_names_its_rows_only_by_the_tables_tokenizer(tmp_path, rows):
    a, before = beside_characters(tmp_path / "run", rows, seed=3, name="a.npz")
    after = before.copy()
    after[7] = -after[7]  # the one row that turned round: the first mover
    b = write_npz(tmp_path / "run" / "b.npz", after)
    doc = run_json("compare", a, b, "--sample", "20")
    mover = doc["tables"]["token"]["movers"][0]
    assert mover["id"] == 7 and mover["cosine"] == pytest.approx(-1.0)
    misfit = rows == MISFIT_ROWS
    assert mover["token"] == ("#7" if misfit else NAMES[7])
    assert sum(NOTE in note for note in doc["notes"]) == (1 if misfit else 0)
    if misfit:  # words and token strings are refused: the tokenizer's ids are another table's rows
        result = run("compare", a, b, "--words", "ก", code=1)
        assert len(result.stderr.splitlines()) == 1 and NOTE in result.stderr


@pytest.mark.parametrize("rows", [MISFIT_ROWS, FIT_ROWS])
def test_info_calls_rows_past_the_tokenizer_padding_only_in_its_own_table(tmp_path, rows):
    path, _ = beside_characters(tmp_path, rows)
    doc = run_json("info", "-c", path)
    assert doc["tokenizer"]["vocab_size"] == 139  # the tokenizer found is still said
    padding = [note for note in doc["notes"] if "are padding" in note]
    if rows == MISFIT_ROWS:
        assert padding == [] and sum(NOTE in note for note in doc["notes"]) == 1
    else:
        assert padding == [(f"the token table has {rows} rows, the tokenizer 139 ids: {rows - 139} rows "
                            f"(139..{rows - 1}) are padding")]


def untied(folder: Path, token_rows: int, output_rows: int, name: str = "model.safetensors") -> dict[str, np.ndarray]:
    """A safetensors checkpoint (GPT-2's names) of a token table and an untied head of another height, attacut's
    character map beside them."""
    from safetensors.numpy import save_file
    folder.mkdir(exist_ok=True)
    (folder / "characters.json").write_text(json.dumps(CHARACTERS, ensure_ascii=False), encoding="utf-8")
    tables = {"transformer.wte.weight": table(token_rows, 3), "lm_head.weight": table(output_rows, 4)}
    save_file(tables, folder / name)
    return tables


def test_compare_says_why_the_output_rows_are_unnamed_when_the_tokenizer_is_only_the_token_tables(tmp_path):
    untied(tmp_path, FIT_ROWS, MISFIT_ROWS, "a.safetensors")
    from safetensors.numpy import load_file, save_file
    tables = load_file(tmp_path / "a.safetensors")
    for array in tables.values():
        array[7] = -array[7]
    save_file(tables, tmp_path / "b.safetensors")
    doc = run_json("compare", tmp_path / "a.safetensors", tmp_path / "b.safetensors", "--sample", "20")
    movers = {role: doc["tables"][role]["movers"][0] for role in ("token", "output")}
    assert [(m["id"], m["token"]) for m in movers.values()] == [(7, NAMES[7]), (7, "#7")]
    (note,) = doc["notes"]  # the token rows are named: only the output table's misfit is said
    assert note.startswith(NOTE.replace("token table", "output table")) and note.endswith("; output rows print as #id")


def test_undertrained_calls_a_misfit_tokenizer_no_missing_one(tmp_path):
    # the output table's answer said both the misfit note and 'without a tokenizer nothing is verified', though the
    # tokenizer was there and verified the token table's candidates
    untied(tmp_path, FIT_ROWS, MISFIT_ROWS)
    doc = run_json("undertrained", "-c", tmp_path, "--table", "both")
    tables = {t["table"]: t for t in doc["tables"]}
    assert tables["token"]["candidates"][0]["token"] == "<PAD>" and tables["output"]["candidates"][0]["token"] == "#0"
    (said,) = [n for n in doc["notes"] if "under a quarter" in n]  # the token table's tokenizer: no note of its own
    assert said.startswith(NOTE.replace("token table", "output table"))
    assert tables["output"]["notes"] == [] and tables["token"]["notes"] == []
    console = " ".join(run("undertrained", "-c", tmp_path, "--table", "both").stdout.split())
    assert "without a tokenizer" not in console and console.count("under a quarter") == 1


def test_compare_output_names_the_output_tables_neighbours_only_by_its_own_tokenizer(tmp_path):
    # compare --output --words named the 1,000-row head's neighbours by the token table's 139-id map ('โ' for #68)
    tables = untied(tmp_path, FIT_ROWS, MISFIT_ROWS)
    doc = run_json("compare", tmp_path, "--output", "--words", "ก", "-k", "30")
    (word,) = doc["words"]
    token, output = (tables[name].astype(np.float64) for name in ("transformer.wte.weight", "lm_head.weight"))
    nearest = top_cosines(output, 3, 30)
    assert word["id"] == 3 and min(nearest) < 139  # some of them are ids the map names
    assert word["token_neighbours"] == [NAMES.get(i, f"#{i}") for i in top_cosines(token, 3, 30)]
    assert word["output_neighbours"] == [f"#{i}" for i in nearest]
    (note,) = [n for n in doc["notes"] if "under a quarter" in n]
    assert note.startswith(NOTE.replace("token table", "output table")) and note.endswith("output rows print as #id")


def test_compare_says_why_bs_neighbours_are_unnamed_when_bs_table_outgrew_the_tokenizer(tmp_path):
    # B's table (1,000 rows) is not the 139-id map's, A's (150) is: B's neighbours of --words printed #id unexplained
    a, _ = beside_characters(tmp_path / "a", FIT_ROWS)
    b, after = beside_characters(tmp_path / "b", MISFIT_ROWS)
    doc = run_json("compare", a, b, "--words", "ก", "-k", "10")
    (word,) = doc["tables"]["token"]["neighbor_overlap"]["by_word"]
    nearest = top_cosines(after, 3, 10)
    assert min(nearest) < 139 and word["neighbors_b"] == [f"#{i}" for i in nearest]  # the map's ids unnamed too
    (note,) = [n for n in doc["notes"] if "under a quarter" in n]
    assert note == f"B: {NOTE}: it is not that table's, so no row there is named, looked up by word, verified or " \
                   "taken for padding (name the table's own with --tokenizer); B's token rows print as #id"
