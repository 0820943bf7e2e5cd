"""ONNX models (sentence-transformers and optimum exports), read through the `onnx` package: the graph is
never run. The protobuf is parsed whole without its external data, as protobuf requires; each weight
(initializer) becomes a tensor read on demand: inline bytes through numpy_helper, external data
memory-mapped from a file that must lie inside the model's folder.

int8 tables are dequantized on read, float = (q - zero_point) * scale, where the file says how:
- a DequantizeLinear node whose inputs are all initializers: the table takes the node's output name
  (onnxruntime's "_DequantizeLinear_Output" suffix dropped), with its axis and block size;
- otherwise a name pair, `X_quantized` or `X_q` beside `X_scale` (and `X_zero_point`): the table is `X`,
  with one scale, or one per row (a scale per column when its length matches only the columns).
The quantized parts leave the catalogue; the table counts the elements stored."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..arrays import to_float32
from ..checkpoint import Checkpoint, TensorInfo
from ..errors import CheckpointError
from ..memory import require_memory
from ..text import detail, printable, quote
from ._base import OpenOptions, require_package
from ._binary import map_file
from ._checks import check_extent, check_shape, check_tensor_count, is_regular_file, map_array
from ._protobuf_count import graph_counts
from ._state_dict import read_hf_config

if TYPE_CHECKING:
    import numpy as np

    from ..tokenizers.base import Tokenizer

QUANTIZED_SUFFIXES = ("_quantized", "_q")
SCALE_SUFFIX, ZERO_POINT_SUFFIX = "_scale", "_zero_point"
DEQUANTIZE_OUTPUT_SUFFIX = "_DequantizeLinear_Output"  # onnxruntime's name for a dequantized weight
EXPORT_FOLDER = "onnx"  # sentence-transformers and optimum put model.onnx here, config and tokenizer above it

# TensorProto data types embscope reads -> (our name, numpy dtype of the stored bytes)
DTYPES = {"FLOAT": ("float32", "<f4"), "FLOAT16": ("float16", "<f2"), "BFLOAT16": ("bfloat16", "<u2"),
          "DOUBLE": ("float64", "<f8"), "INT8": ("int8", "i1"), "UINT8": ("uint8", "u1"), "INT16": ("int16", "<i2"),
          "UINT16": ("uint16", "<u2"), "INT32": ("int32", "<i4"), "UINT32": ("uint32", "<u4"),
          "INT64": ("int64", "<i8"), "UINT64": ("uint64", "<u8"), "BOOL": ("bool", "?")}
QUANTIZED_DTYPES = ("int8", "uint8", "int16", "uint16", "int32")
SCALE_DTYPES = ("float32", "float16", "bfloat16")


def text(value: str | bytes) -> str:
    """A protobuf string field: python-protobuf hands over bytes when the field is not valid UTF-8."""
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else value


def require_onnx(path: Path) -> Any:
    return require_package("onnx", path, "an ONNX model", "onnx")


def load_model(path: Path, onnx: Any) -> Any:
    from google.protobuf.message import DecodeError
    require_memory(path.stat().st_size, f"{quote(path)} (an ONNX protobuf is parsed whole)")
    counts = graph_counts(map_file(path))  # before the parse, which costs ~1 KB per initializer
    if counts is not None:
        check_tensor_count(counts[0], quote(path), "initializers")
        check_tensor_count(counts[1], quote(path), "graph nodes")
    try:
        return onnx.load(str(path), load_external_data=False)
    except (DecodeError, ValueError, RuntimeError) as err:
        raise CheckpointError(f"{quote(path)}: expected an ONNX protobuf, found bytes onnx cannot parse "
                              f"({detail(err)})") from None


def external_file(model_path: Path, tensor: Any, where: str) -> tuple[Path, int, int | None]:
    """The file, offset and length of a tensor's external data; the file must be inside the model's folder."""
    entries = {text(entry.key): text(entry.value) for entry in tensor.external_data}
    location = entries.get("location", "")
    folder = model_path.parent.resolve()
    try:
        target = (model_path.parent / location).resolve()
    except (ValueError, OSError):  # a NUL byte, a name too long
        raise CheckpointError(f"{where}: external data location {quote(location)} is not a file name") from None
    if not location or Path(location).is_absolute() or not target.is_relative_to(folder) or target == folder:
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


def read_inline(tensor: Any, np_dtype: str) -> np.ndarray:
    import numpy as np
    from onnx import numpy_helper
    array = numpy_helper.to_array(tensor)
    return array.view(np_dtype) if array.dtype.itemsize == np.dtype(np_dtype).itemsize else array.astype(np_dtype)


def typed_count(tensor: Any, onnx: Any) -> int:
    """Elements held in the typed field a data type uses when raw_data is empty."""
    t = onnx.TensorProto
    field = {t.FLOAT: tensor.float_data, t.DOUBLE: tensor.double_data, t.INT64: tensor.int64_data,
             t.UINT32: tensor.uint64_data, t.UINT64: tensor.uint64_data}.get(tensor.data_type, tensor.int32_data)
    return len(field)


def initializer_info(path: Path, tensor: Any, onnx: Any) -> TensorInfo | None:
    """The initializer as a lazy tensor; None for data types embscope does not read (strings, float8, int4)."""
    import numpy as np
    name = text(tensor.name)
    where = f"{quote(path)}: tensor {quote(name)}"
    kind = onnx.TensorProto.DataType.Name(tensor.data_type) if tensor.data_type in \
        onnx.TensorProto.DataType.values() else None
    if kind not in DTYPES:
        return None
    dtype, np_dtype = DTYPES[kind]
    shape = check_shape(tuple(tensor.dims), where)
    needed = math.prod(shape) * np.dtype(np_dtype).itemsize
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        file, offset, length = external_file(path, tensor, where)
        if length is not None and length != needed:
            raise CheckpointError(f"{where}: shape {list(shape)} of {dtype} needs {needed} bytes, "
                                  f"the external data holds {length}")
        check_extent(file, offset, needed, where)
        return TensorInfo(name, shape, dtype, partial(map_array, file, np_dtype, offset, shape),
                          storage=(str(file), offset) if needed else None)
    if tensor.HasField("raw_data"):
        held, unit = len(tensor.raw_data), "bytes"
        expected = needed
    else:
        held, unit = typed_count(tensor, onnx), "values"
        expected = math.prod(shape)
    if held != expected:
        raise CheckpointError(f"{where}: shape {list(shape)} of {dtype} needs {expected} {unit}, "
                              f"the file holds {held}")
    return TensorInfo(name, shape, dtype, partial(read_inline, tensor, np_dtype))


@dataclass(frozen=True)
class Quantized:
    """A dequantized table: its stored parts, and along which axis (or block) the scale runs."""

    name: str
    q: TensorInfo
    scale: TensorInfo
    zero_point: TensorInfo | None
    axis: int
    block: int = 0

    def describe(self) -> str:
        if self.scale.numel == 1:
            how = "one scale"
        elif self.block:
            how = f"a scale per {self.block} elements"
        else:
            how = "per-row scale" if self.axis == 0 else f"a scale per index of axis {self.axis}"
        return f"{self.q.dtype}, {how}" + (", zero point" if self.zero_point is not None else "")

    def read(self, where: str) -> np.ndarray:
        import numpy as np
        require_memory(self.q.numel * 4, f"{where} dequantized to float32")
        values = self.q.read().astype(np.float32)
        if self.zero_point is not None:
            values -= self.broadcast(self.zero_point)
        return values * self.broadcast(self.scale)

    def broadcast(self, part: TensorInfo) -> np.ndarray:
        """A scale or zero point shaped to multiply the values: one value, per index of the axis, or per block."""
        import numpy as np
        values = to_float32(np.asarray(part.read()), part.dtype)
        if values.size == 1:
            return values.reshape(())
        if self.block:
            values = np.repeat(values, self.block, axis=self.axis)
            return np.take(values, range(self.q.shape[self.axis]), axis=self.axis)
        shape = [1] * len(self.q.shape)
        shape[self.axis] = -1
        return values.reshape(shape)


def check_quantized(table: Quantized, where: str) -> Quantized:
    q, scale, zero = table.q, table.scale, table.zero_point
    if q.dtype not in QUANTIZED_DTYPES or scale.dtype not in SCALE_DTYPES:
        raise CheckpointError(f"{where}: expected integer values and a float scale, found {q.dtype} and {scale.dtype}")
    if not 0 <= table.axis < max(len(q.shape), 1):
        raise CheckpointError(f"{where}: axis {table.axis} is outside the {len(q.shape)} dimensions of {quote(q.name)}")
    if table.block:
        expected: tuple[int, ...] = tuple(-(-d // table.block) if i == table.axis else d for i, d in enumerate(q.shape))
    else:
        expected = (q.shape[table.axis],) if q.shape else ()
    if scale.numel != 1 and scale.shape != expected:
        raise CheckpointError(f"{where}: scale {quote(scale.name)} has shape {list(scale.shape)}, "
                              f"expected one value or {list(expected)} for values of shape {list(q.shape)}")
    if zero is not None and zero.shape != scale.shape:
        raise CheckpointError(f"{where}: zero point {quote(zero.name)} has shape {list(zero.shape)}, "
                              f"its scale {list(scale.shape)}")
    return table


def attribute(node: Any, name: str, default: int) -> int:
    for attr in node.attribute:
        if text(attr.name) == name:
            return int(attr.i)
    return default


def from_nodes(path: Path, graph: Any, tensors: dict[str, TensorInfo]) -> list[Quantized]:
    """DequantizeLinear nodes whose every input is an initializer."""
    found = []
    for node in graph.node:
        inputs = [text(name) for name in node.input]
        if text(node.op_type) != "DequantizeLinear" or len(inputs) < 2 or not node.output:
            continue
        if not all(name in tensors for name in inputs if name):
            continue  # it dequantizes an activation, not a weight
        q, scale = tensors[inputs[0]], tensors[inputs[1]]
        zero = tensors[inputs[2]] if len(inputs) > 2 and inputs[2] else None
        name = text(node.output[0]).removesuffix(DEQUANTIZE_OUTPUT_SUFFIX)
        axis = attribute(node, "axis", 1)
        axis = axis + len(q.shape) if axis < 0 else axis
        where = f"{quote(path)}: DequantizeLinear node {quote(text(node.name) or name)}"
        block = attribute(node, "block_size", 0)
        if block < 0:
            raise CheckpointError(f"{where}: block_size {block}, expected 0 (no blocks) or a positive size")
        if block and 0 <= axis < len(q.shape):  # a block past the axis is the whole axis (2**27 was repeated: 8 GB)
            block = min(block, max(q.shape[axis], 1))
        found.append(check_quantized(Quantized(name, q, scale, zero, axis, block), where))
    return found


def from_names(path: Path, tensors: dict[str, TensorInfo], taken: set[str]) -> list[Quantized]:
    """X_quantized / X_q initializers with an X_scale beside them."""
    found = []
    for name, q in tensors.items():
        suffix = next((s for s in QUANTIZED_SUFFIXES if name.endswith(s)), None)
        base = name[:-len(suffix)] if suffix else ""
        if not base or name in taken or base + SCALE_SUFFIX not in tensors:
            continue
        scale = tensors[base + SCALE_SUFFIX]
        rows_or_columns = 1 if q.shape[1:2] == scale.shape and q.shape[:1] != scale.shape else 0
        found.append(check_quantized(Quantized(base, q, scale, tensors.get(base + ZERO_POINT_SUFFIX), rows_or_columns),
                                     f"{quote(path)}: tensor {quote(name)}"))
    return found


def dequantized(path: Path, graph: Any, tensors: dict[str, TensorInfo]) -> dict[str, TensorInfo]:
    tables = from_nodes(path, graph, tensors)
    tables += from_names(path, tensors, {t.q.name for t in tables})
    out = dict(tensors)
    for table in tables:
        for part in (table.q, table.scale, table.zero_point):
            if part is not None:
                out.pop(part.name, None)
    for table in tables:
        where = f"{quote(path)}: tensor {quote(table.name)}"
        if table.name in out:
            raise CheckpointError(f"{where}: a dequantized table and an initializer share the name")
        out[table.name] = TensorInfo(table.name, table.q.shape, "float32", partial(table.read, where),
                                     table.q.storage, quantization=table.describe())
    return out


def tokenizer_above(folder: Path) -> Tokenizer | None:
    """The tokenizer beside the model, else in the folder above an `onnx/` export folder."""
    from ..tokenizers import find_tokenizer
    return find_tokenizer(folder) or find_tokenizer(folder.parent)


def open_onnx(path: Path, options: OpenOptions) -> Checkpoint:
    onnx = require_onnx(path)
    model = load_model(path, onnx)
    tensors, skipped = {}, 0
    for tensor in model.graph.initializer:
        info = initializer_info(path, tensor, onnx)
        if info is None:
            skipped += 1
        elif info.name in tensors:
            raise CheckpointError(f"{quote(path)}: tensor {quote(info.name)} appears twice")
        else:
            tensors[info.name] = info
    tensors = dequantized(path, model.graph, tensors)
    opsets = ", ".join(str(o.version) for o in model.opset_import) or "not recorded"
    notes = [f"ONNX opset {opsets}, producer {printable(text(model.producer_name) or 'not recorded')}; the graph is not run"]
    if skipped:
        notes.append(f"{skipped} initializers of types embscope does not read (strings, float8, int4) are left out")
    quantized = sorted({t.quantization for t in tensors.values() if t.quantization})
    if quantized:
        notes.append(f"tables stored as {'; '.join(quantized)} are dequantized to float32 when read")
    folder = path.parent
    in_export = folder.name == EXPORT_FOLDER and not (folder / "config.json").is_file()
    config = read_hf_config(folder.parent) if in_export else {}  # beside the weights: open_checkpoint reads it
    return Checkpoint(path, "ONNX", tensors, config=config, notes=notes,
                      tokenizer=partial(tokenizer_above, folder) if folder.name == EXPORT_FOLDER else None)
