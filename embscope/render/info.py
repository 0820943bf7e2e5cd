"""`embscope info` for people (rich) and for programs (one JSON document)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..analysis.info import InfoReport
from ..core.checkpoint import Table
from ..core.role import Head, Role
from ..core.text import shape_text
from . import console, header
from .jsonout import Document

if TYPE_CHECKING:
    from ..embeddings import Embeddings

LISTED_TENSORS = 200  # tensors listed by name; the rest are counted

# what the output row says when the head is not a table of its own; the head's note says why
HEAD_ROWS = {Head.tied: "tied to the token table", Head.absent: "none (no language-model head)",
             Head.unknown: "none in the file", Head.ambiguous: "not chosen: several candidates",
             Head.unnamed: "none by name: see the note"}


def table_doc(table: Table | None) -> Document | None:
    if table is None:
        return None
    return {"name": table.name, "shape": list(table.tensor.shape), "dtype": table.tensor.dtype,
            "rule": table.rule, "first_row": table.first_row, "quantization": table.tensor.quantization}


def info_doc(report: InfoReport) -> Document:
    listed = report.tensors[:LISTED_TENSORS]
    tokenizer = report.tokenizer
    return {
        "format": report.format,
        "tables": {role.value: table_doc(table) for role, table in report.tables.items()},
        "tied": report.head.is_tied,
        "head": report.head.value,
        "tie": {"config": report.tie.config, "tensors": report.tie.tensors},
        "empty_roles": [role.value for role in report.empty_roles],
        "missing": {role.value: message for role, message in report.missing.items()},
        "tokenizer": {"kind": tokenizer.kind, "path": str(tokenizer.path), "vocab_size": tokenizer.vocab_size}
        if tokenizer else None,
        "tensors": len(report.tensors),
        "tensor_list": [{"name": t.name, "shape": list(t.shape), "dtype": t.dtype} for t in listed],
        "tensors_not_listed": len(report.tensors) - len(listed),
        "notes": list(report.notes),
    }


def show(emb: Embeddings, report: InfoReport, *, json: bool) -> None:
    if json:
        header.emit(info_doc(report), emb)
        return
    out = console.out
    header.show(emb)
    count = len(report.tensors)
    out.print(f"format      {console.safe(report.format)}, {count} tensor{'s' * (count != 1)}")
    if report.step is None:  # a known step is on the first line
        out.print("step        unknown")
    tok = report.tokenizer
    tok_text = console.safe(f"{tok.kind}, {tok.vocab_size} ids, {header.place(emb, tok.path)}") if tok else "-"
    out.print(f"tokenizer   {tok_text}", soft_wrap=True)
    grid = console.table("role", "tensor", "shape", "dtype")
    rules = []
    for role, table in report.tables.items():
        if table is not None:
            stored = table.tensor.quantization
            dtype = table.tensor.dtype + (f" (stored as {console.safe(stored)})" if stored else "")
            grid.add_row(role, console.safe(table.name), shape_text(table.tensor.shape), dtype)
            rules.append(f"{role} table found by {console.safe(table.rule)}")
        else:
            grid.add_row(role, HEAD_ROWS[report.head] if role is Role.output else "none", "", "")
    out.print(grid)
    for line in rules:
        out.print(line)
    if report.tables[Role.token] is None:
        print_tensors(report)
    console.notes(report.notes)


def print_tensors(report: InfoReport) -> None:
    """Every tensor in the file, for choosing one with --token-key."""
    listed = report.tensors[:LISTED_TENSORS]
    grid = console.table("tensor", "shape", "dtype", title=f"tensors in the file ({len(report.tensors)})")
    for tensor in listed:
        grid.add_row(console.safe(tensor.name), shape_text(tensor.shape), tensor.dtype)
    console.out.print(grid)
    if len(report.tensors) > len(listed):
        console.out.print(f"... and {len(report.tensors) - len(listed)} more, not listed")
