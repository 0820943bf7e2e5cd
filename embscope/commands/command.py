"""The click command class every embscope command is built as (cli.py's app makes it the default): the two
ways the command line is read beyond typer's declarations, through click's own extension points.

- Numbers are strict (commands.numbers): each number option's type is replaced, when the command is built,
  by its strict twin made with the type's own constructor and range.
- Options whose value may be left out (`positions --pairs`, `--plot`): typer 0.27's click has no
  optional-value option (its parser dropped `flag_value` for options that take a value), so the command's
  `parse_args` fills in the value before click's parser reads the words (commands.options.OptionWords).
- The options that say where the tables come from (commands.options.Source: -c, --tokenizer, --token-key, ...)
  are declared once: SourceCommand adds them to a command's own, and hands the command one Source in its
  context (commands.options.source_of) instead of ten more arguments."""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperCommand

from .numbers import strict
from .options import SOURCE, OptionWords, Source


class EmbscopeCommand(TyperCommand):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.added()
        for param in self.params:
            param.type = strict(param.type)
        self.words = OptionWords.of(self)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, self.words.filled(args) if self.words.optional else args)

    def added(self) -> None:
        """Options the command class declares beside the command's own (none here)."""


class SourceCommand(EmbscopeCommand):
    """A command that reads one checkpoint: Source's options after its own, built by typer from Source's fields
    as it builds every command's, and given to it as one Source (commands.options.source_of)."""

    without: tuple[str, ...] = ()  # Source options the command declares its own way (compare's checkpoints)

    def added(self) -> None:
        params, self.convertors, _ = typer.main.get_params_convertors_ctx_param_name_from_function(Source)
        self.shared = [param for param in params if param.name not in self.without]
        self.params += self.shared

    def invoke(self, ctx: Any) -> Any:
        given = {param.name: ctx.params.pop(param.name) for param in self.shared if param.name}
        ctx.meta[SOURCE] = Source(**{name: self.convertors.get(name, lambda v: v)(value) for name, value in given.items()})
        return super().invoke(ctx)


class CheckpointsCommand(SourceCommand):
    """A command that takes its checkpoints its own way (compare's arguments, report's repeated -c)."""

    without = ("checkpoint",)
