"""One counting rule for quantized files, whatever the format: a quantized weight counts as its element count;
scales, zero points and activation-quantization constants are not parameters; the answer states the rule.
Files are written by each format's writer: gguf.GGUFWriter with gguf.quants blocks, CTranslate2's layout (the
struct writer the CTranslate2 tests use), onnx.helper."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import reader_samples as samples
from conftest import run, run_json
from onnx import helper, numpy_helper

RULE = ("a quantized weight counts as its element count; scales, zero points and activation-quantization "
        "constants are not parameters")
V, D, T = 64, 32, 8


def test_gguf_quantized_tables_count_their_elements(tmp_path):
    """Q8_0 and Q4_0 keep one float16 scale per 32 values inside each block: it is never counted."""
    import gguf
    path = samples.write_gguf(tmp_path / "model.gguf", {
        "token_embd.weight": (samples.rows((V, 256), 1), "Q4_0"),
        "position_embd.weight": (samples.rows((T, 256), 2), "Q8_0"),
        "output_norm.weight": samples.rows((256,), 3)}, context=T)
    reader = gguf.GGUFReader(str(path))
    assert {t.name: int(t.n_elements) for t in reader.tensors} == {"token_embd.weight": V * 256,
                                                                 "position_embd.weight": T * 256,
                                                                 "output_norm.weight": 256}
    doc = run_json("params", "-c", path)
    assert doc["total"] == V * 256 + T * 256 + 256 and doc["token"] == V * 256
    assert doc["quantization_rule"] == RULE and doc["quantization_values"] == 0
    assert doc["quantization"] == {"token": "Q4_0", "position": "Q8_0"}


def test_ctranslate2_int8_leaves_its_scales_out(tmp_path):
    table, other = samples.rows((V, D), 11), samples.rows((D, D), 12)
    variables = {}
    for name, weight in (("decoder/embeddings/weight", table), ("decoder/layer_0/ffn/linear_0/weight", other)):
        scale = 127 / np.abs(weight).max(axis=1)  # CTranslate2's model_spec.py: one scale per row
        variables[name] = np.rint(weight * scale[:, None]).astype(np.int8)
        variables[name + "_scale"] = scale.astype(np.float32)
    variables["decoder/layer_norm/gamma"] = np.ones(D, np.float32)
    path = samples.write_ctranslate2(tmp_path / "model.bin", variables, spec="TransformerDecoderModelSpec")
    doc = run_json("params", "-c", path)
    assert doc["total"] == V * D + D * D + D  # the weights' elements, the gamma; no scale
    assert doc["quantization_rule"] == RULE and doc["quantization_values"] == V + D


def test_onnx_activation_scales_are_not_parameters(tmp_path):
    """A static QDQ graph: the weight's DequantizeLinear, and an activation's QuantizeLinear/DequantizeLinear pair
    with its own float scale, which the count used to keep."""
    q = np.arange(V * D, dtype=np.int64).reshape(V, D) % 255 - 127
    initializers = {"W_quantized": q.astype(np.int8), "W_scale": np.float32(0.01), "W_zero_point": np.int8(0),
                    "h_scale": np.float32(0.1), "h_zero_point": np.int8(0), "ln.weight": np.ones(D, np.float32)}
    nodes = [helper.make_node("DequantizeLinear", ["W_quantized", "W_scale", "W_zero_point"],
                              ["embeddings.word_embeddings.weight_DequantizeLinear_Output"]),
             helper.make_node("Gather", ["embeddings.word_embeddings.weight_DequantizeLinear_Output", "ids"], ["h"]),
             helper.make_node("QuantizeLinear", ["h", "h_scale", "h_zero_point"], ["hq"]),
             helper.make_node("DequantizeLinear", ["hq", "h_scale", "h_zero_point"], ["hd"])]
    path = samples.write_onnx(tmp_path / "model.onnx", {}, nodes)
    import onnx
    model = onnx.load(str(path))
    model.graph.initializer.extend(numpy_helper.from_array(np.asarray(v), n) for n, v in initializers.items())
    onnx.save(model, str(path))
    doc = run_json("params", "-c", path)
    assert doc["total"] == V * D + D and doc["quantization_values"] == 4
    assert doc["quantization_rule"] == RULE
    console = run("params", "-c", path).stdout
    assert f"counting rule: {RULE} (4 such values left out)." in " ".join(console.split())


def test_a_float_file_states_no_rule():
    doc = run_json("params")
    assert doc["quantization_rule"] is None and doc["quantization_values"] == 0
    assert "counting rule" not in run("params").stdout


def onnx_two_dequantizations(tmp_path: Path, scales: tuple[str, str]) -> Path:
    """One int8 weight read by two DequantizeLinear nodes (two float tables named apart, neither a head), with the
    scales named in `scales`."""
    import onnx
    q = (np.arange(V * D, dtype=np.int64).reshape(V, D) % 255 - 127).astype(np.int8)
    initializers = {"W_quantized": q, "W_zero_point": np.int8(0)} | {name: np.float32(0.01 * (n + 1))
                                                                     for n, name in enumerate(dict.fromkeys(scales))}
    nodes = [helper.make_node("DequantizeLinear", ["W_quantized", scales[0], "W_zero_point"],
                              ["embeddings.word_embeddings.weight"]),
             helper.make_node("DequantizeLinear", ["W_quantized", scales[1], "W_zero_point"], ["proj.weight"]),
             helper.make_node("Gather", ["embeddings.word_embeddings.weight", "ids"], ["h"]),
             helper.make_node("MatMul", ["h", "proj.weight"], ["y"])]
    path = samples.write_onnx(tmp_path / "model.onnx", {}, nodes)
    model = onnx.load(str(path))
    model.graph.initializer.extend(numpy_helper.from_array(np.asarray(v), n) for n, v in initializers.items())
    onnx.save(model, str(path))
    return path


def test_an_onnx_weight_dequantized_twice_is_counted_once(tmp_path):
    """The rule counts the stored weight, whatever reads it: one int8 initializer of V x D values read by two
    DequantizeLinear nodes with one scale is V x D parameters (it was counted twice), and its two tables share
    storage; read with two scales, they are two tables of other values and not one stored twice."""
    from embscope.formats import open_checkpoint

    path = onnx_two_dequantizations(tmp_path, ("W_scale", "W_scale"))
    doc = run_json("params", "-c", path)
    assert doc["total"] == V * D and doc["token"] == V * D
    tensors = open_checkpoint(path).tensors
    assert tensors["proj.weight"].storage == tensors["embeddings.word_embeddings.weight"].storage is not None
    path = onnx_two_dequantizations(tmp_path, ("W_scale", "W_scale_b"))
    tensors = open_checkpoint(path).tensors
    assert tensors["proj.weight"].storage != tensors["embeddings.word_embeddings.weight"].storage


def test_an_fp8_model_s_weights_are_parameters(tmp_path):
    # numpy holds no FP8, so its weights were left out of the count: a token table of 1,024 of 6,145 parameters
    # (the file's 1,024 + 5,120 + a scale) was said to be 99.90% of the model, with no word
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    tensors = {"model.embed_tokens.weight": torch.randn(64, 16, dtype=torch.bfloat16),
               "model.layers.0.mlp.up_proj.weight": torch.randn(320, 16).to(torch.float8_e4m3fn),
               "model.layers.0.mlp.up_proj.weight_scale": torch.ones(1)}
    torch.save(tensors, tmp_path / "fp8.pt")
    save_file(tensors, str(tmp_path / "fp8.safetensors"))
    for name in ("fp8.pt", "fp8.safetensors"):
        doc = run_json("params", "-c", tmp_path / name)
        assert (doc["token"], doc["total"]) == (64 * 16, 64 * 16 + 320 * 16 + 1)
        assert doc["shares"]["token"] == 1024 / 6145


def test_an_fp8_token_table_is_refused_with_why(tmp_path):
    # a token table stored as F8_E4M3: norms said 'no 2-D float tensor among them' and told to name one with
    # --token-key, and named so it was refused as 'expected a 2-D float table ... dtype float8_e4m3fn', neither saying
    # that FP8 is the reason (numpy holds no FP8 number) nor what would be read
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    save_file({"model.embed_tokens.weight": torch.randn(100, 16).to(torch.float8_e4m3fn)},
              str(tmp_path / "model.safetensors"))
    why = "FP8 tables are not read (numpy holds no FP8 number): save the table as bf16, fp16 or fp32"
    found = run("norms", "-c", tmp_path / "model.safetensors", code=1).stderr.strip().splitlines()
    assert len(found) == 1 and f"(100 x 16 float8_e4m3fn); {why}; name one with --token-key NAME" in found[0]
    found = run("norms", "-c", tmp_path / "model.safetensors", "--token-key", "model.embed_tokens.weight",
                code=1).stderr.strip().splitlines()
    assert found == [("Error: expected a 2-D float table for the token table, found 'model.embed_tokens.weight' "
                      f"of shape [100, 16] and dtype float8_e4m3fn: {why}")]
