"""The safetensors reader: headers parsed by hand, tables memory-mapped, shards opened only when needed."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

import embscope
from embscope.core.errors import CheckpointError

rng = np.random.default_rng(0)


def test_single_file_tables_match_what_was_written(tmp_path):
    wte = rng.standard_normal((50, 8)).astype(np.float32)
    wpe = rng.standard_normal((16, 8)).astype(np.float32)
    save_file({"wte.weight": wte, "wpe.weight": wpe, "h.0.ln_1.weight": np.ones(8, np.float32)},
              tmp_path / "model.safetensors")
    emb = embscope.open(tmp_path / "model.safetensors")
    assert emb.checkpoint.format == "safetensors"
    assert emb.token.name == "wte.weight" and emb.position.name == "wpe.weight"
    assert isinstance(emb.token.array, np.memmap)  # mapped, not copied
    np.testing.assert_array_equal(emb.token.array, wte)
    np.testing.assert_array_equal(emb.position.array, wpe)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_tables_are_upcast_to_float32(tmp_path, dtype):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file as save_torch
    table = torch.randn(20, 4).to(getattr(torch, dtype))
    save_torch({"transformer.wte.weight": table}, str(tmp_path / "m.safetensors"))
    emb = embscope.open(tmp_path / "m.safetensors")
    assert emb.token.tensor.dtype == dtype
    assert emb.token.array.dtype == np.float32
    np.testing.assert_array_equal(emb.token.array, table.float().numpy())


def test_sharded_set_reads_only_the_shard_that_holds_the_table(tmp_path):
    wte = rng.standard_normal((30, 4)).astype(np.float32)
    save_file({"model.embed_tokens.weight": wte}, tmp_path / "model-00001-of-00002.safetensors")
    save_file({"lm_head.weight": rng.standard_normal((30, 4)).astype(np.float32),
               "model.norm.weight": np.ones(4, np.float32)}, tmp_path / "model-00002-of-00002.safetensors")
    weight_map = {"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
                  "lm_head.weight": "model-00002-of-00002.safetensors",
                  "model.norm.weight": "model-00002-of-00002.safetensors"}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 30}))
    emb = embscope.open(tmp_path)  # the directory: the index wins over the shards it names
    assert emb.checkpoint.format == "safetensors (sharded)"
    assert emb.token.tensor.read.args[0].name == "model-00001-of-00002.safetensors"
    np.testing.assert_array_equal(emb.token.array, wte)
    assert emb.position is None and emb.output.name == "lm_head.weight" and not emb.tables.tied
    assert emb.checkpoint.config["model_type"] == "llama"


def test_sharded_index_naming_a_missing_shard_is_an_error(tmp_path):
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "gone.safetensors"}}))
    with pytest.raises(CheckpointError) as err:
        embscope.open_checkpoint(tmp_path / "model.safetensors.index.json")
    assert str(err.value) == (f"'{tmp_path / 'model.safetensors.index.json'}' names shard 'gone.safetensors', "
                              f"which is not in '{tmp_path}'")


def test_header_longer_than_the_file_is_refused_before_reading(tmp_path):
    path = tmp_path / "lie.safetensors"
    path.write_bytes((10**12).to_bytes(8, "little") + b'{"a": 1}')
    with pytest.raises(CheckpointError) as err:
        embscope.open_checkpoint(path)
    assert str(err.value) == f"'{path}': safetensors header declares 1000000000000 bytes but only 8 follow"


def test_shape_disagreeing_with_offsets_is_refused(tmp_path):
    header = json.dumps({"t": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 16]}}).encode()
    path = tmp_path / "bad.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header + bytes(16))
    with pytest.raises(CheckpointError) as err:
        embscope.open_checkpoint(path)
    assert str(err.value) == f"'{path}': tensor 't': shape [4, 4] of F32 needs 64 bytes, data_offsets span 16"


def test_training_step_from_the_header_metadata(tmp_path):
    save_file({"wte.weight": np.zeros((4, 2), np.float32)}, tmp_path / "m.safetensors", metadata={"step": "1500"})
    assert embscope.open(tmp_path / "m.safetensors").checkpoint.step == 1500
    save_file({"wte.weight": np.zeros((4, 2), np.float32)}, tmp_path / "n.safetensors", metadata={"step": "later"})
    assert embscope.open(tmp_path / "n.safetensors").checkpoint.step is None


@pytest.mark.parametrize("dtype, name", [("float8_e4m3fn", "F8_E4M3"), ("float8_e5m2", "F8_E5M2"),
                                         ("complex64", "C64")])
def test_a_tensor_safetensors_writes_but_numpy_cannot_hold_is_listed_not_fatal(tmp_path, dtype, name):
    # an FP8 model (BF16 embeddings, F8_E4M3 linear layers, as safetensors.torch writes them) was refused whole:
    # "expected a dtype among F64, ..., found '"F8_E4M3"'"
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file as save_torch

    table = torch.randn(12, 4, dtype=torch.bfloat16)
    save_torch({"model.embed_tokens.weight": table, "model.layers.0.mlp.up_proj.weight":
                torch.randn(8, 4).to(getattr(torch, dtype))}, str(tmp_path / "model.safetensors"))
    data = (tmp_path / "model.safetensors").read_bytes()
    header = json.loads(data[8:8 + int.from_bytes(data[:8], "little")])
    assert header["model.layers.0.mlp.up_proj.weight"]["dtype"] == name
    emb = embscope.open(tmp_path / "model.safetensors")
    found = emb.checkpoint.tensors["model.layers.0.mlp.up_proj.weight"]
    assert (found.shape, found.dtype) == ((8, 4), dtype)
    assert np.array_equal(emb.token.array, table.float().numpy())
