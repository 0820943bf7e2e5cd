"""The few errors embscope raises, and how a message names an option.

A message is the one line the user reads: what was expected, and what was found. An error also carries what it
is about as fields (`option`, `path`, `role`; a missing package's `package` and `extra`) for code that handles
it. A message names an option in the library's words, by its keyword (`merge=False`, `token_key=NAME`); while
the command line runs a command it has them spelled as its flags (`--no-merge`, `--token-key NAME`): cli.py
owns that spelling, the library never names a flag. docs/python.md (Errors) is the table of which error means
what."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .role import Role


@dataclass(frozen=True)
class Option:
    """An option as a message names it: a keyword of the library's (`merge`), with the value the message is
    about (False, "umap") or a placeholder for one ("NAME"). str() spells it in the words of whoever answers."""

    name: str  # the library's keyword; the command line's flag is cli.py's to spell
    value: object = None  # None: the option itself; True and False: a switch turned on or off
    metavar: str | None = None  # a placeholder for a value, written as it is ("NAME", "FILE")
    text: str | None = None  # the value as the command line writes it, where that is not str(value) ("1,000")
    noun: str | None = None  # the library's words where no keyword of its fits the sentence ("the pairs file")
    lead: str = ""  # words the command line says before its flag, which the noun says its own way ("repeat ")

    def __str__(self) -> str:
        return _spelling(self)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def library_words(option: Option) -> str:
    """How a Python caller names the option: a keyword argument (`merge=False`, `method='umap'`, "the tokenizer
    argument")."""
    if option.noun is not None:
        return option.noun
    if option.metavar is not None:
        return f"{option.name}={option.metavar}"
    return f"the {option.name} argument" if option.value is None else f"{option.name}={option.value!r}"


_spelling: Callable[[Option], str] = library_words  # a global, not a context variable: worker threads spell alike


@contextmanager
def options_spelled(spell: Callable[[Option], str]) -> Iterator[None]:
    """Messages made inside the block name options as `spell` does (the command line: as its flags)."""
    global _spelling
    previous, _spelling = _spelling, spell
    try:
        yield
    finally:
        _spelling = previous


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
        tail = f"; {detail}" if detail else ""
        super().__init__(needs_package(what, package, extra) + tail, path=path, option=option)
        self.what, self.package, self.extra = what, package, extra


def needs_package(what: str, package: str, extra: str) -> str:
    """The one wording of a missing package, for MissingPackageError and for a word that cannot be told without one."""
    return f"{what} needs the {package!r} package (pip install 'embscope[{extra}]')"


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
