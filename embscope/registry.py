"""The one shape of every table of kinds in embscope, and the record of every kind of file it recognises.

- A table holds what sniffing needs (the sniff: a magic number, a name, or a light function) and the path of the
  function that opens a file of the kind (`embscope.formats.gguf_file:open_gguf`), imported only when a file is of
  that kind: a run imports the one reader it uses. tests/test_layers.py checks every path names a real function.
- `Kind` is one kind of file: a checkpoint format (formats.FORMATS) or a tokenizer kind (tokenizers.KINDS), asked
  in the order of its list, each with the reason for its place; `listed` refuses two kinds of one name.
- `Entry` is one row of any other table (the top-k engines, the writers of an output format): a name, the function
  or object it names and the reason for its place, in a tuple made by `entries`, which likewise refuses two of a name.
- Every sniff has one signature: it is handed a `Probe` (the path, the first bytes, the size)."""

from __future__ import annotations

import fnmatch
import importlib
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from .core import files
from .core.errors import CheckpointError
from .core.text import quote

HEAD_BYTES = 256  # what a sniff sees of a file: every magic number, and a tokenizer file's first line

# --- what a sniff sees ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """What a sniff is handed: a regular file's path, its first HEAD_BYTES bytes and its size, read once for every
    kind asked. A sniff that needs more (a zip's directory, a vocabulary's first lines) reads it from the path."""

    path: Path
    head: bytes
    size: int

    @classmethod
    def read(cls, path: Path, what: str = "a checkpoint file") -> Probe:
        """The probe of a regular file; anything else is refused (CheckpointError naming `what`) before a read can
        block. Not recorded as read: the reader that takes the file opens it again."""
        fd, info = files.open_fd(path, what, record=False)
        try:
            return cls(path, os.read(fd, HEAD_BYTES), info.st_size)
        except OSError as err:
            raise CheckpointError(f"cannot read {quote(path)}: {err.strerror}") from None
        finally:
            os.close(fd)

    @classmethod
    def peek(cls, path: Path) -> Probe | None:
        """The probe of a regular file, None where there is none; a regular file that cannot be read is seen as
        empty (a kind that takes it on its name still does, and its loader says why it cannot be read)."""
        found = files.status(path)
        if found is None or not stat.S_ISREG(found.st_mode):
            return None
        head = files.peek(path, HEAD_BYTES)
        return cls(path, head or b"", found.st_size)


Sniff = Callable[[Probe], bool]  # is the file of this kind? cheap, and never raising
Open = TypeVar("Open")


# --- kinds of file --------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)  # compared nowhere: no __eq__ and __hash__ to build at import
class Kind(Generic[Open]):
    """One kind of file embscope recognises.

    name: what messages and `info` call it (a format's name is stamped on the checkpoint its reader opens);
    sniff: whether a file is of this kind; opener: "module:function", the function that reads it (a format's
    Reader: (path, options) -> Checkpoint; a tokenizer kind's Loader: (path) -> Tokenizer), imported by `open`;
    why: the reason for its place in its list.
    Tokenizer kinds, which a folder is searched for by name, also set file_names (glob patterns) and expects (the
    files, for messages); one that also knows tokenizers by name (tiktoken's gpt2) sets lister and name_opener,
    "module:function" like opener (`names` and `load_name`, imported only when a tokenizer is named); one whose
    files may sit away from the checkpoint sets related (where else to look, given the checkpoint's folder and
    config, nearest first); one whose ids depend on how the checkpoint used the file (fairseq's dict.txt, to which a
    task adds a symbol) sets for_checkpoint, "module:function" (tokenizer, the checkpoint's config) -> tokenizer."""

    name: str
    sniff: Sniff
    opener: str
    why: str
    file_names: tuple[str, ...] = ()
    expects: str = ""
    lister: str | None = None
    name_opener: str | None = None
    related: Callable[[Path, dict[str, Any]], list[Path]] | None = None
    for_checkpoint: str | None = None

    @property
    def open(self) -> Open:
        """The function that reads a file of this kind, its module imported now (the first time a run needs it)."""
        found: Open = imported(self.opener)
        return found

    def as_used(self, opened: Any, config: Mapping[str, Any]) -> Any:
        """What this kind opened, as the checkpoint whose config is given used it (for_checkpoint, imported now)."""
        return imported(self.for_checkpoint)(opened, config) if self.for_checkpoint else opened

    @property
    def names(self) -> Callable[[], tuple[str, ...]] | None:
        """The function that lists the tokenizers this kind knows by name, or None; imported as `open` is."""
        return imported(self.lister) if self.lister else None

    @property
    def load_name(self) -> Callable[[str], Any] | None:
        """The function that loads a tokenizer by its name, or None; imported as `open` is."""
        return imported(self.name_opener) if self.name_opener else None

    def matches_name(self, path: Path) -> bool:
        return any(fnmatch.fnmatch(path.name, pattern) for pattern in self.file_names)

    def description(self) -> str:
        return f"{self.name} ({self.expects or ', '.join(self.file_names)})"


def imported(where: str) -> Any:
    """The function "module:function" names, its module imported now."""
    module, function = where.split(":")
    return getattr(importlib.import_module(module), function)


class Named(Protocol):
    @property
    def name(self) -> str: ...


K = TypeVar("K", bound=Named)


def listed(*kinds: K) -> tuple[K, ...]:
    """The kinds, in this order; two of one name are an error when the list is made (at import), never a silent
    replacement of the first."""
    return unique(kinds, "kinds of file")


def unique(rows: tuple[K, ...], what: str) -> tuple[K, ...]:
    """`rows` as given, once no two have one name (`what` they are, for the error)."""
    seen: set[str] = set()
    for row in rows:
        if row.name in seen:
            raise ValueError(f"two {what} are named {row.name!r}: each name must be listed once")
        seen.add(row.name)
    return rows


# --- tables of named functions --------------------------------------------------------------------

Item = TypeVar("Item")


@dataclass(frozen=True, eq=False)  # compared nowhere: no __eq__ and __hash__ to build at import
class Entry(Generic[Item]):
    """One row of a table that is not of kinds of file (the top-k engines, the writers of a format): the name it is
    chosen by, what it names (typed, so mypy checks each row), and the reason for its place or its being."""

    name: str
    item: Item
    why: str


def entries(*rows: Entry[Item]) -> tuple[Entry[Item], ...]:
    """A table, in this order; two rows of one name are an error when it is made (at import)."""
    return unique(rows, "entries of one table")


def find(table: Sequence[Entry[Item]], name: str) -> Item | None:
    """What the row called `name` names, None where `table` has no such row."""
    return next((entry.item for entry in table if entry.name == name), None)


def named(table: Sequence[Entry[Item]], name: str) -> Item:
    """What the row called `name` names, for a name already checked (a KeyError otherwise, as a dict's)."""
    found = find(table, name)
    if found is None:
        raise KeyError(name)
    return found
