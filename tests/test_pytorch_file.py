"""PyTorch files: torch.save's zip format read without torch, the legacy format through torch.load,
nanoGPT layouts, dtypes, views, storage checks and hostile data.pkl files."""

from __future__ import annotations

import io
import json
import pickle
import subprocess
import sys
import zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import invoke, run_json
from pickle_gadgets import GADGETS, assert_error_line, assert_refused, gadget
from torch import nn

import embscope
from embscope.core.errors import UnsafePickleError
from embscope.formats import open_checkpoint

REPO = Path(__file__).resolve().parents[1]
V, T, D, LAYERS = 65, 32, 16, 2


class RunInfo:
    """A harmless custom class that its pickle calls (as an Enum's is): loads only with --trust-pickle. (An object
    pickled as its attributes alone, as torch.save pickles a model, is read without running anything:
    test_whole_model.py.)"""

    def __init__(self, name: str):
        self.name = name

    def __reduce__(self):
        return RunInfo, (self.name,)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn = nn.Module()
        self.attn.c_attn, self.attn.c_proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.attn.register_buffer("bias", torch.tril(torch.ones(T, T)).view(1, 1, T, T))  # nanoGPT's mask
        self.mlp = nn.Module()
        self.mlp.c_fc, self.mlp.c_proj = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)


class MiniGPT(nn.Module):
    """nanoGPT's module tree and names, small."""

    def __init__(self):
        super().__init__()
        self.transformer = nn.ModuleDict({"wte": nn.Embedding(V, D), "wpe": nn.Embedding(T, D),
                                              "h": nn.ModuleList([Block() for _ in range(LAYERS)]), "ln_f": nn.LayerNorm(D)})
        self.lm_head = nn.Linear(D, V, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying


def nanogpt_checkpoint(prefix: str = "") -> tuple[MiniGPT, dict]:
    """What nanoGPT's train.py saves; torch.compile's state_dict adds "_orig_mod.", DDP's "module."."""
    torch.manual_seed(0)
    model = MiniGPT()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.lm_head.weight.sum().backward()
    optimizer.step()
    state = OrderedDict((prefix + k, v) for k, v in model.state_dict().items())
    return model, {
        "model": state, "optimizer": optimizer.state_dict(),
        "model_args": {"n_layer": LAYERS, "n_head": 2, "n_embd": D, "block_size": T, "bias": True, "vocab_size": V, "dropout": 0.0},
        "iter_num": 250, "best_val_loss": torch.tensor(1.2345),
        "config": {"learning_rate": 6e-4, "block_size": 999, "dtype": "bfloat16", "compile": True},
    }


def save(obj, path: Path, legacy: bool = False) -> Path:
    torch.save(obj, path, _use_new_zipfile_serialization=not legacy)
    return path


FORMS = ["zip", "legacy"]


# --- nanoGPT checkpoints ---

@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("prefix", ["", "_orig_mod.", "module."])
def test_nanogpt_checkpoint(tmp_path, form, prefix):
    model, ckpt = nanogpt_checkpoint(prefix)
    path = save(ckpt, tmp_path / "ckpt.pt", legacy=form == "legacy")
    info = run_json("info", "-c", path)
    assert info["format"] == ("pytorch (legacy)" if form == "legacy" else "pytorch") and info["step"] == 250
    assert info["tables"]["token"]["name"] == "transformer.wte.weight"
    assert info["tables"]["token"]["shape"] == [V, D]
    assert info["tables"]["position"]["name"] == "transformer.wpe.weight"
    assert info["tables"]["position"]["shape"] == [T, D]
    assert info["tied"] is True and info["tables"]["output"] is None  # lm_head shares wte's storage
    stripped = [n for n in info["notes"] if "stripped" in n]
    assert stripped == ([f"stripped the {prefix!r} prefix " + ("torch.compile" if prefix == "_orig_mod." else
                                                                 "DistributedDataParallel") + " adds to every tensor name"]
                        if prefix else [])
    params = run_json("params", "-c", path)
    assert params["total"] == sum(p.numel() for p in model.parameters())  # tied head once, masks left out
    assert params["token"] == V * D and params["position"] == T * D and params["tied"] is True
    emb = embscope.open(path)
    np.testing.assert_array_equal(emb.token.array, model.transformer.wte.weight.detach().numpy())
    np.testing.assert_array_equal(emb.position.array, model.transformer.wpe.weight.detach().numpy())
    assert emb.checkpoint.config["block_size"] == T  # model_args wins over config
    assert emb.checkpoint.config["learning_rate"] == 6e-4
    if form == "zip":
        assert isinstance(emb.token.array, np.memmap)  # mapped, not copied


def test_params_console_numbers(tmp_path):
    model, ckpt = nanogpt_checkpoint("_orig_mod.")
    path = save(ckpt, tmp_path / "ckpt.pt")
    total = sum(p.numel() for p in model.parameters())
    text = invoke("params", "-c", path).stdout
    assert f"{V * D:,}" in text and f"{T * D:,}" in text and f"{total:,}" in text
    assert f"{(V * D + T * D) / total * 100:.2f}%" in text


@pytest.mark.parametrize("layout, expected", [
    ({"state_dict": "SD", "global_step": 5, "epoch": 3}, 5),
    ({"model_state_dict": "SD", "epoch": 3}, None),
    ({"model": "SD", "step": torch.tensor(12)}, 12),
    ({"module": "SD", "iter_num": torch.tensor(7.0)}, 7),
    ("SD", None),
])
def test_layouts_and_step_counters(tmp_path, layout, expected):
    torch.manual_seed(1)
    sd = {"wte.weight": torch.randn(20, 4), "wpe.weight": torch.randn(6, 4), "version": 3, "_extra": "text"}
    obj = sd if layout == "SD" else {k: (sd if v == "SD" else v) for k, v in layout.items()}
    ckpt = open_checkpoint(save(obj, tmp_path / "m.pth"))
    assert set(ckpt.tensors) == {"wte.weight", "wpe.weight"}  # non-tensor values skipped
    assert ckpt.step == expected


def test_a_state_dict_holding_itself_is_an_error(tmp_path):
    sd = {"wte.weight": torch.randn(4, 2)}
    sd["nested"] = sd
    assert_error_line(invoke("info", "-c", save(sd, tmp_path / "loop.pt")), "loop.pt", "a container holding itself")


def test_hugging_face_directory_with_pytorch_model_bin(tmp_path):
    torch.manual_seed(2)
    sd = {"wte.weight": torch.randn(50, 8), "wpe.weight": torch.randn(10, 8),
          "h.0.attn.bias": torch.tril(torch.ones(10, 10)).view(1, 1, 10, 10),
          "h.0.attn.c_attn.weight": torch.randn(8, 24), "h.0.attn.c_attn.bias": torch.randn(24),
          "ln_f.weight": torch.ones(8)}
    save(sd, tmp_path / "pytorch_model.bin")
    (tmp_path / "config.json").write_text("{}")
    doc = run_json("params", "-c", tmp_path)
    assert doc["total"] == 50 * 8 + 10 * 8 + 8 * 24 + 24 + 8  # the 4-D mask is a buffer


def test_torch_zip_wins_over_npz_sniffing(tmp_path):
    path = save({"wte.weight": torch.randn(5, 2)}, tmp_path / "weights.npz")
    assert open_checkpoint(path).format == "pytorch"


# --- dtypes and views ---

@pytest.mark.parametrize("form", FORMS)
def test_half_precision_tensors_upcast_like_torch(tmp_path, form):
    torch.manual_seed(3)
    wte, wpe = torch.randn(40, 8), torch.randn(12, 8)
    path = save({"transformer.wte.weight": wte.bfloat16(), "transformer.wpe.weight": wpe.half()},
                tmp_path / "half.pt", legacy=form == "legacy")
    emb = embscope.open(path)
    assert emb.token.tensor.dtype == "bfloat16" and emb.position.tensor.dtype == "float16"
    np.testing.assert_array_equal(emb.token.array, wte.bfloat16().float().numpy())
    np.testing.assert_array_equal(emb.position.array, wpe.half().float().numpy())


@pytest.mark.parametrize("form", FORMS)
def test_views_non_contiguous_sliced_and_broadcast(tmp_path, form):
    torch.manual_seed(4)
    wte = torch.randn(8, 30).t()  # stride (1, 30): a transposed view is saved with its storage
    big = torch.randn(100, 8)
    wpe = big[10:42]  # a slice: storage offset 80 elements into a storage of 800
    position_ids = torch.arange(32).as_strided((1, 32), (0, 1))  # stride 0 over a dimension of 1: no repeat
    assert not wte.is_contiguous() and wpe.storage_offset() == 80 and position_ids.stride() == (0, 1)
    path = save({"transformer.wte.weight": wte, "transformer.wpe.weight": wpe, "position_ids": position_ids},
                tmp_path / "views.pt", legacy=form == "legacy")
    ckpt = open_checkpoint(path)
    np.testing.assert_array_equal(ckpt.tensors["transformer.wte.weight"].read(), wte.numpy())
    np.testing.assert_array_equal(ckpt.tensors["transformer.wpe.weight"].read(), wpe.numpy())
    np.testing.assert_array_equal(ckpt.tensors["position_ids"].read(), position_ids.numpy())
    assert ckpt.tensors["transformer.wpe.weight"].storage[-1] == 80 * 4  # the offset keeps slices apart
    emb = embscope.open(path)
    np.testing.assert_array_equal(emb.token.array, wte.numpy())
    assert not emb.token.array.flags.writeable


@pytest.mark.parametrize("form", FORMS)
def test_an_expanded_view_is_refused(tmp_path, form):
    """A view that repeats its storage (stride 0 over more than one row) is no weight: torch.save keeps
    the 8 stored floats, and the file says to read them as 5 rows."""
    path = save({"wte.weight": torch.randn(10, 8), "ln.x": torch.randn(1, 8).expand(5, 8)},
                tmp_path / "expanded.pt", legacy=form == "legacy")
    line = assert_error_line(invoke("info", "-c", path), "tensor 'ln.x': size [5, 8], stride [0, 1] at offset 0 "
                                                      "repeats elements of storage")
    assert line.endswith("(an expanded view of 8 elements as 40): expected stored weights, each element once")


def test_unreadable_dtypes_are_skipped_with_a_note(tmp_path):
    path = save({"wte.weight": torch.randn(5, 2), "c": torch.zeros(3, dtype=torch.complex64),
                 "f8": torch.zeros(2, dtype=torch.float8_e4m3fn), "u16": torch.arange(4, dtype=torch.int32).to(torch.uint16)},
                tmp_path / "odd.pt")
    ckpt = open_checkpoint(path)
    assert set(ckpt.tensors) == {"wte.weight", "u16"}
    np.testing.assert_array_equal(ckpt.tensors["u16"].read(), np.arange(4, dtype=np.uint16))
    assert any("2 tensors" in n for n in ckpt.notes)


# --- data.pkl written by hand into a copy of a real torch.save file ---

class FakeStorage:
    """Pickled as torch pickles a storage: a persistent id."""

    def __init__(self, key: str, numel: int):
        self.key, self.numel = key, numel


class FakeTensor:
    def __init__(self, storage: FakeStorage, offset: int, size: tuple, stride: tuple):
        self.args = (storage, offset, size, stride, False, OrderedDict())

    def __reduce__(self):
        return torch._utils._rebuild_tensor_v2, self.args


class TorchLikePickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, FakeStorage):
            return "storage", torch.FloatStorage, obj.key, "cpu", obj.numel
        return None


def with_data_pkl(real: Path, path: Path, obj=None, raw: bytes | None = None) -> Path:
    """`real` with its data.pkl replaced by a pickle of `obj` (or `raw` bytes); other members copied as stored."""
    if raw is None:
        buffer = io.BytesIO()
        TorchLikePickler(buffer, protocol=2).dump(obj)
        raw = buffer.getvalue()
    with zipfile.ZipFile(real) as src, zipfile.ZipFile(path, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, raw if info.filename.endswith("/data.pkl") else src.read(info))
    return path


@pytest.fixture
def real_zip(tmp_path) -> Path:
    return save({"w": torch.arange(8, dtype=torch.float32)}, tmp_path / "real.pt")  # one storage "0", 8 floats


def test_hand_written_data_pkl_reads_through_the_same_path(tmp_path, real_zip):
    storage = FakeStorage("0", 8)
    path = with_data_pkl(real_zip, tmp_path / "hand.pt", {"a": FakeTensor(storage, 2, (2, 3), (1, 2)),
                                                         "b": FakeTensor(storage, 0, (8,), (1,))})
    ckpt = open_checkpoint(path)
    expected = torch.arange(8, dtype=torch.float32).as_strided((2, 3), (1, 2), 2).numpy()
    np.testing.assert_array_equal(ckpt.tensors["a"].read(), expected)
    np.testing.assert_array_equal(ckpt.tensors["b"].read(), np.arange(8, dtype=np.float32))


@pytest.mark.parametrize("tensor, message", [
    (FakeTensor(FakeStorage("0", 9), 0, (8,), (1,)), "declares 9 float32 elements (36 bytes), its member holds 32"),
    (FakeTensor(FakeStorage("0", 8), 7, (2,), (1,)), "reaches element 8 of storage '0', which holds 8"),
    (FakeTensor(FakeStorage("0", 8), 0, (3, 3), (3, 1)), "reaches element 8"),
    (FakeTensor(FakeStorage("99", 8), 0, (8,), (1,)), "names storage '99', which the archive lacks"),
    (FakeTensor(FakeStorage("0", 8), -1, (2,), (1,)), "non-negative storage offset"),
    (FakeTensor(FakeStorage("0", 8), 0, (2, 2), (1,)), "as many strides as dimensions"),
])
def test_storage_lies_are_caught(tmp_path, real_zip, tensor, message):
    path = with_data_pkl(real_zip, tmp_path / "lie.pt", {"w": tensor})
    line = assert_error_line(invoke("info", "-c", path), message)
    assert "lie.pt" in line


class MovedTensor(FakeTensor):
    """A valid tensor whose pickle then tries to move its offset past the storage with BUILD."""

    def __reduce__(self):
        return torch._utils._rebuild_tensor_v2, self.args, {"offset": 10**6}


@pytest.mark.parametrize("raw", [
    b"ctorch\nFloatStorage\n(dS'itemsize'\nI0\nsb.",  # BUILD on a storage kind: would shrink float32
    b"ctorch\nFloatStorage\n(S'float32'\nS'float32'\nS'f8'\nI8\ntb.",  # dataclass-style tuple state
    b"ctorch._utils\n_rebuild_tensor_v2\n(dS'func'\nI0\nsb.",  # BUILD on an allowed callable
    b"ctorch\nTensor\n(dS'name'\nI0\nsb.",
    None,  # BUILD on a tensor record after its bounds were checked
])
def test_build_cannot_change_allowed_objects(tmp_path, real_zip, raw):
    obj = {"w": MovedTensor(FakeStorage("0", 8), 0, (8,), (1,))} if raw is None else None
    path = with_data_pkl(real_zip, tmp_path / "build.pt", obj, raw)
    assert_error_line(invoke("info", "-c", path), "build.pt")
    from embscope.storage.unpickle import STORAGE_TYPES
    assert STORAGE_TYPES["float32"].element.itemsize == 4 and STORAGE_TYPES["float32"].element.stored == "f4"
    np.testing.assert_array_equal(open_checkpoint(real_zip).tensors["w"].read(), np.arange(8, dtype=np.float32))


def test_compressed_members_are_read_without_a_map(tmp_path):
    """torch writes members stored; a re-zipped (deflated) copy still reads, one member at a time."""
    torch.manual_seed(5)
    wte = torch.randn(9, 3)
    real = save({"transformer.wte.weight": wte, "transformer.wpe.weight": torch.randn(4, 3)}, tmp_path / "real.pt")
    path = tmp_path / "deflated.pt"
    with zipfile.ZipFile(real) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
    with zipfile.ZipFile(path) as zf:
        assert all(i.compress_type == zipfile.ZIP_DEFLATED for i in zf.infolist())
    token = embscope.open(path).token.array
    assert not isinstance(token, np.memmap)
    np.testing.assert_array_equal(token, wte.numpy())


def test_truncated_zip(tmp_path):
    _, ckpt = nanogpt_checkpoint()
    data = save(ckpt, tmp_path / "ckpt.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    result = invoke("info", "-c", tmp_path / "cut.pt")
    assert result.exit_code == 1 and result.stderr.startswith("Error: ") and "Traceback" not in result.output


def test_truncated_legacy_file(tmp_path):
    _, ckpt = nanogpt_checkpoint()
    data = save(ckpt, tmp_path / "ckpt.pt", legacy=True).read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    assert_error_line(invoke("info", "-c", tmp_path / "cut.pt"), "legacy PyTorch file")


# --- hostile files ---

@pytest.mark.parametrize("kind", GADGETS)
@pytest.mark.parametrize("form", FORMS)
def test_hostile_torch_file_is_refused_by_name(tmp_path, monkeypatch, kind, form):
    marker = tmp_path / "pwned"
    evil, name = gadget(kind, marker, monkeypatch)
    _, ckpt = nanogpt_checkpoint()
    ckpt["config"]["callback"] = evil  # torch.save pickles it with its __reduce__, as an attacker's file would
    path = save(ckpt, tmp_path / "ckpt.pt", legacy=form == "legacy")
    assert_refused(invoke("info", "-c", path), name, marker)
    with pytest.raises(UnsafePickleError):
        open_checkpoint(path)
    assert not marker.exists()


@pytest.mark.parametrize("kind", GADGETS)
def test_hostile_data_pkl_in_a_copied_zip(tmp_path, monkeypatch, real_zip, kind):
    marker = tmp_path / "pwned"
    evil, name = gadget(kind, marker, monkeypatch)
    path = with_data_pkl(real_zip, tmp_path / "evil.pt", {"w": FakeTensor(FakeStorage("0", 8), 0, (8,), (1,)),
                                                         "x": [evil]})
    assert_refused(invoke("params", "-c", path), name, marker)


@pytest.mark.parametrize("form", FORMS)
def test_trust_pickle_loads_a_custom_class(tmp_path, form):
    model, ckpt = nanogpt_checkpoint()
    ckpt["run"] = RunInfo("exp")
    path = save(ckpt, tmp_path / "ckpt.pt", legacy=form == "legacy")
    assert_error_line(invoke("info", "-c", path), f"{RunInfo.__module__}.RunInfo")
    trusted = invoke("params", "-c", path, "--trust-pickle", "--json")
    assert trusted.exit_code == 0, trusted.output
    assert "warning" in trusted.stderr
    assert json.loads(trusted.stdout)["total"] == sum(p.numel() for p in model.parameters())


# --- torch stays out of the zip path ---

def test_zip_path_does_not_import_torch(tmp_path):
    model, ckpt = nanogpt_checkpoint("_orig_mod.")
    path = save(ckpt, tmp_path / "ckpt.pt")
    code = ("import sys\n"
            "from typer.testing import CliRunner\n"
            "from embscope.cli import app\n"
            f"r = CliRunner().invoke(app, ['params', '-c', {str(path)!r}, '--json'])\n"
            "assert r.exit_code == 0, r.output\n"
            "import embscope\n"
            f"e = embscope.open({str(path)!r})\n"
            "print(float(e.token.array.sum()), r.stdout)\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    total_sum, doc = out.stdout.split(" ", 1)
    assert float(total_sum) == pytest.approx(float(model.transformer.wte.weight.detach().sum()), rel=1e-5)
    assert json.loads(doc)["total"] == sum(p.numel() for p in model.parameters())


def test_legacy_file_opens_without_torch_and_maps_its_storages(tmp_path):
    """The legacy format is parsed by our own unpickler too: no torch needed, tables memory-mapped."""
    wte = torch.randn(4, 2)
    path = save({"wte.weight": wte, "iter_num": 7}, tmp_path / "old.pt", legacy=True)
    code = ("import sys\n"
            "sys.modules['torch'] = None  # as if torch were not installed\n"
            "import numpy as np, embscope\n"
            f"emb = embscope.open({str(path)!r})\n"
            "assert isinstance(emb.token.array, np.memmap)\n"
            "print(emb.checkpoint.step, emb.token.array.tolist())\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"7 {wte.tolist()}"


# --- config.json beside a .bin, read as beside safetensors ---

def test_roberta_pytorch_model_bin_reads_its_config_json(tmp_path):
    """RoBERTa keeps two padding rows before position 0; RobertaModel's names are BERT's, and only
    config.json's model_type tells them apart, for a .bin as for safetensors."""
    torch.manual_seed(6)
    rows = torch.randn(12, 8)
    save({"embeddings.word_embeddings.weight": torch.randn(30, 8),
          "embeddings.position_embeddings.weight": rows}, tmp_path / "pytorch_model.bin")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "roberta", "max_position_embeddings": 12,
                                                      "vocab_size": 30}))
    doc = run_json("positions", "--pairs", "0:1,3:7", "-c", tmp_path)
    table = rows.numpy().astype(np.float64)

    def cosine(a, b):
        return float(table[a] @ table[b] / np.linalg.norm(table[a]) / np.linalg.norm(table[b]))
    # position p is row p + 2
    assert [(p["i"], p["j"]) for p in doc["pairs"]] == [(0, 1), (3, 7)]
    assert doc["pairs"][0]["cosine"] == pytest.approx(cosine(2, 3), abs=1e-6)
    assert doc["pairs"][1]["cosine"] == pytest.approx(cosine(5, 9), abs=1e-6)


def test_config_json_shape_rule_finds_an_unnamed_position_table_in_a_pt(tmp_path):
    """max_position_embeddings in config.json names the position table by its row count, as for safetensors."""
    save({"embed.weight": torch.randn(30, 8), "learned.table": torch.randn(16, 8)}, tmp_path / "model.pt")
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 16, "vocab_size": 30}))
    info = run_json("info", "-c", tmp_path / "model.pt")
    assert info["tables"]["position"]["name"] == "learned.table"
    assert info["tables"]["position"]["rule"] == "shape: 16 rows = max_position_embeddings in the config"


@pytest.mark.parametrize("form", FORMS)
def test_every_element_type_torch_writes_reads_back(tmp_path, form):
    """One tensor of each type in one file: numbers numpy holds come back exactly (bfloat16 as its bits),
    the rest are skipped with a note."""
    torch.manual_seed(7)
    base = torch.randn(3, 5) * 50
    readable = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
                "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32, "int16": torch.int16,
                "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool, "uint16": torch.uint16,
                "uint32": torch.uint32, "uint64": torch.uint64}
    tensors = {name: base.to(dtype) for name, dtype in readable.items()}
    tensors |= {"complex64": base.to(torch.complex64), "float8": base.to(torch.float8_e5m2)}
    ckpt = open_checkpoint(save(tensors, tmp_path / "kinds.pt", legacy=form == "legacy"))
    assert set(ckpt.tensors) == set(readable)
    for name in readable:
        assert ckpt.tensors[name].dtype == name
        expected = tensors[name].view(torch.int16).numpy().view(np.uint16) if name == "bfloat16" else tensors[name].numpy()
        np.testing.assert_array_equal(ckpt.tensors[name].read(), expected)
    assert "2 tensors of element types numpy cannot hold were skipped (e.g. complex64)" in ckpt.notes


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")
def test_quantized_sparse_and_meta_tensors_are_skipped_with_a_note(tmp_path):
    """torch's weights-only loader reads these layouts; none is a table, so they are noted and skipped."""
    wte = torch.randn(10, 4)
    quantized = torch.quantize_per_tensor(torch.randn(3, 3), 0.1, 0, torch.qint8)
    path = save({"wte.weight": wte, "q": quantized, "sparse": torch.eye(3).to_sparse(),
                 "meta": torch.empty(2, 2, device="meta")}, tmp_path / "layouts.pt")
    ckpt = open_checkpoint(path)
    assert set(ckpt.tensors) == {"wte.weight"}
    np.testing.assert_array_equal(ckpt.tensors["wte.weight"].read(), wte.numpy())
    assert "3 quantized, sparse, nested or meta tensors were skipped (e.g. meta)" in ckpt.notes


@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated:UserWarning")
def test_every_torch_dtype_and_storage_class_is_known_with_its_size():
    """A file may name any torch dtype or storage class; each is in the element-type table with torch's own size,
    so none is refused as an unknown global (torch itself is the independent reference here)."""
    from embscope.core.arrays import ELEMENT_TYPES
    from embscope.storage.constants import TORCH_DTYPE_ALIASES, TORCH_STORAGE_CLASSES
    for name in dir(torch):
        if isinstance(getattr(torch, name), torch.dtype):
            element = ELEMENT_TYPES[TORCH_DTYPE_ALIASES.get(name, name)]
            assert element.itemsize == getattr(torch, name).itemsize, name
    for storage in torch._storage_classes:
        if storage.__module__ == "torch" and storage.__name__ not in ("TypedStorage", "UntypedStorage"):
            assert ELEMENT_TYPES[TORCH_STORAGE_CLASSES[storage.__name__]].itemsize == storage.dtype.itemsize
