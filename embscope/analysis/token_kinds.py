"""What the tokenizer alone says about every row of a token table: which ids text can never produce.

Uses only the Tokenizer protocol (encode, decode, token_string, vocab_size, and `special_ids` where a kind
has it), so every tokenizer kind gets the same analysis. The checks follow Land & Bartolo 2024 ("Fishing for
Magikarp", the `categorize_token` step of their code): decode one id, encode the text, and see whether the id
comes back; a token holding part of a UTF-8 character; a special token; plus rows past the tokenizer and
the placeholder names vocabularies reserve for later use.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..core.errors import EmbscopeError, TokenError
from ..core.tokenizer import Tokenizer

if TYPE_CHECKING:
    from .stages import Progress

# A character that rarely merges with what follows it. A tokenizer that prepends a space marker to text
# (SentencePiece) cannot give back a continuation piece such as "dog" from "dog" alone, but gives it after
# this prefix; magikarp's `clean_encode` uses the same guillemet.
ROUND_TRIP_PREFIX = "\u00ab"
REPLACEMENT = "\ufffd"  # what decoding gives for bytes that are not whole UTF-8 characters
ESCAPED_BYTE = re.compile(r"\\x([0-9a-f]{2})")  # how token_string shows such bytes (backslashreplace)
# Bytes no UTF-8 text ever holds (RFC 3629: C0, C1 and F5..FF never appear); magikarp's "unused_utf8".
NEVER_IN_UTF8 = frozenset([0xC0, 0xC1, *range(0xF5, 0x100)])
# Whitespace a token may consist of without being a control token.
TEXT_WHITESPACE = frozenset("\t\n\r ")

# Names vocabularies give to rows reserved for later use, with where each comes from.
PLACEHOLDER_NAMES = (
    re.compile(r"\[unused\d+\]"),  # BERT vocab.txt (Devlin et al. 2018)
    re.compile(r"<extra_id_\d+>"),  # T5 sentinels (Raffel et al. 2020)
    re.compile(r"<\|reserved_special_token_\d+\|>"),  # Llama 3
    re.compile(r"<unused\d+>"),  # Gemma
    re.compile(r"<madeupword\d+>"),  # fairseq / XGLM, padding the vocabulary to a round size
)
# How special tokens are spelled ("[CLS]", "<|endoftext|>", "<s>"), as magikarp's `find_special_tokens`
# recognises them when the tokenizer does not list its special ids.
SPECIAL_NAME = re.compile(r"[\[<].*[A-Za-z].*[\]>]", re.DOTALL)
BYTE_FALLBACK_NAME = re.compile(r"<0x[0-9A-Fa-f]{2}>")
# A WordPiece piece that continues a word ("##s"): alone it decodes to "##s" and encodes to other ids, yet
# WordPiece makes it whenever a word ends in it, so the round trip says nothing about it.
WORDPIECE_CONTINUATION = re.compile(r"##.+", re.DOTALL)

# The round trip costs a token's length in encodes; no real token is this long (a hostile file's token of
# 2,000,000 characters cost 11 s), so a longer one is not encoded back and the count of them is said.
ROUND_TRIP_MAX_CHARS = 1024

KINDS = ("unreachable", "partial-utf8", "never-utf8", "special", "control", "placeholder", "padding")
KIND_MEANINGS = {
    "unreachable": "decoding the id and encoding the text does not give the id back",
    "partial-utf8": "holds bytes that are not whole UTF-8 characters",
    "never-utf8": "holds a byte no UTF-8 text contains (C0, C1, F5-FF)",
    "special": "a special token",
    "control": "control characters only",
    "placeholder": "named as a reserved placeholder",
    "padding": "a row past the tokenizer's ids, or an id the tokenizer does not use",
}


@dataclass(frozen=True, eq=False)
class TokenKinds:
    """One bool array per kind in KINDS, each (rows,): what the tokenizer says about each row."""

    rows: int
    vocab_size: int  # the tokenizer's ids; rows at and past it are padding
    masks: dict[str, np.ndarray]
    too_long: int = 0  # tokens longer than ROUND_TRIP_MAX_CHARS: not encoded back, so never marked unreachable

    def __getitem__(self, kind: str) -> np.ndarray:
        return self.masks[kind]

    def of(self, row: int) -> tuple[str, ...]:
        """The kinds one row has, in KINDS order."""
        return tuple(kind for kind in KINDS if self.masks[kind][row])

    def counts(self) -> dict[str, int]:
        return {kind: int(self.masks[kind].sum()) for kind in KINDS}


def token_kinds(tokenizer: Tokenizer, rows: int,
                progress: Progress | None = None) -> TokenKinds:
    """The kinds of every row of a table with `rows` rows, by the tokenizer. The round trip costs two or
    three encodes per id; `progress(done, total)` is called every few thousand ids. A tokenizer that cannot
    encode at all (its split pattern was stopped) raises TokenizerError rather than marking every row."""
    vocab = int(tokenizer.vocab_size)
    named = min(vocab, rows)
    masks = {kind: np.zeros(rows, dtype=bool) for kind in KINDS}
    masks["padding"][named:] = True
    special_ids: frozenset[int] = getattr(tokenizer, "special_ids", frozenset())  # where the kind lists them
    # a vocabulary made by another splitter than the tokenizer's: its pieces are text the round trip cannot judge
    unchecked: frozenset[int] = getattr(tokenizer, "unchecked_ids", frozenset())
    prefix_ids = _encode(tokenizer, ROUND_TRIP_PREFIX)
    too_long = 0
    for row in range(named):
        try:
            text = tokenizer.decode([row])
            name = tokenizer.token_string(row)
        except EmbscopeError:  # an id the tokenizer does not use: no text selects its row
            masks["padding"][row] = True
            continue
        if len(text) > ROUND_TRIP_MAX_CHARS:
            too_long += 1
        elif not (row in unchecked or _round_trips(tokenizer, row, text, prefix_ids)
                  or WORDPIECE_CONTINUATION.fullmatch(name)):
            masks["unreachable"][row] = True
        if REPLACEMENT in text and REPLACEMENT not in name:
            masks["partial-utf8"][row] = True
            masks["never-utf8"][row] = not NEVER_IN_UTF8.isdisjoint(_escaped_bytes(name))
        masks["special"][row] = row in special_ids or (row not in unchecked and _looks_special(name))
        masks["control"][row] = _is_control(text)
        masks["placeholder"][row] = any(pattern.fullmatch(name) for pattern in PLACEHOLDER_NAMES)
        if progress is not None and (row + 1) % 4096 == 0:
            progress(row + 1, named)
    if progress is not None:
        progress(named, named)
    return TokenKinds(rows, vocab, masks, too_long)


def _encode(tokenizer: Tokenizer, text: str) -> list[int] | None:
    try:
        return list(tokenizer.encode(text))
    except TokenError:  # this text cannot be encoded; a TokenizerError (the tokenizer cannot encode) goes on
        return None


def _round_trips(tokenizer: Tokenizer, row: int, text: str, prefix_ids: list[int] | None) -> bool:
    if _encode(tokenizer, text) == [row]:
        return True
    if prefix_ids is None:
        return False
    return _encode(tokenizer, ROUND_TRIP_PREFIX + text) == prefix_ids + [row]


def _escaped_bytes(name: str) -> set[int]:
    return {int(match, 16) for match in ESCAPED_BYTE.findall(name)}


def _looks_special(name: str) -> bool:
    return len(name) >= 3 and bool(SPECIAL_NAME.fullmatch(name)) and not BYTE_FALLBACK_NAME.fullmatch(name)


def _is_control(text: str) -> bool:
    """Nothing but control and format characters, and not only the whitespace text is made of."""
    return (bool(text) and all(unicodedata.category(ch) in ("Cc", "Cf") or ch in TEXT_WHITESPACE for ch in text)
            and not set(text) <= TEXT_WHITESPACE)
