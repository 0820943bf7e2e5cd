"""What an export holds: which rows, in which order, and what the metadata says of each (label, id,
norm, the norm-anomaly flag of `embscope norms`, and the under-trained flag when that analysis ran).
Plain data only; render/export_files.py writes the files."""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..core.errors import OptionError, TableError
from ..core.role import Role
from ..core.text import shortened
from ..digits import MAX_DIGITS, whole_number
from ..naming import token_name
from .norms import DEFAULT_THRESHOLD, judged, row_norms, rule_text
from .untrained import Untrained

if TYPE_CHECKING:
    from ..embeddings import Embeddings

RANGE = re.compile(rf"([0-9]{{0,{MAX_DIGITS}}}):([0-9]{{0,{MAX_DIGITS}}})")  # ASCII digits: '²' is no row


@dataclass(frozen=True)
class RowSpec:
    """The rows asked for with --rows or --top-norms, before the table is known."""

    items: tuple[tuple[int, int | None], ...] = ()  # (start, stop) half-open; stop None: to the end
    top_norms: int | None = None
    text: str | None = None  # as typed, for messages

    def __post_init__(self) -> None:
        """What parse_rows and the command line let through, and nothing else: (-5, None) exported rows -5..-1
        and then every row, (5, 2) none, top_norms=-1 all but one, and items beside top_norms were dropped."""
        if self.items and self.top_norms is not None:
            raise OptionError("expected rows or top_norms, not both", option="top_norms")
        if self.top_norms is not None and not (whole(self.top_norms) and self.top_norms >= 1):
            raise OptionError(f"expected top_norms of at least 1, found {self.top_norms!r}", option="top_norms")
        for item in self.items:
            start, stop = item if isinstance(item, tuple) and len(item) == 2 else (None, None)
            if not (whole(start) and start >= 0 and (stop is None or (whole(stop) and stop > start))):
                raise OptionError(f"expected rows as (start, stop) with 0 <= start < stop, or stop None for the "
                                  f"end, found {item!r}", option="rows")

    @property
    def everything(self) -> bool:
        return not self.items and self.top_norms is None


def whole(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def parse_rows(text: str) -> RowSpec:
    """`5,17,100:200`: ids and half-open ranges (100:200 is rows 100..199, as in Python; `:50` and
    `1000:` leave an end open). Raises OptionError on anything else."""
    items: list[tuple[int, int | None]] = []
    for part in text.split(","):
        part = part.strip()
        found = RANGE.fullmatch(part)
        row = whole_number(part) if part[:1].isdigit() else None  # no sign: -3 is not a row
        if row is not None:
            items.append((row, row + 1))
        elif found:
            start = int(found.group(1) or 0)
            stop = int(found.group(2)) if found.group(2) else None
            if stop is not None and stop <= start:
                raise OptionError(f"expected a range START:STOP with STOP above START, found {part!r}", option="rows")
            items.append((start, stop))
        else:
            whole = f" in {shortened(text)!r}" if part != text.strip() else ""
            raise OptionError(f"expected row ids and ranges like 5,17,100:200, found {shortened(part)!r}{whole} "
                              f"(ids are written in the digits 0-9, below 2**63)", option="rows")
    return RowSpec(tuple(items), text=text)


def select_rows(spec: RowSpec, norms: np.ndarray) -> tuple[np.ndarray, str]:
    """The row ids the spec names, in export order, and how they were chosen (one phrase)."""
    rows = len(norms)
    if spec.top_norms is not None:
        finite = np.flatnonzero(np.isfinite(norms))
        order = finite[np.lexsort((finite, -norms[finite]))]  # largest norm first, ties to the lower id
        chosen = order[:spec.top_norms]
        return chosen.astype(np.int64), f"the {len(chosen):,} rows with the largest norms, largest first"
    if spec.everything:
        return np.arange(rows, dtype=np.int64), "every row"
    picked: list[np.ndarray] = []
    for start, stop in spec.items:
        end = rows if stop is None else stop
        if start >= rows or end > rows:
            shown = f"{start}" if stop == start + 1 else f"{start}:{'' if stop is None else stop}"
            raise OptionError(f"expected rows 0..{rows - 1} (the table has {rows:,} rows), found {shown}",
                              option="rows")
        picked.append(np.arange(start, end, dtype=np.int64))
    ids = np.concatenate(picked)
    _, first = np.unique(ids, return_index=True)  # a row named twice is exported once, where first named
    return ids[np.sort(first)], f"rows {spec.text}"


@dataclass(frozen=True, eq=False)
class ExportRows:
    """The rows of one table to export, each with its metadata. `labels` are raw strings (token text,
    or the position): the writers escape them for their format."""

    role: Role
    name: str  # the tensor
    dim: int
    ids: np.ndarray  # int64 rows, in export order; rows holding NaN or Inf are not among them
    labels: tuple[str, ...]
    positions: np.ndarray | None  # position of each row (position table); -1 for a reserved row (OPT)
    norms: np.ndarray  # float64 norm of each exported row
    anomalous: np.ndarray  # bool: the norm rule of `embscope norms` flags the row
    anomaly_rule: str
    undertrained: np.ndarray | None  # bool per row; None: the under-trained analysis did not run
    left_out: np.ndarray  # rows selected but not exported: they hold NaN or Inf
    selection: str  # how the rows were chosen
    notes: tuple[str, ...]
    untrained: Untrained | None = None  # the table's never-trained rows, as `norms` finds them (row ids)


def undertrained_flags(ids: np.ndarray, flagged: Collection[int] | None) -> np.ndarray | None:
    """The hook for the under-trained analysis: the ids it flags, as one bool per exported row;
    None (an empty column in the files) while that analysis has not run."""
    if flagged is None:
        return None
    return np.isin(ids, np.fromiter(flagged, dtype=np.int64, count=len(flagged)))


def export_rows(emb: Embeddings, role: Role, spec: RowSpec, undertrained: Collection[int] | None = None,
                threshold: float = DEFAULT_THRESHOLD) -> ExportRows:
    """The rows of the `role` table that `spec` names, with labels, norms and flags. Norms and anomalies
    are worked out over the whole table, so a subset carries the same flags as `embscope norms` prints.
    `undertrained`: the ids the under-trained analysis flags (None when it has not run)."""
    role = Role(role)
    table = emb.table(role)
    norms = row_norms(table.array)
    summary, untrained = judged(table.array, norms, role, emb.checkpoint.config, table.first_row, threshold)
    flagged = np.zeros(len(norms), dtype=bool)
    flagged[summary.flagged] = True
    ids, selection = select_rows(spec, norms)
    finite = np.isfinite(norms[ids])
    left_out = ids[~finite]
    ids = ids[finite]
    notes = list(table.notes)
    positions = None
    if role is Role.position:
        positions = ids - table.first_row
        positions[positions < 0] = -1
        labels = tuple(str(p) if p >= 0 else f"reserved row {i}" for p, i in zip(positions, ids))
    else:
        tokenizer, why_none = emb.tokenizer_for_names(table)
        if why_none:
            notes.append(why_none)
        labels = tuple(token_name(tokenizer, int(i)) for i in ids)
    if len(left_out):
        shown = ", ".join(str(i) for i in left_out[:10]) + (" ..." if len(left_out) > 10 else "")
        if not len(ids):
            raise TableError(f"expected rows to export, found none: every row selected holds NaN or Inf ({shown})")
        notes.append(f"left out {len(left_out):,} row{'s' * (len(left_out) != 1)} holding NaN or Inf (no tool can "
                     f"place them): {shown}")
    rule = f"{rule_text(threshold, summary.mad, summary)}, as `embscope norms` flags them"
    return ExportRows(role=role, name=table.name, dim=table.dim, ids=ids, labels=labels, positions=positions,
                      norms=norms[ids], anomalous=flagged[ids], anomaly_rule=rule,
                      undertrained=undertrained_flags(ids, undertrained) if role is not Role.position else None,
                      left_out=left_out, selection=selection, notes=tuple(notes), untrained=untrained)
