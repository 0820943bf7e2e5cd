"""Writers for the downloaded-model formats (GGUF, ONNX, Keras .h5, CTranslate2), each through the
format's own writer (gguf.GGUFWriter, onnx.helper, h5py) or, for CTranslate2, struct.pack over the
layout of ctranslate2/specs/model_spec.py. Shared by the readers' tests and the fuzz corpus."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

V, D, T = 11, 32, 7  # GGUF's quantized blocks hold 32 elements: the width is one block

BYTE_LEVEL_SENTENCES = ["The dog bites the man.", "A cat and a dog; dogs and cats bite.", "naïve café 中文 😀 x²"] * 3


def rows(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# -- GGUF -------------------------------------------------------------------------------------

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
