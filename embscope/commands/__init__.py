"""One module per command, each with `register(app)`. REGISTER names them, in the order --help lists them, with
the module each lives in: cli.py imports the modules of the commands a run builds, and no other."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Protocol

import typer

Register = Callable[[typer.Typer], None]


class CommandModule(Protocol):
    """What every module in REGISTER defines."""

    register: Register


REGISTER: dict[str, str] = {
    "info": "embscope.commands.info", "similarity": "embscope.commands.similarity",
    "neighbors": "embscope.commands.neighbors", "positions": "embscope.commands.positions",
    "norms": "embscope.commands.norms", "params": "embscope.commands.params",
    "undertrained": "embscope.commands.undertrained", "compare": "embscope.commands.compare",
    "geometry": "embscope.commands.geometry", "analogy": "embscope.commands.analogy",
    "map": "embscope.commands.map", "export": "embscope.commands.export", "report": "embscope.commands.report",
}


def command_module(name: str) -> CommandModule:
    """The module of the command `name`, imported now (the first time a run needs it)."""
    module: CommandModule = importlib.import_module(REGISTER[name])
    return module


def register(app: typer.Typer, name: str) -> None:
    """Add the command `name` to the app."""
    command_module(name).register(app)
