"""What every answer opens with: the checkpoint it is about, and its training step where known."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .. import sample
from ..errors import EmbscopeError
from . import console, jsonout


def checkpoint_line(emb: Any) -> str:
    """The first line of every command's console output (plain text: `show` escapes it)."""
    step = emb.checkpoint.step
    if emb.is_sample:
        at = f", step {step}" if step is not None else ""
        return f"checkpoint: bundled sample ({sample.DESCRIPTION}{at}); pass -c PATH for your own"
    return f"checkpoint: {emb.checkpoint.path} ({f'step {step}' if step is not None else 'step unknown'})"


def place(emb: Any, path: object) -> str:
    """A file that came with the checkpoint, as the console names it: inside the bundled sample, by its place in the
    sample (not the installed package's absolute path); else as it was reached."""
    if emb.is_sample:
        try:
            return f"{Path(str(path)).relative_to(sample.sample_directory())} (bundled sample)"
        except (ValueError, OSError, EmbscopeError):
            pass
    return str(path)


def with_checkpoint(document: dict, emb: Any) -> dict:
    """A command's JSON document with the top-level "checkpoint" (path) and "step" (null when unknown) keys first."""
    return {"checkpoint": str(emb.checkpoint.path), "step": emb.checkpoint.step, **document}


def show(emb: Any) -> None:
    """Print the checkpoint line: the first line of a command's console output."""
    console.out.print(console.safe(checkpoint_line(emb)), soft_wrap=True)


def emit(document: dict, emb: Any, stream: tuple[str, Iterable[Any]] | None = None) -> None:
    """Print a command's one JSON document, about the checkpoint it names (`stream`: see jsonout.emit)."""
    jsonout.emit(with_checkpoint(document, emb), stream)
