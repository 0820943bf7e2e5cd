"""The tie decided by the tensors: a file holding both a token table and a head is compared (bit for bit, and within
the rounding of a requantised copy), info reports what config.json says beside what the tensors say, and where they
disagree the tensors decide what params counts and what compare --output compares. Files written by safetensors
and torch.save with a config.json that disagrees both ways."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import run_json
from safetensors.numpy import save_file

V, D, T = 200, 16, 24
rng = np.random.default_rng(7)
TOKEN = rng.standard_normal((V, D)).astype(np.float32)
POSITION = rng.standard_normal((T, D)).astype(np.float32)
OTHER = rng.standard_normal((V, D)).astype(np.float32)
NORM = np.ones(D, dtype=np.float32)


def folder(tmp_path, tie: bool | None):
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": V, "n_positions": T, "n_embd": D}
    if tie is not None:
        config["tie_word_embeddings"] = tie
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def safetensors_file(tmp_path, head, tie: bool | None):
    path = folder(tmp_path, tie) / "model.safetensors"
    save_file({"transformer.wte.weight": TOKEN, "transformer.wpe.weight": POSITION, "transformer.ln_f.weight": NORM,
               "lm_head.weight": head}, str(path))
    return path


def torch_file(tmp_path, head, tie: bool | None):
    path = folder(tmp_path, tie) / "pytorch_model.bin"
    torch.save({"transformer.wte.weight": torch.from_numpy(TOKEN), "transformer.wpe.weight": torch.from_numpy(POSITION),
                "transformer.ln_f.weight": torch.from_numpy(NORM), "lm_head.weight": head}, path)
    return path


def row_cosines(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.mark.parametrize("writer", [safetensors_file, torch_file])
def test_config_says_tied_but_the_file_holds_a_head_of_its_own(tmp_path, writer):
    head = OTHER if writer is safetensors_file else torch.from_numpy(OTHER.copy())
    path = writer(tmp_path, head, tie=True)
    info = run_json("info", "-c", path)
    assert info["tie"] == {"config": True, "tensors": "different"}
    assert info["head"] == "untied" and info["tables"]["output"]["name"] == "lm_head.weight"
    assert ("config.json says the head is tied, but lm_head.weight differs from transformer.wte.weight: the tensors "
            "decide, so the head is a table of its own, counted and compared") in info["notes"]
    params = run_json("params", "-c", path)
    assert params["output"] == V * D and params["total"] == 2 * V * D + T * D + D  # the head counted
    compared = run_json("compare", path, "--output", "-k", 5)
    assert compared["mean_row_cosine"] == pytest.approx(row_cosines(TOKEN, OTHER).mean(), abs=1e-6)


@pytest.mark.parametrize("writer", [safetensors_file, torch_file])
def test_config_says_untied_but_the_head_is_a_copy_of_the_token_table(tmp_path, writer):
    head = TOKEN.copy() if writer is safetensors_file else torch.from_numpy(TOKEN.copy())  # its own storage
    path = writer(tmp_path, head, tie=False)
    info = run_json("info", "-c", path)
    assert info["tie"] == {"config": False, "tensors": "equal"}
    assert info["head"] == "tied" and info["tables"]["output"] is None
    assert ("config.json says the head is not tied, but lm_head.weight holds exactly the values of "
            "transformer.wte.weight: the tensors decide, so the head is tied, counted once") in info["notes"]
    params = run_json("params", "-c", path)
    assert params["tied"] is True and params["output"] is None and params["total"] == V * D + T * D + D
    compared = run_json("compare", path, "--output")
    assert compared["tied"] is True and compared["output"] is None and compared["mean_row_cosine"] is None


def test_agreeing_config_and_tensors_add_no_note(tmp_path):
    path = safetensors_file(tmp_path, OTHER, tie=False)
    info = run_json("info", "-c", path)
    assert info["tie"] == {"config": False, "tensors": "different"}
    assert not any("tensors decide" in note for note in info["notes"])


def test_no_config_and_no_head_leave_both_null(tmp_path):
    path = tmp_path / "model.safetensors"
    save_file({"transformer.wte.weight": TOKEN, "transformer.wpe.weight": POSITION}, str(path))
    assert run_json("info", "-c", path)["tie"] == {"config": None, "tensors": None}


def test_shared_storage_is_equal(tmp_path):
    token = torch.from_numpy(TOKEN.copy())
    path = folder(tmp_path, tie=False) / "pytorch_model.bin"
    torch.save({"transformer.wte.weight": token, "lm_head.weight": token}, path)  # one storage, as tied models save
    assert run_json("info", "-c", path)["tie"] == {"config": False, "tensors": "equal"}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_head_requantised_to_a_coarser_dtype_is_equal_within_its_rounding(tmp_path, dtype):
    copy = torch.from_numpy(TOKEN.copy()).to(dtype)
    path = torch_file(tmp_path / "copy", copy, tie=None)
    info = run_json("info", "-c", path)
    assert info["tie"] == {"config": None, "tensors": "equal"}
    name = "float16" if dtype is torch.float16 else "bfloat16"
    assert (f"lm_head.weight ({name}) holds the values of transformer.wte.weight (float32) within {name}'s rounding: "
            "a saved copy of a tied head, counted once") in info["notes"]
    # one value moved by two last places of the coarser type is no longer a rounding of the token table
    bits = 11 if dtype is torch.float16 else 8
    moved = TOKEN.copy()
    moved[V // 3, 5] += 4 * abs(moved[V // 3, 5]) * 2.0**-bits
    path = torch_file(tmp_path / "moved", torch.from_numpy(moved).to(dtype), tie=None)
    assert run_json("info", "-c", path)["tie"] == {"config": None, "tensors": "different"}


def test_a_bitwise_copy_of_another_dtype_must_still_be_within_rounding():
    """The bound itself, against plain numpy: float32 values rounded to float16 differ by at most |x| * 2**-11."""
    from embscope.core.checkpoint import TensorInfo
    from embscope.roles import compare_copy
    half = TOKEN.astype(np.float16)
    token = TensorInfo("t", TOKEN.shape, "float32", lambda: TOKEN)
    assert np.all(np.abs(half.astype(np.float32) - TOKEN) <= np.abs(TOKEN) * 2.0**-11)
    assert compare_copy(token, TensorInfo("h", TOKEN.shape, "float16", lambda: half)) == (True, None)
    off = half.copy()
    off[0, 0] = np.float16(-off[0, 0])
    assert compare_copy(token, TensorInfo("h", TOKEN.shape, "float16", lambda: off)) == (False, None)


def test_a_head_stored_d_by_v_is_read_a_row_per_token(tmp_path):
    """A head kept as `x @ W` keeps it, d x V (a from-scratch model's 'lm_head'): its rows were taken as d rows of V
    values, so `norms --table output` reported 16 rows of 96 and `similarity --table output --ids` compared columns.
    It is read transposed, a row per token, and a transposed copy of the token table is a tied head."""
    rng = np.random.default_rng(3)
    token, head = rng.standard_normal((96, 16)).astype(np.float32), rng.standard_normal((16, 96)).astype(np.float32)
    save_file({"wte": token, "lm_head": head}, str(tmp_path / "untied.safetensors"))
    doc = run_json("norms", "--table", "output", "-c", tmp_path / "untied.safetensors")
    assert doc["rows"] == 96
    assert np.isclose(doc["mean"], np.linalg.norm(head.T.astype(np.float64), axis=1).mean(), rtol=1e-6)
    pair = run_json("similarity", "--ids", "3", "7", "--table", "output", "-c", tmp_path / "untied.safetensors")
    a, b = head[:, 3].astype(np.float64), head[:, 7].astype(np.float64)
    assert np.isclose(pair["pairs"][0]["cosine"], a @ b / np.linalg.norm(a) / np.linalg.norm(b), atol=1e-6)
    info = run_json("info", "-c", tmp_path / "untied.safetensors")
    assert info["tie"]["tensors"] == "different"
    assert "lm_head is stored 16 x 96, the token table's shape transposed (d x V): read transposed, a row per token" \
        in info["notes"]
    save_file({"wte": token, "lm_head": np.ascontiguousarray(token.T)}, str(tmp_path / "tied.safetensors"))
    assert run_json("info", "-c", tmp_path / "tied.safetensors")["tie"]["tensors"] == "equal"


def test_a_head_stored_d_by_v_stays_mapped(tmp_path):
    """The transposed head is read as a view of the mapped file, as the token table is: a copy of the whole head
    (205 MB of a 100,000 x 512 float32 head, even for `norms --table token`, which compares the head for the tie)
    was made before any row was read. Its rows are the stored columns."""
    import embscope
    rng = np.random.default_rng(5)
    token, head = rng.standard_normal((300, 16)).astype(np.float32), rng.standard_normal((16, 300)).astype(np.float32)
    save_file({"wte": token, "lm_head": head}, str(tmp_path / "untied.safetensors"))
    rows = embscope.open(tmp_path / "untied.safetensors").table("output").array
    assert rows.shape == (300, 16) and not rows.flags.owndata
    assert np.array_equal(rows, head.T)


def test_a_head_saved_as_the_token_table_s_transpose_is_counted_once(tmp_path):
    """torch.save of a head that is the token table's transposed view (e.weight.t()): one storage, so the head is
    tied and 'counted once', as info said; but params counted each storage once per shape, 16 x 300 and 300 x 16,
    so the whole checkpoint was twice the table."""
    torch.manual_seed(0)
    token, norm = torch.randn(300, 16), torch.ones(16)
    torch.save({"tok_embeddings.weight": token, "lm_head.weight": token.t(), "norm.weight": norm},
               tmp_path / "model.pt")
    doc = run_json("params", "-c", tmp_path / "model.pt")
    assert doc["total"] == 300 * 16 + 16
    info = run_json("info", "-c", tmp_path / "model.pt")
    assert info["tie"]["tensors"] == "equal"
