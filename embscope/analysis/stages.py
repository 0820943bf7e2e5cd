"""Progress for work done in named stages: the analysis calls back, rendering draws the bars (render.progress)."""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[int, int], None]  # (done, total)
Stages = Callable[[str], Progress]  # a fresh progress callback for each named stage of the work


def quiet(_: str) -> Progress:
    """Stages nobody watches."""
    return lambda done, total: None
