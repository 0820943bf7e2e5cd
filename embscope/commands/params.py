"""`embscope params`: parameters in the lookup tables and their share of the model."""

import typer

from ..analysis.params import params_report
from ..render import params as render
from .command import SourceCommand
from .options import JsonFlag, source_of


def params(ctx: typer.Context, json: JsonFlag = False) -> None:
    """Parameters in the token table, position table and output projection, and their shares."""
    source = source_of(ctx)
    emb = source.open()
    render.show(emb, params_report(emb), json=json)


def register(app: typer.Typer) -> None:
    app.command(cls=SourceCommand)(params)
