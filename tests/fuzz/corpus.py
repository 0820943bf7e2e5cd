"""Small valid checkpoints of every format, written with the real writers, and the mutations
the fuzz tests apply to them. Shared by tests/test_fuzz.py and tests/fuzz/run_fuzz.py."""

from __future__ import annotations

import json
import random
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

V, D, T = 11, 4, 7  # token rows, width, position rows: small enough to fuzz thousands of times


def tables(dtype=np.float32) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "transformer.wte.weight": rng.standard_normal((V, D)).astype(dtype),
        "transformer.wpe.weight": rng.standard_normal((T, D)).astype(dtype),
        "transformer.ln_f.weight": np.ones(D, dtype=dtype),
    }


@dataclass(frozen=True)
class Sample:
    """A valid file set: `entry` is what is opened, `target` the file that gets mutated."""

    name: str
    build: Callable[[Path], tuple[Path, Path]]  # directory -> (entry, target)
    after: Callable[[Path, Path], None] | None = None  # (entry, mutated target): rebuild the entry from it


def safetensors_single(directory: Path, dtype=np.float32) -> tuple[Path, Path]:
    from safetensors.numpy import save_file
    path = directory / "model.safetensors"
    save_file(tables(dtype), str(path), metadata={"format": "np"})
    return path, path


def safetensors_sharded(directory: Path, mutate_index: bool) -> tuple[Path, Path]:
    from safetensors.numpy import save_file
    arrays = tables()
    names = list(arrays)
    save_file({n: arrays[n] for n in names[:1]}, str(directory / "model-00001-of-00002.safetensors"))
    save_file({n: arrays[n] for n in names[1:]}, str(directory / "model-00002-of-00002.safetensors"))
    weight_map = {n: f"model-0000{1 if i == 0 else 2}-of-00002.safetensors" for i, n in enumerate(names)}
    index = directory / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    (directory / "config.json").write_text(json.dumps({"model_type": "gpt2", "vocab_size": V, "n_positions": T}))
    return index, index if mutate_index else directory / "model-00002-of-00002.safetensors"


def npy(directory: Path) -> tuple[Path, Path]:
    path = directory / "token_emb.npy"
    np.save(path, tables()["transformer.wte.weight"])
    return path, path


def npz(directory: Path, compressed: bool) -> tuple[Path, Path]:
    path = directory / "params.npz"
    arrays = {"token_emb": tables()["transformer.wte.weight"], "pos_emb": tables()["transformer.wpe.weight"],
              "step": np.array(12)}
    (np.savez_compressed if compressed else np.savez)(path, **arrays)
    return path, path


def config_json(directory: Path) -> tuple[Path, Path]:
    """A safetensors directory whose config.json is what gets mutated."""
    entry, _ = safetensors_single(directory)
    config = directory / "config.json"
    config.write_text(json.dumps({"model_type": "gpt2", "vocab_size": V, "n_positions": T,
                                  "tie_word_embeddings": True}))
    return entry, config


def andrea(directory: Path, mutate_config: bool) -> tuple[Path, Path]:
    """An ANDREA flat dump (int32 step, int32 n_params, float32 weights, Adam moments) and its config."""
    layers = 1
    n = (V + T) * D + layers * (4 * D * D + 2 * D * 4 * D)  # tied: the layout formula of the reader
    weights = np.random.default_rng(1).standard_normal(3 * n).astype("<f4")
    path = directory / "model.bin"
    path.write_bytes(struct.pack("<ii", 1200, n) + weights.tobytes())
    config = directory / "config.json"
    config.write_text(json.dumps({"vocab_size": V, "n_embd": D, "block_size": T, "n_layer": layers,
                                  "tie_embeddings": True}))
    return path, config if mutate_config else path


def nlm_pickle(directory: Path) -> tuple[Path, Path]:
    """The nlm layout: a pickled dict with a "params" dict of numpy arrays and a step counter."""
    import pickle
    arrays = tables()
    doc = {"params": {"token_emb": arrays["transformer.wte.weight"], "pos_emb": arrays["transformer.wpe.weight"],
                      "ln_final": {"g": arrays["transformer.ln_f.weight"]}}, "step": 300, "config": {"d_model": D}}
    path = directory / "model.pkl"
    path.write_bytes(pickle.dumps(doc, protocol=4))
    return path, path


def npy_object(directory: Path) -> tuple[Path, Path]:
    """A params dict saved with np.save(allow_pickle=True): a 0-d object array."""
    arrays = tables()
    path = directory / "params.npy"
    np.save(path, {"token_emb": arrays["transformer.wte.weight"], "pos_emb": arrays["transformer.wpe.weight"]},
            allow_pickle=True)
    return path, path


def pytorch(directory: Path, legacy: bool) -> tuple[Path, Path]:
    """A nanoGPT-style torch.save checkpoint: {"model": state dict, "iter_num", "model_args"}."""
    import torch
    state = {f"_orig_mod.{k}": torch.from_numpy(v) for k, v in tables().items()}
    state["_orig_mod.lm_head.weight"] = state["_orig_mod.transformer.wte.weight"]  # tied: one storage
    path = directory / "ckpt.pt"
    torch.save({"model": state, "iter_num": 50, "model_args": {"vocab_size": V, "block_size": T, "n_embd": D}},
               path, _use_new_zipfile_serialization=not legacy)
    return path, path


def pytorch_whole(directory: Path) -> tuple[Path, Path]:
    """torch.save(model) of a whole model (torch.nn classes only, so the sample needs no class of ours): each module
    pickled as NEWOBJ and BUILD of its attributes, the head tied."""
    import torch
    from torch import nn
    arrays = tables()
    model = nn.ModuleDict({"wte": nn.Embedding(V, D), "wpe": nn.Embedding(T, D), "lm_head": nn.Linear(D, V, bias=False)})
    with torch.no_grad():
        model["wte"].weight.copy_(torch.from_numpy(arrays["transformer.wte.weight"]))
        model["wpe"].weight.copy_(torch.from_numpy(arrays["transformer.wpe.weight"]))
    model["lm_head"].weight = model["wte"].weight
    path = directory / "model.pt"
    torch.save(model, path)
    return path, path


def tf_checkpoint(directory: Path, folder: str = "bert", prefix: str = "bert_model.ckpt") -> tuple[Path, Path]:
    """A TensorFlow checkpoint TensorFlow wrote (tests/data/tf_checkpoint/bert, or partitioned/: a variable in three
    slices over three shards): its index is what is mutated."""
    import shutil
    for path in (Path(__file__).parents[1] / "data" / "tf_checkpoint" / folder).iterdir():
        shutil.copy(path, directory / path.name)
    index = directory / f"{prefix}.index"
    return index, index


def zip_member(build: Callable[[Path], tuple[Path, Path]], member_suffix: str):
    """A zip-based sample whose member (data.pkl, an .npy) is mutated on its own, then written back
    with a correct CRC: the damage reaches the parser behind the zip layer."""
    def extract(directory: Path) -> tuple[Path, Path]:
        import zipfile
        entry, _ = build(directory)
        with zipfile.ZipFile(entry) as zf:
            name = next(n for n in zf.namelist() if n.endswith(member_suffix))
            raw = directory / "member.raw"
            raw.write_bytes(zf.read(name))
        (directory / "member.name").write_text(name)
        return entry, raw

    def repack(entry: Path, raw: Path) -> None:
        import zipfile
        name = (raw.parent / "member.name").read_text()
        with zipfile.ZipFile(entry) as zf:
            members = [(info, zf.read(info)) for info in zf.infolist()]
        with zipfile.ZipFile(entry, "w") as zf:
            for info, data in members:
                zf.writestr(info, raw.read_bytes() if info.filename == name else data)
        raw.unlink()
        (raw.parent / "member.name").unlink()
    return extract, repack


SENTENCES = ["The dog bites the man.", "A cat and a dog; dogs and cats bite.", "naïve café 中文 😀 x²"] * 3
MINBPE_LINES = ["minbpe v1", r"\w+|\s|[^\w\s]+", "1", "<|endoftext|> 300",
                "100 111", "256 103", "98 105", "116 101", "258 259", "32 257"]


def tokenizer_beside(kind: str, target: str = ""):
    """A safetensors checkpoint with a tokenizer of `kind` beside it; the tokenizer file is mutated."""
    def build(directory: Path) -> tuple[Path, Path]:
        entry, _ = safetensors_single(directory)
        if kind == "huggingface":
            from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
            hf = Tokenizer(models.BPE())
            hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
            hf.decoder = decoders.ByteLevel()
            hf.train_from_iterator(SENTENCES, trainers.BpeTrainer(
                vocab_size=280, special_tokens=["<s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
            hf.save(str(directory / "tokenizer.json"))
            return entry, directory / "tokenizer.json"
        if kind == "gpt2":
            from tokenizers import ByteLevelBPETokenizer
            trainer = ByteLevelBPETokenizer()
            trainer.train_from_iterator(SENTENCES, vocab_size=280, min_frequency=1, special_tokens=["<|endoftext|>"])
            trainer.save_model(str(directory))
            return entry, directory / target
        if kind == "minbpe":  # the file minbpe's Tokenizer.save writes: merge i makes id 256 + i
            (directory / "nlm.model").write_text("\n".join(MINBPE_LINES) + "\n", encoding="utf-8")
            return entry, directory / "nlm.model"
        if kind == "harris":
            (directory / "harris_segments.json").write_text(
                json.dumps(["dog", " dog", "do", "bit", "bites", "é"], ensure_ascii=False), encoding="utf-8")
            return entry, directory / "harris_segments.json"
        raise ValueError(kind)
    return build


SAMPLES: dict[str, Sample] = {s.name: s for s in (
    Sample("safetensors", safetensors_single),
    Sample("safetensors-f16", lambda d: safetensors_single(d, np.float16)),
    Sample("safetensors-index", lambda d: safetensors_sharded(d, True)),
    Sample("safetensors-shard", lambda d: safetensors_sharded(d, False)),
    Sample("safetensors-config", config_json),
    Sample("npy", npy),
    Sample("npz", lambda d: npz(d, False)),
    Sample("npz-compressed", lambda d: npz(d, True)),
    Sample("andrea", lambda d: andrea(d, False)),
    Sample("andrea-config", lambda d: andrea(d, True)),
    Sample("nlm-pickle", nlm_pickle),
    Sample("npy-object", npy_object),
    Sample("pytorch", lambda d: pytorch(d, False)),
    Sample("pytorch-legacy", lambda d: pytorch(d, True)),
    Sample("pytorch-data.pkl", *zip_member(lambda d: pytorch(d, False), "/data.pkl")),
    Sample("pytorch-whole-data.pkl", *zip_member(pytorch_whole, "/data.pkl")),
    Sample("tf-checkpoint", tf_checkpoint),
    Sample("tf-checkpoint-partitioned", lambda d: tf_checkpoint(d, "partitioned", "model.ckpt")),
    Sample("npz-member", *zip_member(lambda d: npz(d, False), "token_emb.npy")),
    Sample("tokenizer-huggingface", tokenizer_beside("huggingface")),
    Sample("tokenizer-gpt2-vocab", tokenizer_beside("gpt2", "vocab.json")),
    Sample("tokenizer-gpt2-merges", tokenizer_beside("gpt2", "merges.txt")),
    Sample("tokenizer-minbpe", tokenizer_beside("minbpe")),
    Sample("tokenizer-harris", tokenizer_beside("harris")),
)}


def register(sample: Sample) -> None:
    """Readers that land later add their valid samples here (see the bottom of this file)."""
    SAMPLES[sample.name] = sample


from reader_samples import available_fuzz_samples

for _name, _build in available_fuzz_samples().items():
    register(Sample(_name, _build))
if "keras-zip" in SAMPLES:  # the .keras zip's HDF5 member mutated on its own, behind a zip layer that stays valid
    register(Sample("keras-zip-weights", *zip_member(SAMPLES["keras-zip"].build, "model.weights.h5")))
if "keras-zip-wordpiece" in SAMPLES:  # the tokenizer's assets in the zip (formats.keras_assets), each mutated alone
    register(Sample("keras-zip-vocabulary.txt", *zip_member(SAMPLES["keras-zip-wordpiece"].build, "vocabulary.txt")))
    register(Sample("keras-zip-vocabulary.json", *zip_member(SAMPLES["keras-zip-bpe"].build, "vocabulary.json")))
    register(Sample("keras-zip-merges.txt", *zip_member(SAMPLES["keras-zip-bpe"].build, "merges.txt")))

from tokenizer_samples import available as available_tokenizer_samples

for _name, _build in available_tokenizer_samples().items():
    register(Sample(_name, _build))


# -- mutations -------------------------------------------------------------------------------

INTERESTING_INTS = (0, 1, -1, 255, 2**15, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1, 2**64 - 1, -2**31)
INTERESTING_NUMBERS = ("0", "-1", "1e308", "-0", "4294967296", "18446744073709551616", "9" * 5000,
                       "3.5", "null", "true", '"x"', "[]", "{}", "NaN", "Infinity")
INT_PACKS = ("<b", "<B", "<h", "<H", "<i", "<I", "<q", "<Q")


def bit_flip(data: bytearray, rng: random.Random) -> None:
    if data:
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8)


def truncate(data: bytearray, rng: random.Random) -> None:
    del data[rng.randrange(len(data) + 1):]


def insert_bytes(data: bytearray, rng: random.Random) -> None:
    i = rng.randrange(len(data) + 1)
    data[i:i] = bytes(rng.randrange(256) for _ in range(rng.choice((1, 2, 4, 8, 64))))


def delete_range(data: bytearray, rng: random.Random) -> None:
    if data:
        i = rng.randrange(len(data))
        del data[i:i + rng.choice((1, 2, 4, 8, 64))]


def overwrite_int(data: bytearray, rng: random.Random) -> None:
    """A header field rewritten in binary: an interesting value packed over any position."""
    fmt = rng.choice(INT_PACKS)
    size = struct.calcsize(fmt)
    if len(data) < size:
        return
    lo, hi = (0, 2 ** (8 * size) - 1) if fmt[1].isupper() else (-2 ** (8 * size - 1), 2 ** (8 * size - 1) - 1)
    value = min(max(rng.choice(INTERESTING_INTS), lo), hi)
    i = rng.randrange(len(data) - size + 1)
    data[i:i + size] = struct.pack(fmt, value)


def rewrite_number(data: bytearray, rng: random.Random) -> None:
    """A header field rewritten in text: one number of a JSON or .npy header replaced."""
    window = bytes(data[:65536])
    spots = [m.span() for m in re.finditer(rb"-?\d+", window)]
    if spots:
        start, end = rng.choice(spots)
        data[start:end] = rng.choice(INTERESTING_NUMBERS).encode()


def rewrite_string(data: bytearray, rng: random.Random) -> None:
    """A quoted name or dtype in a text header replaced by something hostile."""
    window = bytes(data[:65536])
    spots = [m.span() for m in re.finditer(rb"'[^'\n]{0,40}'|\"[^\"\n]{0,40}\"", window)]
    if spots:
        start, end = rng.choice(spots)
        data[start:end] = rng.choice((b'"\\u001b[2J"', b'"[bold red]x[/]"', b'"\\udcff"', b"'<f16'", b"'|O'",
                                      b'"F8_E4M3"', b'"../../etc/passwd"', b'""', b"'<c8'", b"'V8'",
                                      b"[]", b'{"a": []}', b"null", b"1e400"))


def fix_safetensors_length(data: bytearray) -> None:
    """After a text rewrite, a safetensors header length made to agree again with the JSON object
    that follows it (up to its matching brace), so the mutation reaches the parser behind the check."""
    if len(data) < 9 or data[8:9] != b"{":
        return
    depth = 0
    for i in range(8, len(data)):
        depth += (data[i] == ord("{")) - (data[i] == ord("}"))
        if depth == 0:
            data[0:8] = struct.pack("<Q", i - 7)
            return


MUTATIONS = (bit_flip, truncate, insert_bytes, delete_range, overwrite_int, rewrite_number, rewrite_string)


def mutate(data: bytes, rng: random.Random, count: int) -> bytes:
    out = bytearray(data)
    for _ in range(count):
        rng.choice(MUTATIONS)(out, rng)
    if rng.random() < 0.5:
        fix_safetensors_length(out)
    return bytes(out)


def build_mutant(sample: Sample, directory: Path, seed: int, count: int) -> Path:
    """Write the sample into `directory`, mutate its target file in place, return the entry path."""
    entry, target = sample.build(directory)
    rng = random.Random(seed)
    target.write_bytes(mutate(target.read_bytes(), rng, count))
    if sample.after is not None:
        sample.after(entry, target)
    return entry
