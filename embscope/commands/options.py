"""The options commands share (DESIGN.md, command-line contract), each declared once, and the checks of their
values (numbers that must be finite, words, a library check made a usage error). --plot is declared in
commands.plot_option, --device and --precision in commands.device_options; options whose value may be left out are
read by commands.base."""

# No `from __future__ import annotations` here or in a command module: typer reads the annotations of Source and
# of the command at every run, and evaluated once at import they need no eval() of their text then (5-8 ms a run).

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from ..core.errors import EmbscopeError, message_of
from ..core.role import Role  # the table a command reads: one list of roles
from ..core.text import quote
from ..embeddings import Embeddings
from ..embeddings import open as open_embeddings
from ..render import console
from ..render.flags import as_flags
from ..storage.base import SHAPES_GIVEN

T = TypeVar("T")



def tensor_name(value: str | None) -> str | None:
    """--token-key and the like: an empty name names no tensor, so it is a usage error, not the default."""
    if value == "":
        raise typer.BadParameter("expected a tensor name, found an empty string")
    return value


def checkpoint_path(value: str | Path) -> Path:
    """-c: a path or a model id. Checked as text: typer would make '' the current directory."""
    if value == "":
        raise typer.BadParameter("expected a checkpoint path or model id, found an empty string")
    return Path(value)


def tokenizer_path(value: str | Path) -> Path:
    """--tokenizer: a file. Checked as text, as -c is."""
    if value == "":
        raise typer.BadParameter("expected a tokenizer file, found an empty string")
    return Path(value)


def input_file(value: str | Path) -> Path:
    """--file, --queries, --pairs-file: a file to read. Checked as text, as -c is: '' was read as the current
    directory, and refused as the directory '.', which no one typed."""
    if value == "":
        raise typer.BadParameter("expected a file to read, found an empty string")
    return Path(value)


def output_path(value: str | Path) -> Path:
    """--out: where to write. Checked as text, as -c is: '' was the current directory, which export and
    report --format md filled with their files."""
    if value == "":
        raise typer.BadParameter("expected a file or folder to write, found an empty string")
    return Path(value)


CHECKPOINT_VARIABLE = "EMBSCOPE_CHECKPOINT"  # -c's default, in every command


@dataclass(frozen=True, eq=False)  # compared nowhere: no __eq__ and __hash__ to build at import
class Source:
    """Where the tables come from, as the user gave it."""

    checkpoint: Annotated[Path | None, typer.Option(
        "--checkpoint", "-c", envvar=CHECKPOINT_VARIABLE, show_envvar=True, parser=checkpoint_path, metavar="PATH",
        help="Checkpoint file or directory, or a model id in the local Hugging Face cache (default: the bundled "
             "sample model).")] = None
    tokenizer: Annotated[Path | None, typer.Option(
        parser=tokenizer_path, metavar="PATH",
        help="Tokenizer file (default: found beside or inside the checkpoint).")] = None
    token_key: Annotated[str | None, typer.Option(
        callback=tensor_name, help="Tensor to use as the token table.")] = None
    pos_key: Annotated[str | None, typer.Option(
        callback=tensor_name, help="Tensor to use as the position table.")] = None
    output_key: Annotated[str | None, typer.Option(
        callback=tensor_name, help="Tensor to use as the output projection.")] = None
    trust_pickle: Annotated[bool, typer.Option(
        "--trust-pickle", help="Let a pickle name any global. It can then run code: only for files you made.")] = False
    vocab_size: Annotated[int | None, typer.Option(
        min=1, help="Token table rows, for formats that do not record it.")] = None
    d_model: Annotated[int | None, typer.Option(min=1, help="Table width, for formats that do not record it.")] = None
    context: Annotated[int | None, typer.Option(
        min=1, help="Position table rows, for formats that do not record it.")] = None
    first_position: Annotated[int | None, typer.Option(
        "--first-position", min=0, metavar="N",
        help="The position table row that holds position 0 (default: the model family's rule, e.g. RoBERTa's "
             "padding_idx + 1, OPT's 2; else 0).")] = None

    def open(self, warn: bool = True) -> Embeddings:
        """The checkpoint opened with these options; `warn` False: what they mean for it was said already."""
        if self.trust_pickle and warn:
            console.err.print("warning: --trust-pickle lets the checkpoint run code while it loads")
        emb = open_embeddings(self.checkpoint, tokenizer=self.tokenizer, token_key=self.token_key,
                              pos_key=self.pos_key, output_key=self.output_key, trust_pickle=self.trust_pickle,
                              vocab_size=self.vocab_size, d_model=self.d_model, context=self.context,
                              first_position=self.first_position)
        sizes = [f"--{name}" for name, value in (("vocab-size", self.vocab_size), ("d-model", self.d_model),
                                                  ("context", self.context)) if value is not None]
        if warn and sizes and emb.checkpoint.format != SHAPES_GIVEN:  # said, not dropped: compare may mix in a dump
            where = console.safe(quote(emb.checkpoint.path))
            console.err.print(f"warning: {' and '.join(sizes)} not used: {where} records its shapes (they are for "
                              f"{SHAPES_GIVEN} dumps)", soft_wrap=True)
        return emb


def opener(source: Source) -> Callable[[Path | None], Embeddings]:
    """Opens each of several checkpoints with `source`'s options (compare's and report's), warning of them once a
    file: a run's files are opened again (ordered, then compared), and by the workers of a scheduler, which get
    the opener once this process has opened each."""
    said: set[Path | None] = set()

    def open_path(path: Path | None) -> Embeddings:
        emb = replace(source, checkpoint=path).open(warn=path not in said)
        said.add(path)
        return emb
    return open_path


SOURCE = "embscope.source"  # where a command's Source waits in its context (commands.command.SourceCommand)


def source_of(ctx: typer.Context) -> Source:
    """The Source this run's options gave the command: its command class took them off the command's own."""
    source: Source = ctx.meta[SOURCE]
    return source


def finite(value: float | None) -> float | None:
    """A number option that NaN or Inf would make meaningless."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"expected a finite number, found {value}")
    return value


UsageError: type[Exception] = typer.BadParameter.__mro__[1]  # click's UsageError, which typer does not export


def refuse(message: str, option: str | None = None) -> Exception:
    """A usage error (exit 2), naming the option it is about when there is one."""
    return typer.BadParameter(message, param_hint=f"'{option}'") if option else UsageError(message)


def check_lookup_flags(why_not: str | None, *, exact: bool, allow_unk: bool = False, merge: bool = True) -> None:
    """--exact, --allow-unk and --no-merge say how words are looked up: where there is no word to look up
    (`why_not`, such as "not go with --ids"), giving one is a usage error, not a flag silently dropped."""
    given = [name for name, on in (("--exact", exact), ("--allow-unk", allow_unk), ("--no-merge", not merge)) if on]
    if why_not is not None and given:
        raise refuse(f"{' and '.join(given)} {'say' if len(given) > 1 else 'says'} how words are looked up: "
                     f"{why_not.format('they do' if len(given) > 1 else 'it does')}")


def parse_words(words: str | list[str] | None) -> list[str] | None:
    """--words king,queen (comma-separated, or the option repeated): each word once, in order; None when the
    option was not given. Given with no word in it, it is a usage error."""
    if words is None:
        return None
    entries = [words] if isinstance(words, str) else words
    found = list(dict.fromkeys(w.strip() for entry in entries for w in entry.split(",") if w.strip()))
    if not found:
        raise refuse("expected words separated by commas, found none", "--words")
    return found


def as_usage_error(check: Callable[[], T], option: str) -> T:
    """A library check of an option's value (a file extension, a pair) whose complaint is a usage error."""
    try:
        return check()
    except EmbscopeError as err:
        raise refuse(as_flags(message_of(err)), option) from None


# "How many", one name per idea in every command (tests/test_commands.py walks them against this table):
HOW_MANY = {
    "-k": "neighbours",  # the nearest rows of each query: neighbors, analogy's answers, compare's neighbour sets
    "--top": "listed",  # the rows an answer lists; in neighbors and analogy those are the neighbours, so --top is -k
    "--sample": "drawn",  # rows drawn at random (with a fixed seed)
    "--top-norms": "norms",  # export: the rows with the largest norms
    "--remove-top": "removed",  # similarity and neighbors: the principal directions taken out (all-but-the-top)
}
ListedNeighbours = Annotated[int, typer.Option(
    "-k", "--top", min=1, help="How many neighbours (the nearest rows) to list; -k and --top are one option.")]
ListedAnswers = Annotated[int, typer.Option(
    "-k", "--top", min=1, help="How many answers (the neighbours of A - B + C) to list; -k and --top are one option "
                               "(--file scores the first).")]

JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document and nothing else.")]
IdsFlag = Annotated[bool, typer.Option("--ids", help="Take raw token ids instead of words.")]
ExactFlag = Annotated[bool, typer.Option("--exact", help="Encode each word exactly as typed, without a leading space.")]
AllowUnkFlag = Annotated[bool, typer.Option(
    "--allow-unk", help="Let a word the tokenizer maps to its unknown token through (with a note) instead of refusing it.")]
StrictFlag = Annotated[bool, typer.Option(
    "--strict", help="Stop at the first line of the input file that cannot be used, instead of skipping it with a note.")]
# the tables whose rows are tokens: --help offers only the values the command takes (positions: `embscope positions`)
RowTable = Enum("RowTable", {role.value: role.value for role in (Role.token, Role.output)}, type=str)  # type: ignore[misc]
TOKEN_TABLE = RowTable("token")
TableOption = Annotated[RowTable, typer.Option(
    "--table", help="The token table, or the untied output projection (cosines between positions: embscope "
                    "positions).", show_default=True)]
RemoveTopOption = Annotated[int | None, typer.Option(
    "--remove-top", metavar="D", min=1, show_default=False,
    help="How many principal directions to remove: ask in the all-but-the-top space, the mean row and the top D "
         "principal directions removed from every row first (Mu & Viswanath 2018; one pass over the table).")]
