"""The command line: parse, call the library, render. Errors become one line and exit code 1, here only."""

from __future__ import annotations

import importlib
import pkgutil

import typer
from typer.core import TyperGroup

from . import commands
from .errors import EmbscopeError
from .render import console


class EmbscopeGroup(TyperGroup):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except EmbscopeError as err:
            console.err.print(f"Error: {console.safe(err)}", soft_wrap=True)
            raise typer.Exit(1) from None


app = typer.Typer(
    cls=EmbscopeGroup,
    name="embscope",
    help="Look inside the token and position embedding tables of a language-model checkpoint.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for module in pkgutil.iter_modules(commands.__path__):
    if module.name != "options":
        importlib.import_module(f"{commands.__name__}.{module.name}").register(app)


def main() -> None:
    app()
