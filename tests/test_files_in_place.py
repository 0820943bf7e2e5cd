"""Every layout embscope reads (each format with the tokenizer and config files its writers put beside it),
with a FIFO, then a directory, put in place of each of its files in turn: every run ends within seconds,
with an answer or one line. The intact layout is answered first, and embscope.core.files must have recorded
every one of its files as read (so each replaced name is one embscope really opens).

The runs are made in one child process (the CLI in-process, a watchdog on each): a run that blocks on a
FIFO ends the child with a traceback naming the case, rather than hanging the suite."""

from __future__ import annotations

import base64
import io
import json
import os
import pickle
import shutil
import signal
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import corpus
import numpy as np
import pytest
import reader_samples
from conftest import source_nodes

SAMPLES = Path(__file__).resolve().parent.parent / "sample_checkpoints"
CASE_SECONDS = 30  # a shared, busy machine's worst; a blocked open never ends
SENTENCES = ["The dog bites the man.", "A cat and a dog; dogs and cats bite.", "the doghouse of the cat"] * 20
WORDS = ["dog", "cat"]
V, D, T = 300, 8, 16
SENTENCEPIECE_IDS = 60

CHILD = r"""
import faulthandler, json, sys
from typer.testing import CliRunner
from embscope.core import files
from embscope.cli import app
cases, seconds = json.load(open(sys.argv[1])), int(sys.argv[2])
for case in cases:
    print(json.dumps({"start": case["name"]}), flush=True)
    faulthandler.dump_traceback_later(seconds, exit=True)
    with files.reading(files.ReadLog()) as log:  # the command's run is inside this one: its reads are ours too
        result = CliRunner().invoke(app, case["args"])
    faulthandler.cancel_dump_traceback_later()
    escaped = None if result.exception is None or isinstance(result.exception, SystemExit) else repr(result.exception)
    print(json.dumps({"name": case["name"], "code": result.exit_code, "stderr": result.stderr,
                      "exception": escaped, "read": log.paths()}), flush=True)
"""


def table(rows: int = V, dim: int = D, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)


def gpt2_config(directory: Path, **extra: object) -> None:
    (directory / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_positions": T, **extra}))


def wordpiece_files(directory: Path) -> None:
    """A BERT vocab.txt of 11 lines (the ONNX and Keras samples' 11 rows) and its tokenizer_config.json."""
    lines = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "dog", "cat", "the", "a", "##s", "bite"]
    (directory / "vocab.txt").write_text("\n".join(lines) + "\n")
    (directory / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True, "unk_token": "[UNK]"}))


def copied(*names: str, sample: str) -> Callable[[Path], Path]:
    """Files of a bundled sample (the real writers' files), with a config.json where the sample has none."""
    def build(directory: Path) -> Path:
        for name in names:
            shutil.copy(SAMPLES / sample / name, directory / name)
        if not (directory / "config.json").exists():
            gpt2_config(directory)
        return directory / names[0]
    return build


def andrea_harris(directory: Path) -> Path:
    """An ANDREA dump, its training config and a second model JSON file, and the Harris segment tokenizer."""
    layers = 1
    n = (V + T) * D + layers * (4 * D * D + 2 * D * 4 * D)
    weights = np.random.default_rng(1).standard_normal(n).astype("<f4")
    (directory / "model.bin").write_bytes(struct.pack("<ii", 40, n) + weights.tobytes())
    (directory / "config.json").write_text(json.dumps({"vocab_size": V, "n_embd": D, "block_size": T}))
    (directory / "model.json").write_text(json.dumps({"n_layer": layers, "tie_embeddings": True}))
    (directory / "harris_segments.json").write_text(json.dumps(["dog", "cat", " dog", " cat"]))
    return directory / "model.bin"


def nanogpt_chars(directory: Path) -> Path:
    import torch
    chars = sorted(set("".join(SENTENCES)))
    state = {"transformer.wte.weight": torch.from_numpy(table(len(chars))),
             "transformer.wpe.weight": torch.from_numpy(table(T, seed=1))}
    torch.save({"model": state, "iter_num": 5, "model_args": {"vocab_size": len(chars), "block_size": T}},
               directory / "ckpt.pt")
    meta = {"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": {c: i for i, c in enumerate(chars)}}
    (directory / "meta.pkl").write_bytes(pickle.dumps(meta))
    return directory / "ckpt.pt"


def sharded(directory: Path) -> Path:
    """The bundled Hugging Face sample split into two shards, with its index, config and tokenizer.json."""
    from safetensors.numpy import load_file, save_file
    tensors = load_file(SAMPLES / "hf" / "model.safetensors")
    names = sorted(tensors)
    halves = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    for shard, held in halves.items():
        save_file({name: tensors[name] for name in held}, str(directory / shard))
    weight_map = {name: shard for shard, held in halves.items() for name in held}
    (directory / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(SAMPLES / "hf" / name, directory / name)
    return directory / "model.safetensors.index.json"


def sharded_bin(directory: Path) -> Path:
    """pytorch_model.bin.index.json over two torch.save shards (save_pretrained with safe_serialization=False)."""
    import torch
    shards = {"transformer.wte.weight": "pytorch_model-00001-of-00002.bin",
              "transformer.wpe.weight": "pytorch_model-00002-of-00002.bin"}
    values = {"transformer.wte.weight": table(), "transformer.wpe.weight": table(T, seed=1)}
    for name, shard in shards.items():
        torch.save({name: torch.from_numpy(values[name])}, directory / shard)
    (directory / "pytorch_model.bin.index.json").write_text(json.dumps({"metadata": {}, "weight_map": shards}))
    gpt2_config(directory)
    return directory / "pytorch_model.bin.index.json"


def gguf(directory: Path) -> Path:
    entry, _ = reader_samples.gguf_gpt2(directory)
    gpt2_config(directory)
    return entry


def onnx_external(directory: Path) -> Path:
    entry, _ = reader_samples.onnx_bert_int8(directory, external=True)
    wordpiece_files(directory)
    (directory / "config.json").write_text(json.dumps({"model_type": "bert"}))
    return entry


def ctranslate2(directory: Path) -> Path:
    """model.bin with vocabulary.txt (a hang once: a FIFO named config.json beside them) and config.json."""
    entry = reader_samples.write_ctranslate2(directory / "model.bin", reader_samples.whisper_variables())
    tokens = ["!", "dog", "\u0120dog", "cat", "\u0120cat", "<|endoftext|>"] + [f"t{i}" for i in range(5)]
    (directory / "vocabulary.txt").write_text("\n".join(tokens) + "\n")
    (directory / "config.json").write_text(json.dumps({"unk_token": "<|endoftext|>", "bos_token": "<|endoftext|>"}))
    return entry


def keras(directory: Path) -> Path:
    entry, _ = reader_samples.keras_bert(directory)
    wordpiece_files(directory)
    (directory / "config.json").write_text(json.dumps({"model_type": "bert"}))
    return entry


def safetensors_table(directory: Path, rows: int = V) -> Path:
    from safetensors.numpy import save_file
    save_file({"transformer.wte.weight": table(rows), "transformer.wpe.weight": table(T, seed=1)},
              str(directory / "model.safetensors"))
    gpt2_config(directory)
    return directory / "model.safetensors"


def npz_gpt2_bpe(directory: Path) -> Path:
    from tokenizers import ByteLevelBPETokenizer
    np.savez(directory / "params.npz", token_emb=table(), pos_emb=table(T, seed=1))
    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(SENTENCES, vocab_size=280, min_frequency=1, special_tokens=["<|endoftext|>"])
    trainer.save_model(str(directory))  # vocab.json and merges.txt
    return directory / "params.npz"


def tiktoken_file(directory: Path) -> Path:
    entry = safetensors_table(directory)
    ranks = {bytes([b]): b for b in range(256)} | {b"do": 256, b"dog": 257, b"ca": 258, b"cat": 259}
    (directory / "cl100k_base.tiktoken").write_bytes(
        b"".join(base64.b64encode(token) + b" %d\n" % rank for token, rank in ranks.items()))
    return entry


def sentencepiece(directory: Path) -> Path:
    import sentencepiece as spm
    entry = safetensors_table(directory, rows=SENTENCEPIECE_IDS)  # its own table: 60 ids name under a quarter of V
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(SENTENCES), model_writer=buf, vocab_size=SENTENCEPIECE_IDS,
                                   model_type="bpe", byte_fallback=False, character_coverage=1.0, minloglevel=2)
    (directory / "tokenizer.model").write_bytes(buf.getvalue())
    return entry


def by_ids(build: Callable[[Path], tuple[Path, Path]], config: bool = True) -> Callable[[Path], Path]:
    def built(directory: Path) -> Path:
        entry, _ = build(directory)
        if config:
            gpt2_config(directory)
        return entry
    return built


# name -> (builder, whether words are asked (else --ids))
LAYOUTS: dict[str, tuple[Callable[[Path], Path], bool]] = {
    "nlm pickle + minbpe": (copied("model.pkl", "tokenizer.model", sample="nlm"), True),
    "hf safetensors + tokenizer.json": (copied("model.safetensors", "tokenizer.json", "config.json", sample="hf"),
                                        True),
    "ANDREA + minbpe": (copied("model.bin", "config.json", "tokenizer.model", sample="andrea"), True),
    "ANDREA + Harris segments": (andrea_harris, True),
    "nanoGPT ckpt.pt + minbpe": (copied("ckpt.pt", "tokenizer.model", sample="nanogpt"), True),
    "nanoGPT ckpt.pt + meta.pkl": (nanogpt_chars, True),
    "sharded safetensors": (sharded, True),
    "sharded .bin": (sharded_bin, False),
    "GGUF": (gguf, True),
    "ONNX + external data + vocab.txt": (onnx_external, True),
    "CTranslate2 + vocabulary.txt": (ctranslate2, True),
    "Keras h5 + vocab.txt": (keras, True),
    "npz + vocab.json/merges.txt": (npz_gpt2_bpe, True),
    "safetensors + .tiktoken": (tiktoken_file, True),
    "safetensors + SentencePiece": (sentencepiece, True),
    "legacy torch": (by_ids(lambda d: corpus.pytorch(d, True)), False),
    "npy": (by_ids(corpus.npy), False),
    "npy (pickled dict)": (by_ids(corpus.npy_object), False),
}


def replaced(layout: Path, name: str, case: Path, kind: str) -> None:
    """A copy of the layout (hard links) with `name` replaced by a FIFO or a directory."""
    shutil.copytree(layout, case, copy_function=os.link)
    (case / name).unlink()
    if kind == "fifo":
        os.mkfifo(case / name)
    else:
        (case / name).mkdir()


@pytest.mark.slow  # seconds of subprocesses: CI's slow step runs it; a cheaper test of the same feature stays in the suite
def test_a_fifo_or_a_directory_in_place_of_any_file_read_beside_a_checkpoint_ends_in_one_line(tmp_path):
    cases, layouts = [], {}
    for number, (label, (build, words)) in enumerate(LAYOUTS.items()):
        layout = tmp_path / f"layout{number}"
        layout.mkdir()
        entry = build(layout)
        names = sorted(str(p.relative_to(layout)) for p in layout.rglob("*") if p.is_file())
        layouts[label] = (layout, names)
        asked = ["similarity", *WORDS] if words else ["similarity", "--ids", "1", "2"]
        relative = entry.relative_to(layout)
        cases.append({"name": label, "args": [*asked, "-c", str(layout / relative)], "intact": True})
        for name in names:
            for kind in ("fifo", "directory"):
                case = tmp_path / f"case{len(cases)}"
                replaced(layout, name, case, kind)
                # no baseline: its pass over the table was made on the intact layout; these end before or after it
                cases.append({"name": f"{label}: {kind} as {name}", "intact": False,
                              "args": [*asked, "--no-baseline", "-c", str(case / relative)]})
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("EMBSCOPE_CHECKPOINT", None)
    child = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "cases.json"), str(CASE_SECONDS)],
                           capture_output=True, text=True, env=env, timeout=CASE_SECONDS * 4 + 240, check=False)
    lines = [json.loads(line) for line in child.stdout.splitlines() if line.startswith("{")]
    done = {line["name"]: line for line in lines if "code" in line}
    started = [line["start"] for line in lines if "start" in line]
    assert child.returncode == 0, f"the run of {started[-1]!r} did not end: {child.stderr[-3000:]}"
    assert len(done) == len(cases)
    for case in cases:
        found = done[case["name"]]
        assert found["exception"] is None, (case["name"], found)
        if case["intact"]:  # answered, and every file of the layout recorded as read
            assert found["code"] == 0, (case["name"], found["stderr"])
            layout, names = layouts[case["name"]]
            read = {os.path.realpath(path) for path in found["read"]}
            assert {os.path.realpath(layout / name) for name in names} <= read, (case["name"], names, read)
        else:  # an answer, or one line saying what was expected and found
            assert found["code"] in (0, 1), (case["name"], found)
            if found["code"] == 1:
                assert found["stderr"].startswith("Error: ") and found["stderr"].count("\n") == 1, \
                    (case["name"], found["stderr"])
    assert len(cases) >= 2 * 3 * len(LAYOUTS)  # each layout has its checkpoint and at least two files beside it


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_the_ctranslate2_config_beside_a_vocabulary_list_is_not_waited_on(tmp_path, kind):
    """A hang, in-process: the vocabulary list read its config.json with a bare read_text. The
    answer is the one without a config (no special tokens named)."""
    from conftest import run

    def hung(signum, frame):
        raise TimeoutError("the open of config.json blocked")
    entry = ctranslate2(tmp_path)
    (tmp_path / "config.json").unlink()
    os.mkfifo(tmp_path / "config.json") if kind == "fifo" else (tmp_path / "config.json").mkdir()
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(CASE_SECONDS)
    try:
        shown = run("similarity", "dog", "cat", "-c", entry, "--json").stdout
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    (pair,) = json.loads(shown)["pairs"]
    assert [token.strip() for token in pair["a_tokens"] + pair["b_tokens"]] == ["dog", "cat"]


# --- one module owns reading: no other module opens a file to read it ---------------------------------

PACKAGE = Path(__file__).resolve().parent.parent / "embscope"
# calls that open or read a file by its name, as (object, attribute) or a plain name
READING_CALLS = {("json", "load"), ("np", "load"), ("np", "fromfile"), ("np", "memmap"), ("mmap", "mmap"),
                 ("os", "open"), ("h5py", "File"), ("onnx", "load"), ("zipfile", "ZipFile")}
READING_METHODS = {"read_text", "read_bytes", "from_file", "Load", "load_tiktoken_bpe"}
# where one of them is allowed, and why: the module itself; outputs (written, not read); a library handed what
# embscope.core.files opened (np.memmap its file object, h5py its checked descriptor's name, zipfile its archive)
ALLOWED = {
    ("core/files.py", "*"),
    ("render/files.py", "open"), ("render/files.py", "os.open"),  # an output's temporary file, made and written
    ("cli.py", "os.open"),  # stdout onto /dev/null
    ("storage/checks.py", "np.memmap"), ("formats/keras_h5.py", "h5py.File"),
    ("formats/_torch_storage.py", "zipfile.ZipFile"), ("formats/pytorch_file.py", "zipfile.ZipFile"),
    # opened_zip and open_zip, for every zip reader and the sniffs: an archive files opened, its central directory
    # bounded first
    ("formats/_zip.py", "zipfile.ZipFile"),
    # the h5py child: anonymous shared memory for the table it reads, its stderr onto /dev/null (written)
    ("formats/_isolated.py", "mmap.mmap"), ("formats/_isolated.py", "os.open"),
    ("quiet.py", "os.open"),  # /dev/null, where native libraries' fd 2 goes when no temporary file can be made
    ("blas.py", "open"),  # /proc/self/maps: the libraries this process has mapped, to find numpy's OpenBLAS
}


def reading_calls(path: Path) -> list[tuple[str, int]]:
    import ast
    found = []
    for node in source_nodes(path):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "open":
            found.append(("open", node.lineno))
        elif isinstance(func, ast.Attribute):
            owner = func.value.id if isinstance(func.value, ast.Name) else None
            if (owner, func.attr) in READING_CALLS:
                found.append((f"{owner}.{func.attr}", node.lineno))
            elif func.attr in READING_METHODS and owner != "files":  # files.read_bytes is the module's own
                found.append((func.attr, node.lineno))
            elif func.attr == "open" and node.args and isinstance(node.args[0], ast.Constant) \
                    and str(node.args[0].value).startswith("r"):  # Path.open("rb"), not Embeddings' open()
                found.append(("Path.open", node.lineno))
    return found


def test_every_file_in_the_package_is_opened_through_embscope_files():
    misplaced = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = str(path.relative_to(PACKAGE))
        for call, line in reading_calls(path):
            if (module, "*") not in ALLOWED and (module, call) not in ALLOWED:
                misplaced.append(f"{module}:{line} {call}")
    assert not misplaced, f"read through embscope.core.files instead: {misplaced}"
    # and the libraries handed an archive get the one embscope.core.files opened
    for module in ("formats/numpy_file.py", "formats/sniffs.py", "formats/_torch_zip.py", "formats/_torch_storage.py",
                   "formats/pytorch_file.py"):
        assert "zipfile.ZipFile(path" not in (PACKAGE / module).read_text(encoding="utf-8")
