"""Pickled numpy models (the nlm layout): a dict with a "params" dict of arrays, or a flat dict of
arrays, in a .pkl file or a .npy object array. Read with the restricted unpickler, never plain pickle."""

from __future__ import annotations

import pickletools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..checkpoint import Checkpoint, TensorInfo
from ..errors import CheckpointError
from ..memory import require_memory
from ..text import quote
from . import Format, OpenOptions, register
from ._unpickle import NUMPY_GLOBALS, restricted_load

PICKLE_SUFFIXES = (".pkl", ".pickle", ".p")
STEP_KEYS = ("step", "iter_num", "global_step", "iteration")  # epoch counts passes, not steps
CONFIG_KEYS = ("config", "model_args")  # later ones win: model_args holds the shapes
PLAIN_TYPES = (str, int, float, bool, type(None))  # config values kept; tensors and objects are not settings
IGNORED_KEYS = frozenset({"optimizer", "opt_state", "optimizer_state", "optim", "adam", "rng", "rng_state"})
# torch's legacy format opens with the pickled magic number 0x1950a86a20f9469cfc6c (protocol 2, LONG1)
TORCH_LEGACY_HEAD = b"\x80\x02\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little")


def is_torch_legacy(head: bytes) -> bool:
    return head.startswith(TORCH_LEGACY_HEAD)


OPCODES = frozenset(op.code for op in pickletools.opcodes)


def looks_like_pickle(path: Path, head: bytes, size: int) -> bool:
    if is_torch_legacy(head):
        return False
    # PROTO, a protocol number, then an opcode: an int32 such as an ANDREA step of 640 fails the third test
    has_magic = len(head) >= 3 and head[0] == 0x80 and 2 <= head[1] <= 5 and chr(head[2]) in OPCODES
    return has_magic or path.suffix.lower() in PICKLE_SUFFIXES


def plain_value(value: Any) -> Any:
    """numpy scalars and 0-d arrays as Python numbers, so config lookups see plain ints."""
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "biuf":
        return value.item()
    if isinstance(value, np.generic):
        return value.item()
    return value


def step_value(value: Any) -> int | None:
    value = plain_value(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if float(value).is_integer() else None


def find_step(doc: dict) -> int | None:
    for key in STEP_KEYS:
        if key in doc:
            step = step_value(doc[key])
            if step is not None:
                return step
    return None


def find_config(doc: dict) -> dict:
    config = {}
    for key in CONFIG_KEYS:
        if isinstance(doc.get(key), dict):
            values = {str(k): plain_value(v) for k, v in doc[key].items()}
            config.update({k: v for k, v in values.items() if isinstance(v, PLAIN_TYPES)})
    return config


MAX_DEPTH = 32  # a pickle can nest without end, or hold itself


def flatten(value: Any, prefix: str = "", depth: int = 0, where: str = "") -> Iterator[tuple[str, Any]]:
    """Nested dicts and lists of arrays, as dotted names: params["layer0"]["attn"]["q"] -> layer0.attn.q."""
    if isinstance(value, (dict, list, tuple)) and depth >= MAX_DEPTH:
        raise CheckpointError(f"{where}: expected values nested at most {MAX_DEPTH} deep, found deeper nesting "
                              f"(or a container holding itself) at {quote(prefix[:80])}")
    if isinstance(value, dict):
        for key, item in value.items():
            yield from flatten(item, f"{prefix}{key}.", depth + 1, where)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from flatten(item, f"{prefix}{index}.", depth + 1, where)
    else:
        yield prefix[:-1], value


def array_tensor(path: Path, name: str, array: np.ndarray) -> TensorInfo | None:
    """An unpickled array, already in memory; the same array object under two names is one storage
    (the reader keeps the array alive, so its id stays unique)."""
    if array.dtype.kind not in "biuf":
        return None
    dtype = array.dtype.newbyteorder("=").name
    return TensorInfo(name, tuple(array.shape), dtype, lambda: array, storage=(str(path), "pickle", id(array)))


def checkpoint_from(path: Path, obj: Any, format_name: str) -> Checkpoint:
    where = quote(path)
    if not isinstance(obj, dict):
        raise CheckpointError(f"{where}: expected a pickled dict of arrays (or a dict with \"params\"), "
                              f"found {type(obj).__name__}")
    if "params" in obj:
        if not isinstance(obj["params"], dict):
            raise CheckpointError(f"{where}: expected \"params\" to be a dict of arrays, found "
                                  f"{type(obj['params']).__name__}")
        arrays, step, config = obj["params"], find_step(obj), find_config(obj)
    else:
        arrays = {k: v for k, v in obj.items() if k not in IGNORED_KEYS and k not in STEP_KEYS and k not in CONFIG_KEYS}
        step, config = find_step(obj), find_config(obj)
    tensors, skipped = {}, 0
    for name, value in flatten(arrays, where=where):
        tensor = array_tensor(path, name, value) if isinstance(value, np.ndarray) else None
        if tensor is None:
            skipped += isinstance(value, np.ndarray)
            continue
        tensors[name] = tensor
    if not tensors:
        raise CheckpointError(f"{where}: expected numeric numpy arrays in the pickled dict, found none")
    notes = [f"{skipped} non-numeric arrays skipped"] if skipped else []
    return Checkpoint(path, format_name, tensors, step=step, config=config, notes=notes)


def open_pickle(path: Path, options: OpenOptions) -> Checkpoint:
    # a pickle cannot be memory-mapped: its bytes and the arrays built from them are both in memory
    require_memory(2 * path.stat().st_size, quote(path))
    try:
        data = path.read_bytes()
    except OSError as err:
        raise CheckpointError(f"cannot read {quote(path)}: {err.strerror}") from None
    obj = restricted_load(data, NUMPY_GLOBALS, quote(path), trust=options.trust_pickle)
    return checkpoint_from(path, obj, "nlm params pickle")


def open_object_npy(path: Path, offset: int, options: OpenOptions) -> Checkpoint:
    """A dict saved with np.save(path, obj, allow_pickle=True): a 0-d object array pickled after the header."""
    where = quote(path)
    require_memory(2 * path.stat().st_size, where)
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read()
    array = restricted_load(data, NUMPY_GLOBALS, where, trust=options.trust_pickle)
    if not (isinstance(array, np.ndarray) and array.shape == () and array.dtype.hasobject):
        raise CheckpointError(f"{where}: expected a pickled dict saved with np.save, found "
                              f"{type(array).__name__} of shape {getattr(array, 'shape', '?')}")
    return checkpoint_from(path, array.item(), "numpy .npy (pickled dict)")


register(Format("nlm params pickle", looks_like_pickle, open_pickle, priority=30))
