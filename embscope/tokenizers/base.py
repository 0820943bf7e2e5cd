"""What every tokenizer kind shares: the interface, and small helpers for id checks and byte
vocabularies (the kinds themselves are listed in kinds.py)."""

from __future__ import annotations

import operator
from collections import Counter
from pathlib import Path
from typing import Any

from embscope.core import files
from embscope.core.errors import CheckpointError, TokenError, TokenizerError
from embscope.core.text import shown as shown  # noqa: PLC0414  where the tokenizers have always imported it from
from embscope.tokenizers.byte_alphabet import byte_level_bytes

SPACE_MARK = "\u2581"  # SentencePiece's "▁": a piece that starts a word ("▁dog" is " dog")

# larger than any real vocabulary (Gemma's is 256k); an id past it is a damaged or hostile file, and
# the id -> piece list is sized by the largest id
MAX_TOKEN_ID = 2**24 - 1
# the most any tokenizer file is read: the largest real ones (a 256k-piece tokenizer.json) hold ~35 MB
MAX_TOKENIZER_BYTES = 256 << 20


def check_largest_id(largest: int, path: Path) -> None:
    if largest > MAX_TOKEN_ID:
        raise TokenizerError(f"expected token ids up to {MAX_TOKEN_ID:,} in {path.name}, found {largest:,}")


def is_id(value: Any) -> bool:
    """A token id as a file states it: a non-negative int (JSON's true is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_text(text: str, what: str) -> str:
    """``text`` when it encodes to UTF-8; JSON and pickles can spell a lone surrogate, which no writer can print."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise TokenizerError(f"expected {what} to be text, found {shown(text)}, which holds a lone surrogate") from None
    return text


def is_library_failure(err: BaseException) -> bool:
    """The tokenizers library's Rust code panics on some malformed files, and pyo3 raises that as
    PanicException, a BaseException that `except Exception` lets through; only the interpreter's own
    exits are not failures."""
    return not isinstance(err, (KeyboardInterrupt, SystemExit, GeneratorExit))


def library_ids(encoding: Any, text: str, library: Any, where: str, byte_level: bool = False,
                unk_id: int | None = None, complete: bool = False) -> list[int]:
    """The ids of a tokenizers-library `encoding` of `text`. A BPE model with no unknown token silently leaves
    out the characters its vocabulary lacks: a word that lost one is refused. Whitespace the pre-tokenizer
    splits at, and what the normalizer strips on purpose (accents, control characters), are not losses; nor is
    anything when the model has an unknown token (`unk_id`): what it lacks becomes that token, never nothing; nor
    when the vocabulary is `complete` (every byte of a byte-level alphabet: any text is bytes it holds)."""
    if unk_id is not None or complete:
        return list(encoding.ids)
    # the offsets of the tokens after a loss shift onto the lost character ("O" alone became the lone "▁", its
    # offsets covering the "O"), so they cannot tell: count characters, those the normalizer and pre-tokenizer
    # hand the model against those its tokens hold. Special tokens the library matched in the text are left out of
    # both (taken out of the text, not replaced by a space the pre-tokenizer would mark)
    special = {token for token, mask in zip(encoding.tokens, encoding.special_tokens_mask) if mask}
    ordinary = text
    for token in sorted(special, key=len, reverse=True):
        ordinary = ordinary.replace(token, "")
    normalized = library.normalizer.normalize_str(ordinary) if library.normalizer is not None else ordinary
    pieces = ([piece for piece, _ in library.pre_tokenizer.pre_tokenize_str(normalized)]
              if library.pre_tokenizer is not None else [normalized])
    held = Counter("".join(pieces))
    held.subtract(Counter("".join(token for token, mask in zip(encoding.tokens, encoding.special_tokens_mask)
                                  if not mask)))
    lost = "".join(char for char, count in held.items() if count > 0)  # each once, in the order of the text
    if byte_level:  # the alphabet stands for bytes ("Ġ" is a space): say what was lost as text
        lost = b"".join(byte_level_bytes(char) for char in lost).decode("utf-8", "backslashreplace")
    lost = "".join(char for char in lost if not char.isspace())
    if not lost:
        return list(encoding.ids)
    raise TokenError(f"expected every character of {shown(text)} to become a token, found {shown(lost)} left out "
                     f"by {where}: it has no token for them and no unknown token")


def check_id(id: int, vocab_size: int) -> int:
    """Return ``id`` as an int when it names a token, else raise TokenError."""
    try:
        # numpy integers are welcome; floats, strings and bools are not ids
        if isinstance(id, bool):
            raise TypeError
        id = operator.index(id)
    except TypeError:
        raise TokenError(f"expected an integer token id, found {id!r}") from None
    if not 0 <= id < vocab_size:
        raise TokenError(
            f"token id {id} is outside the vocabulary of {vocab_size} tokens (ids 0 to {vocab_size - 1})"
        )
    return id


def read_json(path: Path) -> Any:
    """Parse a JSON file, remembering the last few so that sniffing several kinds
    and then loading one parses the file once. Raises TokenizerError."""
    try:
        return files.read_json(path, MAX_TOKENIZER_BYTES, "a tokenizer file", cached=True)
    except (ValueError, UnicodeDecodeError, RecursionError) as err:  # RecursionError: nesting too deep
        raise TokenizerError(f"expected JSON in {path}, found a parse error: {err}") from None


def sniff_json(path: Path) -> Any:
    """The parsed document of a ``.json`` file, or None when it is not readable JSON; not recorded as
    read (the kind that takes the file reads it again, from the parse kept by read_json)."""
    if path.suffix.lower() != ".json" or not path.is_file():
        return None
    try:
        return files.read_json(path, MAX_TOKENIZER_BYTES, "a tokenizer file", record=False, cached=True)
    except (CheckpointError, ValueError, RecursionError):
        return None


class ByteVocabulary:
    """Shared decode/token_string for tokenizers whose every token is a byte string.

    Subclasses set ``kind``, ``path``, ``vocab_size``, ``unk_id``, ``special_ids``, ``_pieces``
    (id -> bytes, or None for an unused id) and ``_special`` (id -> text of a special token).
    """

    kind: str
    path: Path
    vocab_size: int
    unk_id: int | None
    special_ids: frozenset[int]
    notes: tuple[str, ...] = ()
    _pieces: list[bytes | None]
    _special: dict[int, str]

    def _piece(self, id: int) -> bytes:
        id = check_id(id, self.vocab_size)
        if id in self._special:
            return self._special[id].encode("utf-8")
        piece = self._pieces[id] if id < len(self._pieces) else None
        if piece is None:
            raise TokenError(f"token id {id} is not used by the {self.kind} tokenizer {self.path.name}")
        return piece

    def decode(self, ids: list[int]) -> str:
        return b"".join(self._piece(id) for id in ids).decode("utf-8", errors="replace")

    def token_string(self, id: int) -> str:
        id = check_id(id, self.vocab_size)
        if id in self._special:
            return self._special[id]
        return self._piece(id).decode("utf-8", errors="backslashreplace")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.kind} {self.path} vocab_size={self.vocab_size}>"
