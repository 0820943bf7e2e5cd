"""`embscope info`: what the checkpoint is and which tables were found, by which rule."""

from __future__ import annotations

import typer

from .options import JsonFlag, Source, with_source


def info(source: Source, json: JsonFlag = False) -> None:
    """Format, the tables found (name, shape, dtype, rule), tokenizer, training step."""
    from ..analysis.info import info_report  # the library and rich only when answering, not for --help
    from ..render import info as render
    emb = source.open()
    render.show(emb, info_report(emb), json=json)


def register(app: typer.Typer) -> None:
    app.command()(with_source(info))
