"""Keras 3's default save format, `model.save("m.keras")`: a zip of `metadata.json` (the Keras version),
`config.json` (the model's layers, each by class and name) and `model.weights.h5` (saving_lib's HDF5 weights,
read by formats.keras_h5). Keras writes the zip stored (zipfile's default): the HDF5 member is read in place,
h5py through a window on the zip and contiguous tables memory-mapped at the member's offset in it. A member
someone compressed afterwards is inflated into memory through formats._zip (never past the size its entry
declares, and at most MAX_INFLATED). Nothing is extracted to disk, and the file is never written.

A .keras is untrusted input: a member name that climbs out of the archive ('..', an absolute path), two entries
of one name, a weights member that is not HDF5 (another zip inside it, say), an encrypted member, or a member
declaring more than its cap is refused in one line before anything big is read or allocated."""

from __future__ import annotations

import json
import os
import zipfile
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

from ..core import files
from ..core.checkpoint import Checkpoint
from ..core.errors import CheckpointError
from ..core.memory import require_memory, size_text
from ..core.text import detail, printable, quote, shortened
from ..storage.base import OpenOptions
from ..storage.checks import extent_within
from ..storage.constants import HDF5_MAGIC, ZIP_MAGIC
from ._zip import ENCRYPTED, data_offset, is_stored, open_zip, read_member
from .keras_assets import keras_tokenizer
from .keras_h5 import Source, init_config, initializers_in, read_weights

WEIGHTS, CONFIG, METADATA = "model.weights.h5", "config.json", "metadata.json"
NPZ_WEIGHTS = "model.weights.npz"  # model.save(..., weights_format="npz"): not read
MAX_MEMBERS = 10_000  # Keras writes three, and an assets/ folder for layers that keep files (a vocabulary)
MAX_CONFIG = 64 << 20  # config.json: the model's layers as JSON; a keras-hub backbone's is a few kB
MAX_METADATA = 1 << 20  # metadata.json: the Keras version and the date, under 100 bytes
MAX_INFLATED = 1 << 30  # a compressed model.weights.h5 is inflated into memory up to this; Keras writes it stored
MAX_NAMES_SHOWN = 8
# the central directory zipfile reads whole, making an object of each entry (200,000 entries, 11 MB of it, took
# 5.7 s and 150 MB): bounded before this reader asks zipfile (formats.sniffs' zip sniffs, asked first, list it
# once already); Keras' own is a few hundred bytes, and 10,000 entries with names of 50 characters fit
MAX_CENTRAL_DIRECTORY = 1 << 20


def unsafe_name(name: str) -> bool:
    """A member name that would land outside the archive's folder if it were extracted (embscope never extracts:
    no writer of .keras files makes one, so it marks a hostile file)."""
    parts = name.replace("\\", "/").split("/")
    return name.startswith(("/", "\\")) or ".." in parts or (len(name) > 1 and name[1] == ":") or "\x00" in name


def members(path: Path) -> dict[str, zipfile.ZipInfo]:
    """The archive's entries by name, once each name is known to be safe and single."""
    where = quote(path)
    archive, zf = open_zip(path, ".keras zip", MAX_CENTRAL_DIRECTORY, "any Keras save")
    with archive, zf:
        infos = zf.infolist()
    if len(infos) > MAX_MEMBERS:
        raise CheckpointError(f"{where}: the .keras zip lists {len(infos):,} members, more than the {MAX_MEMBERS:,} "
                              "any Keras save holds; refused")
    for info in infos:
        if unsafe_name(info.filename):
            raise CheckpointError(f"{where}: the .keras zip holds a member named "
                                  f"{quote(shortened(info.filename))}, which points outside the archive; refused")
    twice = [name for name, count in Counter(info.filename for info in infos).items() if count > 1]
    if twice:
        raise CheckpointError(f"{where}: the .keras zip holds {quote(shortened(twice[0]))} more than once (which one "
                              "Keras would read is not said); refused")
    return {info.filename: info for info in infos}


def checked_member(info: zipfile.ZipInfo, cap: int, where: str, hint: str = "") -> None:
    """A member may be read: not encrypted, and declaring no more than `cap` bytes (its entry is what
    formats._zip holds the inflating to, so the declared size bounds the memory)."""
    if info.flag_bits & ENCRYPTED:
        raise CheckpointError(f"{where}: the zip member is encrypted; refused")
    if info.file_size > cap:
        raise CheckpointError(f"{where}: the zip member declares {size_text(info.file_size)}, more than the "
                              f"{size_text(cap)} embscope reads of it{hint}; refused")


def json_member(path: Path, found: dict[str, zipfile.ZipInfo], name: str, cap: int) -> Any:
    """The parsed JSON of a small member; None where the archive has no such member."""
    info = found.get(name)
    if info is None:
        return None
    where = f"{quote(path)}: member {quote(name)}"
    checked_member(info, cap, where)
    try:
        return json.loads(read_member(path, info, where))
    except (ValueError, RecursionError) as err:  # not UTF-8 JSON, or nested past the parser's depth
        raise CheckpointError(f"{where}: expected the JSON Keras writes, found text json cannot parse "
                              f"({detail(err)})") from None


def check_signature(head: bytes, where: str) -> None:
    if head.startswith(ZIP_MAGIC):
        raise CheckpointError(f"{where}: expected an HDF5 file, found another zip archive inside the .keras zip; "
                              "nested archives are refused")
    if not head.startswith(HDF5_MAGIC):
        raise CheckpointError(f"{where}: expected an HDF5 file (its signature {HDF5_MAGIC!r}), found the bytes "
                              f"{head[:8]!r}")


def weights_source(path: Path, info: zipfile.ZipInfo) -> tuple[Source, str]:
    """Where model.weights.h5's bytes lie, its signature checked, and how it is read (for the notes): a stored
    member in place at its offset in the zip, a compressed one inflated into memory, bounded."""
    where = f"{quote(path)}: member {quote(WEIGHTS)}"
    if not is_stored(info):
        checked_member(info, MAX_INFLATED, where, " into memory (stored uncompressed, as Keras writes it, it is read "
                       "in place at any size)")
        check_signature(read_member(path, info, where, limit=len(HDF5_MAGIC)), where)
        require_memory(info.file_size, where)
        data = read_member(path, info, where)  # stops at the declared size, and checks the CRC
        return Source(path, WEIGHTS, data=data), f"compressed in the zip, inflated into memory ({size_text(len(data))})"
    if info.flag_bits & ENCRYPTED:
        raise CheckpointError(f"{where}: the zip member is encrypted; refused")
    if info.compress_size != info.file_size:
        raise CheckpointError(f"{where}: a stored zip member of {info.compress_size:,} bytes declares "
                              f"{info.file_size:,} bytes; refused")
    with files.open_file(path, "a checkpoint file") as archive:
        start = data_offset(archive, info, where)
        extent_within(os.fstat(archive.fileno()).st_size, start, info.file_size, where)
    check_signature(files.read_at(path, start, len(HDF5_MAGIC)), where)
    return Source(path, WEIGHTS, start, info.file_size), "stored in the zip, read in place (memory-mapped)"


def layer_classes(config: Any) -> dict[str, str]:
    """Each layer's class, by the layer's own name, everywhere in config.json (nested models too); a name that two
    layers of different classes share is left out."""
    classes: dict[str, set[str]] = {}
    stack = [config]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            inner = node.get("config")
            if isinstance(node.get("class_name"), str) and isinstance(inner, dict) and isinstance(inner.get("name"),
                                                                                                   str):
                classes.setdefault(inner["name"], set()).add(node["class_name"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return {name: next(iter(found)) for name, found in classes.items() if len(found) == 1}


def keras_version(metadata: Any) -> str | None:
    version = metadata.get("keras_version") if isinstance(metadata, dict) else None
    return version if isinstance(version, str) else None


def open_keras(path: Path, options: OpenOptions) -> Checkpoint:
    found = members(path)
    if WEIGHTS not in found:
        npz = f"; it holds {NPZ_WEIGHTS} (saved with weights_format='npz'), which embscope does not read" * (
            NPZ_WEIGHTS in found)
        names = ", ".join(quote(shortened(name)) for name in list(found)[:MAX_NAMES_SHOWN]) or "no members"
        raise CheckpointError(f"{quote(path)}: expected {WEIGHTS} in the .keras zip, found {names}{npz}")
    source, how = weights_source(path, found[WEIGHTS])
    config = json_member(path, found, CONFIG, MAX_CONFIG)
    version = keras_version(json_member(path, found, METADATA, MAX_METADATA))
    weights = read_weights(source)
    classes = layer_classes(config)
    layers = {name: (layer, classes[layer]) for name, layer in weights.layers.items() if layer in classes}
    saved = f" saved by Keras {printable(shortened(version))}" if version is not None else ""
    notes = [f".keras zip{saved}: {WEIGHTS} {how}; tensor names are its dataset paths with '/' as '.'",
             *weights.notes]
    if config is None:
        notes.append(f"the .keras zip holds no {CONFIG}: tables are found by their names alone")
    # whose defaults the weights were drawn from (analysis.untrained), as for .h5: config.json names the initializers
    init = init_config(version, initializers_in(config) if config is not None else None)
    return Checkpoint(path, weights.tensors, config=init, notes=notes, layers=layers,
                      tokenizer=partial(keras_tokenizer, path, found, config))
