"""`embscope info` and `embscope params` through the CLI, with numbers worked out by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import gpt2_shapes, invoke, run, run_json, write_safetensors_header_only
from safetensors.numpy import save_file


def test_params_of_the_gpt2_124m_shape(tmp_path):
    # nanoGPT's GPT-2 124M: vocab padded to 50304, 12 layers, 768 wide, context 1024, biases, tied head
    shapes = gpt2_shapes(50304, 12, 768, 1024)
    path = write_safetensors_header_only(tmp_path / "gpt2.safetensors", {n: ("F32", s) for n, s in shapes.items()})
    doc = run_json("params", "-c", path)
    # per layer: 2*768 + 768*2304+2304 + 768*768+768 + 2*768 + 768*3072+3072 + 3072*768+768 = 7,087,872
    assert doc["total"] == 50304 * 768 + 1024 * 768 + 12 * 7_087_872 + 2 * 768 == 124_475_904
    # no head and no config.json: the file does not say whether the head is tied
    assert (doc["token"], doc["position"], doc["output"], doc["tied"]) == (38_633_472, 786_432, None, None)
    assert doc["total_without_position"] == 123_689_472  # nanoGPT prints 123.69M
    assert doc["shares"]["token"] == 38_633_472 / 124_475_904
    text = run("params", "-c", path).stdout
    assert "38,633,472" in text and "31.04%" in text and "0.63%" in text and "124,475,904" in text
    assert "nanoGPT's convention leaves the position table out: 123,689,472 (123.69M)" in text


def test_params_counts_buffers_and_integer_tensors_out(tmp_path):
    save_file({"wte.weight": np.zeros((10, 4), np.float32), "wpe.weight": np.zeros((6, 4), np.float32),
               "h.0.attn.bias": np.zeros((1, 1, 6, 6), np.float32),  # GPT-2's causal mask buffer
               "h.0.attn.c_attn.bias": np.zeros(12, np.float32),
               "position_ids": np.zeros((1, 6), np.int64)}, tmp_path / "m.safetensors")
    doc = run_json("params", "-c", tmp_path / "m.safetensors")
    assert doc["total"] == 40 + 24 + 12
    assert doc["shares"]["embeddings"] == 64 / 76


def test_info_reports_tables_rules_and_step(tmp_path):
    token = np.zeros((12, 4), np.float32)
    np.savez(tmp_path / "m.npz", token_emb=token, pos_emb=np.zeros((5, 4), np.float32), iter_num=np.array(77))
    doc = run_json("info", "-c", tmp_path / "m.npz")
    assert doc["format"] == "numpy .npz" and doc["step"] == 77
    assert doc["tables"]["token"] == {"name": "token_emb", "shape": [12, 4], "dtype": "float32",
                                      "rule": "name 'token_emb' (nlm and other from-scratch numpy models)",
                                      "first_row": 0, "quantization": None}
    assert doc["tables"]["position"]["shape"] == [5, 4] and doc["tables"]["output"] is None
    assert (doc["tied"], doc["head"], doc["empty_roles"]) == (None, "unknown", ["output"])
    assert doc["tensor_list"] == [{"name": "token_emb", "shape": [12, 4], "dtype": "float32"},
                                  {"name": "pos_emb", "shape": [5, 4], "dtype": "float32"}]


def test_info_says_when_there_is_no_position_table(tmp_path):
    save_file({"model.embed_tokens.weight": np.zeros((10, 4), np.float32)}, tmp_path / "m.safetensors")
    result = run("info", "-c", tmp_path / "m.safetensors")
    assert "no learned position table" in result.stdout
    assert json.loads(run("info", "-c", tmp_path / "m.safetensors", "--json").stdout)["tables"]["position"] is None


def test_errors_are_one_line_with_exit_code_1(tmp_path):
    cases = {
        tmp_path / "missing.pt": f"Error: expected a checkpoint file or directory, found nothing at '{tmp_path / 'missing.pt'}'",
        tmp_path: f"Error: expected a checkpoint in directory '{tmp_path}', found no weights file",
    }
    (tmp_path / "notes.txt").write_text("hello")
    cases[tmp_path / "notes.txt"] = f"Error: '{tmp_path / 'notes.txt'}' is not a checkpoint embscope knows (tried "
    for path, message in cases.items():
        result = run("info", "-c", path, code=1)
        assert result.stdout == ""
        assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, result.stderr


def test_directory_with_several_checkpoints_lists_them(tmp_path):
    np.savez(tmp_path / "a.npz", wte=np.zeros((3, 2), np.float32))
    np.savez(tmp_path / "b.npz", wte=np.zeros((3, 2), np.float32))
    result = run("info", "-c", tmp_path, code=1)
    assert result.stderr == (f"Error: directory '{tmp_path}' holds several checkpoints ('a.npz', 'b.npz'); "
                             "pass one with -c\n")


def test_environment_variable_names_the_checkpoint(tmp_path, monkeypatch):
    np.savez(tmp_path / "m.npz", wte=np.zeros((3, 2), np.float32))
    monkeypatch.setenv("EMBSCOPE_CHECKPOINT", str(tmp_path / "m.npz"))
    assert run_json("info")["checkpoint"] == str(tmp_path / "m.npz")


def write_byte_bpe(path, n_merges: int):
    """A minbpe .model file whose merges pair byte 97 ('a') with itself and then with each new id."""
    merges = [(97, 97)] + [(256 + i, 97) for i in range(n_merges - 1)]
    path.write_text("\n".join(["minbpe v1", " |[^ ]+", "0"] + [f"{a} {b}" for a, b in merges]) + "\n")


def test_info_names_padded_rows_past_the_tokenizer(tmp_path):
    np.savez(tmp_path / "m.npz", token_emb=np.zeros((300, 4), np.float32))
    write_byte_bpe(tmp_path / "tokenizer.model", 10)  # 256 bytes + 10 merges = 266 ids
    doc = run_json("info", "-c", tmp_path / "m.npz")
    assert doc["tokenizer"] == {"kind": "byte-bpe", "path": str(tmp_path / "tokenizer.model"), "vocab_size": 266}
    assert "the token table has 300 rows, the tokenizer 266 ids: 34 rows (266..299) are padding" in doc["notes"]


def test_info_warns_when_the_tokenizer_is_bigger_than_the_table(tmp_path):
    np.savez(tmp_path / "m.npz", token_emb=np.zeros((260, 4), np.float32))
    write_byte_bpe(tmp_path / "tokenizer.model", 10)
    doc = run_json("info", "-c", tmp_path / "m.npz")
    assert ("warning: the tokenizer has 266 ids but the token table only 260 rows: is this the model's tokenizer?"
            in doc["notes"])


def test_nanogpt_directory_with_its_meta_pickle_opens_the_checkpoint(tmp_path):
    torch = __import__("pytest").importorskip("torch")
    import pickle
    torch.save({"model": {"transformer.wte.weight": torch.zeros(65, 8)}, "iter_num": 5}, tmp_path / "ckpt.pt")
    (tmp_path / "meta.pkl").write_bytes(pickle.dumps({"vocab_size": 65, "itos": {0: "a"}, "stoi": {"a": 0}}))
    doc = run_json("info", "-c", tmp_path)
    assert doc["checkpoint"] == str(tmp_path / "ckpt.pt") and doc["step"] == 5


def test_long_tensor_names_are_not_cut_in_the_console(tmp_path):
    name = "model.language_model.encoder.embed_tokens.weight"
    save_file({name: np.zeros((10, 4), np.float32)}, tmp_path / "m.safetensors")
    out = run("info", "-c", tmp_path / "m.safetensors").stdout
    assert "…" not in out and "embed_tokens" in out and ".weight" in out


@pytest.mark.slow  # writes 500 MB: the same numbers from a header-only file above, and a small nanoGPT torch.save
# with the prefix and the tied head in tests/test_pytorch_file.py, run in the README's command
def test_params_of_a_real_nanogpt_124m_checkpoint(tmp_path):
    torch = __import__("pytest").importorskip("torch")
    shapes = gpt2_shapes(50304, 12, 768, 1024)
    model = {name: torch.empty(shape) for name, shape in shapes.items()}
    model["lm_head.weight"] = model["transformer.wte.weight"]  # nanoGPT ties the head: one storage
    compiled = {"_orig_mod." + name: t for name, t in model.items()}  # as torch.compile leaves them
    torch.save({"model": compiled, "model_args": {"vocab_size": 50304, "block_size": 1024}, "iter_num": 600000},
               tmp_path / "ckpt.pt")
    doc = run_json("params", "-c", tmp_path / "ckpt.pt")
    assert (doc["total"], doc["token"], doc["position"], doc["tied"]) == (124_475_904, 38_633_472, 786_432, True)
    assert round(doc["shares"]["token"] * 100, 2) == 31.04 and round(doc["shares"]["position"] * 100, 2) == 0.63
    info = run_json("info", "-c", tmp_path / "ckpt.pt")
    assert info["step"] == 600000 and info["tables"]["token"]["name"] == "transformer.wte.weight"


def test_info_and_params_read_no_tensor_data(tmp_path, monkeypatch):
    torch = __import__("pytest").importorskip("torch")
    save_file({"wte.weight": np.ones((10, 4), np.float32)}, tmp_path / "m.safetensors")
    torch.save({"transformer.wte.weight": torch.ones(10, 4)}, tmp_path / "m.pt")

    def refuse(*args, **kwargs):
        raise AssertionError("tensor data was read")

    monkeypatch.setattr(np, "memmap", refuse)  # both readers map tensor data with np.memmap, and only to read it
    for path in (tmp_path / "m.safetensors", tmp_path / "m.pt"):
        assert run_json("info", "-c", path)["tables"]["token"]["shape"] == [10, 4]
        assert run_json("params", "-c", path)["total"] == 40
        with pytest.raises(AssertionError, match="tensor data was read"):  # a command that reads: refused here
            invoke("norms", "--table", "token", "-c", path, catch_exceptions=False)


def test_info_names_one_padded_row_as_one(tmp_path):
    # g2p_id 0.4.2's bert_mlm.onnx: 32 character rows beside token2id.json's 31 ids; info said '1 rows (31..31) are
    # padding'
    np.savez(tmp_path / "m.npz", token_emb=np.ones((267, 4), np.float32))
    write_byte_bpe(tmp_path / "tokenizer.model", 10)  # 266 ids
    assert "the token table has 267 rows, the tokenizer 266 ids: row 266 is padding" in run_json(
        "info", "-c", tmp_path / "m.npz")["notes"]
