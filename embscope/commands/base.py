"""The click command class every embscope command is built as (cli.py's app makes it the default), and the two
ways it reads the command line beyond typer's declarations, through click's own extension points:

- Numbers are strict (commands.numbers): each number option's type is replaced, when the command is built,
  by its strict twin made with the type's own constructor and range.
- Options whose value may be left out (`positions --pairs`, `--plot`): typer 0.27's click has no
  optional-value option (its parser dropped `flag_value` for options that take a value), so the command's
  `parse_args` fills in the value before click's parser reads the words (OptionWords).

Apart from commands.command (the commands that read a checkpoint), so that the app and its --help start without
the library behind the commands."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from typer.core import TyperCommand

from .numbers import strict

# Options whose value may be left out: `positions --pairs` means the default pairs, `norms --plot` a PNG named
# after the checkpoint in the working directory. typer cannot declare them, so each command's parse_args
# (EmbscopeCommand, below) reads the words: the option followed by nothing, or by another option, gets the value below.
PAIRS_DEFAULT = "default"
PLOT_AUTO = ""  # `--plot` alone; no file can be named ""
PLOT_SUFFIXES = (".png", ".svg", ".pdf")
OPTIONAL_VALUES = {"--pairs": PAIRS_DEFAULT, "--plot": PLOT_AUTO}


@dataclass(frozen=True, eq=False)  # compared nowhere: no __eq__ and __hash__ to build at import
class OptionWords:
    """A command's option names as `filled` reads them: every name, those that take a value, the
    optional-value ones with the value each gets, and whether the command takes arguments too."""

    names: frozenset[str]
    takes_value: frozenset[str]
    optional: dict[str, str]
    has_arguments: bool

    @classmethod
    def of(cls, command: Any) -> OptionWords:  # a click Command
        options = [param for param in command.params if param.param_type_name == "option"]
        takes_value = {opt for param in options if not (param.is_flag or param.count) for opt in param.opts}
        optional = {opt: value for opt, value in OPTIONAL_VALUES.items() if opt in takes_value}
        names = {opt for param in options for opt in (*param.opts, *param.secondary_opts)} | {"-h", "--help", "--"}
        # with arguments after it (compare's checkpoints), the word after `--plot` is its file only when it names one
        has_arguments = any(param.param_type_name == "argument" for param in command.params)
        return cls(frozenset(names), frozenset(takes_value), optional, has_arguments)

    def is_value(self, option: str, word: str) -> bool:
        if self.is_option(word):
            return False
        return not (option == "--plot" and self.has_arguments and not word.lower().endswith(PLOT_SUFFIXES))

    def is_option(self, word: str) -> bool:  # `-3:4` is a (bad) value, `--json` or `-cFILE` an option
        return word.split("=", 1)[0] in self.names or (len(word) > 2 and word[:2] in self.names)

    def times_given(self, args: list[str], names: tuple[str, ...]) -> int:
        """How often an option of `names` is given in `args` (-c FILE, -cFILE, --checkpoint=FILE), values of other
        options and arguments after `--` left out."""
        times, at = 0, 0
        while at < len(args) and args[at] != "--":
            word = args[at]
            at += 1
            name = word.split("=", 1)[0] if word.startswith("--") else word[:2]
            if name in names:
                times += 1
            if word in self.takes_value and at < len(args):  # its value, whatever it looks like
                at += 1
        return times

    def filled(self, args: list[str]) -> list[str]:
        """`args` with the value filled in after each optional-value option that was given none."""
        filled: list[str] = []
        at = 0
        while at < len(args):
            word = args[at]
            filled.append(word)
            at += 1
            if word == "--":  # everything after it is an argument
                filled.extend(args[at:])
                break
            if word in self.optional and (at == len(args) or not self.is_value(word, args[at])):
                filled.append(self.optional[word])
            elif word in self.takes_value and at < len(args):  # a value is never read as an option name
                filled.append(args[at])
                at += 1
        return filled


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
