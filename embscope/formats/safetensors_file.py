"""safetensors: an 8-byte header length, a JSON header, then raw little-endian tensor data.
Parsed here from the header alone; tensors are memory-mapped when read."""

from __future__ import annotations

import json
import math
import struct
from functools import partial
from pathlib import Path

import numpy as np

from ..arrays import ITEMSIZE
from ..checkpoint import Checkpoint, TensorInfo
from ..errors import CheckpointError
from ..text import quote
from . import Format, OpenOptions, register
from ._checks import check_extent, check_shape

MAX_HEADER = 100 * 1024 * 1024  # the limit the safetensors library itself enforces

# safetensors dtype -> (our name, numpy dtype of the stored bytes)
DTYPES = {
    "F64": ("float64", "<f8"), "F32": ("float32", "<f4"), "F16": ("float16", "<f2"),
    "BF16": ("bfloat16", "<u2"), "I64": ("int64", "<i8"), "I32": ("int32", "<i4"),
    "I16": ("int16", "<i2"), "I8": ("int8", "i1"), "U8": ("uint8", "u1"), "U16": ("uint16", "<u2"),
    "U32": ("uint32", "<u4"), "U64": ("uint64", "<u8"), "BOOL": ("bool", "?"),
}


def read_mapped(path: Path, np_dtype: str, offset: int, shape: tuple[int, ...]) -> np.ndarray:
    if math.prod(shape) == 0:
        return np.zeros(shape, dtype=np_dtype)
    # checked again now: the file may have shrunk since its header was read
    check_extent(path, offset, math.prod(shape) * np.dtype(np_dtype).itemsize, f"{quote(path)}: tensor data")
    return np.memmap(path, dtype=np_dtype, mode="r", offset=offset, shape=shape)


def read_header(path: Path) -> tuple[dict, int]:
    """The parsed header and the offset where tensor data starts; every lie is caught here."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        first = f.read(8)
        if len(first) < 8:
            raise CheckpointError(f"{quote(path)}: expected an 8-byte safetensors header length, found {len(first)} bytes")
        (length,) = struct.unpack("<Q", first)
        if length > size - 8:
            raise CheckpointError(f"{quote(path)}: safetensors header declares {length} bytes but only {size - 8} follow")
        if length > MAX_HEADER:
            raise CheckpointError(f"{quote(path)}: safetensors header of {length} bytes exceeds the {MAX_HEADER}-byte limit")
        raw = f.read(length)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as err:  # also json's limit on digits in an integer
        raise CheckpointError(f"{quote(path)}: safetensors header is not valid JSON ({err.__class__.__name__})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{quote(path)}: safetensors header should be a JSON object, found {type(header).__name__}")
    return header, 8 + length


STEP_KEYS = ("step", "iter_num", "global_step")  # in __metadata__, whose values are strings


def step_from_metadata(header: dict) -> int | None:
    metadata = header.get("__metadata__")
    if not isinstance(metadata, dict):
        return None
    for key in STEP_KEYS:
        value = metadata.get(key)
        if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 20:
            return int(value)
    return None


def catalogue(path: Path) -> tuple[dict[str, TensorInfo], int | None]:
    """The tensors a file's header describes, and the training step its metadata records."""
    header, data_start = read_header(path)
    data_len = path.stat().st_size - data_start
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
    if not isinstance(dtype, str) or dtype not in DTYPES:  # a list or object is unhashable
        raise CheckpointError(f"{where}: expected a dtype among {', '.join(DTYPES)}, found {printable_value(dtype)}")
    shape, offsets = entry.get("shape"), entry.get("data_offsets")
    if not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)):
        raise CheckpointError(f"{where}: expected a shape of non-negative integers, found {printable_value(shape)}")
    check_shape(shape, where)
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)
            and 0 <= offsets[0] <= offsets[1] <= data_len):
        raise CheckpointError(f"{where}: data_offsets {printable_value(offsets)} lie outside the {data_len} data bytes")
    name_ours, np_dtype = DTYPES[dtype]
    nbytes = math.prod(shape) * ITEMSIZE[name_ours]  # Python ints: no overflow
    if nbytes != offsets[1] - offsets[0]:
        raise CheckpointError(f"{where}: shape {shape} of {dtype} needs {nbytes} bytes, data_offsets span {offsets[1] - offsets[0]}")
    read = partial(read_mapped, path, np_dtype, data_start + offsets[0], tuple(shape))
    return TensorInfo(name, tuple(shape), name_ours, read, storage=(str(path), offsets[0]) if nbytes else None)


def printable_value(value: object) -> str:
    text = json.dumps(value)
    return quote(text[:60] + ("..." if len(text) > 60 else ""))


def read_config(directory: Path) -> dict:
    """A Hugging Face config.json beside the weights, when there is a readable one."""
    try:
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # unreadable, not UTF-8, not JSON: no config
        return {}
    return config if isinstance(config, dict) else {}


def open_single(path: Path, options: OpenOptions) -> Checkpoint:
    tensors, step = catalogue(path)
    return Checkpoint(path, "safetensors", tensors, step=step, config=read_config(path.parent))


def open_sharded(path: Path, options: OpenOptions) -> Checkpoint:
    """Headers of every shard are read (a few KB each); tensor data only from the shard that holds it."""
    try:
        index = json.loads(path.read_text(encoding="utf-8"))
        weight_map = index["weight_map"]
        if not (isinstance(weight_map, dict) and all(isinstance(v, str) for v in weight_map.values())):
            raise TypeError  # not an assert: python -O would let a hostile index through
    except (ValueError, RecursionError, KeyError, TypeError):
        raise CheckpointError(f"{quote(path)}: expected a JSON index with a \"weight_map\" of tensor name to shard file") from None
    tensors = {}
    for shard_name in sorted(set(weight_map.values())):
        shard = path.parent / shard_name
        if Path(shard_name).name != shard_name or not readable_file(shard):
            raise CheckpointError(f"{quote(path)} names shard {quote(shard_name)}, which is not in {quote(path.parent)}")
        shard_tensors, _ = catalogue(shard)
        for name, file in weight_map.items():
            if file == shard_name:
                if name not in shard_tensors:
                    raise CheckpointError(f"{quote(path)} puts tensor {quote(name)} in {quote(shard_name)}, whose header lacks it")
                tensors[name] = shard_tensors[name]
    return Checkpoint(path, "safetensors (sharded)", tensors, config=read_config(path.parent))


def readable_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a name too long for the file system, for one
        return False


def looks_like_safetensors(path: Path, head: bytes, size: int) -> bool:
    # the length is not checked here, so that a header that lies about it gets its own error
    return len(head) >= 10 and head[8:9] == b"{" and head[9:10] in (b'"', b"}", b" ", b"\n")


register(Format("safetensors", looks_like_safetensors, open_single, priority=10))
register(Format("safetensors (sharded)",
                lambda path, head, size: path.name.endswith(".safetensors.index.json"),
                open_sharded, priority=5))
