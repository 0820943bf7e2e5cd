"""nanoGPT's character-level vocabulary: the ``meta.pkl`` that ``data/shakespeare_char/prepare.py``
pickles, ``{"vocab_size": 65, "itos": {0: "\\n", ...}, "stoi": {"\\n": 0, ...}}``. Each character is
one token; a character outside the vocabulary cannot be encoded (nanoGPT's sample.py raises KeyError).

It is a pickle, so it is read with embscope's restricted unpickler, admitting plain containers only.
Besides the checkpoint, it is looked for where nanoGPT's sample.py finds it,
``data/<config["dataset"]>/meta.pkl``, relative to the working directory and to each folder above
the checkpoint (nanoGPT writes checkpoints to ``out-shakespeare-char/`` beside ``data/``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from embscope.core import files
from embscope.core.errors import TokenError, TokenizerError
from embscope.storage.unpickle import unpickle_plain
from embscope.tokenizers.base import (
    MAX_TOKEN_ID,
    check_id,
    check_text,
    is_id,
    shown,
)

# Shakespeare's meta.pkl is 1 KB; anything this large is not a character vocabulary
MAX_FILE_BYTES = 16 * 2**20


class CharTokenizer:
    kind = "nanogpt-chars"
    unk_id = None  # nanoGPT has no unknown character: one outside the vocabulary is an error
    special_ids: frozenset[int] = frozenset()
    notes: tuple[str, ...] = ()

    def __init__(self, path: Path, itos: dict[int, str], vocab_size: int):
        self.path = path
        self.vocab_size = vocab_size
        self._itos = itos
        self._stoi = {char: id for id, char in itos.items()}

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for char in text:
            id = self._stoi.get(char)
            if id is None:
                raise TokenError(f"the character {char!r} of {shown(text)} is not in the vocabulary {self.path.name}")
            ids.append(id)
        return ids

    def decode(self, ids: list[int]) -> str:
        return "".join(self.token_string(id) for id in ids)

    def token_string(self, id: int) -> str:
        id = check_id(id, self.vocab_size)
        char = self._itos.get(id)
        if char is None:
            raise TokenError(f"token id {id} is not used by the {self.kind} tokenizer {self.path.name}")
        return char

    def __repr__(self) -> str:
        return f"<CharTokenizer {self.path} vocab_size={self.vocab_size}>"


def _vocabulary(meta: Any, path: Path) -> tuple[dict[int, str], int]:
    """(itos, vocab_size) from the unpickled dict, every value checked."""
    name = path.name
    if not isinstance(meta, dict) or not ({"itos", "stoi"} & meta.keys()):
        raise TokenizerError(f"expected a dict with 'stoi' and 'itos' in {name}, found {type(meta).__name__}")
    itos, stoi = meta.get("itos"), meta.get("stoi")
    if itos is None:
        if not isinstance(stoi, dict):
            raise TokenizerError(f"expected 'stoi' in {name} to be a dict, found {type(stoi).__name__}")
        itos = {id: char for char, id in stoi.items()}
    if not isinstance(itos, dict):
        raise TokenizerError(f"expected 'itos' in {name} to be a dict, found {type(itos).__name__}")
    for id, char in itos.items():
        if not is_id(id) or id > MAX_TOKEN_ID or not isinstance(char, str) or len(char) != 1:
            raise TokenizerError(
                f"expected 'itos' in {name} to map ids to single characters, found {shown(id)}: {shown(char)}"
            )
        check_text(char, f"the character of id {id} in {name}")
    if isinstance(stoi, dict) and any(itos.get(id) != char for char, id in stoi.items()):
        raise TokenizerError(f"expected 'stoi' and 'itos' in {name} to agree, found them different")
    if len(set(itos.values())) != len(itos):
        raise TokenizerError(f"expected each character once in 'itos' of {name}, found one twice")
    largest = max(itos, default=-1)
    vocab_size = meta.get("vocab_size", largest + 1)
    if not is_id(vocab_size) or not largest < vocab_size <= MAX_TOKEN_ID + 1:
        raise TokenizerError(
            f"expected vocab_size in {name} to be more than its largest id {largest}, found {shown(vocab_size)}"
        )
    return itos, vocab_size


def load(path: Path) -> CharTokenizer:

    found = files.status(path)
    if found is not None and found.st_size > MAX_FILE_BYTES:
        raise TokenizerError(
            f"expected a character vocabulary of at most {MAX_FILE_BYTES // 2**20} MiB in {path.name}, "
            f"found {found.st_size:,} bytes"
        )
    data = files.read_bytes(path, MAX_FILE_BYTES, "nanoGPT's meta.pkl")
    meta = unpickle_plain(data, str(path))  # plain dicts, strings and ints: no global is allowed
    itos, vocab_size = _vocabulary(meta, path)
    return CharTokenizer(path, itos, vocab_size)
