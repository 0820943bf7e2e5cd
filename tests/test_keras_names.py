"""Keras's own names for embedding tables, found with no --token-key and with the rule naming where they come
from. Keras 3 files are written by Keras 3 itself (torch backend, CPU): `.weights.h5` and the legacy `.h5` of
model.save, for a Sequential, keras.io's TokenAndPositionEmbedding and keras-hub's layers (rebuilt here from
their source: keras-hub needs TensorFlow Text to install). Keras 2 needs TensorFlow, so its `.h5` is written with
h5py exactly as tf-keras's hdf5_format.save_weights_to_hdf5_group lays it out."""

from __future__ import annotations

import os

import h5py
import numpy as np
import pytest
from conftest import keras_position_embedding, run_json

import embscope

os.environ.setdefault("KERAS_BACKEND", "torch")
V, T, D = 50, 8, 16


def keras_files(folder):
    """name -> (path, token table, position table or None), each written by Keras 3, and the tables read back
    from the layers themselves. Keras costs seconds to import, so one test writes them all."""
    import keras
    from keras import ops

    PositionEmbedding = keras_position_embedding(keras)

    class TokenAndPositionEmbedding(keras.layers.Layer):
        """keras-hub's TokenAndPositionEmbedding: token_embedding (a ReversibleEmbedding), position_embedding."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.token_embedding = keras.layers.ReversibleEmbedding(V, D, name="token_embedding")
            self.position_embedding = PositionEmbedding(T, name="position_embedding")

        def call(self, inputs):
            return self.position_embedding(self.token_embedding(inputs))

    class KerasIOTokenAndPositionEmbedding(keras.layers.Layer):
        """keras.io's "Text classification with Transformer" layer: two keras.layers.Embedding, token_emb, pos_emb."""

        def __init__(self, **kwargs):
            super().__init__(name="token_and_position_embedding", **kwargs)
            self.token_emb = keras.layers.Embedding(V, D)
            self.pos_emb = keras.layers.Embedding(T, D)

        def call(self, x):
            return self.token_emb(x) + self.pos_emb(ops.arange(0, x.shape[-1]))

    KerasIOTokenAndPositionEmbedding.__name__ = "TokenAndPositionEmbedding"
    made = {}

    def model_of(*layers):
        inputs = keras.Input((T,), dtype="int32")
        out = inputs
        for layer in layers:
            out = layer(out)
        return keras.Model(inputs, out)

    def values(variable):
        return np.asarray(ops.convert_to_numpy(variable))

    def fresh(build):  # each model as a script that builds one writes it: layer names count from the start
        keras.backend.clear_session()
        return build()

    sequential = fresh(lambda: keras.Sequential([keras.Input((T,), dtype="int32"), keras.layers.Embedding(V, D),
                                                 keras.layers.Dense(4)]))
    keras_io = fresh(KerasIOTokenAndPositionEmbedding)
    io_model = model_of(keras_io)
    keras_hub = fresh(TokenAndPositionEmbedding)
    hub_model = model_of(keras_hub)
    token, position = fresh(lambda: (keras.layers.ReversibleEmbedding(V, D, name="token_embedding"),
                                     PositionEmbedding(T, name="position_embedding")))
    for name, model, token_of, position_of in (
            ("sequential", sequential, lambda: sequential.layers[0].embeddings, None),
            ("keras.io", io_model, lambda: keras_io.token_emb.embeddings, lambda: keras_io.pos_emb.embeddings),
            ("keras-hub layer", hub_model, lambda: keras_hub.token_embedding.embeddings,
             lambda: keras_hub.position_embedding.position_embeddings),
            ("keras-hub backbone", model_of(token, position), lambda: token.embeddings,
             lambda: position.position_embeddings)):
        for suffix in (".weights.h5", ".h5"):
            path = folder / f"{name}{suffix}"
            (model.save_weights if suffix == ".weights.h5" else model.save)(str(path))
            made[f"{name} {suffix}"] = (path, values(token_of()), values(position_of()) if position_of else None)
    return made


KERAS3 = {
    "sequential .weights.h5": ("layers.embedding.vars.0", None),
    "sequential .h5": ("model_weights.embedding.sequential.embedding.embeddings", None),
    "keras.io .weights.h5": ("layers.token_and_position_embedding.token_emb.vars.0",
                             "layers.token_and_position_embedding.pos_emb.vars.0"),
    "keras.io .h5": ("model_weights.token_and_position_embedding.token_and_position_embedding.embedding.embeddings",
                     "model_weights.token_and_position_embedding.token_and_position_embedding.embedding_1.embeddings"),
    "keras-hub layer .weights.h5": ("layers.token_and_position_embedding.token_embedding.vars.0",
                                    "layers.token_and_position_embedding.position_embedding.vars.0"),
    "keras-hub layer .h5": (
        "model_weights.token_and_position_embedding.token_and_position_embedding.token_embedding.embeddings",
        "model_weights.token_and_position_embedding.token_and_position_embedding.position_embedding.embeddings"),
    "keras-hub backbone .weights.h5": ("layers.reversible_embedding.vars.0", "layers.position_embedding.vars.0"),
    "keras-hub backbone .h5": ("model_weights.token_embedding.token_embedding.embeddings",
                               "model_weights.position_embedding.position_embedding.embeddings"),
}


@pytest.mark.slow  # importing Keras costs seconds; the layouts below, written with h5py, run in the README's command
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # keras's torch backend, on numpy 2's copy keyword
def test_files_keras_3_writes(tmp_path):
    written = keras_files(tmp_path)
    assert set(written) == set(KERAS3)
    for case, (token_name, position_name) in KERAS3.items():
        path, token, position = written[case]
        emb = embscope.open(path)
        assert emb.token.name == token_name and emb.token.rule.startswith("name '"), case
        assert "Keras" in emb.token.rule or "keras" in emb.token.rule, case
        np.testing.assert_array_equal(emb.token.array, token)
        if position_name is None:
            assert emb.position is None, case
        else:
            assert emb.position.name == position_name and "eras" in emb.position.rule, case
            np.testing.assert_array_equal(emb.position.array, position)
    doc = run_json("info", "-c", written["keras-hub backbone .weights.h5"][0])
    assert doc["tables"]["token"]["rule"] == ("name 'reversible_embedding.vars.0' (Keras 3 .weights.h5 of keras-hub "
                                              "backbones (GPT-2, BERT, Llama, ...): their ReversibleEmbedding "
                                              "token_embedding)")  # the provenance reaches the user


def write_keras3_layout(path, case: str, token: np.ndarray, position: np.ndarray | None):
    """The file Keras 3 writes for `case` (KERAS3's names, which the slow test above checks against Keras itself),
    laid out with h5py as Keras 3.15 lays it out: `.weights.h5` is layers/<layer path>/vars/<n>, each vars group
    naming its layer; model.save's `.h5` is model_weights/<layer>/<scope>/<weight>, with layer_names, weight_names
    and Keras's version and backend as attributes."""
    token_name, position_name = KERAS3[case]
    tables = {token_name: token} | ({position_name: position} if position_name else {})
    with h5py.File(path, "w") as f:
        legacy = not case.endswith(".weights.h5")
        if legacy:
            f.attrs["backend"], f.attrs["keras_version"] = "torch", "3.15.1"
            group = f.create_group("model_weights")
            group.attrs["backend"], group.attrs["keras_version"] = "torch", "3.15.1"
            layers = sorted({name.split(".")[1] for name in tables})
            group.attrs["layer_names"] = layers
            for layer in layers:
                names = ["/".join(name.split(".")[2:]) for name in tables if name.split(".")[1] == layer]
                group.create_group(layer).attrs["weight_names"] = names
        for name, value in tables.items():
            parts = name.split(".")
            f.create_dataset("/".join(parts), data=value)
            if not legacy:
                f["/".join(parts[:-1])].attrs["name"] = parts[-2]
        if not legacy:
            f.create_group("vars").attrs["name"] = "functional"
    return path


@pytest.mark.parametrize("case", list(KERAS3))
def test_the_layouts_keras_3_writes(case, tmp_path):
    rng = np.random.default_rng(3)
    token, position = rng.standard_normal((V, D)).astype(np.float32), rng.standard_normal((T, D)).astype(np.float32)
    token_name, position_name = KERAS3[case]
    emb = embscope.open(write_keras3_layout(tmp_path / case.replace(" ", "-"), case, token, position))
    assert emb.token.name == token_name and emb.token.rule.startswith("name '"), case
    assert "Keras" in emb.token.rule or "keras" in emb.token.rule, case
    np.testing.assert_array_equal(emb.token.array, token)
    if position_name is None:
        assert emb.position is None, case
    else:
        assert emb.position.name == position_name and "eras" in emb.position.rule, case
        np.testing.assert_array_equal(emb.position.array, position)


def write_keras2(path, layers: dict[str, dict[str, np.ndarray]], model_weights: bool = False):
    """tf-keras's save_weights_to_hdf5_group: `layer_names` on the group, a group per layer with `weight_names`,
    each weight a dataset named by the variable's name (the layer's name scope, ':0'); model.save puts it all
    under model_weights/."""
    with h5py.File(path, "w") as f:
        f.attrs["keras_version"] = b"2.15.0"
        f.attrs["backend"] = b"tensorflow"
        group = f.create_group("model_weights") if model_weights else f
        group.attrs["layer_names"] = [name.encode() for name in layers]
        for layer, weights in layers.items():
            g = group.create_group(layer)
            g.attrs["weight_names"] = [name.encode() for name in weights]
            for name, value in weights.items():
                g.create_dataset(name, data=value)
    return path


def test_files_keras_2_writes(tmp_path):
    rng = np.random.default_rng(2)
    token, position = rng.standard_normal((V, D)).astype(np.float32), rng.standard_normal((T, D)).astype(np.float32)
    dense = {"dense/kernel:0": rng.standard_normal((D, 4)).astype(np.float32), "dense/bias:0": np.zeros(4, np.float32)}
    cases = {
        "save_weights": ({"embedding": {"embedding/embeddings:0": token}, "dense": dense}, False,
                         "embedding.embedding.embeddings", None),
        "model.save": ({"embedding": {"embedding/embeddings:0": token}, "dense": dense}, True,
                       "model_weights.embedding.embedding.embeddings", None),
        "a second model of the session": ({"embedding_1": {"embedding_1/embeddings:0": token}}, False,
                                          "embedding_1.embedding_1.embeddings", None),
        "keras.io": ({"token_and_position_embedding": {
            "token_and_position_embedding/embedding/embeddings:0": token,
            "token_and_position_embedding/embedding_1/embeddings:0": position}}, False,
            "token_and_position_embedding.token_and_position_embedding.embedding.embeddings",
            "token_and_position_embedding.token_and_position_embedding.embedding_1.embeddings"),
        "keras-nlp": ({"token_and_position_embedding": {
            "token_and_position_embedding/token_embedding/embeddings:0": token,
            "token_and_position_embedding/position_embedding/embeddings:0": position}}, True,
            "model_weights.token_and_position_embedding.token_and_position_embedding.token_embedding.embeddings",
            "model_weights.token_and_position_embedding.token_and_position_embedding.position_embedding.embeddings"),
    }
    for case, (layers, model_weights, token_name, position_name) in cases.items():
        path = write_keras2(tmp_path / f"{case}.h5", layers, model_weights)
        emb = embscope.open(path)
        assert emb.token.name == token_name and ("Keras 2" in emb.token.rule or "keras-nlp" in emb.token.rule), case
        np.testing.assert_array_equal(emb.token.array, token)
        if position_name is not None:
            assert emb.position.name == position_name, case
            np.testing.assert_array_equal(emb.position.array, position)
        assert "saved by Keras 2.15.0" in " ".join(emb.checkpoint.notes)


def test_keras_2_first_embedding_whose_variable_has_another_scope(tmp_path):
    # OSKut 1.3's model/ds_weights/*.h5 (Keras 2.2.4-tf): the characters' Embedding is the layer 'embedding', but the
    # model was built after others in its session, so its variable, and the dataset, is 'embedding_3/embeddings:0';
    # the character-type tables beside it are 'embedding_1' and 'embedding_2'
    rng = np.random.default_rng(3)
    token = rng.standard_normal((V, D)).astype(np.float32)
    kinds = {name: rng.standard_normal((12, 12)).astype(np.float32) for name in ("embedding_1_2", "embedding_2_1")}
    layers = {"embedding": {"embedding_3/embeddings:0": token},
              "embedding_1": {"embedding_1_2/embeddings:0": kinds["embedding_1_2"]},
              "embedding_2": {"embedding_2_1/embeddings:0": kinds["embedding_2_1"]}}
    for model_weights in (False, True):
        emb = embscope.open(write_keras2(tmp_path / f"lstm-{model_weights}.h5", layers, model_weights))
        assert emb.token.name == "model_weights." * model_weights + "embedding.embedding_3.embeddings"
        assert emb.token.rule.startswith("name 'embedding.*.embeddings' (Keras 2 .h5")
        np.testing.assert_array_equal(emb.token.array, token)


def test_an_embedding_layer_with_a_name_of_its_own_is_the_token_table(tmp_path):
    """rnnmorph 0.4.1's Russian tagger (rnnmorph/models/ru/eval_model.h5, Keras 2.1.4 save_weights) keeps its
    characters in a keras.layers.Embedding named 'chars_embeddings' inside a TimeDistributed: the weight is
    'time_distributed_1/chars_embeddings/embeddings:0' beside Dense and LSTM kernels, and no name in the role table
    found it (token: none). Keras names an Embedding's one weight 'embeddings' whatever the layer is called, so the
    file's only such weight is the token table; two of them (rnnmorph with use_word_embeddings) are left to the
    names, and a weight another role's name claims (keras-nlp's position_embedding) is not counted."""
    rng = np.random.default_rng(4)
    chars = rng.standard_normal((101, 24)).astype(np.float32)
    dense = {f"{name}/{part}:0": rng.standard_normal(shape).astype(np.float32)
             for name, shape in (("dense_2", (768, 500)), ("dense_3", (500, 200))) for part in ("kernel",)}
    layers = {"time_distributed_1": {"chars_embeddings/embeddings:0": chars} | dense,
              "main_pred": {"main_pred/kernel:0": rng.standard_normal((128, 253)).astype(np.float32),
                            "main_pred/bias:0": np.zeros(253, np.float32)}}
    emb = embscope.open(write_keras2(tmp_path / "eval_model.h5", layers))
    assert emb.token.name == "time_distributed_1.chars_embeddings.embeddings"
    assert emb.token.rule == "the only Keras Embedding weight ('embeddings') in the file"
    np.testing.assert_array_equal(emb.token.array, chars)
    doc = run_json("info", "-c", tmp_path / "eval_model.h5")
    assert ("'time_distributed_1.chars_embeddings.embeddings' is the file's only keras.layers.Embedding weight "
            "('embeddings'), so it is taken as the token table") in doc["notes"]
    position = rng.standard_normal((8, 24)).astype(np.float32)
    layers["position_embedding"] = {"position_embedding/embeddings:0": position}
    emb = embscope.open(write_keras2(tmp_path / "with_positions.h5", layers))
    assert emb.token.name == "time_distributed_1.chars_embeddings.embeddings"
    assert emb.position.name == "position_embedding.position_embedding.embeddings"
    layers["word_embeddings"] = {"word_embeddings/embeddings:0": rng.standard_normal((50, 24)).astype(np.float32)}
    with pytest.raises(embscope.TableError, match="found none among"):
        _ = embscope.open(write_keras2(tmp_path / "two.h5", layers)).token


def test_a_head_over_the_vocabulary_of_another_width_is_named_never_called_absent_or_tied(tmp_path):
    """textgenrnn 2.0.0's textgenrnn_weights.hdf5 (Keras 2.1.5): a 465 x 100 character table, two LSTMs of 128, and
    its Dense 'output' (356 x 465, softmax over the 465 ids) reading the concatenated embedding and LSTM outputs
    (100 + 128 + 128) through an attention layer. info said the file held no output projection, 'tied, or a model
    without a language-model head': it has one, and at another width it cannot be the token table."""
    rng = np.random.default_rng(5)
    vocab, width, hidden = 40, 10, 8
    wide = width + 2 * hidden  # what the attention layer reads, as textgenrnn's rnn_concat joins it
    f32 = np.float32
    layers = {
        "embedding": {"embedding/embeddings:0": rng.standard_normal((vocab, width)).astype(f32)},
        "rnn_1": {"rnn_1/kernel:0": rng.standard_normal((width, 4 * hidden)).astype(f32),
                  "rnn_1/recurrent_kernel:0": rng.standard_normal((hidden, 4 * hidden)).astype(f32),
                  "rnn_1/bias:0": np.zeros(4 * hidden, f32)},
        "rnn_2": {"rnn_2/kernel:0": rng.standard_normal((hidden, 4 * hidden)).astype(f32),
                  "rnn_2/recurrent_kernel:0": rng.standard_normal((hidden, 4 * hidden)).astype(f32),
                  "rnn_2/bias:0": np.zeros(4 * hidden, f32)},
        "attention": {"attention/attention_W:0": rng.standard_normal((wide, 1)).astype(f32)},
        "output": {"output/kernel:0": rng.standard_normal((wide, vocab)).astype(f32),
                   "output/bias:0": np.zeros(vocab, f32)},
    }
    path = write_keras2(tmp_path / "textgenrnn_weights.hdf5", layers)
    doc = run_json("info", "-c", path)
    assert doc["head"] == "unnamed" and doc["tables"]["output"] is None
    said = [note for note in doc["notes"] if "output projection" in note]
    assert len(said) == 1 and f"'output.output.kernel' ({wide} x {vocab})" in said[0]
    assert f"the vocabulary's {vocab} rows and another width than the token table's {width}" in said[0]
    assert "tied, or a model without" not in said[0]
    named = embscope.open(path, output_key="output.output.kernel")
    assert np.array_equal(np.asarray(named.output.array), layers["output"]["output/kernel:0"].T)


def test_a_json_map_of_ids_beside_the_weights_under_another_name_is_named_for_tokenizer(tmp_path):
    """textgenrnn 2.0.0 ships textgenrnn_vocab.json (464 characters, ids 1 to 464, json.dump of a Keras Tokenizer's
    word_index) beside textgenrnn_weights.hdf5 (465 x 100: row 0 the padding id): info said 'no tokenizer found
    beside the checkpoint' with no word of the map there. A config of a few numbers is not taken for one."""
    import json

    chars = "abcdefghij \\n.,"
    table = np.random.default_rng(3).standard_normal((len(chars) + 1, 6)).astype(np.float32)
    path = write_keras2(tmp_path / "textgenrnn_weights.hdf5", {"embedding": {"embedding/embeddings:0": table}})
    (tmp_path / "textgenrnn_vocab.json").write_text(json.dumps({c: i + 1 for i, c in enumerate(chars)}))
    (tmp_path / "textgenrnn_config.json").write_text(json.dumps({"rnn_layers": 2, "rnn_size": 8, "max_length": 4}))
    said = [note for note in run_json("info", "-c", path)["notes"] if "tokenizer" in note]
    assert len(said) == 1 and f"'textgenrnn_vocab.json' maps text to ids that fit the {len(chars) + 1}-row table" \
        in said[0] and "textgenrnn_config.json" not in said[0] and "--tokenizer" in said[0]
    given = run_json("neighbors", "a", "-k", "1", "-c", path, "--tokenizer", tmp_path / "textgenrnn_vocab.json")
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    cosines = unit @ unit[1]
    cosines[1] = -np.inf
    assert given["neighbors"][0]["id"] == int(np.argmax(cosines))



def position_first_model(keras, head: bool, names: bool):
    """A subclassed model that makes its position Embedding first: Keras 3's .weights.h5 files it as
    'layers/embedding', the token Embedding as 'layers/embedding_1' (saving_lib numbers a class's layers in the
    order the model tracked them), and no config.json says which is which; only the layer's own name, on its vars
    group, may."""

    class PositionFirst(keras.Model):
        def __init__(self):
            super().__init__(name="position_first")
            self.pos = keras.layers.Embedding(T, D, name="pos_emb" if names else None)
            self.tok = keras.layers.Embedding(V, D, name="tok_emb" if names else None)
            self.out = keras.layers.Dense(V) if head else None

        def call(self, ids):
            x = self.tok(ids) + self.pos(keras.ops.arange(T))
            return self.out(x) if self.out is not None else x

    model = PositionFirst()
    model(np.zeros((1, T), "int32"))
    return model


def write_position_first(path, head: bool, names: bool, rng=None):
    """The .weights.h5 Keras 3.15 writes for position_first_model, laid out with h5py (the slow test below checks
    it against Keras itself): datasets, shapes and each vars group's name attribute."""
    rng = rng or np.random.default_rng(5)
    tables = {"layers/embedding": ("pos_emb" if names else "embedding", [rng.standard_normal((T, D))]),
              "layers/embedding_1": ("tok_emb" if names else "embedding_1", [rng.standard_normal((V, D))])}
    if head:
        tables["layers/dense"] = ("dense", [rng.standard_normal((D, V)), rng.standard_normal(V)])
    with h5py.File(path, "w") as f:
        for group, (layer, values) in tables.items():
            for i, value in enumerate(values):
                f.create_dataset(f"{group}/vars/{i}", data=value.astype(np.float32))
            f[f"{group}/vars"].attrs["name"] = layer
        f.create_group("vars").attrs["name"] = "position_first"
    return path, tables["layers/embedding_1"][1][0].astype(np.float32)


def h5_layout(path) -> dict[str, object]:
    """Every group's and dataset's path, with its shape or its attributes."""
    found = {}
    with h5py.File(path) as f:
        f.visititems(lambda name, obj: found.__setitem__(
            name, obj.shape if isinstance(obj, h5py.Dataset) else dict(obj.attrs)))
        found[""] = dict(f.attrs)
    return found


@pytest.mark.slow  # importing Keras costs seconds; the same layout, written with h5py, runs in the README's command
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize(("head", "names"), [(True, False), (False, False), (False, True)])
def test_keras_writes_the_position_first_layout(tmp_path, head, names):
    import keras
    keras.utils.clear_session()  # unnamed layers take the session's next name: 'embedding_2' after another test's model
    model = position_first_model(keras, head, names)
    model.save_weights(tmp_path / "keras.weights.h5")
    written, _ = write_position_first(tmp_path / "h5py.weights.h5", head, names)
    assert h5_layout(tmp_path / "keras.weights.h5") == h5_layout(written)
    token = run_json("info", "-c", tmp_path / "keras.weights.h5")["tables"]["token"]
    assert token["name"] == "layers.embedding_1.vars.0" or (not head and not names)


@pytest.mark.parametrize(("head", "names"), [(True, False), (False, False), (False, True)])
def test_a_weights_file_whose_first_embedding_is_the_positions(tmp_path, head, names):
    path, token = write_position_first(tmp_path / "model.weights.h5", head, names)
    doc = run_json("info", "-c", path)
    note = " ".join(doc["notes"])
    if names:  # the vars groups name the layers 'pos_emb' and 'tok_emb': the names decide, as config.json's would
        assert doc["tables"]["token"]["name"] == "layers.embedding_1.vars.0"
        assert doc["tables"]["position"]["name"] == "layers.embedding.vars.0"
        assert doc["tables"]["token"]["rule"] == ("the layer's name on its vars group, its class by its path: Keras "
                                                  "layer 'tok_emb' (Embedding), whose name says token")
    elif head:  # the Dense kernel (D x V) has the token table's rows on a side: the evidence decides
        assert doc["tables"]["token"]["name"] == "layers.embedding_1.vars.0"
        assert "its 50 rows a side of 'layers.dense.vars.0' (16 x 50)" in note and "--pos-key" in note
    else:  # nothing tells them apart: the first is taken, and the note says so and names the option
        assert doc["tables"]["token"]["name"] == "layers.embedding.vars.0"
        assert "the file cannot tell which is the token table" in note and "--token-key" in note
        return
    np.testing.assert_array_equal(embscope.open(path).token.array, token)


def test_an_untied_reversible_embeddings_reverse_table_is_the_head(tmp_path):
    """keras.layers.ReversibleEmbedding(tie_weights=False) files 'reverse_embeddings' (D x V) as vars/1 after its
    'embeddings' (keras-hub's LlamaBackbone(tie_word_embeddings=False).save_weights writes
    layers/reversible_embedding/vars/0 (V x D) and vars/1 (D x V), checked with keras-hub 0.32's own classes)."""
    rng = np.random.default_rng(4)
    token, reverse = rng.standard_normal((V, D)).astype(np.float32), rng.standard_normal((D, V)).astype(np.float32)
    path = tmp_path / "model.weights.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("layers/reversible_embedding/vars/0", data=token)
        f.create_dataset("layers/reversible_embedding/vars/1", data=reverse)
        f["layers/reversible_embedding/vars"].attrs["name"] = "token_embedding"
        f.create_group("vars").attrs["name"] = "llama_backbone"
    emb = embscope.open(path)
    assert emb.output.name == "layers.reversible_embedding.vars.1" and not emb.tables.tied
    np.testing.assert_array_equal(emb.output.array, reverse.T)  # a row per token, as logits = x @ reverse
    doc = run_json("params", "-c", path)
    assert doc["output"] == D * V and doc["head"] == "untied" and doc["total"] == 2 * V * D


@pytest.mark.parametrize("misnamed", [True, False])
def test_a_name_that_the_heads_side_contradicts_is_hedged(tmp_path, misnamed):
    """The names decide (the position-first layout, the vars groups naming the layers), but where they mislead
    ('tok_emb' on the 8-row position table, 'pos_emb' on the 50-row token table) the Dense kernel, 16 x 50, has the
    other table's rows on a side and none of the named one's: a note says so and names --token-key. Before, the
    name was taken with nothing said, and only 'no output projection in the file' followed."""
    path, _ = write_position_first(tmp_path / "model.weights.h5", head=True, names=True)
    if misnamed:
        with h5py.File(path, "r+") as f:
            f["layers/embedding/vars"].attrs["name"], f["layers/embedding_1/vars"].attrs["name"] = "tok_emb", "pos_emb"
    doc = run_json("info", "-c", path)
    note = " ".join(doc["notes"])
    assert doc["tables"]["token"]["name"] == ("layers.embedding.vars.0" if misnamed else "layers.embedding_1.vars.0")
    said = ("'layers.embedding_1.vars.0' (50 x 16) has its 50 rows a side of 'layers.dense.vars.0' (16 x 50)" in note
            and "--token-key" in note)
    assert said is misnamed, note
