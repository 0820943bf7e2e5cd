"""SIGTERM and SIGHUP (what `timeout`, `kill`, a closed terminal and a cancelled CI job send) end a run as Ctrl-C
does: as a KeyboardInterrupt, so every `finally` runs and no temporary output is left behind. Installed by the
command line's main only, for the command's length (and, once the command has ended, `noted_to_the_end` by its
entry point); the library installs no handler of its own, but holds these signals and Ctrl-C (`held`) for the step
that an interrupt would leave half done, and hands the first one on to the caller's handler after it."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from types import FrameType
from typing import Any

STOPPING = (signal.SIGTERM, signal.SIGHUP)
HELD = (signal.SIGINT, *STOPPING)


class Stopped(KeyboardInterrupt):
    """A run ended by SIGTERM or SIGHUP, raised where the run was, so every `finally` on the way runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)


received: list[int] = []  # the signal that stopped this run, once one has


def stop(signum: int, frame: FrameType | None) -> None:
    received.append(signum)
    raise Stopped(signum)


def install(came: list[int] | None = None) -> None:
    """SIGTERM and SIGHUP raise Stopped; a signal the caller set to be ignored (nohup) stays ignored. `came`: the
    entry point's list (noted_to_the_end's), given before cli.main runs, whose own install then keeps these: a
    signal, Ctrl-C too, that comes once the command has ended, its SystemExit under way to the entry point, is
    noted there, not raised into the ending (where it printed a traceback and the process ended 0)."""
    for signum in STOPPING:
        handler = signal.getsignal(signum)
        if handler != signal.SIG_IGN and not (came is None and noting(handler)):  # the entry point's stays
            signal.signal(signum, stop if came is None else partial(stop_or_note, came, stop))
    if came is not None and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, partial(stop_or_note, came, signal.default_int_handler))


@contextmanager
def installed() -> Iterator[None]:
    """install for one command: no signal has stopped it yet (received is cleared), and the handlers that were
    there before (a script calling cli.main, the entry point's own) are put back when it ends."""
    kept = {signum: signal.getsignal(signum) for signum in STOPPING}
    received.clear()
    install()
    try:
        yield
    finally:
        put_back({signum: handler for signum, handler in kept.items() if handler is not None})


def noting(handler: object) -> bool:
    """Whether `handler` is one the entry point put in (install with its list)."""
    return isinstance(handler, partial) and handler.func is stop_or_note


def stop_or_note(came: list[int], handler: Callable[[int, FrameType | None], Any], signum: int,
                 frame: FrameType | None) -> None:
    """`handler`, unless the command has ended (the main thread is handling its SystemExit): then noted."""
    if isinstance(sys.exc_info()[1], SystemExit):
        noted(came, signum, frame)
        return
    handler(signum, frame)


def noted(came: list[int], signum: int, frame: FrameType | None) -> None:
    came.append(signum)
    if len(came) > 1:  # asked again: a slow exit handler is cut short, nothing flushed (a stopped reader blocks it)
        os._exit(128 + came[0])


def exit_code(code: int) -> int:
    """The run's exit status: 128 + the number of the signal that stopped it (typer turns every interrupt into
    exit 130, Ctrl-C's), else `code` as it is."""
    return 128 + received[-1] if received and code == 130 else code


@contextmanager
def held() -> Iterator[list[int]]:
    """Ctrl-C, SIGTERM and SIGHUP held inside (a local Dask cluster starting its workers: stopped part way, it can
    neither be closed nor used, and dask prints its failure at exit). The block gets the list of the signals that
    came; the first one then goes to the handler that was there before, when the block ends, and at a second one
    both go at once, in the order they came. Only in the main thread, where Python runs handlers; an ignored signal
    stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    kept = {signum: handler for signum in HELD if (handler := signal.getsignal(signum)) not in (signal.SIG_IGN, None)}
    came: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        came.append(signum)
        if len(came) > 1:  # asked again: not held; the first goes first (SIGTERM, then Ctrl-C: the exit status is 143)
            put_back(kept)
            for each in came:
                signal.raise_signal(each)

    for signum in kept:
        signal.signal(signum, hold)
    try:
        yield came
    finally:
        put_back(kept)
        if len(came) == 1:  # its handler runs before raise_signal returns
            signal.raise_signal(came[0])


def put_back(handlers: Mapping[signal.Signals, Any]) -> None:
    for signum, handler in handlers.items():
        signal.signal(signum, handler)


def noted_to_the_end(came: list[int]) -> None:
    """Once the command has ended and the process's exit handlers run (temporary folders removed, log handlers
    flushed): Ctrl-C, SIGTERM and SIGHUP are noted in `came`, where raised into a handler Python would print them
    as an exception it ignored and end with the command's status; the handlers finish, and the process's ending
    reads `came`. A second one ends the process at once, with 128 + the first. Main thread only; an ignored
    signal stays ignored."""
    for signum in HELD:
        if signal.getsignal(signum) not in (signal.SIG_IGN, None):
            signal.signal(signum, partial(noted, came))
