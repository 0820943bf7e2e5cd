"""The interface every tokenizer kind implements: what a checkpoint may carry (Checkpoint.tokenizer) and what
every lookup asks of one. The kinds themselves live in embscope.tokenizers."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable


@runtime_checkable
class Tokenizer(Protocol):
    """The interface every tokenizer kind implements.

    - ``encode(text)``: ids for ``text`` with no special tokens added, no padding,
      no truncation.
    - ``decode(ids)``: the text of those ids; bytes are turned into text with
      ``errors="replace"``; special tokens (BOS, ``<|endoftext|>``) appear as their text.
    - ``token_string(id)``: the piece one id stands for, as the text of its bytes,
      e.g. GPT-2's ``"Ġdog"`` is returned as ``" dog"``. Bytes that are not whole
      UTF-8 characters are shown escaped (``errors="backslashreplace"``), so a token
      holding the first byte of "—" reads ``"\\xe2"``. Special tokens give their text.
      The result is always valid text (it encodes to UTF-8): a file whose token texts hold
      lone surrogates (JSON can spell ``"\\udcff"``) is refused when it is loaded.
    - ``unk_id``: the id that text the vocabulary cannot represent becomes (``[UNK]``,
      ``<unk>``), or None when the tokenizer has none (byte-level BPE: every text is bytes).
    - ``special_ids``: the ids of special and control tokens (``[CLS]``, ``<s>``,
      ``<|endoftext|>``, the unknown token): ids that never stand for a piece of text.
    - ``notes``: what the loader assumed where the files did not say (a default split
      pattern, lower-casing inferred from the vocabulary), one sentence each, for the user.

    Every id outside ``0 .. vocab_size - 1`` raises TokenError, and so does an id inside
    it that the tokenizer does not use (a hole in its id space).
    """

    # read-only: a kind may store them as attributes or compute them
    @property
    def kind(self) -> str: ...

    @property
    def path(self) -> Path: ...

    @property
    def vocab_size(self) -> int: ...

    @property
    def unk_id(self) -> int | None: ...

    @property
    def special_ids(self) -> frozenset[int]: ...

    @property
    def notes(self) -> tuple[str, ...]: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...

    def token_string(self, id: int) -> str: ...
