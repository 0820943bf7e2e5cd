"""Keras / TensorFlow .h5 weights written with h5py in the layouts Keras and Hugging Face save."""

from __future__ import annotations

import sys

import numpy as np
import pytest

h5py = pytest.importorskip("h5py", reason="the h5 extra is not installed (pip install 'embscope[h5]')")


import reader_samples as samples
from conftest import run, run_json

import embscope
from embscope.core.errors import CheckpointError, MissingPackageError
from embscope.formats import open_checkpoint

V, D, T = samples.V, samples.D, samples.T


@pytest.mark.parametrize("compressed", [False, True])
def test_hugging_face_bert_layout(compressed, tmp_path):
    samples.keras_bert(tmp_path, compressed=compressed)
    emb = embscope.open(tmp_path)
    assert emb.checkpoint.format == "Keras HDF5"
    assert emb.token.name == "bert.tf_bert_model.bert.embeddings.word_embeddings.weight"
    assert emb.position.name == "bert.tf_bert_model.bert.embeddings.position_embeddings.embeddings"
    np.testing.assert_array_equal(emb.token.array, samples.rows((V, D), 7))
    np.testing.assert_array_equal(emb.position.array, samples.rows((T, D), 8))
    assert isinstance(emb.position.array, np.memmap)  # contiguous: mapped, not copied
    assert isinstance(emb.token.array, np.memmap) is not compressed  # gzip: read through h5py
    assert run_json("params", "-c", tmp_path)["total"] == V * D + T * D + D


def test_tf_gpt2_layout_and_figures_against_numpy(tmp_path):
    wte, wpe = samples.rows((V, D), 1), samples.rows((T, D), 2)
    samples.write_h5(tmp_path / "tf_model.h5", {"transformer/tfgp_t2_lm_head_model/transformer/wte/weight:0": wte,
                                                "transformer/tfgp_t2_lm_head_model/transformer/wpe/embeddings:0": wpe})
    doc = run_json("positions", "--pairs", "0:6", "-c", tmp_path)
    a, b = wpe[0].astype(np.float64), wpe[6].astype(np.float64)
    assert doc["pairs"][0]["cosine"] == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
    info = run_json("info", "-c", tmp_path)
    assert info["tables"]["token"]["rule"].startswith("name 'transformer.wte.weight'")
    assert info["tables"]["position"]["rule"].startswith("name 'wpe.embeddings'")


def test_data_in_another_file_is_refused(tmp_path):
    (tmp_path / "raw.bin").write_bytes(samples.rows((V, D), 1).tobytes())
    with h5py.File(tmp_path / "tf_model.h5", "w") as f:
        f.create_dataset("embeddings/word_embeddings/weight:0", shape=(V, D), dtype="<f4",
                         external=[("raw.bin", 0, V * D * 4)])
    with pytest.raises(CheckpointError, match=r"dataset 'embeddings/word_embeddings/weight:0' keeps its data in other "
                                              r"files; refused"):
        open_checkpoint(tmp_path / "tf_model.h5")


def test_truncated_file_is_one_clear_error(tmp_path):
    path, _ = samples.keras_bert(tmp_path)
    path.write_bytes(path.read_bytes()[:3000])
    with pytest.raises(CheckpointError, match=r"tf_model.h5': expected an HDF5 file h5py can read, found damage"):
        open_checkpoint(path)
    result = run("info", "-c", path, code=1)
    assert result.exit_code == 1 and result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1


def test_missing_h5py_names_the_extra(tmp_path, monkeypatch):
    path, _ = samples.keras_bert(tmp_path)
    monkeypatch.setitem(sys.modules, "h5py", None)
    with pytest.raises(MissingPackageError, match=r"is an HDF5 \(Keras\) file; reading it needs the 'h5py' package "
                                                  r"\(pip install 'embscope\[h5\]'\)$") as err:
        open_checkpoint(path)
    assert (err.value.package, err.value.extra) == ('h5py', 'h5')


@pytest.mark.parametrize("config", ["[" * 200_000, "not json", '{"class_name": "Embedding"'])
def test_a_model_config_that_cannot_be_read_leaves_the_tables_readable(tmp_path, config):
    # the Embedding initializer is read from a full save's model_config: one nested past the JSON parser's depth
    # refused the whole file as damaged (RecursionError); now the initializer is only not known
    table = np.random.default_rng(0).standard_normal((50, 16)).astype(np.float32)
    with h5py.File(tmp_path / "model.h5", "w") as f:
        f.attrs["keras_version"] = "2.2.4"
        f.attrs["model_config"] = config
        f.create_group("embedding/embedding").create_dataset("embeddings:0", data=table)
    doc = run_json("norms", "-c", tmp_path / "model.h5", "--table", "token")
    assert doc["rows"] == 50 and doc["mean"] == pytest.approx(float(np.linalg.norm(table, axis=1).mean()), rel=1e-5)


def test_the_optimizer_state_keras_save_model_keeps_is_not_counted_as_parameters(tmp_path):
    """shakkala 1.7's simple_model.h5 (Keras 2.0.8's model.save, include_optimizer on): 505,116 model values under
    'model_weights' and 1,010,232 of Adam's state under 'optimizer_weights' (a moment of each weight, the
    149 x 256 character table's among them as 'training/Adam/Variable:0'). params said 1,515,348 parameters, the
    token table 2.5% of them, and took Adam's copy of the table's shape for an unnamed head. Written with h5py in
    tf-keras' save_model_to_hdf5 layout; the totals are numpy's sums of the model's datasets."""
    rng = np.random.default_rng(3)
    model = {"embedding_2/embedding_2/embeddings:0": rng.standard_normal((149, 256)),
             "dense_1/dense_1/kernel:0": rng.standard_normal((256, 16)), "dense_1/dense_1/bias:0": np.zeros(16)}
    optimizer = {"training/Adam/iterations:0": np.zeros((), np.int64)}
    optimizer |= {f"training/Adam/Variable{'' if i == 0 else f'_{i}'}:0": np.zeros_like(v)
                  for i, v in enumerate(list(model.values()) * 2)}
    path = tmp_path / "simple_model.h5"
    with h5py.File(path, "w") as f:
        f.attrs["keras_version"], f.attrs["backend"] = b"2.0.8", b"tensorflow"
        weights = f.create_group("model_weights")
        weights.attrs["layer_names"] = [b"embedding_2", b"dense_1"]
        for name, value in model.items():
            f.create_dataset(f"model_weights/{name}", data=value.astype(np.float32))
        for name, value in optimizer.items():
            f.create_dataset(f"optimizer_weights/{name}", data=value.astype(np.float32 if value.ndim else np.int64))
    doc = run_json("params", "-c", path)
    assert doc["total"] == sum(v.size for v in model.values()) == 149 * 256 + 256 * 16 + 16
    assert doc["token"] == 149 * 256 and doc["head"] != "unnamed"
    values = sum(v.size for v in optimizer.values())  # Adam's two moments of each weight, and its step count
    assert values == 2 * sum(v.size for v in model.values()) + 1
    assert (f"7 datasets under 'optimizer_weights' ({values:,} values: the optimizer's state that Keras' save_model "
            "keeps beside the model's weights, not parameters) are left out") in run_json("info", "-c", path)["notes"]


def test_a_second_embedding_weight_is_named_where_no_role_takes_it(tmp_path):
    """big_phoney 1.0.1's prediction_model_weights.hdf5 (Keras 2.1.5's save_weights): the character table
    'embedding_1' (30 x 256) is the token table, and the decoder's phone table 'embedding_2' (87 x 256), 17 of whose
    rows no input holds (the padding, the end symbol and 15 vowels without the stress digit CMUdict always writes),
    was named nowhere. Written with h5py in that layout; the rows left at the draw are the test's own."""
    rng = np.random.default_rng(5)
    chars = rng.normal(0, 0.1, (30, 64))
    phones = rng.normal(0, 0.1, (87, 64))
    never = np.sort(rng.choice(87, 17, replace=False))
    phones[never] = rng.uniform(-0.05, 0.05, (17, 64))  # keras.layers.Embedding's default draw, left alone
    path = tmp_path / "prediction_model_weights.hdf5"
    with h5py.File(path, "w") as f:
        f.attrs["keras_version"], f.attrs["backend"] = b"2.1.5", b"tensorflow"
        f.attrs["layer_names"] = [b"input_1", b"embedding_1", b"embedding_2", b"dense_4"]
        for layer, weights in (("embedding_1", {"embeddings:0": chars}), ("embedding_2", {"embeddings:0": phones}),
                               ("dense_4", {"kernel:0": rng.normal(0, 0.1, (64, 87)), "bias:0": np.zeros(87)})):
            group = f.create_group(layer)
            group.attrs["weight_names"] = [f"{layer}/{name}".encode() for name in weights]
            for name, value in weights.items():
                group.create_dataset(f"{layer}/{name}", data=value.astype(np.float32))
    doc = run_json("info", "-c", path)
    assert doc["tables"]["token"]["name"] == "embedding_1.embedding_1.embeddings"
    said = [n for n in doc["notes"] if "keras.layers.Embedding weight" in n]
    assert len(said) == 1 and "'embedding_2.embedding_2.embeddings' (87 x 64)" in said[0] and "--token-key" in said[0]
    found = run_json("norms", "-c", path, "--token-key", "embedding_2.embedding_2.embeddings")["untrained"]
    assert [r for g in found["ranges"] for r in range(g["first"], g["last"] + 1)] == never.tolist()
    named = run_json("info", "-c", path, "--token-key", "embedding_2.embedding_2.embeddings")
    assert not [n for n in named["notes"] if "keras.layers.Embedding weight" in n]  # the user named the table
