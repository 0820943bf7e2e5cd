"""`embscope params`: parameters in the lookup tables and their share of the model."""

from __future__ import annotations

import typer

from .options import JsonFlag, Source, with_source


def params(source: Source, json: JsonFlag = False) -> None:
    """Parameters in the token table, position table and output projection, and their shares."""
    from ..analysis.params import params_report  # the library and rich only when answering, not for --help
    from ..render import console, header
    emb = source.open()
    report = params_report(emb.checkpoint, emb.tables)
    shares = report.shares
    if json:
        header.emit({
            "total": report.total, "token": report.token, "position": report.position,
            "output": report.output, "tied": report.tied, "embeddings": report.embeddings,
            "total_without_position": report.total_without_position, "total_source": report.source,
            "shares": shares,
        }, emb)
        return
    header.show(emb)
    grid = console.table("table", "parameters", "share of total")
    grid.add_row(f"token ({console.safe(emb.token.name)})", console.count_text(report.token), console.percent(shares["token"]))
    if emb.position is not None:
        grid.add_row(f"position ({console.safe(emb.position.name)})", console.count_text(report.position),
                     console.percent(shares["position"]))
    else:
        grid.add_row("position", "none (no learned table)", "-")
    if report.tied:
        grid.add_row("output projection", "tied to the token table", "-")
    else:
        grid.add_row(f"output ({console.safe(emb.output.name)})", console.count_text(report.output),
                     console.percent(shares["output"]))
    grid.add_row("token + position", console.count_text(report.embeddings), console.percent(shares["embeddings"]))
    grid.add_row("whole checkpoint", console.count_text(report.total), "100.00%")
    console.out.print(grid)
    console.out.print(f"total counts {report.source} ({report.total / 1e6:.2f}M).")
    if report.position:
        console.out.print(f"nanoGPT's convention leaves the position table out: {report.total_without_position:,} "
                          f"({report.total_without_position / 1e6:.2f}M).")


def register(app: typer.Typer) -> None:
    app.command()(with_source(params))
