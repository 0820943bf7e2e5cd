"""`norms` results: statistics, flagged rows (and the rule that flagged them), near-duplicates and under-trained
candidates, for people and for programs, and the plot."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..analysis.norms import DUPLICATE_COSINE, UNDERTRAINED_PERCENTILE, NormsReport
from . import console, header, jsonout

LISTED_ROWS = 20  # anomalies and candidates printed in the console; --json lists all


def rule_text(threshold: float, mad: float) -> str:
    if math.isnan(mad):
        return "no row has a finite norm: zero, NaN and Inf rows are flagged"
    if mad > 0:
        return (f"a row is flagged when |norm - median| / (1.4826 x MAD) > {threshold:g} (MAD {mad:.4g}); "
                "zero, NaN and Inf rows are always flagged")
    return ("every finite norm equals the median (MAD is 0): a row is flagged when it differs from the median by "
            "more than a relative 1e-6; zero, NaN and Inf rows are always flagged")


def document(report: NormsReport, plot: Path | None) -> dict:
    summary, duplicates, name = report.summary, report.duplicates, report.label
    doc = {
        "table": report.role, "name": report.name, "rows": summary.rows, "count": summary.count,
        "mean": summary.mean, "median": summary.median, "min": summary.min, "max": summary.max,
        "mad": summary.mad, "threshold": summary.threshold, "rule": rule_text(summary.threshold, summary.mad),
        "anomalies": [{"index": a.index, "label": name(a.index), "norm": a.norm,
                       "ratio_to_mean": a.ratio_to_mean, "reason": a.reason} for a in summary.anomalies],
        "undertrained": [{"table": c.table, "index": c.index, "token": name(c.index), "norm": c.norm,
                          "reason": c.reason} for c in report.candidates],
        "duplicates": [{"a": d.a, "b": d.b, "a_label": name(d.a), "b_label": name(d.b), "cosine": d.cosine,
                        "identical": d.identical} for d in duplicates.pairs],
        "duplicates_found": duplicates.total, "duplicates_complete": duplicates.complete,
        "duplicate_cosine": DUPLICATE_COSINE, "first_row": report.first_row, "notes": list(report.notes),
    }
    if plot is not None:
        doc["plot"] = str(plot)
    return doc


def number(value: float) -> str:
    cleaned = jsonout.clean(value)
    return "null" if cleaned is None else f"{cleaned:.4g}"


def ratio(value: float) -> str:
    cleaned = jsonout.clean(value)
    return "-" if cleaned is None else f"{cleaned:.2f}x"


def more(listed: int) -> None:
    if listed > LISTED_ROWS:
        console.out.print(f"... and {listed - LISTED_ROWS} more (--json lists all)")


def show(emb: Any, report: NormsReport, *, json: bool, plot: Path | None) -> None:
    if json:
        header.emit(document(report, plot), emb)
        return
    header.show(emb)
    out, summary, name = console.out, report.summary, report.label
    out.print(f"{report.role} table {console.safe(report.name)}: {summary.rows:,} rows x {report.dim}")
    out.print(f"count {summary.count:,}  mean {number(summary.mean)}  median {number(summary.median)}  "
              f"min {number(summary.min)}  max {number(summary.max)}")
    out.print(f"rule: {rule_text(summary.threshold, summary.mad)}")
    if summary.anomalies:
        grid = console.table("row", "name", "norm", "x mean", "reason", title=f"anomalies ({len(summary.anomalies)})")
        for a in summary.anomalies[:LISTED_ROWS]:
            grid.add_row(str(a.index), console.safe(name(a.index)), number(a.norm), ratio(a.ratio_to_mean),
                         console.safe(a.reason))
        out.print(grid)
        more(len(summary.anomalies))
    else:
        out.print("anomalies: none")
    duplicates = report.duplicates
    if duplicates.total:
        grid = console.table("row a", "row b", "cosine", "identical",
                             title=f"near-duplicate rows (cosine > {DUPLICATE_COSINE}): {duplicates.total}")
        for d in duplicates.pairs:
            grid.add_row(f"{d.a} {console.safe(name(d.a))}", f"{d.b} {console.safe(name(d.b))}",
                         f"{d.cosine:.6f}", "yes" if d.identical else "no")
        out.print(grid)
    else:
        out.print(f"near-duplicate rows (cosine > {DUPLICATE_COSINE}): none")
    if report.role != "position":
        show_candidates(report)
    if plot is not None:
        out.print(f"plot written to {console.safe(plot)}", soft_wrap=True)
    console.notes(report.notes)


def show_candidates(report: NormsReport) -> None:
    candidates = report.candidates
    if not candidates:
        console.out.print("under-trained candidates: none")
        return
    grid = console.table("table", "row", "token", "norm", "why",
                         title=f"under-trained token candidates ({len(candidates)}; lowest "
                               f"{UNDERTRAINED_PERCENTILE:g}% of norms and padding rows; not anomalies)")
    for c in candidates[:LISTED_ROWS]:
        grid.add_row(c.table, str(c.index), console.safe(report.label(c.index)), number(c.norm),
                     console.safe(c.reason))
    console.out.print(grid)
    more(len(candidates))


def draw(emb: Any, report: NormsReport, path: Path, inputs: list[Path]) -> None:
    """The norms with the flagged rows marked: by position for a position table, a histogram and the
    lowest and highest rows by name for a token table."""
    from . import plots
    summary = report.summary
    flagged = [(a.index, a.norm, a.ratio_to_mean) for a in summary.anomalies]
    title = f"{report.role} table {report.name}"
    checkpoint = emb.checkpoint.path.name
    if report.role == "position":
        figure = plots.position_norms_figure(summary.norms, summary.mean, summary.median, flagged, checkpoint, title,
                                             report.first_row)
    else:
        names = {i: report.label(i) for i in plots.ranked_rows(summary.norms) + [a.index for a in summary.anomalies]}
        figure = plots.token_norms_figure(summary.norms, summary.mean, flagged, names, checkpoint, title)
    plots.save(figure, path, inputs)
