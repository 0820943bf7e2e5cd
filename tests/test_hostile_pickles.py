"""No code from a file ever runs: the cross-reader suite of hostile pickles.

tests/test_pickled.py and tests/test_pytorch_file.py refuse the five gadgets of pickle_gadgets.py
in the places those readers keep things (beside and inside a params dict, a nested dict, a .npy
object array, a torch checkpoint's config). This suite adds what they leave out: every pickle
protocol (0 to 5) in every pickle-reading path, a gadget inside a torch tensor's storage record
(the persistent id) and inside the arguments of an allowed rebuild function, the gadgets that
reach code through allowed-looking helpers (copyreg._reconstructor, functools.partial, INST and
OBJ opcodes, the extension registry), object arrays inside .npz files, and pickles built to
exhaust memory with a few bytes. Each refusal exits 1 with one line naming the global, and each
test shows its marker file was not created."""

from __future__ import annotations

import copyreg
import functools
import io
import json
import os
import pickle
import struct
import subprocess
import sys
import tracemalloc
import zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
from conftest import invoke
from pickle_gadgets import GADGETS, Reduce, assert_error_line, assert_refused, gadget

from embscope.core.errors import CheckpointError, UnsafePickleError
from embscope.formats import open_checkpoint

PROTOCOLS = range(pickle.HIGHEST_PROTOCOL + 1)
CONTAINERS = ("nlm .pkl", ".npy object array", "torch zip data.pkl")


def params() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {"token_emb": rng.standard_normal((5, 2)).astype(np.float32),
            "pos_emb": rng.standard_normal((3, 2)).astype(np.float32)}


# -- writers: the same object in each pickle-reading path, at a chosen protocol ------------------

class Storage:
    """Pickled as torch pickles a storage: by persistent id ('storage', kind, key, location, numel)."""

    def __init__(self, kind, key, location="cpu", numel=8):
        self.record = ("storage", kind, key, location, numel)


class Tensor:
    """Pickled as torch pickles a tensor: _rebuild_tensor_v2(storage, offset, size, stride, grad, hooks)."""

    def __init__(self, storage: Storage, hooks=None):
        self.storage, self.hooks = storage, OrderedDict() if hooks is None else hooks

    def __reduce__(self):
        import torch
        return torch._utils._rebuild_tensor_v2, (self.storage, 0, (8,), (1,), False, self.hooks)


class TorchLikePickler(pickle.Pickler):
    def persistent_id(self, obj):
        return obj.record if isinstance(obj, Storage) else None


def real_torch_zip(directory: Path) -> Path:
    """A real torch.save file with one float32 storage '0' of 8 elements, to put data.pkl files in."""
    import torch
    path = directory / "real.pt"
    if not path.exists():
        torch.save({"w": torch.arange(8, dtype=torch.float32)}, path)
    return path


def torch_zip_with(directory: Path, obj, protocol: int, name: str = "ckpt.pt") -> Path:
    buffer = io.BytesIO()
    TorchLikePickler(buffer, protocol=protocol).dump(obj)
    path = directory / name
    with zipfile.ZipFile(real_torch_zip(directory)) as src, zipfile.ZipFile(path, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, buffer.getvalue() if info.filename.endswith("/data.pkl") else src.read(info))
    return path


def npy_object_with(path: Path, obj, protocol: int) -> Path:
    """What np.save(path, obj, allow_pickle=True) writes, at any pickle protocol."""
    array = np.empty((), dtype=object)
    array[()] = obj
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "|O", "fortran_order": False, "shape": ()})
    path.write_bytes(b"\x93NUMPY\x01\x00" + header.getvalue()[8:] + pickle.dumps(array, protocol=protocol))
    return path


def write(container: str, directory: Path, evil, protocol: int) -> Path:
    if container == "nlm .pkl":
        path = directory / "model.pkl"
        path.write_bytes(pickle.dumps({"params": params(), "meta": {"hook": evil}}, protocol=protocol))
        return path
    if container == ".npy object array":
        return npy_object_with(directory / "model.npy", {"params": params(), "extra": [evil]}, protocol)
    import torch
    storage = Storage(torch.FloatStorage, "0")
    # the gadget first: protocol 0 can only write a persistent id as text, which the reader refuses
    return torch_zip_with(directory, {"config": evil, "model": {"transformer.wte.weight": Tensor(storage)}}, protocol)


def test_the_writers_make_files_that_open(tmp_path):
    """Without a gadget, each container opens: the refusals below are about the gadget alone."""
    for container in CONTAINERS:
        directory = tmp_path / container.replace(" ", "_")
        directory.mkdir()
        for protocol in PROTOCOLS:
            if container == "torch zip data.pkl" and protocol == 0:
                continue  # protocol 0 writes persistent ids as text; torch's are tuples
            checkpoint = open_checkpoint(write(container, directory, {"lr": 0.1}, protocol))
            assert checkpoint.tensors, (container, protocol)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_gadgets_run_under_plain_pickle_at_every_protocol(protocol, tmp_path, monkeypatch):
    for kind in GADGETS:
        marker = tmp_path / f"ran-{kind}-{protocol}"
        evil, _ = gadget(kind, marker, monkeypatch)
        result = pickle.loads(pickle.dumps(evil, protocol=protocol))
        if isinstance(result, subprocess.Popen):
            result.wait()
        assert marker.exists(), (kind, protocol)


@pytest.mark.parametrize("container", CONTAINERS)
@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("kind", GADGETS)
def test_every_gadget_at_every_protocol_in_every_pickle_path(kind, protocol, container, tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    evil, name = gadget(kind, marker, monkeypatch)
    path = write(container, tmp_path, evil, protocol)
    assert_refused(invoke("info", "-c", path), name, marker)


# -- torch: gadgets where only a torch zip can hold them -------------------------------------------

@pytest.mark.parametrize("field", ["kind", "key", "location", "numel"])
@pytest.mark.parametrize("protocol", [2, 4])
def test_gadget_inside_a_tensors_storage_record(field, protocol, tmp_path, monkeypatch):
    """The persistent id is unpickled like everything else: a gadget in any of its fields is refused
    before the storage loader ever sees the record."""
    import torch
    marker = tmp_path / "pwned"
    evil, name = gadget("os.system", marker, monkeypatch)
    fields = {"kind": torch.FloatStorage, "key": "0", "location": "cpu", "numel": 8, field: evil}
    storage = Storage(fields["kind"], fields["key"], fields["location"], fields["numel"])
    path = torch_zip_with(tmp_path, {"transformer.wte.weight": Tensor(storage)}, protocol)
    assert_refused(invoke("info", "-c", path), name, marker)


@pytest.mark.parametrize("kind", GADGETS)
def test_gadget_inside_the_arguments_of_an_allowed_rebuild_function(kind, tmp_path, monkeypatch):
    """_rebuild_tensor_v2 is allowed; a gadget passed to it as backward hooks is not."""
    import torch
    marker = tmp_path / "pwned"
    evil, name = gadget(kind, marker, monkeypatch)
    tensor = Tensor(Storage(torch.FloatStorage, "0"), hooks=OrderedDict(hook=evil))
    path = torch_zip_with(tmp_path, {"transformer.wte.weight": tensor}, 2)
    assert_refused(invoke("info", "-c", path), name, marker)


def test_gadget_as_the_storage_type_in_a_persistent_id_written_by_hand(tmp_path):
    """A protocol 0 data.pkl whose persistent id names os.system as the storage class (BINPERSID on a tuple)."""
    marker = tmp_path / "pwned"
    raw = (b"(S'storage'\ncos\nsystem\n(S'touch " + str(marker).encode() + b"'\ntRS'0'\nS'cpu'\nI8\ntQ.")
    buffer = io.BytesIO(raw)
    path = tmp_path / "hand.pt"
    with zipfile.ZipFile(real_torch_zip(tmp_path)) as src, zipfile.ZipFile(path, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, buffer.getvalue() if info.filename.endswith("/data.pkl") else src.read(info))
    assert_refused(invoke("info", "-c", path), "os.system", marker)


# -- helpers that reach code while looking harmless ------------------------------------------------

class Plain:
    """A harmless class of the user's own: protocol 0 and 1 pickle it through copyreg._reconstructor."""

    def __init__(self):
        self.x = 1


def partial_gadget(marker: Path):
    return functools.partial(os.system, f"touch {marker}")


@pytest.mark.parametrize("container", [c for c in CONTAINERS if "torch" not in c])
def test_copyreg_reconstructor_is_refused(container, tmp_path):
    path = write(container, tmp_path, Plain(), protocol=0)
    assert pickle.dumps(Plain(), protocol=0).startswith(b"ccopy_reg\n_reconstructor")
    assert_error_line(invoke("info", "-c", path), "'copyreg._reconstructor'")


def test_copyreg_reconstructor_over_object_in_a_torch_file_is_a_record(tmp_path):
    """In torch files, _reconstructor(cls, object, None) of a class off the list is how protocol 1 writes an object
    of attributes (each module of a whole pickled model): it becomes the record of its attributes, as NEWOBJ with no
    arguments does, and nothing of its class is imported or run. Any other base stays refused (test_whole_model)."""
    path = write("torch zip data.pkl", tmp_path, Plain(), protocol=1)
    with zipfile.ZipFile(path) as archive:
        data = next(archive.read(name) for name in archive.namelist() if name.endswith("/data.pkl"))
    assert b"copy_reg\n_reconstructor" in data
    assert open_checkpoint(path).config["x"] == 1


def test_copyreg_reconstructor_would_build_any_class(tmp_path):
    """Why it must be refused: _reconstructor(cls, object, None) makes an instance of any class named,
    here subprocess.Popen, whose construction a later BUILD or REDUCE could drive."""
    marker = tmp_path / "pwned"
    raw = b"ccopy_reg\n_reconstructor\n(csubprocess\nPopen\nc__builtin__\nobject\nNtR."
    path = tmp_path / "model.pkl"
    path.write_bytes(raw)
    line = assert_error_line(invoke("info", "-c", path), "refused to unpickle global 'copyreg._reconstructor'")
    assert "nothing in it was run" in line and not marker.exists()


@pytest.mark.parametrize("container", CONTAINERS)
@pytest.mark.parametrize("protocol", [0, 2, 5])
def test_functools_partial_wrapping_a_gadget(container, protocol, tmp_path):
    marker = tmp_path / "pwned"
    evil = Reduce(partial_gadget(marker))  # calling the partial would run os.system
    pickle.loads(pickle.dumps(evil, protocol=protocol))
    assert marker.exists()  # the gadget is real
    marker.unlink()
    path = write(container, tmp_path, evil, protocol)
    assert_refused(invoke("info", "-c", path), "functools.partial", marker)


@pytest.mark.parametrize("raw, name", [
    (b"(ios\nsystem\nS'touch {marker}'\n.", "os.system"),  # INST: protocol 0's call-a-class opcode
    (b"(cos\nsystem\nS'touch {marker}'\no.", "os.system"),  # OBJ: protocol 1's
    (b"\x80\x02cbuiltins\ngetattr\ncbuiltins\n__import__\nX\x02\x00\x00\x00os\x85R\x8c\x06system\x86R.", "builtins.getattr"),
    (b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00\x8c\x02os\x94\x8c\x06system\x94\x93.", "os.system"),  # STACK_GLOBAL
    (b"\x80\x02cnumpy\nndarray\n(cos\nsystem\ntb.", "os.system"),  # a gadget as BUILD state of an allowed type
])
def test_hand_written_opcode_gadgets(raw, name, tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "model.pkl"
    path.write_bytes(raw.replace(b"{marker}", str(marker).encode()))
    assert_refused(invoke("info", "-c", path), name, marker)


def test_extension_registry_codes_go_through_the_allow_list(tmp_path):
    """EXT1 names a global by a number from copyreg's registry: registered, it is still refused by name;
    unregistered, it is a broken pickle."""
    path = tmp_path / "model.pkl"
    path.write_bytes(b"\x80\x02\x82\xf0.")  # EXT1 240
    assert_error_line(invoke("info", "-c", path), "cannot be read")
    copyreg.add_extension("posix", "system", 240)
    try:
        assert_error_line(invoke("info", "-c", path), "refused to unpickle global 'posix.system'")
    finally:
        copyreg.remove_extension("posix", "system", 240)


# -- .npz: object members are refused without numpy's unpickler ------------------------------------

@pytest.mark.parametrize("kind", GADGETS)
def test_npz_object_member_is_refused_by_name(kind, tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    evil, name = gadget(kind, marker, monkeypatch)
    path = tmp_path / "params.npz"
    np.savez(path, token_emb=params()["token_emb"], evil=np.array([evil], dtype=object))
    assert_refused(invoke("info", "-c", path), name, marker)


def test_npz_object_member_without_a_gadget_is_still_refused(tmp_path):
    path = tmp_path / "params.npz"
    np.savez_compressed(path, token_emb=params()["token_emb"], meta=np.array([{"lr": 0.1}], dtype=object))
    line = assert_error_line(invoke("info", "-c", path), "array 'meta': holds pickled Python objects, not plain arrays")
    assert line.startswith("Error: '")


# -- a few bytes that ask for gigabytes ------------------------------------------------------------

def long1(n: int) -> bytes:
    data = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(data)]) + data


MEMORY_BOMBS = {
    # the C unpickler sizes its memo array by the largest index: 2**26 entries, 512 MiB zeroed
    # (2**31 would be 32 GiB; this size keeps a regression of this test survivable)
    "memo index 2**25": (b"\x80\x02}r" + struct.pack("<I", 2**25) + b".", None),
    # bytearray(2**34) zeroes 16 GiB
    "bytearray of a size": (b"\x80\x02cbuiltins\nbytearray\n" + long1(2**34) + b"\x85R.", "bytearray may be built"),
    # numpy's _reconstruct with a huge object shape allocates (and fills) it before any state is set
    "object array by shape": (b"\x80\x02cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\n" + long1(2**31)
                              + b"\x85U\x01O\x87R.", "_reconstruct is allowed only for an empty ndarray"),
}


@pytest.mark.parametrize("case", list(MEMORY_BOMBS))
def test_small_pickle_cannot_make_us_allocate_gigabytes(case, tmp_path):
    raw, message = MEMORY_BOMBS[case]
    path = tmp_path / "model.pkl"
    path.write_bytes(raw)
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointError) as caught:
            open_checkpoint(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"{peak / 2**20:.0f} MiB allocated for a {len(raw)}-byte pickle"
    if message:
        assert message in str(caught.value)


def test_refusal_is_an_unsafe_pickle_error_in_the_library(tmp_path, monkeypatch):
    """Library callers can tell a refusal from a broken file."""
    marker = tmp_path / "pwned"
    evil, name = gadget("builtins.exec", marker, monkeypatch)
    for container in CONTAINERS:
        directory = tmp_path / container.replace(" ", "_")
        directory.mkdir()
        with pytest.raises(UnsafePickleError, match=f"refused to unpickle global '{name}'"):
            open_checkpoint(write(container, directory, evil, 2))
    assert not marker.exists()


# -- numpy's __setstate__ trusts its input: states numpy never writes could crash the process ---------

def numpy_state_attack(kind: str) -> bytes:
    valid = pickle.dumps({"params": params()}, protocol=4)
    canonical = b"\x8c\x01<\x94NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00t"  # dtype('<f4') state, 8 fields
    assert valid.count(canonical) == 1
    if kind == "dtype state of six fields":  # found by the fuzzer: a segfault in _multiarray_umath
        return valid.replace(canonical, b"\x8c\x01<\x94NJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00t")
    if kind == "dtype state with a false element size":
        return valid.replace(canonical, b"\x8c\x01<\x94NNNJ\x00\x01\x00\x00J\xff\xff\xff\xffK\x00t")
    if kind == "array state with more elements than data":
        return valid.replace(b"K\x05K\x02\x86", b"K\x50K\x02\x86", 1)  # shape (5, 2) -> (80, 2)
    raise ValueError(kind)


NUMPY_STATE_REFUSALS = {
    "dtype state of six fields": "refused a numpy dtype state numpy does not write for f4",
    "dtype state with a false element size": "refused a numpy dtype state numpy does not write for f4",
    "array state with more elements than data": "array 'token_emb': an array of shape [80, 2] and dtype <f4 needs "
                                                "640 bytes, its pickle holds 40",
}


@pytest.mark.parametrize("kind", list(NUMPY_STATE_REFUSALS))
def test_numpy_states_numpy_never_writes_are_refused(kind, tmp_path):
    path = tmp_path / "model.pkl"
    path.write_bytes(numpy_state_attack(kind))
    # in a child process: were the check missing, the crash would take the test runner with it
    code = ("import sys, embscope; from embscope.core.errors import EmbscopeError\n"
            "from embscope.analysis.norms import row_norms\n"
            "try:\n    row_norms(embscope.open(sys.argv[1]).token.array)\n"
            "except EmbscopeError as err:\n    print(err); sys.exit(1)\n")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env,
                          timeout=60, check=False)
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr[-2000:])
    assert NUMPY_STATE_REFUSALS[kind] in done.stdout


# -- every attack class, in every pickle container, in a child under memory and time limits --

import pickles as pk

PICKLE_CONTAINERS = list(pk.CONTAINERS)  # .pkl, .npy object, .npz object member, torch zip, legacy torch
REFUSED_NDARRAY = "refused to call numpy.ndarray: a pickle of arrays and tensors only passes it to the functions"
OBJECT_MEMBER = "holds pickled Python objects, not plain arrays"  # an .npz refuses any object member at last


def uaf() -> bytes:
    """r11: A = ndarray((N,), 'u1'); V = ndarray(shape, 'f4', buffer=A); BUILD on A frees V's memory."""
    a = pk.call(pk.glob("numpy", "ndarray"), pk.tup(pk.i(65536)), pk.s("u1")) + b"q\x10"
    v = pk.call(pk.glob("numpy", "ndarray"), pk.tup(pk.i(4096), pk.i(4)), pk.s("f4"), a) + b"q\x11"
    state = pk.tup(pk.i(1), pk.tup(pk.i(1)), pk.dtype("u1"), pk.FALSE, pk.b(b"x"))
    return v + b"h\x10" + state + b"b0"


def view(shape: tuple[int, ...], strides: tuple[int, ...]) -> bytes:
    return pk.call(pk.glob("numpy", "ndarray"), pk.tup(*map(pk.i, shape)), pk.s("f4"), pk.b(b"\0\0\x80?"),
                   pk.i(0), pk.tup(*map(pk.i, strides)))


def deep_key(depth: int) -> bytes:
    return b"}" + b")" + b"\x85" * depth + pk.s("v") + b"s"


# attack -> (as the table or beside it, payload by container (None: the class has no form there), what happens:
# a fragment of the one error line, or "ok" for a correct answer)
ATTACKS = {
    "use after free through ndarray(buffer=) and BUILD (r11)": ("table", lambda c: uaf(), REFUSED_NDARRAY),
    "stride-0 ndarray view of 2**40 rows (r01)": ("table", lambda c: view((2**40, 4), (0, 0)), REFUSED_NDARRAY),
    "set over a stride-0 view of 2**62 bytes (r02)": (
        "extra", lambda c: pk.call(pk.glob("builtins", "set"), view((2**62,), (0,))), REFUSED_NDARRAY),
    "set over an array description": (
        "extra", lambda c: pk.call(pk.glob("builtins", "set"), pk.numpy_body(pk.TABLE)),
        "refused a set built from a numpy array, not a list of values"),
    "object array called by shape (r03)": (
        "extra", lambda c: pk.call(pk.glob("numpy", "ndarray"), pk.tup(pk.i(2**28)), pk.s("O")), REFUSED_NDARRAY),
    "object array reconstructed by shape (r05)": (
        "extra", lambda c: pk.call(pk.glob("numpy._core.multiarray", "_reconstruct"), pk.glob("numpy", "ndarray"),
                                   pk.tup(pk.i(2**31)), pk.s("O")),
        "numpy's _reconstruct is allowed only for an empty ndarray"),
    "dtype state of six fields (r05)": (
        "extra", lambda c: pk.dtype("f4", pk.tup(pk.i(3), pk.s("<"), pk.NONE, pk.i(-1), pk.i(-1), pk.i(0))),
        "refused a numpy dtype state numpy does not write for f4"),
    "BUILD on numpy's shared float32 (r05b)": (
        "extra", lambda c: pk.call(pk.glob("numpy", "dtype"), pk.s("f4"), pk.FALSE, pk.FALSE)
        + pk.tup(pk.i(3), pk.s(">"), pk.NONE, pk.NONE, pk.NONE, pk.i(-1), pk.i(-1), pk.i(0)) + b"b", "ok"),
    "array state with more elements than its data": (
        "table", lambda c: pk.reconstructed((80, 2), "f4", bytes(40)), "needs 640 bytes, its pickle holds 40"),
    "bytearray of a size": (
        "extra", lambda c: pk.call(pk.glob("builtins", "bytearray"), pk.i(2**34)),
        "bytearray may be built from bytes or latin1 text only"),
    "BYTEARRAY8 claiming 16 GiB": (
        "extra", lambda c: b"\x96" + struct.pack("<Q", 2**34) + b"ab",
        "BYTEARRAY8 of 17179869184 bytes runs past the end of the pickle"),
    "memo index 2**31": ("extra", lambda c: pk.NONE + b"r" + struct.pack("<I", 2**31), "ok"),
    "dict key nested 100,000 deep": ("extra", lambda c: deep_key(100_000), "nested more than 64 levels deep"),
    "torch view repeating its storage 1024 times (r21)": (
        "table", lambda c: pk.torch_tensor((1024 * 40, 1), (0, 1), legacy=c == "torch-legacy")
        if c.startswith("torch") else None, "repeats elements of storage '0'"),
    "storage declaring 10**12 elements (r18)": (
        "table", lambda c: pk.torch_tensor(numel=10**12, legacy=c == "torch-legacy") if c.startswith("torch") else None,
        {"torch-zip": "storage '0' declares 1000000000000 float32 elements", "torch-legacy": "declared twice"}),
    "tensor size of 2**600": (
        "table", lambda c: pk.torch_tensor((2**600,), (1,), legacy=c == "torch-legacy") if c.startswith("torch") else None,
        "expected a tensor size of non-negative integers, found (an integer of 601 bits,)"),
}
UNSAFE = ("refused", "_reconstruct is allowed", "bytearray may be built")  # refusals the .npz scan reports too


def expected(attack: str, container: str) -> str:
    _, _, outcome = ATTACKS[attack]
    outcome = outcome[container] if isinstance(outcome, dict) else outcome
    if container == "npz-object" and not any(word in outcome for word in UNSAFE):
        return OBJECT_MEMBER  # the member is refused whatever it holds; only a refusal by name is reported
    return outcome


CHILD = """
import json, os, sys
import numpy as np
import embscope
from embscope.core.errors import EmbscopeError
from embscope.analysis.norms import row_norms
import resource
limit = int(open("/proc/self/statm").read().split()[0]) * os.sysconf("SC_PAGE_SIZE") + (1 << 30)
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
for line in sys.stdin:
    case, path = json.loads(line)
    try:
        emb = embscope.open(path)
        row_norms(emb.token.array)
        result = {"ok": True, "float32": np.dtype("f4").str, "table": emb.token.array[:2].tolist()}
    except EmbscopeError as err:
        result = {"error": str(err)}
    print(json.dumps([case, result]), flush=True)
"""


@pytest.fixture(scope="module")
def attack_results(tmp_path_factory) -> dict:
    """Every (attack, container) file opened and its table's norms computed, in one child process limited to
    1 GiB more than its imports and to 120 s: a crash, a hang or a bomb fails the cases it did not finish."""
    base = tmp_path_factory.mktemp("attacks")
    lines = []
    for n, (attack, (place, payload, _)) in enumerate(ATTACKS.items()):
        for container in PICKLE_CONTAINERS:
            body = payload(container)
            if body is None:
                continue
            directory = base / f"{n}-{container}"
            directory.mkdir()
            table, extra = (body, pk.NONE) if place == "table" and container != "npz-object" else (None, body)
            path = pk.write(container, directory, table, extra)
            lines.append(json.dumps([f"{attack}|{container}", str(path)]))
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    try:
        done = subprocess.run([sys.executable, "-c", CHILD], input="\n".join(lines) + "\n", capture_output=True,
                              text=True, env=env, timeout=120, check=False)
        out, died = done.stdout, (done.returncode, done.stderr[-1500:])
    except subprocess.TimeoutExpired as err:
        out, died = (err.stdout or b"").decode() if isinstance(err.stdout, bytes) else (err.stdout or ""), "timeout"
    results = dict(json.loads(line) for line in out.splitlines())
    return {"results": results, "died": died}


# the torch attacks have no form in the numpy containers
ATTACK_CASES = [(attack, container) for attack, (_, payload, _) in ATTACKS.items() for container in PICKLE_CONTAINERS
                if payload(container) is not None]


@pytest.mark.parametrize("attack, container", ATTACK_CASES)
def test_attack_class_in_every_container_ends_in_one_line_or_a_correct_answer(attack, container, attack_results):
    case = f"{attack}|{container}"
    assert case in attack_results["results"], f"the child died or hung before this case: {attack_results['died']}"
    result, wanted = attack_results["results"][case], expected(attack, container)
    if wanted == "ok":
        assert result.get("ok"), result
        assert result["float32"] == "<f4"  # numpy's shared dtype untouched by the file
        np.testing.assert_allclose(result["table"], pk.TABLE[:2], rtol=1e-6)
    else:
        assert "error" in result, result
        assert wanted in result["error"] and "\n" not in result["error"], result["error"]


# -- zip members: inflated with a cap while decompressing --------------------------------------------

def lying_member(path: Path, name: str, real: bytes, padding: int, method: int) -> None:
    """A zip whose member `name` compresses `real` + `padding` zero bytes while its entry declares only
    `real` (size and CRC): zipfile would inflate the whole stream before cutting it to size."""
    import zlib
    with zipfile.ZipFile(path, "a") as zf:
        info = zipfile.ZipInfo(name)
        info.compress_type = method
        zf.writestr(info, real + bytes(padding))
    data = bytearray(path.read_bytes())
    declared = struct.pack("<I", zlib.crc32(real))
    local = data.rfind(b"PK\x03\x04", 0, data.rfind(name.encode()))
    data[local + 14:local + 18], data[local + 22:local + 26] = declared, struct.pack("<I", len(real))
    central = data.rfind(b"PK\x01\x02")
    data[central + 16:central + 20], data[central + 24:central + 28] = declared, struct.pack("<I", len(real))
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("method", [zipfile.ZIP_LZMA, zipfile.ZIP_BZIP2, zipfile.ZIP_DEFLATED])
def test_npz_member_inflating_past_its_declared_size_is_refused_while_inflating(method, tmp_path):
    path = tmp_path / "params.npz"
    good = io.BytesIO()
    np.save(good, params()["token_emb"])
    lying_member(path, "token_emb.npy", good.getvalue(), 16 << 20, method)
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointError) as caught:
            _ = embscope_open(path).token.array
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(caught.value) == (f"'{path}': array 'token_emb': the zip member inflates past the "
                                 f"{len(good.getvalue())} bytes its entry declares")
    assert peak < 8 << 20, f"{peak / 2**20:.0f} MiB inflated to refuse a member of {len(good.getvalue())} bytes"


def test_compressed_data_pkl_is_inflated_only_as_far_as_its_pickle(tmp_path):
    """A data.pkl whose stream goes on for 16 MiB after the pickle's STOP: the pickle is read, the rest never."""
    path = tmp_path / "ckpt.pt"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data/0", pk.TABLE.tobytes())
        zf.writestr("archive/byteorder", "little")
    real = pk.proto(pk.dict_((pk.s("transformer.wte.weight"), pk.torch_tensor())))
    lying_member(path, "archive/data.pkl", real, 16 << 20, zipfile.ZIP_LZMA)
    tracemalloc.start()
    try:
        table = embscope_open(path).token.array
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(table, pk.TABLE)
    assert peak < 8 << 20


def test_byteorder_record_of_16_mib_is_refused_unread(tmp_path):
    path = pk.write("torch-zip", tmp_path)
    with zipfile.ZipFile(path) as zf:
        members = [(info, zf.read(info)) for info in zf.infolist() if not info.filename.endswith("byteorder")]
    with zipfile.ZipFile(path, "w") as zf:
        for info, data in members:
            zf.writestr(info, data)
        info = zipfile.ZipInfo("archive/byteorder")
        info.compress_type = zipfile.ZIP_DEFLATED
        with zf.open(info, "w", force_zip64=True) as record:
            for _ in range(16):
                record.write(b"l" * (1 << 20))
    assert_error_line(invoke("info", "-c", path), "expected a byteorder record saying 'little' or 'big', "
                                               "found one of 16777216 bytes")


def embscope_open(path: Path):
    import embscope
    return embscope.open(path)


# -- legacy torch files: parsed whole by our own unpickler, each storage checked against the file -------

def legacy_file(tmp_path: Path) -> tuple[Path, bytes]:
    import torch
    path = tmp_path / "old.pt"
    torch.save({"transformer.wte.weight": torch.arange(40, dtype=torch.float32).view(10, 4)}, path,
               _use_new_zipfile_serialization=False)
    return path, path.read_bytes()


def test_legacy_storage_record_declaring_more_than_the_file_holds(tmp_path):
    """r18: the record says 10**12 elements; the raw section says 40. Nothing is allocated for the claim."""
    path, raw = legacy_file(tmp_path)
    at = raw.find(b"K(", raw.find(b"X\x03\x00\x00\x00cpu"))  # the record's numel, 40
    path.write_bytes(raw[:at] + b"\x8a\x08" + struct.pack("<q", 10**12) + raw[at + 2:])
    line = assert_error_line(invoke("info", "-c", path), "(legacy PyTorch file): storage '")
    assert line.endswith("holds 40 elements, its record declares 1000000000000")


def test_legacy_raw_storage_longer_than_the_file(tmp_path):
    path, raw = legacy_file(tmp_path)
    path.write_bytes(raw[:-8])
    line = assert_error_line(invoke("info", "-c", path), "(legacy PyTorch file): storage '")
    assert line.endswith("of 160 bytes runs past the end of the file (" + str(len(raw) - 8) + " bytes)")


def test_legacy_file_with_a_fifth_pickle_that_is_not_a_key_list(tmp_path):
    """r05: the storage-key pickle is read by our unpickler too, so numpy names there are refused by name."""
    import pickletools
    path, raw = legacy_file(tmp_path)
    stream, ends = io.BytesIO(raw), [0]
    for _ in range(5):  # where each of the five pickles ends
        for _ in pickletools.genops(stream):
            pass
        ends.append(stream.tell())
    bomb = pk.proto(pk.list_(pk.call(pk.glob("numpy._core.multiarray", "_reconstruct"), pk.glob("numpy", "ndarray"),
                                     pk.tup(pk.i(2**28)), pk.s("O"))))
    path.write_bytes(raw[:ends[4]] + bomb + raw[ends[5]:])
    assert_error_line(invoke("info", "-c", path), "refused to unpickle global 'numpy._core.multiarray._reconstruct'")
