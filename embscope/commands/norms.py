"""`embscope norms`: per-row L2 norms, the rows flagged as anomalies (and why) and near-duplicate rows;
for token tables it points to `embscope undertrained`."""

from __future__ import annotations

import math
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from ..analysis.norms import DEFAULT_THRESHOLD, DUPLICATE_COSINE, NormSummary, find_duplicates, row_norms, summarize
from ..checkpoint import Table
from ..errors import EmbscopeError
from ..render import console, jsonout
from ..text import visible
from ..tokenizers.base import Tokenizer
from .options import JsonFlag, Source, with_source
from .positions import check_plot_option

LISTED_ROWS = 20  # anomalies printed in the console, the most extreme first
JSON_LISTED = 1000  # anomalies listed in --json (with the total): rows are arrays, not objects
UNDERTRAINED_POINTER = ("under-trained tokens: `embscope undertrained` finds them (magikarp's indicator, "
                        "checked against the tokenizer)")


class TableChoice(str, Enum):
    position = "position"
    token = "token"
    output = "output"


def token_name(tokenizer: Tokenizer | None, index: int) -> str:
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
        return (f"a row is flagged when its robust z = (norm - median) / (1.4826 x MAD) is beyond +-{threshold:g} "
                f"(MAD {mad:.4g}); zero, NaN and Inf rows are always flagged")
    return ("every finite norm equals the median (MAD is 0): a row is flagged when it differs from the median by "
            "more than a relative 1e-6; zero, NaN and Inf rows are always flagged")


def norms(
    source: Source,
    table: Annotated[TableChoice | None, typer.Option(
        "--table", help="Which table: position (the default when there is one), token, or output (an untied "
                        "head).", show_default=False)] = None,
    threshold: Annotated[float, typer.Option(
        "--threshold", min=0.0, help="Robust z above which a row's norm is an anomaly: "
                                     "|norm - median| / (1.4826 x MAD).")] = DEFAULT_THRESHOLD,
    plot: Annotated[Path | None, typer.Option(
        "--plot", metavar="FILE", help="Draw the norms, flagged rows marked, to FILE (.png, .svg or .pdf).")] = None,
    dpi: Annotated[float, typer.Option("--dpi", min=10, max=1200, help="Dots per inch of a --plot PNG.")] = 100,
    size: Annotated[str, typer.Option("--size", metavar="WxH", help="Size of the --plot figure in inches, e.g. 13x5.5; "
                                                                     "default 13x5.5 (token), 11x5 (position).",
                                      show_default=False)] = "",
    json: JsonFlag = False,
) -> None:
    """Per-row L2 norms: count, mean, median, min, max, the rows flagged as anomalies (the rule stated once,
    the most extreme first) and near-duplicate rows. Under-trained tokens: see `embscope undertrained`."""
    check_plot_option(plot)
    figure_size = size_option(size)
    emb = source.open()
    role = table.value if table is not None else ("position" if emb.position is not None else "token")
    chosen: Table = emb.table(role)
    notes = list(chosen.notes)
    norms_found = row_norms(chosen.array)
    summary = summarize(norms_found, threshold)
    duplicates = find_duplicates(chosen.array, norms_found)
    if duplicates.note:
        notes.append(duplicates.note)
    tokenizer = None
    if role != "position":
        tokenizer, why_none = emb.tokenizer_for_names()
        if tokenizer is None:
            notes.append(f"{why_none}; padding rows past the vocabulary cannot be told apart")

    def name(index: int) -> str:
        if role == "position":
            position = index - chosen.first_row
            return f"position {position}" if position >= 0 else f"reserved row {index}"
        return token_name(tokenizer, index)

    def shown(index: int) -> str:  # for the console and the plot: whitespace in a token made visible
        return name(index) if role == "position" else visible(name(index))

    if plot is not None:
        padding_from = tokenizer.vocab_size if tokenizer is not None and tokenizer.vocab_size < summary.rows else None
        draw(plot, emb.checkpoint.path.name, chosen, summary, shown, padding_from, figure_size, dpi)
    if json:
        doc = {
            "table": role, "name": chosen.name, "rows": summary.rows, "count": summary.count,
            "mean": summary.mean, "median": summary.median, "min": summary.min, "max": summary.max,
            "mad": summary.mad, "threshold": threshold, "rule": rule_text(threshold, summary.mad),
            "anomalies": [{"index": a.index, "label": name(a.index), "norm": a.norm,
                           "ratio_to_mean": a.ratio_to_mean, "reason": a.reason, "z": a.z}
                          for a in summary.anomalies[:JSON_LISTED]],
            "anomalies_found": len(summary.anomalies),
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
            grid.add_row(str(a.index), console.safe(shown(a.index)), number(a.norm), ratio(a.ratio_to_mean),
                         a.reason)
        out.print(grid)
        more(len(summary.anomalies))
    else:
        out.print("anomalies: none")
    if duplicates.total:
        grid = console.table("row a", "row b", "cosine", "identical",
                             title=f"near-duplicate rows (cosine > {DUPLICATE_COSINE}): {duplicates.total}")
        for d in duplicates.pairs:
            grid.add_row(f"{d.a} {console.safe(shown(d.a))}", f"{d.b} {console.safe(shown(d.b))}",
                         f"{d.cosine:.6f}", "yes" if d.identical else "no")
        out.print(grid)
    else:
        out.print(f"near-duplicate rows (cosine > {DUPLICATE_COSINE}): none")
    if role != "position":
        out.print(UNDERTRAINED_POINTER)
    if plot is not None:
        out.print(f"plot written to {console.safe(plot)}")
    console.notes(notes)


def number(value: float) -> str:
    cleaned = jsonout.clean(value)
    return "null" if cleaned is None else f"{cleaned:.4g}"


def ratio(value: float) -> str:
    cleaned = jsonout.clean(value)
    return "-" if cleaned is None else f"{cleaned:.2f}x"


def more(listed: int) -> None:
    if listed > LISTED_ROWS:
        console.out.print(f"... and {listed - LISTED_ROWS} more (--json lists the first {JSON_LISTED:,})")


def size_option(text: str) -> tuple[float, float] | None:
    """--size WxH in inches; "" for the figure's own size."""
    if not text:
        return None
    width, _, height = text.lower().partition("x")
    try:
        found = (float(width), float(height))
    except ValueError:
        found = (0.0, 0.0)
    if not all(1 <= side <= 100 for side in found):
        raise typer.BadParameter(f"expected WxH in inches, each 1 to 100 (e.g. 13x5.5), found {text!r}",
                                 param_hint="'--size'")
    return found


def draw(path: Path, checkpoint: str, table: Table, summary: NormSummary, name: Callable[[int], str],
         padding_from: int | None, size: tuple[float, float] | None, dpi: float) -> None:
    from ..render import plots
    title = f"{table.role} table {table.name}"
    if table.role == "position":
        flagged = [(a.index, a.norm, a.ratio_to_mean) for a in summary.anomalies[:JSON_LISTED]]
        figure = plots.position_norms_figure(summary.norms, summary.mean, summary.median, flagged, checkpoint, title,
                                             table.first_row, **({"size": size} if size else {}))
    else:
        from ..render.norms_plot import LABELLED_ROWS, ranked_rows, token_norms_figure
        named = ranked_rows(summary.norms) + [int(row) for row in summary.flagged[:LABELLED_ROWS]]
        figure = token_norms_figure(summary.norms, summary.median, summary.mad, summary.threshold,
                                    summary.flagged, summary.robust_z, {i: name(i) for i in named},
                                    checkpoint, title, padding_from, **({"size": size} if size else {}))
    plots.save(figure, path, dpi)


def register(app: typer.Typer) -> None:
    app.command()(with_source(norms))
