"""The catalogue every format reader produces, and the embedding tables found in it."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from .arrays import FLOAT_DTYPES, to_float32
from .memory import require_memory
from .role import Head, Role
from .text import quote
from .tokenizer import Tokenizer


@dataclass(frozen=True)
class TensorInfo:
    """One tensor as its header describes it; `read` loads its data only when called."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # numpy's name, or "bfloat16"
    read: Callable[[], np.ndarray] = field(repr=False, compare=False)
    storage: Hashable | None = None  # tensors with equal storage keys share their memory (tied)
    # how the file stores it when that is not `dtype`: "Q8_0" (GGUF), "int8 x per-row scale" (ONNX,
    # CTranslate2); `read` then dequantizes, and `numel` still counts the stored elements
    quantization: str | None = None
    # the files its bytes are read from, where they are not the checkpoint's own file (a shard, ONNX external
    # data): what a cached answer about the tensor must check is unchanged
    sources: tuple[Path, ...] = field(default=(), compare=False)
    transposed: bool = False  # stored d x V and read a row per token (roles.upright): its bytes lie in another order

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_DTYPES


@dataclass
class Checkpoint:
    """What a reader learned from a file's headers: tensors, metadata, and where it lives."""

    path: Path
    tensors: dict[str, TensorInfo]
    format: str = ""  # the name of the format's record (formats.FORMATS), stamped by open_checkpoint
    step: int | None = None
    config: dict[str, Any] = field(default_factory=dict)
    declared_params: int | None = None  # a count the file states itself (the ANDREA header)
    tied: bool | None = None  # the reader's word on a head the file does not hold (ANDREA decides from its layout)
    # scale and zero-point values the reader took out of the catalogue as quantization data: not parameters
    quantization_values: int = 0
    # elements of FP8 weights a reader left out of the catalogue (numpy holds no FP8): parameters all the same
    skipped_parameters: int = 0
    # tensors the file itself says are buffers, not parameters (a whole pickled model's `_buffers`: BatchNorm's
    # running statistics, a pruning mask): in the file, left out of the parameter count
    buffers: frozenset[str] = frozenset()
    notes: list[str] = field(default_factory=list)
    # tables the file's own graph looks up by the model's integer inputs (an ONNX Gather of input_ids): the token
    # table by the graph's word, where no name says it
    gathered: tuple[str, ...] = ()
    # tables the graph adds whole to that lookup's rows (tf2onnx's position rows for a fixed length, folded to a
    # constant): the position table by the graph's word
    added: tuple[str, ...] = ()
    # tables whose layer the file's own model config names (a .keras zip's config.json): tensor name -> (the
    # layer's own name, its class), for the roles its class or name says
    layers: dict[str, tuple[str, str]] = field(default_factory=dict)
    # the tokenizer the checkpoint carries or names itself (GGUF metadata, a CTranslate2 vocabulary),
    # built when first asked for; None: look for a tokenizer file beside the checkpoint
    tokenizer: Callable[[], Tokenizer | None] | None = field(default=None, repr=False)

    @property
    def directory(self) -> Path:
        """Where tokenizer and config files that belong to the checkpoint sit."""
        return self.path if self.path.is_dir() else self.path.parent


@dataclass
class Table:
    """One embedding table: the tensor that plays a role, and the rule that chose it."""

    role: Role
    tensor: TensorInfo
    rule: str
    first_row: int = 0  # rows before position 0 (OPT keeps 2)
    notes: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.tensor.name

    @property
    def rows(self) -> int:
        return self.tensor.shape[0]

    @property
    def dim(self) -> int:
        return self.tensor.shape[1]

    @cached_property
    def array(self) -> np.ndarray:
        """All rows as float32; a memory map, not a copy, where the file stores float32.
        A copy (half precision, float64) that would not fit in memory is refused before it is made.
        numpy's floating-point warnings while reading (a scale of 0, values past float32's range) do not reach
        the user: what they made (rows of Inf or NaN) is said once, as a note of the table, and every answer
        reports such rows itself."""
        with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
            raw = self.tensor.read()
            if not (raw.dtype == np.float32 and raw.dtype.isnative):
                require_memory(raw.size * 4, f"the {self.role} table {quote(self.name)} as float32")
            table = to_float32(raw, self.tensor.dtype)
        made = self.made_non_finite(raw, table)
        if made:
            self.notes = (*self.notes, made)
        return table

    def made_non_finite(self, raw: np.ndarray, table: np.ndarray) -> str | None:
        """What reading made Inf or NaN that the file did not store so, when it did: the rows a dequantization
        made so (a scale of 0, Inf or NaN), or the values of a float64 table past float32's range."""
        if self.tensor.quantization is None and raw.dtype != np.float64:
            return None  # stored as it is read: an Inf or NaN there is the file's own, reported by the answers
        rows, values = 0, 0
        block = max(1, (1 << 24) // max(1, math.prod(table.shape[1:])))  # rows per pass: bounded temporaries
        for start in range(0, table.shape[0] if table.ndim else 0, block):
            bad = ~np.isfinite(table[start:start + block])
            if raw.dtype == np.float64:  # only what the cast made: the file's own Inf and NaN stay the file's
                bad &= np.isfinite(raw[start:start + block])
            values += int(bad.sum())
            rows += int(bad.reshape(len(bad), -1).any(axis=1).sum())
        if not values:
            return None
        if self.tensor.quantization is not None:
            return (f"{rows:,} rows of {quote(self.name)} are Inf or NaN once dequantized "
                    f"({self.tensor.quantization}): the file's scales hold 0, Inf or NaN there, or the values pass "
                    "float32's range")
        return (f"{values:,} values in {rows:,} rows of {quote(self.name)} lie past float32's range (3.4e38) and read "
                "as Inf")



@dataclass
class EmbeddingTables:
    """The table found for each role. A role left empty has its reason in `missing`: the error that a
    command needing the role raises (see Embeddings.table)."""

    token: Table | None
    position: Table | None
    output: Table | None  # an untied head only; `head` says what the file holds instead
    head: Head
    head_note: str | None = None  # why the head is what it is, when that needs saying
    notes: tuple[str, ...] = ()  # about the roles left empty
    tied_copy: str | None = None  # an output tensor that repeats the token table (declared tied, or equal): counted once
    missing: dict[Role, str] = field(default_factory=dict)
    # what comparing the head in the file with the token table says: "equal" (bit for bit, or within a
    # requantised copy's rounding), "different", or None (no head in the file, or not compared whole)
    tie_tensors: str | None = None

    @property
    def tied(self) -> bool | None:
        """Whether the head reuses the token table; None where the file does not say."""
        return self.head.is_tied
