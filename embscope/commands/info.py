"""`embscope info`: what the checkpoint is and which tables were found, by which rule."""

import typer

from ..analysis.info import info_report
from ..render import info as render
from .command import SourceCommand
from .options import JsonFlag, source_of


def info(ctx: typer.Context, json: JsonFlag = False) -> None:
    """Format, the tables found (name, shape, dtype, rule), tokenizer, training step."""
    source = source_of(ctx)
    emb = source.open()
    render.show(emb, info_report(emb), json=json)


def register(app: typer.Typer) -> None:
    app.command(cls=SourceCommand)(info)
