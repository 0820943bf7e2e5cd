"""`compare` as one library call: the checkpoints in order (a folder of a run ordered by step), the --words
rows, token-string pairing, the series compared, and the files it was read from (which a plot may not replace);
and one checkpoint's token table against its own output projection. The command only parses and renders."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.errors import Message, Option, TokenError
from ..core.text import quote
from ..lookup import lookup_word
from ..naming import token_string_or_none
from .compare import CompareOptions, by_token
from .compare_output import OutputComparison, compare_output
from .compare_series import Opener, SeriesComparison, compare_series, run_checkpoints, unnamed
from .distributed import compare_on_scheduler
from .pairing import Pairing
from .stages import Stages, quiet

if TYPE_CHECKING:
    from ..embeddings import Embeddings

WordRow = tuple[str, int | None, str | None]  # a --words entry, its token row in A, or why it has none
WORDS = Option("words")  # the words whose neighbour sets are compared first
MATCH_TOKENS = Option("match", "tokens", noun="by_token()")  # pairing rows by token string


def token_strings(emb: Embeddings, which: str) -> list[str | None]:
    """Every token row's string, None past the tokenizer's vocabulary, for pairing rows by token string."""
    tokenizer, why_none = emb.tokenizer_for_names(emb.token)
    if tokenizer is None:
        raise TokenError(Message(MATCH_TOKENS, f" pairs rows by token string and needs a tokenizer for {which} "
                                 f"({quote(emb.checkpoint.path)}): ", why_none or ""))
    rows = emb.token.rows
    return [token_string_or_none(tokenizer, i) for i in range(rows)]


def word_rows(emb: Embeddings, words: list[str]) -> list[WordRow]:
    """Each word with its token row in A, or why it has none (neighbour sets are per row)."""
    tokenizer, why_none = emb.tokenizer_for_names(emb.token)
    if tokenizer is None:
        raise TokenError(Message(WORDS, " needs a tokenizer to find the words' rows: ", why_none or ""))
    found: list[WordRow] = []
    for word in words:
        lookup = lookup_word(tokenizer, word)
        if len(lookup.ids) == 1:
            found.append((word, lookup.ids[0], None))
        else:
            pieces = " ".join(quote(t) for t in lookup.tokens)
            why = f"is {len(lookup.ids)} tokens ({pieces}); neighbour sets are compared per row, so it is left out"
            found.append((word, None, why))
    return found


class ReadFiles:
    """The files a run of checkpoints was read from, each noted once and in linear time: a folder that many
    checkpoints share is listed for the first of them only, and only the first and the last checkpoint have a
    tokenizer looked up (they name the rows), so only theirs is noted."""

    def __init__(self, files_of: Callable[[Embeddings], list[Path]]):
        self.files_of = files_of
        self.found: dict[Path, None] = {}
        self.listed: set[Path] = set()
        self.last: Embeddings | None = None

    def note(self, emb: Embeddings) -> None:
        self.found[Path(emb.checkpoint.path)] = None
        if emb.checkpoint.directory not in self.listed:
            self.listed.add(emb.checkpoint.directory)
            self.found.update(dict.fromkeys(self.files_of(emb)))
        self.last = emb

    def note_last(self) -> None:
        """The last checkpoint's own files, its tokenizer's among them."""
        if self.last is not None:
            self.found.update(dict.fromkeys(self.files_of(self.last)))

    def paths(self) -> list[Path]:
        return list(self.found)


@dataclass(frozen=True)
class Checkpoints:
    """The checkpoints to compare in order, what an answer names as their origin (A, or the folder of the run),
    and notes on the order."""

    paths: list[Path]
    origin: Path
    notes: list[str]


def checkpoints_of(given: list[Path], open_path: Opener) -> Checkpoints:
    """Two or more paths as given, or the checkpoints one folder of a run holds, in step order."""
    if len(given) >= 2:
        return Checkpoints(given, given[0], [])
    (folder,) = given
    ordered, notes = run_checkpoints(folder, open_path)
    return Checkpoints(ordered, folder, notes)


def one_file_notes(given: list[Path], opened: list[Path]) -> list[str]:
    """A note for each checkpoint that is a file compared already (the same file by another name, a link, or the
    folder holding it): what it is compared with is itself. `given`: the paths as the user named them; `opened`:
    the files they opened."""
    seen: dict[tuple[int, int], int] = {}
    notes = []
    for index, path in enumerate(opened):
        try:
            info = os.stat(path)
        except OSError:
            continue
        first = seen.setdefault((info.st_dev, info.st_ino), index)
        if first != index:
            which = "A and B" if len(opened) == 2 else f"checkpoints {first + 1} and {index + 1}"
            a, b = given[first], given[index]
            named = f"{quote(a)} and {quote(b)}" if str(a) != str(b) else f"{quote(b)}, given twice"
            notes.append(f"{which} are one file ({named}): it is compared with itself, so every row is unchanged")
    return notes


@dataclass(frozen=True, eq=False)
class ComparedRun:
    """A comparison of checkpoints, with what an answer about it names."""

    found: SeriesComparison
    words: list[WordRow]  # each word asked about, with its row in A or why it has none
    notes: list[str]
    read: list[Path]  # every file the answer was read from (or may have been): an output may replace none


def compare_run(run: Checkpoints, open_path: Opener, options: CompareOptions, *, words: list[str] | None = None,
                match_tokens: bool = False, files_of: Callable[[Embeddings], list[Path]] = lambda emb: [],
                scheduler: str | None = None, stages: Stages = quiet) -> ComparedRun:
    """Compare the checkpoints of `run`, in order. `words`: rows whose neighbour sets are compared first;
    `match_tokens`: pair the token rows of A and B by token string; `files_of`: the files an opened checkpoint
    may have been read from, noted in `read`; `scheduler`: a dask.distributed scheduler's address, a scheduler
    file, or "local", to run each checkpoint's step as a task there (the answer is the same to the last digit)."""
    paths = run.paths
    read = ReadFiles(files_of)
    ready = {0: open_path(paths[0])}  # opened before the series: words, token strings
    found_words = word_rows(ready[0], words) if words else []
    pairing: Pairing | None = None
    if match_tokens:
        ready[1] = open_path(paths[1])
        pairing = by_token(token_strings(ready[0], "A"), token_strings(ready[1], "B"))
    rows = [row for _, row, _ in found_words if row is not None]
    if scheduler is not None:
        found = compare_on_scheduler(paths, open_path, options, scheduler, word_rows=rows, stages=stages,
                                     on_open=read.note)
    else:
        found = compare_series(paths, open_path, options, ready=ready, token_pairing=pairing, word_rows=rows,
                               stages=stages, on_open=read.note)
    read.note_last()
    unnamed_a = unnamed(ready[0], found.names)
    # B's rows are named only in the neighbours of --words: said where B's tokenizer costs names A's did not
    unnamed_b = {role: why for role, why in found.unnamed_b.items() if rows and why != unnamed_a.get(role)}
    notes = [*one_file_notes(paths, [path for path, _ in found.checkpoints]), *run.notes,
             *tokenizer_notes(unnamed_a), *tokenizer_notes(unnamed_b, "B")]
    return ComparedRun(found, found_words, notes, read.paths())


def tokenizer_notes(unnamed_roles: dict[str, str], whose: str = "") -> list[str]:
    """A tokenizer named or found that did not load, or is not a compared table's (the output table's too: it may be
    of another height; B's table: a run's table may grow), costs only those rows' names, and the answer says so,
    once for each reason. `unnamed_roles`: role -> why (compare_series.unnamed)."""
    by_reason: dict[str, list[str]] = {}  # why -> the roles whose rows print as #id for it
    for role, why in unnamed_roles.items():
        by_reason.setdefault(why, []).append(role)
    said, rows = (f"{whose}: ", f"{whose}'s ") if whose else ("", "")
    return [Message(said, why, f"; {rows}{' and '.join(named)} rows print as #id") for why, named in by_reason.items()]


def compare_own_output(emb: Embeddings, options: CompareOptions, *, words: list[str] | None = None,
                       stages: Stages = quiet) -> tuple[OutputComparison, list[WordRow]]:
    """One checkpoint's token table (A) against its untied output projection (B), and the words' rows."""
    found_words = word_rows(emb, words) if words else []
    found = compare_output(emb, options, word_rows=[row for _, row, _ in found_words if row is not None],
                           stages=stages)
    return found, found_words
