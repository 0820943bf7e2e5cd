"""`embscope norms`: per-row L2 norms, the rows flagged as anomalies (and why), near-duplicate rows,
and, for token tables, under-trained token candidates."""

from __future__ import annotations

from typing import Annotated

import typer

from .options import JsonFlag, PlotOption, Source, Table, check_plot, finite, plot_path, with_source

DEFAULT_THRESHOLD = 6.0  # shown in --help; the library's own default (analysis.norms) is checked equal by a test


def norms(
    source: Source,
    table: Annotated[Table | None, typer.Option(
        "--table", help="Which table: position (the default when there is one), token, or output (an untied "
                        "head).", show_default=False)] = None,
    threshold: Annotated[float, typer.Option(
        "--threshold", min=0.0, callback=finite, help="Robust z above which a row's norm is an anomaly: "
                                                      "|norm - median| / (1.4826 x MAD).")] = DEFAULT_THRESHOLD,
    plot: PlotOption = None,
    json: JsonFlag = False,
) -> None:
    """Per-row L2 norms: count, mean, median, min, max, the rows flagged as anomalies with the rule that
    flagged each, near-duplicate rows, and under-trained token candidates. --plot draws them."""
    check_plot(plot)
    from ..analysis.norms import norms_report
    from ..render import norms as render
    from ..render.files import input_files
    emb = source.open()
    report = norms_report(emb, table.value if table is not None else None, threshold)
    target = plot_path(plot, emb, report.role, "norms")
    if target is not None:
        render.draw(emb, report, target, input_files(emb))
    render.show(emb, report, json=json, plot=target)


def register(app: typer.Typer) -> None:
    app.command()(with_source(norms))
