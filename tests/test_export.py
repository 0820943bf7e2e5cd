"""export: the Projector folder read the way the Projector reads it, word2vec text read back by gensim, the
escaping undone by a decoder written here, row subsets, and files never written over an input."""

from __future__ import annotations

import numpy as np
import pytest
from byte_tokenizer import ByteWordTokenizer
from conftest import run, run_json

import embscope
from embscope.analysis.export import RowSpec, export_rows
from embscope.core.role import Role
from embscope.render.export_files import metadata_lines, projector_cell, word2vec_keys

ROWS, DIM, POSITIONS = 264, 6, 12  # the tokenizer has 260 ids: rows 260..263 are padding
TOKENIZER_WORDS = ("dog", "a b", "tab\there", "line\nbreak")  # ids 256..259
NAN_ROW = 70


def table() -> np.ndarray:
    rng = np.random.default_rng(3)
    tok = rng.standard_normal((ROWS, DIM)).astype(np.float32)
    tok[5] *= 40  # one row of outsized norm: a norm anomaly
    tok[6] = 0  # a zero row: always flagged
    return tok


def positions() -> np.ndarray:
    return np.random.default_rng(4).standard_normal((POSITIONS, DIM)).astype(np.float32)


@pytest.fixture
def ckpt(tmp_path, monkeypatch):
    path = tmp_path / "model.npz"
    np.savez(path, token_emb=table(), pos_emb=positions())
    monkeypatch.setattr(embscope.Embeddings, "tokenizer",
                        property(lambda self: ByteWordTokenizer(words=TOKENIZER_WORDS)))
    return path


def unescape(text: str) -> str:
    """The export escaping undone, written independently of the library: \\\\ \\t \\n \\r \\s \\xNN \\uNNNN
    \\UNNNNNNNN; a trailing \\#ID (word2vec keys) is dropped. A metadata cell in double quotes (one that starts
    like a spreadsheet formula, or with a quote) is unquoted first, as csv does."""
    if text.startswith('"') and text.endswith('"') and len(text) > 1:
        text = text[1:-1].replace('""', '"')
    out, at = [], 0
    simple = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r", "s": " "}
    while at < len(text):
        if text[at] != "\\":
            out.append(text[at])
            at += 1
            continue
        kind = text[at + 1]
        if kind in simple:
            out.append(simple[kind])
            at += 2
        elif kind in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[kind]
            out.append(chr(int(text[at + 2:at + 2 + width], 16)))
            at += 2 + width
        else:
            assert kind == "#" and text[at + 2:].isdigit(), text
            break
    return "".join(out)


def expected_label(token_id: int) -> str:
    tokenizer = ByteWordTokenizer(words=TOKENIZER_WORDS)
    return tokenizer.token_string(token_id) if token_id < tokenizer.vocab_size else f"#{token_id}"


def robust_flags(tok: np.ndarray) -> np.ndarray:
    """`embscope norms`'s rule, by hand: robust z above 6, or a zero row."""
    norms = np.linalg.norm(tok.astype(np.float64), axis=1)
    median = np.median(norms)
    mad = np.median(np.abs(norms - median))
    return (np.abs(norms - median) / (1.4826 * mad) > 6) | (norms == 0)


def unboxed(text: str) -> str:
    """A usage error as one line, with or without typer's box around it."""
    return " ".join(text.translate({ord(c): " " for c in "│╭╮╰╯─"}).split())


def read_metadata(path):
    """metadata.tsv as the Projector's parseMetadata reads it: lines split on \\n, blank lines skipped, a first
    line holding a tab is the header, cells split on \\t with no quoting."""
    lines = [line for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]
    assert "\t" in lines[0]
    header = lines[0].split("\t")
    return header, [line.split("\t") for line in lines[1:]]


def test_projector_folder_holds_every_row_with_its_metadata(ckpt, tmp_path):
    out = tmp_path / "projector"
    doc = run_json("export", "-c", ckpt, "--format", "projector", "--out", out)
    assert doc["checkpoint"] == str(ckpt) and doc["step"] is None
    assert doc["rows"] == ROWS and doc["dim"] == DIM and doc["table_name"] == "token_emb"
    # vectors.tsv as TensorBoard's projector plugin reads it: float() of each tab-separated field
    lines = (out / "vectors.tsv").read_text().rstrip("\n").split("\n")
    vectors = np.array([[float(v) for v in line.split("\t")] for line in lines], dtype=np.float32)
    np.testing.assert_array_equal(vectors, table())  # 9 significant digits give every float32 back
    header, cells = read_metadata(out / "metadata.tsv")
    assert header == ["token", "id", "norm", "anomaly", "undertrained"]
    assert len(cells) == ROWS and all(len(row) == 5 for row in cells)
    assert [unescape(row[0]) for row in cells] == [expected_label(i) for i in range(ROWS)]
    assert [int(row[1]) for row in cells] == list(range(ROWS))
    np.testing.assert_allclose([float(row[2]) for row in cells], np.linalg.norm(table().astype(np.float64), axis=1),
                               rtol=1e-12)
    assert [row[3] == "yes" for row in cells] == robust_flags(table()).tolist()
    candidates = {c["id"] for c in run_json("undertrained", "-c", ckpt, "--table", "token")["candidates"]}
    assert [row[4] == "yes" for row in cells] == [i in candidates for i in range(ROWS)]
    assert {row[4] for row in cells} == {"yes", "no"} and doc["undertrained"] == len(candidates)
    run("export", "-c", ckpt, "--out", out, "--no-undertrained")
    assert {row[4] for row in read_metadata(out / "metadata.tsv")[1]} == {""}  # not run: missing values
    assert doc["anomalies"] == int(robust_flags(table()).sum()) == 2
    config = (out / "projector_config.pbtxt").read_text()
    assert 'tensor_path: "vectors.tsv"' in config and 'metadata_path: "metadata.tsv"' in config
    assert "tensor_shape: 264\n  tensor_shape: 6" in config
    # which checkpoint, in the Projector's list of tensors: "model" says nothing, so its folder says it, as in plots
    assert f'tensor_name: "{ckpt.parent.name}/model.npz: token table token_emb"' in config


def test_metadata_cells_that_would_break_the_projector_are_escaped(ckpt, tmp_path):
    out = tmp_path / "p"
    run("export", "-c", ckpt, "--out", out)
    _, cells = read_metadata(out / "metadata.tsv")
    assert cells[9][0] == "\\t" and cells[10][0] == "\\n" and cells[13][0] == "\\r"
    assert cells[32][0] == "\\s"  # a lone space: JavaScript's Number(" ") is 0
    assert cells[92][0] == "\\\\" and cells[0][0] == "\\x00"
    assert cells[258][0] == "tab\\there" and cells[259][0] == "line\\nbreak"


def test_projector_config_parses_as_the_projector_proto(ckpt, tmp_path):
    pytest.importorskip("google.protobuf", reason="protobuf is not installed")
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format
    # the field names and types of tensorboard/plugins/projector/projector_config.proto
    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="projector_config.proto", package="tensorboard", syntax="proto3")
    info = proto.message_type.add(name="EmbeddingInfo")
    for number, (name, kind, label) in enumerate([
            ("tensor_name", field.TYPE_STRING, field.LABEL_OPTIONAL),
            ("metadata_path", field.TYPE_STRING, field.LABEL_OPTIONAL),
            ("bookmarks_path", field.TYPE_STRING, field.LABEL_OPTIONAL),
            ("tensor_shape", field.TYPE_UINT32, field.LABEL_REPEATED)], start=1):
        info.field.add(name=name, number=number, type=kind, label=label)
    info.field.add(name="tensor_path", number=6, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    config = proto.message_type.add(name="ProjectorConfig")
    config.field.add(name="model_checkpoint_path", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    config.field.add(name="embeddings", number=2, type=field.TYPE_MESSAGE, label=field.LABEL_REPEATED,
                     type_name=".tensorboard.EmbeddingInfo")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    message = message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorboard.ProjectorConfig"))()
    weird = tmp_path / "w.npz"
    np.savez(weird, **{'tok "é"\\\n': table()})  # a table name with a quote, a backslash, a newline, non-ASCII
    run("export", "-c", weird, "--out", tmp_path / "w")
    text_format.Parse((tmp_path / "w" / "projector_config.pbtxt").read_text(encoding="utf-8"), message)
    (embedding,) = message.embeddings
    assert embedding.tensor_name == 'w.npz: token table tok "é"\\\n'  # the checkpoint, as plots title it
    assert list(embedding.tensor_shape) == [ROWS, DIM]
    assert (embedding.tensor_path, embedding.metadata_path) == ("vectors.tsv", "metadata.tsv")


def test_word2vec_file_loads_in_gensim_with_every_row(ckpt, tmp_path):
    gensim = pytest.importorskip("gensim.models", reason="gensim is not installed")
    out = tmp_path / "vectors.txt"
    run("export", "-c", ckpt, "--format", "word2vec", "--out", out)
    assert out.read_text(encoding="utf-8").split("\n", 1)[0] == f"{ROWS} {DIM}"
    kv = gensim.KeyedVectors.load_word2vec_format(str(out))
    assert len(kv) == ROWS  # no key was dropped as a repeat
    np.testing.assert_array_equal(kv.vectors, table())
    assert [unescape(key) for key in kv.index_to_key] == [expected_label(i) for i in range(ROWS)]
    # bytes 128..255 all read as U+FFFD: the first keeps the plain key, the others carry their id
    assert kv.index_to_key[128] == "\ufffd" and kv.index_to_key[129] == "\ufffd\\#129"
    assert kv.index_to_key[257] == "a\\sb" and kv.index_to_key[32] == "\\s"


def test_the_bundled_sample_exports_to_word2vec(tmp_path):
    gensim = pytest.importorskip("gensim.models", reason="gensim is not installed")
    out = tmp_path / "sample.txt"
    run("export", "--format", "word2vec", "--out", out)
    kv = gensim.KeyedVectors.load_word2vec_format(str(out))
    emb = embscope.open()
    assert len(kv) == emb.token.rows == 1024
    np.testing.assert_array_equal(kv.vectors, emb.token.array)
    assert [unescape(k) for k in kv.index_to_key] == [emb.tokenizer.token_string(i) for i in range(1024)]


def test_position_table_is_labelled_by_position(ckpt, tmp_path):
    out = tmp_path / "pos"
    doc = run_json("export", "-c", ckpt, "--table", "position", "--out", out)
    assert doc["table"] == "position" and doc["columns"] == ["position", "row", "norm", "anomaly"]
    header, cells = read_metadata(out / "metadata.tsv")
    assert header == ["position", "row", "norm", "anomaly"]
    assert [row[0] for row in cells] == [str(p) for p in range(POSITIONS)]
    w2v = tmp_path / "pos.txt"
    run("export", "-c", ckpt, "--table", "position", "--format", "word2vec", "--out", w2v)
    keys = [line.split(" ", 1)[0] for line in w2v.read_text().split("\n")[1:] if line]
    assert keys == [str(p) for p in range(POSITIONS)]


def test_rows_and_ranges_pick_a_subset_in_order(ckpt, tmp_path):
    doc = run_json("export", "-c", ckpt, "--rows", "5, 3,10:13,5,262:", "--out", tmp_path / "s")
    ids = [5, 3, 10, 11, 12, 262, 263]  # a row named twice is exported once
    assert doc["rows"] == len(ids) and doc["selection"] == "rows 5, 3,10:13,5,262:"
    _, cells = read_metadata(tmp_path / "s" / "metadata.tsv")
    assert [int(row[1]) for row in cells] == ids
    lines = (tmp_path / "s" / "vectors.tsv").read_text().rstrip("\n").split("\n")
    np.testing.assert_array_equal(np.array([[float(v) for v in line.split("\t")] for line in lines], np.float32),
                                  table()[ids])


def test_top_norms_are_the_largest_rows_first(ckpt, tmp_path):
    out = tmp_path / "top.txt"
    run("export", "-c", ckpt, "--top-norms", "4", "--format", "word2vec", "--out", out)
    norms = np.linalg.norm(table().astype(np.float64), axis=1)
    expected = np.argsort(-norms, kind="stable")[:4]
    keys = [line.split(" ", 1)[0] for line in out.read_text().split("\n")[1:] if line]
    assert keys == [word2vec_keys([expected_label(int(i))], [int(i)])[0] for i in expected]


def test_row_options_are_checked(ckpt, tmp_path):
    both = run("export", "-c", ckpt, "--rows", "1", "--top-norms", "2", "--out", tmp_path / "x", code=2)
    assert both.exit_code == 2 and "give --rows or --top-norms, not both" in unboxed(both.output)
    bad = run("export", "-c", ckpt, "--rows", "1,a:b", "--out", tmp_path / "x", code=2)
    assert bad.exit_code == 2 and "expected row ids and ranges like 5,17,100:200, found 'a:b'" in unboxed(bad.output)
    empty = run("export", "-c", ckpt, "--rows", "9:9", "--out", tmp_path / "x", code=2)
    assert empty.exit_code == 2 and "STOP above START, found '9:9'" in unboxed(empty.output)
    # rows outside the table, as typed: a bad option value, so a usage error (issue 32)
    outside = run("export", "-c", ckpt, "--rows", "260:300", "--out", tmp_path / "x", code=2)
    assert outside.stderr.splitlines()[0] == ("Error: Invalid value for '--rows': expected rows 0..263 (the table has "
                                              "264 rows), found 260:300")
    assert not (tmp_path / "x").exists()


def test_rows_holding_nan_are_left_out_and_named(tmp_path):
    tok = table()
    tok[NAN_ROW, 2] = np.nan
    path = tmp_path / "nan.npz"
    np.savez(path, token_emb=tok)
    doc = run_json("export", "-c", path, "--format", "word2vec", "--out", tmp_path / "v.txt")
    assert doc["rows"] == ROWS - 1 and doc["left_out"] == [NAN_ROW]
    assert f"left out 1 row holding NaN or Inf (no tool can place them): {NAN_ROW}" in doc["notes"]
    assert (tmp_path / "v.txt").read_text().split("\n", 1)[0] == f"{ROWS - 1} {DIM}"
    assert not any("undertrained" in note for note in doc["notes"])  # word2vec has no such column
    only = run("export", "-c", path, "--rows", str(NAN_ROW), "--out", tmp_path / "only", code=1)
    assert only.exit_code == 1
    assert only.stderr == f"Error: expected rows to export, found none: every row selected holds NaN or Inf ({NAN_ROW})\n"
    assert not (tmp_path / "only").exists()


def test_an_output_never_replaces_a_file_that_was_read(ckpt):
    before = ckpt.read_bytes()
    result = run("export", "-c", ckpt, "--format", "word2vec", "--out", ckpt, code=1)
    assert result.exit_code == 1
    assert result.stderr == (f"Error: expected --out to name a new file, found '{ckpt}', a file this answer was read "
                             "from: it is never written over\n")
    assert ckpt.read_bytes() == before


def test_console_names_the_checkpoint_and_the_files(ckpt, tmp_path):
    out = tmp_path / "c"
    text = run("export", "-c", ckpt, "--out", out, "--no-undertrained").stdout
    assert text.startswith(f"checkpoint: {ckpt} (step unknown)\n")
    assert "wrote 264 rows x 6 of the token table 'token_emb' (every row) for the TensorFlow Embedding Projector:" in text
    assert f"{out / 'metadata.tsv'}  (columns token, id, norm, anomaly, undertrained; 2 rows flagged" in text
    assert "note: the undertrained column is empty" in text


def test_the_under_trained_hook_fills_its_column(ckpt):
    rows = export_rows(embscope.open(ckpt), Role.token, RowSpec(), undertrained={7, 258})
    lines = list(metadata_lines(rows))
    assert [line.rstrip("\n").split("\t")[4] for line in lines[1:]] == [
        "yes" if i in (7, 258) else "no" for i in range(ROWS)]


def test_escaping_rules():
    assert projector_cell("   ") == "\\s\\s\\s" and projector_cell(" the") == " the"
    assert projector_cell("a\tb\\c\nd\re") == "a\\tb\\\\c\\nd\\re"
    assert projector_cell("\x00\u2028\U000e0001é") == "\\x00\\u2028\\U000e0001é"
    assert projector_cell("\udce2") == "\\udce2"  # a lone surrogate cannot be written as UTF-8
    assert word2vec_keys(["", "a", "a", "b c", "\\#"], [0, 1, 2, 3, 4]) == ["\\#0", "a", "a\\#2", "b\\sc", "\\\\#"]


def test_out_dash_is_not_a_folder_named_dash(ckpt, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for fmt in ("projector", "word2vec"):  # `neighbors --out -` is standard output; export writes files only
        result = run("export", "-c", ckpt, "--format", fmt, "--out", "-", code=2)
        assert result.stderr.splitlines()[0] == ("Error: Invalid value for '--out': expected a folder (projector) or "
                                                 "a file (word2vec), found '-': export writes files, not standard "
                                                 "output")
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("args", [("--format", "word2vec", "--out", "w.txt"), ("--table", "position", "--out", "p")],
                         ids=["word2vec", "position"])
def test_undertrained_typed_where_no_column_holds_it_is_a_usage_error(tmp_path, monkeypatch, args):
    # word2vec has no metadata and positions no under-trained column: --undertrained was taken and left out
    monkeypatch.chdir(tmp_path)
    result = run("export", *args, "--undertrained", code=2)
    assert result.stderr.splitlines()[0] == ("Error: Invalid value for '--undertrained': --undertrained fills the "
                                             "Projector metadata's column of a token or output table: neither word2vec "
                                             "nor the position table has it")
    assert list(tmp_path.iterdir()) == []
    run("export", *args)  # the default, not typed, is no error


@pytest.mark.parametrize("spec", [{"items": ((5, 2),)}, {"items": ((-5, None),)}, {"items": ((1.5, 3),)},
                                  {"top_norms": 0}, {"top_norms": -1}, {"top_norms": 1.5},
                                  {"items": ((1, 3),), "top_norms": 3}],
                         ids=["stop below start", "negative", "float", "top 0", "top -1", "top 1.5", "both"])
def test_library_row_specs_the_command_line_refuses_are_refused(spec):
    # (-5, None) exported rows -5..-1 (numpy's negative indices) and then every row, (5, 2) and top_norms=0 none,
    # top_norms=-1 all rows but one, and items beside top_norms were dropped, each without a word
    with pytest.raises(embscope.OptionError, match="^expected ") as err:
        RowSpec(**spec)
    assert err.value.option in ("rows", "top_norms")
    assert RowSpec(items=((1, 3), (7, None))).items == ((1, 3), (7, None)) and RowSpec(top_norms=np.int64(2))
