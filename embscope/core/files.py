"""Every file embscope reads is opened here, one way: a regular file only, opened without blocking (a FIFO put
where a file was expected would wait forever for a writer, a device would never end), checked on the open
descriptor (so nothing swapped in after a check is read), read no further than a stated limit, or
memory-mapped. A library that opens files itself is handed the bytes, or the descriptor checked here
(opened_path).

Within a run (`with reading(ReadLog()) as log:`, which the command line opens for each command), each file
whose bytes the answer uses is recorded in that run's ReadLog by device and inode (links followed) with its
path; an output that would land on one is refused (refuse_input), whatever name, link or hard link it is
reached by. A sniff that only peeks at a file and passes it over (peek, record=False) does not record it.
The record belongs to the run and ends with it: outside any run nothing is recorded, so a notebook session
does not collect every file it ever read (a Python caller who wants the guarantee opens a run itself)."""

from __future__ import annotations

import contextlib
import contextvars
import io
import os
import stat
from collections.abc import Iterator
from typing import Any

from .errors import CheckpointError, Message, Option, OutputError
from .text import quote, shortened

PathLike = str | os.PathLike[str]

NOT_REGULAR = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))
# O_NOCTTY: a terminal device named as a file must not become the process's terminal by being opened
OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
FIRST_READ = 1 << 16  # what a read asks for beyond the size fstat gives (a /proc file says 0)
JSON_CACHED = 4  # parsed documents kept: a sniff and then a load parse a tokenizer file once

_parsed: dict[tuple[int, int, int, int, int], Any] = {}  # (device, inode, size, mtime, ctime) -> a JSON document


# --- what a path names ----------------------------------------------------------------------------

def not_regular(mode: int) -> str | None:
    """What a file of this mode is, when it is not a regular file (every reader refuses those by this name)."""
    return next((what for test, what in NOT_REGULAR if test(mode)), None if stat.S_ISREG(mode) else "not a file")


def status(path: PathLike) -> os.stat_result | None:
    """What `path` names, links followed; None when nothing can be found there (missing, a dangling link, a
    name too long for the file system, a NUL in it)."""
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


def is_regular(path: PathLike) -> bool:
    """A regular file (links followed) is there: files beside a checkpoint are read only if so."""
    found = status(path)
    return found is not None and stat.S_ISREG(found.st_mode)


def link_note(path: PathLike) -> str:
    try:
        return f" (a link to {quote(os.path.realpath(path))})" if os.path.islink(path) else ""
    except (OSError, ValueError):
        return ""


# --- opening and reading --------------------------------------------------------------------------

def open_fd(path: PathLike, what: str = "a regular file", *, record: bool = True) -> tuple[int, os.stat_result]:
    """A descriptor of `path` open to read, and its fstat; the caller closes it. Anything but a regular file
    is refused, before it is opened where a stat can tell (a device is never opened), and again on the
    descriptor. `what` names the file expected in the error ("a checkpoint file")."""
    before = status(path)
    if before is not None and not stat.S_ISREG(before.st_mode):
        raise CheckpointError(Message("expected ", what, f", found {not_regular(before.st_mode)} at {quote(path)}"
                                                         f"{link_note(path)}"))
    try:
        fd = os.open(path, OPEN_FLAGS)
    except OSError as err:
        raise CheckpointError(f"cannot read {quote(path)}: {err.strerror or err}") from None
    except ValueError:  # a NUL in the name
        raise CheckpointError(f"cannot read {quote(path)}: not a file name") from None
    try:
        info = os.fstat(fd)
        found = not_regular(info.st_mode)
        if found is not None:  # put in place between the stat and the open
            raise CheckpointError(Message("expected ", what, f", found {found} at {quote(path)}{link_note(path)}"))
    except BaseException:
        os.close(fd)
        raise
    if record:
        _remember(path, info)
    return fd, info


def open_file(path: PathLike, what: str = "a regular file", *, record: bool = True) -> io.BufferedReader:
    """`path` as a binary file object (buffered, seekable), for readers that parse as they go."""
    fd, _ = open_fd(path, what, record=record)
    return os.fdopen(fd, "rb")


def read_bytes(path: PathLike, limit: int, what: str = "a regular file", *, record: bool = True) -> bytes:
    """The whole file, which may hold at most `limit` bytes (checked before reading, and while reading:
    a file that grows, or a /proc file whose size says 0, is read no further than the limit)."""
    fd, info = open_fd(path, what, record=record)
    with os.fdopen(fd, "rb", buffering=0) as file:
        if info.st_size > limit:
            raise CheckpointError(too_large(path, what, info.st_size, limit))
        data = read_at_most(file, limit + 1, info.st_size + 1)
    if len(data) > limit:
        raise CheckpointError(too_large(path, what, len(data), limit))
    return data


def read_at_most(file: Any, count: int, first: int = FIRST_READ) -> bytes:
    """Up to `count` bytes of an open raw file; the first read asks for `first` (the size a stat gave and one)."""
    pieces = []
    want = min(count, max(first, 1))
    while count > 0:
        piece = file.read(want)
        if not piece:
            break
        pieces.append(piece)
        count -= len(piece)
        want = min(count, FIRST_READ)
    return b"".join(pieces)


def too_large(path: PathLike, what: str, size: int, limit: int) -> str:
    return Message("expected ", what, f" of at most {limit:,} bytes, found {size:,} bytes at {quote(path)}")


def read_text(path: PathLike, limit: int, what: str = "a text file", *, record: bool = True) -> str:
    """The file as UTF-8 text, line endings read as Path.read_text reads them ("\\r\\n" and "\\r" as "\\n").
    A file that is not UTF-8 raises UnicodeDecodeError, which each reader words for its own kind of file."""
    return universal_newlines(read_bytes(path, limit, what, record=record).decode("utf-8"))


def universal_newlines(text: str) -> str:
    """Line endings as Path.read_text reads them: "\\r\\n" and "\\r" as "\\n" (for text read from a file or a zip)."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def read_json(path: PathLike, limit: int, what: str = "a JSON file", *, record: bool = True,
              cached: bool = False) -> Any:
    """The parsed JSON document of the file (UTF-8, with or without a byte-order mark, or UTF-16/32 as
    json.loads detects). Content that is not JSON raises ValueError or RecursionError, for the reader to word.
    `cached`: the last few documents are kept by the file's identity (device, inode, size, modification and
    change times), so that a sniff and a load parse a large tokenizer file once; the file is opened (and
    recorded) each time all the same."""
    import json
    fd, info = open_fd(path, what, record=record)
    key = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    with os.fdopen(fd, "rb", buffering=0) as file:
        if cached and key in _parsed:
            return _parsed[key]
        if info.st_size > limit:
            raise CheckpointError(too_large(path, what, info.st_size, limit))
        data = read_at_most(file, limit + 1, info.st_size + 1)
    if len(data) > limit:
        raise CheckpointError(too_large(path, what, len(data), limit))
    document = json.loads(data)
    if cached:
        if len(_parsed) >= JSON_CACHED:
            _parsed.pop(next(iter(_parsed)))
        _parsed[key] = document
    return document


def peek(path: PathLike, count: int) -> bytes | None:
    """The first `count` bytes of a regular file, for a sniff: None where there is no regular file to read.
    Not recorded: a file only looked at and passed over is not one the answer was read from."""
    try:
        fd, _ = open_fd(path, record=False)
    except CheckpointError:
        return None
    try:
        return os.read(fd, count)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_at(path: PathLike, offset: int, length: int, what: str = "a checkpoint file") -> bytes:
    """`length` bytes at `offset` (one pread; fewer where the file now ends before them)."""
    fd, _ = open_fd(path, what)
    try:
        return os.pread(fd, length, offset)
    except OSError as err:
        raise CheckpointError(f"cannot read {quote(path)}: {err.strerror or err}") from None
    finally:
        os.close(fd)


def map_file(path: PathLike, what: str = "a checkpoint file") -> Any:
    """The whole file memory-mapped read-only (an mmap); an empty file cannot be mapped and is b""."""
    import mmap
    fd, info = open_fd(path, what)
    try:
        if info.st_size == 0:
            return b""
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)


@contextlib.contextmanager
def opened_path(path: PathLike, what: str = "a checkpoint file") -> Iterator[str]:
    """A name by which a library that opens files itself (h5py) opens the very file checked here: the
    descriptor's /proc/self/fd entry, so a FIFO put in place of the path after the check is never reached
    (the path itself where there is no /proc). The descriptor stays open while the name is used."""
    fd, _ = open_fd(path, what)
    try:
        by_descriptor = f"/proc/self/fd/{fd}"
        yield by_descriptor if os.path.exists(by_descriptor) else os.fspath(path)
    finally:
        os.close(fd)


# --- the record: what this run read ---------------------------------------------------------------

class ReadLog:
    """The files one run read: (device, inode) -> the absolute path each was first read by."""

    def __init__(self) -> None:
        self.found: dict[tuple[int, int], str] = {}

    def remember(self, path: PathLike, info: os.stat_result) -> None:
        self.found.setdefault((info.st_dev, info.st_ino), os.path.abspath(path))

    def was_read(self, path: PathLike) -> bool:
        """Whether `path` (links followed) is a file this run read, by whatever name: compared by device and
        inode, and only while the name it was read by still names that file (an inode freed and given to a new
        file is not the file that was read)."""
        found = status(path)
        if found is None:
            return False
        key = (found.st_dev, found.st_ino)
        if key not in self.found:
            return False
        then = status(self.found[key])
        return then is not None and (then.st_dev, then.st_ino) == key

    def paths(self) -> list[str]:
        """The paths of the files this run read, in the order first read."""
        return list(self.found.values())


# the runs open now, innermost last: a run's reads are every enclosing run's too. A context variable, set only
# inside `reading`, so a record never outlives its run.
_runs: contextvars.ContextVar[tuple[ReadLog, ...]] = contextvars.ContextVar("embscope_runs", default=())


@contextlib.contextmanager
def reading(log: ReadLog) -> Iterator[ReadLog]:
    """Record every file read inside the block in `log` (and in the runs around it)."""
    token = _runs.set((*_runs.get(), log))
    try:
        yield log
    finally:
        _runs.reset(token)


def _remember(path: PathLike, info: os.stat_result) -> None:
    for log in _runs.get():
        log.remember(path, info)


def record(path: PathLike) -> None:
    """Note a file as read by this run when its bytes come from a cache of an earlier read (a parsed config
    kept by its stamp): the answer still depends on it."""
    found = status(path)
    if found is not None and stat.S_ISREG(found.st_mode):
        _remember(path, found)


def was_read(path: PathLike) -> bool:
    """Whether `path` is a file the run open now read (ReadLog.was_read); outside a run, nothing was."""
    runs = _runs.get()
    return bool(runs) and runs[-1].was_read(path)


def refuse_input(path: PathLike, what: str | Option) -> None:
    """An output that would land on a file this run read is refused: `what` names the output (the option `out`)."""
    if was_read(path):
        raise OutputError(Message("expected ", what, f" to name a new file, found {quote(shortened(str(path)))}, "
                                  "a file this answer was read from: it is never written over"), path=path,
                          option=what if isinstance(what, Option) else None)

