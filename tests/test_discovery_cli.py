"""Table discovery through the CLI: one-array files, `info` on files with no known names, the
candidates every "found none" error lists, config.json's role rules, and the checkpoint line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import cosine, run, run_json
from safetensors.numpy import save_file

rng = np.random.default_rng(5)


def one_array_file(tmp_path, kind: str, table: np.ndarray):
    if kind == "npy":
        np.save(tmp_path / "vectors.npy", table)
        return tmp_path / "vectors.npy", "vectors"
    if kind == "safetensors":
        save_file({"weight": table}, tmp_path / "m.safetensors")
        return tmp_path / "m.safetensors", "weight"
    np.savez(tmp_path / "m.npz", vectors=table, ids=np.arange(len(table)))  # one float table, one int array
    return tmp_path / "m.npz", "vectors"


@pytest.mark.parametrize("kind", ["npy", "safetensors", "npz"])
def test_a_file_with_one_2d_float_tensor_uses_it_as_the_token_table(tmp_path, kind):
    table = rng.standard_normal((10, 6), dtype=np.float32)
    path, name = one_array_file(tmp_path, kind, table)
    info = run_json("info", "-c", path)
    assert info["tables"]["token"] == {"name": name, "shape": [10, 6], "dtype": "float32",
                                       "rule": "the only 2-D float tensor in the file", "first_row": 0,
                                       "quantization": None}
    assert f"'{name}' is the file's only 2-D float tensor, so it is taken as the token table" in info["notes"]
    doc = run_json("similarity", "--ids", "2", "7", "-c", path)
    assert doc["pairs"][0]["cosine"] == pytest.approx(cosine(table[2], table[7]), abs=1e-6)


def test_a_single_table_named_for_another_role_is_not_taken_as_the_token_table(tmp_path):
    np.savez(tmp_path / "m.npz", pos_emb=rng.standard_normal((8, 4), dtype=np.float32))
    info = run_json("info", "-c", tmp_path / "m.npz")
    assert info["tables"]["token"] is None and info["tables"]["position"]["name"] == "pos_emb"
    assert info["empty_roles"] == ["token", "output"]


def unknown_names(tmp_path):
    save_file({"alpha": np.zeros((30, 4), np.float32), "beta": np.zeros((7, 4), np.float32),
               "gamma": np.zeros(4, np.float32)}, tmp_path / "m.safetensors")
    return tmp_path / "m.safetensors"


def test_info_never_fails_for_want_of_a_role_and_lists_every_tensor(tmp_path):
    path = unknown_names(tmp_path)
    doc = run_json("info", "-c", path)
    assert doc["tables"] == {"token": None, "position": None, "output": None}
    assert doc["empty_roles"] == ["token", "position", "output"]
    assert doc["tensor_list"] == [{"name": "alpha", "shape": [30, 4], "dtype": "float32"},
                                  {"name": "beta", "shape": [7, 4], "dtype": "float32"},
                                  {"name": "gamma", "shape": [4], "dtype": "float32"}]
    assert doc["tensors_not_listed"] == 0
    assert doc["notes"][0] == ("no token-embedding table found by name, by config size, or as the file's only 2-D "
                               "float tensor; name one with --token-key NAME")
    text = run("info", "-c", path).stdout
    assert "│ token    │ none" in text and "tensors in the file (3)" in text
    for row in ("│ alpha  │ 30 x 4 │ float32 │", "│ beta   │ 7 x 4  │ float32 │", "│ gamma  │ 4      │ float32 │"):
        assert row in text


def test_commands_that_need_the_token_table_list_the_candidates(tmp_path):
    result = run("norms", "--table", "token", "-c", unknown_names(tmp_path), code=1)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == (
        "Error: expected a token-embedding table, found none among 3 tensors by name, by config size, or as the "
        "file's only 2-D float tensor; candidates: 'alpha' (30 x 4 float32), 'beta' (7 x 4 float32); name one with "
        "--token-key NAME\n")
    chosen = run_json("norms", "--table", "token", "--token-key", "beta", "-c", tmp_path / "m.safetensors")
    assert chosen["rows"] == 7


def test_candidates_are_clipped_and_the_tensor_list_stops_at_200(tmp_path):
    tensors = {f"w{i:02d}": np.zeros((2, 3), np.float32) for i in range(25)}
    tensors |= {f"b{i:03d}": np.zeros(1, np.float32) for i in range(180)}
    save_file(tensors, tmp_path / "m.safetensors")
    result = run("similarity", "--ids", "0", "1", "-c", tmp_path / "m.safetensors", code=1)
    assert result.stderr == ("Error: expected a token-embedding table, found none among 205 tensors by name, by "
                             "config size, or as the file's only 2-D float tensor; candidates: 25 2-D float "
                             "tensors, e.g. 'w00', 'w01', 'w02' (and 22 more; `embscope info` lists them); "
                             "name one with --token-key NAME\n")
    doc = run_json("info", "-c", tmp_path / "m.safetensors")
    names = sorted(tensors)  # safetensors stores names sorted
    assert [t["name"] for t in doc["tensor_list"]] == names[:200] and doc["tensors_not_listed"] == 5
    text = run("info", "-c", tmp_path / "m.safetensors").stdout
    assert "tensors in the file (205)" in text and "... and 5 more, not listed" in text
    assert names[199] in text and names[200] not in text


def test_a_npy_error_says_the_array_is_named_after_the_file(tmp_path):
    np.save(tmp_path / "ids.npy", np.arange(12, dtype=np.int64))
    result = run("neighbors", "--ids", "1", "-c", tmp_path / "ids.npy", code=1)
    assert result.exit_code == 1
    assert result.stderr == ("Error: expected a token-embedding table, found none among 1 tensor by name, by config "
                             "size, or as the file's only 2-D float tensor; no 2-D float tensor among them: 'ids' "
                             "(12 int64); a .npy holds one array, named after its file ('ids'); name one with "
                             "--token-key NAME\n")


def test_positions_of_a_one_array_file_name_what_is_there(tmp_path):
    np.save(tmp_path / "vectors.npy", np.ones((4, 2), np.float32))
    result = run("positions", "-c", tmp_path / "vectors.npy", code=1)
    assert result.stderr == ("Error: expected a learned position table, found none among 1 tensor by name or config "
                             "size (rotary and other computed positions have none); "
                             "the file holds no other tensor; name one with --pos-key NAME\n")


# --- config.json beside the weights: the RoBERTa offset and the shape rule ---

def roberta_files(directory, write):
    """An XLM-R-style encoder saved without a model prefix, under names only config.json explains."""
    token = rng.standard_normal((40, 8), dtype=np.float32)
    position = rng.standard_normal((514, 8), dtype=np.float32)
    directory.mkdir()
    write({"emb.tok": token, "emb.pos": position, "enc.0.q": rng.standard_normal((8, 8), dtype=np.float32)},
          directory)
    (directory / "config.json").write_text(json.dumps({"model_type": "roberta", "vocab_size": 40,
                                                       "max_position_embeddings": 514}))
    return position


def write_safetensors(tensors, directory):
    save_file(tensors, directory / "model.safetensors")


def write_bin(tensors, directory):
    torch = pytest.importorskip("torch")
    torch.save({name: torch.from_numpy(t) for name, t in tensors.items()}, directory / "pytorch_model.bin")


@pytest.mark.parametrize("write", [write_safetensors, write_bin])
def test_config_json_gives_the_position_offset_and_the_shape_rule(tmp_path, write):
    position = roberta_files(tmp_path / "m", write)
    info = run_json("info", "-c", tmp_path / "m")
    assert info["tables"]["token"]["rule"] == "shape: 40 rows = vocab_size in the config"
    assert info["tables"]["position"]["rule"] == "shape: 514 rows = max_position_embeddings in the config"
    assert info["tables"]["position"]["first_row"] == 2
    doc = run_json("positions", "--pairs", "0:1,0:511", "-c", tmp_path / "m")
    assert [p["cosine"] for p in doc["pairs"]] == pytest.approx(
        [cosine(position[2], position[3]), cosine(position[2], position[513])], abs=1e-6)


# --- the first line names the checkpoint; JSON carries "checkpoint" and "step" ---

def test_the_bundled_sample_says_so_on_the_first_line():
    for command in ("info", "params"):
        first = run(command).stdout.splitlines()[0]
        assert first == "checkpoint: bundled sample (Shakespeare GPT, step 3000); pass -c PATH for your own"


def test_the_first_line_names_the_checkpoint_and_its_step(tmp_path, monkeypatch):
    np.savez(tmp_path / "a.npz", token_emb=np.ones((5, 2), np.float32), iter_num=np.array(77))
    np.savez(tmp_path / "b.npz", token_emb=np.ones((5, 2), np.float32))
    for command in ("info", "params"):
        assert run(command, "-c", tmp_path / "a.npz").stdout.splitlines()[0] == f"checkpoint: {tmp_path / 'a.npz'} (step 77)"
        assert run(command, "-c", tmp_path / "b.npz").stdout.splitlines()[0] == f"checkpoint: {tmp_path / 'b.npz'} (step unknown)"
    monkeypatch.setenv("EMBSCOPE_CHECKPOINT", str(tmp_path / "b.npz"))  # named by the user: not the sample
    assert run("params").stdout.splitlines()[0] == f"checkpoint: {tmp_path / 'b.npz'} (step unknown)"


def test_json_documents_carry_checkpoint_and_step(tmp_path):
    np.savez(tmp_path / "a.npz", token_emb=np.ones((5, 2), np.float32), iter_num=np.array(77))
    np.savez(tmp_path / "b.npz", token_emb=np.ones((5, 2), np.float32))
    for command in ("info", "params"):
        a, b = run_json(command, "-c", tmp_path / "a.npz"), run_json(command, "-c", tmp_path / "b.npz")
        assert (a["checkpoint"], a["step"]) == (str(tmp_path / "a.npz"), 77)
        assert (b["checkpoint"], b["step"]) == (str(tmp_path / "b.npz"), None)
