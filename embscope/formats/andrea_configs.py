"""The ANDREA dump's fixed header and the JSON files the engine writes beside it: what both the format's sniff
(sniffs.py, which must stay light) and its reader (andrea.py) read."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..core import files
from ..core.errors import CheckpointError
from ..core.text import printable
from ..storage.checks import is_regular_file
from ..storage.constants import CONTEXT_KEYS, VOCAB_KEYS, WIDTH_KEYS

HEADER = struct.Struct("<ii")  # step, n_params
FLOAT_BYTES = 4
MAX_JSON_BYTES = 16 * 1024 * 1024  # a "portable" model that carries its weights as JSON is not a config to parse
CACHED_DIRECTORIES = 16

# JSON files beside the dump that describe the tokenizer, not the model (harris_segments.json, vocab.json, ...)
NOT_CONFIG_WORDS = ("tokenizer", "segment", "vocab", "merges", "special_tokens", "added_tokens")


def config_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.json")
                  if is_regular_file(p) and not any(word in p.name.lower() for word in NOT_CONFIG_WORDS))


Configs = list[tuple[str, dict[str, Any]]]  # (file name, its JSON object), in name order
Stamp = tuple[int, ...]  # (inode, size, mtime_ns) of a file; () where it cannot be looked at
# directory -> (its stamp, its JSON files with their stamps, what they held, the notes on skipped files): a scan
# of a directory sniffs every file in it, and each .bin asks for the configs; they are read once, not once per file
_read: dict[str, tuple[Stamp, tuple[tuple[str, Stamp], ...], Configs, list[str]]] = {}


def stamp(path: Path) -> Stamp:
    try:
        info = os.stat(path)
    except OSError:
        return ()
    return info.st_ino, info.st_size, info.st_mtime_ns


def read_configs(directory: Path, notes: list[str]) -> Configs:
    """Each readable JSON object beside the dump, by file name; files that are not one are noted and skipped."""
    key, now = str(directory), stamp(directory)
    cached = _read.get(key)
    if cached is not None and cached[0] == now and all(stamp(directory / n) == s for n, s in cached[1]):
        for name, _ in cached[1]:
            files.record(directory / name)  # read before, for this answer too
        notes.extend(cached[3])
        return cached[2]
    configs: Configs = []
    skipped: list[str] = []
    stamped = tuple((path.name, stamp(path)) for path in config_files(directory))  # stamped before they are read
    for path in (directory / name for name, _ in stamped):
        name = printable(path.name)
        found = files.status(path)
        if found is not None and found.st_size > MAX_JSON_BYTES:
            skipped.append(f"skipped {name}: larger than {MAX_JSON_BYTES // (1024 * 1024)} MiB, not a config")
            continue
        try:
            doc = files.read_json(path, MAX_JSON_BYTES, "a JSON config")
        except (CheckpointError, ValueError, RecursionError):  # ValueError: also json's limit on an integer's digits
            skipped.append(f"skipped {name}: not readable JSON")
            continue
        if isinstance(doc, dict):
            configs.append((path.name, doc))
    _read.pop(key, None)
    if len(_read) >= CACHED_DIRECTORIES:
        _read.pop(next(iter(_read)))
    _read[key] = (now, stamped, configs, skipped)
    notes.extend(skipped)
    return configs


def places(configs: Configs) -> Iterator[tuple[str, dict[str, Any], bool]]:
    """(where, dict, nested) for each file's top level, then for each object nested one level down."""
    for name, doc in configs:
        yield printable(name), doc, False
    for name, doc in configs:
        for key, value in doc.items():
            if isinstance(value, dict):
                yield f"{printable(name)} under {printable(key)}", value, True


def expected_sizes(n: int) -> tuple[int, int]:
    """Weights only, and weights plus the two Adam moments."""
    return HEADER.size + FLOAT_BYTES * n, HEADER.size + 3 * FLOAT_BYTES * n


def has_andrea_config(directory: Path) -> bool:
    """A JSON file beside the dump names one of the table shapes."""
    keys = set(VOCAB_KEYS + WIDTH_KEYS + CONTEXT_KEYS)
    try:
        configs = read_configs(directory, [])
    except OSError:
        return False
    return any(keys & doc.keys() for _, doc, _ in places(configs))
