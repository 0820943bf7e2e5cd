"""The ANDREA flat float32 reader: real dumps written with struct.pack and numpy, tables checked
against independent numpy slicing, every error message pinned."""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import run, run_json

import embscope
from embscope.core.errors import CheckpointError, OptionError
from embscope.formats import OpenOptions, open_checkpoint
from embscope.formats.andrea import open_andrea

V, D, T = 11, 4, 6  # a small model: 11 tokens, 4 wide, 6 positions


def layer_params(layers: int, d: int) -> int:
    return layers * (4 * d * d + 2 * d * 4 * d)  # four d x d attention, two d x 4d MLP matrices


def write_dump(path: Path, weights: np.ndarray, step: int = 0, adam: bool = False, n: int | None = None) -> Path:
    """An ANDREA dump: int32 step, int32 n_params, the weights, then (optionally) both Adam moments."""
    weights = np.asarray(weights, dtype="<f4")
    with open(path, "wb") as f:
        f.write(struct.pack("<ii", step, len(weights) if n is None else n))
        weights.tofile(f)
        if adam:
            (weights * 10).tofile(f)  # first moment, distinct from the weights
            (weights * 100).tofile(f)  # second moment
    return path


def write_json(path: Path, doc) -> Path:
    path.write_text(json.dumps(doc))
    return path


def random_weights(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


def untied_n(layers: int = 1) -> int:
    return (2 * V + T) * D + layer_params(layers, D)


def tied_n(layers: int = 1) -> int:
    return (V + T) * D + layer_params(layers, D)


# --- reading the tables --------------------------------------------------------------------------

def test_weights_only_dump_reads_each_table_at_its_offset(tmp_path):
    n = untied_n()
    weights = random_weights(n)
    path = write_dump(tmp_path / "model.bin", weights, step=1234)
    write_json(tmp_path / "train_config.json", {"vocab_size": V, "n_embd": D, "block_size": T, "n_layers": 1})

    ckpt = open_checkpoint(path)
    assert ckpt.format == "ANDREA flat float32"
    assert (ckpt.step, ckpt.declared_params) == (1234, n)
    assert list(ckpt.tensors) == ["token_emb", "pos_emb", "lm_head"]
    token, pos, head = (ckpt.tensors[k].read() for k in ("token_emb", "pos_emb", "lm_head"))
    np.testing.assert_array_equal(token, weights[: V * D].reshape(V, D))
    np.testing.assert_array_equal(pos, weights[V * D:(V + T) * D].reshape(T, D))
    np.testing.assert_array_equal(head, weights[(V + T) * D:(2 * V + T) * D].reshape(V, D))
    # memory-mapped at the table's own offset: nothing else of the file is read
    assert all(isinstance(a, np.memmap) for a in (token, pos, head))
    assert (token.offset, pos.offset, head.offset) == (8, 8 + 4 * V * D, 8 + 4 * (V + T) * D)
    assert not any("Adam" in note for note in ckpt.notes)
    assert f"the other {n - (2 * V + T) * D:,} weights (the layers) are not catalogued as tensors; " \
           f"the parameter total is the header's n_params={n:,}" in ckpt.notes


def test_dump_with_adam_moments_reads_the_weights_not_the_moments(tmp_path):
    n = untied_n()
    weights = random_weights(n, seed=1)
    path = write_dump(tmp_path / "model.bin", weights, step=7, adam=True)
    assert path.stat().st_size == 8 + 12 * n
    write_json(tmp_path / "config.json", {"vocab_size": V, "d_model": D, "context": T})

    emb = embscope.open(path)
    np.testing.assert_array_equal(emb.token.array, weights[: V * D].reshape(V, D))
    np.testing.assert_array_equal(emb.position.array, weights[V * D:(V + T) * D].reshape(T, D))
    assert isinstance(emb.token.array, np.memmap)
    assert "file also holds Adam moments (8 + 12n bytes)" in emb.checkpoint.notes
    assert emb.checkpoint.declared_params == n


def test_smallest_dump_as_a_byte_literal(tmp_path):
    # V=1, d=2, T=1, untied, no layers: token [1, 2], position [3, 4], head [5, 6]
    raw = struct.pack("<ii", 42, 6) + struct.pack("<6f", 1, 2, 3, 4, 5, 6)
    (tmp_path / "model.bin").write_bytes(raw)
    write_json(tmp_path / "config.json", {"V": 1, "d": 2, "T": 1, "tied": False})
    ckpt = open_checkpoint(tmp_path / "model.bin")
    assert ckpt.step == 42
    assert ckpt.tensors["token_emb"].read().tolist() == [[1.0, 2.0]]
    assert ckpt.tensors["pos_emb"].read().tolist() == [[3.0, 4.0]]
    assert ckpt.tensors["lm_head"].read().tolist() == [[5.0, 6.0]]


def test_directory_finds_the_dump_and_ignores_tokenizer_json(tmp_path):
    write_dump(tmp_path / "model.bin", random_weights(untied_n()))
    write_json(tmp_path / "config.json", {"vocab_size": V, "n_embd": D, "block_size": T})
    # the Harris segments file is a tokenizer: its numbers are not the model's
    write_json(tmp_path / "harris_segments.json", {"vocab_size": 999, "segments": ["the", "and"]})
    write_json(tmp_path / "tokenizer.json", {"vocab_size": 5})
    ckpt = open_checkpoint(tmp_path)
    assert ckpt.path == tmp_path / "model.bin"
    assert ckpt.tensors["token_emb"].shape == (V, D)
    assert "vocab_size" in ckpt.config and "segments" not in ckpt.config


# --- where V, d and T come from ------------------------------------------------------------------

def test_nested_configs_from_two_files_are_merged(tmp_path):
    path = write_dump(tmp_path / "model.bin", random_weights(tied_n(2)))
    # the engine's training config and its portable model each say part of it
    write_json(tmp_path / "andrea_train.json", {"config": {"n_vocab": V, "dim": D}, "lr": 3e-4, "seq_len": 2})
    write_json(tmp_path / "portable.json", {"model": {"context_length": T, "num_layers": 2, "n_heads": 2}})
    ckpt = open_checkpoint(path)
    assert ckpt.tensors["token_emb"].shape == (V, D)
    assert ckpt.tensors["pos_emb"].shape == (T, D)  # context_length outranks the training seq_len
    assert ckpt.config["lr"] == 3e-4 and "model" in ckpt.config
    assert ckpt.notes[0] == (f"shapes: V={V} (n_vocab in andrea_train.json under config), "
                             f"d={D} (dim in andrea_train.json under config), "
                             f"T={T} (context_length in portable.json under model)")
    assert ckpt.notes[1] == ("model: layers=2 (num_layers in portable.json under model), "
                             "heads=2 (n_heads in portable.json under model)")


def test_flags_override_the_json_files(tmp_path):
    weights = random_weights(untied_n(), seed=2)
    path = write_dump(tmp_path / "model.bin", weights)
    write_json(tmp_path / "config.json", {"vocab_size": V, "n_embd": D, "block_size": T})
    ckpt = open_checkpoint(path, OpenOptions(vocab_size=5, d_model=2, context=3))
    token, pos = ckpt.tensors["token_emb"].read(), ckpt.tensors["pos_emb"].read()
    np.testing.assert_array_equal(token, weights[:10].reshape(5, 2))
    np.testing.assert_array_equal(pos, weights[10:16].reshape(3, 2))
    assert ckpt.notes[0] == "shapes: V=5 (vocab_size), d=2 (d_model), T=3 (context)"  # OpenOptions' names
    assert f"vocab_size=5 overrides vocab_size in config.json ({V})" in ckpt.notes


def test_flags_alone_need_no_json(tmp_path):
    weights = random_weights(untied_n())
    path = write_dump(tmp_path / "model.bin", weights)
    doc = run_json("info", "-c", path, "--vocab-size", V, "--d-model", D, "--context", T)
    assert doc["tables"]["position"]["shape"] == [T, D]
    assert run("info", "-c", path, "--vocab-size", V, "--d-model", D, "--context", T).stderr == ""


def test_the_size_flags_on_a_file_that_records_its_shapes_are_said_not_used(tmp_path):
    # accepted and dropped without a word before; a warning, not an error: compare may mix in a dump they fit
    path = tmp_path / "model.npz"
    np.savez(path, token_emb=np.ones((6, 4), dtype=np.float32))
    done = run("info", "-c", path, "--vocab-size", 9, "--context", 3, "--json")
    assert json.loads(done.stdout)["tables"]["token"]["shape"] == [6, 4]  # the file's own
    assert done.stderr == (f"warning: --vocab-size and --context not used: {str(path)!r} records its shapes (they "
                           "are for ANDREA flat float32 dumps)\n")


def test_top_level_key_speaks_before_a_nested_one(tmp_path):
    path = write_dump(tmp_path / "model.bin", random_weights(untied_n()))
    write_json(tmp_path / "config.json", {"vocab_size": V, "n_embd": D, "block_size": T,
                                          "tokenizer_info": {"vocab_size": 3}})
    assert open_checkpoint(path).tensors["token_emb"].shape == (V, D)


# --- tied or untied ------------------------------------------------------------------------------

@pytest.mark.parametrize("key", ["tie_embeddings", "tied", "tie_word_embeddings"])
def test_config_says_tied(tmp_path, key):
    path = write_dump(tmp_path / "model.bin", random_weights(untied_n()))  # room for a head, but the config rules
    write_json(tmp_path / "config.json", {"vocab_size": V, "n_embd": D, "block_size": T, key: True})
    emb = embscope.open(path)
    assert list(emb.checkpoint.tensors) == ["token_emb", "pos_emb"]
    assert emb.tables.tied and emb.output is None
    assert f"tied output head, as {key} in config.json says" in emb.checkpoint.notes


def test_layer_count_decides_tied_when_the_config_is_silent(tmp_path):
    path = write_dump(tmp_path / "model.bin", random_weights(tied_n(layers=3)))
    write_json(tmp_path / "config.json", {"vocab_size": V, "n_embd": D, "block_size": T, "n_layer": 3})
    ckpt = open_checkpoint(path)
    # tied_n(3) is also large enough for a head, so only the layout formula can tell
    assert tied_n(3) >= (2 * V + T) * D
    assert "lm_head" not in ckpt.tensors
    assert (f"tied output head: n_params={tied_n(3):,} is the ANDREA layout for 3 layers without a separate head"
            in ckpt.notes)


def test_layer_count_decides_untied(tmp_path):
    path = write_dump(tmp_path / "model.bin", random_weights(untied_n(layers=2)))
    write_json(tmp_path / "config.json", {"vocab_size": V, "n_embd": D, "block_size": T, "num_layers": 2})
    ckpt = open_checkpoint(path)
    assert "lm_head" in ckpt.tensors
    assert (f"untied output head: n_params={untied_n(2):,} is the ANDREA layout for 2 layers with a separate head"
            in ckpt.notes)


def test_unknown_layout_assumes_untied_when_a_head_fits(tmp_path):
    n = (2 * V + T) * D + 5
    path = write_dump(tmp_path / "model.bin", random_weights(n))
    write_json(tmp_path / "config.json", {"vocab_size": V, "n_embd": D, "block_size": T})
    ckpt = open_checkpoint(path)
    assert "lm_head" in ckpt.tensors
    assert ("no tied flag or layer count in the config; "
            f"assumed untied: an output head ({V} x {D}) fits after the position table") in ckpt.notes


def test_unknown_layout_assumes_tied_when_no_head_fits(tmp_path):
    n = (2 * V + T) * D - 1
    path = write_dump(tmp_path / "model.bin", random_weights(n))
    write_json(tmp_path / "config.json", {"vocab_size": V, "n_embd": D, "block_size": T, "n_layers": 1})
    ckpt = open_checkpoint(path)
    assert "lm_head" not in ckpt.tensors
    assert (f"n_params={n:,} matches neither ANDREA layout for 1 layers (untied {untied_n(1):,}, tied {tied_n(1):,}); "
            f"assumed tied: no room for an output head ({V} x {D}) after the position table") in ckpt.notes


def test_declared_layout_that_disagrees_with_n_params_is_noted(tmp_path):
    n = untied_n(1) + 8
    path = write_dump(tmp_path / "model.bin", random_weights(n))
    write_json(tmp_path / "config.json", {"vocab_size": V, "n_embd": D, "block_size": T, "n_layers": 1,
                                          "tied": False})
    ckpt = open_checkpoint(path)
    assert (f"n_params={n:,} differs from the ANDREA layout for 1 layers ({untied_n(1):,}); "
            "the tables are read at the layout's offsets anyway") in ckpt.notes


# --- errors: every message pinned ----------------------------------------------------------------

def config_beside(tmp_path: Path, **extra) -> None:
    write_json(tmp_path / "config.json", {"vocab_size": V, "n_embd": D, "block_size": T, **extra})


def open_error(path: Path, options: OpenOptions | None = None) -> str:
    with pytest.raises(CheckpointError) as err:
        open_checkpoint(path, options or OpenOptions())
    return str(err.value)


def test_wrong_file_size_names_both_allowed_sizes(tmp_path):
    config_beside(tmp_path)
    path = write_dump(tmp_path / "model.bin", random_weights(1001), n=1000)  # one float too many
    assert path.stat().st_size == 4012
    assert open_error(path) == ("model.bin: header says n_params=1000, so the file should be 4008 or 12008 bytes, "
                                "found 4012")


def test_truncated_adam_dump_is_a_wrong_size(tmp_path):
    config_beside(tmp_path)
    path = write_dump(tmp_path / "model.bin", random_weights(2999), n=1000)
    assert open_error(path) == ("model.bin: header says n_params=1000, so the file should be 4008 or 12008 bytes, "
                                "found 12004")


@pytest.mark.parametrize("n", [0, -5])
def test_non_positive_n_params(tmp_path, n):
    config_beside(tmp_path)
    path = write_dump(tmp_path / "model.bin", random_weights(10), n=n)
    assert open_error(path) == f"model.bin: header says n_params={n}, expected a positive parameter count"


def test_header_shorter_than_eight_bytes(tmp_path):
    (tmp_path / "model.bin").write_bytes(b"\x01\x00\x00\x00\x02")
    with pytest.raises(CheckpointError) as err:
        open_andrea(tmp_path / "model.bin", OpenOptions())
    assert str(err.value) == ("model.bin: expected an 8-byte ANDREA header (int32 step, int32 n_params), "
                              "found 5 bytes")


def test_tables_larger_than_n_params(tmp_path):
    write_json(tmp_path / "config.json", {"vocab_size": 2305, "n_embd": 384, "block_size": 1024})
    path = write_dump(tmp_path / "model.bin", np.zeros(1000, np.float32))
    needed = (2305 + 1024) * 384  # 1,278,336
    assert open_error(path) == (f"model.bin: token (2305 x 384) and position (1024 x 384) tables need {needed:,} "
                                "floats, the header has 1,000")


def test_declared_untied_head_that_does_not_fit(tmp_path):
    config_beside(tmp_path, tie_embeddings=False)
    n = (2 * V + T) * D - 1
    path = write_dump(tmp_path / "model.bin", random_weights(n))
    assert open_error(path) == (f"model.bin: token ({V} x {D}) and position ({T} x {D}) tables and an untied output "
                                f"head ({V} x {D}) need {(2 * V + T) * D:,} floats, the header has {n:,}")


def test_missing_dimensions_name_flags_and_keys(tmp_path):
    write_json(tmp_path / "config.json", {"n_embd": D, "lr": 0.001})
    path = write_dump(tmp_path / "model.bin", random_weights(untied_n()))
    assert open_error(path) == (
        "model.bin: an ANDREA dump does not record its table shapes; pass vocab_size and context, or put them "
        "in a JSON file beside it (keys looked for, vocab_size: vocab_size, n_vocab, padded_vocab_size, V; "
        "context: n_positions, max_position_embeddings, block_size, n_ctx, context, context_length, max_seq_len, "
        "seq_len, T; read config.json)")
    # the command line names the same options as its flags
    assert run("info", "-c", path, code=1).stderr.startswith(
        "Error: model.bin: an ANDREA dump does not record its table shapes; pass --vocab-size and --context, or put "
        "them in a JSON file beside it (keys looked for, --vocab-size: vocab_size, n_vocab, padded_vocab_size, V; "
        "--context: ")


def test_missing_dimensions_with_no_json_at_all(tmp_path):
    path = write_dump(tmp_path / "model.bin", random_weights(untied_n()))
    assert open_error(path, OpenOptions(vocab_size=V, context=T)) == (
        "model.bin: an ANDREA dump does not record its table shapes; pass d_model, or put them in a JSON file "
        "beside it (keys looked for, d_model: n_embd, d_model, dim, hidden_size, d; found no JSON config beside it)")


def test_non_positive_flag(tmp_path):
    config_beside(tmp_path)
    path = write_dump(tmp_path / "model.bin", random_weights(untied_n()))
    with pytest.raises(OptionError, match=r"^d_model=0: expected a positive integer$") as err:
        open_checkpoint(path, OpenOptions(d_model=0))
    assert err.value.option == "d_model"


def test_non_positive_value_in_json(tmp_path):
    write_json(tmp_path / "config.json", {"vocab_size": V, "n_embd": -4, "block_size": T})
    path = write_dump(tmp_path / "model.bin", random_weights(untied_n()))
    assert open_error(path) == "config.json: n_embd is -4, expected a positive integer"


@pytest.mark.parametrize("value, shown", [("10", '"10"'), (1e300, "1e+300"), (True, "true"), (10.0, "10.0"),
                                          (2**60, str(2**60)), ([10], "[10]")])
def test_config_numbers_must_be_json_integers(value, shown, tmp_path):
    """A shape is a JSON integer; a string, a float (even a whole one), a bool or a list is an error that shows it."""
    write_json(tmp_path / "config.json", {"vocab_size": value, "n_embd": D, "block_size": T})
    path = write_dump(tmp_path / "model.bin", random_weights(untied_n()))
    assert open_error(path) == f"config.json: vocab_size is {shown}, expected a positive integer"


def test_config_tied_flag_must_be_a_json_bool(tmp_path):
    write_json(tmp_path / "config.json", {"vocab_size": V, "n_embd": D, "block_size": T, "tie_embeddings": "no"})
    path = write_dump(tmp_path / "model.bin", random_weights(untied_n()))
    assert open_error(path) == 'config.json: tie_embeddings is "no", expected true or false'


def test_a_directory_scan_parses_the_configs_once(tmp_path, monkeypatch):
    """r14: every .bin in a folder is sniffed, and each asks whether a JSON beside it names ANDREA shapes; the
    JSON files are parsed once for the whole scan, not once per file (2,000 files took 56 s)."""
    from embscope.formats import andrea
    for k in range(40):
        (tmp_path / f"shard{k:03d}.bin").write_bytes(struct.pack("<ii", 1, 5) + b"junk")
    write_json(tmp_path / "config.json", {"vocab_size": V, "n_embd": D, "block_size": T})
    parsed, loads = [], json.loads
    monkeypatch.setattr(andrea.json, "loads", lambda text: parsed.append(1) or loads(text))
    with pytest.raises(CheckpointError, match=r"holds several checkpoints \(40 files, e.g. .* \(and 3\d more\)\)"):
        open_checkpoint(tmp_path)
    assert len(parsed) == 1
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": V + 1}))  # changed: read again
    with pytest.raises(CheckpointError):
        open_checkpoint(tmp_path)
    assert len(parsed) == 2


def test_odd_number_in_a_nested_object_is_ignored(tmp_path):
    write_json(tmp_path / "config.json", {"vocab_size": V, "block_size": T, "model": {"d": D},
                                          "optimizer": {"d": 0.9}})
    path = write_dump(tmp_path / "model.bin", random_weights(untied_n()))
    assert open_checkpoint(path).tensors["token_emb"].shape == (V, D)


def test_a_flag_settles_what_the_files_disagree_on(tmp_path):
    write_json(tmp_path / "a.json", {"vocab_size": V, "n_embd": D, "block_size": T})
    write_json(tmp_path / "b.json", {"vocab_size": V + 1})
    path = write_dump(tmp_path / "model.bin", random_weights(untied_n()))
    assert open_checkpoint(path, OpenOptions(vocab_size=V)).tensors["token_emb"].shape == (V, D)


def test_json_files_that_disagree(tmp_path):
    write_json(tmp_path / "a.json", {"vocab_size": V, "n_embd": D, "block_size": T})
    write_json(tmp_path / "b.json", {"vocab_size": V + 1})
    path = write_dump(tmp_path / "model.bin", random_weights(untied_n()))
    assert open_error(path) == (f"the JSON files beside the checkpoint disagree on vocab_size: "
                                f"{V} (vocab_size in a.json), {V + 1} (vocab_size in b.json)")


# --- sniffing ------------------------------------------------------------------------------------

def test_right_size_sniffs_whatever_the_name(tmp_path):
    path = write_dump(tmp_path / "weights.dat", random_weights(untied_n()))
    ckpt = open_checkpoint(path, OpenOptions(vocab_size=V, d_model=D, context=T))
    assert ckpt.format == "ANDREA flat float32"


def test_wrong_size_without_bin_suffix_or_config_is_unknown(tmp_path):
    path = write_dump(tmp_path / "weights.dat", random_weights(1001), n=1000)
    assert "is not a checkpoint embscope knows" in open_error(path)
    path = write_dump(tmp_path / "model.bin", random_weights(1001), n=1000)  # .bin, but no config beside it
    assert "is not a checkpoint embscope knows" in open_error(path)


def test_zip_named_bin_is_never_claimed(tmp_path):
    config_beside(tmp_path)
    (tmp_path / "model.bin").write_bytes(b"PK\x03\x04" + bytes(60))
    assert "is not a checkpoint embscope knows" in open_error(tmp_path / "model.bin")


# --- through the command line --------------------------------------------------------------------

def test_cli_info_and_params(tmp_path):
    n = untied_n(2)
    write_dump(tmp_path / "model.bin", random_weights(n), step=900, adam=True)
    config_beside(tmp_path, n_layers=2)
    info = run_json("info", "-c", tmp_path / "model.bin")
    assert (info["format"], info["step"], info["tied"]) == ("ANDREA flat float32", 900, False)
    assert info["tables"]["token"]["shape"] == [V, D]
    assert info["tables"]["position"]["shape"] == [T, D]
    assert info["tables"]["output"]["shape"] == [V, D]
    assert "file also holds Adam moments (8 + 12n bytes)" in info["notes"]

    params = run_json("params", "-c", tmp_path / "model.bin")
    assert (params["total"], params["token"], params["position"], params["output"]) == (n, V * D, T * D, V * D)
    assert params["total_source"] == "the parameter count in the file's header"
    assert params["shares"]["embeddings"] == (V + T) * D / n


def test_cli_error_is_one_line_and_exit_1(tmp_path):
    config_beside(tmp_path)
    write_dump(tmp_path / "model.bin", random_weights(1001), n=1000)
    result = run("info", "-c", tmp_path / "model.bin", code=1)
    assert result.stderr.strip() == ("Error: model.bin: header says n_params=1000, so the file should be 4008 or "
                                     "12008 bytes, found 4012")


def test_andrea_120m_at_full_shape(tmp_path):
    # ANDREA-120M: d 768, 12 layers, vocab 8449, context 1024, untied head
    v, d, t, layers = 8449, 768, 1024, 12
    n = 98_698_752
    assert n == 2 * v * d + t * d + layers * (4 * d * d + 2 * d * 4 * d)
    started = time.perf_counter()
    path = tmp_path / "andrea-120m.bin"
    with open(path, "wb") as f:
        f.write(struct.pack("<ii", 60_000, n))
        np.arange((v + t) * d, dtype="<f4").tofile(f)  # the two tables; the rest is a sparse hole of zeros
        f.truncate(8 + 4 * n)
    assert path.stat().st_size == 394_795_016
    write_json(tmp_path / "andrea_config.json", {"model": {"vocab_size": v, "n_embd": d, "block_size": t,
                                                           "n_layers": layers, "n_heads": 12}})

    doc = run_json("params", "-c", path)
    assert (doc["total"], doc["token"], doc["position"], doc["output"]) == (n, 6_488_832, 786_432, 6_488_832)
    assert doc["embeddings"] == 7_275_264 and doc["tied"] is False
    assert doc["shares"]["embeddings"] == 7_275_264 / 98_698_752
    assert round(doc["shares"]["embeddings"] * 100, 2) == 7.37
    assert doc["shares"]["token"] == 6_488_832 / 98_698_752
    assert doc["shares"]["position"] == 786_432 / 98_698_752
    text = run("params", "-c", path).stdout
    assert "7,275,264" in text and "7.37%" in text and "98,698,752" in text

    emb = embscope.open(path)
    assert emb.position.array[1023, 767] == (v + t) * d - 1  # the last float written, read in place
    assert emb.checkpoint.step == 60_000
    assert time.perf_counter() - started < 10


@pytest.mark.parametrize("step", [640, 896, 1152, 1408])
def test_steps_whose_bytes_look_like_a_pickle_still_open(tmp_path, step):
    # int32 640 is 80 02 00 00: a pickle's PROTO 2, and pickles are sniffed early
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 10, "d_model": 4, "context": 6, "tied": True}))
    weights = np.arange(100, dtype="<f4")
    (tmp_path / "model.bin").write_bytes(struct.pack("<ii", step, 100) + weights.tobytes())
    emb = embscope.open(tmp_path / "model.bin")
    assert (emb.checkpoint.format, emb.checkpoint.step) == ("ANDREA flat float32", step)
    np.testing.assert_array_equal(emb.token.array, weights[:40].reshape(10, 4))


def test_a_first_weight_that_looks_like_a_safetensors_header_still_opens(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 10, "d_model": 4, "context": 6, "tied": True}))
    weights = np.zeros(100, dtype="<f4")
    body = bytearray(weights.tobytes())
    body[0:2] = b'{"'  # byte 8 and 9 of the file: what the safetensors sniffer looks at
    (tmp_path / "model.bin").write_bytes(struct.pack("<ii", 7, 100) + bytes(body))
    assert embscope.open(tmp_path / "model.bin").checkpoint.format == "ANDREA flat float32"


def test_the_size_flags_are_said_once_a_file_over_a_run(tmp_path):
    # compare opens a run's files to order them, then again to compare them (and report likewise): the warning was
    # said twice for every file
    rng = np.random.default_rng(0)
    for step in (100, 200, 300):
        np.savez(tmp_path / f"ckpt_{step}.npz", token_emb=rng.standard_normal((6, 4)).astype(np.float32))
    done = run("compare", tmp_path, "--vocab-size", 9, "--json")
    assert sorted(done.stderr.splitlines()) == [
        f"warning: --vocab-size not used: {str(tmp_path / f'ckpt_{step}.npz')!r} records its shapes (they are for "
        "ANDREA flat float32 dumps)" for step in (100, 200, 300)]
    json.loads(done.stdout)
