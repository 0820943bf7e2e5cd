"""`embscope params` for people (rich) and for programs (one JSON document)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..analysis.params import ParamsReport
from . import console, header
from .info import HEAD_ROWS
from .jsonout import Document

if TYPE_CHECKING:
    from ..embeddings import Embeddings

def params_doc(report: ParamsReport) -> Document:
    return {
        "total": report.total, "token": report.token, "position": report.position, "output": report.output,
        "tied": report.tied, "head": report.head.value, "embeddings": report.embeddings,
        "total_without_position": report.total_without_position, "total_source": report.source,
        "shares": report.shares, "quantization": report.quantization,
        "quantization_rule": report.quantization_rule, "quantization_values": report.quantization_values,
        "notes": report.notes,
    }


def show(emb: Embeddings, report: ParamsReport, *, json: bool) -> None:
    if json:
        header.emit(params_doc(report), emb)
        return
    out, shares = console.out, report.shares
    header.show(emb)
    grid = console.table("table", "parameters", "share of total")
    grid.add_row(f"token ({console.safe(report.token_name)})", console.count_text(report.token),
                 console.percent(shares["token"]))
    if report.position_name is not None:
        grid.add_row(f"position ({console.safe(report.position_name)})", console.count_text(report.position),
                     console.percent(shares["position"]))
    else:
        grid.add_row("position", "none (no learned table)", "-")
    if report.output_name is not None:
        grid.add_row(f"output ({console.safe(report.output_name)})", console.count_text(report.output),
                     console.percent(shares["output"]))
    else:
        grid.add_row("output projection", HEAD_ROWS[report.head], "-")
    grid.add_row("token + position", console.count_text(report.embeddings), console.percent(shares["embeddings"]))
    grid.add_row("whole checkpoint", console.count_text(report.total), "100.00%")
    out.print(grid)
    out.print(f"total counts {report.source} ({report.total / 1e6:.2f}M).")
    if report.position:
        out.print(f"nanoGPT's convention leaves the position table out: {report.total_without_position:,} "
                  f"({report.total_without_position / 1e6:.2f}M).")
    for role, stored in report.quantization.items():
        out.print(f"the {role} table is stored as {console.safe(stored)}: its stored elements are counted, "
                  "and it is dequantized to float32 to be read.")
    if report.quantization_rule:
        left_out = f" ({report.quantization_values:,} such values left out)" if report.quantization_values else ""
        out.print(f"counting rule: {report.quantization_rule}{left_out}.")
    console.notes(report.notes)
