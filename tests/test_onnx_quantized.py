"""Every layout ONNX quantizers write for a weight, built with onnx.helper / numpy_helper (and written by
onnxruntime's own quantizers), each read natively and checked three ways: against numpy's (q - zero_point) * scale
with the broadcasting the layout means, against onnx's reference evaluator running the file's DequantizeLinear,
and, for onnxruntime's layouts, against onnxruntime running the model's own Gather over every row."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run, run_json

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import embscope
from embscope.core.errors import CheckpointError
from embscope.formats import open_checkpoint

V, D = 12, 32
TOKEN = "embeddings.word_embeddings.weight"
RNG = np.random.default_rng(21)
TABLE = RNG.standard_normal((V, D)).astype(np.float32)


def model_of(initializers: dict, nodes: list, outputs: list[str], opset: int = 21, inputs: list | None = None,
             constants: dict | None = None, domains: tuple[str, ...] = ()) -> onnx.ModelProto:
    tensors = [numpy_helper.from_array(value, name) for name, value in initializers.items()]
    made = [helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value))
            for name, value in (constants or {}).items()]
    graph = helper.make_graph(made + nodes, "embscope-test", inputs or [],
                              [helper.make_tensor_value_info(name, TensorProto.UNDEFINED, None) for name in outputs],
                              tensors)
    opsets = [helper.make_opsetid("", opset), *(helper.make_opsetid(d, 1) for d in domains)]
    return helper.make_model(graph, producer_name="embscope-tests", opset_imports=opsets)


def save(model: onnx.ModelProto, folder, external: bool = False):
    path = folder / "model.onnx"
    if external:
        onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                        location="model.onnx_data", size_threshold=0)
    else:
        onnx.save_model(model, str(path))
    return path


def quantize(values: np.ndarray, scale: np.ndarray, zero: np.ndarray, low: int, high: int) -> np.ndarray:
    return np.clip(np.round(values / scale) + zero, low, high)


RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535),
          "int4": (-8, 7), "uint4": (0, 15), "int2": (-2, 1), "uint2": (0, 3)}
ONNX_TYPES = {"int8": TensorProto.INT8, "uint8": TensorProto.UINT8, "int16": TensorProto.INT16,
              "uint16": TensorProto.UINT16, "int4": TensorProto.INT4, "uint4": TensorProto.UINT4,
              "int2": TensorProto.INT2, "uint2": TensorProto.UINT2}


def int_tensor(name: str, values: np.ndarray, dtype: str, typed: bool = False) -> onnx.TensorProto:
    """An integer initializer of any quantized type, as raw bytes (numpy_helper; 4-bit ones through ml_dtypes,
    packed two values a byte), or in the typed int32_data field (onnx.helper.make_tensor with a list)."""
    if typed:
        flat = values.astype(np.int64).reshape(-1).tolist()
        return helper.make_tensor(name, ONNX_TYPES[dtype], list(values.shape), flat)
    import ml_dtypes
    kind = {"int4": ml_dtypes.int4, "uint4": ml_dtypes.uint4, "int2": ml_dtypes.int2, "uint2": ml_dtypes.uint2}.get(
        dtype, dtype)
    return numpy_helper.from_array(values.astype(kind), name)


# (name, dtype, axis, block_size, scale shape, with a zero point): the scale and zero point broadcast as
# the reference's reshape_input does; blocks of 12 do not divide 32 (the last block is short)
DQ_CASES = {
    "per-tensor int8": ("int8", 1, 0, (), False),
    "per-tensor uint8, zero point": ("uint8", 1, 0, (), True),
    "per-row int8 (axis 0)": ("int8", 0, 0, (V,), True),
    "per-row uint8 (axis -2)": ("uint8", -2, 0, (V,), True),
    "per-column int8 (axis 1)": ("int8", 1, 0, (D,), False),
    "per-row int16": ("int16", 0, 0, (V,), True),
    "per-row uint16": ("uint16", 0, 0, (V,), True),
    "per-row int4": ("int4", 0, 0, (V,), False),
    "per-row uint4, zero point": ("uint4", 0, 0, (V,), True),
    "per-row int2 (opset 25)": ("int2", 0, 0, (V,), False),
    "per-column uint2, zero point (opset 25)": ("uint2", 1, 0, (D,), True),
    "blocks of 16 along the row": ("int8", 1, 16, (V, 2), True),
    "blocks of 12, the last short": ("uint8", 1, 12, (V, 3), True),
    "blocks of 5 down the columns": ("int8", 0, 5, (3, D), False),
    "one block a row: a [V, 1] scale": ("int4", 1, D, (V, 1), False),
    "one block a column: a [1, d] scale": ("uint4", 0, V, (1, D), True),
}


def spread(values: np.ndarray, axis: int, block: int) -> np.ndarray:
    """numpy's own statement of each layout: a value per index of `axis`, or per block of `block` along it."""
    if values.ndim == 0:
        return values
    if block:
        return np.repeat(values, block, axis=axis)[(slice(None),) * axis + (slice(None, TABLE.shape[axis]),)]
    shape = [1, 1]
    shape[axis] = -1
    return values.reshape(shape)


def dq_case(case: str, typed: bool = False):
    dtype, axis, block, shape, with_zero = DQ_CASES[case]
    low, high = RANGES[dtype]
    positive = axis % 2
    scale = (RNG.uniform(0.01, 0.05, shape)).astype(np.float32)
    zero = np.zeros(shape, np.int64)
    if with_zero:  # around the middle of an unsigned range, a few steps off zero for a signed one
        zero = RNG.integers((high + 1) // 4, 3 * (high + 1) // 4, shape) if low == 0 else RNG.integers(-2, 3, shape)
    q = quantize(TABLE, spread(scale, positive, block), spread(zero, positive, block), low, high).astype(np.int64)
    expected = (q - spread(zero, positive, block)).astype(np.float32) * spread(scale, positive, block)
    tensors = [int_tensor("W_quantized", q, dtype, typed), numpy_helper.from_array(scale, "W_scale")]
    inputs = ["W_quantized", "W_scale"]
    if with_zero:
        tensors.append(int_tensor("W_zero_point", zero, dtype, typed))
        inputs.append("W_zero_point")
    attributes = {"axis": axis} | ({"block_size": block} if block else {})
    node = helper.make_node("DequantizeLinear", inputs, [f"{TOKEN}_DequantizeLinear_Output"], **attributes)
    model = model_of({}, [node], [f"{TOKEN}_DequantizeLinear_Output"], opset=25 if dtype in ("int2", "uint2") else 21)
    model.graph.initializer.extend(tensors)
    return model, expected, dtype


@pytest.mark.parametrize("stored", ["inline", "external data", "typed field"])
@pytest.mark.parametrize("case", list(DQ_CASES))
def test_dequantize_linear_equals_numpy_and_the_reference_evaluator(case, stored, tmp_path):
    model, expected, dtype = dq_case(case, typed=stored == "typed field")
    external = stored == "external data"
    if external:
        assert all(t.HasField("raw_data") for t in model.graph.initializer)  # so that all go to the data file
    (reference,) = ReferenceEvaluator(model).run(None, {})
    np.testing.assert_array_equal(reference, expected)  # the layout as numpy states it is the layout onnx runs
    emb = embscope.open(save(model, tmp_path, external))
    if external:
        saved = onnx.load(str(tmp_path / "model.onnx"), load_external_data=False)
        assert all(t.data_location == TensorProto.EXTERNAL for t in saved.graph.initializer)
    assert emb.token.name == TOKEN and emb.token.tensor.quantization.startswith(dtype + ", ")
    np.testing.assert_array_equal(emb.token.array, reference)
    assert list(emb.checkpoint.tensors) == [TOKEN]  # the quantized parts are not tensors of their own


def test_descriptions_name_the_layout(tmp_path):
    described = {}
    for case in ("per-tensor uint8, zero point", "per-row int8 (axis 0)", "per-column int8 (axis 1)",
                 "blocks of 12, the last short", "one block a row: a [V, 1] scale"):
        folder = tmp_path / str(len(described))
        folder.mkdir()
        described[case] = embscope.open(save(dq_case(case)[0], folder)).token.tensor.quantization
    assert described == {"per-tensor uint8, zero point": "uint8, one scale, zero point",
                         "per-row int8 (axis 0)": "int8, per-row scale, zero point",
                         "per-column int8 (axis 1)": "int8, per-column scale",
                         "blocks of 12, the last short": "uint8, a scale per 12 elements along axis 1, zero point",
                         "one block a row: a [V, 1] scale": f"int4, a scale per {D} elements along axis 1"}


def test_a_half_precision_scale_rounds_the_output_as_the_op_does(tmp_path):
    q = RNG.integers(-127, 128, (V, D)).astype(np.int8)
    scale = RNG.uniform(0.01, 0.05, V).astype(np.float16)
    node = helper.make_node("DequantizeLinear", ["W_quantized", "W_scale"], [TOKEN], axis=0)
    model = model_of({"W_quantized": q, "W_scale": scale}, [node], [TOKEN])
    (reference,) = ReferenceEvaluator(model).run(None, {})
    assert reference.dtype == np.float16
    emb = embscope.open(save(model, tmp_path))
    assert emb.token.tensor.quantization == "int8, per-row scale, rounded to float16"
    np.testing.assert_array_equal(emb.token.array, reference.astype(np.float32))
    np.testing.assert_array_equal(emb.token.array, (q.astype(np.float32) * scale[:, None]).astype(np.float16))


@pytest.mark.parametrize(("scale", "output"), [(np.float16(60000), 0), (np.float32(1e30), TensorProto.FLOAT16),
                                               (np.float16(np.inf), 0), (np.float32(np.nan), 0)])
def test_scales_that_overflow_or_are_not_numbers_give_the_reference_values_without_a_warning(scale, output,
                                                                                              tmp_path):
    """A float16 output past 65504 is inf, inf times a zero difference NaN, as the reference evaluator gives them;
    numpy's overflow and invalid-value warnings about it are not the user's to read (they reached stderr)."""
    import warnings
    q = RNG.integers(0, 256, (V, D)).astype(np.uint8)
    attributes = {"output_dtype": output} if output else {}
    node = helper.make_node("DequantizeLinear", ["W_quantized", "W_scale", "W_zero_point"], [TOKEN], **attributes)
    model = model_of({"W_quantized": q, "W_scale": scale, "W_zero_point": np.uint8(q[0, 0])}, [node], [TOKEN],
                     opset=23)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (reference,) = ReferenceEvaluator(model).run(None, {})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = embscope.open(save(model, tmp_path)).token.array
    np.testing.assert_array_equal(found, reference.astype(np.float32))
    assert not np.isfinite(found).all()


def test_weights_in_constant_nodes_are_read(tmp_path):
    """A float table held by a Constant node, and a DequantizeLinear whose inputs are all Constants (one of them
    a value_float)."""
    q = RNG.integers(-127, 128, (V, D)).astype(np.int8)
    positions = RNG.standard_normal((7, D)).astype(np.float32)
    scale = helper.make_node("Constant", [], ["W_scale"], value_float=0.02)
    node = helper.make_node("DequantizeLinear", ["W_quantized", "W_scale"], [TOKEN])
    model = model_of({}, [scale, node], [TOKEN, "embeddings.position_embeddings.weight"],
                     constants={"W_quantized": q, "embeddings.position_embeddings.weight": positions})
    token, position = ReferenceEvaluator(model).run(None, {})
    emb = embscope.open(save(model, tmp_path))
    np.testing.assert_array_equal(emb.token.array, token)
    np.testing.assert_array_equal(position, positions)
    np.testing.assert_array_equal(emb.token.array, q.astype(np.float32) * np.float32(0.02))
    np.testing.assert_array_equal(emb.position.array, positions)
    assert emb.position.name == "embeddings.position_embeddings.weight"


def test_a_constant_and_an_initializer_of_one_name_are_refused(tmp_path):
    model = model_of({TOKEN: TABLE}, [], [TOKEN], constants={TOKEN: TABLE})
    with pytest.raises(CheckpointError, match=rf"tensor '{TOKEN}' appears twice"):
        open_checkpoint(save(model, tmp_path))


# ---------------------------------------------------------------- QOperator: X_quantized beside X_scale


def qoperator(scale: np.ndarray, zero: np.ndarray | None, nodes: list | None = None, table: np.ndarray = TABLE,
              name: str = TOKEN):
    q = np.clip(np.round(table / scale) + (zero if zero is not None else 0), -128, 127).astype(np.int8)
    parts = {f"{name}_quantized": q, f"{name}_scale": scale}
    if zero is not None:
        parts[f"{name}_zero_point"] = zero.astype(np.int8)
    expected = (q.astype(np.float32) - (zero if zero is not None else 0)) * scale
    return parts, expected, nodes or []


# the scale shapes a QOperator weight's scale is stored in: numpy broadcasting says what each means
QOPERATOR_SCALES = {
    "one value []": np.float32(0.03),
    "per row [V]": RNG.uniform(0.01, 0.05, V).astype(np.float32),
    "per row [V, 1]": RNG.uniform(0.01, 0.05, (V, 1)).astype(np.float32),
    "per column [1, d]": RNG.uniform(0.01, 0.05, (1, D)).astype(np.float32),
    "per column [d]": RNG.uniform(0.01, 0.05, D).astype(np.float32),
}


@pytest.mark.parametrize("shape", list(QOPERATOR_SCALES))
def test_qoperator_names_with_every_scale_shape(shape, tmp_path):
    scale = QOPERATOR_SCALES[shape]
    zero = np.full(np.shape(scale), 3, np.int8)
    along = {(V,): (slice(None), None), (D,): (None, slice(None))}.get(np.shape(scale), ...)  # numpy's broadcast
    q = np.clip(np.round(TABLE / scale[along]) + zero[along], -128, 127).astype(np.int8)
    expected = (q.astype(np.float32) - zero[along]) * scale[along]
    parts = {f"{TOKEN}_quantized": q, f"{TOKEN}_scale": np.asarray(scale), f"{TOKEN}_zero_point": zero}
    gather = helper.make_node("Gather", [f"{TOKEN}_quantized", "ids"], ["rows"])
    model = model_of(parts, [gather], ["rows"], inputs=[helper.make_tensor_value_info("ids", TensorProto.INT64, [V])])
    emb = embscope.open(save(model, tmp_path))
    np.testing.assert_array_equal(emb.token.array, expected)
    assert set(emb.checkpoint.tensors) == {TOKEN}


def test_a_square_weight_takes_its_axis_from_the_node_that_reads_it(tmp_path):
    """MatMulInteger scales its B per column (onnx's spec: b_zero_point per column); with no such reader, a
    square weight's vector scale could run either way, and the weight is left as stored, with a note."""
    square = RNG.standard_normal((D, D)).astype(np.float32)
    scale = RNG.uniform(0.01, 0.05, D).astype(np.float32)
    parts, expected, _ = qoperator(scale[None, :], None, table=square, name="dense.weight")
    parts["dense.weight_scale"] = scale
    parts["dense.weight_zero_point"] = np.zeros(D, np.int8)
    parts[TOKEN] = TABLE
    matmul = helper.make_node("MatMulInteger", ["x", "dense.weight_quantized", "", "dense.weight_zero_point"], ["y"])
    x = helper.make_tensor_value_info("x", TensorProto.INT8, [1, D])
    emb = embscope.open(save(model_of(parts, [matmul], ["y"], inputs=[x]), tmp_path))
    np.testing.assert_array_equal(emb.checkpoint.tensors["dense.weight"].read(), expected)
    assert emb.checkpoint.tensors["dense.weight"].quantization == "int8, per-column scale, zero point"
    (tmp_path / "alone").mkdir()
    checkpoint = open_checkpoint(save(model_of(parts, [], [TOKEN]), tmp_path / "alone"))
    assert "dense.weight_quantized" in checkpoint.tensors and "dense.weight" not in checkpoint.tensors
    assert ("1 quantized weights are left as stored: each is square, with a vector scale that could run along its "
            "rows or its columns, and no node that reads it says which") in checkpoint.notes


def test_scale_shapes_that_cannot_fit_are_one_clear_error(tmp_path):
    parts, _, _ = qoperator(np.float32(0.02), None)
    parts[f"{TOKEN}_scale"] = np.ones((V, 2), np.float32)
    path = save(model_of(parts, [], [TOKEN]), tmp_path)
    with pytest.raises(CheckpointError, match=rf"scale '{TOKEN}_scale' has shape \[{V}, 2\], expected one value or a "
                                              rf"shape that broadcasts over them for values of shape \[{V}, {D}\]"):
        open_checkpoint(path)
    result = run("info", "-c", path, code=1)
    assert result.stderr.count("\n") == 1


def test_a_zero_point_of_another_type_is_refused_as_the_reference_refuses_it(tmp_path):
    node = helper.make_node("DequantizeLinear", ["W_quantized", "W_scale", "W_zero_point"], [TOKEN], axis=0)
    model = model_of({"W_quantized": np.zeros((V, D), np.int8), "W_scale": np.ones(V, np.float32),
                      "W_zero_point": np.zeros(V, np.uint8)}, [node], [TOKEN])
    with pytest.raises(ValueError, match="Type mismatch"):
        ReferenceEvaluator(model).run(None, {})
    with pytest.raises(CheckpointError, match=r"zero point 'W_zero_point' is uint8, its values int8"):
        open_checkpoint(save(model, tmp_path))


# ---------------------------------------------------------------- written by onnxruntime's quantizers


def float_model(folder, opset: int = 17):
    """A BERT-like embedding graph: two Gathers over float tables, their sum, a MatMul."""
    dense = RNG.standard_normal((D, D)).astype(np.float32)
    positions = RNG.standard_normal((8, D)).astype(np.float32)
    nodes = [helper.make_node("Gather", [TOKEN, "ids"], ["tok"]),
             helper.make_node("Gather", ["embeddings.position_embeddings.weight", "pos_ids"], ["pos"]),
             helper.make_node("Add", ["tok", "pos"], ["h"]),
             helper.make_node("MatMul", ["h", "dense.weight"], ["out"])]
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", 8])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 8, D])
    graph = helper.make_graph(nodes, "bert-like", [ids], [out],
                              [numpy_helper.from_array(TABLE, TOKEN),
                               numpy_helper.from_array(positions, "embeddings.position_embeddings.weight"),
                               numpy_helper.from_array(dense, "dense.weight"),
                               numpy_helper.from_array(np.arange(8, dtype=np.int64)[None], "pos_ids")])
    path = folder / "float.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), str(path))
    return path


def gathered_rows(path, output: str = "tok") -> np.ndarray:
    """What onnxruntime's own session gives for every row of the token table: the Gather's (dequantized) output
    over ids 0..V-1, fed 8 a sequence."""
    import onnxruntime
    model = onnx.load(str(path))
    model.graph.output.append(helper.make_tensor_value_info(output, TensorProto.FLOAT, None))
    ids = np.arange(-(-V // 8) * 8, dtype=np.int64).reshape(-1, 8) % V
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run([output], {"ids": ids})[0].reshape(-1, D)[:V]


class Calibration:
    def __init__(self):
        self.left = 4

    def get_next(self):
        self.left -= 1
        return {"ids": RNG.integers(0, V, (1, 8)).astype(np.int64)} if self.left >= 0 else None


def by_onnxruntime(folder, how: str):
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_dynamic, quantize_static
    source, target = float_model(folder), folder / "model.onnx"
    if how == "dynamic":
        quantize_dynamic(str(source), str(target), per_channel=True, weight_type=QuantType.QInt8,
                         op_types_to_quantize=["Gather", "MatMul"])
    else:
        fmt = QuantFormat.QDQ if how == "static QDQ" else QuantFormat.QOperator
        quantize_static(str(source), str(target), Calibration(), quant_format=fmt, per_channel=True,
                        op_types_to_quantize=["Gather", "MatMul", "Add"])
    source.unlink()
    return target


def stored(path) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}


@pytest.mark.parametrize("how", ["dynamic", "static QDQ", "static QOperator"])
def test_models_onnxruntime_quantized(how, tmp_path):
    """quantize_dynamic and quantize_static (QDQ and QOperator, per channel): the tables equal numpy over the
    file's own initializers and the rows onnxruntime's session gathers; the count is the weights' elements."""
    path = by_onnxruntime(tmp_path, how)
    parts = stored(path)
    q, scale, zero = (parts[f"{TOKEN}{suffix}"] for suffix in ("_quantized", "_scale", "_zero_point"))
    emb = embscope.open(path)
    np.testing.assert_array_equal(emb.token.array, (q.astype(np.float32) - zero) * scale)
    if how != "static QOperator":  # there the Gather's output stays int8, for QLinearAdd
        output = "tok" if how == "dynamic" else "tok_DequantizeLinear_Output"
        np.testing.assert_array_equal(emb.token.array, gathered_rows(path, output))
    dense = emb.checkpoint.tensors["dense.weight"]
    dq, ds, dz = (parts[f"dense.weight{suffix}"] for suffix in ("_quantized", "_scale", "_zero_point"))
    assert ds.shape == (D,)  # per channel: the columns of the MatMul's B
    np.testing.assert_array_equal(dense.read(), (dq.astype(np.float32) - dz) * ds)
    doc = run_json("params", "-c", path)
    assert doc["total"] == V * D + 8 * D + D * D  # token, position, dense: elements, no scale or zero point
    assert doc["quantization_values"] == sum(a.size for n, a in parts.items() if n.endswith(("_scale", "_zero_point")))


def test_the_gather_onnxruntime_quantizes_to_int4_blocks(tmp_path):
    """matmul_nbits_quantizer's quantize_gather: GatherBlockQuantized over X_Q4 (int4 symmetric, uint4 with zero
    points), [V, d / block] scales; the rows equal onnxruntime's own GatherBlockQuantized."""
    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer
    for symmetric in (True, False):
        folder = tmp_path / f"symmetric-{symmetric}"
        folder.mkdir()
        config = DefaultWeightOnlyQuantConfig(block_size=16, is_symmetric=symmetric, quant_format=QuantFormat.QOperator,
                                              op_types_to_quantize=("Gather",), quant_axes=(("Gather", 1),))
        quantizer = MatMulNBitsQuantizer(onnx.load(str(float_model(folder, opset=21))), algo_config=config)
        quantizer.process()
        path = folder / "model.onnx"
        quantizer.model.save_model_to_file(str(path))
        parts = stored(path)
        q, scale = parts[f"{TOKEN}_Q4"].astype(np.float32), parts[f"{TOKEN}_scales"]
        zero = parts[f"{TOKEN}_zero_points"].astype(np.float32) if not symmetric else 0
        assert scale.shape == (V, 2)
        emb = embscope.open(path)
        np.testing.assert_array_equal(emb.token.array, (q - np.repeat(zero, 16, axis=1) if not symmetric else q)
                                      * np.repeat(scale, 16, axis=1))
        np.testing.assert_array_equal(emb.token.array, gathered_rows(path))
        kind = "int4" if symmetric else "uint4"
        assert emb.token.tensor.quantization == f"{kind}, a scale per 16 elements along axis 1" + \
            ("" if symmetric else ", zero point")


# ---------------------------------------------------------------- lies


def dq_model(scale_shape: tuple[int, ...], **attributes) -> onnx.ModelProto:
    node = helper.make_node("DequantizeLinear", ["W_quantized", "W_scale"], [TOKEN], **attributes)
    return model_of({"W_quantized": np.ones((V, D), np.int8), "W_scale": np.full(scale_shape, 0.5, np.float32)},
                    [node], [TOKEN])


DQ_LIES = {
    "a negative block size": (dq_model((V, 1), axis=1, block_size=-4), r"block size -4 is negative"),
    "an axis past the dimensions": (dq_model((V,), axis=5), r"axis 5 is outside the 2 dimensions of 'W_quantized'"),
    "blocks that do not tile": (dq_model((V, 3), axis=1, block_size=16),
                                (rf"scale 'W_scale' has shape \[{V}, 3\], expected one value or \[{V}, 2\] for values "
                                rf"of shape \[{V}, {D}\]")),
    "a vector along the wrong axis": (dq_model((V,), axis=1), rf"expected one value or \[{D}\]"),
}


@pytest.mark.parametrize("case", list(DQ_LIES))
def test_dequantize_linear_that_lies_is_one_clear_error(case, tmp_path):
    model, message = DQ_LIES[case]
    path = save(model, tmp_path)
    with pytest.raises(CheckpointError, match=message):
        open_checkpoint(path)
    result = run("info", "-c", path, code=1)
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1


def test_a_block_larger_than_the_row_is_one_block_and_allocates_nothing_more(tmp_path):
    """block_size 2**40 along rows of 32: ceil(32 / 2**40) = 1 block a row; the scale is picked by index, never
    repeated 2**40 times."""
    model = dq_model((V, 1), axis=1, block_size=2 ** 40)
    (reference,) = ReferenceEvaluator(dq_model((V, 1), axis=1, block_size=D)).run(None, {})
    emb = embscope.open(save(model, tmp_path))
    np.testing.assert_array_equal(emb.token.array, reference)


def test_4_bit_external_data_of_the_wrong_length_is_refused(tmp_path):
    model, _, _ = dq_case("per-row int4")
    path = save(model, tmp_path, external=True)
    edited = onnx.load(str(path), load_external_data=False)
    tensor = next(t for t in edited.graph.initializer if t.name == "W_quantized")
    for entry in tensor.external_data:
        if entry.key == "length":
            entry.value = str(V * D)  # one byte a value: the packed form holds half that
    onnx.save(edited, str(path))
    with pytest.raises(CheckpointError, match=rf"shape \[{V}, {D}\] of int4 needs {V * D // 2} bytes, the external "
                                              rf"data holds {V * D}"):
        open_checkpoint(path)


def test_constants_of_other_kinds_are_left_alone(tmp_path):
    sparse = helper.make_node("Constant", [], ["s"], sparse_value=helper.make_sparse_tensor(
        numpy_helper.from_array(np.ones(2, np.float32)), numpy_helper.from_array(np.array([1, 5], np.int64)), [8]))
    words = helper.make_node("Constant", [], ["w"], value_strings=["a", "b"])
    checkpoint = open_checkpoint(save(model_of({TOKEN: TABLE}, [sparse, words], [TOKEN]), tmp_path))
    assert list(checkpoint.tensors) == [TOKEN]
