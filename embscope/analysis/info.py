"""What `embscope info` reports: the checkpoint, the table found for each role (or why none), the
head, the tokenizer, and the whole catalogue of tensors. From headers; the only data read is a few
rows of a head that might be a saved copy of the token table (roles.compare_copy)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.checkpoint import Table, TensorInfo
from ..core.role import Head, Role
from .tie import Tie, tie_of

if TYPE_CHECKING:
    from ..embeddings import Embeddings


@dataclass(frozen=True)
class TokenizerSummary:
    kind: str
    path: Path
    vocab_size: int


@dataclass(frozen=True)
class InfoReport:
    checkpoint: Path
    format: str
    step: int | None
    tables: dict[Role, Table | None]  # None: the role stayed empty; `missing` says why
    missing: dict[Role, str]  # the error a command that needs the role would raise
    head: Head
    tensors: tuple[TensorInfo, ...]  # every tensor in the file, in its order
    tokenizer: TokenizerSummary | None
    notes: tuple[str, ...]
    tie: Tie  # what config.json and the tensors say of the head

    @property
    def empty_roles(self) -> list[Role]:
        """Roles with no table, but for a tied head: its table is the token table."""
        return [role for role, table in self.tables.items()
                if table is None and not (role is Role.output and self.head is Head.tied)]


def tokenizer_summary(emb: Embeddings, notes: list[str]) -> TokenizerSummary | None:
    """The tokenizer found, with a note when its size and the token table's disagree."""
    tokenizer, why_none = emb.tokenizer_for_names()
    if tokenizer is None:
        token = emb.tables.token  # asked of the token table: a JSON map of ids beside it that fits is named
        notes.append((emb.tokenizer_for_names(token)[1] if token is not None else None) or why_none or "no tokenizer")
        return None
    notes.extend(tokenizer.notes)  # what the tokenizer assumed where its files did not say
    size = tokenizer.vocab_size
    token = emb.tables.token
    rows = token.rows if token is not None else size
    misfit = emb.tokenizer_for_names(token)[1] if token is not None else None  # its rows are not padding, nor named
    if misfit:
        notes.append(misfit)
    elif rows > size:
        notes.append(f"the token table has {rows} rows, the tokenizer {size} ids: " + (
            f"{rows - size} rows ({size}..{rows - 1}) are padding" if rows - size > 1 else f"row {size} is padding"))
    elif rows < size:
        notes.append(f"warning: the tokenizer has {size} ids but the token table only {rows} rows: "
                     "is this the model's tokenizer?")
    return TokenizerSummary(tokenizer.kind, Path(tokenizer.path), size)


def info_report(emb: Embeddings) -> InfoReport:
    ckpt, tables = emb.checkpoint, emb.tables
    found = {Role.token: tables.token, Role.position: tables.position, Role.output: tables.output}
    notes = [*ckpt.notes, *tables.notes, *(n for t in (tables.token, tables.position) if t for n in t.notes)]
    if tables.head_note:
        notes.append(tables.head_note)
    tokenizer = tokenizer_summary(emb, notes)
    return InfoReport(ckpt.path, ckpt.format, ckpt.step, found, dict(tables.missing), tables.head,
                      tuple(ckpt.tensors.values()), tokenizer, tuple(notes), tie_of(ckpt, tables))
