"""Hugging Face's config.json beside the weights, which open_checkpoint reads for every format: apart from the
state-dict readers, so that a format that needs none (safetensors, GGUF) is opened without them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..core import files
from ..core.errors import CheckpointError, message_of
from ..storage.constants import HF_CONFIG

MAX_CONFIG_BYTES = 16 * 1024 * 1024  # a config.json larger than this is not a config


def read_hf_config(directory: Path, notes: list[str] | None = None) -> dict[str, Any]:
    """Hugging Face's config.json beside the weights, when there is a readable one: a regular file of a
    sane size holding a JSON object (a FIFO or a link to /dev/zero there must not hang the open). One that is
    there but cannot be used is passed over, with a note in `notes` (its settings would have changed the answer)."""
    path = directory / HF_CONFIG
    found = files.status(path)
    if found is None and not os.path.lexists(path):
        return {}
    config: Any = None
    # a link that leads to no file (dangling: a cache whose blob is gone; a loop of links) is there but unusable
    problem = files.not_regular(found.st_mode) if found is not None else "a link that leads to no file"
    if problem is None:
        try:
            config = files.read_json(path, MAX_CONFIG_BYTES, "a config.json")
        except CheckpointError as err:  # unreadable, too large
            problem = message_of(err)
        except (ValueError, RecursionError):  # not UTF-8, not JSON
            problem = "a file that is not JSON"
        else:
            problem = None if isinstance(config, dict) else "JSON that is not an object"
    if problem is not None:
        if notes is not None:
            notes.append(f"{HF_CONFIG} beside the weights is not used: expected a JSON object, found {problem}")
        return {}
    return dict(config)
