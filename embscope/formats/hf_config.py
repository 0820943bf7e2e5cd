"""Hugging Face's config.json beside the weights, which open_checkpoint reads for every format: apart from the
state-dict readers, so that a format that needs none (safetensors, GGUF) is opened without them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core import files
from ..core.errors import CheckpointError
from ..storage.constants import HF_CONFIG

MAX_CONFIG_BYTES = 16 * 1024 * 1024  # a config.json larger than this is not a config


def read_hf_config(directory: Path) -> dict[str, Any]:
    """Hugging Face's config.json beside the weights, when there is a readable one: a regular file of a
    sane size holding a JSON object (a FIFO or a link to /dev/zero there must not hang the open)."""
    path = directory / HF_CONFIG
    if not files.is_regular(path):
        return {}
    try:
        config = files.read_json(path, MAX_CONFIG_BYTES, "a config.json")
    except (CheckpointError, ValueError, RecursionError):  # unreadable, too large, not UTF-8, not JSON: no config
        return {}
    return config if isinstance(config, dict) else {}
