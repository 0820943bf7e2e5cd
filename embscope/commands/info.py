"""`embscope info`: what the checkpoint is and which tables were found, by which rule."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from .options import JsonFlag, Source, with_source

if TYPE_CHECKING:
    from ..checkpoint import Table


def table_doc(table: Table | None) -> dict | None:
    if table is None:
        return None
    return {"name": table.name, "shape": list(table.tensor.shape), "dtype": table.tensor.dtype,
            "rule": table.rule, "first_row": table.first_row}


def tokenizer_doc(embeddings: Any, notes: list[str]) -> dict | None:
    tokenizer, why_none = embeddings.tokenizer_for_names()
    if tokenizer is None:
        notes.append(why_none)
        return None
    rows = embeddings.token.rows
    if rows > tokenizer.vocab_size:
        notes.append(f"the token table has {rows} rows, the tokenizer {tokenizer.vocab_size} ids: "
                     f"{rows - tokenizer.vocab_size} rows ({tokenizer.vocab_size}..{rows - 1}) are padding")
    elif rows < tokenizer.vocab_size:
        notes.append(f"warning: the tokenizer has {tokenizer.vocab_size} ids but the token table only {rows} rows: "
                     "is this the model's tokenizer?")
    return {"kind": tokenizer.kind, "path": str(tokenizer.path), "vocab_size": tokenizer.vocab_size}


def info(source: Source, json: JsonFlag = False) -> None:
    """Format, the tables found (name, shape, dtype, rule), tokenizer, training step."""
    from ..render import console, jsonout  # rich only when answering, not for --help
    emb = source.open()
    ckpt, tables = emb.checkpoint, emb.tables
    notes = list(ckpt.notes) + list(tables.notes) + [n for t in (tables.token, tables.position) if t for n in t.notes]
    doc = {
        "checkpoint": str(ckpt.path),
        "format": ckpt.format,
        "tables": {"token": table_doc(tables.token), "position": table_doc(tables.position),
                   "output": table_doc(tables.output)},
        "tied": tables.tied,
        "tokenizer": tokenizer_doc(emb, notes),
        "step": ckpt.step,
        "tensors": len(ckpt.tensors),
        "notes": notes,
    }
    if json:
        jsonout.emit(doc)
        return
    out = console.out
    out.print(f"checkpoint  {console.safe(ckpt.path)}", soft_wrap=True)
    out.print(f"format      {console.safe(ckpt.format)}, {len(ckpt.tensors)} tensors")
    out.print(f"step        {ckpt.step if ckpt.step is not None else '-'}")
    tok = doc["tokenizer"]
    out.print(f"tokenizer   {console.safe(tok['kind'] + ', ' + str(tok['vocab_size']) + ' ids, ' + tok['path']) if tok else '-'}",
              soft_wrap=True)
    grid = console.table("role", "tensor", "shape", "dtype")
    rules = []
    for role in ("token", "position", "output"):
        t = doc["tables"][role]
        if t is not None:
            grid.add_row(role, console.safe(t["name"]), console.shape_text(t["shape"]), t["dtype"])
            rules.append(f"{role} table found by {console.safe(t['rule'])}")
        elif role == "output" and tables.tied:
            grid.add_row(role, "tied to the token table", "", "")
        else:
            grid.add_row(role, "none", "", "")
    out.print(grid)
    for line in rules:
        out.print(line)
    console.notes(notes)


def register(app: typer.Typer) -> None:
    app.command()(with_source(info))
