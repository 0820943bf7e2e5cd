"""`embscope undertrained` for people (rich tables) and for programs (one JSON document)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..analysis.norms import MAD_SCALE
from ..analysis.token_kinds import KIND_MEANINGS, KINDS, TokenKinds
from ..analysis.undertrained import NORM_Z, THRESHOLD_RULE, Candidate, UndertrainedReport, UndertrainedTables
from ..core.text import visible
from ..naming import token_name
from . import console, header
from .jsonout import Document
from .names import Output, emb_title
from .plots import save
from .undertrained_plot import undertrained_figure

if TYPE_CHECKING:
    from ..embeddings import Embeddings

LISTED_ROWS = 10  # candidates printed per table in the console, highest score first
JSON_LISTED = 10_000  # candidates and reference rows listed in --json, with the totals: the rest are counted
INDICATOR = "cosine to the mean reference row, first principal component removed (Land & Bartolo 2024)"
NORM_RULE = f"norm-high / norm-low: robust z of the row norm beyond +-{NORM_Z:g}, z = (norm - median) / " \
            f"({MAD_SCALE} x MAD); zero rows are norm-low"

Namer = Callable[[int], str]
Namers = Callable[[UndertrainedReport], Namer]  # how the rows of each report's table are named


def namers(emb: Embeddings) -> Namers:
    """Each table's rows named by the checkpoint's tokenizer where it is the table's (`#id` otherwise)."""
    return lambda report: functools.partial(token_name, emb.tokenizer_for_names(emb.table(report.table))[0])


def said_once(notes: Sequence[str], reports: Sequence[UndertrainedReport]) -> list[str]:
    """The answer's notes, then each table's, each said once: two tables without a tokenizer share theirs."""
    return list(dict.fromkeys([*notes, *(note for report in reports for note in report.notes)]))


def document(reports: Sequence[UndertrainedReport], kinds: TokenKinds | None, names: Namers, notes: Sequence[str],
             plot: Output | None) -> Document:
    """The JSON document: the first table's reference, threshold and candidates at the top level (the output
    table when the head is untied, else the token table), and every table analysed under "tables"."""
    tables = [table_document(report, names(report)) for report in reports]
    doc = {**tables[0], "tables": tables,
           "tokenizer": None if kinds is None else {"ids": kinds.vocab_size, "kinds": kinds.counts(),
                                                    "meanings": KIND_MEANINGS},
           "notes": list(notes)}
    if plot is not None:
        doc |= plot.fields()
    return doc


def table_document(report: UndertrainedReport, name: Namer) -> Document:
    reference, threshold = report.reference, report.threshold
    return {
        "table": report.table, "name": report.name, "rows": report.rows,
        "indicator": INDICATOR if report.has_indicator else None,
        "reference": {"source": reference.source, "rows": len(reference.rows),
                      "ids": reference.rows[:JSON_LISTED].tolist(),
                      "description": reference.description, "dropped": reference.dropped},
        "threshold": {"value": threshold.value, "why": threshold.why, "rule": THRESHOLD_RULE,
                      "gap": threshold.gap, "ratio": threshold.ratio, "needed": threshold.needed},
        "norm_rule": NORM_RULE,
        "unchanged_rows": None if report.unchanged is None else int(report.unchanged.sum()),
        "candidates": [{"id": c.id, "token": name(c.id), "score": c.score, "signals": list(c.signals),
                        "verified": c.verified, "kinds": list(c.kinds), "norm": c.norm, "norm_z": c.norm_z,
                        "conclusive": c.conclusive} for c in report.candidates[:JSON_LISTED]],
        "candidates_found": len(report.candidates), "verified": report.verified,
        "notes": list(report.notes),
    }


def show(emb: Embeddings, found: UndertrainedTables, plot: Output | None, json: bool) -> None:
    """The answer, its rows named by the checkpoint's tokenizer (`#id` without one, or where it is not the table's)."""
    if json:
        header.emit(document(found.reports, found.kinds, namers(emb), found.notes, plot), emb)
    else:
        render(emb, found.reports, found.kinds, namers(emb), found.notes, plot)


def draw(emb: Embeddings, found: UndertrainedTables, target: Output, inputs: list[Path]) -> None:
    """The indicator and the norms of each table, written to `target`."""
    save(lambda: undertrained_figure(found.reports, emb_title(emb)), target, inputs=inputs)


def render(emb: Embeddings, reports: Sequence[UndertrainedReport], kinds: TokenKinds | None, names: Namers,
           notes: Sequence[str], plot: Output | None) -> None:
    header.show(emb)
    out = console.out
    if kinds is not None:
        found = ", ".join(f"{kind} {count:,}" for kind, count in kinds.counts().items() if count)
        out.print(f"tokenizer: {kinds.vocab_size:,} ids; {found or 'every id round-trips'}", soft_wrap=True)
    out.print(f"indicator: {INDICATOR}", soft_wrap=True)
    out.print(f"threshold rule: {THRESHOLD_RULE}", soft_wrap=True)
    out.print(NORM_RULE, soft_wrap=True)
    for report in reports:
        render_table(report, names(report))
    if plot is not None:
        out.print(console.safe(plot.written()), soft_wrap=True)
    console.notes(said_once(notes, reports))


def render_table(report: UndertrainedReport, name: Namer) -> None:
    out = console.out
    out.print()
    out.print(f"{report.table} table {console.safe(report.name)}: {report.rows:,} rows", soft_wrap=True)
    reference = report.reference
    out.print(f"reference: {reference.source}, {console.safe(reference.description)}", soft_wrap=True)
    threshold = report.threshold
    value = "none" if threshold.value is None else f"{threshold.value:+.4f}"
    out.print(f"threshold: {value}, {console.safe(threshold.why)}", soft_wrap=True)
    if report.unchanged is not None:
        out.print(f"bitwise unchanged across the checkpoints: {int(report.unchanged.sum()):,} rows (conclusive)")
    candidates = report.candidates
    if not candidates:
        out.print("candidates: none")
        return
    title = f"candidates ({len(candidates):,}" + (f"; {report.verified:,} verified by the tokenizer)"
                                                  if report.verified is not None else ")")
    grid = console.table("id", "token", "score", "norm", "norm z", "signals", "tokenizer", title=title)
    for c in candidates[:LISTED_ROWS]:
        grid.add_row(str(c.id), console.safe(visible(name(c.id))), number(c.score, "+.4f"), number(c.norm, ".4g"),
                     number(c.norm_z, "+.1f"), signals_text(c), kinds_text(c))
    out.print(grid)
    console.more(len(candidates) - LISTED_ROWS, json_lists=JSON_LISTED)


def signals_text(candidate: Candidate) -> str:
    return ", ".join(candidate.signals) + (" (conclusive)" if candidate.conclusive else "")


def kinds_text(candidate: Candidate) -> str:
    if candidate.verified is None:
        return "-"
    return ", ".join(kind for kind in KINDS if kind in candidate.kinds) or "unverified"


def number(value: float, spec: str) -> str:
    return "-" if not math.isfinite(value) else format(value, spec)
