"""What every answer opens with: the checkpoint it is about, and its training step where known."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import sample
from ..core.errors import EmbscopeError, Message, Option
from . import console, jsonout
from .jsonout import Document

if TYPE_CHECKING:
    from ..embeddings import Embeddings


def checkpoint_line(emb: Embeddings) -> str:
    """The first line of every command's console output (plain text: `show` escapes it)."""
    step = emb.checkpoint.step
    if emb.is_sample:
        at = f", step {step}" if step is not None else ""
        own = Option("path", metavar="PATH")
        return Message(f"checkpoint: bundled sample ({sample.DESCRIPTION}{at}); pass ", own, " for your own")
    at = f"step {step}" if step is not None else "step unknown"
    snapshot = getattr(emb, "snapshot", None)
    if snapshot is not None:  # a model id: what was asked for, and which files answered
        return f"checkpoint: {snapshot.describe()}: {emb.checkpoint.path} ({at})"
    return f"checkpoint: {emb.checkpoint.path} ({at})"


def place(emb: Embeddings, path: object) -> str:
    """A file that came with the checkpoint, as the console names it: inside the bundled sample, by its place in the
    sample (not the installed package's absolute path); else as it was reached."""
    if emb.is_sample:
        try:
            return f"{Path(str(path)).relative_to(sample.sample_directory())} (bundled sample)"
        except (ValueError, OSError, EmbscopeError):
            pass
    return str(path)


def with_checkpoint(document: Document, emb: Embeddings) -> Document:
    """A command's JSON document with the top-level "checkpoint" (path) and "step" (null when unknown) keys first,
    and for a model id from the Hugging Face cache, "model_id", "revision" and "snapshot" (the commit)."""
    snapshot = getattr(emb, "snapshot", None)
    hub = {} if snapshot is None else {"model_id": snapshot.model_id, "revision": snapshot.revision,
                                       "snapshot": snapshot.commit}
    return {"checkpoint": str(emb.checkpoint.path), "step": emb.checkpoint.step, **hub, **document}


def show(emb: Embeddings) -> None:
    """Print the checkpoint line: the first line of a command's console output."""
    console.out.print(console.safe(checkpoint_line(emb)), soft_wrap=True)


def emit(document: Document, emb: Embeddings, stream: tuple[str, Iterable[Any]] | None = None) -> None:
    """Print a command's one JSON document, about the checkpoint it names (`stream`: see jsonout.emit)."""
    jsonout.emit(with_checkpoint(document, emb), stream)
