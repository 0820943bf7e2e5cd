"""Probe words: a handful of frequent whole words the tokenizer keeps as one token, for maps and reports.

The rule, stated once: scan ids from the lowest up (a BPE tokenizer numbers its merges by frequency, so the
lowest ids are the commonest pieces) and keep a token when its text, less one leading space, is 3 to 24
lower-case letters, looking the word up gives back exactly that one token, and it is not the ending of
another such token (BPE fragments such as 'ing', 'ould' or 'ere' end longer tokens; whole words mostly do not).
Only ids that are rows of the table are scanned: a word needs a row to be placed, and a tokenizer whose largest
id is 2**32 - 1 (one token there) would otherwise be walked id by id.
On the bundled sample this gives: the, you, for, that, with, your, thou, him.
"""

from __future__ import annotations

from ..errors import EmbscopeError
from ..lookup import lookup_word
from ..naming import token_name
from ..tokenizers.base import Tokenizer

PROBE_COUNT = 8
MIN_LETTERS = 3
MAX_LETTERS = 24  # a frequent whole word is short; the endings of one word of L letters are L of them, of L^2 bytes
# how the words were chosen, as maps and reports say it
PROBE_RULE = ("the lowest-id tokens that are whole lower-case words of 3+ letters, one token each "
              "(see embscope/analysis/probes.py)")
GIVEN_RULE = "given with --words"


def word_of(token: str) -> str | None:
    """The word a token stands for under the rule, or None."""
    word = token.removeprefix(" ")
    return word if MIN_LETTERS <= len(word) <= MAX_LETTERS and word.isalpha() and word.islower() else None


def default_probe_words(tokenizer: Tokenizer, rows: int | None = None, count: int = PROBE_COUNT) -> list[str]:
    """Up to `count` words by the module's rule, lowest id first, among the ids below `rows` (the table's rows;
    None: every id of the tokenizer)."""
    first_id: dict[str, int] = {}
    for token_id in range(tokenizer.vocab_size if rows is None else min(rows, tokenizer.vocab_size)):
        word = word_of(token_name(tokenizer, token_id))
        if word is not None:
            first_id.setdefault(word, token_id)
    endings = {word[cut:] for word in first_id for cut in range(1, len(word) - MIN_LETTERS + 1)}
    found: list[str] = []
    for word, token_id in sorted(first_id.items(), key=lambda item: item[1]):
        if word in endings:
            continue
        try:
            ids = lookup_word(tokenizer, word).ids
        except EmbscopeError:
            continue
        if ids == (token_id,):
            found.append(word)
            if len(found) == count:
                break
    return found
