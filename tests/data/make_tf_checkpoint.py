"""Writes tests/data/tf_checkpoint/ with TensorFlow itself (2.21, tensorflow-cpu from PyPI; not a test dependency):
- bert/: a tiny BERT in the layout of Google's release (modeling.py's variable names, bert_config.json and vocab.txt
  beside), trained for 5 steps of tf.compat.v1.train.AdamOptimizer on a masked-LM loss whose head is the token table
  transposed plus cls/predictions/output_bias, as run_pretraining.py's is; saved by tf.compat.v1.train.Saver with
  its global_step, so the index also holds Adam's slots (.../Adam, .../Adam_1) and beta1_power, beta2_power;
- gpt2/: tf.train.Checkpoint of a module holding wte and wpe (object-based names, model/wte/.ATTRIBUTES/...) and a
  step counter;
- reference.npz: the values TensorFlow saved, read back from the session, for the tests to compare with;
- partitioned/: a Saver(sharded=True) checkpoint over two CPU devices (two data shards) whose word_embeddings is
  partitioned in three by tf.compat.v1.fixed_size_partitioner (slices of 4, 3 and 3 rows, each under its own
  EncodeTensorNameSlice key), as large TF1 embeddings were saved; its values in partitioned.npz;
- keras3/: tf.train.Checkpoint(model=..., optimizer=...) of a Keras 3 model (Embedding, Dense) after two steps of
  keras.optimizers.Adam, as TensorFlow's guide saves one: the model's variables are filed under the optimizer's
  `_trainable_variables`, Adam's moments under its `_variables`, its step counter under `_iterations`; the values
  tf.train.load_checkpoint reads back, by stored name, in keras3.npz.
Run from the repository root in an environment with tensorflow: python tests/data/make_tf_checkpoint.py
(`python tests/data/make_tf_checkpoint.py partitioned` writes partitioned/ alone, `... keras3` keras3/).
"""

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

OUT = Path(__file__).parent / "tf_checkpoint"
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefghijklmnopqrstuvwxyz", "the", "cat", "dog", "sat",
         "on", "mat", "a", "##s", "##ed", "##ing", "run", "walk", "big", "small", "red", "blue", "and", "or", "not",
         "is", "was", "he", "she", "it"]
V, P, H = len(VOCAB), 24, 16


def bert(folder: Path) -> dict[str, np.ndarray]:
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(0)
        init = tf.compat.v1.truncated_normal_initializer(stddev=0.02)  # modeling.py's create_initializer
        ids = tf.constant([[2, 31, 32, 34, 35, 3]], dtype=tf.int32)
        with tf.compat.v1.variable_scope("bert/embeddings"):
            word = tf.compat.v1.get_variable("word_embeddings", [V, H], initializer=init)
            segment = tf.compat.v1.get_variable("token_type_embeddings", [2, H], initializer=init)
            position = tf.compat.v1.get_variable("position_embeddings", [P, H], initializer=init)
        hidden = tf.nn.embedding_lookup(word, ids) + position[:6] + segment[0]
        with tf.compat.v1.variable_scope("bert/encoder/layer_0/output/dense"):
            kernel = tf.compat.v1.get_variable("kernel", [H, H], initializer=init)
            bias = tf.compat.v1.get_variable("bias", [H], initializer=tf.zeros_initializer())
        hidden = tf.tanh(tf.einsum("bth,hk->btk", hidden, kernel) + bias)
        with tf.compat.v1.variable_scope("cls/predictions"):
            output_bias = tf.compat.v1.get_variable("output_bias", [V], initializer=tf.zeros_initializer())
        logits = tf.einsum("bth,vh->btv", hidden, word) + output_bias  # the head is the token table, transposed
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=ids, logits=logits))
        step = tf.compat.v1.train.get_or_create_global_step()
        train = tf.compat.v1.train.AdamOptimizer(1e-3).minimize(loss, global_step=step)
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            for _ in range(5):
                session.run(train)
            saver.save(session, str(folder / "bert_model.ckpt"), write_meta_graph=False, write_state=False)
            values = session.run({"word": word, "position": position, "segment": segment, "kernel": kernel,
                                  "bias": bias, "output_bias": output_bias, "step": step})
    (folder / "bert_config.json").write_text(json.dumps({
        "vocab_size": V, "hidden_size": H, "num_hidden_layers": 1, "num_attention_heads": 2,
        "intermediate_size": H, "max_position_embeddings": P, "type_vocab_size": 2, "initializer_range": 0.02}))
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    return {f"bert_{name}": np.asarray(value) for name, value in values.items()}


def gpt2(folder: Path) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    wte = (rng.standard_normal((V, H)) * 0.02).astype(np.float32)
    wpe = (rng.standard_normal((P, H)) * 0.01).astype(np.float32)

    class Model(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = tf.Variable(wte)
            self.wpe = tf.Variable(wpe)

    checkpoint = tf.train.Checkpoint(model=Model(), step=tf.Variable(77, dtype=tf.int64))
    checkpoint.write(str(folder / "model.ckpt"))
    return {"gpt2_wte": wte, "gpt2_wpe": wpe}


def partitioned(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(0)
        init = tf.compat.v1.truncated_normal_initializer(stddev=0.02)
        with tf.device("/cpu:0"), tf.compat.v1.variable_scope("bert/embeddings"):
            word = tf.compat.v1.get_variable("word_embeddings", [10, 4], initializer=init,
                                             partitioner=tf.compat.v1.fixed_size_partitioner(3))
        with tf.device("/cpu:1"), tf.compat.v1.variable_scope("bert/embeddings"):
            position = tf.compat.v1.get_variable("position_embeddings", [6, 4], initializer=init)
        step = tf.compat.v1.train.get_or_create_global_step()
        config = tf.compat.v1.ConfigProto(device_count={"CPU": 2})
        with tf.compat.v1.Session(graph=graph, config=config) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(step.assign(3))
            tf.compat.v1.train.Saver(sharded=True).save(session, str(folder / "model.ckpt"), write_meta_graph=False,
                                                        write_state=False)
            values = session.run({"word": tf.convert_to_tensor(word), "position": position})
    np.savez(folder.with_suffix(".npz"), **values)  # beside the folder, which holds one checkpoint


def keras3(folder: Path) -> None:
    import keras
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.layers.Input((3,), dtype="int32"), keras.layers.Embedding(12, 4),
                              keras.layers.Dense(2)])
    optimizer = keras.optimizers.Adam(0.01)
    ids = np.array([[1, 2, 3], [4, 5, 6]])
    for _ in range(2):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(ids) ** 2)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    prefix = tf.train.Checkpoint(model=model, optimizer=optimizer).write(str(folder / "ckpt"))
    reader = tf.train.load_checkpoint(prefix)
    values = {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
              if name != "_CHECKPOINTABLE_OBJECT_GRAPH"}
    np.savez(folder.with_suffix(".npz"), **{name.replace("/", "|"): value for name, value in values.items()})


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    (OUT / "bert").mkdir(parents=True)
    (OUT / "gpt2").mkdir()
    np.savez(OUT / "reference.npz", **bert(OUT / "bert"), **gpt2(OUT / "gpt2"))
    partitioned(OUT / "partitioned")
    keras3(OUT / "keras3")


if __name__ == "__main__":
    if sys.argv[1:] == ["partitioned"]:
        partitioned(OUT / "partitioned")
    elif sys.argv[1:] == ["keras3"]:
        keras3(OUT / "keras3")
    else:
        main()
