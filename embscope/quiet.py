"""Native libraries kept off the terminal: tokenizers' Rust panic hook, sentencepiece's absl log, libhdf5's error
stack and matplotlib's C++ print to file descriptor 2 directly, past Python's sys.stderr and so past embscope's
error boundary. `native_stderr()` points fd 2 at a temporary file for the length of a call and puts it back;
what the library wrote is handed to the caller (`Captured.text`), which drops it or makes a note of it.

Only the standard library is imported here: every module that calls a native library can use it. Captures nest
(the inner one sees the outer's file as fd 2 and restores it), and a thread that prints while one is open writes
to the file, not the terminal; nothing is lost from embscope's own output, which goes through sys.stderr after
the capture ends."""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO

KEPT_BYTES = 64 * 1024  # of what a library printed, the start kept for a note; a panic storm can write megabytes
_lock = threading.RLock()  # fd 2 is one per process: captures from two threads take turns
_depth: list[int] = []  # captures open now (a list, not a global int: no `global` statement needed)
_sink: list[IO[bytes]] = []  # one temporary file for the process: a capture costs a dup and two dup2, no new file


@dataclass
class Captured:
    """What a native library wrote to fd 2 inside `native_stderr()`, filled in when the block ends."""

    text: str = ""

    def first_line(self) -> str:
        lines = [line.strip() for line in self.text.splitlines() if line.strip()]
        return lines[0][:200] if lines else ""


@contextmanager
def native_stderr() -> Iterator[Captured]:
    """fd 2 goes to a temporary file inside; the caller reads what landed there from the Captured it gets."""
    captured = Captured()
    with _lock:
        if _depth:  # inside another capture: fd 2 already goes to the sink, the outer one reads it
            _depth.append(1)
            try:
                yield captured
            finally:
                _depth.pop()
            return
        sink = sink_file()
        with fd2_moved(sink.fileno()):
            _depth.append(1)
            try:
                yield captured
            finally:
                _depth.pop()
        captured.text = drained(sink)


@contextmanager
def children_quiet() -> Iterator[None]:
    """fd 2 on the null device inside, for the processes started there: a child keeps the fd 2 it was started with
    for its life, so what it prints after this run's last line (a dask worker spawned as the run is interrupted)
    never reaches the terminal."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        with _lock, fd2_moved(null):
            yield
    finally:
        os.close(null)


@contextmanager
def fd2_moved(target: int) -> Iterator[None]:
    """fd 2 pointed at target inside, and put back after; nothing moves where the process has no fd 2."""
    try:
        sys.stderr.flush()  # Python's own buffered text goes out before fd 2 moves
    except (OSError, ValueError, AttributeError):
        pass
    try:
        saved = os.dup(2)
    except OSError:  # no fd 2 at all (a daemon): nothing can reach a terminal
        yield
        return
    os.dup2(target, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def sink_file() -> IO[bytes]:
    """The process's temporary file, or the null device when no temporary folder can be written (TMPDIR is
    input too)."""
    if not _sink:
        try:
            _sink.append(tempfile.TemporaryFile())  # noqa: SIM115  kept open for the process
        except OSError:
            _sink.append(os.fdopen(os.open(os.devnull, os.O_RDWR), "w+b"))  # written to, never read
    return _sink[0]


def drained(sink: IO[bytes]) -> str:
    """What the file holds, read from its start, and the file emptied for the next capture."""
    try:
        size = os.fstat(sink.fileno()).st_size
        if not size:
            return ""
        os.lseek(sink.fileno(), 0, os.SEEK_SET)
        data = os.read(sink.fileno(), min(size, KEPT_BYTES))
        os.ftruncate(sink.fileno(), 0)
        os.lseek(sink.fileno(), 0, os.SEEK_SET)
    except OSError:
        return ""
    return data.decode("utf-8", "replace")
