"""SentencePiece ``tokenizer.model`` files (the protobuf that Llama, T5, Gemma and Mistral ship), read
through the ``sentencepiece`` package (the ``sentencepiece`` extra), imported only when one is opened.

minbpe also writes files named ``*.model``, as text starting ``minbpe v1``; the two are told apart
by content: a SentencePiece model is a protobuf whose first field is a piece (bytes 0x0A, a length,
0x0A). Words are encoded as ``SentencePieceProcessor.encode`` does, with no BOS or EOS; token
strings undo the "▁" space marker ("▁dog" -> " dog") and show byte pieces ("<0xE2>") as their byte.
"""

from __future__ import annotations

import re
from functools import cached_property
from pathlib import Path
from typing import Any

from embscope.core import files
from embscope.core.errors import MissingPackageError, TokenError, TokenizerError
from embscope.quiet import native_stderr
from embscope.tokenizers.base import MAX_TOKENIZER_BYTES, SPACE_MARK, check_id

_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


class SentencePieceTokenizer:
    kind = "sentencepiece"
    notes: tuple[str, ...] = ()

    def __init__(self, path: Path, processor: Any):
        self.path = path
        self._sp = processor
        self.vocab_size = processor.get_piece_size()
        unk = processor.unk_id()
        self.unk_id = unk if 0 <= unk < self.vocab_size else None

    @cached_property
    def special_ids(self) -> frozenset[int]:
        """Control pieces (<s>, </s>, <pad>) and the unknown piece; user-defined pieces are text."""
        sp = self._sp
        return frozenset(id for id in range(self.vocab_size) if sp.is_control(id) or sp.is_unknown(id))

    def encode(self, text: str) -> list[int]:
        with native_stderr():  # sentencepiece logs through absl straight to fd 2
            return list(self._sp.encode(text, out_type=int))

    def decode(self, ids: list[int]) -> str:
        """Runs of ordinary pieces decode as SentencePiece decodes them; control pieces, which it
        decodes to nothing, appear as their text."""
        ids = [check_id(id, self.vocab_size) for id in ids]
        parts: list[str] = []
        run: list[int] = []
        for id in ids:
            if self._sp.is_control(id):
                parts.append(self._sp.decode(run) if run else "")
                parts.append(self._piece(id))
                run = []
            else:
                run.append(id)
        parts.append(self._sp.decode(run) if run else "")
        return "".join(parts)

    def token_string(self, id: int) -> str:
        id = check_id(id, self.vocab_size)
        piece = self._piece(id)
        if self._sp.is_byte(id):
            match = _BYTE_PIECE.fullmatch(piece)
            if match:
                return bytes([int(match.group(1), 16)]).decode("utf-8", errors="backslashreplace")
        if self._sp.is_control(id) or self._sp.is_unknown(id):
            return piece
        return piece.replace(SPACE_MARK, " ")

    def _piece(self, id: int) -> str:
        try:
            piece: str = self._sp.id_to_piece(id)
            return piece
        except UnicodeDecodeError:  # the protobuf holds bytes; a damaged file can hold bytes that are not UTF-8
            raise TokenError(f"token id {id} of {self.path.name} is not UTF-8 text") from None

    def __repr__(self) -> str:
        return f"<SentencePieceTokenizer {self.path} vocab_size={self.vocab_size}>"


def load(path: Path) -> SentencePieceTokenizer:
    return from_bytes(files.read_bytes(path, MAX_TOKENIZER_BYTES, "a SentencePiece model"), path)


def from_bytes(data: bytes, path: Path) -> SentencePieceTokenizer:
    """The model from its serialized proto, however it was read (a .keras zip's vocabulary.spm is a member of
    it); the library is handed the bytes, and `path` names them in messages."""
    try:
        import sentencepiece
    except ImportError:
        raise MissingPackageError(f"reading {path.name}", "sentencepiece", "sentencepiece", path=path) from None
    processor = sentencepiece.SentencePieceProcessor()
    try:
        with native_stderr():  # absl's log lines ("Piece at index ... is a null character") go to fd 2
            processor.LoadFromSerializedProto(data)
    except (RuntimeError, OSError, ValueError) as err:
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        raise TokenizerError(f"expected a SentencePiece model in {path}, found an unreadable file: {reason}") from None
    if processor.get_piece_size() <= 0:
        raise TokenizerError(f"expected a SentencePiece model in {path}, found one with no pieces")
    return SentencePieceTokenizer(path, processor)
