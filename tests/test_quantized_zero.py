"""Most of a table quantized with one scale at zero or within a step of it (analysis.lattice): a stand-in of
text2tashkeel 0.1.0's rawi_v3.int8.onnx (236 x 128, onnxruntime's per-tensor uint8 Gather, step 0.0436: 112 rows at
zero, 48 within one step, its Arabic letters at norms 4 to 7), written here by onnxruntime's own quantize_dynamic.
Before analysis.lattice, the median row sat at the bottom of the lattice and every trained row was an anomaly (the
letters' z up to 113) and 'norm-high' in undertrained."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import run_json
from onnx import TensorProto, helper, numpy_helper

import embscope
from embscope.analysis.norms import judged
from embscope.compute import row_norms

pytest.importorskip("onnxruntime")

V, D, TRAINED = 120, 32, 40
TOKEN = "embedding.weight"


def rows() -> np.ndarray:
    """40 rows trained (a Gaussian at norms 3 to 6), the rest shrunk to a few thousandths of a unit, about the step
    of uint8's one scale over the trained rows' range (about 0.02)."""
    rng = np.random.default_rng(20)
    table = rng.normal(0, 0.002, (V, D))
    table[V // 2:] = rng.normal(0, 0.008, (V - V // 2, D))
    trained = rng.choice(V, TRAINED, replace=False)
    table[trained] = rng.normal(0, 1, (TRAINED, D)) * rng.uniform(3, 6, (TRAINED, 1)) / np.sqrt(D)
    return table.astype(np.float32)


def quantized(folder, table: np.ndarray):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", 8])
    out = helper.make_tensor_value_info("tok", TensorProto.FLOAT, ["batch", 8, D])
    graph = helper.make_graph([helper.make_node("Gather", [TOKEN, "ids"], ["tok"])], "lookup", [ids], [out],
                              [numpy_helper.from_array(table, TOKEN)])
    source, target = folder / "float.onnx", folder / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(source))
    quantize_dynamic(str(source), str(target), per_channel=False, weight_type=QuantType.QUInt8,
                     op_types_to_quantize=["Gather"])
    source.unlink()
    stored = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(target)).graph.initializer}
    q, scale, zero = (stored[f"{TOKEN}{suffix}"] for suffix in ("_quantized", "_scale", "_zero_point"))
    return target, q.astype(np.int64) - int(zero), float(scale)


def test_rows_within_a_step_of_zero_are_judged_apart_and_no_trained_row_is_an_anomaly(tmp_path):
    path, steps, scale = quantized(tmp_path, rows())
    peaks = np.abs(steps).max(axis=1)
    zero, within = np.flatnonzero(peaks == 0), np.flatnonzero(peaks == 1)
    assert len(zero) + len(within) > V / 2 and len(within) >= 8 and len(zero)  # the file is the case at hand
    doc = run_json("norms", "-c", path)
    found = doc["untrained"]
    assert (found["kind"], found["undecided"], found["whole_table"]) == ("at zero", True, False)
    assert [r for g in found["ranges"] for r in range(g["first"], g["last"] + 1)] == within.tolist()
    assert f"{len(within)} rows lie within one quantization step ({scale:.4g}) of zero" in found["evidence"]
    assert f"beside the {len(zero)} rows stored as zero" in found["evidence"]
    # the anomalies are the zero rows alone: the others are measured among themselves, by numpy here
    norms = np.linalg.norm(steps * scale, axis=1)
    others = np.setdiff1d(np.arange(V), np.union1d(zero, within))
    median = np.median(norms[others])
    mad = np.median(np.abs(norms[others] - median))
    assert doc["mad"] == pytest.approx(mad, rel=1e-5)
    assert not (np.abs(norms[others] - median) / (1.4826 * mad) > 6).any()
    assert sorted(a["index"] for a in doc["anomalies"]) == zero.tolist()
    under = run_json("undertrained", "-c", path)
    assert not [c for c in under["candidates"] if "norm-high" in c["signals"]]
    assert {c["id"] for c in under["candidates"]} == set(zero.tolist()) | set(within.tolist())


def test_before_the_rule_the_median_sat_at_zero_and_the_trained_rows_stood_out(tmp_path):
    """What the rule answers: measured with every row, the median and MAD lie within a step or two of zero, and
    the z rule flagged every trained row (as it did the rawi_v3 letters)."""
    _, steps, scale = quantized(tmp_path, rows())
    norms = np.linalg.norm(steps * scale, axis=1)
    median = np.median(norms)
    mad = np.median(np.abs(norms - median))
    assert median <= 2 * scale * np.sqrt(D) and ((norms - median) / (1.4826 * mad) > 6).sum() >= TRAINED


def test_the_same_rows_in_float32_are_on_no_lattice(tmp_path):
    """The float table is no quantized one: no 'at zero' verdict (its rows are judged by the other rules)."""
    table = rows()
    _, untrained = judged(table, row_norms(table), "token")
    assert untrained.kind != "at zero"


def test_a_quantized_table_trained_throughout_gets_no_verdict(tmp_path):
    table = np.random.default_rng(3).normal(0, 1, (V, D)).astype(np.float32)
    path, steps, _ = quantized(tmp_path, table)
    emb = embscope.open(path)
    _, untrained = judged(emb.token.array, row_norms(emb.token.array), "token")
    assert untrained.kind != "at zero" and not (np.abs(steps).max(axis=1) <= 1).any()


@pytest.mark.parametrize("kind", ["one-hot", "multi-hot"])
def test_a_table_of_zeros_and_ones_is_no_quantized_table(tmp_path, kind):
    """A fixed one-hot table (a padding row of zeros above the identity) or a multi-hot one (0/1 features, a few
    rows empty), as safetensors writes it: its values are multiples of 1 and every row is within '1 step' of zero,
    but 1 is the table's own scale, not a quantization step below its values: its rows are told apart at once (the
    identity's rows are orthogonal). The rule judged every row 'at zero', leaving none to measure the rest by
    (norms' median nan). A table quantized with one scale spans many steps (uint8's 255 levels over its range)."""
    from safetensors.numpy import save_file
    rng = np.random.default_rng(5)
    table = np.vstack([np.zeros((1, 99)), np.eye(99)]) if kind == "one-hot" else \
        (rng.random((300, 64)) < 0.05) * np.float64(1)
    table[:5] = 0
    path = tmp_path / "model.safetensors"
    save_file({"model.embed_tokens.weight": table.astype(np.float32)}, str(path))
    doc = run_json("norms", "-c", path)
    assert (doc["untrained"] or {}).get("kind") != "at zero", doc["untrained"]
    assert doc["median"] == pytest.approx(np.median(np.linalg.norm(table, axis=1)))  # every row, numpy's median
