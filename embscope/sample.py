"""Where the sample model shipped with embscope lives, installed or in a checkout."""

from __future__ import annotations

from pathlib import Path

from .errors import CheckpointError

DEFAULT = Path("nlm") / "model.pkl"  # the pickled params dict: opens without importing torch


def sample_directory() -> Path:
    # installed: package data under embscope/sample_checkpoints; in a checkout: ../sample_checkpoints
    here = Path(__file__).resolve().parent
    for candidate in (here / "sample_checkpoints", here.parent / "sample_checkpoints"):
        if (candidate / DEFAULT).is_file():
            return candidate
    raise CheckpointError("expected the sample model shipped with embscope, found none; pass a checkpoint with -c")


def default_checkpoint() -> Path:
    return sample_directory() / DEFAULT
