"""The tokenizer kinds the first corpus left out, each beside a small safetensors table, written by their real
writers: SentencePiece models trained by sentencepiece (Unigram; BPE with byte fallback; char), a Unigram
tokenizer.json whose Precompiled normalizer carries a real charsmap (the kind whose damaged charsmap made the
tokenizers library panic on every encode: round four's r01), a .tiktoken file, a WordPiece vocab.txt and a
nanoGPT meta.pkl. Adapted from round four's fuzz_uncovered_tokenizers.py; the tokenizer file is the one mutated.
The SentencePiece models are trained once per process (a second each) and copied."""

from __future__ import annotations

import base64
import functools
import json
import pickle
import random
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

WORDS = ["the", "dog", "cat", "bites", "na\u00efve", "\u4e2d\u6587", "hello", "world", "\uff46\uff55\uff4c\uff4c",
         "caf\u00e9", "\u2460", "\ufb01"]
# the SentencePiece model types and their vocabulary sizes (BPE: the 256 byte pieces and a few merges); each table
# has as many rows as its tokenizer has ids, no more: the norms pass over it costs most of an input's time
MODEL_TYPES = {"unigram": 60, "bpe": 290, "char": 40}


def table(directory: Path, rows: int, name: str = "wte.weight") -> Path:
    from safetensors.numpy import save_file
    path = directory / "model.safetensors"
    save_file({name: np.random.default_rng(0).standard_normal((rows, 8)).astype(np.float32)}, str(path))
    return path


@functools.cache
def trained() -> Path:
    """A folder of sp_<type>.model for each model type, trained on a small corpus with sentencepiece itself."""
    import sentencepiece as spm

    from embscope.quiet import native_stderr
    folder = Path(tempfile.mkdtemp(prefix="fuzz-sentencepiece-"))
    rng = random.Random(0)
    (folder / "corpus.txt").write_text("".join(" ".join(rng.choice(WORDS) for _ in range(12)) + "\n"
                                               for _ in range(3000)), encoding="utf-8")
    for model_type, size in MODEL_TYPES.items():
        with native_stderr():  # the trainer logs to fd 2 whatever minloglevel says
            spm.SentencePieceTrainer.train(input=str(folder / "corpus.txt"), model_prefix=str(folder / f"sp_{model_type}"),
                                           vocab_size=size, model_type=model_type, byte_fallback=model_type == "bpe",
                                           minloglevel=2, hard_vocab_limit=False, num_threads=1)
    return folder


def sentencepiece(model_type: str) -> Callable[[Path], tuple[Path, Path]]:
    def build(directory: Path) -> tuple[Path, Path]:
        entry = table(directory, MODEL_TYPES[model_type])
        shutil.copy(trained() / f"sp_{model_type}.model", directory / "tokenizer.model")
        return entry, directory / "tokenizer.model"
    return build


def unigram_precompiled(directory: Path) -> tuple[Path, Path]:
    """The trained Unigram model as a tokenizer.json, its normalizer sentencepiece's own charsmap."""
    from sentencepiece import sentencepiece_model_pb2 as pb
    entry = table(directory, MODEL_TYPES["unigram"])
    model = pb.ModelProto()
    model.ParseFromString((trained() / "sp_unigram.model").read_bytes())
    charsmap = base64.b64encode(model.normalizer_spec.precompiled_charsmap).decode()
    metaspace = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    doc = {"version": "1.0", "added_tokens": [], "normalizer": {"type": "Precompiled", "precompiled_charsmap": charsmap},
           "pre_tokenizer": metaspace, "decoder": metaspace,
           "model": {"type": "Unigram", "unk_id": 0, "byte_fallback": False,
                     "vocab": [[piece.piece, piece.score] for piece in model.pieces]}}
    (directory / "tokenizer.json").write_text(json.dumps(doc), encoding="utf-8")
    return entry, directory / "tokenizer.json"


def tiktoken_file(directory: Path) -> tuple[Path, Path]:
    """The 256 bytes and a few merges, one `base64 rank` line each, as tiktoken's load_tiktoken_bpe reads them."""
    entry = table(directory, 264)
    merged = [" d", "og", " dog", "th", "the", " the", "ca", " cat"]
    lines = [f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(256)]
    lines += [f"{base64.b64encode(word.encode()).decode()} {256 + i}" for i, word in enumerate(merged)]
    (directory / "cl100k_base.tiktoken").write_text("\n".join(lines) + "\n", encoding="ascii")
    return entry, directory / "cl100k_base.tiktoken"


def vocab_txt(directory: Path) -> tuple[Path, Path]:
    entry = table(directory, 59)
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "dog", "cat", "##s", "bit", "##es", "na", "##ive"]
    words += [chr(97 + i) for i in range(26)] + [f"##{chr(97 + i)}" for i in range(20)]
    (directory / "vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    return entry, directory / "vocab.txt"


def meta_pkl(directory: Path) -> tuple[Path, Path]:
    """nanoGPT's data/shakespeare_char/prepare.py: vocab_size, itos and stoi, pickled."""
    chars = sorted(set("\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"))
    entry = table(directory, len(chars), "transformer.wte.weight")
    with open(directory / "meta.pkl", "wb") as f:
        pickle.dump({"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": {c: i for i, c in enumerate(chars)}},
                    f)
    return entry, directory / "meta.pkl"


# name -> (the library it needs, or None; the builder)
TOKENIZER_SAMPLES: dict[str, tuple[str | None, Callable[[Path], tuple[Path, Path]]]] = {
    "tokenizer-sentencepiece-unigram": ("sentencepiece", sentencepiece("unigram")),
    "tokenizer-sentencepiece-bpe": ("sentencepiece", sentencepiece("bpe")),
    "tokenizer-sentencepiece-char": ("sentencepiece", sentencepiece("char")),
    "tokenizer-unigram-precompiled": ("sentencepiece", unigram_precompiled),
    "tokenizer-tiktoken": ("tiktoken", tiktoken_file),
    "tokenizer-vocab.txt": (None, vocab_txt),
    "tokenizer-meta.pkl": (None, meta_pkl),
}


def available() -> dict[str, Callable[[Path], tuple[Path, Path]]]:
    import importlib.util
    return {name: build for name, (library, build) in TOKENIZER_SAMPLES.items()
            if (library is None or importlib.util.find_spec(library) is not None)
            and importlib.util.find_spec("tokenizers") is not None}
