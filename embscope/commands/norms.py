"""`embscope norms`: per-row L2 norms, the rows flagged as anomalies (and why), near-duplicate rows,
and, for token tables, under-trained token candidates."""

from __future__ import annotations

import math
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..analysis.norms import (DEFAULT_THRESHOLD, DUPLICATE_COSINE, UNDERTRAINED_PERCENTILE, find_duplicates,
                              row_norms, summarize, undertrained)
from ..checkpoint import Table
from ..errors import EmbscopeError
from ..render import console, jsonout
from .options import JsonFlag, Source, with_source
from .positions import check_plot_option

LISTED_ROWS = 20  # anomalies and candidates printed in the console
JSON_LISTED = 1000  # anomalies and candidates listed in --json (with the totals): rows are arrays, not objects


class TableChoice(str, Enum):
    position = "position"
    token = "token"
    output = "output"


def token_name(tokenizer, index: int) -> str:
    if tokenizer is None or index >= tokenizer.vocab_size:
        return f"#{index}"
    try:
        return tokenizer.token_string(index)
    except (EmbscopeError, ValueError, IndexError, KeyError):
        return f"#{index}"


def rule_text(threshold: float, mad: float) -> str:
    if math.isnan(mad):
        return "no row has a finite norm: zero, NaN and Inf rows are flagged"
    if mad > 0:
        return (f"a row is flagged when |norm - median| / (1.4826 x MAD) > {threshold:g} (MAD {mad:.4g}); "
                "zero, NaN and Inf rows are always flagged")
    return ("every finite norm equals the median (MAD is 0): a row is flagged when it differs from the median by "
            "more than a relative 1e-6; zero, NaN and Inf rows are always flagged")


def norms(
    source: Source,
    table: Annotated[Optional[TableChoice], typer.Option(
        "--table", help="Which table: position (the default when there is one), token, or output (an untied "
                        "head).", show_default=False)] = None,
    threshold: Annotated[float, typer.Option(
        "--threshold", min=0.0, help="Robust z above which a row's norm is an anomaly: "
                                     "|norm - median| / (1.4826 x MAD).")] = DEFAULT_THRESHOLD,
    plot: Annotated[Optional[Path], typer.Option(
        "--plot", metavar="FILE", help="Draw the norms, flagged rows marked, to FILE (.png, .svg or .pdf).")] = None,
    json: JsonFlag = False,
) -> None:
    """Per-row L2 norms: count, mean, median, min, max, the rows flagged as anomalies with the rule that
    flagged each, near-duplicate rows, and under-trained token candidates."""
    check_plot_option(plot)
    emb = source.open()
    role = table.value if table is not None else ("position" if emb.position is not None else "token")
    chosen: Table = emb.table(role)
    notes = list(chosen.notes)
    norms_found = row_norms(chosen.array)
    summary = summarize(norms_found, threshold)
    duplicates = find_duplicates(chosen.array, norms_found)
    if duplicates.note:
        notes.append(duplicates.note)
    tokenizer, candidates = None, undertrained(norms_found[:0], role)  # none for a position table
    if role != "position":
        tokenizer, why_none = emb.tokenizer_for_names()
        if tokenizer is None:
            notes.append(why_none + "; padding rows past the vocabulary cannot be told apart")
        real_rows = tokenizer.vocab_size if tokenizer is not None else None
        candidates = undertrained(norms_found, role, real_rows)
        if role == "token" and emb.output is not None:  # an untied head has rows of its own to check
            candidates += undertrained(row_norms(emb.output.array), "output", real_rows)

    def name(index: int) -> str:
        if role == "position":
            position = index - chosen.first_row
            return f"position {position}" if position >= 0 else f"reserved row {index}"
        return token_name(tokenizer, index)

    if plot is not None:
        draw(plot, emb.checkpoint.path.name, chosen, summary, name)
    if json:
        doc = {
            "table": role, "name": chosen.name, "rows": summary.rows, "count": summary.count,
            "mean": summary.mean, "median": summary.median, "min": summary.min, "max": summary.max,
            "mad": summary.mad, "threshold": threshold, "rule": rule_text(threshold, summary.mad),
            "anomalies": [{"index": a.index, "label": name(a.index), "norm": a.norm,
                           "ratio_to_mean": a.ratio_to_mean, "reason": a.reason}
                          for a in summary.anomalies[:JSON_LISTED]],
            "anomalies_found": len(summary.anomalies),
            "undertrained": [{"table": c.table, "index": c.index, "token": token_name(tokenizer, c.index),
                              "norm": c.norm, "reason": c.reason} for c in candidates[:JSON_LISTED]],
            "undertrained_found": len(candidates),
            "duplicates": [{"a": d.a, "b": d.b, "a_label": name(d.a), "b_label": name(d.b), "cosine": d.cosine,
                            "identical": d.identical} for d in duplicates.pairs],
            "duplicates_found": duplicates.total, "duplicates_complete": duplicates.complete,
            "duplicate_cosine": DUPLICATE_COSINE, "first_row": chosen.first_row, "notes": notes,
        }
        if plot is not None:
            doc["plot"] = str(plot)
        jsonout.emit(doc)
        return
    out = console.out
    out.print(f"{role} table {console.safe(chosen.name)}: {summary.rows:,} rows x {chosen.dim}")
    out.print(f"count {summary.count:,}  mean {number(summary.mean)}  median {number(summary.median)}  "
              f"min {number(summary.min)}  max {number(summary.max)}")
    out.print(f"rule: {rule_text(threshold, summary.mad)}")
    if summary.anomalies:
        grid = console.table("row", "name", "norm", "x mean", "reason", title=f"anomalies ({len(summary.anomalies)})")
        for a in summary.anomalies[:LISTED_ROWS]:
            grid.add_row(str(a.index), console.safe(name(a.index)), number(a.norm), ratio(a.ratio_to_mean),
                         console.safe(a.reason))
        out.print(grid)
        more(len(summary.anomalies))
    else:
        out.print("anomalies: none")
    if duplicates.total:
        grid = console.table("row a", "row b", "cosine", "identical",
                             title=f"near-duplicate rows (cosine > {DUPLICATE_COSINE}): {duplicates.total}")
        for d in duplicates.pairs:
            grid.add_row(f"{d.a} {console.safe(name(d.a))}", f"{d.b} {console.safe(name(d.b))}",
                         f"{d.cosine:.6f}", "yes" if d.identical else "no")
        out.print(grid)
    else:
        out.print(f"near-duplicate rows (cosine > {DUPLICATE_COSINE}): none")
    if role != "position":
        print_candidates(candidates, tokenizer)
    if plot is not None:
        out.print(f"plot written to {console.safe(plot)}")
    console.notes(notes)


def number(value: float) -> str:
    cleaned = jsonout.clean(value)
    return "null" if cleaned is None else f"{cleaned:.4g}"


def ratio(value: float) -> str:
    cleaned = jsonout.clean(value)
    return "-" if cleaned is None else f"{cleaned:.2f}x"


def print_candidates(candidates, tokenizer) -> None:
    if not candidates:
        console.out.print("under-trained candidates: none")
        return
    grid = console.table("table", "row", "token", "norm", "why",
                         title=f"under-trained token candidates ({len(candidates)}; lowest "
                               f"{UNDERTRAINED_PERCENTILE:g}% of norms and padding rows; not anomalies)")
    for c in candidates[:LISTED_ROWS]:
        grid.add_row(c.table, str(c.index), console.safe(token_name(tokenizer, c.index)), number(c.norm),
                     console.safe(c.reason))
    console.out.print(grid)
    more(len(candidates))


def more(listed: int) -> None:
    if listed > LISTED_ROWS:
        console.out.print(f"... and {listed - LISTED_ROWS} more (--json lists the first {JSON_LISTED:,})")


def draw(path: Path, checkpoint: str, table: Table, summary, name) -> None:
    from ..render import plots
    flagged = [(a.index, a.norm, a.ratio_to_mean) for a in summary.anomalies[:JSON_LISTED]]
    title = f"{table.role} table {table.name}"
    if table.role == "position":
        figure = plots.position_norms_figure(summary.norms, summary.mean, summary.median, flagged, checkpoint, title,
                                             table.first_row)
    else:
        names = {i: name(i) for i in plots.ranked_rows(summary.norms) + [row for row, _, _ in flagged]}
        figure = plots.token_norms_figure(summary.norms, summary.mean, flagged, names, checkpoint, title)
    plots.save(figure, path)


def register(app: typer.Typer) -> None:
    app.command()(with_source(norms))
