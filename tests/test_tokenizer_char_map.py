"""Character vocabularies: a JSON object of character (or token) -> id, written with json.dump as Keras users
save a char-level Tokenizer's word_index; ids worked out by hand from the map."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import run, run_json

from embscope.core.errors import CheckpointError, TokenError
from embscope.tokenizers import Tokenizer, find_tokenizer, load_tokenizer

# Keras' char-level word_index: ids from 1 by frequency; 0 is left for padding
WORD_INDEX = {" ": 1, "e": 2, "t": 3, "o": 4, "a": 5, "d": 6, "g": 7, "c": 8, "h": 9, "!": 10}


def write_map(path: Path, index: dict) -> Path:
    with open(path, "w", encoding="utf-8") as file:
        json.dump(index, file, ensure_ascii=False)
    return path


def test_characters_one_by_one(tmp_path):
    tokenizer = load_tokenizer(write_map(tmp_path / "chars.json", WORD_INDEX))
    assert tokenizer.kind == "char-map" and isinstance(tokenizer, Tokenizer)
    assert tokenizer.vocab_size == 11
    assert tokenizer.encode("dog cat!") == [6, 4, 7, 1, 8, 5, 3, 10]
    assert tokenizer.decode([6, 4, 7]) == "dog" and tokenizer.token_string(1) == " "
    assert (tokenizer.unk_id, tokenizer.special_ids) == (None, frozenset())
    with pytest.raises(TokenError) as err:
        tokenizer.token_string(0)  # Keras' padding id: no character
    assert str(err.value) == "token id 0 is not used by the char-map tokenizer chars.json"
    with pytest.raises(TokenError) as err:
        tokenizer.encode("Dog")  # nothing is lower-cased behind the user's back
    assert str(err.value) == "the character 'D' of 'Dog' is not in the vocabulary chars.json, which has no unknown token"


def test_longer_keys_by_greedy_longest_match(tmp_path):
    # at each position the longest key that matches there; markers are never matched in text
    index = {"a": 0, "b": 1, "ab": 2, "abc": 3, "c": 4, "<pad>": 5, "[UNK]": 6, "<": 7, ">": 8}
    tokenizer = load_tokenizer(write_map(tmp_path / "tokens.json", index))
    assert tokenizer.encode("abab") == [2, 2]
    assert tokenizer.encode("aab") == [0, 2]
    assert tokenizer.encode("abcab") == [3, 2]
    assert tokenizer.encode("abx") == [2, 6]  # 'x' is no key: the unknown token
    assert tokenizer.encode("<pad>") == [7, 6, 0, 6, 8]  # the marker is not text: '<', 'p' (unknown), 'a', ...
    assert (tokenizer.unk_id, tokenizer.special_ids) == (6, {5, 6})
    assert tokenizer.token_string(5) == "<pad>"


def test_keras_oov_token_is_the_unknown_token(tmp_path):
    tokenizer = load_tokenizer(write_map(tmp_path / "word_index.json", {"UNK": 1, **{c: i + 2 for i, c in enumerate("dog")}}))
    assert tokenizer.unk_id == 1 and tokenizer.encode("dug") == [2, 1, 4]


def test_found_beside_a_checkpoint_and_used_by_similarity(tmp_path):
    write_map(tmp_path / "characters.json", WORD_INDEX)
    rng = np.random.default_rng(0)
    table = rng.standard_normal((11, 8)).astype(np.float32)
    np.savez(tmp_path / "model.npz", token_emb=table)
    assert find_tokenizer(tmp_path / "model.npz").kind == "char-map"
    (pair,) = run_json("similarity", "dog", "cat", "-c", tmp_path / "model.npz")["pairs"]
    assert (pair["a_ids"], pair["b_ids"]) == ([6, 4, 7], [8, 5, 3])
    dog, cat = table[[6, 4, 7]].astype(np.float64).mean(0), table[[8, 5, 3]].astype(np.float64).mean(0)
    assert pair["cosine"] == pytest.approx(dog @ cat / np.linalg.norm(dog) / np.linalg.norm(cat), abs=1e-9)
    other = write_map(tmp_path / "mine.json", {"d": 0, "o": 1, "g": 2})  # any name, given with --tokenizer
    assert run_json("similarity", "--ids", "0", "1", "-c", tmp_path / "model.npz", "--tokenizer", other)[
        "pairs"][0]["a_tokens"] == ["d"]


@pytest.mark.parametrize("longer", [False, True])
def test_an_empty_key_names_its_id_and_is_never_matched(longer, tmp_path):
    # attacut 1.0.6's attacut-sc/syllables.json (PyPI), 6,227 syllables, begins {"<PAD>": 0, "<UNK>": 1, "": 2, " ": 3}:
    # attacut looks a syllable up whole (sy2ix.get(token, sy2ix.get("<UNK>"))), so no text gives 2. The map was
    # refused whole for it; greedy matching on an empty key would never move on
    index = {"<PAD>": 0, "<UNK>": 1, "": 2, " ": 3, "\u0e01": 4, **({"\u0e01\u0e32": 5} if longer else {})}
    tokenizer = load_tokenizer(write_map(tmp_path / "syllables.json", index))
    assert tokenizer.vocab_size == len(index) and tokenizer.token_string(2) == ""
    assert tokenizer.encode("\u0e01 \u0e01") == [4, 3, 4] and tokenizer.encode("") == []
    assert tokenizer.encode("x") == [1]  # no key: the unknown token, as attacut's lookup gives it
    if longer:
        assert tokenizer.encode("\u0e01\u0e32\u0e01") == [5, 4]
    table = np.random.default_rng(0).standard_normal((len(index), 16)).astype(np.float32)
    np.savez(tmp_path / "model.npz", token_emb=table)
    doc = run_json("norms", "--table", "token", "-c", tmp_path / "model.npz", "--tokenizer", tmp_path / "syllables.json")
    assert not any(note.startswith("tokenizer not loaded") for note in doc["notes"]), doc["notes"]


def test_what_is_not_such_a_map_is_one_line(tmp_path):
    mapping = "expected bad.json to be a JSON object mapping each character or token to its id"
    entry = f"{mapping} (a character or token, then a whole number 0 or more), found"
    cases = [
        ({"d": 0, "o": -1}, f"{entry} 'o': -1"),
        ({"d": 0, "o": True}, f"{entry} 'o': True"),
        ({"": 1}, f"{mapping}, found only the empty key"),  # one empty key with others is attacut's (below)
        ({"d": 0, "\u2581dog": 1}, (f"{mapping}, found a SentencePiece vocabulary ('\u2581' marks a word start) "
                                    "without its model (the token '\u2581dog'): its ids cannot be worked out from the "
                                    "map alone")),
        ({"d": 0, "##s": 1}, (f"{mapping}, found a WordPiece vocabulary ('##' marks a piece inside a word): name it "
                              "vocab.txt (the token '##s'): its ids cannot be worked out from the map alone")),
        ({"d": 2**30}, "expected token ids up to 16,777,215 in bad.json, found 1,073,741,824"),
        ({"d": 0, "x" * 1025: 1}, f"{entry} '{'x' * 59}...: 1"),  # a key no real token is as long as
    ]
    for index, message in cases:
        write_map(tmp_path / "bad.json", index)
        with pytest.raises(CheckpointError) as err:
            load_tokenizer(tmp_path / "bad.json")
        assert str(err.value) == message
    (tmp_path / "bad.json").write_text('{"d": 0, "\\udcff": 1}')
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(tmp_path / "bad.json")
    assert str(err.value) == ("expected the token with id 1 in bad.json to be text, found '\\udcff', which holds a "
                              "lone surrogate")
    (tmp_path / "empty.json").write_text("{}")
    result = run("similarity", "dog", "cat", "--tokenizer", tmp_path / "empty.json", code=1)
    assert result.stderr.startswith(f"Error: {tmp_path / 'empty.json'} is not a tokenizer file embscope knows; "
                                    "expected huggingface")
    assert "char-map (a JSON object mapping each character or token to its id)" in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_deepcuts_other_is_its_unknown_token_never_text(tmp_path):
    # deepcut 0.7's CHARS (OSKut 1.3's and SEFR_CUT 1.1's too): characters, and 'other' at id 80, the id its code
    # gives every character not in the list: [CHARS_MAP.get(c, 80) for c in text]; a part of that list, 'other' kept
    chars = ["\n", " ", "!", "b", "e", "h", "m", "o", "other", "r", "t", "ก", "า"]
    chars_map = {c: i for i, c in enumerate(chars)}
    tokenizer = load_tokenizer(write_map(tmp_path / "characters.json", chars_map))
    for text in ("mother", "brother other", "กา", "mother\u00e9"):
        assert tokenizer.encode(text) == [chars_map.get(c, 8) for c in text], text
    assert (tokenizer.unk_id, tokenizer.special_ids) == (8, frozenset({8}))
    assert tokenizer.token_string(8) == "other"
    # where longer keys are text, 'other' is text as well: greedy longest match, as before
    greedy = load_tokenizer(write_map(tmp_path / "words.json", {"m": 0, "other": 1, "th": 2, "o": 3, "e": 4, "r": 5}))
    assert greedy.encode("mother") == [0, 1] and greedy.unk_id is None


def test_g2p_ids_token2id_json_is_found_beside_its_model(tmp_path):
    """g2p_id 0.4.2 keeps its BERT's character map as token2id.json beside bert_mlm.onnx ({"": 0, "[UNK]": 1,
    "a": 2, ..., "[mask]": 30}, 31 keys for 32 rows): it was not looked for, so norms and undertrained printed #id
    and verified nothing; with --tokenizer it marked [UNK] special and row 31 padding. Ids from the map itself."""
    index = {"": 0, "[UNK]": 1, "a": 2, "n": 3, "ə": 4, **{c: 5 + i for i, c in enumerate("irktmugsbpldoehcyjwfvz-'q")},
             "[mask]": 30}
    write_map(tmp_path / "token2id.json", index)
    table = np.random.default_rng(0).standard_normal((32, 16)).astype(np.float32)
    np.savez(tmp_path / "model.npz", token_emb=table)
    assert find_tokenizer(tmp_path / "model.npz").kind == "char-map"
    (pair,) = run_json("similarity", "kata", "kita", "-c", tmp_path / "model.npz")["pairs"]
    assert (pair["a_ids"], pair["b_ids"]) == ([index[c] for c in "kata"], [index[c] for c in "kita"])
