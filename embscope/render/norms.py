"""`norms` results: statistics, flagged rows (the rule stated once, the most extreme first) and near-duplicates,
for people and for programs, and the plot."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..analysis.norms import DUPLICATE_COSINE, NormsReport, rule_text
from ..analysis.untrained import Untrained
from ..core.text import PLOT_TOKEN_SHOWN, TOKEN_SHOWN, visible
from . import console, header, jsonout, plots
from .console import number_text as number
from .jsonout import Document
from .names import Output, emb_title
from .norms_plot import LABELLED_ROWS, position_norms_figure, ranked_rows, token_norms_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ..embeddings import Embeddings

LISTED_ROWS = 20  # anomalies printed in the console, the most extreme first
JSON_LISTED = 1000  # anomalies listed in --json (with the total): rows are arrays, not objects
UNDERTRAINED_POINTER = ("under-trained tokens: `embscope undertrained` finds them (magikarp's indicator, "
                        "checked against the tokenizer)")


def untrained_document(untrained: Untrained | None) -> dict[str, object]:
    """The verdict on never-trained rows as --json gives it: rows, ranges of row ids, the rule and the evidence."""
    if untrained is None:
        return {"rows": 0, "ranges": [], "rule": "", "evidence": "", "kind": "none", "whole_table": False,
                "undecided": False}
    return {"rows": untrained.count, "ranges": [{"first": a, "last": b} for a, b in untrained.ranges()],
            "rule": untrained.rule, "evidence": untrained.evidence, "kind": untrained.kind,
            "whole_table": untrained.whole, "undecided": untrained.undecided}


def untrained_line(untrained: Untrained | None) -> str:
    """The console's one sentence on never-trained rows."""
    if untrained is None or not untrained.count:
        _, judged, why = (untrained.rule if untrained is not None else "").partition("; not judged: ")
        return f"never-trained rows: none found (not judged: {why})" if judged else "never-trained rows: none found"
    return untrained.evidence


def shown(report: NormsReport, index: int, limit: int = TOKEN_SHOWN) -> str:
    """A row's label for the console and the plot: a token's whitespace made visible, cut to `limit` characters."""
    return report.label(index) if report.role == "position" else visible(report.label(index), limit)


def document(report: NormsReport, plot: Output | None) -> Document:
    summary, duplicates, name = report.summary, report.duplicates, report.label
    doc = {
        "table": report.role, "name": report.name, "rows": summary.rows, "count": summary.count,
        "mean": summary.mean, "median": summary.median, "min": summary.min, "max": summary.max,
        "mad": summary.spread if summary.judged is not None else summary.mad, "threshold": summary.threshold,
        "rule": rule_text(summary.threshold, summary.mad, summary),
        "untrained": untrained_document(report.untrained),
        "anomalies": [{"index": a.index, "label": name(a.index), "norm": a.norm, "ratio_to_mean": a.ratio_to_mean,
                       "reason": a.reason, "z": a.z} for a in summary.anomalies[:JSON_LISTED]],
        "anomalies_found": len(summary.anomalies),
        "duplicates": [{"a": d.a, "b": d.b, "a_label": name(d.a), "b_label": name(d.b), "cosine": d.cosine,
                        "identical": d.identical} for d in duplicates.pairs],
        "duplicates_found": duplicates.total, "duplicates_complete": duplicates.complete,
        "duplicate_cosine": DUPLICATE_COSINE, "first_row": report.first_row, "notes": list(report.notes),
    }
    if plot is not None:
        doc |= plot.fields()
    return doc


def ratio(value: float) -> str:
    cleaned = jsonout.clean(value)
    return "-" if cleaned is None else f"{cleaned:.2f}x"


def more(listed: int) -> None:
    console.more(listed - LISTED_ROWS, json_lists=JSON_LISTED)


def show(emb: Embeddings, report: NormsReport, *, json: bool, plot: Output | None) -> None:
    if json:
        header.emit(document(report, plot), emb)
        return
    header.show(emb)
    out, summary = console.out, report.summary
    out.print(f"{report.role} table {console.safe(report.name)}: {summary.rows:,} rows x {report.dim}")
    out.print(f"count {summary.count:,}  mean {number(summary.mean)}  median {number(summary.median)}  "
              f"min {number(summary.min)}  max {number(summary.max)}")
    out.print(console.safe(untrained_line(report.untrained)))
    out.print(f"rule: {rule_text(summary.threshold, summary.mad, summary)}")
    if summary.anomalies:
        grid = console.table("row", "name", "norm", "x mean", "reason", title=f"anomalies ({len(summary.anomalies)})")
        for a in summary.anomalies[:LISTED_ROWS]:
            grid.add_row(str(a.index), console.safe(shown(report, a.index)), number(a.norm), ratio(a.ratio_to_mean),
                         a.reason)
        out.print(grid)
        more(len(summary.anomalies))
    else:
        out.print("anomalies: none")
    duplicates = report.duplicates
    if duplicates.total:
        grid = console.table("row a", "row b", "cosine", "identical",
                             title=f"near-duplicate rows (cosine > {DUPLICATE_COSINE}): {duplicates.total}")
        for d in duplicates.pairs:
            grid.add_row(f"{d.a} {console.safe(shown(report, d.a))}", f"{d.b} {console.safe(shown(report, d.b))}",
                         f"{d.cosine:.6f}", "yes" if d.identical else "no")
        out.print(grid)
    else:
        out.print(f"near-duplicate rows (cosine > {DUPLICATE_COSINE}): none")
    if report.role != "position":
        out.print(UNDERTRAINED_POINTER)
    if plot is not None:
        out.print(console.safe(plot.written()), soft_wrap=True)
    console.notes(report.notes)


def figure(emb: Embeddings, report: NormsReport, size: tuple[float, float] | None = None) -> Figure:
    """The norms with the flagged rows marked: by position for a position table, a histogram and the
    lowest and highest rows by name for a token table."""
    summary = report.summary
    title = f"{report.role} table {report.name}"
    checkpoint = emb_title(emb)
    sized = {"size": size} if size else {}
    if report.role == "position":
        flagged = [(a.index, a.norm, a.z) for a in summary.anomalies[:JSON_LISTED]]
        untrained = report.untrained
        ranges = untrained.ranges() if untrained is not None and untrained.contrasted else []  # else no contrast
        return position_norms_figure(summary.norms, summary.median, flagged, ranges,
                                     untrained.evidence if untrained is not None else "", summary.trend, checkpoint,
                                     title, report.first_row, **sized)
    tokenizer = report.tokenizer
    padding_from = tokenizer.vocab_size if tokenizer is not None and tokenizer.vocab_size < summary.rows else None
    named = ranked_rows(summary.norms) + [int(row) for row in summary.flagged[:LABELLED_ROWS]]
    names = {i: shown(report, i, PLOT_TOKEN_SHOWN) for i in named}
    judged = summary.judged is not None  # the band is that of the trained rows when some never trained
    untrained = report.untrained  # a whole table at init: no trained rows to colour them against
    never = untrained.rows if untrained is not None and untrained.contrasted else None
    return token_norms_figure(summary.norms, summary.center if judged else summary.median,
                              summary.spread if judged else summary.mad, summary.threshold, summary.flagged,
                              summary.robust_z, names, checkpoint, title, padding_from, untrained=never, **sized)


def draw(emb: Embeddings, report: NormsReport, target: Output, inputs: list[Path], size: tuple[float, float] | None,
         dpi: float) -> None:
    """The figure written to `target`."""
    plots.save(lambda: figure(emb, report, size), target, dpi, inputs=inputs)
