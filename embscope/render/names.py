"""How outputs and titles name a checkpoint, and which default output name a run may take.

A file stem such as `model`, `pytorch_model` or `ckpt` says nothing (every Hugging Face folder holds a
`model.safetensors`, every nanoGPT run a `ckpt.pt`), so a default name and a title use the checkpoint's
folder, or its Hugging Face model id, in its place: `run-a/model.safetensors` gives `run-a-position-norms.png`
and the title `run-a/model.safetensors`.

A default output name that already exists is replaced only when the file there was written by embscope for
the same checkpoint: every PNG, HTML page and report.md embscope writes records a digest of the checkpoints
it is about (RECORD_KEY; a digest, so no path is written into a file people share). Otherwise the next free
name is taken (`-2`, `-3`, ...) and the answer says which name was taken and why; a file embscope did not write
(no record) is never replaced by a default name.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import sample
from ..core import files
from ..core.errors import EmbscopeError, Message, Option, OutputError
from ..core.text import quote

if TYPE_CHECKING:
    from ..embeddings import Embeddings

# stems that name no model (Hugging Face, nanoGPT, llama.cpp, ONNX exports, Keras, training loops)
GENERIC_STEMS = frozenset({
    "model", "pytorch_model", "tf_model", "flax_model", "ckpt", "checkpoint", "weights", "params", "consolidated",
    "state_dict", "adapter_model", "last", "best", "final", "latest", "ggml-model", "model_quantized",
    "model_optimized", "decoder_model", "decoder_model_merged", "encoder_model", "model.safetensors.index",
    "pytorch_model.bin.index"})
# folders that say where files go, not which model they are (nanoGPT's out/, an onnx/ export, checkpoints/)
GENERIC_FOLDERS = frozenset({"out", "output", "outputs", "checkpoints", "ckpt", "ckpts", "models", "model",
                             "weights", "onnx", "runs", "results", "snapshots"})
SHARD = re.compile(r"-\d{5}-of-\d{5}$")  # model-00001-of-00002: one shard of a set that is one checkpoint
# a generic word with something after it (ckpt_1000, ggml-model-f16, consolidated.00): the folder goes before it
GENERIC_PREFIX = re.compile(r"(model|pytorch_model|ckpt|checkpoint|ggml-model|consolidated|weights|params|"
                            r"state_dict)[-_.].+")
STEP_FOLDER = re.compile(r"(checkpoint|ckpt|step|global_step|iter)[-_]?\d+", re.IGNORECASE)
UNSAFE = re.compile(r"[\x00-\x1f\x7f/\\:*?\"<>|]+")  # characters a file name should not get from a folder name
MAX_LABEL = 80
RECORD_KEY = "embscope-checkpoint"
RECORD_BYTES = 65536  # a record sits in the first bytes of every file that has one
MAX_TRIES = 99


def hub_model_id(path: Path) -> tuple[str, Path] | None:
    """`org/name` and the file's path inside the snapshot, for a file in the Hugging Face hub cache
    (`models--org--name/snapshots/<revision>/...`)."""
    parts = path.parts
    for at in range(len(parts) - 2, 0, -1):
        if parts[at] == "snapshots" and parts[at - 1].startswith("models--") and at + 2 < len(parts):
            return parts[at - 1].removeprefix("models--").replace("--", "/"), Path(*parts[at + 2:])
    return None


def says_nothing(stem: str) -> bool:
    """A file stem that names no model: `model`, `ckpt`, a shard `model-00001-of-00002`, `model.safetensors.index`."""
    return SHARD.sub("", stem.lower()) in GENERIC_STEMS


def is_generic(stem: str) -> bool:
    """A file stem that needs its folder to name a model: one that says nothing, or `ckpt_1000`, `ggml-model-f16`."""
    return says_nothing(stem) or GENERIC_PREFIX.fullmatch(SHARD.sub("", stem.lower())) is not None


def context(path: Path) -> list[str]:
    """What names the checkpoint beside its file name, outermost first: its hub model id (and the folders inside
    the snapshot), or for a generic file stem its folder (two folders when that one is itself generic, or a step
    folder such as checkpoint-500); nothing for a file whose stem names it."""
    hub = hub_model_id(path)
    if hub is not None:
        model_id, inside = hub
        return [model_id, *inside.parent.parts]
    if not is_generic(path.stem):
        return []
    taken: list[str] = []
    for folder in reversed([part for part in path.parent.parts if part not in ("/", "")]):
        taken.insert(0, folder)
        if (folder.lower() not in GENERIC_FOLDERS and not STEP_FOLDER.fullmatch(folder)) or len(taken) == 2:
            break
    return taken


def absolute(path: Path) -> Path:
    """The checkpoint a name or title is about, however it was given: `-c .` names the folder it means, a hub model
    id the snapshot it names (so `-c org/name` and the file opened from it get one label); links are kept, as the
    user named them (a hub snapshot links to blobs)."""
    if not os.path.lexists(path):
        from ..hub import resolve
        try:
            snapshot = resolve(os.fspath(path))
        except EmbscopeError:  # no such model cached either: the name as given
            snapshot = None
        if snapshot is not None:
            path = snapshot.folder
    return Path(os.path.abspath(path))


def checkpoint_label(path: Path) -> str:
    """The checkpoint in a file name: its stem, or for a generic stem the folder (or model id) before it; a
    folder (a run, a Hugging Face directory) is named as a generic file inside it would be."""
    path = absolute(path)
    inside = path.is_dir()
    words = [part.replace("/", "--") for part in context(path / "model" if inside else path)]
    if not inside and (not words or not says_nothing(path.stem)):
        words.append(path.stem)
    label = UNSAFE.sub("_", "-".join(words)).strip(". ") or "checkpoint"
    return label[:MAX_LABEL]


def checkpoint_title(path: Path, step: int | None = None, sample: str | None = None) -> str:
    """The checkpoint in a title: `run-a/model.safetensors, step 3000`; `sample`: the bundled sample's description."""
    path = absolute(path)
    inside = path.is_dir()
    parts = [*context(path / "model"), ""] if inside else [*context(path), path.name]  # a folder ends in /
    named = f"bundled sample ({sample})" if sample is not None else "/".join(parts)
    return named + (f", step {step}" if step is not None else "")


def emb_title(emb: Embeddings) -> str:
    """The title of one checkpoint's figures and report."""
    checkpoint = emb.checkpoint
    return checkpoint_title(checkpoint.path, checkpoint.step, sample.DESCRIPTION if emb.is_sample else None)


def record(paths: Iterable[Path]) -> str:
    """What an output records about the checkpoints it was written for: a digest of their real paths."""
    joined = "\n".join(os.path.realpath(p) for p in paths)
    return hashlib.sha256(joined.encode("utf-8", "surrogateescape")).hexdigest()[:32]


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
HTML_RECORD = re.compile(rb'<meta name="' + RECORD_KEY.encode() + rb'" content="([0-9a-f]{32})">')
MD_RECORD = re.compile(rb"<!-- " + RECORD_KEY.encode() + rb": ([0-9a-f]{32}) -->")


def png_record(head: bytes) -> str | None:
    """The record in a PNG's text chunks, which come before its image data."""
    if not head.startswith(PNG_SIGNATURE):
        return None
    at = len(PNG_SIGNATURE)
    while at + 8 <= len(head):
        length = int.from_bytes(head[at:at + 4], "big")
        kind, data = head[at + 4:at + 8], head[at + 8:at + 8 + length]
        if kind in (b"IDAT", b"IEND") or len(data) < length:
            return None
        if kind == b"tEXt":
            key, _, value = data.partition(b"\0")
            if key == RECORD_KEY.encode() and re.fullmatch(rb"[0-9a-f]{32}", value):
                return value.decode("ascii")
        at += 12 + length
    return None


def text_record(pattern: re.Pattern[bytes]) -> Callable[[bytes], str | None]:
    def read(head: bytes) -> str | None:
        found = pattern.search(head)
        return found.group(1).decode("ascii") if found else None
    return read


READERS: dict[str, Callable[[bytes], str | None]] = {
    ".png": png_record, ".html": text_record(HTML_RECORD), ".htm": text_record(HTML_RECORD),
    ".md": text_record(MD_RECORD)}


def written_for(path: Path) -> str | None:
    """The record of the file at `path`, when embscope wrote it; None for anything else (a link, a FIFO, a file
    without one). Only the first RECORD_BYTES of a regular file are read, and a link is never followed."""
    read = READERS.get(path.suffix.lower())
    try:
        if read is None or not stat.S_ISREG(os.lstat(path).st_mode):
            return None
    except OSError:
        return None
    head = files.peek(path, RECORD_BYTES)  # not recorded as read: an earlier output is no input of this answer
    return read(head) if head is not None else None


@dataclass(frozen=True)
class Output:
    """Where an output goes, what it records (`record`), and what was at that name before."""

    path: Path
    record: str | None = None  # what the file records about the checkpoints it is about (record())
    replaced: bool = False  # a default name that held the output written for the same checkpoints before
    instead_of: Path | None = None  # the default name, held by another checkpoint's output or a file embscope did not write

    def written(self, what: str = "plot") -> str:
        """The line that says where the output went (plain text: the caller escapes it)."""
        return f"{what} written to {self.path}{self.how()}"

    def fields(self, key: str = "plot") -> dict[str, Any]:
        """The output in a JSON document: its path under `key`, and what the console's line says after it (a default
        name replaced, or passed over for the next free one), which a --json answer would otherwise leave out."""
        return {key: str(self.path), f"{key}_replaced": self.replaced,
                f"{key}_instead_of": str(self.instead_of) if self.instead_of is not None else None}

    def how(self) -> str:
        """What the answer says after the path: what was replaced, or why the default name was not taken."""
        said = ["replaced this checkpoint's earlier one"] if self.replaced else []
        if self.instead_of is not None:
            said.append(f"not {self.instead_of}: that holds another checkpoint's output, or a file embscope did not "
                        "write")
        return f" ({'; '.join(said)})" if said else ""


def named_output(path: Path, paths: Iterable[Path]) -> Output:
    """An output the user named, for the checkpoints `paths`: written there, replacing what is there (the user
    named it, so the answer does not say so)."""
    return Output(Path(path), record(paths))


def default_output(base: Path, paths: Iterable[Path], marker: Callable[[Path], Path] = lambda p: p) -> Output:
    """The default output name a run for the checkpoints `paths` takes: `base` when it is free or holds their
    output, else `<stem>-2<suffix>`, `-3`, ...: the first that holds their output, or is free.
    `marker(candidate)`: the file that holds the record (report.md inside a Markdown folder)."""
    mine = record(paths)
    for n in range(1, MAX_TRIES + 1):
        candidate = base if n == 1 else base.with_name(f"{base.stem}-{n}{base.suffix}")
        instead_of = base if n > 1 else None
        if not os.path.lexists(candidate):
            return Output(candidate, mine, instead_of=instead_of)
        if written_for(marker(candidate)) == mine:
            return Output(candidate, mine, replaced=True, instead_of=instead_of)
    raise OutputError(Message(f"expected a free default name for the output, found {quote(base)} and the "
                              f"{MAX_TRIES - 1} names after it taken by other checkpoints' outputs; name the file "
                              "with ", Option("plot", metavar="FILE"), " or ", Option("out")), path=base)
