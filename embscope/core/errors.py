"""The few errors embscope raises, and how a message names an option.

A message is the one line the user reads: what was expected, and what was found. An error also carries what it
is about as fields (`option`, `path`, `role`; a missing package's `package` and `extra`) for code that handles
it. A message that names an option is `Message`: a str in the library's words (`merge=False`, `token_key=NAME`)
that keeps its parts, so that whoever shows it spells each option its own way: the command line as its flags
(`--no-merge`, `--token-key NAME`), with `spelled`. render/flags.py owns that spelling, the library never
names a flag, and nothing here changes with who asks. docs/python.md (Errors) is the table of which error means what."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from .role import Role


@dataclass(frozen=True, eq=False)  # compared nowhere: no __eq__ and __hash__ to build at import
class Option:
    """An option as a message names it: a keyword of the library's (`merge`), with the value the message is
    about (False, "umap") or a placeholder for one ("NAME"). It goes into a message as a part of `Message`; str()
    is the library's words."""

    name: str  # the library's keyword; the command line's flag is render/flags.py's to spell
    value: object = None  # None: the option itself; True and False: a switch turned on or off
    metavar: str | None = None  # a placeholder for a value, written as it is ("NAME", "FILE")
    text: str | None = None  # the value as the command line writes it, where that is not str(value) ("1,000")
    noun: str | None = None  # the library's words where no keyword of its fits the sentence ("the pairs file")
    lead: str = ""  # words the command line says before its flag, which the noun says its own way ("repeat ")

    def __str__(self) -> str:
        return library_words(self)


Spelling = Callable[[Option], str]  # how whoever shows a message names an option


def library_words(option: Option) -> str:
    """How a Python caller names the option: a keyword argument (`merge=False`, `method='umap'`, "the tokenizer
    argument")."""
    if option.noun is not None:
        return option.noun
    if option.metavar is not None:
        return f"{option.name}={option.metavar}"
    return f"the {option.name} argument" if option.value is None else f"{option.name}={option.value!r}"


Part = str | Option


class Message(str):
    """A message that names options: its value is the text in the library's words, and `parts` the text and the
    options it was made of, for `spelled`. Made with `Message(...)`, joined with `joined`, or added to a str with
    `+`: an f-string, `str()` or `str.join` keeps only the library's words."""

    __slots__ = ("parts",)
    parts: tuple[Part, ...]

    def __new__(cls, *parts: Part) -> Self:
        flat = tuple(_flattened(parts))
        made = super().__new__(cls, "".join(part if isinstance(part, str) else library_words(part) for part in flat))
        made.parts = flat
        return made

    def __add__(self, other: str) -> Message:  # a str still, that keeps its parts
        return Message(self, other) if isinstance(other, str) else NotImplemented

    def __radd__(self, other: str) -> Message:
        return Message(other, self) if isinstance(other, str) else NotImplemented

    def __reduce__(self) -> tuple[Any, ...]:
        return (Message, self.parts)

    def spelled(self, spell: Spelling) -> str:
        """The text with each option named as `spell` names it."""
        return "".join(part if isinstance(part, str) else spell(part) for part in self.parts)


def _flattened(parts: Iterable[Part]) -> Iterable[Part]:
    """The parts with other messages opened up and neighbouring text run together."""
    text = ""
    for part in parts:
        for piece in part.parts if isinstance(part, Message) else (part,):
            if isinstance(piece, str):
                text += str(piece)
                continue
            if text:
                yield text
            text = ""
            yield piece
    if text:
        yield text


def joined(separator: str, items: Iterable[str]) -> Message:
    """`separator.join(items)`, keeping the parts of each item that is a Message."""
    parts: list[Part] = []
    for n, item in enumerate(items):
        parts += [separator, item] if n else [item]
    return Message(*parts)


def spelled(text: str, spell: Spelling) -> str:
    """The text as `spell` names options: Message spelled, any other str as it is."""
    return text.spelled(spell) if isinstance(text, Message) else str(text)


def replaced(text: str, old: str, new: str) -> str:
    """`text.replace(old, new)` in its text, its options kept (Message); `old` is looked for within each stretch
    of text between options."""
    if not isinstance(text, Message):
        return text.replace(old, new)
    return Message(*(part.replace(old, new) if isinstance(part, str) else part for part in text.parts))


def message_of(err: BaseException) -> str:
    """An error's message with its parts (Message) where it has them; str(err) keeps only the library's words."""
    said = err.args[0] if len(err.args) == 1 else None
    return said if isinstance(said, Message) else str(err)


class EmbscopeError(Exception):
    """Any problem with the user's input; the CLI prints it and exits with code 1. Raised as one of the classes
    below, never bare. `option`: the library name of the option the problem is about; `path`: the file;
    `role`: the table's role. Each is None where the error is not about one."""

    def __init__(self, message: str, *, option: Option | str | None = None, path: str | os.PathLike[str] | None = None,
                 role: Role | None = None) -> None:
        super().__init__(message)
        self.option = option.name if isinstance(option, Option) else option
        self.path = Path(path) if path is not None else None
        self.role = role

    def __reduce__(self) -> tuple[Any, ...]:  # copied and pickled with its fields, whatever its class's signature
        return (_rebuilt, (type(self), self.args, self.__dict__))

    def reworded(self, message: str) -> EmbscopeError:
        """The same error, of the same class and fields, with another message (the file's name put first)."""
        return _rebuilt(type(self), (message,), dict(self.__dict__))


def _rebuilt(cls: type[EmbscopeError], args: tuple[Any, ...], state: dict[str, Any]) -> EmbscopeError:
    err = cls.__new__(cls)
    err.args = args
    err.__dict__.update(state)
    return err


class CheckpointError(EmbscopeError):
    """The file or directory is missing, unreadable, truncated, damaged or of an unknown kind."""


class UnsafePickleError(CheckpointError):
    """A pickle names a global outside the allow-list; nothing in it was run."""


class TokenizerError(CheckpointError):
    """A tokenizer file is damaged, not one embscope can run, or cannot be told from others beside it; or the
    tokenizer cannot encode at all (a library that fails on it)."""


class MissingPackageError(EmbscopeError):
    """An optional package that this file or feature needs is not installed: the message names it and the
    extra that installs it. `what` is what needs it, as the message says it."""

    def __init__(self, what: str, package: str, extra: str, *, detail: str | None = None,
                 path: str | os.PathLike[str] | None = None, option: Option | str | None = None) -> None:
        tail = "; " + detail if detail else ""
        super().__init__(needs_package(what, package, extra) + tail, path=path, option=option)
        self.what, self.package, self.extra = what, package, extra


def needs_package(what: str, package: str, extra: str) -> str:
    """The one wording of a missing package, for MissingPackageError and for a word that cannot be told without one."""
    return Message(what, f" needs the {package!r} package (pip install 'embscope[{extra}]')")


class TableError(EmbscopeError):
    """An embedding table is missing, ambiguous, or not what a command needs (`role`; `option`, the key or
    `table` that names one)."""


class PositionError(EmbscopeError):
    """A position lies outside the position table, or there is no such table."""


class TokenError(EmbscopeError):
    """A word cannot be encoded, or a token id lies outside the table."""


class OptionError(EmbscopeError):
    """An option's value cannot be used: a k below 1, a method or device that is not one, a precision this
    machine cannot run, rows outside the table (`option` names it)."""


class InputError(EmbscopeError):
    """A file of words, pairs or questions given to a command cannot be read or holds nothing usable (`path`,
    and `option`, the input it was given as)."""


class OutputError(EmbscopeError):
    """Where an output would go cannot take it: a name with the wrong ending, a folder that is a file, a file
    that exists or that this run read, a write that failed (`path`, and `option`, the output it names)."""

