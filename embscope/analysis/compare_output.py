"""`compare CKPT --output`: a checkpoint's token table against its own untied output projection, row by row
as `compare A B` sets two checkpoints' tables side by side: the per-row cosine as stored and after orthogonal
Procrustes (the two tables of one model need not share a basis), linear CKA, and top-k neighbour overlap. A tied
head is the token table itself: there is nothing to compare, and the answer says so."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..core.errors import TableError
from ..core.role import Head, Role
from ..core.text import quote
from .compare import CompareOptions, TableComparison, TableInput, by_index, compare_tables
from .stages import Stages, quiet

if TYPE_CHECKING:
    from ..embeddings import Embeddings


@dataclass(frozen=True, eq=False)
class OutputComparison:
    token_name: str
    output_name: str | None  # None when the head is tied
    head: Head
    head_note: str | None  # what the file says about its head, when that needs saying
    found: TableComparison | None  # None when the head is tied: the two are one table

    @property
    def tied(self) -> bool:
        return self.head is Head.tied


def compare_output(emb: Embeddings, options: CompareOptions | None = None, *, word_rows: Sequence[int] = (),
                   stages: Stages = quiet) -> OutputComparison:
    """The token table (A) against the untied output projection (B) of one checkpoint, rows paired by id;
    B is also rotated onto A (orthogonal Procrustes) whatever `options.align` says. A checkpoint with no output
    table that is not tied (absent, unknown, ambiguous) raises TableError with discovery's reason."""
    token = emb.token
    if emb.tables.head is Head.tied:
        return OutputComparison(token.name, None, Head.tied, emb.tables.head_note, None)
    output = emb.table(Role.output)
    if output.dim != token.dim:
        raise TableError(f"expected an output projection as wide as the token table ({token.dim}), found "
                         f"{quote(output.name)} {output.dim} wide: rows of different widths cannot be compared")
    pairing = by_index(token.rows, output.rows)
    found = compare_tables(Role.token.value, TableInput(token.array), TableInput(output.array), pairing,
                           replace(options or CompareOptions(), align=True), word_rows=word_rows, stages=stages)
    return OutputComparison(token.name, output.name, emb.tables.head, emb.tables.head_note, found)
