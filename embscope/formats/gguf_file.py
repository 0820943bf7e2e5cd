"""GGUF (llama.cpp): magic, version, tensor and key-value counts, the key-value metadata (architecture,
context length, the tokenizer), the tensor infos, then aligned tensor data.

The header is walked here, every count and length checked against the bytes that remain before it is
used: gguf's own GGUFReader goes through numpy for each string (14 s over a Llama-3 vocabulary, measured)
and loops on for an array length that lies. The `gguf` package supplies the format's constants and the
dequantization (gguf.quants) of the one table that is read; tensor data is memory-mapped."""

from __future__ import annotations

import contextlib
import functools
import math
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ..core.arrays import stored_dtype
from ..core.checkpoint import Checkpoint, TensorInfo
from ..core.errors import CheckpointError, TokenizerError, message_of
from ..core.memory import require_memory
from ..core.text import printable, quote, shown
from ..storage.base import OpenOptions, require_package
from ..storage.checks import check_shape, check_tensor_count, map_array
from ..storage.constants import GGUF_PLAIN_DTYPES
from ..tokenizers.gguf_metadata import load_gguf_tokenizer
from ._binary import Cursor, map_file

SUPPORTED_VERSIONS = (2, 3)  # version 1 (August 2023) had 32-bit counts; llama.cpp dropped it too
DEFAULT_ALIGNMENT = 32  # general.alignment when the file does not set it
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_NESTING = 3  # arrays of arrays: the spec allows them, no real file goes deeper than one level

# metadata keys (gguf.constants.Keys spells them the same way)
ARCHITECTURE = "general.architecture"
ALIGNMENT = "general.alignment"
CONTEXT_LENGTH = "{arch}.context_length"
SPLIT_COUNT = "split.count"
POOLING_TYPE = "{arch}.pooling_type"  # written for embedding models, which have no language-model head
OUTPUT = "output.weight"
# llama.cpp reads the token table as the head when output.weight is absent, except in encoders
ENCODER_ARCHITECTURES = frozenset({"bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "jina-bert-v3",
                                   "modern-bert", "neo-bert", "t5encoder"})
TOKENIZER = "tokenizer.ggml."  # the keys the tokenizer is read from
TOKENS = TOKENIZER + "tokens"


def require_gguf(path: Path) -> Any:
    return require_package("gguf", path, "a GGUF file", "gguf")


@dataclass(frozen=True)
class ArrayRef:
    """A metadata array left in the file: its element type, length and where its elements start."""

    item_type: int
    count: int
    offset: int


@dataclass(frozen=True)
class TensorEntry:
    name: str
    shape: tuple[int, ...]  # numpy order: GGUF lists dimensions innermost first
    ggml_type: Any  # gguf.GGMLQuantizationType
    offset: int  # from the start of the data section
    nbytes: int


@dataclass
class Header:
    version: int
    metadata: dict[str, Any]  # scalars and strings as Python values, arrays as ArrayRef
    tensors: list[TensorEntry]
    data_start: int


def read_string_bytes(cur: Cursor, what: str) -> bytes:
    return cur.read(cur.unpack("<Q", f"the length of {what}"), what)


def read_string(cur: Cursor, what: str) -> str:
    return cur.text(read_string_bytes(cur, what), what)


@functools.cache
def value_formats(gguf: Any) -> dict[int, str]:
    """struct formats of the scalar metadata types."""
    t = gguf.GGUFValueType
    return {t.UINT8: "<B", t.INT8: "<b", t.UINT16: "<H", t.INT16: "<h", t.UINT32: "<I", t.INT32: "<i",
            t.FLOAT32: "<f", t.BOOL: "<?", t.UINT64: "<Q", t.INT64: "<q", t.FLOAT64: "<d"}


def read_value(cur: Cursor, value_type: int, key: str, gguf: Any, depth: int = 0) -> Any:
    """One metadata value; arrays are skipped over and returned as an ArrayRef."""
    formats = value_formats(gguf)
    if value_type in formats:
        return cur.unpack(formats[value_type], f"the value of {quote(key)}")
    if value_type == gguf.GGUFValueType.STRING:
        return read_string(cur, f"the value of {quote(key)}")
    if value_type != gguf.GGUFValueType.ARRAY:
        raise CheckpointError(f"{cur.where}: key {quote(key)} has value type {value_type}, expected one of "
                              f"0-{max(gguf.GGUFValueType)}")
    if depth >= MAX_NESTING:
        raise CheckpointError(f"{cur.where}: key {quote(key)} nests arrays more than {MAX_NESTING} deep")
    item_type = cur.unpack("<I", f"the element type of {quote(key)}")
    count = cur.unpack("<Q", f"the length of {quote(key)}")
    start = cur.pos
    if item_type in formats:
        cur.take(count * struct.calcsize(formats[item_type]), f"the {count} elements of {quote(key)}")
    elif item_type == gguf.GGUFValueType.STRING or item_type == gguf.GGUFValueType.ARRAY:
        if count * 8 > cur.size - cur.pos:  # each element takes 8 bytes at least: a lying count stops here
            raise CheckpointError(f"{cur.where}: key {quote(key)} declares {count} elements, more than the "
                                  f"{cur.size - cur.pos} bytes left can hold")
        if item_type == gguf.GGUFValueType.STRING:  # skipped, not copied: a vocabulary holds 100k of them
            cur.pos = skip_strings(cur.buf, cur.pos, count, cur.where)
        else:
            for _ in range(count):
                read_value(cur, gguf.GGUFValueType.ARRAY, key, gguf, depth + 1)
    else:
        raise CheckpointError(f"{cur.where}: key {quote(key)} is an array of value type {item_type}, "
                              f"expected one of 0-{max(gguf.GGUFValueType)}")
    return ArrayRef(item_type, count, start)


_LENGTH = struct.Struct("<Q")


def skip_strings(buf: Any, pos: int, count: int, where: str) -> int:
    """Where ``count`` strings starting at ``pos`` end, each checked to lie within the buffer; one loop of
    struct reads, not a Cursor per element (Gemma's 262k tokens: 0.1 s, not 0.3, on every open)."""
    unpack, size = _LENGTH.unpack_from, len(buf)
    for _ in range(count):
        if pos + 8 > size:
            raise CheckpointError(f"{where}: expected 8 bytes for the length of an array element at offset {pos}, "
                                  f"the file holds {size} bytes")
        (length,) = unpack(buf, pos)
        if pos + 8 + length > size:
            raise CheckpointError(f"{where}: expected {length} bytes for an array element at offset {pos + 8}, "
                                  f"the file holds {size} bytes")
        pos += 8 + length
    return pos


def array_strings(buf: Any, ref: ArrayRef, key: str, where: str) -> list[bytes]:
    """The elements of a string array, as bytes: token pieces need not be whole UTF-8 characters. The header
    walk has checked that they fit in the file."""
    unpack, size = _LENGTH.unpack_from, len(buf)
    out: list[bytes] = []
    append = out.append
    pos = ref.offset
    try:
        for _ in range(ref.count):
            (length,) = unpack(buf, pos)
            pos += 8
            append(buf[pos:pos + length])
            pos += length
    except struct.error:
        pos = size + 1
    if pos > size:  # a file changed since its header was read
        raise CheckpointError(f"{where}: expected the {ref.count} elements of {quote(key)} within the file's "
                              f"{size} bytes, found them running past its end")
    return out


def array_numbers(buf: Any, ref: ArrayRef, key: str, where: str, gguf: Any) -> np.ndarray:
    formats = value_formats(gguf)
    if ref.item_type not in formats:
        raise CheckpointError(f"{where}: expected {quote(key)} to be an array of numbers, found value type "
                              f"{ref.item_type}")
    dtype = np.dtype(formats[ref.item_type])
    Cursor(buf, where, ref.offset).take(ref.count * dtype.itemsize, f"the elements of {quote(key)}")
    return np.frombuffer(buf, dtype=dtype, count=ref.count, offset=ref.offset).copy()


@contextlib.contextmanager
def as_tokenizer_error() -> Iterator[None]:
    """A damaged array of the tokenizer's is the tokenizer's damage: a TokenizerError, as the other checks say."""
    try:
        yield
    except TokenizerError:
        raise
    except CheckpointError as err:
        raise TokenizerError(message_of(err), path=err.path) from None


class TokenizerArrays:
    """The tokenizer's arrays in one GGUF file (tokenizer.ggml.*), read and checked on request: what this reader
    hands the tokenizer (tokenizers/gguf_vocab.py), built when the tokenizer is loaded, so the file is mapped anew."""

    def __init__(self, path: Path, metadata: dict[str, Any]):
        self.path = path
        self.metadata = metadata
        self.where = f"{path.name}: tokenizer"
        self.gguf = require_gguf(path)
        self.buf = map_file(path)

    def ref(self, key: str, what: str, item_types: tuple[str, ...]) -> Any:
        """The ArrayRef of ``key`` (None when absent), refused unless its elements are of one of ``item_types``."""
        value = self.metadata.get(TOKENIZER + key)
        if value is None:
            return None
        names = " or ".join(item_types)
        if not isinstance(value, ArrayRef):
            raise TokenizerError(f"{self.where}: expected {TOKENIZER + key} to be an array of {what} ({names}), "
                                 f"found {shown(value)}")
        if self.gguf.GGUFValueType(value.item_type).name not in item_types:
            raise TokenizerError(f"{self.where}: expected {TOKENIZER + key} to be an array of {what} ({names}), found "
                                 f"an array of {self.gguf.GGUFValueType(value.item_type).name}")
        return value

    def raw_strings(self, key: str) -> list[bytes] | None:
        ref = self.ref(key, "strings", ("STRING",))
        if ref is None:
            return None
        with as_tokenizer_error():
            return array_strings(self.buf, ref, TOKENIZER + key, self.where)

    def strings(self, key: str, raw: list[bytes] | None = None) -> list[str] | None:
        raw = self.raw_strings(key) if raw is None else raw
        if raw is None:
            return None
        try:
            joined = b"\0".join(raw)
            if joined.count(b"\0") == len(raw) - 1:  # one decode for all, unless a token holds a NUL itself
                return joined.decode("utf-8").split("\0")
            return [item.decode("utf-8") for item in raw]
        except UnicodeDecodeError:
            for index, item in enumerate(raw):
                try:
                    item.decode("utf-8")
                except UnicodeDecodeError:
                    raise TokenizerError(f"{self.where}: element {index} of {TOKENIZER + key} is not UTF-8 text, "
                                         f"found {shown(item)}") from None
            raise

    def numbers(self, key: str, what: str, item_types: tuple[str, ...], count: int) -> np.ndarray | None:
        """One number per token (``what``: "score" or "token type"), as llama.cpp reads them: an array of
        ``item_types`` at least ``count`` long, of which the first ``count`` are used."""
        ref = self.ref(key, what + "s", item_types)
        if ref is None:
            return None
        if ref.count < count:
            raise TokenizerError(f"{self.where}: expected {TOKENIZER + key} to hold a {what} for each of the "
                                 f"{count} tokens, found {ref.count}")
        with as_tokenizer_error():
            return array_numbers(self.buf, ref, TOKENIZER + key, self.where, self.gguf)[:count]


def read_tensor_entry(cur: Cursor, gguf: Any, index: int) -> tuple[str, tuple[int, ...], Any, int]:
    name = read_string(cur, f"the name of tensor {index}")
    where = f"{cur.where}: tensor {quote(name)}"
    n_dims = cur.unpack("<I", f"the dimension count of {quote(name)}")
    if n_dims > MAX_DIMS:
        raise CheckpointError(f"{where}: expected at most {MAX_DIMS} dimensions, found {n_dims}")
    dims = [cur.unpack("<Q", f"the dimensions of {quote(name)}") for _ in range(n_dims)]
    type_id = cur.unpack("<I", f"the type of {quote(name)}")
    offset = cur.unpack("<Q", f"the data offset of {quote(name)}")
    try:
        ggml_type = gguf.GGMLQuantizationType(type_id)
    except ValueError:
        raise CheckpointError(f"{where}: unknown ggml type {type_id}") from None
    return name, check_shape(tuple(reversed(dims)), where), ggml_type, offset


def read_header(path: Path, buf: Any, gguf: Any) -> Header:
    where = quote(path)
    cur = Cursor(buf, where)
    cur.take(4, "the GGUF magic")
    raw_version = bytes(buf[4:8])
    version = cur.unpack("<I", "the GGUF version")
    if version not in SUPPORTED_VERSIONS:
        if len(raw_version) == 4 and raw_version[:2] == b"\0\0" and struct.unpack(">I", raw_version)[0] in SUPPORTED_VERSIONS:
            raise CheckpointError(f"{where}: a big-endian GGUF file; embscope reads little-endian GGUF only")
        raise CheckpointError(f"{where}: GGUF version {version}, expected one of "
                              f"{', '.join(map(str, SUPPORTED_VERSIONS))}")
    tensor_count = cur.unpack("<Q", "the tensor count")
    kv_count = cur.unpack("<Q", "the metadata count")
    # a key-value takes 13 bytes at least, a tensor info 24: counts the file cannot hold are lies
    if kv_count * 13 + tensor_count * 24 > cur.size - cur.pos:
        raise CheckpointError(f"{where}: header declares {kv_count} metadata keys and {tensor_count} tensors, "
                              f"more than the {cur.size - cur.pos} bytes left can hold")
    check_tensor_count(tensor_count, where)
    metadata: dict[str, Any] = {}
    for _ in range(kv_count):
        key = read_string(cur, "a metadata key")
        value_type = cur.unpack("<I", f"the value type of {quote(key)}")
        value = read_value(cur, value_type, key, gguf)
        if key in metadata:
            raise CheckpointError(f"{where}: metadata key {quote(key)} appears twice")
        metadata[key] = value
    entries = [read_tensor_entry(cur, gguf, i) for i in range(tensor_count)]
    alignment = metadata.get(ALIGNMENT, DEFAULT_ALIGNMENT)
    if type(alignment) is not int or alignment <= 0 or alignment & (alignment - 1):
        raise CheckpointError(f"{where}: {ALIGNMENT} is {printable(repr(alignment))}, expected a power of two")
    data_start = -(-cur.pos // alignment) * alignment
    data_len = cur.size - data_start
    tensors, seen = [], set()
    for name, shape, ggml_type, offset in entries:
        tensor_where = f"{where}: tensor {quote(name)}"
        if name in seen:
            raise CheckpointError(f"{tensor_where} appears twice")
        seen.add(name)
        if ggml_type not in gguf.GGML_QUANT_SIZES:
            raise CheckpointError(f"{tensor_where}: ggml type {ggml_type.name} has no block size in this gguf package")
        block, type_size = gguf.GGML_QUANT_SIZES[ggml_type]
        row = shape[-1] if shape else 1
        if row % block:
            raise CheckpointError(f"{tensor_where}: {ggml_type.name} stores blocks of {block} elements, "
                                  f"the rows hold {row}")
        if offset % alignment:
            raise CheckpointError(f"{tensor_where}: data offset {offset} is not a multiple of the "
                                  f"{alignment}-byte alignment")
        nbytes = math.prod(shape) // block * type_size
        if offset + nbytes > data_len:
            raise CheckpointError(f"{tensor_where}: expected {nbytes} bytes of data at offset {data_start + offset}, "
                                  f"the file holds {cur.size} bytes")
        tensors.append(TensorEntry(name, shape, ggml_type, offset, nbytes))
    return Header(version, metadata, tensors, data_start)


def read_quantized(path: Path, start: int, entry: TensorEntry) -> np.ndarray:
    """The tensor dequantized to float32 by gguf.quants; only its own blocks are mapped."""
    gguf = require_gguf(path)
    where = f"{quote(path)}: tensor {quote(entry.name)}"
    require_memory(math.prod(entry.shape) * 4, f"{where} dequantized to float32")
    if entry.nbytes == 0:  # no rows, or rows of no blocks
        return np.zeros(entry.shape, dtype=np.float32)
    rows = math.prod(entry.shape[:-1])
    raw = map_array(path, np.uint8, start, (rows, entry.nbytes // rows))
    try:
        values: np.ndarray = gguf.quants.dequantize(raw, entry.ggml_type)
    except NotImplementedError:
        raise CheckpointError(f"{where} is stored as {entry.ggml_type.name}, which the installed gguf package "
                              "cannot dequantize (a newer gguf may)") from None
    return values.reshape(entry.shape)


def tensor_info(path: Path, header: Header, entry: TensorEntry) -> TensorInfo:
    start = header.data_start + entry.offset
    storage = (str(path), start) if entry.nbytes else None
    kind = entry.ggml_type.name
    if kind in GGUF_PLAIN_DTYPES:
        dtype = GGUF_PLAIN_DTYPES[kind]
        return TensorInfo(entry.name, entry.shape, dtype,
                          partial(map_array, path, stored_dtype(dtype), start, entry.shape), storage)
    return TensorInfo(entry.name, entry.shape, "float32", partial(read_quantized, path, start, entry), storage,
                      quantization=kind)


def describe(header: Header) -> list[str]:
    """What info shows beside the tables: the architecture, its context length, how tensors are stored."""
    arch = header.metadata.get(ARCHITECTURE)
    notes = []
    shards = header.metadata.get(SPLIT_COUNT)
    if type(shards) is int and shards > 1:
        notes.append(f"one file of a GGUF split into {shards}: only its {len(header.tensors)} tensors are "
                     "catalogued, and the parameter total counts this file alone")
    if isinstance(arch, str):
        context = header.metadata.get(CONTEXT_LENGTH.format(arch=arch))
        notes.append(f"GGUF v{header.version}: architecture {printable(arch)}, context length "
                     f"{context if type(context) is int else 'not recorded'}")
    kinds: dict[str, int] = {}
    for entry in header.tensors:
        kinds[entry.ggml_type.name] = kinds.get(entry.ggml_type.name, 0) + 1
    if kinds:
        counted = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
        notes.append(f"tensor types: {counted}; quantized tables are dequantized to float32 when read, "
                     "and parameters count their stored elements")
    return notes


def open_gguf(path: Path, options: OpenOptions) -> Checkpoint:
    gguf = require_gguf(path)
    buf = map_file(path)
    header = read_header(path, buf, gguf)
    tensors = {entry.name: tensor_info(path, header, entry) for entry in header.tensors}
    tokenizer = None
    if isinstance(header.metadata.get(TOKENS), ArrayRef):
        tokenizer = partial(load_gguf_tokenizer, path, partial(TokenizerArrays, path, header.metadata))
    arch = header.metadata.get(ARCHITECTURE)
    decoder = isinstance(arch, str) and arch not in ENCODER_ARCHITECTURES \
        and POOLING_TYPE.format(arch=arch) not in header.metadata
    return Checkpoint(path, tensors, notes=describe(header), tokenizer=tokenizer,
                      tied=True if decoder and OUTPUT not in tensors else None)
