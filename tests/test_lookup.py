"""lookup_word: which form of a word is encoded, for each kind of tokenizer.
Tokenizer files are written here; the expected ids are worked out by hand from them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from embscope.errors import TokenError
from embscope.lookup import WordLookup, lookup_word
from embscope.tokenizers import load_tokenizer
from embscope.tokenizers.byte_alphabet import bytes_to_unicode

# ---------------------------------------------------------------- files

# merge i makes id 256 + i: do, dog, bi, te, bite, " dog"
BYTE_MERGES = [(100, 111), (256, 103), (98, 105), (116, 101), (258, 259), (32, 257)]
GPT4_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""
)


def write_minbpe(path: Path, pattern: str) -> Path:
    lines = ["minbpe v1", pattern, "0", *(f"{a} {b}" for a, b in BYTE_MERGES)]
    path.write_text("\n".join(lines) + "\n")
    return path


# GPT-2 vocabulary: id = byte for the 256 byte symbols, then one id per merge
GPT2_MERGES = [("Ġ", "d"), ("o", "g"), ("Ġd", "og"), ("Ġ", "b"), ("i", "t")]


def write_gpt2(directory: Path) -> Path:
    vocab = {char: byte for byte, char in bytes_to_unicode().items()}
    for rank, (a, b) in enumerate(GPT2_MERGES):
        vocab[a + b] = 256 + rank  # Ġd 256, og 257, Ġdog 258, Ġb 259, it 260
    (directory / "vocab.json").write_text(json.dumps(vocab))
    (directory / "merges.txt").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in GPT2_MERGES))
    return directory / "vocab.json"


@pytest.fixture
def nlm_like(tmp_path):
    return load_tokenizer(write_minbpe(tmp_path / "nlm.model", r"\w+|\s|[^\w\s]+"))


@pytest.fixture
def gpt2(tmp_path):
    return load_tokenizer(write_gpt2(tmp_path))


# ---------------------------------------------------------------- byte BPE, space apart


def test_space_token_is_left_out(nlm_like):
    result = lookup_word(nlm_like, "dog")
    assert result == WordLookup(
        word="dog",
        ids=(257,),
        tokens=("dog",),
        form="dog",
        note="the space before 'dog' is a token of its own (id 32), so it was left out",
    )


def test_multi_token_word_keeps_every_piece(nlm_like):
    result = lookup_word(nlm_like, "bites")
    assert (result.ids, result.tokens, result.form) == ((260, 115), ("bite", "s"), "bites")


def test_exact_encodes_as_given(nlm_like):
    result = lookup_word(nlm_like, " dog", exact=True)
    assert (result.ids, result.tokens, result.form, result.note) == ((32, 257), (" ", "dog"), " dog", None)


def test_byte_bpe_with_space_kept_on_the_word(tmp_path):
    pytest.importorskip("regex")  # the GPT-4 pattern needs \p{L}
    tokenizer = load_tokenizer(write_minbpe(tmp_path / "gpt4.model", GPT4_PATTERN))
    result = lookup_word(tokenizer, "dog")
    assert (result.ids, result.tokens, result.form) == ((261,), (" dog",), " dog")
    assert result.note == "used the in-sentence form ' dog' (one token)"


# ---------------------------------------------------------------- GPT-2


def test_gpt2_in_sentence_form(gpt2):
    result = lookup_word(gpt2, "dog")
    assert (result.ids, result.tokens, result.form) == ((258,), (" dog",), " dog")
    assert result.note == "used the in-sentence form ' dog' (one token)"
    exact = lookup_word(gpt2, "dog", exact=True)
    assert (exact.ids, exact.tokens, exact.note) == ((100, 257), ("d", "og"), None)


def test_gpt2_word_encoded_as_given(gpt2):
    # " bit" is Ġb + it, which is neither one token nor the space + "bit" (b + it)
    result = lookup_word(gpt2, "bit")
    assert (result.ids, result.tokens, result.form, result.note) == ((98, 260), ("b", "it"), "bit", None)


def test_gpt2_unmerged_space(gpt2):
    result = lookup_word(gpt2, "cat")
    assert result.ids == (99, 97, 116) and result.form == "cat"
    assert result.note == "the space before 'cat' is a token of its own (id 32), so it was left out"


def test_gpt2_hand_ids_agree_with_the_tokenizers_library(tmp_path, gpt2):
    from tokenizers import ByteLevelBPETokenizer

    reference = ByteLevelBPETokenizer(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"))
    for text in ("dog", " dog", "bit", " bit", " cat"):
        assert gpt2.encode(text) == reference.encode(text).ids


# ---------------------------------------------------------------- Hugging Face


def write_wordpiece(path: Path) -> Path:
    from tokenizers import Tokenizer as HFTokenizer, models, normalizers, pre_tokenizers

    vocab = {"[UNK]": 0, "the": 1, "dog": 2, "bite": 3, "##s": 4}
    hf = HFTokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]"))
    hf.normalizer = normalizers.BertNormalizer(lowercase=True)
    hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    hf.save(str(path))
    return path


def test_wordpiece_ignores_spaces_so_nothing_to_say(tmp_path):
    tokenizer = load_tokenizer(write_wordpiece(tmp_path / "tokenizer.json"))
    assert lookup_word(tokenizer, "Dog") == WordLookup("Dog", (2,), ("dog",), "Dog", None)
    bites = lookup_word(tokenizer, "bites")
    assert (bites.ids, bites.tokens, bites.note) == ((3, 4), ("bite", "##s"), None)


def test_word_that_encodes_to_nothing(tmp_path):
    tokenizer = load_tokenizer(write_wordpiece(tmp_path / "tokenizer.json"))
    with pytest.raises(TokenError) as err:
        lookup_word(tokenizer, "   ")
    assert str(err.value) == "the word '   ' encodes to no tokens with the huggingface tokenizer tokenizer.json"


def test_unigram_metaspace(tmp_path):
    from tokenizers import Tokenizer as HFTokenizer, decoders, models, pre_tokenizers

    pieces = [("<unk>", 0.0), ("▁", -3.0), ("▁dog", -1.0)] + [(c, -6.0) for c in "dog"]
    hf = HFTokenizer(models.Unigram(pieces, unk_id=0))
    hf.pre_tokenizer = pre_tokenizers.Metaspace()
    hf.decoder = decoders.Metaspace()
    hf.save(str(tmp_path / "tokenizer.json"))
    tokenizer = load_tokenizer(tmp_path / "tokenizer.json")
    # the Metaspace pre-tokenizer already puts "▁" before a first word
    assert lookup_word(tokenizer, "dog") == WordLookup("dog", (2,), (" dog",), "dog", None)


# ---------------------------------------------------------------- Harris


@pytest.fixture
def harris(tmp_path):
    path = tmp_path / "harris_segments.json"
    path.write_text(json.dumps(["dog", " dog", "do", "bites"]))  # ids 257 .. 260
    return load_tokenizer(path)


def test_harris_segment_with_its_space(harris):
    result = lookup_word(harris, "dog")
    assert (result.ids, result.tokens, result.form) == ((258,), (" dog",), " dog")


def test_harris_space_falls_back_to_its_byte(harris):
    result = lookup_word(harris, "bites")
    assert (result.ids, result.form) == ((260,), "bites")
    assert result.note == "the space before 'bites' is a token of its own (id 32), so it was left out"


# ---------------------------------------------------------------- general


def test_empty_word(nlm_like):
    with pytest.raises(TokenError) as err:
        lookup_word(nlm_like, "")
    assert str(err.value) == "expected a word to look up, found an empty string"


def test_result_is_frozen(nlm_like):
    result = lookup_word(nlm_like, "dog")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.ids = (1,)
