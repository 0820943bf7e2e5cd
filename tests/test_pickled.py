"""Pickled numpy models (nlm layout, flat dicts, np.save object arrays) and the restricted unpickler."""

from __future__ import annotations

import json
import pickle
import random
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
from conftest import invoke, run_json
from pickle_gadgets import GADGETS, Reduce, assert_error_line, assert_refused, gadget

import embscope
from embscope.core.errors import CheckpointError, EmbscopeError, UnsafePickleError
from embscope.formats import open_checkpoint
from embscope.storage.unpickle import NUMPY_GLOBALS, restricted_load

REPO = Path(__file__).resolve().parents[1]
V, D, T, LAYERS = 4096, 256, 512, 12


class RunInfo:
    """A harmless custom class: loads only with --trust-pickle."""

    def __init__(self, name: str):
        self.name = name


def nlm_params(rng: np.random.Generator, vocab=V, d=D, context=T, layers=LAYERS) -> dict[str, np.ndarray]:
    """nlm's layout: pre-norm blocks with biases everywhere, tied head (no lm_head array)."""
    def w(*shape):
        return rng.standard_normal(shape, dtype=np.float32)
    params = {"token_emb": w(vocab, d), "pos_emb": w(context, d)}
    for i in range(layers):
        p = f"layer{i}."
        params |= {p + "ln1.scale": w(d), p + "ln1.bias": w(d)}
        for m in "qkvo":
            params |= {p + f"attn.w{m}": w(d, d), p + f"attn.b{m}": w(d)}
        params |= {p + "ln2.scale": w(d), p + "ln2.bias": w(d),
                   p + "mlp.fc.w": w(d, 4 * d), p + "mlp.fc.b": w(4 * d),
                   p + "mlp.proj.w": w(4 * d, d), p + "mlp.proj.b": w(d)}
    params |= {"ln_final.scale": w(d), "ln_final.bias": w(d)}
    return params


def small_params(rng, vocab=50, d=8, context=16) -> dict[str, np.ndarray]:
    return nlm_params(rng, vocab, d, context, layers=1)


def dump(path: Path, obj, protocol: int = pickle.HIGHEST_PROTOCOL) -> Path:
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=protocol)
    return path


# --- the worked example: nlm at full shape ---

def test_nlm_worked_example_counts_10_657_280_parameters(tmp_path):
    params = nlm_params(np.random.default_rng(0))
    total = sum(a.size for a in params.values())
    assert total == 10_657_280  # by hand: 4096*256 + 512*256 + 12*789,760 + 512
    path = dump(tmp_path / "model.pkl", {"params": params, "step": 3000, "config": {"vocab_size": V, "d_model": D},
                                         "opt_state": {"m": {k: np.zeros(1) for k in params}}})
    doc = run_json("params", "-c", path)
    assert doc["total"] == total
    assert doc["token"] == V * D == 1_048_576
    assert doc["position"] == T * D == 131_072
    assert doc["output"] is None and doc["tied"] is None  # no head in the file, and nothing says it is tied
    assert doc["shares"]["embeddings"] == pytest.approx((V * D + T * D) / total)
    text = invoke("params", "-c", path).stdout
    assert "1,048,576" in text and "131,072" in text and "1,179,648" in text
    assert "11.07%" in text and "10,657,280" in text


def test_nlm_info_reports_format_step_and_tables(tmp_path):
    params = small_params(np.random.default_rng(1))
    path = dump(tmp_path / "model.pkl", {"params": params, "step": np.int64(120)})
    doc = run_json("info", "-c", path)
    assert doc["format"] == "nlm params pickle"
    assert doc["step"] == 120
    assert doc["tables"]["token"]["name"] == "token_emb" and doc["tables"]["token"]["shape"] == [50, 8]
    assert doc["tables"]["position"]["name"] == "pos_emb" and doc["tables"]["position"]["shape"] == [16, 8]
    assert doc["tables"]["token"]["dtype"] == "float32"
    assert doc["tensors"] == len(params)


def test_values_come_back_unchanged(tmp_path):
    params = small_params(np.random.default_rng(2))
    emb = embscope.open(dump(tmp_path / "m.pkl", {"params": params}))
    np.testing.assert_array_equal(emb.token.array, params["token_emb"])
    np.testing.assert_array_equal(emb.position.array, params["pos_emb"])


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_every_pickle_protocol_opens(tmp_path, protocol):
    params = small_params(np.random.default_rng(protocol))
    params["half"] = params["token_emb"].astype(np.float16)
    params["big_endian"] = params["pos_emb"].astype(">f4")
    ckpt = open_checkpoint(dump(tmp_path / "m.pkl", {"params": params, "step": 5}, protocol))
    for name, array in params.items():
        np.testing.assert_array_equal(ckpt.tensors[name].read(), array)
    assert ckpt.tensors["big_endian"].dtype == "float32" and ckpt.step == 5


def test_numpy_1_module_names_are_allowed(tmp_path):
    """numpy 1.x pickles name numpy.core.multiarray; numpy 2.x writes numpy._core. Both must load."""
    params = small_params(np.random.default_rng(3))
    data = pickle.dumps({"params": params, "step": np.int64(9)}, protocol=2)
    assert b"numpy._core.multiarray\n" in data  # protocol 2 spells globals as text lines
    path = tmp_path / "old.pkl"
    path.write_bytes(data.replace(b"numpy._core.multiarray\n", b"numpy.core.multiarray\n"))
    ckpt = open_checkpoint(path)
    np.testing.assert_array_equal(ckpt.tensors["token_emb"].read(), params["token_emb"])
    assert ckpt.step == 9


def test_flat_dict_with_counter_and_config(tmp_path):
    rng = np.random.default_rng(4)
    wte, wpe = rng.standard_normal((30, 6), dtype=np.float32), rng.standard_normal((12, 6), dtype=np.float32)
    path = dump(tmp_path / "flat.pickle", OrderedDict(
        wte=wte, wpe=wpe, iter_num=np.array(77), config={"vocab_size": np.int64(30), "note": "x", "obj": [1]}))
    ckpt = open_checkpoint(path)
    assert set(ckpt.tensors) == {"wte", "wpe"}
    assert ckpt.step == 77
    assert ckpt.config == {"vocab_size": 30, "note": "x"} and type(ckpt.config["vocab_size"]) is int
    emb = embscope.open(path)
    np.testing.assert_array_equal(emb.token.array, wte)
    np.testing.assert_array_equal(emb.position.array, wpe)


def test_nested_params_are_flattened_with_dots(tmp_path):
    rng = np.random.default_rng(5)
    q = rng.standard_normal((4, 4), dtype=np.float32)
    params = {"token_emb": rng.standard_normal((10, 4), dtype=np.float32),
              "layer0": {"attn": {"q": q}}, "blocks": [{"w": np.ones(3, np.float32)}],
              "name": "not an array", "labels": np.array(["a", "b"])}
    ckpt = open_checkpoint(dump(tmp_path / "nested.p", {"params": params}))
    assert set(ckpt.tensors) == {"token_emb", "layer0.attn.q", "blocks.0.w"}
    np.testing.assert_array_equal(ckpt.tensors["layer0.attn.q"].read(), q)
    assert "1 non-numeric arrays skipped" in ckpt.notes


def test_a_dict_holding_itself_is_an_error_not_a_hang(tmp_path):
    loop = {"w": np.ones(2, np.float32)}
    loop["again"] = loop  # pickle keeps the cycle
    path = dump(tmp_path / "loop.pkl", {"params": {"token_emb": np.ones((3, 2), np.float32), "loop": loop}})
    assert_error_line(invoke("info", "-c", path), "loop.pkl", "a container holding itself")


def test_same_array_twice_is_one_tied_storage(tmp_path):
    params = small_params(np.random.default_rng(6))
    params["lm_head"] = params["token_emb"]  # pickle memoizes the object: stored once
    path = dump(tmp_path / "tied.pkl", {"params": params})
    doc = run_json("info", "-c", path)
    assert doc["tied"] is True and doc["tables"]["output"] is None
    total = run_json("params", "-c", path)["total"]
    assert total == sum(a.size for name, a in params.items() if name != "lm_head")


def test_copy_of_the_token_table_is_tied_and_counted_once(tmp_path):
    params = small_params(np.random.default_rng(7))
    params["lm_head"] = params["token_emb"].copy()  # equal values, a storage of its own
    path = dump(tmp_path / "copy.pkl", {"params": params})
    doc = run_json("params", "-c", path)
    assert doc["tied"] is True and doc["output"] is None
    assert doc["total"] == sum(a.size for name, a in params.items() if name != "lm_head")


def test_np_save_object_dict(tmp_path):
    params = small_params(np.random.default_rng(8))
    path = tmp_path / "model.npy"
    np.save(path, {"params": params, "step": 42, "config": {"context": 16}}, allow_pickle=True)
    doc = run_json("info", "-c", path)
    assert doc["format"] == "numpy .npy (pickled dict)" and doc["step"] == 42
    emb = embscope.open(path)
    np.testing.assert_array_equal(emb.position.array, params["pos_emb"])


def test_np_save_object_array_that_is_not_a_dict(tmp_path):
    path = tmp_path / "objs.npy"
    np.save(path, np.array([{"a": 1}, {"b": 2}], dtype=object), allow_pickle=True)
    assert_error_line(invoke("info", "-c", path), "expected a pickled dict saved with np.save")


def test_pickle_of_a_list_is_rejected(tmp_path):
    path = dump(tmp_path / "list.pkl", [np.ones(3)])
    assert_error_line(invoke("info", "-c", path), "expected a pickled dict of arrays", "found list")


# --- broken files: never a raw exception ---

def test_truncated_pickle(tmp_path):
    data = pickle.dumps({"params": small_params(np.random.default_rng(9))}, protocol=4)
    path = tmp_path / "cut.pkl"
    path.write_bytes(data[: len(data) // 2])
    assert_error_line(invoke("info", "-c", path), "expected a complete pickle")


def test_garbage_with_pickle_suffix(tmp_path):
    path = tmp_path / "noise.pkl"
    path.write_bytes(bytes(random.Random(0).randrange(256) for _ in range(4096)))
    assert_error_line(invoke("info", "-c", path), "noise.pkl")


def test_persistent_id_in_a_plain_pickle_is_an_error(tmp_path):
    class WithPid(pickle.Pickler):
        def persistent_id(self, obj):
            return "ext" if isinstance(obj, RunInfo) else None
    path = tmp_path / "pid.pkl"
    with open(path, "wb") as f:
        WithPid(f, protocol=2).dump({"params": {"x": RunInfo("a")}})
    with pytest.raises(CheckpointError, match="persistent id"):
        open_checkpoint(path)


def test_mutated_pickles_only_raise_embscope_errors():
    """Random byte flips in a real pickle: each load succeeds or raises an EmbscopeError, nothing else."""
    data = bytearray(pickle.dumps({"params": small_params(np.random.default_rng(10), vocab=6, d=3, context=4),
                                   "step": 3, "o": OrderedDict(a=1)}, protocol=2))
    rng = random.Random(1)
    outcomes = set()
    for _ in range(400):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        try:
            restricted_load(bytes(mutated), NUMPY_GLOBALS, "'fuzz'")
            outcomes.add("loaded")
        except EmbscopeError:
            outcomes.add("refused")
    assert outcomes == {"loaded", "refused"}


# --- hostile pickles: refused before anything runs ---

def test_gadgets_really_run_under_plain_pickle(tmp_path, monkeypatch):
    """The hostile files below are real: plain pickle.loads does create the marker."""
    for kind in GADGETS:
        marker = tmp_path / f"ran-{kind}"
        obj, _ = gadget(kind, marker, monkeypatch)
        result = pickle.loads(pickle.dumps(obj))
        if isinstance(result, subprocess.Popen):
            result.wait()
        assert marker.exists(), kind


@pytest.mark.parametrize("kind", GADGETS)
@pytest.mark.parametrize("where", ["beside params", "inside params", "inside a nested dict", "npy object array"])
def test_hostile_pickle_is_refused_by_name(tmp_path, monkeypatch, kind, where):
    marker = tmp_path / "pwned"
    evil, name = gadget(kind, marker, monkeypatch)
    params = small_params(np.random.default_rng(11), vocab=5, d=2, context=3)
    if where == "beside params":
        obj = {"params": params, "meta": evil}
    elif where == "inside params":
        obj = {"params": {**params, "evil": evil}}
    elif where == "inside a nested dict":
        obj = {"params": {**params, "layer0": {"attn": {"q": evil}}}}
    else:
        obj = None
    if obj is None:
        path = tmp_path / "model.npy"
        np.save(path, {"params": params, "extra": [evil]}, allow_pickle=True)
    else:
        path = dump(tmp_path / "model.pkl", obj)
    assert_refused(invoke("info", "-c", path), name, marker)
    with pytest.raises(UnsafePickleError):
        open_checkpoint(path)
    assert not marker.exists()


def test_python2_style_global_is_refused_by_its_python3_name(tmp_path):
    # a protocol 0 pickle naming __builtin__.eval, as Python 2 wrote it
    path = tmp_path / "py2.pkl"
    path.write_bytes(b"c__builtin__\neval\n(S'1+1'\ntR.")
    assert_error_line(invoke("info", "-c", path), "'builtins.eval'")


def test_refusal_happens_before_earlier_allowed_objects_matter(tmp_path):
    """A refused global inside an OrderedDict still stops the load; nothing half-built leaks out."""
    path = dump(tmp_path / "m.pkl", OrderedDict(params=OrderedDict(token_emb=np.ones((3, 2), np.float32),
                                                                   x=Reduce(print, "hi"))))
    with pytest.raises(UnsafePickleError, match="'builtins.print'"):
        open_checkpoint(path)


@pytest.mark.parametrize("raw", [
    b"c_codecs\nencode\n(dS'func'\nI0\nsb.",  # BUILD on an allowed callable
    b"cnumpy._core.multiarray\nscalar\n(N(dS'func'\nI0\nstb.",  # ... with slot state
])
def test_allowed_callables_cannot_be_changed_by_build(tmp_path, raw):
    """BUILD sets attributes on whatever object is on the stack; the allow-list's objects are read-only,
    so a hostile file cannot change them for the next file a long-running process opens."""
    path = tmp_path / "build.pkl"
    path.write_bytes(raw)
    assert_error_line(invoke("info", "-c", path), "build.pkl")
    params = small_params(np.random.default_rng(14))
    ckpt = open_checkpoint(dump(tmp_path / "ok.pkl", {"params": params, "s": np.float32(2)}, protocol=2))
    np.testing.assert_array_equal(ckpt.tensors["token_emb"].read(), params["token_emb"])


def test_build_cannot_reach_numpy_shared_dtypes(tmp_path):
    """np.dtype('f4', 0, 0) returns numpy's shared float32 dtype; in a pickle, numpy.dtype builds only a
    description, so the BUILD that follows changes nothing of numpy's."""
    made = NUMPY_GLOBALS["numpy.dtype"]("f4", False, False)
    assert not isinstance(made, np.dtype)
    path = tmp_path / "dtype.pkl"  # the same call, then BUILD with a big-endian state
    path.write_bytes(b"cnumpy\ndtype\n(S'f4'\nI00\nI00\ntR(I3\nS'>'\nNNNI-1\nI-1\nI0\ntb.")
    with pytest.raises(CheckpointError, match="expected a pickled dict"):
        open_checkpoint(path)
    assert np.dtype("f4").str == "<f4"


# --- --trust-pickle ---

def test_trust_pickle_loads_a_custom_class(tmp_path):
    params = small_params(np.random.default_rng(12))
    path = dump(tmp_path / "custom.pkl", {"params": params, "run": RunInfo("exp1"), "step": 10})
    refused = invoke("info", "-c", path)
    assert_error_line(refused, repr(f"{RunInfo.__module__}.RunInfo"), "--trust-pickle")
    trusted = invoke("info", "-c", path, "--trust-pickle", "--json")
    assert trusted.exit_code == 0, trusted.output
    assert "warning" in trusted.stderr and "--trust-pickle" in trusted.stderr
    doc = json.loads(trusted.stdout)
    assert doc["step"] == 10 and doc["tables"]["token"]["shape"] == [50, 8]


def test_reading_a_pickle_does_not_import_torch(tmp_path):
    dump(tmp_path / "m.pkl", {"params": small_params(np.random.default_rng(13))})
    code = ("import sys, embscope\n"
            f"e = embscope.open({str(tmp_path / 'm.pkl')!r})\n"
            "float(e.token.array.sum())\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, timeout=120)


def test_dtype_states_are_exactly_the_ones_numpy_writes():
    """The allow-list's numpy.dtype accepts a BUILD state only if it equals numpy's own (worked out here
    by numpy itself, for every element type and byte order)."""
    factory = NUMPY_GLOBALS["numpy.dtype"]
    for code in ("b1", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8", "c8", "c16", "O8", "S3", "U2"):
        for order in "<>":
            numpy_dtype = np.dtype(code).newbyteorder(order)
            spec, state = numpy_dtype.__reduce__()[1][0], numpy_dtype.__reduce__()[2]
            made = factory(spec, False, True)
            made.build(state)  # accepted: no error
            assert made.dtype.itemsize == numpy_dtype.itemsize
            if numpy_dtype.itemsize > 1 and code[0] not in "bOS":
                assert made.dtype.byteorder == numpy_dtype.str[0]


def test_protocol_5_arrays_in_band_and_out_of_band(tmp_path):
    """Protocol 5 pickles contiguous arrays through numpy's _frombuffer; in-band they read, read-only and
    without a copy of the data; out-of-band buffers are not in the file, so it cannot be read."""
    params = small_params(np.random.default_rng(15))
    params["fortran"] = np.asfortranarray(params["pos_emb"])
    ckpt = open_checkpoint(dump(tmp_path / "m.pkl", {"params": params}, protocol=5))
    for name, array in params.items():
        read = ckpt.tensors[name].read()
        np.testing.assert_array_equal(read, array)
        assert not read.flags.writeable
    buffers = []
    (tmp_path / "oob.pkl").write_bytes(pickle.dumps({"params": params}, protocol=5, buffer_callback=buffers.append))
    assert buffers
    assert_error_line(invoke("info", "-c", tmp_path / "oob.pkl"), "expected a complete pickle, found one that cannot be "
                                                               "read (UnpicklingError: pickle stream refers to out-of-band data")


def test_numpy_scalars_of_every_kind_become_python_values(tmp_path):
    doc = {"params": small_params(np.random.default_rng(16)), "step": np.uint32(7),
           "config": {"lr": np.float16(0.5), "big": np.int64(-2**40), "flag": np.bool_(True), "name": np.str_("gpt"),
                      "zero_d": np.array(3.25)}}
    for protocol in (2, 4, 5):
        ckpt = open_checkpoint(dump(tmp_path / f"m{protocol}.pkl", doc, protocol))
        assert ckpt.step == 7
        assert ckpt.config == {"lr": 0.5, "big": -2**40, "flag": True, "name": "gpt", "zero_d": 3.25}


def test_a_dtype_pickled_by_numpy_before_1_20_opens(tmp_path):
    """g2pM 0.1.2.5's np_ckpt.pkl (a dict of float32 arrays, pickle protocol 3) was refused: 'refused a numpy dtype
    of 'f4''. numpy before 1.20 reduced a dtype to numpy.dtype('f4', 0, 1), align and copy as ints
    (descriptor.c's arraydescr_reduce: Py_BuildValue("(Nii)", obj, 0, 1)), where numpy now writes False, True. The
    pickle numpy writes today, its dtype arguments turned into those ints, opens to what pickle itself loads."""
    rng = np.random.default_rng(0)
    params = {"embedding.weight": rng.standard_normal((54, 16)).astype(np.float32),
              "logit_layer.2.bias": rng.standard_normal(8).astype(np.float32)}
    data = pickle.dumps(params, protocol=3)
    assert data.count(b"\x89\x88\x87") == 1  # NEWFALSE NEWTRUE TUPLE3: 'f4', False, True, memoized once
    old = data.replace(b"\x89\x88\x87", b"K\x00K\x01\x87")  # BININT1 0, BININT1 1: numpy 1.19's ints
    reference = pickle.loads(old)  # numpy itself: dtype('f4', 0, 1)
    (tmp_path / "np_ckpt.pkl").write_bytes(old)
    checkpoint = open_checkpoint(tmp_path / "np_ckpt.pkl")
    for name, value in reference.items():
        np.testing.assert_array_equal(checkpoint.tensors[name].read(), value)
    # other ints are no flag numpy writes
    (tmp_path / "two.pkl").write_bytes(data.replace(b"\x89\x88\x87", b"K\x02K\x01\x87"))
    with pytest.raises(UnsafePickleError, match="refused a numpy dtype of 'f4'"):
        open_checkpoint(tmp_path / "two.pkl")
