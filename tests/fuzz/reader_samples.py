"""Writers for the downloaded-model formats (GGUF, ONNX, Keras .h5 and .keras, CTranslate2), each through the
format's own writer (gguf.GGUFWriter, onnx.helper, h5py and zipfile as Keras 3 uses them) or, for CTranslate2, struct.pack over the
layout of ctranslate2/specs/model_spec.py. Shared by the readers' tests and the fuzz corpus."""

from __future__ import annotations

import functools
import importlib.util
import io
import json
import struct
import zipfile
from pathlib import Path

import numpy as np

V, D, T = 11, 32, 7  # GGUF's quantized blocks hold 32 elements: the width is one block

BYTE_LEVEL_SENTENCES = ["The dog bites the man.", "A cat and a dog; dogs and cats bite.", "naïve café 中文 😀 x²"] * 3


def rows(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# -- GGUF -------------------------------------------------------------------------------------

@functools.cache
def byte_level_vocabulary(vocab_size: int = 300) -> tuple[list[str], list[str]]:
    """A GPT-2 style vocabulary (tokens in the byte alphabet, in id order) and its merges, trained by
    the tokenizers library: the reference the GGUF tokenizer is checked against."""
    from tokenizers import ByteLevelBPETokenizer
    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(BYTE_LEVEL_SENTENCES, vocab_size=vocab_size, min_frequency=1,
                                special_tokens=["<|endoftext|>"])
    model = json.loads(trainer._tokenizer.to_str())["model"]
    tokens = [token for token, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1])]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return tokens, merges


def write_gguf(path: Path, tensors: dict, arch: str = "gpt2", context: int | None = T,
               tokenizer: dict | None = None) -> Path:
    """tensors: name -> float array (stored F32/F16 as its dtype) or (float32 array, ggml type name),
    quantized with gguf.quants, or (raw block bytes as uint8 array, type name) stored as they are."""
    import gguf
    writer = gguf.GGUFWriter(str(path), arch)
    if context is not None:
        writer.add_context_length(context)
    for key, value in (tokenizer or {}).items():
        getattr(writer, key)(value)
    for name, value in tensors.items():
        if isinstance(value, tuple):
            array, kind = value
            qtype = gguf.GGMLQuantizationType[kind]
            data = array if array.dtype == np.uint8 else gguf.quants.quantize(array, qtype)
            writer.add_tensor(name, data, raw_dtype=qtype)
        else:
            writer.add_tensor(name, value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def gguf_gpt2(directory: Path) -> tuple[Path, Path]:
    """A small GPT-2 GGUF: a Q8_0 token table, an F16 position table, a byte-level tokenizer."""
    tokens, merges = byte_level_vocabulary()
    path = write_gguf(directory / "model.gguf", {
        "token_embd.weight": (rows((len(tokens), D), 1), "Q8_0"),
        "position_embd.weight": rows((T, D), 2).astype(np.float16),
        "output_norm.weight": np.ones(D, np.float32),
    }, tokenizer={"add_tokenizer_model": "gpt2", "add_token_list": tokens, "add_token_merges": merges,
                  "add_token_types": [3 if t == "<|endoftext|>" else 1 for t in tokens]})
    return path, path


def gguf_llama(directory: Path) -> tuple[Path, Path]:
    """A Llama-style GGUF: a Q4_0 token table, a Q8_0 output head, a SentencePiece vocabulary with byte tokens."""
    pieces = ["\u2581dog", "\u2581do", "\u2581d", "\u2581", "d", "o", "g", "s", "\u2581cat", "c", "a", "t"]
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + pieces
    types = [2, 3, 3] + [6] * 256 + [1] * len(pieces)
    scores = [0.0] * 259 + [-float(i) for i in range(len(pieces))]
    path = write_gguf(directory / "llama.gguf", {
        "token_embd.weight": (rows((len(tokens), D), 1), "Q4_0"),
        "output.weight": (rows((len(tokens), D), 2), "Q8_0"),
    }, arch="llama", context=T, tokenizer={"add_tokenizer_model": "llama", "add_token_list": tokens,
                                           "add_token_scores": scores, "add_token_types": types,
                                           "add_unk_token_id": 0, "add_bos_token_id": 1})
    return path, path


# -- CTranslate2 ------------------------------------------------------------------------------

CT2_TYPE_IDS = {"float32": 0, "int8": 1, "int16": 2, "int32": 3, "float16": 4}


def ct2_string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack("<H", len(raw) + 1) + raw + b"\0"


def write_ctranslate2(path: Path, variables: dict[str, np.ndarray], aliases: dict[str, str] | None = None,
                      spec: str = "WhisperSpec", version: int = 6) -> Path:
    """model.bin as CTranslate2's ModelSpec._serialize writes it (version 6), or versions 1-5."""
    out = struct.pack("<I", version)
    if version >= 2:
        out += ct2_string(spec) + struct.pack("<I", 3)
    out += struct.pack("<I", len(variables))
    for name, value in sorted(variables.items()):
        out += ct2_string(name) + struct.pack("<B", value.ndim) + b"".join(struct.pack("<I", d) for d in value.shape)
        if version >= 4:
            out += struct.pack("<BI", CT2_TYPE_IDS[value.dtype.name], value.nbytes)
        else:
            out += struct.pack("<BI", value.itemsize, value.size)
        out += value.tobytes()
    if version >= 3:
        out += struct.pack("<I", len(aliases or {}))
        for alias, target in (aliases or {}).items():
            out += ct2_string(alias) + ct2_string(target)
    path.write_bytes(out)
    return path


def whisper_variables(vocab: int = V, dim: int = D) -> dict[str, np.ndarray]:
    """The embedding variables of a CTranslate2 Whisper model, fp16 as faster-whisper ships them,
    with the encoder's fixed sinusoid beside the learned decoder positions."""
    positions = np.arange(12)[:, None] / 10000 ** (np.arange(dim // 2)[None, :] / (dim // 2 - 1))
    return {
        "decoder/embeddings/weight": rows((vocab, dim), 3).astype(np.float16),
        "decoder/position_encodings/encodings": rows((T, dim), 4).astype(np.float16),
        "encoder/position_encodings/encodings": np.hstack([np.sin(positions), np.cos(positions)]).astype(np.float16),
        "decoder/layer_norm/gamma": np.ones(dim, np.float16),
        "decoder/scale_embeddings": np.array(0, np.int8),
    }


def ctranslate2_whisper(directory: Path) -> tuple[Path, Path]:
    path = write_ctranslate2(directory / "model.bin", whisper_variables(),
                             aliases={"decoder/projection/weight": "decoder/embeddings/weight"})
    tokens = ["!", "dog", "\u0120dog", "cat", "\u0120cat", "<|endoftext|>"] + [f"t{i}" for i in range(V - 6)]
    (directory / "vocabulary.json").write_text(json.dumps(tokens))
    return path, path


# -- ONNX -------------------------------------------------------------------------------------

def per_row_int8(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 with one scale per row, as onnxruntime quantizes a Gather's table per channel."""
    scale = np.abs(table).max(axis=1) / 127
    return np.round(table / scale[:, None]).astype(np.int8), scale.astype(np.float32)


def write_onnx(path: Path, initializers: dict[str, np.ndarray], nodes: list | None = None,
               external: str | None = None) -> Path:
    """A model holding `initializers` (numpy_helper.from_array), all saved as external data in the file
    named `external` when given, around a graph that is never run."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    tensors = [numpy_helper.from_array(value, name) for name, value in initializers.items()]
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [1])
    graph = helper.make_graph(nodes or [], "embscope-test", [ids], [ids], tensors)
    model = helper.make_model(graph, producer_name="embscope-tests", opset_imports=[helper.make_opsetid("", 21)])
    if external:
        onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                        location=external, size_threshold=0)
    else:
        onnx.save_model(model, str(path))
    return path


def onnx_bert_int8(directory: Path, external: bool = False) -> tuple[Path, Path]:
    """A sentence-transformers style export: an int8 word table (X_quantized + X_scale + X_zero_point)
    and a float position table, optionally all in an external data file (then that file is the target)."""
    q, scale = per_row_int8(rows((V, D), 5))
    initializers = {"embeddings.word_embeddings.weight_quantized": q,
                    "embeddings.word_embeddings.weight_scale": scale,
                    "embeddings.word_embeddings.weight_zero_point": np.zeros(V, np.int8),
                    "embeddings.position_embeddings.weight": rows((T, D), 6),
                    "embeddings.LayerNorm.weight": np.ones(D, np.float32)}
    path = write_onnx(directory / "model.onnx", initializers, external="model.onnx_data" if external else None)
    return path, directory / "model.onnx_data" if external else path


# -- Keras HDF5 -------------------------------------------------------------------------------

def write_h5(path: Path, datasets: dict[str, np.ndarray], compressed: tuple[str, ...] = ()) -> Path:
    """Datasets at their HDF5 paths, as Keras' save_weights lays them out; those named in `compressed`
    chunked and gzip-compressed (so they cannot be memory-mapped)."""
    import h5py
    with h5py.File(path, "w") as f:
        f.attrs["keras_version"] = "2.15.0"
        f.attrs["backend"] = "tensorflow"
        for name, value in datasets.items():
            f.create_dataset(name, data=value, **({"compression": "gzip"} if name in compressed else {}))
    return path


def keras_bert(directory: Path, compressed: bool = False) -> tuple[Path, Path]:
    """Hugging Face's tf_model.h5 layout for BERT: word_embeddings/weight:0, position_embeddings/embeddings:0."""
    prefix = "bert/tf_bert_model/bert/embeddings/"
    word = prefix + "word_embeddings/weight:0"
    path = write_h5(directory / "tf_model.h5", {
        word: rows((V, D), 7),
        prefix + "position_embeddings/embeddings:0": rows((T, D), 8),
        prefix + "LayerNorm/gamma:0": np.ones(D, np.float32),
    }, compressed=(word,) if compressed else ())
    return path, path


# -- Keras 3 .keras (model.save's zip) --------------------------------------------------------------

KERAS_UNIFORM = {"module": "keras.initializers", "class_name": "RandomUniform",
                 "config": {"seed": None, "minval": -0.05, "maxval": 0.05}, "registered_name": None}


def keras_layer_config(name: str, layer_class: str, weights: list[np.ndarray]) -> dict:
    """A layer's entry in config.json's `layers`, as Keras 3.15 serializes a functional model's layers."""
    config: dict = {"name": name, "trainable": True}
    if layer_class in ("Embedding", "ReversibleEmbedding"):
        config |= {"input_dim": int(weights[0].shape[0]), "output_dim": int(weights[0].shape[1]),
                   "embeddings_initializer": KERAS_UNIFORM}
    return {"module": "keras.layers", "class_name": layer_class, "config": config, "registered_name": None,
            "name": name, "inbound_nodes": []}


def keras_weights_h5(layers: list[tuple[str, str, str, list[np.ndarray]]]) -> bytes:
    """model.weights.h5 as Keras 3's saving_lib writes it (into memory, then into the zip): each layer's weights
    as <path>/vars/<i>, the layer's own name on its vars group, the model's own (empty) vars group at the top."""
    import h5py
    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as f:
        for path, name, _, weights in layers:
            group = f.create_group(f"{path}/vars")
            group.attrs["name"] = name
            for i, value in enumerate(weights):
                group.create_dataset(str(i), data=value)
        f.create_group("vars").attrs["name"] = "functional"
    return buffer.getvalue()


def write_keras_zip(path: Path, layers: list[tuple[str, str, str, list[np.ndarray]]],
                    compression: int = zipfile.ZIP_STORED, version: str = "3.15.1") -> Path:
    """A .keras file laid out as Keras 3.15's model.save writes one (saving_lib._save_model_to_fileobj): metadata.json,
    config.json, model.weights.h5, in that order, stored unless `compression` says. `layers`: (HDF5 path of the
    layer, its own name, its class, its weights)."""
    config = {"module": "keras.src.models.functional", "class_name": "Functional", "registered_name": "Functional",
              "config": {"name": "functional", "trainable": True,
                         "layers": [keras_layer_config(name, cls, weights) for _, name, cls, weights in layers]}}
    with zipfile.ZipFile(path, "w", compression=compression) as zf:
        zf.writestr("metadata.json", json.dumps({"keras_version": version, "date_saved": "2026-12-07@23:00:00"}))
        zf.writestr("config.json", json.dumps(config))
        zf.writestr("model.weights.h5", keras_weights_h5(layers))
    return path


def keras_zip_model(directory: Path) -> tuple[Path, Path]:
    """Two Embeddings as a functional model orders them, the position one first (layers/embedding), and a Dense."""
    path = write_keras_zip(directory / "model.keras", [
        ("layers/embedding", "pos", "Embedding", [rows((T, D), 8)]),
        ("layers/embedding_1", "tok", "Embedding", [rows((V, D), 7)]),
        ("layers/dense", "head", "Dense", [rows((D, V), 9), rows((V,), 10)])])
    return path, path


KERAS_HUB_VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "dog", "bites", "##s", "man", "cat", "."]
KERAS_HUB_BPE = ({"<|endoftext|>": 0, "d": 1, "o": 2, "g": 3, "\u0120": 4, "do": 5, "dog": 6, "\u0120dog": 7, "t": 8,
                  "h": 9, "e": 10}, "#version: 0.2\nd o\ndo g\n\u0120 dog\n")


def keras_zip_assets(directory: Path, kind: str) -> tuple[Path, Path]:
    """keras_zip_model's file as a keras-hub task saves one: config.json names its tokenizer under the preprocessor,
    whose assets (formats.keras_assets) follow the weights: WordPiece's vocabulary.txt or BytePair's vocabulary.json
    and merges.txt, V entries."""
    entry, _ = keras_zip_model(directory)
    with zipfile.ZipFile(entry) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    config = json.loads(members["config.json"])
    tokenizer = "BertTokenizer" if kind == "wordpiece" else "GPT2Tokenizer"
    config["config"]["preprocessor"] = {"class_name": "XPreprocessor", "config": {"tokenizer": {
        "class_name": tokenizer, "config": {"name": "tokenizer", "lowercase": True, "oov_token": "[UNK]"}}}}
    members["config.json"] = json.dumps(config).encode()
    folder = "assets/preprocessor/tokenizer/"
    if kind == "wordpiece":
        members[folder + "vocabulary.txt"] = "\n".join(KERAS_HUB_VOCABULARY).encode() + b"\n"
    else:
        members[folder + "vocabulary.json"] = json.dumps(KERAS_HUB_BPE[0]).encode()
        members[folder + "merges.txt"] = KERAS_HUB_BPE[1].encode()
    with zipfile.ZipFile(entry, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return entry, entry


def onnx_external_model(directory: Path) -> tuple[Path, Path]:
    """The external-data export with model.onnx itself (locations, offsets, lengths) as the target."""
    entry, _ = onnx_bert_int8(directory, external=True)
    return entry, entry


def ctranslate2_vocabulary(directory: Path) -> tuple[Path, Path]:
    entry, _ = ctranslate2_whisper(directory)
    return entry, directory / "vocabulary.json"


# fuzz samples (tests/fuzz/corpus.py registers them): name -> (library needed, builder)
FUZZ_SAMPLES = {
    "gguf": ("gguf", gguf_gpt2),
    "gguf-llama": ("gguf", gguf_llama),
    "onnx-int8": ("onnx", onnx_bert_int8),
    "onnx-external-data": ("onnx", lambda d: onnx_bert_int8(d, external=True)),
    "onnx-external-model": ("onnx", onnx_external_model),
    "keras-h5": ("h5py", keras_bert),
    "keras-h5-compressed": ("h5py", lambda d: keras_bert(d, compressed=True)),
    "keras-zip": ("h5py", keras_zip_model),
    "keras-zip-wordpiece": ("h5py", lambda d: keras_zip_assets(d, "wordpiece")),
    "keras-zip-bpe": ("h5py", lambda d: keras_zip_assets(d, "bpe")),
    "ctranslate2": (None, ctranslate2_whisper),
    "ctranslate2-vocabulary": (None, ctranslate2_vocabulary),
}


def available_fuzz_samples() -> dict:
    """The samples whose library is installed (CI installs them all)."""
    return {name: build for name, (library, build) in FUZZ_SAMPLES.items()
            if library is None or importlib.util.find_spec(library) is not None}
