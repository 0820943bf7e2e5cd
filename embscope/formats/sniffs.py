"""Every format's sniff that needs more than a magic number or a name (kinds.py holds those): asked of a file
before any reader is imported, so this module imports only what sniffing needs, and a run imports the one reader
whose sniff said yes. Readers that share a test with their sniff (the .npy header, torch's data.pkl) import it
from here."""

from __future__ import annotations

import pickle
import re
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ..core import files
from ..core.errors import CheckpointError
from ..core.text import printable, quote
from ..registry import Probe
from ..storage.base import DAMAGE
from ..storage.checks import check_shape
from ..storage.constants import (
    KERAS_SUFFIX,
    NPY_MAGIC,
    PICKLE_PROTO,
    PICKLE_SUFFIXES,
    TF_DATA_SHARD,
    TF_INDEX_SUFFIX,
    TF_STATE_FILE,
    TF_TABLE_FOOTER,
    TF_TABLE_MAGIC,
    TORCH_LEGACY_HEAD,
    TORCH_SUFFIXES,
    ZIP_MAGIC,
)
from ._zip import opened_zip
from .andrea_configs import HEADER, expected_sizes, has_andrea_config

MAX_HEADER = 1 << 20  # numpy's own limit on a header it parses, which we pass on
# the characters of a CTranslate2 spec or variable name
NAME_CHARS = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_/.-")
# every one-byte pickle opcode: what may follow PROTO and its protocol number
OPCODES = frozenset(chr(code[0]) for name, code in vars(pickle).items()
                    if name.isupper() and isinstance(code, bytes) and len(code) == 1)


def looks_like_andrea(probe: Probe) -> bool:
    path, head, size = probe.path, probe.head, probe.size
    if len(head) < HEADER.size or head.startswith((ZIP_MAGIC, NPY_MAGIC)):
        return False
    _, n = HEADER.unpack(head[:HEADER.size])
    if n > 0 and size in expected_sizes(n):
        return True  # no other format promises a file size from its first 8 bytes
    # a .bin whose size disagrees with its header should hear so, not "unknown format"
    return path.suffix.lower() == ".bin" and head[0] != PICKLE_PROTO and has_andrea_config(path.parent)


def looks_like_ctranslate2(probe: Probe) -> bool:
    """A small version, then a NUL-terminated name of identifier characters: the spec name, or in
    version 1 the first variable's name after the variable count."""
    head = probe.head
    if len(head) < 8:
        return False
    version = int.from_bytes(head[:4], "little")
    at = 8 if version == 1 else 4
    if not 1 <= version <= 99 or len(head) < at + 2:  # a newer version should hear it is newer
        return False
    length = int.from_bytes(head[at:at + 2], "little")
    name = head[at + 2:at + 2 + length]
    return length >= 2 and len(name) == length and name[-1] == 0 and set(name[:-1]) <= NAME_CHARS


def looks_like_safetensors(probe: Probe) -> bool:
    head = probe.head
    # the length is not checked here, so that a header that lies about it gets its own error
    return len(head) >= 10 and head[8:9] == b"{" and head[9:10] in (b'"', b"}", b" ", b"\n")


def read_npy_header(fp: BinaryIO, where: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    try:
        version = np.lib.format.read_magic(fp)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fp)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fp, max_header_size=MAX_HEADER)
    except (*DAMAGE, TypeError) as err:  # numpy evaluates the header as a Python literal: any type may come back
        raise CheckpointError(f"{where}: expected a .npy header, found one numpy cannot parse "
                              f"({printable(str(err))[:120]})") from None
    return check_shape(shape, where), fortran, dtype


def holds_objects(probe: Probe) -> bool:
    """A .npy of pickled Python objects (np.save of a dict, allow_pickle=True), as its header says; a header numpy
    cannot parse is left to the plain .npy reader, which says why."""
    if not probe.head.startswith(NPY_MAGIC):
        return False
    try:
        with files.open_file(probe.path, record=False) as fp:
            _, _, dtype = read_npy_header(fp, quote(probe.path))
    except CheckpointError:
        return False
    return bool(dtype.hasobject)


def zip_members(probe: Probe) -> list[str] | None:
    """The member names of a zip file; None when it is not one, or cannot be read as one."""
    if not probe.head.startswith(ZIP_MAGIC):
        return None
    try:  # a central directory past its cap is no sniff's to read: the reader refuses it, naming it
        with files.open_file(probe.path, record=False) as archive, opened_zip(archive, quote(probe.path)) as zf:
            return zf.namelist()
    except (*DAMAGE, CheckpointError):
        return None


def looks_like_npz(probe: Probe) -> bool:
    names = zip_members(probe)
    if names is None:  # a broken .npz should hear why it is broken
        return probe.head.startswith(ZIP_MAGIC) and probe.path.suffix.lower() == ".npz"
    return bool(names) and all(n.endswith(".npy") for n in names)


def data_pickle_name(names: list[str]) -> str | None:
    """`<prefix>/data.pkl`, the one member every torch.save zip holds; None when there is none."""
    found = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
    return found[0] if len(found) == 1 else None


def looks_like_torch_zip(probe: Probe) -> bool:
    names = zip_members(probe)
    if names is None:  # a broken .pt should hear why it is broken, not "unknown"
        return probe.head.startswith(ZIP_MAGIC) and probe.path.suffix.lower() in TORCH_SUFFIXES
    return data_pickle_name(names) is not None


def looks_like_keras_zip(probe: Probe) -> bool:
    """Keras 3's model.save zip: model.weights.h5 (or the npz weights, to be told they are not read) at its top; a
    zip named .keras that lacks them, or is broken, should hear why."""
    if probe.head.startswith(ZIP_MAGIC) and probe.path.suffix.lower() == KERAS_SUFFIX:
        return True
    names = zip_members(probe)
    return names is not None and bool({"model.weights.h5", "model.weights.npz"} & set(names))


def looks_like_pickle(probe: Probe) -> bool:
    path, head = probe.path, probe.head
    if head.startswith(TORCH_LEGACY_HEAD):
        return False
    # PROTO, a protocol number, then an opcode: an int32 such as an ANDREA step of 640 fails the third test
    has_magic = len(head) >= 3 and head[0] == PICKLE_PROTO and 2 <= head[1] <= 5 and chr(head[2]) in OPCODES
    return has_magic or path.suffix.lower() in PICKLE_SUFFIXES


def looks_like_tf_index(probe: Probe) -> bool:
    """A TensorFlow checkpoint's `.index`: the name, then the table magic in its last 8 bytes."""
    if not probe.path.name.endswith(TF_INDEX_SUFFIX) or probe.size < TF_TABLE_FOOTER:
        return False
    try:
        return files.read_at(probe.path, probe.size - len(TF_TABLE_MAGIC), len(TF_TABLE_MAGIC)) == TF_TABLE_MAGIC
    except CheckpointError:
        return False


def tf_index_of(path: Path) -> Path | None:
    """The index a user means by a TensorFlow checkpoint's prefix (`bert_model.ckpt`, which is no file: TensorFlow
    names a checkpoint so) or by one of its data shards; None where `path` is neither."""
    shard = re.fullmatch(TF_DATA_SHARD, path.name)
    if (files.status(path) is None) == bool(shard):  # a shard that is there, or a prefix that is no file
        return None
    index = path.with_name((shard.group(1) if shard else path.name) + TF_INDEX_SUFFIX)
    return index if files.is_regular(index) else None


def tf_latest(directory: Path, found: list[Path]) -> Path | None:
    """Of several TensorFlow checkpoints in a folder (a training run keeps its last five), the one the folder's
    `checkpoint` file names as the latest, as tf.train.latest_checkpoint takes it; None where that does not decide."""
    state = directory / TF_STATE_FILE
    if not all(path.name.endswith(TF_INDEX_SUFFIX) for path in found) or not files.is_regular(state):
        return None
    try:
        text = files.read_text(state, 1 << 20, "a TensorFlow checkpoint state file")
    except (CheckpointError, ValueError):
        return None
    latest = re.search(r'^model_checkpoint_path:\s*"([^"\n]+)"', text, re.MULTILINE)
    if latest is None:
        return None
    index = directory / (Path(latest.group(1)).name + TF_INDEX_SUFFIX)  # the file may name it by an old absolute path
    return index if index in found else None
