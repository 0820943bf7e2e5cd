"""`embscope info`: what the checkpoint is and which tables were found, by which rule."""

from __future__ import annotations

import typer

from ..analysis.info import info_report
from ..render import info as render
from .options import JsonFlag, Source, with_source


def info(source: Source, json: JsonFlag = False) -> None:
    """Format, the tables found (name, shape, dtype, rule), tokenizer, training step."""
    emb = source.open()
    render.show(emb, info_report(emb), json=json)


def register(app: typer.Typer) -> None:
    app.command()(with_source(info))
