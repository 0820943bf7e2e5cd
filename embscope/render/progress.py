"""Progress bars for long work: on stderr, only when it is a terminal, gone when the work is done.
rich.progress is imported only when a bar is needed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
from rich.progress import Progress as Bars

from ..analysis.stages import Progress, Stages
from . import console


@contextmanager
def stages() -> Iterator[Stages]:
    """Bars for work done in stages: `stage(description)` adds a bar and returns the callback that moves it."""
    with Bars(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
              console=console.err, transient=True, disable=not console.err.is_terminal) as bars:
        def stage(description: str) -> Progress:
            task = bars.add_task(description, total=None)
            return lambda done, total: bars.update(task, completed=done, total=total)
        yield stage


@contextmanager
def bar(description: str) -> Iterator[Progress]:
    """One bar; yields the callback that moves it."""
    with stages() as stage:
        yield stage(description)
