"""The ANDREA engine's flat float32 dump: little-endian `int32 step`, `int32 n_params`, `n_params`
float32 weights, usually followed by the Adam first and second moments (file size 8 + 4n or 8 + 12n).

The file records no shapes. The weights start with the token table (V, d), then the position table
(T, d), then, for an untied model, the output head (V, d), then per layer four d x d attention
matrices and two d x 4d MLP matrices (no biases, no norm weights). V, d and T come from the JSON
files the engine writes beside the dump (a training config, a "portable" model) or from flags.
Only the header is read to check the file; the tables are memory-mapped at their offsets."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ..core import files
from ..core.checkpoint import Checkpoint, TensorInfo
from ..core.errors import CheckpointError, Message, Option, OptionError, joined
from ..core.text import printable
from ..storage.base import OpenOptions
from ..storage.checks import MAX_ELEMENTS, map_array
from ..storage.constants import (
    CONTEXT_KEYS,
    HEAD_KEYS,
    LAYER_KEYS,
    TIED_KEYS,
    VOCAB_KEYS,
    WIDTH_KEYS,
)
from .andrea_configs import FLOAT_BYTES, HEADER, Configs, expected_sizes, places, read_configs


@dataclass
class Found:
    """A number the model's files or flags give, and which of them gave it."""

    value: int | bool
    where: str  # "vocab_size in config.json", or the option that gave it (`vocab_size`)


@dataclass
class Shapes:
    """What the JSON files and flags say about the model, and where each number came from."""

    vocab: Found | None = None
    width: Found | None = None
    context: Found | None = None
    layers: Found | None = None
    heads: Found | None = None
    tied: Found | None = None
    config: dict[str, Any] = field(default_factory=dict)  # every config file's top level, merged in name order
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def as_count(value: object, key: str, where: str, strict: bool) -> int | None:
    """A JSON integer from 1 to 2^48, else None; anything else under a model key at a file's top level is an
    error ("10" as a string, 1e300, true), while nested objects such as an optimizer's may use the same
    short keys for other things."""
    if type(value) is int and 0 < value <= MAX_ELEMENTS:
        return value
    if strict:
        raise CheckpointError(f"{where}: {printable(key)} is {json_text(value)}, expected a positive integer")
    return None


def as_flag(value: object, key: str, where: str, strict: bool) -> bool | None:
    if isinstance(value, bool):
        return value
    if strict:
        raise CheckpointError(f"{where}: {printable(key)} is {json_text(value)}, expected true or false")
    return None


def json_text(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:40] + "..."


def find(configs: Configs, keys: tuple[str, ...], flag: bool = False) -> Found | None:
    """The first key (in priority order) present anywhere; one key with two different values is an error."""
    for key in keys:
        found: list[tuple[Found, bool]] = []
        for where, doc, nested in places(configs):
            if key not in doc:
                continue
            value = (as_flag if flag else as_count)(doc[key], key, where, not nested)
            if value is not None:
                found.append((Found(value, f"{key} in {where}"), nested))
        # a file's top level speaks before the objects nested in it
        top = [f for f, nested in found if not nested] or [f for f, _ in found]
        if top:
            if len({f.value for f in top}) > 1:
                listed = ", ".join(f"{f.value} ({f.where})" for f in top)
                raise CheckpointError(f"the JSON files beside the checkpoint disagree on {key}: {listed}")
            return top[0]
    return None


def shape_option(name: str) -> Option:
    """An OpenOptions field that gives a shape, named as itself where a config key could be meant."""
    return Option(name, noun=name)


def from_flag(value: int | None, flag: str) -> Found | None:
    if value is None:
        return None
    if value <= 0:
        raise OptionError(Message(Option(flag, value), ": expected a positive integer"), option=flag)
    return Found(value, Message(shape_option(flag)))


def read_shapes(directory: Path, options: OpenOptions) -> Shapes:
    notes: list[str] = []
    configs = read_configs(directory, notes)
    shapes = Shapes(files=[printable(name) for name, _ in configs], notes=notes)
    for name, doc in configs:
        shapes.config.update(doc)
    for attr, keys, flag_value, flag in (("vocab", VOCAB_KEYS, options.vocab_size, "vocab_size"),
                                         ("width", WIDTH_KEYS, options.d_model, "d_model"),
                                         ("context", CONTEXT_KEYS, options.context, "context")):
        given = from_flag(flag_value, flag)
        try:
            in_files = find(configs, keys)
        except CheckpointError:
            if given is None:
                raise
            in_files = None  # the flag settles it; the files' quarrel does not matter
        if given is not None and in_files is not None and in_files.value != given.value:
            notes.append(Message(Option(flag, given.value), f" overrides {in_files.where} ({in_files.value})"))
        setattr(shapes, attr, given or in_files)
    shapes.layers = find(configs, LAYER_KEYS)
    shapes.heads = find(configs, HEAD_KEYS)
    shapes.tied = find(configs, TIED_KEYS, flag=True)
    return shapes


def missing_shapes_error(name: str, shapes: Shapes) -> CheckpointError:
    wanted = (("vocab", shape_option("vocab_size"), VOCAB_KEYS), ("width", shape_option("d_model"), WIDTH_KEYS),
              ("context", shape_option("context"), CONTEXT_KEYS))
    missing = [(flag, keys) for attr, flag, keys in wanted if getattr(shapes, attr) is None]
    flags = joined(" and ", [Message(flag) for flag, _ in missing])
    keys = joined("; ", [Message(flag, f": {', '.join(k)}") for flag, k in missing])
    read = f"read {', '.join(shapes.files)}" if shapes.files else "found no JSON config beside it"
    return CheckpointError(Message(f"{name}: an ANDREA dump does not record its table shapes; pass ", flags,
                                   ", or put them in a JSON file beside it (keys looked for, ", keys, f"; {read})"),
                           option=missing[0][0])


def read_header(path: Path) -> tuple[int, int, int]:
    """step, n_params and the file size, after checking that the size is one the header allows."""
    name = printable(path.name)
    fd, info = files.open_fd(path, "a checkpoint file")
    try:
        size, head = info.st_size, os.pread(fd, HEADER.size, 0)
    except OSError as err:
        raise CheckpointError(f"{name}: cannot read the file ({err.strerror})") from None
    finally:
        os.close(fd)
    if len(head) < HEADER.size:
        raise CheckpointError(f"{name}: expected an 8-byte ANDREA header (int32 step, int32 n_params), "
                              f"found {len(head)} bytes")
    step, n = HEADER.unpack(head)
    if n <= 0:
        raise CheckpointError(f"{name}: header says n_params={n}, expected a positive parameter count")
    weights_only, with_adam = expected_sizes(n)
    if size not in (weights_only, with_adam):
        raise CheckpointError(f"{name}: header says n_params={n}, so the file should be {weights_only} or "
                              f"{with_adam} bytes, found {size}")
    return step, n, size


def layout_params(vocab: int, width: int, context: int, layers: int, tied: bool) -> int:
    """ANDREA's parameter count: tables, the head when untied, and per layer 4 d x d + 2 d x 4d matrices."""
    head = 0 if tied else vocab * width
    return (vocab + context) * width + head + layers * (4 * width * width + 2 * width * 4 * width)


def choose_tied(n: int, vocab: int, width: int, context: int, shapes: Shapes) -> tuple[bool, str]:
    """Tied or untied, and why: the config's word, else the layout formula, else whether a head fits."""
    if shapes.tied is not None:
        tied = bool(shapes.tied.value)
        return tied, f"{'tied' if tied else 'untied'} output head, as {shapes.tied.where} says"
    if shapes.layers is not None:
        layers = shapes.layers.value
        counts = {tied: layout_params(vocab, width, context, layers, tied) for tied in (False, True)}
        matches = [tied for tied, count in counts.items() if count == n]
        if len(matches) == 1:
            tied = matches[0]
            return tied, (f"{'tied' if tied else 'untied'} output head: n_params={n:,} is the ANDREA layout for "
                          f"{layers} layers {'without' if tied else 'with'} a separate head")
        mismatch = (f"n_params={n:,} matches neither ANDREA layout for {layers} layers "
                    f"(untied {counts[False]:,}, tied {counts[True]:,}); ")
    else:
        mismatch = "no tied flag or layer count in the config; "
    fits = (2 * vocab + context) * width <= n
    if fits:
        return False, mismatch + f"assumed untied: an output head ({vocab} x {width}) fits after the position table"
    return True, mismatch + f"assumed tied: no room for an output head ({vocab} x {width}) after the position table"


def check_tables_fit(name: str, n: int, vocab: int, width: int, context: int, tied: bool) -> None:
    needed = (vocab + context) * width + (0 if tied else vocab * width)
    if needed <= n:
        return
    tables = f"token ({vocab} x {width}) and position ({context} x {width}) tables"
    if not tied:
        tables += f" and an untied output head ({vocab} x {width})"
    raise CheckpointError(f"{name}: {tables} need {needed:,} floats, the header has {n:,}")


def table(path: Path, name: str, first_float: int, rows: int, width: int) -> TensorInfo:
    read = partial(map_array, path, np.dtype("<f4"), HEADER.size + FLOAT_BYTES * first_float, (rows, width),
                   f"{printable(path.name)}: table data")
    return TensorInfo(name, (rows, width), "float32", read, storage=(str(path), first_float))


def open_andrea(path: Path, options: OpenOptions) -> Checkpoint:
    name = printable(path.name)
    step, n, size = read_header(path)
    shapes = read_shapes(path.parent, options)
    if shapes.vocab is None or shapes.width is None or shapes.context is None:
        raise missing_shapes_error(name, shapes)
    vocab, width, context = shapes.vocab.value, shapes.width.value, shapes.context.value
    check_tables_fit(name, n, vocab, width, context, tied=True)  # the two tables must fit whatever the head
    tied, why = choose_tied(n, vocab, width, context, shapes)
    check_tables_fit(name, n, vocab, width, context, tied)

    tensors = {"token_emb": table(path, "token_emb", 0, vocab, width),
               "pos_emb": table(path, "pos_emb", vocab * width, context, width)}
    if not tied:
        tensors["lm_head"] = table(path, "lm_head", (vocab + context) * width, vocab, width)
    catalogued = sum(t.numel for t in tensors.values())

    notes: list[str] = [Message(f"shapes: V={vocab} (", shapes.vocab.where, f"), d={width} (", shapes.width.where,
                                f"), T={context} (", shapes.context.where, ")")]
    if shapes.layers is not None or shapes.heads is not None:
        parts = [f"{label}={found.value} ({found.where})"
                 for label, found in (("layers", shapes.layers), ("heads", shapes.heads)) if found is not None]
        notes.append("model: " + ", ".join(parts))
    notes.append(why)
    if shapes.layers is not None and shapes.tied is not None:  # without a tied flag, choose_tied said it
        expected = layout_params(vocab, width, context, shapes.layers.value, tied)
        if expected != n:
            notes.append(f"n_params={n:,} differs from the ANDREA layout for {shapes.layers.value} layers "
                         f"({expected:,}); the tables are read at the layout's offsets anyway")
    if size == expected_sizes(n)[1]:
        notes.append("file also holds Adam moments (8 + 12n bytes)")
    notes.append(f"the other {n - catalogued:,} weights (the layers) are not catalogued as tensors; "
                 f"the parameter total is the header's n_params={n:,}")
    notes.extend(shapes.notes)
    return Checkpoint(path, tensors, step=step, config=shapes.config,
                      declared_params=n, tied=tied, notes=notes)
