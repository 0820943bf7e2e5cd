"""nanoGPT's character-level meta.pkl, pickled here as data/shakespeare_char/prepare.py does; ids worked
out by hand from the sorted character list."""

from __future__ import annotations

import collections
import pickle
from pathlib import Path

import pytest

from embscope.core.errors import CheckpointError, TokenError, TokenizerError, UnsafePickleError
from embscope.tokenizers import Tokenizer, find_tokenizer, load_tokenizer

CHARS = sorted(set("\n !',.?abcdefghijklmnopqrstuvwxyzABC"))  # as prepare.py: sorted(list(set(data)))


def write_meta(path: Path, chars: list[str] = CHARS, **extra: object) -> Path:
    """prepare.py's meta: {'vocab_size': ..., 'itos': ..., 'stoi': ...}, pickled with the default protocol."""
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": {c: i for i, c in enumerate(chars)}}
    path.write_bytes(pickle.dumps(meta | extra))
    return path


def test_characters_by_hand(tmp_path):
    tokenizer = load_tokenizer(write_meta(tmp_path / "meta.pkl"))
    assert tokenizer.kind == "nanogpt-chars" and isinstance(tokenizer, Tokenizer)
    assert tokenizer.vocab_size == len(CHARS)
    # "\n" 0, " " 1, "!" 2, "'" 3, "," 4, "." 5, "?" 6, "A" 7, "B" 8, "C" 9, "a" 10, ... "d" 13, "g" 16, "o" 24
    assert tokenizer.encode(" dog") == [1, 13, 24, 16]
    assert [tokenizer.token_string(id) for id in (0, 13)] == ["\n", "d"]
    assert tokenizer.decode([13, 24, 16]) == "dog"
    assert (tokenizer.unk_id, tokenizer.special_ids) == (None, frozenset())


def test_character_outside_the_vocabulary(tmp_path):
    tokenizer = load_tokenizer(write_meta(tmp_path / "meta.pkl"))
    with pytest.raises(TokenError) as err:
        tokenizer.encode("dog🐶")
    assert str(err.value) == "the character '🐶' of 'dog🐶' is not in the vocabulary meta.pkl"


def test_vocab_size_past_the_characters_leaves_unused_ids(tmp_path):
    tokenizer = load_tokenizer(write_meta(tmp_path / "meta.pkl", ["a", "b"], vocab_size=4))
    assert tokenizer.vocab_size == 4
    with pytest.raises(TokenError) as err:
        tokenizer.token_string(3)
    assert str(err.value) == "token id 3 is not used by the nanogpt-chars tokenizer meta.pkl"


def test_found_where_sample_py_looks(tmp_path, monkeypatch):
    # nanoGPT's layout: out-shakespeare-char/ckpt.pt beside data/shakespeare_char/meta.pkl
    meta = write_meta(tmp_path / "repo" / "data" / "shakespeare_char" / "meta.pkl")
    out = tmp_path / "repo" / "out-shakespeare-char"
    out.mkdir()
    (out / "ckpt.pt").write_bytes(b"")
    config = {"dataset": "shakespeare_char"}
    assert find_tokenizer(out / "ckpt.pt") is None  # without the config there is nothing to follow
    assert find_tokenizer(out / "ckpt.pt", config).path == meta  # from the checkpoint's parent folders
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    here = write_meta(elsewhere / "data" / "shakespeare_char" / "meta.pkl", ["x", "y"])
    assert find_tokenizer(out, config).path.resolve() == here  # the working directory first, as sample.py
    write_meta(out / "meta.pkl", ["q"])
    assert find_tokenizer(out, config).path == out / "meta.pkl"  # beside the checkpoint wins


def test_dataset_name_never_climbs_out_of_data(tmp_path):
    write_meta(tmp_path / "secret" / "meta.pkl")
    (tmp_path / "data").mkdir()
    (tmp_path / "out").mkdir()
    assert find_tokenizer(tmp_path / "out", {"dataset": "../secret"}) is None
    assert find_tokenizer(tmp_path / "out", {"dataset": 5}) is None


def test_only_plain_containers_are_unpickled(tmp_path):
    path = tmp_path / "meta.pkl"
    path.write_bytes(pickle.dumps({"stoi": collections.OrderedDict(a=0)}))
    with pytest.raises(UnsafePickleError) as err:
        load_tokenizer(path)
    assert str(err.value).startswith(f"{path}: refused to unpickle global 'collections.OrderedDict'")


def test_damaged_vocabularies(tmp_path):
    path = tmp_path / "meta.pkl"
    cases = [
        ({"itos": {0: "ab"}}, "expected 'itos' in meta.pkl to map ids to single characters, found 0: 'ab'"),
        ({"itos": {0: "a"}, "stoi": {"a": 1}}, "expected 'stoi' and 'itos' in meta.pkl to agree, found them different"),
        ({"itos": {0: "\udcff"}}, ("expected the character of id 0 in meta.pkl to be text, found '\\udcff', "
                                   "which holds a lone surrogate")),
        ({"itos": {0: "a", 5: "b"}, "vocab_size": 3},
         "expected vocab_size in meta.pkl to be more than its largest id 5, found 3"),
        ([1, 2], "expected a dict with 'stoi' and 'itos' in meta.pkl, found list"),
    ]
    for meta, message in cases:
        path.write_bytes(pickle.dumps(meta))
        with pytest.raises(CheckpointError) as err:
            load_tokenizer(path)
        assert str(err.value) == message


def test_cli_finds_meta_pkl_from_a_nanogpt_checkpoint_config(tmp_path, monkeypatch):
    # a character-level nanoGPT run: ckpt.pt records config["dataset"]; sample.py reads data/<dataset>/meta.pkl
    import numpy as np
    import torch
    from conftest import run_json

    write_meta(tmp_path / "data" / "shakespeare_char" / "meta.pkl")
    rng = np.random.default_rng(0)
    wte = rng.standard_normal((len(CHARS), 8)).astype(np.float32)
    state = {"transformer.wte.weight": torch.from_numpy(wte),
             "transformer.wpe.weight": torch.from_numpy(rng.standard_normal((16, 8)).astype(np.float32))}
    (tmp_path / "out").mkdir()
    torch.save({"model": state, "iter_num": 250, "config": {"dataset": "shakespeare_char"}}, tmp_path / "out" / "ckpt.pt")
    monkeypatch.chdir(tmp_path)
    doc = run_json("similarity", "a", "b", "-c", "out/ckpt.pt")
    a, b = wte[CHARS.index("a")], wte[CHARS.index("b")]
    assert doc["pairs"][0]["a_ids"] == [CHARS.index("a")]
    assert doc["pairs"][0]["cosine"] == pytest.approx(float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)), abs=1e-6)


def test_a_tokenizer_folder_named_is_the_only_place_looked(tmp_path, monkeypatch):
    """--tokenizer DIR names where the tokenizer is: a folder with none in it is said, not passed over for the
    meta.pkl the checkpoint's config points to (that search is for a checkpoint given no --tokenizer)."""
    import numpy as np
    import torch
    from conftest import run_json

    write_meta(tmp_path / "data" / "shakespeare_char" / "meta.pkl")
    state = {"transformer.wte.weight": torch.from_numpy(np.ones((len(CHARS), 8), dtype=np.float32))}
    (tmp_path / "out").mkdir()
    (tmp_path / "elsewhere").mkdir()
    torch.save({"model": state, "iter_num": 250, "config": {"dataset": "shakespeare_char"}}, tmp_path / "out" / "ckpt.pt")
    monkeypatch.chdir(tmp_path)
    assert run_json("info", "-c", "out/ckpt.pt")["tokenizer"]["kind"] == "nanogpt-chars"
    doc = run_json("info", "-c", "out/ckpt.pt", "--tokenizer", "elsewhere")
    assert doc["tokenizer"] is None
    assert any(note.startswith("tokenizer not loaded: expected a tokenizer file in elsewhere") for note in doc["notes"])
    with pytest.raises(TokenizerError, match="expected a tokenizer file in"):
        load_tokenizer(tmp_path / "elsewhere", {"dataset": "shakespeare_char"})
