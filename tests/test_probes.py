"""Probe words are whole words: in a BPE or WordPiece vocabulary trained by the tokenizers library, whose low ids
hold word pieces that look up as one token each ('icen', 'trib'), the words chosen are words of the training
text; a vocabulary with few common English words falls back to its own tokens, word starts only where the
vocabulary marks them."""

from __future__ import annotations

import re

import pytest

from embscope.analysis.probes import COMMON_WORDS, FALLBACK_RULE, PROBE_RULE, probe_words
from embscope.tokenizers import load_tokenizer

ENGLISH = ("the king and the queen went to the city with the man and the woman; the father and the mother of the "
           "child gave their licence and tribute of copper to the lord; a good day and a good night for the house "
           "by the water. ") * 40 + "licences tributes coppers tribunal copious licentious contribute attribute " * 30
INVENTED = ("zorblat quenmir vashtel orbrin quenmir zorblat telvash mirquen vashtel orbrin brinor " * 60)


def train(path, kind: str, text: str):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    if kind == "bpe":
        tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
        tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()  # no word-start mark: pieces and words look alike
        trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["[UNK]"])
    elif kind == "wordpiece":
        tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
        tokenizer.decoder = decoders.WordPiece()
        trainer = trainers.WordPieceTrainer(vocab_size=300, special_tokens=["[UNK]"])
    else:  # GPT-2's byte-level BPE: a word's start is its leading space (Ġ)
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator([text], trainer)
    tokenizer.save(str(path))
    return tokenizer, load_tokenizer(path)


@pytest.mark.parametrize("kind", ["bpe", "wordpiece", "byte-level"])
def test_probe_words_of_a_trained_vocabulary_are_whole_words(kind, tmp_path):
    library, tokenizer = train(tmp_path / "tokenizer.json", kind, ENGLISH)
    text_words = set(re.findall(r"[a-z]+", ENGLISH))
    fragments = [t for t in library.get_vocab() if t.isalpha() and len(t) >= 3 and t not in text_words]
    assert fragments  # the vocabulary holds pieces that look up as one token and are no words
    words, rule = probe_words(tokenizer)
    assert rule == PROBE_RULE and len(words) == 8
    assert set(words) <= text_words & set(COMMON_WORDS) and not set(words) & set(fragments)
    for word in words:  # each looks up as one token, as the library encodes it
        ids = library.encode(word, add_special_tokens=False).ids if kind != "byte-level" else \
            library.encode(" " + word, add_special_tokens=False).ids
        assert len(ids) == 1, (word, ids)


def test_a_vocabulary_without_english_words_falls_back_to_word_starts(tmp_path):
    _, tokenizer = train(tmp_path / "tokenizer.json", "byte-level", INVENTED)
    words, rule = probe_words(tokenizer)
    assert rule == FALLBACK_RULE and words
    starts = set(INVENTED.split())
    assert all(any(w.startswith(word) for w in starts) for word in words)  # the start of a word, never its middle
