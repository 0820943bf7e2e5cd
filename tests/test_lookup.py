"""lookup_word: which form of a word is encoded, for each kind of tokenizer.
Tokenizer files are written here; the expected ids are worked out by hand from them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from conftest import run, run_json, write_minbpe

from embscope.core.errors import TokenError
from embscope.lookup import AS_GIVEN, EITHER, PLAIN, WORD_START, FormChoice, WordLookup, lookup_word, lookup_words
from embscope.tokenizers import load_tokenizer
from embscope.tokenizers.byte_alphabet import bytes_to_unicode

# ---------------------------------------------------------------- files

# merge i makes id 256 + i: do, dog, bi, te, bite, " dog"
BYTE_MERGES = [(100, 111), (256, 103), (98, 105), (116, 101), (258, 259), (32, 257)]
GPT4_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""
)


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
    return load_tokenizer(write_minbpe(tmp_path / "nlm.model", r"\w+|\s|[^\w\s]+", BYTE_MERGES))


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
        choice=FormChoice(EITHER, "the word has the same ids with or without a space before"),
        space_id=32,
    )


def test_the_space_itself_is_looked_up_as_given(nlm_like):
    for word in (" ", "  ", " dog"):
        result = lookup_word(nlm_like, word)
        assert result.ids == tuple(nlm_like.encode(word)) and result.space_id is None and result.note is None
    assert lookup_word(nlm_like, " ").ids == (32,)


def test_multi_token_word_keeps_every_piece(nlm_like):
    result = lookup_word(nlm_like, "bites")
    assert (result.ids, result.tokens, result.form) == ((260, 115), ("bite", "s"), "bites")


def test_exact_encodes_as_given(nlm_like):
    result = lookup_word(nlm_like, " dog", exact=True)
    assert (result.ids, result.tokens, result.form, result.note) == ((32, 257), (" ", "dog"), " dog", None)
    assert result.choice.name == AS_GIVEN


def test_byte_bpe_with_space_kept_on_the_word(tmp_path):
    pytest.importorskip("regex")  # the GPT-4 pattern needs \p{L}
    tokenizer = load_tokenizer(write_minbpe(tmp_path / "gpt4.model", GPT4_PATTERN, BYTE_MERGES))
    result = lookup_word(tokenizer, "dog")  # "dog" (257) and " dog" (261) are one token each: word-start wins
    assert (result.ids, result.tokens, result.form) == ((261,), (" dog",), " dog")
    assert result.note == ("used the word-start form ' dog' (the word is one token in either form; word-start is "
                           "the form a word takes inside a sentence)")


# ---------------------------------------------------------------- GPT-2


def test_gpt2_word_start_form(gpt2):
    result = lookup_word(gpt2, "dog")
    assert (result.ids, result.tokens, result.form) == ((258,), (" dog",), " dog")
    assert result.note == "used the word-start form ' dog' (the word is one token in it, not in the plain form)"
    exact = lookup_word(gpt2, "dog", exact=True)
    assert (exact.ids, exact.tokens, exact.note) == ((100, 257), ("d", "og"), None)


def test_gpt2_as_many_tokens_either_way_is_word_start(gpt2):
    # " bit" is Ġb + it, "bit" is b + it: two tokens each
    result = lookup_word(gpt2, "bit")
    assert (result.ids, result.tokens, result.form) == ((259, 260), (" b", "it"), " bit")
    assert result.choice == FormChoice(WORD_START, "as many tokens in all as in the plain form; word-start is the "
                                                   "form a word takes inside a sentence")


def test_gpt2_unmerged_space(gpt2):
    result = lookup_word(gpt2, "cat")
    assert result.ids == (99, 97, 116) and result.form == "cat" and result.space_id == 32
    assert result.note == "the space before 'cat' is a token of its own (id 32), so it was left out"


def test_a_pair_takes_one_form(gpt2):
    dog, cat = lookup_words(gpt2, ["dog", "cat"])
    # word-start: ' dog' (1) + 'cat' after its own space (3) = 4 tokens; plain: 'd' 'og' (2) + 3 = 5
    assert dog.choice == cat.choice == FormChoice(WORD_START, "fewer tokens in all than in the plain form")
    assert (dog.ids, cat.ids, cat.space_id) == ((258,), (99, 97, 116), 32)


def test_gpt2_hand_ids_agree_with_the_tokenizers_library(tmp_path, gpt2):
    from tokenizers import ByteLevelBPETokenizer

    reference = ByteLevelBPETokenizer(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"))
    for text in ("dog", " dog", "bit", " bit", " cat"):
        assert gpt2.encode(text) == reference.encode(text).ids


# Gemma's failure, in small: ' emb' and 'emb' are one token each, 'tok' is one token but ' tok' is two.
# Looked up one by one, 'emb' took the word-start form and 'tok' the plain one.
GEMMA_LIKE_MERGES = [("e", "m"), ("em", "b"), ("Ġ", "emb"), ("t", "o"), ("Ġ", "to"), ("to", "k")]


@pytest.fixture
def gemma_like(tmp_path):
    vocab = {char: byte for byte, char in bytes_to_unicode().items()}
    for rank, (a, b) in enumerate(GEMMA_LIKE_MERGES):
        vocab[a + b] = 256 + rank  # em 256, emb 257, Ġemb 258, to 259, Ġto 260, tok 261
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    (tmp_path / "merges.txt").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in GEMMA_LIKE_MERGES))
    return load_tokenizer(tmp_path / "vocab.json")


def test_both_words_of_a_pair_in_the_form_where_both_are_one_token(gemma_like):
    assert [lookup_word(gemma_like, word).form for word in ("emb", "tok")] == [" emb", "tok"]  # alone: mixed
    emb, tok = lookup_words(gemma_like, ["emb", "tok"])
    assert (emb.form, emb.ids, tok.form, tok.ids) == ("emb", (257,), "tok", (261,))
    assert emb.choice == tok.choice == FormChoice(PLAIN, "both words are one token each in it, not in the "
                                                         "word-start form")
    three = lookup_words(gemma_like, ["emb", "tok", "to"])
    assert {found.choice.name for found in three} == {PLAIN}
    assert three[0].choice.reason == "every word is one token in it, not in the word-start form"


def test_a_form_that_gives_the_unknown_token_is_not_chosen(tmp_path):
    from tokenizers import Regex, models, pre_tokenizers
    from tokenizers import Tokenizer as HFTokenizer

    # a word-level vocabulary that keeps the space on the word: ' cat' is a token, ' dog' is not
    vocab = {"[UNK]": 0, "dog": 1, " cat": 2, "cat": 3, " ": 4}
    hf = HFTokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.Split(Regex(r" ?\w+|\s+"), behavior="isolated")
    hf.save(str(tmp_path / "tokenizer.json"))
    tokenizer = load_tokenizer(tmp_path / "tokenizer.json")
    assert tokenizer.encode(" dog") == [0]
    dog, cat = lookup_words(tokenizer, ["dog", "cat"])
    assert (dog.ids, cat.ids) == ((1,), (3,))
    assert dog.choice == FormChoice(PLAIN, "in the word-start form 'dog' becomes the unknown token")
    with pytest.raises(TokenError) as err:  # in no form: the word is refused, as always
        lookup_words(tokenizer, ["bird", "cat"])
    assert str(err.value).startswith("expected a word the tokenizer can represent, found 'bird', which the "
                                     "huggingface tokenizer maps to its unknown token '[UNK]' (id 0)")


def test_a_form_the_tokenizer_cannot_encode_is_not_chosen(tmp_path):
    import pickle

    chars = sorted(set("dogcat"))  # nanoGPT's meta.pkl of a text without spaces
    (tmp_path / "meta.pkl").write_bytes(pickle.dumps({"vocab_size": len(chars), "itos": dict(enumerate(chars)),
                                                      "stoi": {c: i for i, c in enumerate(chars)}}))
    tokenizer = load_tokenizer(tmp_path / "meta.pkl")
    dog, _ = lookup_words(tokenizer, ["dog", "cat"])
    assert dog.ids == tuple(chars.index(c) for c in "dog") and dog.choice.name == PLAIN
    assert dog.choice.reason == ("the tokenizer cannot encode the word-start form of 'dog' (the character ' ' of "
                                 "' dog' is not in the vocabulary meta.pkl)")
    with pytest.raises(TokenError) as err:
        lookup_words(tokenizer, ["dog", "cow"])
    assert str(err.value) == "the character 'w' of 'cow' is not in the vocabulary meta.pkl"


def test_a_space_that_becomes_the_unknown_token_is_no_token_of_its_own(tmp_path):
    # g2p_id 0.0.4's BERT vocabulary (g2p.py, Predictor.vocab) as a character map: no space in it, '[UNK]' at id 1;
    # its own code, [vocab.index(c) for c in word], has no id for the space at all
    vocab = ["", "[UNK]", "a", "è", "i", "ê", "n", "r", "s", "t", "o", "k", "l", "m", "g", "p", "u", "d", "b", "f",
             "h", "c", "j", "v", "w", "y", "-", "z", ".", "x", "q", "[mask]"]
    (tmp_path / "characters.json").write_text(json.dumps({c: i for i, c in enumerate(vocab)}))
    tokenizer = load_tokenizer(tmp_path / "characters.json")
    assert tokenizer.encode(" ") == [1]  # the unknown token, not a token for the space
    b, p = lookup_words(tokenizer, ["b", "p"])
    assert (b.ids, p.ids, b.space_id) == ((vocab.index("b"),), (vocab.index("p"),), None)
    assert b.choice == FormChoice(PLAIN, "in the word-start form 'b' becomes the unknown token")
    numpy = pytest.importorskip("numpy")
    table = numpy.random.default_rng(0).standard_normal((len(vocab), 16)).astype(numpy.float32)
    numpy.save(tmp_path / "emb.npy", table)
    doc = run_json("similarity", "b", "p", "-c", str(tmp_path / "emb.npy"), "--tokenizer",
                   str(tmp_path / "characters.json"))
    assert doc["notes"] == [] and "token of its own" not in json.dumps(doc)
    assert [(p["a_ids"], p["b_ids"]) for p in doc["pairs"]] == [([18], [15])]


# ---------------------------------------------------------------- Hugging Face


def write_wordpiece(path: Path) -> Path:
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models, normalizers, pre_tokenizers

    vocab = {"[UNK]": 0, "the": 1, "dog": 2, "bite": 3, "##s": 4}
    hf = HFTokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]"))
    hf.normalizer = normalizers.BertNormalizer(lowercase=True)
    hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    hf.save(str(path))
    return path


def test_wordpiece_ignores_spaces_so_nothing_to_say(tmp_path):
    tokenizer = load_tokenizer(write_wordpiece(tmp_path / "tokenizer.json"))
    either = FormChoice(EITHER, "the word has the same ids with or without a space before")
    assert lookup_word(tokenizer, "Dog") == WordLookup("Dog", (2,), ("dog",), "Dog", None, either)
    bites = lookup_word(tokenizer, "bites")
    assert (bites.ids, bites.tokens, bites.note) == ((3, 4), ("bite", "##s"), None)


def test_word_that_encodes_to_nothing(tmp_path):
    tokenizer = load_tokenizer(write_wordpiece(tmp_path / "tokenizer.json"))
    with pytest.raises(TokenError) as err:
        lookup_word(tokenizer, "   ")
    assert str(err.value) == "the word '   ' encodes to no tokens with the huggingface tokenizer tokenizer.json"


def test_unigram_metaspace(tmp_path):
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers

    pieces = [("<unk>", 0.0), ("▁", -3.0), ("▁dog", -1.0)] + [(c, -6.0) for c in "dog"]
    hf = HFTokenizer(models.Unigram(pieces, unk_id=0))
    hf.pre_tokenizer = pre_tokenizers.Metaspace()
    hf.decoder = decoders.Metaspace()
    hf.save(str(tmp_path / "tokenizer.json"))
    tokenizer = load_tokenizer(tmp_path / "tokenizer.json")
    # the Metaspace pre-tokenizer already puts "▁" before a first word
    assert lookup_word(tokenizer, "dog") == WordLookup(
        "dog", (2,), (" dog",), "dog", None, FormChoice(EITHER, "the word has the same ids with or without a space before"))


# ---------------------------------------------------------------- Harris


@pytest.fixture
def harris(tmp_path):
    path = tmp_path / "harris_segments.json"
    path.write_text(json.dumps(["dog", " dog", "do", "bites"]))  # ids 257 .. 260
    return load_tokenizer(path)


def test_harris_segment_with_its_space(harris):
    result = lookup_word(harris, "dog")  # "dog" 257 and " dog" 258: one token either way, so word-start
    assert (result.ids, result.tokens, result.form) == ((258,), (" dog",), " dog")


def test_harris_space_falls_back_to_its_byte(harris):
    result = lookup_word(harris, "bites")
    assert (result.ids, result.form, result.space_id) == ((260,), "bites", 32)
    assert result.note == "the space before 'bites' is a token of its own (id 32), so it was left out"
    dog, bites = lookup_words(harris, ["dog", "bites"])  # word-start for both: the space left out of ' bites'
    assert (dog.ids, bites.ids, bites.space_id, dog.choice.name) == ((258,), (260,), 32, WORD_START)


# ---------------------------------------------------------------- general


def test_empty_word(nlm_like):
    with pytest.raises(TokenError) as err:
        lookup_word(nlm_like, "")
    assert str(err.value) == "expected a word to look up, found an empty string"


def test_result_is_frozen(nlm_like):
    result = lookup_word(nlm_like, "dog")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.ids = (1,)


# ---------------------------------------------------------------- the answers of similarity


def test_the_samples_answer_says_the_space_once():
    console = run("similarity", "dog", "cat", "the").stdout
    assert console.count("token of its own") == 1
    assert console.splitlines()[1] == ("tokenizer: the space is a token of its own (id 32); words are looked up "
                                       "without the space before them")
    doc = run_json("similarity", "dog", "cat")
    assert doc["notes"] == ["the space is a token of its own (id 32); words are looked up without the space before them"]
    assert [(p["a_note"], p["b_note"], p["form"]) for p in doc["pairs"]] == [(None, None, "either")]


def test_a_query_for_the_space_itself_never_says_the_space_was_left_out():
    doc = run_json("similarity", " ", "\n")
    assert [p["a_ids"] + p["b_ids"] for p in doc["pairs"]] == [[32, 10]]
    assert doc["notes"] == [] and "left out" not in json.dumps(doc)
    assert "token of its own" not in run("similarity", " ", "\n").stdout
    assert run_json("similarity", " ", "dog")["notes"] == [
        "the space is a token of its own (id 32); words are looked up without the space before them"]


def test_similarity_names_the_form_of_each_pair(tmp_path, gemma_like):
    import numpy as np

    rng = np.random.default_rng(0)
    table = rng.standard_normal((262, 8)).astype(np.float32)
    np.savez(tmp_path / "model.npz", token_emb=table)  # beside the gemma-like vocab.json + merges.txt
    doc = run_json("similarity", "emb", "tok", "-c", tmp_path / "model.npz")
    (pair,) = doc["pairs"]
    assert (pair["a_ids"], pair["b_ids"]) == ([257], [261])  # 'emb' and 'tok', not ' emb' and 'tok'
    assert pair["form"] == "plain"
    assert pair["form_reason"] == "both words are one token each in it, not in the word-start form"
    a, b = table[257].astype(np.float64), table[261].astype(np.float64)
    assert pair["cosine"] == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b), abs=1e-9)
    console = " ".join(run("similarity", "emb", "tok", "-c", tmp_path / "model.npz").stdout.split())
    assert ("note: words looked up in the plain form: both words are one token each in it, not in the word-start "
            "form") in console
    pairs_file = tmp_path / "pairs.txt"
    pairs_file.write_text("emb tok\nemb em\n")  # each line is its own pair: 'emb' in both forms ('em' is one token
    # either way, its space a token of its own)
    doc = run_json("similarity", "--pairs-file", pairs_file, "-c", tmp_path / "model.npz")
    assert [(p["a_ids"], p["b_ids"], p["form"]) for p in doc["pairs"]] == [([257], [261], "plain"),
                                                                          ([258], [256], "word-start")]
    console = " ".join(run("similarity", "--pairs-file", pairs_file, "-c", tmp_path / "model.npz").stdout.split())
    assert "note: 1 pair looked up in the plain form: both words" in console
    assert ("note: 1 pair looked up in the word-start form: both words are one token each in either form; "
            "word-start is the form a word takes inside a sentence") in console


def rule_by_hand(tokenizer, words: list[str]) -> str:
    """The module's rule, restated from the tokenizer's own encodings, for a byte-level tokenizer (every form
    encodable, no unknown token: rules 3 to 5): the form name it picks for `words`."""
    space = tokenizer.encode(" ")
    forms = {}
    for word in words:
        plain, start = tokenizer.encode(word), tokenizer.encode(" " + word)
        if len(space) == 1 and len(start) > 1 and start[0] == space[0]:
            start = start[1:]
        forms[word] = {PLAIN: plain, WORD_START: start}
    if all(f[PLAIN] == f[WORD_START] for f in forms.values()):
        return EITHER
    def one(name):
        return all(len(f[name]) == 1 for f in forms.values())
    def total(name):
        return sum(len(f[name]) for f in forms.values())
    if one(WORD_START):
        return WORD_START
    if one(PLAIN):
        return PLAIN
    return PLAIN if total(PLAIN) < total(WORD_START) else WORD_START


def test_the_rule_restated_on_a_trained_tokenizer(tmp_path):
    from itertools import combinations

    from tokenizer_corpus import SAMPLE
    from tokenizers import ByteLevelBPETokenizer

    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator([*SAMPLE, "dog cat queen king the tokenizer embedding"] * 3, vocab_size=420,
                                show_progress=False)
    trainer.save_model(str(tmp_path))
    tokenizer = load_tokenizer(tmp_path / "vocab.json")
    words = ["dog", "cat", "queen", "tokenizer", "the", "The", "Hello", "Grüße", "def", "日本語", "🙂", "3.14"]
    seen = set()
    for pair in combinations(words, 2):
        found = lookup_words(tokenizer, list(pair))
        assert found[0].choice == found[1].choice  # one form for the pair
        assert found[0].choice.name == rule_by_hand(tokenizer, list(pair)), pair
        seen.add(found[0].choice.name)
    assert seen >= {WORD_START, EITHER}  # the plain form wins in test_both_words_of_a_pair_in_the_form_where...


# ---------------------------------------------------------------- the word-start form, as inside a sentence


def test_word_start_is_the_form_inside_a_sentence_where_a_leading_space_is_stripped(tmp_path):
    """A SentencePiece model trained without its dummy prefix but removing extra whitespace (the trainer's default)
    strips the space of " dog", so " dog" and "dog" give one id; inside a sentence the model sees "▁dog", another.
    The word-start form is the one a sentence gives (sentencepiece's own ids for the word after "a"), and the pair
    is looked up in it, not called the same either way."""
    import io

    import sentencepiece
    from tokenizer_corpus import SAMPLE
    training = [*SAMPLE, "The dog bites the man. The man bites the dog!", "A dog and a cat; dogs and cats."] * 8
    out = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(training), model_writer=out, vocab_size=300,
                                             model_type="bpe", minloglevel=2, add_dummy_prefix=False,
                                             remove_extra_whitespaces=True)
    (tmp_path / "tokenizer.model").write_bytes(out.getvalue())
    reference = sentencepiece.SentencePieceProcessor(model_proto=out.getvalue())
    tokenizer = load_tokenizer(tmp_path / "tokenizer.model")
    assert reference.encode(" dog") == reference.encode("dog") != reference.encode("a dog")[1:]
    dog, cat = lookup_words(tokenizer, ["dog", "cat"])
    for found in (dog, cat):
        assert found.ids == tuple(reference.encode(f"a {found.word}")[len(reference.encode("a")):])
        assert found.form == f" {found.word}" and found.choice.name == WORD_START
    assert reference.id_to_piece(list(dog.ids)) == ["▁dog"]
