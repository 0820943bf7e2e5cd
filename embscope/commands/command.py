"""The click command class every embscope command is built as (cli.py's app makes it the default): the two
ways the command line is read beyond typer's declarations, through click's own extension points.

- Numbers are strict (commands.numbers): each number option's type is replaced, when the command is built,
  by its strict twin made with the type's own constructor and range.
- Options whose value may be left out (`positions --pairs`, `--plot`): typer 0.27's click has no
  optional-value option (its parser dropped `flag_value` for options that take a value), so the command's
  `parse_args` fills in the value before click's parser reads the words (commands.options.OptionWords)."""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand

from .numbers import strict
from .options import OptionWords


class EmbscopeCommand(TyperCommand):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            param.type = strict(param.type)
        self.words = OptionWords.of(self)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, self.words.filled(args) if self.words.optional else args)
