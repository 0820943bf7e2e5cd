"""Quantized weights in an ONNX graph, and how each is read back to float32. The arithmetic is onnx's reference
DequantizeLinear (onnx/reference/ops/op_dequantize_linear.py and _quant_utils.reshape_input):
float = (q - zero_point) * scale, rounded to the output type (the scale's, or `output_dtype`), where the scale
and zero point are

- one value (per tensor);
- a vector along `axis` (per axis: on a table, axis 0 is a scale per row);
- blocked (opset 21+, `block_size`): q's shape but ceil(dim / block_size) along `axis`, each value covering
  block_size consecutive elements ([V, 1] with block_size d: a scale per row);
- of q's rank, broadcast as numpy does ([V, 1] per row, [1, d] per column): what a scale stored with a
  QOperator weight can look like, since no node spells out its axis.

The layouts that put them beside a weight, named as onnxruntime's quantizer (onnxruntime/quantization) names them:

- QDQ: a DequantizeLinear node whose inputs are all initializers (or Constant outputs): the table takes the
  node's output name, less onnxruntime's "_DequantizeLinear_Output";
- QOperator: `X_quantized` beside `X_scale` and `X_zero_point` (base_quantizer.quantize_initializer_impl;
  a quantized bias also as `X_quantized_scale`), read by Gather, MatMulInteger, QLinearMatMul, ...: a
  vector scale runs along the axis its consumer defines (PER_AXIS_INPUTS);
- GatherBlockQuantized (com.microsoft, matmul_nbits_quantizer.quantize_gather): `X_Q4` (int4 or uint4) with
  `X_scales` and `X_zero_points`, blocked along `quantize_axis`.

Scales and zero points are quantization data, not weights: they leave the catalogue, and so do the scales and
zero points of activations (QUANTIZATION_INPUTS), which are constants of the graph, not parameters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.arrays import to_float32
from ..core.checkpoint import TensorInfo
from ..core.errors import CheckpointError
from ..core.memory import require_memory
from ..core.text import quote

QUANTIZED_DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "int4", "uint4", "int2", "uint2")
SCALE_DTYPES = ("float32", "float16", "bfloat16")
ROUNDED_OUTPUTS = ("float16", "bfloat16")  # an output type narrower than the float32 embscope returns
QUANTIZED_SUFFIXES = ("_quantized", "_q")
SCALE_SUFFIX, ZERO_POINT_SUFFIX = "_scale", "_zero_point"
DEQUANTIZE_OUTPUT_SUFFIX = "_DequantizeLinear_Output"  # onnxruntime's name for a dequantized weight
GATHER_BLOCK_SUFFIX = "_Q4"  # quantize_gather's name for the quantized table, beside "_scales", "_zero_points"
MS_DOMAIN = "com.microsoft"

# Inputs that are a scale or a zero point, by op (onnx's operator specs; the com.microsoft ones as
# onnxruntime's contrib op schemas list them). A float initializer there is quantization data, not a weight.
QUANTIZATION_INPUTS: dict[str, tuple[int, ...]] = {
    "QuantizeLinear": (1, 2), "DequantizeLinear": (1, 2),
    "QLinearMatMul": (1, 2, 4, 5, 6, 7), "QLinearConv": (1, 2, 4, 5, 6, 7),
    "MatMulInteger": (2, 3), "ConvInteger": (2, 3),
    "QLinearAdd": (1, 2, 4, 5, 6, 7), "QLinearMul": (1, 2, 4, 5, 6, 7),
    "QLinearSigmoid": (1, 2, 3, 4), "QLinearLeakyRelu": (1, 2, 3, 4), "QLinearSoftmax": (1, 2, 3, 4),
    "QLinearAveragePool": (1, 2, 3, 4), "QLinearGlobalAveragePool": (1, 2, 3, 4),
    "QGemm": (1, 2, 4, 5, 7, 8), "MatMulIntegerToFloat": (2, 3, 4, 5), "DynamicQuantizeMatMul": (2, 3),
    "GatherBlockQuantized": (2, 3), "MatMulNBits": (2, 3),
}
# (op, input) of a QOperator weight whose vector scale runs along one axis: -1 the last (a MatMul's B is
# scaled per column of B), 0 the first (a Conv's W per output channel)
PER_AXIS_INPUTS: dict[tuple[str, int], int] = {
    ("MatMulInteger", 1): -1, ("QLinearMatMul", 3): -1, ("DynamicQuantizeMatMul", 1): -1,
    ("MatMulIntegerToFloat", 1): -1, ("QGemm", 3): -1, ("QLinearConv", 3): 0, ("ConvInteger", 1): 0,
}


def text(value: str | bytes) -> str:
    """A protobuf string field: python-protobuf hands over bytes when the field is not valid UTF-8."""
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else value


@dataclass(frozen=True)
class Quantized:
    """A quantized weight: its stored parts, and how the scale runs over it (see the module docstring)."""

    name: str
    q: TensorInfo
    scale: TensorInfo
    zero_point: TensorInfo | None
    axis: int | None  # None: a scale of q's rank, broadcast as numpy does (or one value)
    block: int = 0  # blocked along `axis`
    output: str = "float32"  # the dtype DequantizeLinear returns: values are rounded to it
    default_zero: int = 0  # the zero point when none is stored

    def describe(self) -> str:
        how = self.scale_text()
        rounded = f", rounded to {self.output}" if self.output in ROUNDED_OUTPUTS else ""
        return f"{self.q.dtype}, {how}" + (", zero point" if self.zero_point is not None else "") + rounded

    def scale_text(self) -> str:
        rank, shape = len(self.q.shape), self.scale.shape
        if self.scale.numel == 1:
            return "one scale"
        if self.block:
            return f"a scale per {self.block} elements along axis {self.axis}"
        if self.axis is None:  # numpy broadcasting: along the axes where the scale is not 1
            varying = [i for i, d in enumerate(shape) if d != 1]
            axis = varying[0] if len(varying) == 1 else None
        else:
            axis = self.axis
        if rank == 2 and axis in (0, 1):
            return "per-row scale" if axis == 0 else "per-column scale"
        return f"a scale per index of axis {axis}" if axis is not None else f"a scale of shape {list(shape)}"

    def read(self, where: str) -> np.ndarray:
        require_memory(self.q.numel * 4 * (2 if self.block else 1), f"{where} dequantized to float32")
        values = self.q.read().astype(np.float32)  # 4- and 2-bit values arrive unpacked, one a byte
        if self.zero_point is not None:
            values -= self.spread(self.zero_point)
        elif self.default_zero:
            values -= self.default_zero
        # an inf or NaN scale, or a float16 output past 65504, gives inf and NaN as the op does: the rows say so
        # in the answers that read them (numpy's warnings would reach the user's stderr)
        with np.errstate(over="ignore", invalid="ignore"):
            values *= self.spread(self.scale)
            return rounded(values, self.output)

    def spread(self, part: TensorInfo) -> np.ndarray:
        """A scale or zero point shaped to meet q elementwise; a block's value is picked by index, so nothing
        larger than q is ever made, whatever the block size says."""
        values = to_float32(np.asarray(part.read()), part.dtype)
        if values.size == 1:
            return values.reshape(())
        if self.axis is None:
            return values
        if self.block:
            return np.take(values, np.arange(self.q.shape[self.axis]) // self.block, axis=self.axis)
        shape = [1] * len(self.q.shape)
        shape[self.axis] = -1
        return values.reshape(shape)


def rounded(values: np.ndarray, dtype: str) -> np.ndarray:
    """float32 values rounded to a narrower float, as the op's output type holds them (round to nearest even)."""
    if dtype == "float16":
        return values.astype(np.float16).astype(np.float32)
    if dtype == "bfloat16":
        bits = values.view(np.uint32)
        bits += np.uint32(0x7FFF) + ((bits >> 16) & 1)
        bits &= np.uint32(0xFFFF0000)
    return values


def expected_scale_shape(table: Quantized) -> tuple[int, ...] | None:
    """The shape a scale of more than one value must have; None for the numpy-broadcast form (checked apart)."""
    shape = table.q.shape
    if table.axis is None:
        return None
    if table.block:
        return tuple(-(-d // table.block) if i == table.axis else d for i, d in enumerate(shape))
    return (shape[table.axis],)


def check(table: Quantized, where: str) -> Quantized:
    """The parts agree with each other, as the reference op requires, before anything is read."""
    q, scale, zero = table.q, table.scale, table.zero_point
    if q.dtype not in QUANTIZED_DTYPES or scale.dtype not in SCALE_DTYPES:
        raise CheckpointError(f"{where}: expected integer values and a float scale, found {q.dtype} and {scale.dtype}")
    if zero is not None and zero.dtype != q.dtype:
        raise CheckpointError(f"{where}: zero point {quote(zero.name)} is {zero.dtype}, its values {q.dtype}")
    if table.axis is not None and not 0 <= table.axis < max(len(q.shape), 1):
        raise CheckpointError(f"{where}: axis {table.axis} is outside the {len(q.shape)} dimensions of {quote(q.name)}")
    if table.block < 0:
        raise CheckpointError(f"{where}: block size {table.block} is negative")
    expected = expected_scale_shape(table)
    if scale.numel != 1:
        broadcasts = len(scale.shape) == len(q.shape) and all(s in (1, d) for s, d in zip(scale.shape, q.shape))
        if expected is None and not broadcasts or expected is not None and scale.shape != expected:
            wanted = f"one value or {list(expected)}" if expected is not None else \
                "one value or a shape that broadcasts over them"
            raise CheckpointError(f"{where}: scale {quote(scale.name)} has shape {list(scale.shape)}, "
                                  f"expected {wanted} for values of shape {list(q.shape)}")
    if zero is not None and zero.shape != scale.shape and not zero.numel == scale.numel == 1:
        raise CheckpointError(f"{where}: zero point {quote(zero.name)} has shape {list(zero.shape)}, "
                              f"its scale {list(scale.shape)}")
    return table


def attribute(node: Any, name: str, default: int) -> int:
    for attr in node.attribute:
        if text(attr.name) == name:
            return int(attr.i)
    return default


def positive_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def scale_axis(q: TensorInfo, scale: TensorInfo, axis: int) -> int | None:
    """Where a scale runs: a vector along `axis`; a scale of q's rank (a [V, 1] scale given to a 1-D-only
    op) as numpy broadcasts it, which check() holds to the shapes numpy accepts."""
    return None if len(scale.shape) == len(q.shape) > 1 and scale.numel != 1 else positive_axis(axis, len(q.shape))


def from_dequantize_nodes(where: str, graph: Any, tensors: dict[str, TensorInfo], onnx: Any) -> list[Quantized]:
    """QDQ: DequantizeLinear nodes whose every input is a stored tensor (one over an activation is skipped)."""
    found = []
    for node in graph.node:
        inputs = [text(name) for name in node.input]
        if text(node.op_type) != "DequantizeLinear" or text(node.domain) not in ("", "ai.onnx") or len(inputs) < 2:
            continue
        if not node.output or not all(name in tensors for name in inputs if name):
            continue
        q, scale = tensors[inputs[0]], tensors[inputs[1]]
        zero = tensors[inputs[2]] if len(inputs) > 2 and inputs[2] else None
        name = text(node.output[0]).removesuffix(DEQUANTIZE_OUTPUT_SUFFIX)
        block = attribute(node, "block_size", 0)
        axis = positive_axis(attribute(node, "axis", 1), len(q.shape)) if block else \
            scale_axis(q, scale, attribute(node, "axis", 1))
        output = output_dtype(attribute(node, "output_dtype", 0), scale, onnx)
        at = f"{where}: DequantizeLinear node {quote(text(node.name) or name)}"
        found.append(check(Quantized(name, q, scale, zero, axis, block, output), at))
    return found


def output_dtype(code: int, scale: TensorInfo, onnx: Any) -> str:
    """DequantizeLinear's output type: `output_dtype` (opset 23) when set, else the scale's."""
    if not code:
        return scale.dtype
    names = {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.FLOAT16: "float16",
             onnx.TensorProto.BFLOAT16: "bfloat16"}
    return names.get(code, "float32")


def from_gather_blocks(where: str, graph: Any, tensors: dict[str, TensorInfo],
                       taken: set[str]) -> tuple[list[Quantized], int]:
    """GatherBlockQuantized over a stored int4 or uint4 table (what onnxruntime's quantize_gather writes), and how
    many over packed uint8 data (MatMulNBits' convention, not read) were left as stored."""
    found, packed = [], 0
    for node in graph.node:
        inputs = [text(name) for name in node.input]
        if text(node.op_type) != "GatherBlockQuantized" or text(node.domain) != MS_DOMAIN or len(inputs) < 3:
            continue
        data, scales = inputs[0], inputs[2]
        if data not in tensors or scales not in tensors or data in taken:
            continue
        q = tensors[data]
        if q.dtype not in ("int4", "uint4"):
            packed += 1
            continue
        zero = tensors.get(inputs[3]) if len(inputs) > 3 and inputs[3] else None
        axis = positive_axis(attribute(node, "quantize_axis", 1), len(q.shape))
        table = Quantized(data.removesuffix(GATHER_BLOCK_SUFFIX), q, tensors[scales], zero, axis,
                          attribute(node, "block_size", 128), tensors[scales].dtype)
        found.append(check(table, f"{where}: GatherBlockQuantized node {quote(text(node.name) or data)}"))
        taken.add(data)
    return found, packed


def readers(graph: Any) -> dict[str, list[tuple[str, int]]]:
    """For each tensor name, the (op, input position) of every node that reads it: built once per graph."""
    found: dict[str, list[tuple[str, int]]] = {}
    for node in graph.node:
        op = text(node.op_type)
        for i, used in enumerate(node.input):
            found.setdefault(text(used), []).append((op, i))
    return found


def consumers_axis(reading: list[tuple[str, int]]) -> int | None:
    """The axis the ops reading a weight scale it along (PER_AXIS_INPUTS), when they agree on one."""
    axes = {PER_AXIS_INPUTS.get(use) for use in reading}
    axes.discard(None)
    return axes.pop() if len(axes) == 1 else None


def from_names(where: str, graph: Any, tensors: dict[str, TensorInfo], taken: set[str]) -> tuple[list[Quantized], int]:
    """QOperator: X_quantized (or X_q) with X_scale (or X_quantized_scale) beside it; and how many such pairs
    were left as stored because a square weight's vector scale could run along either axis."""
    found, unsure = [], 0
    read_by = readers(graph)
    for name, q in tensors.items():
        suffix = next((s for s in QUANTIZED_SUFFIXES if name.endswith(s)), None)
        base = name[:-len(suffix)] if suffix else ""
        prefix = next((p for p in (base, name) if p and p + SCALE_SUFFIX in tensors), None)
        if not base or prefix is None or name in taken or q.dtype not in QUANTIZED_DTYPES:
            continue
        scale = tensors[prefix + SCALE_SUFFIX]
        axis: int | None = None
        if len(scale.shape) == 1 and scale.numel > 1 and len(q.shape) > 1:
            axis = vector_axis(q, scale, consumers_axis(read_by.get(name, [])))
            if axis is None:
                unsure += 1
                continue
        elif scale.numel > 1 and len(scale.shape) != len(q.shape):
            axis = 0  # a vector over a vector, or a shape check() refuses
        table = Quantized(base, q, scale, tensors.get(prefix + ZERO_POINT_SUFFIX), axis)
        found.append(check(table, f"{where}: tensor {quote(name)}"))
        taken.add(name)
    return found, unsure


def vector_axis(q: TensorInfo, scale: TensorInfo, consumer: int | None) -> int | None:
    """The axis a vector scale of a QOperator weight runs along: the consumer's, else the one dimension its
    length matches; None when both the first and the last match and nothing says which."""
    if consumer is not None:
        return positive_axis(consumer, len(q.shape))
    matches = [i for i, d in enumerate(q.shape) if d == scale.numel]
    if len(matches) == 1:
        return matches[0]
    return None if matches else 0  # no match: check() names the shapes


def quantization_inputs(graph: Any) -> set[str]:
    """Every tensor a quantization op reads as a scale or a zero point."""
    found: set[str] = set()
    for node in graph.node:
        positions = QUANTIZATION_INPUTS.get(text(node.op_type), ())
        inputs = [text(name) for name in node.input]
        found.update(inputs[i] for i in positions if i < len(inputs) and inputs[i])
    return found
