"""`embscope params`: parameters in the lookup tables and their share of the model."""

from __future__ import annotations

import typer

from ..analysis.params import params_report
from ..render import params as render
from .options import JsonFlag, Source, with_source


def params(source: Source, json: JsonFlag = False) -> None:
    """Parameters in the token table, position table and output projection, and their shares."""
    emb = source.open()
    render.show(emb, params_report(emb), json=json)


def register(app: typer.Typer) -> None:
    app.command()(with_source(params))
