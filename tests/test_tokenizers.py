"""Tokenizer kinds: real files written here (minbpe's text format, JSON, files the
tokenizers library saves), ids worked out by hand or by the tokenizers library."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import run, write_minbpe, write_npz
from hypothesis import given, settings
from hypothesis import strategies as st

from embscope.core.errors import CheckpointError, EmbscopeError, TokenError
from embscope.tokenizers import Tokenizer, find_tokenizer, load_tokenizer, registered_kinds

# ---------------------------------------------------------------- byte-level BPE

# like nlm's: a space is a chunk of its own, so no merge can join it to a word
SPACE_APART_PATTERN = r"\w+|\s|[^\w\s]+"
# minbpe's GPT-4 pattern, which needs \p{L} and so the `regex` package
GPT4_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""
)
# merge i makes id 256 + i
MERGES = [
    (100, 111),  # 256 "do"
    (256, 103),  # 257 "dog"
    (98, 105),  # 258 "bi"
    (116, 101),  # 259 "te"
    (258, 259),  # 260 "bite"
    (32, 257),  # 261 " dog", reachable only when the space is not split off
]
DOG, BITE, SPACE_DOG = 257, 260, 261


@pytest.fixture(scope="module")
def nlm_like(tmp_path_factory):
    return load_tokenizer(write_minbpe(tmp_path_factory.mktemp("nlm") / "nlm.model", SPACE_APART_PATTERN, MERGES, {"<|endoftext|>": 300}))


def test_byte_bpe_keeps_the_space_apart(nlm_like):
    assert nlm_like.encode(" dog") == [32, DOG]
    # "bites": bi(258), te(259), then bi+te(260); "s" stays a byte
    assert nlm_like.encode(" bites") == [32, BITE, 115]
    assert nlm_like.encode("dog bites dog") == [DOG, 32, BITE, 115, 32, DOG]
    assert [nlm_like.token_string(id) for id in (32, DOG, BITE, 115)] == [" ", "dog", "bite", "s"]


def test_byte_bpe_without_pattern_merges_across_the_space(tmp_path):
    tokenizer = load_tokenizer(write_minbpe(tmp_path / "basic.model", "", MERGES, {}))
    assert tokenizer.encode(" dog") == [SPACE_DOG]
    assert tokenizer.token_string(SPACE_DOG) == " dog"
    assert tokenizer.vocab_size == 262


def test_minbpe_file_round_trip(nlm_like):
    assert nlm_like.kind == "byte-bpe"
    assert (nlm_like.unk_id, nlm_like.special_ids) == (None, {300})
    assert nlm_like.path.name == "nlm.model"
    assert nlm_like.pattern == SPACE_APART_PATTERN
    assert nlm_like.merges == MERGES
    assert nlm_like.vocab_size == 301
    assert nlm_like.token_string(300) == "<|endoftext|>"
    # a special token in the text is that token, as minbpe's encode(text, allowed_special="all") cuts it out first
    # (re.split on the special tokens, in the file's order) and encodes the rest as ordinary text
    assert nlm_like.encode("<|endoftext|>") == [300]
    assert nlm_like.encode("dog<|endoftext|><|endoftext|> dog") == [DOG, 300, 300, *nlm_like.encode(" dog")]
    assert 300 not in nlm_like.encode("<|endoftext")
    text = "The dog bites — naïve café, 中文 😀\n"
    assert nlm_like.decode(nlm_like.encode(text)) == text
    assert nlm_like.decode([DOG, 300]) == "dog<|endoftext|>"
    assert isinstance(nlm_like, Tokenizer)


def test_minbpe_pattern_keeps_its_spaces(tmp_path):
    tokenizer = load_tokenizer(write_minbpe(tmp_path / "t.model", " ?\\w+ ", [], {}))
    assert tokenizer.pattern == " ?\\w+ "


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=40))
def test_byte_bpe_decode_undoes_encode(nlm_like, text):
    import re

    import regex
    try:
        ids = nlm_like.encode(text)
    except TokenError:  # refused only where re and regex (minbpe's) cut the text apart differently
        assert re.findall(SPACE_APART_PATTERN, text) != regex.findall(SPACE_APART_PATTERN, text)
        return
    assert nlm_like.decode(ids) == text


def test_json_merges_list_and_dict(tmp_path):
    plain = tmp_path / "merges.json"
    plain.write_text(json.dumps([list(pair) for pair in MERGES]))
    tokenizer = load_tokenizer(plain)
    assert tokenizer.kind == "byte-bpe"
    assert tokenizer.encode(" dog") == [SPACE_DOG]  # no pattern in a bare list
    wrapped = tmp_path / "nlm_merges.json"
    wrapped.write_text(
        json.dumps({"merges": [list(p) for p in MERGES], "pattern": SPACE_APART_PATTERN, "special_tokens": {"<s>": 262}})
    )
    tokenizer = load_tokenizer(wrapped)
    assert tokenizer.encode(" dog bites") == [32, DOG, 32, BITE, 115]
    assert tokenizer.token_string(262) == "<s>"
    assert tokenizer.vocab_size == 263


def test_gpt4_pattern_uses_the_regex_package(tmp_path):
    pytest.importorskip("regex")
    tokenizer = load_tokenizer(write_minbpe(tmp_path / "gpt4.model", GPT4_PATTERN, MERGES, {}))
    # the GPT-4 pattern keeps the space with the word, so " dog" can merge to one id
    assert tokenizer.encode(" dog bites") == [SPACE_DOG, 32, BITE, 115]


def test_pattern_needing_regex_without_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "regex", None)  # import regex now raises ImportError
    with pytest.raises(EmbscopeError) as err:
        load_tokenizer(write_minbpe(tmp_path / "gpt4.model", r"\p{L}+", MERGES, {}))
    assert str(err.value) == (
        "the split pattern in gpt4.model needs the 'regex' package (pip install 'embscope[regex]'); "
        "Python's re cannot read it: bad escape \\p at position 0"
    )


def test_broken_pattern(tmp_path, monkeypatch):
    path = write_minbpe(tmp_path / "bad.model", "[a", MERGES, {})
    pytest.importorskip("regex")
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(path)  # re cannot read it, so regex is asked, and says why in its words
    assert str(err.value) == (
        "expected a regular expression as the split pattern in bad.model, found '[a': "
        "unterminated character set at position 2"
    )
    monkeypatch.setitem(sys.modules, "regex", None)  # without the regex package: re's words
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(path)
    assert str(err.value) == (
        "expected a regular expression as the split pattern in bad.model, found '[a': "
        "unterminated character set at position 0"
    )


def test_merge_of_an_id_not_made_yet(tmp_path):
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(write_minbpe(tmp_path / "bad.model", "", [(100, 111), (256, 257)], {}))
    assert str(err.value) == "expected merge 1 in bad.model to join ids below 257, found 256 257"


def test_bad_merge_line(tmp_path):
    path = tmp_path / "bad.model"
    path.write_text("minbpe v1\n\n0\n100 111\n256 x\n")
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(path)
    assert str(err.value) == "expected two token ids on line 5 of bad.model, found '256 x'"


def test_byte_bpe_ids_outside_or_unused(nlm_like):
    with pytest.raises(TokenError) as err:
        nlm_like.token_string(301)
    assert str(err.value) == "token id 301 is outside the vocabulary of 301 tokens (ids 0 to 300)"
    with pytest.raises(TokenError) as err:
        nlm_like.decode([32, -1])
    assert str(err.value) == "token id -1 is outside the vocabulary of 301 tokens (ids 0 to 300)"
    with pytest.raises(TokenError) as err:
        nlm_like.token_string(280)
    assert str(err.value) == "token id 280 is not used by the byte-bpe tokenizer nlm.model"
    with pytest.raises(TokenError) as err:
        nlm_like.token_string("5")
    assert str(err.value) == "expected an integer token id, found '5'"


def test_byte_bpe_long_word_is_quick(nlm_like):
    import time

    start = time.perf_counter()
    word = "dogbites" * 500
    ids = nlm_like.encode(word)
    assert ids == [DOG, BITE, 115] * 500
    assert time.perf_counter() - start < 2.0


# ---------------------------------------------------------------- GPT-2 vocab.json + merges.txt

CORPUS = [
    "The dog bites the man. The man bites the dog!",
    "A dog and a cat; dogs and cats. I'll say it's the dog's bone, we've 12 dogs.",
    "naïve café — 中文 😀 x² ½ __init__ 2024 dogs\n\n  spaced   out\tTabs",
] * 4
TRICKY = [
    " dog",
    "dog",
    "The dog bites the man.",
    "I'll can't we've they're 'S 's",
    "  multiple   spaces\n\nnew lines\t\ttabs  ",
    "naïve café — 中文 😀",
    "x² ½ Ⅻ 1234567 3.14",
    "__init__ snake_case",
    "\u00a0nbsp\u3000ideographic\u2028line\x1cfile-sep",
    "",
]


@pytest.fixture(scope="module")
def gpt2_files(tmp_path_factory):
    from tokenizers import ByteLevelBPETokenizer

    directory = tmp_path_factory.mktemp("gpt2")
    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(CORPUS, vocab_size=400, min_frequency=1, special_tokens=["<|endoftext|>"])
    trainer.save_model(str(directory))
    trainer.save_model(str(directory), "tiny")
    return directory


def test_gpt2_matches_the_tokenizers_library(gpt2_files):
    from tokenizers import ByteLevelBPETokenizer

    reference = ByteLevelBPETokenizer(str(gpt2_files / "vocab.json"), str(gpt2_files / "merges.txt"))
    tokenizer = load_tokenizer(gpt2_files / "vocab.json")
    assert tokenizer.kind == "gpt2-bpe"
    assert tokenizer.vocab_size == reference.get_vocab_size()
    for text in TRICKY:
        expected = reference.encode(text).ids
        assert tokenizer.encode(text) == expected, text
        assert tokenizer.decode(expected) == reference.decode(expected)


def test_gpt2_dog_is_one_token(gpt2_files):
    tokenizer = load_tokenizer(gpt2_files / "vocab.json")
    vocab = json.loads((gpt2_files / "vocab.json").read_text())
    assert tokenizer.encode(" dog") == [vocab["Ġdog"]]
    assert tokenizer.token_string(vocab["Ġdog"]) == " dog"
    assert tokenizer.token_string(vocab["<|endoftext|>"]) == "<|endoftext|>"
    # "Ã" is byte 0xC3 in GPT-2's alphabet: the first half of "é", shown escaped
    assert tokenizer.token_string(vocab["Ã"]) == "\\xc3"


def test_gpt2_from_merges_file_or_prefixed_names(gpt2_files):
    by_merges = load_tokenizer(gpt2_files / "merges.txt")
    assert by_merges.path == gpt2_files / "vocab.json"
    prefixed = load_tokenizer(gpt2_files / "tiny-merges.txt")
    assert prefixed.path == gpt2_files / "tiny-vocab.json"
    assert prefixed.encode(TRICKY[2]) == by_merges.encode(TRICKY[2])


@pytest.fixture(scope="module")
def gpt2_reference(gpt2_files):
    from tokenizers import ByteLevelBPETokenizer

    return ByteLevelBPETokenizer(str(gpt2_files / "vocab.json"), str(gpt2_files / "merges.txt"))


@pytest.fixture(scope="module")
def gpt2_merge_loop(gpt2_files):
    """The same files read where the tokenizers library is not installed: GPT-2's pattern in regex, then
    embscope's merge loop."""
    pytest.importorskip("regex")
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "tokenizers", None)  # import tokenizers now raises ImportError
        return load_tokenizer(gpt2_files / "vocab.json")


def test_gpt2_merge_loop_matches_the_tokenizers_library(gpt2_merge_loop, gpt2_reference):
    for text in TRICKY:
        assert gpt2_merge_loop.encode(text) == gpt2_reference.encode(text).ids, text


_ALPHABET = list("abcXYZ019_'’.,!? \t\n\r") + ["'s", "'ll", "\u00a0", "\u3000", "\u2028", "\x1c", "\x85"] + list(
    "²½Ⅻ١٢éß中文😀\u0301"
)


@settings(max_examples=150, deadline=None)
@given(text=st.lists(st.sampled_from(_ALPHABET), max_size=25).map("".join))
def test_gpt2_merge_loop_matches_on_tricky_text(gpt2_merge_loop, gpt2_reference, text):
    assert gpt2_merge_loop.encode(text) == gpt2_reference.encode(text).ids


@settings(max_examples=100, deadline=None)
@given(text=st.text(st.characters(max_codepoint=0x2FFF, exclude_categories=("Cs",)), max_size=25))
def test_gpt2_merge_loop_matches_on_any_bmp_text(gpt2_merge_loop, gpt2_reference, text):
    assert gpt2_merge_loop.encode(text) == gpt2_reference.encode(text).ids


def test_gpt2_needs_a_library(gpt2_files, monkeypatch):
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    monkeypatch.setitem(sys.modules, "regex", None)
    with pytest.raises(EmbscopeError) as err:
        load_tokenizer(gpt2_files / "vocab.json")
    assert str(err.value) == "reading vocab.json needs the 'tokenizers' package (pip install 'embscope[hf]')"


def test_gpt2_special_and_unknown(gpt2_files):
    tokenizer = load_tokenizer(gpt2_files / "vocab.json")
    vocab = json.loads((gpt2_files / "vocab.json").read_text())
    # the trainer's special token is neither a byte nor made by a merge
    assert tokenizer.special_ids == {vocab["<|endoftext|>"]}
    assert tokenizer.unk_id is None


def test_gpt2_merge_making_a_missing_token(tmp_path):
    (tmp_path / "vocab.json").write_text(json.dumps({"a": 0, "b": 1}))
    (tmp_path / "merges.txt").write_text("#version: 0.2\na b\n")
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(tmp_path / "vocab.json")
    assert str(err.value) == (
        "expected merge 0 of merges.txt ('a' + 'b') to join and make tokens of the vocabulary, found 'ab' missing"
    )


def test_vocab_without_merges_is_not_a_tokenizer(tmp_path):
    # a JSON object of ids is a character map; a GPT-2 vocabulary without its merges is not one
    (tmp_path / "vocab.json").write_text(json.dumps({"a": 0, "b": 1, "Ġa": 2}))
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(tmp_path / "vocab.json")
    assert str(err.value) == (
        "expected vocab.json to be a JSON object mapping each character or token to its id, found a byte-level BPE "
        "vocabulary ('Ġ' marks a word start) without its merges.txt (the token 'Ġa'): its ids cannot be worked out "
        "from the map alone"
    )
    (tmp_path / "vocab.json").write_text(json.dumps([0, 1]))
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(tmp_path / "vocab.json")
    assert str(err.value) == (
        f"{tmp_path / 'vocab.json'} is not a tokenizer file embscope knows; expected "
        "huggingface (tokenizer.json); gpt2-bpe (vocab.json with merges.txt beside it); "
        "wordpiece (a BERT vocab.txt, one token per line); fairseq-dict (a fairseq dict.txt of 'symbol count' lines); "
        "sentencepiece (a SentencePiece *.model protobuf); tiktoken (a .tiktoken file, or an encoding name such as gpt2 or cl100k_base); "
        "byte-bpe (a minbpe *.model file or a merges.json list of id pairs); harris (harris_segments.json); "
        "nanogpt-chars (nanoGPT's character-level meta.pkl); "
        "char-map (a JSON object mapping each character or token to its id)"
    )


# ---------------------------------------------------------------- Hugging Face tokenizer.json

SENTENCES = ["the dog bites the man", "a dog and a cat", "the man bites back", "dogs bite"] * 3


def test_hf_byte_level_bpe(tmp_path):
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers, processors, trainers

    hf = HFTokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    hf.train_from_iterator(
        SENTENCES,
        trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()),
    )
    hf.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", hf.token_to_id("<s>"))])
    hf.enable_padding(length=16, pad_id=0, pad_token="<s>")
    hf.enable_truncation(max_length=1)
    hf.save(str(tmp_path / "tokenizer.json"))

    tokenizer = load_tokenizer(tmp_path / "tokenizer.json")
    assert tokenizer.kind == "huggingface"
    dog = hf.token_to_id("Ġdog")
    assert tokenizer.encode(" dog") == [dog]  # no <s>, no padding to 16
    assert tokenizer.encode(" dog bites") == [dog, hf.token_to_id("Ġbites")]  # not cut to 1
    assert tokenizer.token_string(dog) == " dog"
    assert tokenizer.token_string(hf.token_to_id("Ã")) == "\\xc3"
    assert tokenizer.token_string(hf.token_to_id("<s>")) == "<s>"
    assert tokenizer.vocab_size == max(hf.get_vocab().values()) + 1
    assert tokenizer.decode([dog, hf.token_to_id("Ġbites")]) == " dog bites"
    assert isinstance(tokenizer, Tokenizer)
    assert (tokenizer.unk_id, tokenizer.special_ids) == (None, {hf.token_to_id("<s>")})


BERT_VOCAB = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "the": 3, "dog": 4, "bite": 5, "##s": 6, "man": 7}


def write_wordpiece(path: Path) -> Path:
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, normalizers, pre_tokenizers, processors

    hf = HFTokenizer(models.WordPiece(vocab=BERT_VOCAB, unk_token="[UNK]"))
    hf.normalizer = normalizers.BertNormalizer(lowercase=True)
    hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    hf.decoder = decoders.WordPiece()
    hf.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 1), ("[SEP]", 2)]
    )
    hf.add_special_tokens(["[UNK]", "[CLS]", "[SEP]"])  # as BERT's tokenizer.json lists them
    hf.save(str(path))
    return path


def test_hf_bpe_dropout_is_turned_off_for_the_ids_a_word_has(tmp_path):
    """A tokenizer.json saved with BPE dropout (a training-time regularizer) drops merges at random on every
    encode: the same word got other ids from one call to the next. The ids are the file's merges without it, as
    the library gives them with dropout null, and a note says the dropout was set aside."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    trained = Tokenizer(models.BPE(dropout=0.5))
    trained.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trained.train_from_iterator(CORPUS * 10, trainers.BpeTrainer(
        vocab_size=320, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    trained.save(str(tmp_path / "tokenizer.json"))
    document = json.loads((tmp_path / "tokenizer.json").read_text(encoding="utf-8"))
    assert document["model"]["dropout"] == 0.5
    document["model"]["dropout"] = None
    reference = Tokenizer.from_str(json.dumps(document))
    tokenizer = load_tokenizer(tmp_path / "tokenizer.json")
    for text in ("the dog bites the man", "tokenizer", " dogs"):
        expected = reference.encode(text, add_special_tokens=False).ids
        assert {tuple(tokenizer.encode(text)) for _ in range(30)} == {tuple(expected)}
    said = ("the file's BPE dropout (0.5), a training-time regularizer, is set aside: words get the ids of every "
            "merge, as without it")
    assert tokenizer.notes == (said,)


@pytest.fixture(scope="module")
def lossy_bpe(tmp_path_factory):
    """A BPE tokenizer.json with no unknown token and no byte fallback (tokenizers' models.BPE() default), NFKC and
    Metaspace: the library drops a character its vocabulary lacks, and the offsets of the tokens after it shift."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    library = Tokenizer(models.BPE())
    library.normalizer = normalizers.NFKC()
    library.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    library.train_from_iterator([text.lower() for text in CORPUS] * 4, trainers.BpeTrainer(vocab_size=200,
                                                                                           show_progress=False))
    path = tmp_path_factory.mktemp("lossy") / "tokenizer.json"
    library.save(str(path))
    return library, load_tokenizer(path)


def lost_something(library, text: str) -> bool:
    """The library's tokens do not spell the pieces its normalizer and pre-tokenizer made (no prefix or suffix
    marks the tokens of this model), whitespace aside (a pre-tokenizer may drop it): a character was dropped."""
    normalized = library.normalizer.normalize_str(text)
    pieces = "".join(piece for piece, _ in library.pre_tokenizer.pre_tokenize_str(normalized))
    spelled = "".join(library.encode(text, add_special_tokens=False).tokens)
    return [c for c in spelled if not c.isspace()] != [c for c in pieces if not c.isspace()]


LOSSY_ALPHABET = [*"dogcatbie OAQ9\t\n", "\u00a0", "\u2028", "\u200d", "\u0301", "½", "ﬁ", "İ", "\ufeff", "日"]


@settings(max_examples=60, deadline=None)
@given(text=st.lists(st.sampled_from(LOSSY_ALPHABET), min_size=1, max_size=8).map("".join))
def test_hf_bpe_without_an_unknown_token_refuses_what_it_drops(lossy_bpe, text):
    """The word 'O' became the lone '▁' token, 'aO9\\t' lost its 'O': the check trusted offsets that shift past a
    dropped character. Every text the library encodes with a loss is refused; every other gets its ids."""
    library, ours = lossy_bpe
    if lost_something(library, text):
        with pytest.raises(TokenError, match="left out by the huggingface tokenizer"):
            ours.encode(text)
    else:
        assert ours.encode(text) == library.encode(text, add_special_tokens=False).ids


def test_hf_bpe_without_an_unknown_token_refuses_a_lost_capital(lossy_bpe):
    library, ours = lossy_bpe
    for text in ("O", "aO9\t", "A½", "dog O"):
        assert lost_something(library, text)
        with pytest.raises(TokenError, match="found '[OA]"):
            ours.encode(text)


def test_hf_wordpiece(tmp_path):
    tokenizer = load_tokenizer(write_wordpiece(tmp_path / "tokenizer.json"))
    assert tokenizer.encode("The dog bites") == [3, 4, 5, 6]  # no [CLS] ... [SEP]
    assert tokenizer.encode("cat") == [0]
    assert [tokenizer.token_string(id) for id in (4, 6, 1)] == ["dog", "##s", "[CLS]"]
    assert tokenizer.decode([3, 4, 5, 6]) == "the dog bites"
    assert tokenizer.vocab_size == 8
    assert (tokenizer.unk_id, tokenizer.special_ids) == (0, {0, 1, 2})
    with pytest.raises(TokenError) as err:
        tokenizer.token_string(8)
    assert str(err.value) == "token id 8 is outside the vocabulary of 8 tokens (ids 0 to 7)"


def write_unigram(path: Path) -> Path:
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers

    pieces = [("<unk>", 0.0), ("▁", -3.0), ("▁dog", -1.0), ("▁bite", -1.5), ("s", -2.0)]
    pieces += [(char, -6.0) for char in "dogbite"]
    hf = HFTokenizer(models.Unigram(pieces, unk_id=0))
    hf.pre_tokenizer = pre_tokenizers.Metaspace()
    hf.decoder = decoders.Metaspace()
    hf.save(str(path))
    return path


def test_hf_unigram(tmp_path):
    tokenizer = load_tokenizer(write_unigram(tmp_path / "unigram.json"))  # found by content, not name
    assert tokenizer.kind == "huggingface"
    assert tokenizer.encode("dog bites") == [2, 3, 4]
    assert [tokenizer.token_string(id) for id in (2, 3, 4)] == [" dog", " bite", "s"]
    assert tokenizer.decode([2, 3, 4]) == "dog bites"
    assert tokenizer.unk_id == 0 and tokenizer.encode("dog 🐶") == [2, 1, 0]  # "▁" then the unknown


def test_hf_byte_fallback_and_replace_decoder(tmp_path):
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models

    vocab = {"<unk>": 0, "<0xE2>": 1, "<0x41>": 2, "▁": 3, "d": 4, "o": 5, "g": 6, "▁d": 7, "og": 8, "▁dog": 9}
    merges = [("▁", "d"), ("o", "g"), ("▁d", "og")]
    hf = HFTokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True))
    hf.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    hf.save(str(tmp_path / "tokenizer.json"))
    tokenizer = load_tokenizer(tmp_path / "tokenizer.json")
    assert [tokenizer.token_string(id) for id in (9, 1, 2)] == [" dog", "\\xe2", "A"]


def test_hf_ids_with_holes_and_added_tokens(tmp_path):
    """vocab_size is the largest id + 1, not the number of entries; added tokens count after the model's."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models, pre_tokenizers

    hf = HFTokenizer(models.WordLevel({"[UNK]": 0, "dog": 5, "cat": 9}, unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    hf.save(str(tmp_path / "tokenizer.json"))
    tokenizer = load_tokenizer(tmp_path / "tokenizer.json")
    assert tokenizer.encode("cat dog") == [9, 5]
    assert tokenizer.token_string(9) == "cat"
    assert tokenizer.vocab_size == 10  # three entries, ids up to 9
    with pytest.raises(TokenError) as err:
        tokenizer.token_string(7)
    assert str(err.value) == "token id 7 is not used by the huggingface tokenizer tokenizer.json"
    with pytest.raises(TokenError) as err:
        tokenizer.decode([10])
    assert str(err.value) == "token id 10 is outside the vocabulary of 10 tokens (ids 0 to 9)"

    hf = HFTokenizer(models.WordLevel({"[UNK]": 0, "dog": 1, "cat": 2}, unk_token="[UNK]"))
    hf.add_special_tokens(["<x>"])
    hf.add_tokens(["<y>"])
    hf.save(str(tmp_path / "tokenizer.json"))
    tokenizer = load_tokenizer(tmp_path / "tokenizer.json")
    assert tokenizer.vocab_size == 5  # the model's 3 tokens, then <x> and <y>
    assert [tokenizer.token_string(id) for id in (2, 3, 4)] == ["cat", "<x>", "<y>"]
    assert (tokenizer.unk_id, tokenizer.special_ids) == (0, {0, 3})


def test_hf_unigram_settings(tmp_path):
    """A Unigram model's byte fallback and missing unknown token (the library keeps them in its model only)."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models

    hf = HFTokenizer(models.Unigram([("a", -1.0), ("<0xE2>", -2.0), ("<0x41>", -2.0)], byte_fallback=True))
    hf.save(str(tmp_path / "tokenizer.json"))
    tokenizer = load_tokenizer(tmp_path / "tokenizer.json")
    assert [tokenizer.token_string(id) for id in range(3)] == ["a", "\\xe2", "A"]
    assert (tokenizer.unk_id, tokenizer.special_ids, tokenizer.vocab_size) == (None, set(), 3)


def test_hf_unreadable_file(tmp_path):
    (tmp_path / "tokenizer.json").write_text("{nope")
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(tmp_path / "tokenizer.json")
    assert str(err.value) == (
        f"expected a Hugging Face tokenizer in {tmp_path / 'tokenizer.json'}, found an unreadable file: "
        "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    )


# ---------------------------------------------------------------- Harris segments

SEGMENTS = ["dog", " dog", "do", "bit", "bites", "é"]  # ids 257 .. 262


@pytest.fixture
def harris(tmp_path):
    path = tmp_path / "harris_segments.json"
    path.write_text(json.dumps(SEGMENTS, ensure_ascii=False), encoding="utf-8")
    return load_tokenizer(path)


def test_harris_greedy_longest_match(harris):
    assert harris.kind == "harris"
    assert harris.vocab_size == 257 + 6
    assert harris.encode(" dogs") == [258, ord("s")]  # " dog" beats "dog" and "do"
    assert harris.encode("dot") == [259, ord("t")]
    assert harris.encode("bite") == [260, ord("e")]  # "bites" does not fit, "bit" does
    assert harris.encode("bites") == [261]
    assert harris.encode("ée") == [262, ord("e")]


def test_harris_byte_fallback_for_non_ascii(harris):
    assert harris.encode("è") == [0xC3, 0xA8]  # not a segment: its two UTF-8 bytes
    assert [harris.token_string(id) for id in (0xC3, 0xA8)] == ["\\xc3", "\\xa8"]
    assert harris.decode([0xC3, 0xA8]) == "è"
    assert harris.decode([0xC3]) == "\ufffd"


def test_harris_bos_and_errors(harris):
    assert harris.token_string(256) == "<BOS>"
    assert (harris.unk_id, harris.special_ids) == (None, {256})
    assert harris.decode([256, 258]) == "<BOS> dog"
    assert harris.token_string(262) == "é"
    with pytest.raises(TokenError) as err:
        harris.token_string(263)
    assert str(err.value) == "token id 263 is outside the vocabulary of 263 tokens (ids 0 to 262)"


def test_harris_other_shapes(tmp_path):
    wrapped = tmp_path / "segments.json"
    wrapped.write_text(json.dumps({"segments": SEGMENTS}))
    assert load_tokenizer(wrapped).encode(" dogs") == [258, ord("s")]
    by_id = tmp_path / "harris_segments.json"
    by_id.write_text(json.dumps({"dog": 300, " dog": 257}))
    tokenizer = load_tokenizer(by_id)
    assert tokenizer.vocab_size == 301
    assert tokenizer.encode("dog dog") == [300, 257]
    with pytest.raises(TokenError) as err:
        tokenizer.token_string(280)
    assert str(err.value) == "token id 280 is not used by the harris tokenizer harris_segments.json"
    by_id.write_text(json.dumps({"dog": 100}))
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(by_id)
    assert str(err.value) == "expected segment 'dog' in harris_segments.json to have an id of 257 or more, found 100"


# ---------------------------------------------------------------- registry and discovery


def test_every_kind_registered():
    assert [kind.name for kind in registered_kinds()] == [
        "huggingface", "gpt2-bpe", "wordpiece", "fairseq-dict", "sentencepiece", "tiktoken", "byte-bpe", "harris", "nanogpt-chars",
        "char-map"]


def test_unknown_and_missing_files(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(tmp_path / "notes.txt")
    assert str(err.value).startswith(f"{tmp_path / 'notes.txt'} is not a tokenizer file embscope knows; expected huggingface")
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(tmp_path / "absent.json")
    assert str(err.value) == f"expected a tokenizer file at {tmp_path / 'absent.json'}, found nothing there"


def test_find_tokenizer_prefers_tokenizer_json(tmp_path, gpt2_files):
    assert find_tokenizer(tmp_path) is None
    for name in ("vocab.json", "merges.txt"):
        (tmp_path / name).write_bytes((gpt2_files / name).read_bytes())
    assert find_tokenizer(tmp_path).kind == "gpt2-bpe"
    write_wordpiece(tmp_path / "tokenizer.json")
    (tmp_path / "model.safetensors").write_bytes(b"")
    found = find_tokenizer(tmp_path / "model.safetensors")  # a checkpoint file: look beside it
    assert found.kind == "huggingface" and found.path == tmp_path / "tokenizer.json"
    assert load_tokenizer(tmp_path).path == tmp_path / "tokenizer.json"


def test_find_tokenizer_refuses_to_guess(tmp_path):
    write_minbpe(tmp_path / "nlm.model", SPACE_APART_PATTERN, MERGES, {})
    (tmp_path / "harris_segments.json").write_text(json.dumps(SEGMENTS))
    with pytest.raises(CheckpointError) as err:
        find_tokenizer(tmp_path)
    assert str(err.value) == (
        f"expected one tokenizer in {tmp_path}, found 2: nlm.model (byte-bpe), "
        "harris_segments.json (harris); choose one with the tokenizer argument"
    )
    assert (err.value.option, err.value.path) == ("tokenizer", tmp_path)


def test_nothing_heavy_imported():
    """Nor when the sample's minbpe tokenizer encodes a word: its split pattern's shape is safe for re."""
    heavy = {"tokenizers", "regex", "tiktoken", "sentencepiece", "torch"}  # numpy is embscope's base
    root = Path(__file__).resolve().parents[1]
    code = ("import sys, embscope.tokenizers, embscope.lookup; "
            f"embscope.tokenizers.load_tokenizer({str(root / 'sample_checkpoints/nlm/tokenizer.model')!r}).encode(' dog'); "
            f"print(sorted({heavy!r} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root)
    assert out.stdout.strip() == "[]"


def test_characters_the_library_drops_are_refused_not_skipped(tmp_path):
    # a BPE vocabulary of letters and no unknown token: the tokenizers library silently leaves '€' and '-' out
    letters = {c: i for i, c in enumerate("abcdefghijklmnopqrstuvwxyz")}
    doc = {"version": "1.0", "model": {"type": "BPE", "vocab": letters, "merges": [], "unk_token": None},
           "pre_tokenizer": {"type": "Whitespace"}, "normalizer": {"type": "StripAccents"}}
    (tmp_path / "tokenizer.json").write_text(json.dumps(doc))
    tokenizer = load_tokenizer(tmp_path / "tokenizer.json")
    assert tokenizer.encode("d o g") == [3, 14, 6]  # spaces split words; they are not lost
    assert tokenizer.encode("e\u0301") == [4]  # the normalizer strips the accent on purpose
    with pytest.raises(TokenError) as err:
        tokenizer.encode("d-o-g€")
    assert str(err.value) == ("expected every character of 'd-o-g€' to become a token, found '-€' left out by the "
                              "huggingface tokenizer tokenizer.json: it has no token for them and no unknown token")
    # with no pre-tokenizer the space reaches the model and is dropped too, shifting the offsets: not a loss
    del doc["pre_tokenizer"]
    (tmp_path / "tokenizer.json").write_text(json.dumps(doc))
    assert load_tokenizer(tmp_path / "tokenizer.json").encode(" dog") == [3, 14, 6]
    # a table of 26 rows, the tokenizer's own (the sample's 1,024 are not: it would refuse every word, naming why)
    checkpoint = write_npz(tmp_path / "model.npz", np.random.default_rng(0).standard_normal((26, 8)).astype(np.float32))
    result = run("similarity", "dog€", "cat", "-c", checkpoint, code=1)
    assert result.stderr.startswith("Error: expected every character of 'dog€' to become a token, found '€' left out")
    # GPT-2 files whose vocabulary lacks bytes: the library leaves them out, as the merge loop refuses them
    (tmp_path / "vocab.json").write_text(json.dumps(letters))
    (tmp_path / "merges.txt").write_text("#version: 0.2\n")
    with pytest.raises(TokenError) as err:
        load_tokenizer(tmp_path / "vocab.json").encode("dog€")
    assert str(err.value) == ("expected every character of 'dog€' to become a token, found '€' left out by the "
                              "gpt2-bpe tokenizer vocab.json: it has no token for them and no unknown token")
