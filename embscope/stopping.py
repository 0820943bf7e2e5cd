"""SIGTERM and SIGHUP (what `timeout`, `kill`, a closed terminal and a cancelled CI job send) end a run as Ctrl-C
does: as a KeyboardInterrupt, so every `finally` runs and no temporary output is left behind. Installed by the
command line's main only; the library installs no handler of its own."""

from __future__ import annotations

import signal
from types import FrameType

STOPPING = (signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """A run ended by SIGTERM or SIGHUP, raised where the run was, so every `finally` on the way runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)


received: list[int] = []  # the signal that stopped this run, once one has


def stop(signum: int, frame: FrameType | None) -> None:
    received.append(signum)
    raise Stopped(signum)


def install() -> None:
    """SIGTERM and SIGHUP raise Stopped; a signal the caller set to be ignored (nohup) stays ignored."""
    for signum in STOPPING:
        if signal.getsignal(signum) != signal.SIG_IGN:
            signal.signal(signum, stop)


def exit_code(code: int) -> int:
    """The run's exit status: 128 + the number of the signal that stopped it (typer turns every interrupt into
    exit 130, Ctrl-C's), else `code` as it is."""
    return 128 + received[-1] if received and code == 130 else code
