"""The output projection: untied, tied (shared storage, an exact copy, config.json), absent (a model
without a language-model head), unknown, or ambiguous; and which commands that stops."""

from __future__ import annotations

import json
import re
from typing import ClassVar

import numpy as np
import pytest
from conftest import run, run_json
from safetensors.numpy import save_file

import embscope
import embscope.roles
from embscope.core.checkpoint import TensorInfo
from embscope.core.role import Head
from embscope.roles import compare_copy

rng = np.random.default_rng(11)
V, D = 20, 8


def write(directory, tensors, config=None):
    directory.mkdir(exist_ok=True)
    save_file(tensors, directory / "model.safetensors")
    if config is not None:
        (directory / "config.json").write_text(json.dumps(config))
    return directory / "model.safetensors"


def bert_tensors():
    return {"embeddings.word_embeddings.weight": rng.standard_normal((V, D), dtype=np.float32),
            "embeddings.position_embeddings.weight": rng.standard_normal((12, D), dtype=np.float32),
            "encoder.layer.0.attention.self.query.weight": rng.standard_normal((D, D), dtype=np.float32)}


def test_a_model_without_a_language_model_head_is_not_called_tied(tmp_path):
    path = write(tmp_path, bert_tensors(), {"architectures": ["BertModel"], "model_type": "bert"})
    note = "no output projection in the file: config.json names 'BertModel', a model without a language-model head"
    info = run_json("info", "-c", path)
    assert (info["tied"], info["head"], info["tables"]["output"]) == (False, "absent", None)
    assert info["empty_roles"] == ["output"] and note in info["notes"]
    params = run_json("params", "-c", path)
    assert (params["tied"], params["head"], params["output"]) == (False, "absent", None)
    assert params["total"] == V * D + 12 * D + D * D
    text = run("params", "-c", path).stdout
    assert re.search(r"│ output projection +│ none \(no language-model +│", text)
    assert "tied" not in text and f"note: {note}" in " ".join(text.split())
    failed = run("norms", "--table", "output", "-c", path, code=1)
    assert failed.exit_code == 1
    assert failed.stderr == (
        f"Error: expected an untied output projection, found none: {note}; candidates: "
        "'encoder.layer.0.attention.self.query.weight' (8 x 8 float32); name one with --output-key NAME\n")


@pytest.mark.parametrize("config, head, note", [
    ({"architectures": ["BertForMaskedLM"]}, "tied",
     ("no output projection in the file: config.json names 'BertForMaskedLM', whose head is the token table "
      "unless tie_word_embeddings is false")),
    ({"architectures": ["GPT2LMHeadModel"], "tie_word_embeddings": True}, "tied",
     "no output projection in the file: config.json sets tie_word_embeddings, so the head is the token table"),
    ({"architectures": ["BertModel"], "tie_word_embeddings": True}, "absent",
     "no output projection in the file: config.json names 'BertModel', a model without a language-model head"),
    ({"architectures": ["ElectraForPreTraining"]}, "unknown",
     "no output projection in the file (tied, or a model without a language-model head)"),
    ({"tie_word_embeddings": False}, "unknown",
     ("no output projection in the file, though config.json sets tie_word_embeddings to false: the file may "
      "lack the head")),
    (None, "unknown", "no output projection in the file (tied, or a model without a language-model head)"),
])
def test_config_json_says_which_when_the_file_holds_no_head(tmp_path, config, head, note):
    info = run_json("info", "-c", write(tmp_path, bert_tensors(), config))
    assert info["head"] == head and info["notes"][-2:-1] == [note]  # the tokenizer's note comes last
    assert info["tied"] is {"tied": True, "absent": False, "unknown": None}[head]


def test_a_file_of_one_array_does_not_say_the_head_is_tied_or_absent(tmp_path):
    """pokepy-generator 1.1.0 (makemore's WaveNet in numpy) saves each array with np.save: C.npy (27 x 10, float64) is
    its character table, layer_12_weight.npy (32 x 27) its head. Opened alone, C.npy was said to be 'tied, or a model
    without a language-model head': a file of one array cannot say either. A file with more keeps the old note."""
    table = rng.standard_normal((27, 10))
    np.save(tmp_path / "C.npy", table)
    np.save(tmp_path / "layer_12_weight.npy", rng.standard_normal((32, 27)))
    info = run_json("info", "-c", tmp_path / "C.npy")
    assert info["head"] == "unknown" and info["tables"]["token"]["shape"] == list(table.shape)
    said = [note for note in info["notes"] if "output projection" in note]
    assert said == [("no output projection in the file, which holds one array: the head may be tied, in another "
                     "file, or none")]
    info = run_json("info", "-c", write(tmp_path / "two", bert_tensors()))
    assert "no output projection in the file (tied, or a model without a language-model head)" in info["notes"]


def test_unknown_head_in_the_console(tmp_path):
    path = write(tmp_path, bert_tensors())
    info = run("info", "-c", path).stdout
    assert "│ output   │ none in the file" in info
    params = run("params", "-c", path).stdout
    assert re.search(r"│ output projection +│ none in the file +│", params)
    assert ("note: no output projection in the file (tied, or a model without a language-model head)"
            in " ".join(params.split()))


def test_a_head_no_name_finds_is_named_by_its_shape_never_said_absent(tmp_path):
    # g2p_en 2.1.0's checkpoint20.npz: a GRU seq2seq whose decoder table 'dec_emb' (74 x 256) has its head 'fc_w'
    # (74 x 256) beside it, and a grapheme table 'enc_emb' (29 x 256) of another shape; np.savez writes it so
    tensors = {"enc_emb": rng.standard_normal((29, D), dtype=np.float32),
               "dec_emb": rng.standard_normal((V, D), dtype=np.float32),
               "fc_w": rng.standard_normal((V, D), dtype=np.float32), "fc_b": np.zeros(V, dtype=np.float32)}
    np.savez(tmp_path / "checkpoint20.npz", **tensors)
    path = tmp_path / "checkpoint20.npz"
    note = ("no output projection found by name, but 'fc_w' (20 x 8) has the token table's shape (20 x 8) or its "
            "transpose: if it is the head, name it with --output-key NAME")
    alone = run_json("info", "-c", path)  # no token table found: the head's absence is not claimed either
    assert (alone["head"], alone["tables"]["token"]) == ("unnamed", None)
    assert ("no output projection found by name; with no token table, a head cannot be looked for by its shape"
            in alone["notes"]) and "no output projection in the file" not in json.dumps(alone)
    info = run_json("info", "-c", path, "--token-key", "dec_emb")
    assert (info["head"], info["tied"], info["tables"]["output"]) == ("unnamed", None, None)
    assert note in info["notes"] and "no output projection in the file" not in json.dumps(info)
    assert "│ output   │ none by name: see the note" in run("info", "-c", path, "--token-key", "dec_emb").stdout
    assert run_json("params", "-c", path, "--token-key", "dec_emb")["output"] is None
    named = run_json("params", "-c", path, "--token-key", "dec_emb", "--output-key", "fc_w")
    assert (named["output"], named["tied"]) == (V * D, False)
    # stored d x V, as onnx exports a Linear (g2p_id's tiny-pron.onnx), and beside a second table of the same shape
    np.savez(path, enc=tensors["dec_emb"], dec=tensors["fc_w"], head=tensors["fc_w"].T.copy())
    info = run_json("info", "-c", path, "--token-key", "enc")
    assert info["head"] == "unnamed" and ("no output projection found by name, but 'dec' (20 x 8), 'head' (8 x 20) "
                                          "have the token table's shape (20 x 8) or its transpose: if one is the "
                                          "head, name it with --output-key NAME") in info["notes"]
    assert run("compare", "-c", path, "--token-key", "enc", "--output", code=1).stderr.count("--output-key NAME") == 1
    # an exporter's long names (tf2onnx's, g2p_id's bert_pron.onnx) are named whole, not cut to an "e.g."
    long = {"Func/StatefulPartitionedCall/input/_1:0": tensors["dec_emb"],
            "StatefulPartitionedCall/masked_bert_model/tf.__operators__.add/y:0": tensors["fc_w"],
            "StatefulPartitionedCall/masked_bert_model/mlm_cls/Tensordot/ReadVariableOp:0": tensors["fc_w"].T.copy()}
    notes = run_json("info", "-c", write(tmp_path / "long", long), "--token-key", "Func/StatefulPartitionedCall/input/_1:0")
    assert ("no output projection found by name, but 'StatefulPartitionedCall/masked_bert_model/mlm_cls/Tensordot/"
            "ReadVariableOp:0' (8 x 20), 'StatefulPartitionedCall/masked_bert_model/tf.__operators__.add/y:0' (20 x 8) "
            "have the token table's shape (20 x 8) or its transpose: if one is the head, name it with --output-key "
            "NAME") in notes["notes"]  # in the file's order: safetensors sorts its names


def test_a_head_saved_as_an_exact_copy_is_tied_and_counted_once(tmp_path):
    token = rng.standard_normal((V, D), dtype=np.float32)
    layer = rng.standard_normal((D, D), dtype=np.float32)
    path = write(tmp_path, {"transformer.wte.weight": token, "lm_head.weight": token.copy(), "h.0.mlp.weight": layer})
    params = run_json("params", "-c", path)
    assert (params["tied"], params["head"], params["output"]) == (True, "tied", None)
    assert params["total"] == 20 * 8 + 8 * 8 == 224
    assert params["shares"]["token"] == 160 / 224
    info = run_json("info", "-c", path)
    assert ("lm_head.weight holds exactly the values of transformer.wte.weight: a saved copy of a tied head, "
            "counted once") in info["notes"]


def test_a_head_that_differs_from_the_token_table_in_one_row_is_untied(tmp_path):
    token = rng.standard_normal((V, D), dtype=np.float32)
    head = token.copy()
    head[1, 3] = np.nextafter(head[1, 3], np.float32(np.inf))  # one ulp, in a row between the sampled ones
    path = write(tmp_path, {"transformer.wte.weight": token, "lm_head.weight": head})
    params = run_json("params", "-c", path)
    assert (params["tied"], params["output"], params["total"]) == (False, 160, 320)


def test_a_large_copy_is_compared_on_sampled_rows_only_and_says_so(tmp_path, monkeypatch):
    token = rng.standard_normal((V, D), dtype=np.float32)
    path = write(tmp_path, {"transformer.wte.weight": token, "lm_head.weight": token.copy()})
    monkeypatch.setattr(embscope.roles, "FULL_COMPARE_BYTES", 100)  # the tables hold 640 bytes each
    params = run_json("params", "-c", path)
    assert (params["tied"], params["output"], params["total"]) == (False, 160, 320)
    assert run_json("info", "-c", path)["notes"][-2] == (
        "'lm_head.weight' equals the token table on the 8 rows compared; at 640 bytes each the tables were not "
        "compared whole, so it counts as a head of its own")


class Recording(np.ndarray):
    """An array that records how it is indexed: which rows a comparison read."""

    log: ClassVar[list] = []

    def __getitem__(self, index):
        Recording.log.append(index)
        return np.asarray(self)[index]


def recorded(name, array):
    return TensorInfo(name, array.shape, "float32", lambda: array.view(Recording))


def test_an_untied_head_is_told_apart_on_sampled_rows_without_reading_the_rest(monkeypatch):
    token = rng.standard_normal((1000, D), dtype=np.float32)
    monkeypatch.setattr(Recording, "log", [])
    assert compare_copy(recorded("t", token), recorded("h", -token)) == (False, None)
    sampled = [0, 143, 285, 428, 571, 714, 856, 999]  # i * 999 / 7 for i in 0..7, rounded
    assert Recording.log == [sampled, sampled]


def test_a_copy_is_confirmed_block_by_block(monkeypatch):
    token = rng.standard_normal((1000, D), dtype=np.float32)
    monkeypatch.setattr(embscope.roles, "COMPARE_BLOCK_BYTES", 400 * D * 4)  # 400 rows a block
    monkeypatch.setattr(Recording, "log", [])
    assert compare_copy(recorded("t", token), recorded("h", token.copy())) == (True, None)
    blocks = [slice(0, 400), slice(400, 800), slice(800, 1200)]
    assert Recording.log[2:] == [b for block in blocks for b in (block, block)]


def ambiguous(tmp_path):
    return write(tmp_path, {"transformer.wte.weight": rng.standard_normal((V, D), dtype=np.float32),
                            "a.lm_head.weight": rng.standard_normal((V, D), dtype=np.float32),
                            "b.lm_head.weight": rng.standard_normal((V, D), dtype=np.float32)})


def test_an_ambiguous_head_stops_only_the_commands_that_need_the_output_table(tmp_path):
    path = ambiguous(tmp_path)
    message = ("expected one output table, found several equally good ones ('a.lm_head.weight', "
               "'b.lm_head.weight'); choose with --output-key")
    token = embscope.open(path).token.array.astype(np.float64)
    expected = token[1] @ token[2] / np.linalg.norm(token[1]) / np.linalg.norm(token[2])
    assert run_json("similarity", "--ids", "1", "2", "-c", path)["pairs"][0]["cosine"] == pytest.approx(expected)
    info = run_json("info", "-c", path)
    assert (info["head"], info["tied"], info["missing"]["output"]) == ("ambiguous", None, message)
    params = run_json("params", "-c", path)
    assert (params["head"], params["output"], params["total"]) == ("ambiguous", None, 3 * V * D)
    failed = run("norms", "--table", "output", "-c", path, code=1)
    assert failed.exit_code == 1 and failed.stderr == f"Error: {message}\n"


def test_output_key_chooses_the_head(tmp_path):
    path = ambiguous(tmp_path)
    emb = embscope.open(path, output_key="b.lm_head.weight")
    assert (emb.output.name, emb.output.rule, emb.tables.head) == ("b.lm_head.weight", "output_key='b.lm_head.weight'",
                                                                   Head.untied)
    report = embscope.params_report(emb)
    assert (report.output, report.total, report.shares["output"]) == (V * D, 3 * V * D, 1 / 3)


def test_output_key_naming_the_token_table_is_a_tied_head(tmp_path):
    emb = embscope.open(ambiguous(tmp_path), output_key="transformer.wte.weight")
    assert emb.output is None and emb.tables.tied is True
