"""A JSON object mapping each character (or token) to its id: the ``word_index`` of a Keras character-level
``Tokenizer`` saved with ``json.dump``, the ``characters.json`` or ``char_to_id.json`` of a model trained from
scratch, ``{"a": 1, "b": 2, " ": 3, ...}``.

Encoding, as the map's own code does it:
- when every key is one character, text is looked up character by character (``[index[c] for c in text]``);
- when some keys are longer, text is cut by greedy longest match: at each position, the longest key that
  matches there, so ``{"a": 1, "b": 2, "ab": 3}`` encodes "abab" as [3, 3] and "aab" as [1, 3];
- markers longer than one character (``<pad>``, ``[UNK]``, ``<OOV>``, Keras' ``UNK``) are special tokens:
  never matched in text; nor is an empty key (attacut's ``syllables.json`` maps "" to 2), which names its id only;
- a character no key covers becomes the unknown token when the map has one (``[UNK]``, ``<unk>``, ``<OOV>``,
  ``UNK``: Keras' ``oov_token``), else it is an error that names it (Keras would drop it without a word);
- in a map of single characters, the key ``other`` is deepcut's unknown token, never text: deepcut's ``CHARS``
  (and OSKut's and SEFR_CUT's) are 177 characters and 'other' at id 80, and its code looks text up character by
  character as ``CHARS_MAP.get(c, 80)``, so "mother" is six ids, not 'm' and 'other'.
Nothing is lower-cased: a map of lower-case letters does not cover "D".

A map that is the vocabulary of a subword tokenizer without its merges (GPT-2's "Ġdog", SentencePiece's
"▁dog", WordPiece's "##s") is refused: greedy matching would not give that tokenizer's ids.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from embscope.core.errors import TokenError, TokenizerError
from embscope.tokenizers.base import check_id, check_largest_id, check_text, is_id, read_json, shown

EXPECTED = "a JSON object mapping each character or token to its id"
UNKNOWN_NAMES = ("[UNK]", "<unk>", "<UNK>", "<OOV>", "<oov>", "[OOV]", "UNK", "OOV")
_MARKER = re.compile(r"<[^<>]+>|\[[^\[\]]+\]")
# a key of two characters or more that starts so is a subword piece of another tokenizer's vocabulary
_SUBWORD_MARKS = {"\u0120": "a byte-level BPE vocabulary ('\u0120' marks a word start) without its merges.txt",
                  "\u2581": "a SentencePiece vocabulary ('\u2581' marks a word start) without its model",
                  "##": "a WordPiece vocabulary ('##' marks a piece inside a word): name it vocab.txt"}
CHARACTER_UNKNOWN_NAMES = ("other",)  # deepcut's name for every character not in its list, in a map of characters
MAX_KEY_CHARS = 1024  # real tokens are far shorter; longer keys are a hostile file


class CharMapTokenizer:
    kind = "char-map"
    notes: tuple[str, ...] = ()

    def __init__(self, path: Path, index: dict[str, int]):
        self.path = path
        self.vocab_size = max(index.values()) + 1
        special = {key for key in index if len(key) > 1 and (key in UNKNOWN_NAMES or _MARKER.fullmatch(key))}
        unknown = [key for key in UNKNOWN_NAMES if key in index] + character_unknown(index, special)
        special |= set(unknown)
        self.unk_id: int | None = index[unknown[0]] if unknown else None
        self.special_ids = frozenset(index[key] for key in special)
        # an empty key names its id but is never matched: it would match at every position
        self._index = {key: id for key, id in index.items() if key not in special and key}
        self._token: dict[int, str] = {}
        for key, id in index.items():
            self._token.setdefault(id, key)  # two keys of one id: the id is named by the first
        self._lengths = sorted({len(key) for key in self._index}, reverse=True)

    def encode(self, text: str) -> list[int]:
        index, ids = self._index, []
        if self._lengths == [1]:  # a character vocabulary
            for char in text:
                id = index.get(char, self.unk_id)
                if id is None:
                    raise self._missing(char, text)
                ids.append(id)
            return ids
        position = 0
        while position < len(text):
            for length in self._lengths:
                id = index.get(text[position:position + length]) if position + length <= len(text) else None
                if id is not None:
                    break
            else:
                if self.unk_id is None:
                    raise self._missing(text[position], text)
                id, length = self.unk_id, 1
            ids.append(id)
            position += length
        return ids

    def _missing(self, char: str, text: str) -> TokenError:
        return TokenError(f"the character {char!r} of {shown(text)} is not in the vocabulary {self.path.name}, "
                          "which has no unknown token")

    def decode(self, ids: list[int]) -> str:
        return "".join(self.token_string(id) for id in ids)

    def token_string(self, id: int) -> str:
        id = check_id(id, self.vocab_size)
        token = self._token.get(id)
        if token is None:
            raise TokenError(f"token id {id} is not used by the {self.kind} tokenizer {self.path.name}")
        return token

    def __repr__(self) -> str:
        return f"<CharMapTokenizer {self.path} vocab_size={self.vocab_size}>"


def character_unknown(index: dict[str, int], special: set[str]) -> list[str]:
    """deepcut's 'other' where every other key that text can match is one character; else nothing."""
    names = [key for key in CHARACTER_UNKNOWN_NAMES if key in index]
    text_keys = [key for key in index if key and key not in special and key not in names]
    return names if text_keys and all(len(key) == 1 for key in text_keys) else []


def load(path: Path) -> CharMapTokenizer:
    doc: Any = read_json(path)
    if not isinstance(doc, dict) or not doc:
        found = "an empty object" if doc == {} else f"a JSON {type(doc).__name__}"
        raise TokenizerError(f"expected {path.name} to be {EXPECTED}, found {found}")
    for key, id in doc.items():
        if len(key) > MAX_KEY_CHARS or not is_id(id):
            raise TokenizerError(f"expected {path.name} to be {EXPECTED} (a character or token, then a whole "
                                 f"number 0 or more), found {shown(key)}: {shown(id)}")
        check_text(key, f"the token with id {id} in {path.name}")
        for mark, what in _SUBWORD_MARKS.items():
            if len(key) > len(mark) and key.startswith(mark):
                raise TokenizerError(f"expected {path.name} to be {EXPECTED}, found {what} (the token "
                                     f"{shown(key)}): its ids cannot be worked out from the map alone")
    if not any(doc):  # an empty key is allowed (attacut's syllables.json names id 2 so), but not only that
        raise TokenizerError(f"expected {path.name} to be {EXPECTED}, found only the empty key")
    check_largest_id(max(doc.values()), path)
    return CharMapTokenizer(path, doc)
