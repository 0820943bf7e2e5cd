"""INTERIM stand-in for word lookup (replaced at merge by the real one): a word to the token ids used."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import TokenError
from .text import quote


@dataclass(frozen=True)
class WordLookup:
    word: str
    ids: tuple[int, ...]
    tokens: tuple[str, ...]
    form: str  # the text actually encoded
    note: str | None


def lookup_word(tokenizer, word: str, exact: bool = False) -> WordLookup:
    """The in-sentence form (" word") unless exact; a space split off as its own token is dropped."""
    if exact:
        form, ids, note = word, list(tokenizer.encode(word)), None
    else:
        form, ids = " " + word, list(tokenizer.encode(" " + word))
        note = f"used the in-sentence form {quote(form)}"
        if len(ids) > 1 and tokenizer.decode([ids[0]]) == " ":
            form, ids = word, ids[1:]
            note = "the tokenizer splits the space off as its own token; used the tokens after it"
    if not ids:
        raise TokenError(f"expected {quote(word)} to encode to at least one token, found none")
    return WordLookup(word, tuple(ids), tuple(tokenizer.token_string(i) for i in ids), form, note)
