"""Where the sample model shipped with embscope lives, installed or in a checkout, and how answers name it."""

from __future__ import annotations

from pathlib import Path

from .core.errors import CheckpointError, Message, Option

DEFAULT = Path("nlm") / "model.pkl"  # the pickled params dict: opens without importing torch
DESCRIPTION = "Shakespeare GPT"  # what the sample is, in the line that opens every answer about it


def sample_directory() -> Path:
    # installed: package data under embscope/sample_checkpoints; in a checkout: ../sample_checkpoints
    here = Path(__file__).resolve().parent
    for candidate in (here / "sample_checkpoints", here.parent / "sample_checkpoints"):
        if (candidate / DEFAULT).is_file():
            return candidate
    raise CheckpointError(Message("expected the sample model shipped with embscope, found none; pass a checkpoint "
                                  "with ", Option("path", noun="its path")))


def default_checkpoint() -> Path:
    return sample_directory() / DEFAULT


def is_sample(path: Path) -> bool:
    """Whether `path` is the shipped sample model (however it was reached)."""
    try:
        return Path(path).resolve() == default_checkpoint().resolve()
    except (CheckpointError, OSError):
        return False
