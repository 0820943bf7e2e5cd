"""The command classes of the commands that read checkpoints, built on commands.base.EmbscopeCommand: the
options that say where the tables come from (commands.options.Source: -c, --tokenizer, --token-key, ...) are
declared once: SourceCommand adds them to a command's own, and hands the command one Source in its context
(commands.options.source_of) instead of ten more arguments."""

from __future__ import annotations

from typing import Any

import typer

from .base import EmbscopeCommand
from .options import SOURCE, Source, refuse

CHECKPOINT_OPTIONS = ("-c", "--checkpoint")


class SourceCommand(EmbscopeCommand):
    """A command that reads one checkpoint: Source's options after its own, built by typer from Source's fields
    as it builds every command's, and given to it as one Source (commands.options.source_of)."""

    without: tuple[str, ...] = ()  # Source options the command declares its own way (compare's checkpoints)

    def added(self) -> None:
        params, self.convertors, _ = typer.main.get_params_convertors_ctx_param_name_from_function(Source)
        self.shared = [param for param in params if param.name not in self.without]
        self.params += self.shared

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # click keeps the last of a repeated option: `info -c a -c b` answered about b alone, without a word
        if "checkpoint" not in self.without and (times := self.words.times_given(args, CHECKPOINT_OPTIONS)) > 1:
            raise refuse(f"-c given {times} times: {ctx.info_name} answers about one checkpoint (compare and report "
                         f"take several)")
        return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        given = {param.name: ctx.params.pop(param.name) for param in self.shared if param.name}
        ctx.meta[SOURCE] = Source(**{name: self.convertors.get(name, lambda v: v)(value) for name, value in given.items()})
        return super().invoke(ctx)


class CheckpointsCommand(SourceCommand):
    """A command that takes its checkpoints its own way (compare's arguments, report's repeated -c)."""

    without = ("checkpoint",)
