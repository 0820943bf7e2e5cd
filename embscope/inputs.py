"""The user's files of words and pairs (the queries and pairs files): regular files only, read a line at a time
(a file is never held whole), each line bounded. A line that cannot be used is skipped and counted, or,
when strict, stops the run with the line's number."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from .core import files
from .core.errors import CheckpointError, InputError, Message, Option, joined, message_of
from .core.text import quote

MAX_LINE_BYTES = 4096  # far past any word or pair; a longer line is damage, not input
EXAMPLES = 3  # reasons kept for the note; the rest are only counted
PAIRS_FILE = Option("pairs_file", noun="the pairs file")  # as `similarity --pairs-file` gives it
QUERIES = Option("queries", noun="the queries file")  # as `neighbors --all --queries` gives it


class Skipped:
    """Lines (or items) left out of an input, counted, with the first few reasons kept for the note."""

    def __init__(self) -> None:
        self.count = 0
        self.examples: list[str] = []

    def __call__(self, reason: str) -> None:
        self.count += 1
        if len(self.examples) < EXAMPLES:
            self.examples.append(reason)

    def reasons(self) -> Message:
        """The reasons kept, and how many more were only counted."""
        more = f"; and {self.count - len(self.examples):,} more" if self.count > len(self.examples) else ""
        return Message(joined("; ", self.examples), more)

    def notes(self, source: Path) -> list[str]:
        """The note for the user, or none when every line was used."""
        if not self.count:
            return []
        lines = f"line{'s' * (self.count != 1)}"
        note = Message(f"skipped {self.count:,} {lines} of {quote(source)} that could not be used (", self.reasons(),
                       "); ", Option("strict", True), " stops at the first instead")
        return [note]


def none_used(path: Path, what: Option, skip: Skipped) -> InputError:
    """The error for a file whose every line was skipped: an empty answer, and a note beside it, would be read as
    an answer."""
    return InputError(Message(f"expected at least one line of {quote(path)} that could be used, found none (",
                              skip.reasons(), ")"), path=path, option=what)


def lines(path: Path, what: Option, skip: Skipped | None) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line that is not blank or a # comment. `skip` None: strict. `what`: the input
    the file was given as, in messages."""
    try:
        # /dev/zero or a FIFO would never end: refused as not a regular file
        with files.open_file(path, Message("a regular file for ", what)) as file:
            for number, raw in enumerate(iter(lambda: file.readline(MAX_LINE_BYTES + 1), b""), start=1):
                problem = None
                if len(raw) > MAX_LINE_BYTES:
                    problem = f"longer than {MAX_LINE_BYTES:,} bytes"
                    while raw and not raw.endswith(b"\n"):  # the rest of the line is not read into memory
                        raw = file.readline(MAX_LINE_BYTES)
                else:
                    try:
                        text = raw.decode("utf-8").strip()
                    except UnicodeDecodeError:
                        problem = "not UTF-8 text"
                if problem is None:
                    if text and not text.startswith("#"):
                        yield number, text
                elif skip is None:
                    raise InputError(f"{quote(path)} line {number}: expected a line of text, found one {problem}",
                                     path=path, option=what)
                else:
                    skip(f"line {number}: {problem}")
    except CheckpointError as err:  # embscope.core.files refused it: missing, not a regular file, unreadable
        raise InputError(message_of(err), path=path, option=what) from None
    except OSError as err:
        raise InputError(Message("expected a readable file for ", what, f", found {err.strerror or err}: "
                                 f"{quote(path)}"), path=path, option=what) from None


def fields_text(fields: list[str]) -> str:
    return f"{len(fields)} field{'s' * (len(fields) != 1)}"


def read_pairs(path: Path, skip: Skipped | None) -> Iterator[tuple[str, str]]:
    """Two words or ids a line, tab or space separated."""
    found = False
    for number, text in lines(path, PAIRS_FILE, skip):
        fields = text.split()
        if len(fields) == 2:
            found = True
            yield fields[0], fields[1]
        elif skip is None:
            raise InputError(f"{quote(path)} line {number}: expected two words or ids, found {fields_text(fields)}",
                             path=path, option=PAIRS_FILE)
        else:
            skip(f"line {number}: expected two words or ids, found {fields_text(fields)}")
    if not found:
        raise InputError(f"expected pairs in {quote(path)}, two words or ids a line, found none", path=path,
                         option=PAIRS_FILE)


def read_queries(path: Path, skip: Skipped | None) -> Iterator[str]:
    """One word or id a line."""
    found = False
    for _, text in lines(path, QUERIES, skip):
        found = True
        yield text
    if not found:
        raise InputError(f"expected words or ids in {quote(path)}, one a line, found none", path=path, option=QUERIES)
