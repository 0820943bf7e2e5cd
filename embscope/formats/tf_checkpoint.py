"""TensorFlow checkpoints (tf.compat.v1.train.Saver, as Google's BERT, ALBERT and ELECTRA and OpenAI's GPT-2 were
released; tf.train.Checkpoint): `<prefix>.index` is a table in LevelDB's format (TensorFlow's lib/io/table) whose
record under the empty key is a BundleHeaderProto and every other a BundleEntryProto (tensor_bundle.proto: type,
shape, shard, offset, size); the bytes lie in `<prefix>.data-NNNNN-of-NNNNN`, memory-mapped when read. TensorFlow
is not needed. Every length and offset is checked against the block or file it claims before it is used."""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ..core import files
from ..core.checkpoint import Checkpoint, TensorInfo
from ..core.errors import CheckpointError
from ..core.text import quote
from ..storage.base import OpenOptions
from ..storage.checks import check_shape, check_tensor_count, map_array
from ..storage.constants import ELEMENT_TYPES, TF_INDEX_SUFFIX, TF_TABLE_FOOTER
from ._protobuf_wire import FIXED32, LENGTH, VARINT, fields, varint

TRAILER = 5  # after every block: its compression type (1 byte) and a masked CRC-32C
MAX_INDEX = 64 << 20  # BERT-large's index is 30 KB; a model of 100,000 tensors, a few MB
MAX_SHARDS = 100_000
# the bytes of all the keys the table's records spell out: each key is the previous one's prefix and its own bytes, so
# a 300 KB index of 60,000 records that each add one byte spells 1.8 GB of keys; BERT-large's come to 30 KB
MAX_KEY_BYTES = 64 << 20
# types.proto's DataType numbers of the element types numpy holds; the others (strings, resources) hold no weights
DATA_TYPES = {1: "float32", 2: "float64", 3: "int32", 4: "uint8", 5: "int16", 6: "int8", 9: "int64", 10: "bool",
              14: "bfloat16", 17: "uint16", 19: "float16", 22: "uint32", 23: "uint64"}
# tf.train.Checkpoint's names: the object path, then the attribute (tensorflow/python/checkpoint)
TF2_VALUE = "/.ATTRIBUTES/VARIABLE_VALUE"
TF2_SLOT = "/.OPTIMIZER_SLOT/"
# the slots TF1 optimizers add beside a variable (BERT's AdamWeightDecayOptimizer: adam_m, adam_v; tf.train's
# AdamOptimizer: Adam, Adam_1) and their scalars: training state, no parameters of the model
TF1_SLOT = re.compile(r".+/(adam_m|adam_v|Adam|Adam_1|Momentum|RMSProp|RMSProp_1|Adagrad|Adadelta|Adadelta_1|"
                      r"Ftrl|Ftrl_1|ExponentialMovingAverage)|beta1_power|beta2_power")
# a Keras 3 optimizer in a tf.train.Checkpoint (TensorFlow's guide: Checkpoint(model=..., optimizer=...)) files its
# step counter under `<path>/_iterations`, its learning rate under `<path>/_learning_rate` and its slots (Adam's
# moments) under `<path>/_variables/N`; the model's own variables may be filed under its `_trainable_variables/N`
KERAS3_ITERATIONS = "/_iterations" + TF2_VALUE
KERAS3_STATE = re.compile(r"(.*)/(_variables/\d+|_learning_rate)" + re.escape(TF2_VALUE))
# the step: a Saver's global_step, TensorFlow's guide's tf.train.Checkpoint(step=...), a Keras optimizer's counter
STEP_NAMES = ("global_step", "step", "optimizer/iter", "optimizer/iterations")
CONFIG_FILES = ("bert_config.json", "albert_config.json", "hparams.json")  # Google's BERT family, OpenAI's GPT-2


# --- the table: blocks of prefix-compressed records, found through the footer's index block -------------------

def block(index: bytes, handle: bytes | memoryview, where: str) -> memoryview:
    offset, at = varint(handle, 0)
    size, _ = varint(handle, at)
    if offset + size + TRAILER > len(index) - TF_TABLE_FOOTER:
        raise CheckpointError(f"{where}: a block of {size:,} bytes at {offset:,} runs past the table's "
                              f"{len(index) - TF_TABLE_FOOTER:,} bytes")
    if index[offset + size] != 0:  # TensorFlow writes checkpoint indexes uncompressed (tensor_bundle.cc)
        raise CheckpointError(f"{where}: expected uncompressed table blocks, as TensorFlow writes a checkpoint's "
                              f"index, found one compressed (type {index[offset + size]})")
    return memoryview(index)[offset:offset + size]


class KeyBytes:
    """What is left of MAX_KEY_BYTES in one walk of the table."""

    def __init__(self, where: str):
        self.where, self.left = where, MAX_KEY_BYTES

    def spend(self, size: int) -> None:
        self.left -= size
        if self.left < 0:
            raise CheckpointError(f"{self.where}: expected table keys of at most {MAX_KEY_BYTES:,} bytes in all, found "
                                  "more (each record's key extends the one before)")


def records(data: memoryview, where: str, spent: KeyBytes) -> Iterator[tuple[bytes, memoryview]]:
    """The (key, value) records of one block, each key the previous one's first `shared` bytes and its own."""
    if len(data) < 4:
        raise CheckpointError(f"{where}: a table block of {len(data)} bytes, too short for its restart count")
    (restarts,) = struct.unpack_from("<I", data, len(data) - 4)
    end = len(data) - 4 - 4 * restarts
    if restarts == 0 or end < 0:
        raise CheckpointError(f"{where}: a table block declares {restarts:,} restart points in {len(data):,} bytes")
    at, key = 0, b""
    while at < end:
        shared, at = varint(data, at)
        own, at = varint(data, at)
        length, at = varint(data, at)
        if shared > len(key) or at + own + length > end:
            raise CheckpointError(f"{where}: a table record runs past its block")
        spent.spend(shared + own)  # before the key is made
        key = key[:shared] + bytes(data[at:at + own])
        yield key, data[at + own:at + own + length]
        at += own + length


def table(index: bytes, where: str) -> Iterator[tuple[bytes, memoryview]]:
    """Every record of the table, in key order."""
    footer = memoryview(index)[len(index) - TF_TABLE_FOOTER:]
    _, at = varint(footer, 0)  # the metaindex block's offset and size: it lists nothing a checkpoint needs
    _, at = varint(footer, at)
    last: bytes | None = None
    spent = KeyBytes(where)
    for _, handle in records(block(index, footer[at:], where), where, spent):
        empty = True  # TensorFlow's table builder writes no empty block: millions of them would each cost a walk
        for key, value in records(block(index, handle, where), where, spent):
            if last is not None and key <= last:
                raise CheckpointError(f"{where}: expected table keys in increasing order, found {key[:80]!r} after "
                                      f"{last[:80]!r}")
            last, empty = key, False
            yield key, value
        if empty:
            raise CheckpointError(f"{where}: expected records in every data block of the table, found an empty one")


# --- the records: BundleHeaderProto and BundleEntryProto ------------------------------------------------------

def message(data: memoryview) -> dict[int, list[Any]]:
    """A message's fields by number: a varint or fixed32 as its int, a length-delimited field as its bytes."""
    found: dict[int, list[Any]] = {}
    for number, wire, start, end in fields(data, 0, len(data)):
        if wire == VARINT:
            value: Any = varint(data, start)[0]
        elif wire == FIXED32:
            value = struct.unpack_from("<I", data, start)[0]
        elif wire == LENGTH:
            value = data[start:end]
        else:
            continue
        found.setdefault(number, []).append(value)
    return found


def number(found: dict[int, list[Any]], field: int, default: int = 0) -> int:
    """A varint or fixed32 field's last value (proto3: the last one wins); raises TypeError for another type."""
    value = found.get(field, [default])[-1]
    if not isinstance(value, int):
        raise TypeError(f"field {field} holds bytes where a number belongs")
    return value


def nested(found: dict[int, list[Any]], field: int) -> memoryview:
    """A message field's bytes (empty where it is absent)."""
    return as_message(found.get(field, [memoryview(b"")])[-1], field)


def as_message(value: Any, field: int) -> memoryview:
    if not isinstance(value, memoryview):
        raise TypeError(f"field {field} holds a number where a message belongs")
    return value


def entry_shape(shape: memoryview, where: str) -> tuple[int, ...]:
    """TensorShapeProto: repeated dim (2) of {size (1)}; an unknown size (-1) or rank is no stored tensor's."""
    found = message(shape)
    if number(found, 3):
        raise CheckpointError(f"{where}: expected a stored tensor's shape, found one of unknown rank")
    dims = [number(message(as_message(dim, 2)), 1) for dim in found.get(2, [])]
    return check_shape([d if d < 1 << 63 else -1 for d in dims], where)


Entries = dict[str, dict[int, list[Any]]]


def catalogue(index_path: Path, index: bytes) -> tuple[int, int, Entries, dict[bytes, dict[int, list[Any]]]]:
    """The header's shard count and byte order, each tensor's entry by its stored name, and the entries of the
    slices of partitioned variables by their keys (which start with a 0 byte, tensor_slice_util's encoding)."""
    where = quote(index_path)
    header: dict[int, list[Any]] | None = None
    entries: Entries = {}
    slices: dict[bytes, dict[int, list[Any]]] = {}
    for key, value in table(index, where):
        if key == b"":
            header = message(value)
            continue
        check_tensor_count(len(entries) + len(slices) + 1, where)
        if key.startswith(b"\0"):
            slices[key] = message(value)
        else:
            entries[key.decode("utf-8", "replace")] = message(value)
    if header is None:
        raise CheckpointError(f"{where}: expected a BundleHeaderProto under the table's empty key, found none")
    shards, endianness = number(header, 1, 1), number(header, 2)
    if not 1 <= shards <= MAX_SHARDS or endianness not in (0, 1):
        raise CheckpointError(f"{where}: expected a header of 1 to {MAX_SHARDS:,} shards, little- or big-endian, "
                              f"found {shards:,} shards, byte order {endianness}")
    return shards, endianness, entries, slices


# --- partitioned variables (fixed_size_partitioner): the whole variable's entry lists its slices, each stored
# under a key of its own that TensorFlow's checkpoint::EncodeTensorNameSlice makes with OrderedCode -------------

SIGNED_HEADERS = {1: 0x80, 2: 0xC000, 3: 0xE000, 4: 0xF000, 5: 0xF800, 6: 0xFC00, 7: 0xFE00, 8: 0xFF00, 9: 0xFF80,
                  10: 0xFFC0}  # OrderedCode's kLengthToHeaderBits: the first two bytes of an n-byte signed number


def ordered_signed(value: int) -> bytes:
    """OrderedCode::WriteSignedNumIncreasing: big-endian two's complement in as few bytes as hold it, the length
    marked in the leading bits."""
    magnitude = ~value if value < 0 else value
    length = max(1, (magnitude.bit_length() + 7) // 7)
    raw = bytearray((value & ((1 << 80) - 1)).to_bytes(10, "big")[-length:])
    header = SIGNED_HEADERS[length]
    if length == 1:
        raw[0] ^= header
    else:
        raw[0] ^= header >> 8
        raw[1] ^= header & 0xFF
    return bytes(raw)


def slice_key(name: str, extents: list[tuple[int, int]]) -> bytes:
    """EncodeTensorNameSlice: 0, the name as an OrderedCode string, the rank, then each extent's start and length
    (a whole dimension as 0, -1)."""
    escaped = b"".join(b"\0\xff" if byte == 0 else b"\xff\0" if byte == 0xFF else bytes([byte])
                       for byte in name.encode("utf-8"))
    rank = len(extents).to_bytes(8, "big").lstrip(b"\0")
    return (b"\0" + escaped + b"\0\x01" + bytes([len(rank)]) + rank
            + b"".join(ordered_signed(start) + ordered_signed(length) for start, length in extents))


def slice_extents(proto: Any, shape: tuple[int, ...], where: str) -> list[tuple[int, int]]:
    """TensorSliceProto: an extent (1) per dimension, of start (1) and length (2); no length is the whole dimension."""
    extents = [message(as_message(extent, 1)) for extent in message(as_message(proto, 7)).get(1, [])]
    found = [(number(e, 1), number(e, 2) if 2 in e else -1) for e in extents]
    if len(found) != len(shape) or any(not (length == -1 and start == 0 or 0 <= start and 0 <= length
                                            and start + length <= size) for (start, length), size in zip(found, shape)):
        raise CheckpointError(f"{where}: expected slices within its shape {list(shape)}, found one of {found[:8]}")
    return found


def assembled(shape: tuple[int, ...], parts: list[tuple[tuple[slice, ...], TensorInfo]], where: str) -> np.ndarray:
    """The whole variable, each slice read into its place. The slices hold as many elements as the whole (checked
    when it was catalogued), so slices that do not overlap fill it."""
    first = parts[0][1].read()  # read once: it gives the whole its element type, and its values
    whole = np.zeros(shape, dtype=first.dtype)
    filled = np.zeros(shape, dtype=bool)
    for index, (region, part) in enumerate(parts):
        if filled[region].any():
            raise CheckpointError(f"{where}: expected slices that do not overlap, found two that do")
        whole[region] = first if index == 0 else part.read()
        filled[region] = True
    return whole


# --- the checkpoint --------------------------------------------------------------------------------------------

def shown_name(stored: str) -> str:
    """tf.train.Checkpoint's 'model/wte/.ATTRIBUTES/VARIABLE_VALUE' as 'model/wte'; a Saver's names as they are."""
    return stored.removesuffix(TF2_VALUE)


def shard_path(index_path: Path, shard: int, shards: int) -> Path:
    prefix = index_path.name[:-len(TF_INDEX_SUFFIX)]
    return index_path.with_name(f"{prefix}.data-{shard:05d}-of-{shards:05d}")


class Bundle:
    """One checkpoint: its index, its shards (each file's size, read once) and its byte order."""

    def __init__(self, index_path: Path, shards: int, byteorder: str):
        self.index_path, self.shards, self.byteorder = index_path, shards, byteorder
        self.sizes: dict[int, int] = {}

    def shard_size(self, shard: int, where: str) -> tuple[Path, int]:
        path = shard_path(self.index_path, shard, self.shards)
        if shard not in self.sizes:
            if not files.is_regular(path):
                raise CheckpointError(f"{where}: expected its data shard {quote(path.name)} beside the index, found "
                                      "none")
            self.sizes[shard] = path.stat().st_size
        return path, self.sizes[shard]

    def tensor(self, name: str, entry: dict[int, list[Any]], slices: dict[bytes, dict[int, list[Any]]],
               stored: str) -> TensorInfo | None:
        """A tensor's catalogue entry, checked against its shard now; None for types numpy does not hold."""
        where = f"{quote(self.index_path)}: tensor {quote(name)}"
        element = ELEMENT_TYPES.get(DATA_TYPES.get(number(entry, 1), ""))
        if element is None:
            return None
        shape = entry_shape(nested(entry, 2), where)
        if 7 in entry:  # a partitioned variable: its slices are stored under keys of their own
            return self.partitioned(name, entry, shape, slices.get, stored, where)
        return self.stored(name, entry, shape, where)

    def partitioned(self, name: str, entry: dict[int, list[Any]], shape: tuple[int, ...],
                    slice_entry: Callable[[bytes], dict[int, list[Any]] | None], stored: str, where: str) -> TensorInfo:
        """A variable stored in slices, each checked now and read into the whole when it is read; the slices must
        hold as many elements as the whole, so that it is no larger than the bytes the shards hold."""
        parts: list[tuple[tuple[slice, ...], TensorInfo]] = []
        for proto in entry[7]:
            extents = slice_extents(proto, shape, where)
            piece = slice_entry(slice_key(stored, extents))
            if piece is None or number(piece, 1) != number(entry, 1):
                raise CheckpointError(f"{where}: expected its slice {extents[:8]} of the same type in the index, "
                                      "found none")
            region = tuple(slice(start, size if length == -1 else start + length)
                           for (start, length), size in zip(extents, shape))
            part = self.stored(name, piece, entry_shape(nested(piece, 2), where), where)
            if part.shape != tuple(r.stop - r.start for r in region):
                raise CheckpointError(f"{where}: its slice {extents[:8]} is stored with shape {list(part.shape)}")
            parts.append((region, part))
        if not parts or sum(part.numel for _, part in parts) != math.prod(shape):
            raise CheckpointError(f"{where}: expected slices that hold its {math.prod(shape):,} elements, found "
                                  f"{sum(part.numel for _, part in parts):,}")
        return TensorInfo(name, shape, parts[0][1].dtype, partial(assembled, shape, parts, where),
                          sources=tuple(dict.fromkeys(path for _, part in parts for path in part.sources)))

    def stored(self, name: str, entry: dict[int, list[Any]], shape: tuple[int, ...], where: str) -> TensorInfo:
        """A tensor (or a slice of one) whose bytes lie in one shard."""
        element = ELEMENT_TYPES[DATA_TYPES[number(entry, 1)]]
        shard, offset, size = number(entry, 3), number(entry, 4), number(entry, 5)
        if shard >= self.shards:
            raise CheckpointError(f"{where}: expected a shard below {self.shards}, found {shard}")
        if size != math.prod(shape) * element.itemsize:
            raise CheckpointError(f"{where}: shape {list(shape)} of {element.name} needs "
                                  f"{math.prod(shape) * element.itemsize:,} bytes, the entry says {size:,}")
        path, file_size = self.shard_size(shard, where)
        if offset + size > file_size:
            raise CheckpointError(f"{where}: {size:,} bytes at offset {offset:,} run past {quote(path.name)}'s "
                                  f"{file_size:,} bytes")
        read = partial(map_array, path, self.byteorder + element.stored, offset, shape)
        return TensorInfo(name, shape, element.name, read, storage=(str(path), offset) if size else None,
                          sources=(path,))


def is_slot(stored: str, keras3: set[str]) -> bool:
    """Optimizer state beside the model: TF1 optimizers' slots, TF2's `.OPTIMIZER_SLOT`, a Keras 3 optimizer's."""
    if TF2_SLOT in stored or TF1_SLOT.fullmatch(stored):
        return True
    state = KERAS3_STATE.fullmatch(stored)
    return state is not None and state.group(1) in keras3


def catalogued(path: Path, index: bytes) -> tuple[dict[str, TensorInfo], int, int | None]:
    """The model's tensors by name, how many tensors of optimizer state were left out, and the step."""
    shards, endianness, entries, slices = catalogue(path, index)
    bundle = Bundle(path, shards, ">" if endianness else "<")
    tensors: dict[str, TensorInfo] = {}
    slots, step = 0, None
    keras3 = {stored[:-len(KERAS3_ITERATIONS)] for stored in entries if stored.endswith(KERAS3_ITERATIONS)}
    for stored, entry in entries.items():
        name = shown_name(stored)
        if is_slot(stored, keras3):
            slots += 1
            continue
        info = bundle.tensor(name, entry, slices, stored)
        if info is None:
            continue
        if (name in STEP_NAMES or stored.endswith(KERAS3_ITERATIONS)) and info.numel == 1 and not info.is_float:
            step = int(info.read().reshape(()))
            continue
        tensors[name] = info
    return tensors, slots, step


def open_tf_checkpoint(path: Path, options: OpenOptions) -> Checkpoint:
    where = quote(path)
    index = files.read_bytes(path, MAX_INDEX, "a TensorFlow checkpoint index")
    try:
        tensors, slots, step = catalogued(path, index)
    except (ValueError, TypeError) as err:  # the wire walk's varints and lengths, a field of the wrong type
        raise CheckpointError(f"{where}: expected a TensorFlow checkpoint index, found a damaged one ({err})") from None
    left_out = (f"optimizer state left out ({slots:,} of the file's tensors: slots such as adam_m and adam_v, and "
                "their scalars): no parameters of the model")
    notes = [left_out] if slots else []
    if not tensors:
        raise CheckpointError(f"{where}: expected tensors numpy can read in the checkpoint, found none")
    tied = bert_head_tied(tensors)
    if tied:
        notes.append(BERT_HEAD_NOTE)
    return Checkpoint(path, tensors, step=step, config=beside_config(path, notes), notes=notes, tied=tied or None)


# Google's BERT and ALBERT (run_pretraining.py, get_masked_lm_output): the masked-LM logits are the transformed hidden
# states times the token table, transposed, plus cls/predictions/output_bias; no other output weight is stored
BERT_TOKEN, BERT_OUTPUT_BIAS = "bert/embeddings/word_embeddings", "cls/predictions/output_bias"
BERT_HEAD_NOTE = (f"{BERT_OUTPUT_BIAS!r} beside {BERT_TOKEN!r}: Google's BERT computes its masked-LM logits with the "
                  "token table, transposed, and that bias (run_pretraining.py), so the head is the token table")


def bert_head_tied(tensors: dict[str, TensorInfo]) -> bool:
    """Whether the checkpoint is Google's BERT layout with its masked-LM head: a bias of one value per token row."""
    token, bias = tensors.get(BERT_TOKEN), tensors.get(BERT_OUTPUT_BIAS)
    return token is not None and bias is not None and len(token.shape) == 2 and bias.shape == token.shape[:1]


def beside_config(path: Path, notes: list[str]) -> dict[str, Any]:
    """bert_config.json or hparams.json beside the checkpoint: the settings Google's and OpenAI's releases keep
    there (vocab_size and max_position_embeddings; n_vocab and n_ctx), plain values only."""
    for name in CONFIG_FILES:
        config = path.with_name(name)
        if not files.is_regular(config):
            continue
        try:
            document = files.read_json(config, 1 << 20, "a model config")
        except (ValueError, RecursionError):
            notes.append(f"{name} beside the checkpoint is not JSON: not read")
            return {}
        if isinstance(document, dict):
            return {k: v for k, v in document.items() if isinstance(k, str) and isinstance(v, (str, int, float, bool))}
    return {}
