"""What `embscope export` says about the files it wrote, for people (rich) and for programs (one JSON document)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..analysis.export import ExportRows
from ..core.errors import Message, Option
from ..core.role import Role
from . import console, header
from .jsonout import Document
from .norms import untrained_document, untrained_line

if TYPE_CHECKING:
    from ..embeddings import Embeddings

FORMAT_NAMES = {"projector": "the TensorFlow Embedding Projector", "word2vec": "the word2vec text format"}


def columns(rows: ExportRows) -> list[str]:
    if rows.role is Role.position:
        return ["position", "row", "norm", "anomaly"]
    return ["token", "id", "norm", "anomaly", "undertrained"]


def how_to_open(fmt: str, files: list[Path]) -> str:
    if fmt == "projector":
        return (f"open it with `tensorboard --logdir {files[0].parent}` (Projector tab), or load {files[0].name} "
                f"and {files[1].name} at projector.tensorflow.org")
    return f"read it with gensim: KeyedVectors.load_word2vec_format('{files[0]}')"


def notes(rows: ExportRows, fmt: str) -> list[str]:
    empty = fmt == "projector" and rows.role is not Role.position and rows.undertrained is None
    skipped = Message("the undertrained column is empty: ", Option("undertrained", False), " skipped the analysis")
    return [*rows.notes, *([skipped] if empty else [])]


def document(rows: ExportRows, fmt: str, files: list[Path]) -> Document:
    return {
        "format": fmt, "files": [str(f) for f in files], "table": rows.role.value, "table_name": rows.name,
        "rows": len(rows.ids), "dim": rows.dim, "selection": rows.selection,
        "columns": columns(rows) if fmt == "projector" else None,
        "anomalies": int(rows.anomalous.sum()), "anomaly_rule": rows.anomaly_rule,
        "undertrained": None if rows.undertrained is None else int(rows.undertrained.sum()),
        "untrained": untrained_document(rows.untrained),
        "left_out": rows.left_out.tolist(), "notes": notes(rows, fmt),
    }


def show(emb: Embeddings, rows: ExportRows, fmt: str, files: list[Path], json: bool) -> None:
    if json:
        header.emit(document(rows, fmt, files), emb)
        return
    out = console.out
    header.show(emb)
    out.print(f"wrote {len(rows.ids):,} rows x {rows.dim} of the {rows.role} table '{console.safe(rows.name)}' "
              f"({console.safe(rows.selection)}) for {FORMAT_NAMES[fmt]}:", soft_wrap=True)
    for path in files:
        detail = ""
        if path.name.endswith("metadata.tsv"):
            under = "" if rows.undertrained is None else f", {int(rows.undertrained.sum()):,} as under-trained"
            detail = (f"  (columns {', '.join(columns(rows))}; {int(rows.anomalous.sum()):,} rows flagged as norm "
                      f"anomalies{under})")
        out.print(f"  {console.safe(path)}{detail}", soft_wrap=True)
    out.print(console.safe(untrained_line(rows.untrained)), soft_wrap=True)
    out.print(console.safe(how_to_open(fmt, files)), soft_wrap=True)
    console.notes(notes(rows, fmt))
