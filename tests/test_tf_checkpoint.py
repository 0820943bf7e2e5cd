"""TensorFlow checkpoints, read without TensorFlow, on files TensorFlow 2.21 itself wrote (tests/data/
make_tf_checkpoint.py: a tf.compat.v1.train.Saver checkpoint in the layout of Google's BERT release, trained a few
Adam steps, and a tf.train.Checkpoint), against the values TensorFlow saved (reference.npz)."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from conftest import invoke, run_json
from pickle_gadgets import assert_error_line

from embscope.formats import open_checkpoint

DATA = Path(__file__).parent / "data" / "tf_checkpoint"
REFERENCE = np.load(DATA / "reference.npz")
BERT_TENSORS = {  # the model's variables, as modeling.py names them; the file also holds Adam's slots
    "bert/embeddings/word_embeddings": "bert_word", "bert/embeddings/position_embeddings": "bert_position",
    "bert/embeddings/token_type_embeddings": "bert_segment", "bert/encoder/layer_0/output/dense/kernel": "bert_kernel",
    "bert/encoder/layer_0/output/dense/bias": "bert_bias", "cls/predictions/output_bias": "bert_output_bias"}
VOCAB = (DATA / "bert" / "vocab.txt").read_text().split()


@pytest.mark.parametrize("given", ["bert_model.ckpt.index", "bert_model.ckpt", "bert_model.ckpt.data-00000-of-00001",
                                   "."], ids=["index", "prefix", "data-shard", "folder"])
def test_every_way_of_naming_it_reads_the_values_tensorflow_saved(given):
    checkpoint = open_checkpoint(DATA / "bert" / given)
    assert checkpoint.path.name == "bert_model.ckpt.index" and checkpoint.format == "TensorFlow checkpoint"
    assert set(checkpoint.tensors) == set(BERT_TENSORS)  # Adam's 12 slots, beta1_power, beta2_power left out
    for name, key in BERT_TENSORS.items():
        assert np.array_equal(checkpoint.tensors[name].read(), REFERENCE[key]), name
    assert checkpoint.step == int(REFERENCE["bert_step"]) == 5
    assert checkpoint.config["max_position_embeddings"] == 24  # from bert_config.json beside it
    assert any("optimizer state left out (14 of the file's tensors" in note for note in checkpoint.notes)


def test_object_based_names_lose_their_attribute_suffix():
    checkpoint = open_checkpoint(DATA / "gpt2" / "model.ckpt")
    assert np.array_equal(checkpoint.tensors["model/wte"].read(), REFERENCE["gpt2_wte"])
    assert np.array_equal(checkpoint.tensors["model/wpe"].read(), REFERENCE["gpt2_wpe"])
    assert checkpoint.step == 77 and "_CHECKPOINTABLE_OBJECT_GRAPH" not in checkpoint.tensors


def test_commands_find_the_tables_and_the_vocabulary():
    doc = run_json("params", "-c", DATA / "bert" / "bert_model.ckpt", "--json")
    assert doc["total"] == sum(REFERENCE[key].size for key in BERT_TENSORS.values())  # slots are no parameters
    # make_tf_checkpoint.py's logits are the token table, transposed, plus cls/predictions/output_bias, as in
    # run_pretraining.py: the head is tied
    assert doc["tied"] is True and doc["head"] == "tied"
    assert doc["token"] == REFERENCE["bert_word"].size and doc["position"] == REFERENCE["bert_position"].size
    similarity = run_json("similarity", "cat", "dog", "-c", DATA / "bert", "--json")
    cat, dog = (REFERENCE["bert_word"][VOCAB.index(word)] for word in ("cat", "dog"))
    expected = float(cat @ dog / np.linalg.norm(cat) / np.linalg.norm(dog))
    assert similarity["pairs"][0]["cosine"] == pytest.approx(expected, abs=1e-6)
    positions = run_json("info", "-c", DATA / "gpt2", "--json")
    assert positions["tables"]["token"]["name"] == "model/wte" and positions["tables"]["position"]["name"] == "model/wpe"


def test_the_state_file_names_the_latest_of_several(tmp_path):
    for step in (100, 200):
        for part in ("index", "data-00000-of-00001"):
            shutil.copy(DATA / "bert" / f"bert_model.ckpt.{part}", tmp_path / f"model.ckpt-{step}.{part}")
    assert_error_line(invoke("info", "-c", tmp_path), "holds several checkpoints")
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "/old/run/model.ckpt-100"\n'
                                         'all_model_checkpoint_paths: "/old/run/model.ckpt-100"\n'
                                         'all_model_checkpoint_paths: "/old/run/model.ckpt-200"\n')
    assert open_checkpoint(tmp_path).path.name == "model.ckpt-100.index"


def copied(tmp_path: Path) -> Path:
    for path in (DATA / "bert").iterdir():
        shutil.copy(path, tmp_path / path.name)
    return tmp_path / "bert_model.ckpt.index"


def test_damage_is_one_line(tmp_path):
    index = copied(tmp_path)
    data = tmp_path / "bert_model.ckpt.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:-100])
    assert_error_line(invoke("info", "-c", index), "run past 'bert_model.ckpt.data-00000-of-00001'")
    data.unlink()
    assert_error_line(invoke("info", "-c", index), "expected its data shard 'bert_model.ckpt.data-00000-of-00001' "
                      "beside the index, found none")


def test_a_compressed_block_is_refused(tmp_path):
    index = copied(tmp_path)
    raw = bytearray(index.read_bytes())
    # the footer's second handle is the index block: its trailer's first byte is the compression type
    footer = raw[-48:]
    at = 0
    for _ in range(2):  # skip the metaindex handle's two varints
        while footer[at] & 0x80:
            at += 1
        at += 1
    values = []
    for _ in range(2):
        value = shift = 0
        while True:
            byte = footer[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        values.append(value)
    offset, size = values
    raw[offset + size] = 1  # snappy
    index.write_bytes(bytes(raw))
    assert_error_line(invoke("info", "-c", index), "expected uncompressed table blocks")


def test_an_index_too_large_is_refused_before_it_is_read(tmp_path):
    index = copied(tmp_path)
    tail = index.read_bytes()[-48:]
    with open(index, "r+b") as f:
        f.truncate(65 << 20)
        f.seek((65 << 20) - 48)
        f.write(tail)  # the magic stays last, so the sniff takes it
    assert_error_line(invoke("info", "-c", index), "bert_model.ckpt.index", "of at most 67,108,864 bytes")


def test_json_config_beside_that_is_not_json_is_a_note(tmp_path):
    index = copied(tmp_path)
    (tmp_path / "bert_config.json").write_text("{not json")
    result = invoke("info", "-c", index, "--json")
    assert result.exit_code == 0, result.output
    assert any("bert_config.json beside the checkpoint is not JSON" in note for note in json.loads(result.stdout)["notes"])


PARTITIONED = DATA / "partitioned"


def test_a_partitioned_variable_is_read_whole_from_its_slices_across_shards():
    """fixed_size_partitioner's three slices (4, 3 and 3 rows) under EncodeTensorNameSlice keys, a Saver sharded over
    two devices: the whole checkpoint was refused for the one partitioned variable."""
    reference = np.load(DATA / "partitioned.npz")
    checkpoint = open_checkpoint(PARTITIONED / "model.ckpt")
    assert set(checkpoint.tensors) == {"bert/embeddings/word_embeddings", "bert/embeddings/position_embeddings"}
    word = checkpoint.tensors["bert/embeddings/word_embeddings"]
    assert word.shape == (10, 4) and word.dtype == "float32"
    assert np.array_equal(word.read(), reference["word"])
    assert np.array_equal(checkpoint.tensors["bert/embeddings/position_embeddings"].read(), reference["position"])
    assert checkpoint.step == 3
    assert run_json("params", "-c", PARTITIONED, "--json")["token"] == 40


@pytest.mark.parametrize("old, new, fragment", [
    (b"word_embeddings\x00\x01", b"word_embeddingz\x00\x01", "expected its slice [(0, 4), (0, 4)] of the same type"),
    (b"\x12\x02\x08\n\x12\x02\x08\x04", b"\x12\x02\x08\x0b\x12\x02\x08\x04",  # the whole said to be 11 x 4
     "expected slices that hold its 44 elements, found 40"),
], ids=["slice-missing", "slices-short"])
def test_a_partitioned_variable_whose_slices_do_not_add_up_is_one_line(tmp_path, old, new, fragment):
    folder = tmp_path / "ckpt"
    shutil.copytree(PARTITIONED, folder)
    index = folder / "model.ckpt.index"
    data = index.read_bytes()
    assert old in data
    index.write_bytes(data.replace(old, new))
    assert_error_line(invoke("info", "-c", folder / "model.ckpt"), fragment)


def varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


def leveldb_table(keys: list[tuple[int, bytes]], values: list[bytes]) -> bytes:
    """A table in lib/io/table's layout, by struct.pack: one data block of (shared, own bytes) keys, no compression,
    one restart point; an index block that points at it; the footer and the magic."""
    data = b"".join(varint(shared) + varint(len(own)) + varint(len(value)) + own + value
                    for (shared, own), value in zip(keys, values)) + struct.pack("<II", 0, 1)
    handle = varint(0) + varint(len(data))
    index = varint(0) + varint(1) + varint(len(handle)) + b"\xff" + handle + struct.pack("<II", 0, 1)
    footer = (varint(0) + varint(0) + varint(len(data) + 5) + varint(len(index))).ljust(40, b"\0")
    return data + b"\0" * 5 + index + b"\0" * 5 + footer + bytes.fromhex("57fb808b247547db")


def test_keys_that_each_extend_the_one_before_are_refused_before_they_fill_memory(tmp_path, monkeypatch):
    """Every record keeps the previous key and adds a byte: 60,000 records (300 KB) spelled 1.8 GB of names and
    199,999 records (under the tensor limit) more memory than the machine has; here 3,000 records spell 4.5 MB."""
    from embscope.formats import tf_checkpoint
    monkeypatch.setattr(tf_checkpoint, "MAX_KEY_BYTES", 1 << 20, raising=False)
    header = varint(1 << 3) + varint(1)  # BundleHeaderProto: one shard
    keys = [(0, b"")] + [(n, b"a") for n in range(3000)]
    index = tmp_path / "model.ckpt.index"
    index.write_bytes(leveldb_table(keys, [header] + [b""] * 3000))
    (tmp_path / "model.ckpt.data-00000-of-00001").write_bytes(b"")
    assert_error_line(invoke("info", "-c", index), "expected table keys of at most 1,048,576 bytes in all")


def test_slices_that_overlap_are_refused_when_read(tmp_path):
    """The second slice moved to rows 3-5 (its extent in the whole's entry, and its key, `\\x84` start 4 -> `\\x83`):
    the slices still hold 40 elements, but row 6 was never written and row 3 twice; it read as zeros."""
    folder = tmp_path / "ckpt"
    shutil.copytree(PARTITIONED, folder)
    index = folder / "model.ckpt.index"
    data = index.read_bytes()
    for old, new in ((b"\x84\x83\x80\x84", b"\x83\x83\x80\x84"), (b"\n\x04\x08\x04\x10\x03", b"\n\x04\x08\x03\x10\x03")):
        assert data.count(old) == 1
        data = data.replace(old, new)
    index.write_bytes(data)
    assert_error_line(invoke("norms", "-c", folder / "model.ckpt", "--table", "token"),
                      "expected slices that do not overlap, found two that do")



def test_a_keras3_optimizers_state_is_left_out_and_its_iterations_are_the_step():
    """tf.train.Checkpoint(model=..., optimizer=keras.optimizers.Adam()) after two steps: Adam's moments (same shapes
    as the weights: a second and third 12 x 4 table) and its learning rate were read as the model's tensors."""
    reference = {name.replace("|", "/"): value for name, value in np.load(DATA / "keras3.npz").items()}
    checkpoint = open_checkpoint(DATA / "keras3" / "ckpt")
    model = [f"optimizer/_trainable_variables/{n}" for n in range(3)]  # where Keras 3 files the model's variables
    assert sorted(checkpoint.tensors) == model
    for name in model:
        assert np.array_equal(checkpoint.tensors[name].read(), reference[f"{name}/.ATTRIBUTES/VARIABLE_VALUE"]), name
    assert checkpoint.step == reference["optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE"] == 2
    assert any("optimizer state left out (7 of the file's tensors" in note for note in checkpoint.notes)


def test_an_empty_data_block_is_refused(tmp_path):
    """An index block of 12 million handles to one empty block (60 MB, under the index limit) took 36 s to walk;
    TensorFlow's table builder never writes an empty block. Here: the header's block, then one empty block."""
    header = varint(1 << 3) + varint(1)
    data = varint(0) + varint(0) + varint(len(header)) + header + struct.pack("<II", 0, 1)
    empty = struct.pack("<II", 0, 1)
    handles = [varint(0) + varint(len(data)), varint(len(data) + 5) + varint(len(empty))]
    index = b"".join(varint(0) + varint(1) + varint(len(handle)) + key + handle
                     for key, handle in zip((b"a", b"b"), handles)) + struct.pack("<II", 0, 1)
    at = len(data) + 5 + len(empty) + 5
    footer = (varint(0) + varint(0) + varint(at) + varint(len(index))).ljust(40, b"\0")
    path = tmp_path / "model.ckpt.index"
    path.write_bytes(data + b"\0" * 5 + empty + b"\0" * 5 + index + b"\0" * 5 + footer
                     + bytes.fromhex("57fb808b247547db"))
    (tmp_path / "model.ckpt.data-00000-of-00001").write_bytes(b"")
    assert_error_line(invoke("info", "-c", path), "expected records in every data block of the table, found an empty one")


def test_a_data_shard_that_is_not_there_names_nothing(tmp_path):
    """`-c bert_model.ckpt.data-00000-of-00002` (a shard this checkpoint does not have) opened the checkpoint."""
    index = copied(tmp_path)
    for missing in ("bert_model.ckpt.data-00000-of-00002", "bert_model.ckpt.data-99999-of-99999"):
        assert_error_line(invoke("info", "-c", tmp_path / missing), "found nothing at")
    assert open_checkpoint(tmp_path / "bert_model.ckpt.data-00000-of-00001").path == index
