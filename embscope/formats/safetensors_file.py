"""safetensors: an 8-byte header length, a JSON header, then raw little-endian tensor data.
Parsed here from the header alone; tensors are memory-mapped when read."""

from __future__ import annotations

import json
import math
import os
import struct
from functools import partial
from pathlib import Path
from typing import Any

from ..core import files
from ..core.checkpoint import Checkpoint, TensorInfo
from ..core.errors import CheckpointError
from ..core.text import quote
from ..storage.base import OpenOptions
from ..storage.checks import check_shape, map_array
from ..storage.constants import (
    ELEMENT_TYPES,
    MAX_TENSORS,
    SAFETENSORS_CATALOGUED,
    SAFETENSORS_DTYPES,
    SAFETENSORS_MAX_HEADER,
    STEP_KEYS,
)
from ._shards import missing, shards_of


def read_header(path: Path) -> tuple[dict[str, Any], int, int]:
    """The parsed header, the offset where tensor data starts and the file's size; every lie is caught here."""
    with files.open_file(path, "a checkpoint file") as f:
        size = os.fstat(f.fileno()).st_size
        first = f.read(8)
        if len(first) < 8:
            raise CheckpointError(f"{quote(path)}: expected an 8-byte safetensors header length, found {len(first)} bytes")
        (length,) = struct.unpack("<Q", first)
        if length > size - 8:
            raise CheckpointError(f"{quote(path)}: safetensors header declares {length} bytes but only {size - 8} follow")
        if length > SAFETENSORS_MAX_HEADER:
            raise CheckpointError(f"{quote(path)}: safetensors header of {length} bytes exceeds the {SAFETENSORS_MAX_HEADER}-byte limit")
        raw = f.read(length)
    # counted before parsing: json.loads of 1.6 million entries takes a minute and a gigabyte
    tensors = raw.count(b'"data_offsets"')
    if tensors > MAX_TENSORS:
        raise CheckpointError(f"{quote(path)}: safetensors header lists {tensors:,} tensors, more than the "
                              f"{MAX_TENSORS:,} any model file holds")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as err:  # also json's limit on digits in an integer
        raise CheckpointError(f"{quote(path)}: safetensors header is not valid JSON ({err.__class__.__name__})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{quote(path)}: safetensors header should be a JSON object, found {type(header).__name__}")
    return header, 8 + length, size


def step_from_metadata(header: dict[str, Any]) -> int | None:
    metadata = header.get("__metadata__")
    if not isinstance(metadata, dict):
        return None
    for key in STEP_KEYS:  # in __metadata__, whose values are strings
        value = metadata.get(key)
        if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 20:
            return int(value)
    return None


def catalogue(path: Path) -> tuple[dict[str, TensorInfo], int | None]:
    """The tensors a file's header describes, and the training step its metadata records."""
    header, data_start, size = read_header(path)
    data_len = size - data_start
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        tensors[name] = tensor_info(path, name, entry, data_start, data_len)
    return tensors, step_from_metadata(header)


def tensor_info(path: Path, name: str, entry: object, data_start: int, data_len: int) -> TensorInfo:
    where = f"{quote(path)}: tensor {quote(name)}"
    if not isinstance(entry, dict):
        raise CheckpointError(f"{where}: expected an object with dtype, shape and data_offsets")
    dtype = entry.get("dtype")
    known = SAFETENSORS_DTYPES.get(dtype) or SAFETENSORS_CATALOGUED.get(dtype) if isinstance(dtype, str) else None
    if known is None:  # a list or object is unhashable
        raise CheckpointError(f"{where}: expected a dtype among {', '.join(SAFETENSORS_DTYPES)}, "
                              f"found {printable_value(dtype)}")
    shape, offsets = entry.get("shape"), entry.get("data_offsets")
    if not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)):
        raise CheckpointError(f"{where}: expected a shape of non-negative integers, found {printable_value(shape)}")
    check_shape(shape, where)
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)
            and 0 <= offsets[0] <= offsets[1] <= data_len):
        raise CheckpointError(f"{where}: data_offsets {printable_value(offsets)} lie outside the {data_len} data bytes")
    element = ELEMENT_TYPES[known]
    nbytes = math.prod(shape) * element.itemsize  # Python ints: no overflow
    if nbytes != offsets[1] - offsets[0]:
        raise CheckpointError(f"{where}: shape {shape} of {dtype} needs {nbytes} bytes, data_offsets span {offsets[1] - offsets[0]}")
    read = partial(map_array, path, "<" + element.stored, data_start + offsets[0], tuple(shape))
    return TensorInfo(name, tuple(shape), element.name, read, storage=(str(path), offsets[0]) if nbytes else None,
                      sources=(path,))


def printable_value(value: object) -> str:
    text = json.dumps(value)
    return quote(text[:60] + ("..." if len(text) > 60 else ""))


def open_single(path: Path, options: OpenOptions) -> Checkpoint:
    tensors, step = catalogue(path)
    return Checkpoint(path, tensors, step=step)


def open_sharded(path: Path, options: OpenOptions) -> Checkpoint:
    """Headers of every shard are read (a few KB each); tensor data only from the shard that holds it."""
    tensors = {}
    for shard, names in shards_of(path, "a safetensors index"):
        shard_tensors, _ = catalogue(shard)
        for name in names:
            if name not in shard_tensors:
                raise missing(path, name, shard)
            tensors[name] = shard_tensors[name]
    return Checkpoint(path, tensors)
