"""Probe words: a handful of common whole words the tokenizer keeps as one token, for maps and reports.

The rule, stated once: the first PROBE_COUNT words of COMMON_WORDS (common English words, a few function words
among nouns that have near neighbours: king, man, woman, father, mother, ...) that the tokenizer looks up as one
token whose text is the word. A vocabulary's own low ids are no guide: in a BPE or WordPiece vocabulary they
hold word pieces ('icen', 'trib', 'cop' look up as one token each and are no words), so a fixed list of real
words is what makes a probe a word. On the bundled sample this gives: the, and, king, man, woman, father,
mother, good.

A vocabulary with fewer than MIN_FOUND of those words (another language, a character vocabulary) falls back to
the lowest-id tokens that are at least 3 lower-case letters, look up as themselves, and are not the ending of
another such token ('ing', 'ould'); where the vocabulary marks a word's start with a leading space (GPT-2's
byte-level BPE, SentencePiece), only tokens that start a word count.

Either way only ids that are rows of the table count: a word needs a row to be placed, and a tokenizer whose
largest id is 2**32 - 1 (one token there) would otherwise be walked id by id.
"""

from __future__ import annotations

from ..core.errors import EmbscopeError, Message, Option
from ..core.tokenizer import Tokenizer
from ..lookup import lookup_word
from ..naming import token_name

PROBE_COUNT = 8
MIN_FOUND = 4  # of COMMON_WORDS, below which the vocabulary is not an English one and the fallback rule chooses
MIN_LETTERS = 3
MAX_LETTERS = 24  # longer tokens are no probe words; their endings would make the fallback's set quadratic
COMMON_WORDS = (
    "the", "and", "king", "man", "woman", "father", "mother", "good", "day", "night", "love", "house", "water",
    "you", "that", "with", "for", "queen", "son", "daughter", "brother", "sister", "friend", "city", "world",
    "life", "death", "time", "year", "war", "peace", "heart", "hand", "head", "eye", "face", "home", "land", "sea",
    "fire", "sun", "light", "dark", "red", "black", "white", "green", "blue", "dog", "cat", "horse", "bird", "tree",
    "book", "word", "name", "money", "school", "work", "game", "music", "food", "people", "child", "new", "old",
    "great", "small", "first", "last", "one", "two", "three", "ten", "is", "was", "are", "have", "not", "but",
    "this", "from", "they", "she", "his", "her", "him", "what", "when", "where", "why", "how", "all", "can",
)
# how the words were chosen, as maps and reports say it
PROBE_RULE = (f"the first {PROBE_COUNT} of embscope's list of common English words that the tokenizer keeps as one "
              "token (see embscope/analysis/probes.py)")
FALLBACK_RULE = ("the lowest-id tokens that are whole lower-case words of 3+ letters, one token each, the vocabulary "
                 "holding few common English words (see embscope/analysis/probes.py)")


def given_rule() -> str:
    return Message("given with ", Option("words"))


def one_token(tokenizer: Tokenizer, word: str) -> int | None:
    """The id of the one token the tokenizer looks `word` up as, when that token's text is the word."""
    try:
        ids = lookup_word(tokenizer, word).ids
    except EmbscopeError:
        return None
    if len(ids) != 1 or token_name(tokenizer, ids[0]).strip() != word:
        return None
    return int(ids[0])


def probe_words(tokenizer: Tokenizer, rows: int | None = None, count: int = PROBE_COUNT) -> tuple[list[str], str]:
    """Up to `count` words by the module's rule, and the rule that chose them; only ids below `rows` (the
    table's rows; None: every id of the tokenizer) count."""
    limit = tokenizer.vocab_size if rows is None else min(rows, tokenizer.vocab_size)
    found = [word for word in COMMON_WORDS if (token_id := one_token(tokenizer, word)) is not None and token_id < limit]
    if len(found[:count]) >= min(MIN_FOUND, count):
        return found[:count], PROBE_RULE
    return fallback_words(tokenizer, limit, count), FALLBACK_RULE


def default_probe_words(tokenizer: Tokenizer, rows: int | None = None, count: int = PROBE_COUNT) -> list[str]:
    return probe_words(tokenizer, rows, count)[0]


def word_of(token: str, word_start: bool = False) -> str | None:
    """The word a token stands for under the fallback rule, or None; `word_start`: the token must begin with a space."""
    if word_start and not token.startswith(" "):
        return None
    word = token.removeprefix(" ")
    return word if MIN_LETTERS <= len(word) <= MAX_LETTERS and word.isalpha() and word.islower() else None


def fallback_words(tokenizer: Tokenizer, limit: int, count: int) -> list[str]:
    """The lowest-id tokens below `limit` that are words of 3+ lower-case letters and not the ending of another."""
    names = [token_name(tokenizer, token_id) for token_id in range(limit)]
    spaced = sum(1 for name in names if name.startswith(" ") and name[1:].isalpha())
    word_start = spaced * 4 >= sum(1 for name in names if name.strip().isalpha())  # a vocabulary that marks starts
    first_id: dict[str, int] = {}
    for token_id, name in enumerate(names):
        word = word_of(name, word_start)
        if word is not None:
            first_id.setdefault(word, token_id)
    endings = {word[cut:] for word in first_id for cut in range(1, len(word) - MIN_LETTERS + 1)}
    found: list[str] = []
    for word, token_id in sorted(first_id.items(), key=lambda item: item[1]):
        if word in endings or one_token(tokenizer, word) != token_id:
            continue
        found.append(word)
        if len(found) == count:
            break
    return found
