"""`embscope.open`: a checkpoint, its embedding tables, and its tokenizer, each read when first needed."""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path

from .checkpoint import Checkpoint, EmbeddingTables, Table
from .errors import EmbscopeError, PositionError, TableError
from .formats import OpenOptions, open_checkpoint
from .roles import find_tables
from .sample import default_checkpoint

ENV_CHECKPOINT = "EMBSCOPE_CHECKPOINT"


class Embeddings:
    """The lookup tables of one checkpoint. Where the format allows (safetensors, numpy, PyTorch zip,
    ANDREA) nothing but headers is read until a table is used; pickles are read whole at open."""

    def __init__(self, checkpoint: Checkpoint, tables: EmbeddingTables, tokenizer_path: Path | None = None):
        self.checkpoint = checkpoint
        self.tables = tables
        self._tokenizer_path = tokenizer_path

    @property
    def token(self) -> Table:
        return self.tables.token

    @property
    def position(self) -> Table | None:
        return self.tables.position

    @property
    def output(self) -> Table | None:
        return self.tables.output

    def require_position(self) -> Table:
        if self.tables.position is None:
            raise PositionError(f"expected a learned position table in {self.checkpoint.path.name}, found none by "
                                "name or shape: the model has no learned position table (rotary or other computed "
                                "positions), or name it with --pos-key")
        return self.tables.position

    def table(self, role: str) -> Table:
        """The table for a role name: token, position or output (which must be untied)."""
        if role == "position":
            return self.require_position()
        if role == "output":
            if self.tables.output is None:
                raise TableError("expected an untied output projection, found none: the head is tied to the token table")
            return self.tables.output
        if role == "token":
            return self.tables.token
        raise TableError(f"expected a table role token, position or output, found {role!r}")

    @cached_property
    def tokenizer(self):
        """The tokenizer given, else the one the checkpoint carries (GGUF), else one found beside the
        checkpoint; None when there is none."""
        from .tokenizers import find_tokenizer, load_tokenizer
        if self._tokenizer_path is not None:
            return load_tokenizer(self._tokenizer_path)
        if self.checkpoint.tokenizer is not None:
            return self.checkpoint.tokenizer()
        return find_tokenizer(self.checkpoint.directory)

    def tokenizer_for_names(self) -> tuple[object | None, str | None]:
        """The tokenizer for naming ids, or None and why: a broken tokenizer file costs only the names."""
        try:
            tokenizer = self.tokenizer
        except EmbscopeError as err:
            return None, f"tokenizer not loaded: {err}"
        if tokenizer is None:
            return None, "no tokenizer found beside the checkpoint: tokens print as #id, words cannot be looked up"
        return tokenizer, None


def resolve_path(path: str | os.PathLike | None) -> Path:
    """An explicit path, else $EMBSCOPE_CHECKPOINT, else the sample model shipped with embscope."""
    if path is not None:
        return Path(path)
    if os.environ.get(ENV_CHECKPOINT):
        return Path(os.environ[ENV_CHECKPOINT])
    return default_checkpoint()


def open(path: str | os.PathLike | None = None, *, tokenizer: str | os.PathLike | None = None,
         token_key: str | None = None, pos_key: str | None = None, trust_pickle: bool = False,
         vocab_size: int | None = None, d_model: int | None = None, context: int | None = None) -> Embeddings:
    options = OpenOptions(trust_pickle=trust_pickle, vocab_size=vocab_size, d_model=d_model, context=context)
    checkpoint = open_checkpoint(resolve_path(path), options)
    tables = find_tables(checkpoint, token_key=token_key, pos_key=pos_key)
    return Embeddings(checkpoint, tables, Path(tokenizer) if tokenizer is not None else None)
