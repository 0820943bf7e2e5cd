"""Pickled numpy models (the nlm layout): a dict with a "params" dict of arrays, or a flat dict of
arrays, in a .pkl file or a .npy object array. Read with the restricted unpickler, never plain pickle:
the arrays come out as descriptions, checked against their bytes and made only when read."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..core import files
from ..core.checkpoint import Checkpoint
from ..core.errors import CheckpointError
from ..core.memory import require_memory
from ..core.text import quote
from ..storage.base import OpenOptions
from ..storage.descriptors import check_array
from ..storage.unpickle import NUMPY_GLOBALS, PickledArray, restricted_load
from ._state_dict import array_tensor, find_config, find_step, flatten, not_weights


# every opcode: pickle's one-byte constants (the same set as pickletools.opcodes, which costs 2 ms to import)
def checkpoint_from(path: Path, obj: Any) -> Checkpoint:
    where = quote(path)
    if not isinstance(obj, dict):
        raise CheckpointError(f"{where}: expected a pickled dict of arrays (or a dict with \"params\"), "
                              f"found {type(obj).__name__}")
    if "params" in obj:
        if not isinstance(obj["params"], dict):
            raise CheckpointError(f"{where}: expected \"params\" to be a dict of arrays, found "
                                  f"{type(obj['params']).__name__}")
        arrays = obj["params"]
    else:
        arrays = {k: v for k, v in obj.items() if not not_weights(k)}
    tensors, skipped = {}, 0
    for name, value in flatten(arrays, where=where):
        if not isinstance(value, PickledArray):
            continue
        tensor = array_tensor(path, name, value)
        if tensor is None:
            skipped += 1
            continue
        tensors[name] = tensor
    if not tensors:
        raise CheckpointError(f"{where}: expected numeric numpy arrays in the pickled dict, found none")
    notes = [f"{skipped} non-numeric arrays skipped"] if skipped else []
    return Checkpoint(path, tensors, step=find_step(obj), config=find_config(obj), notes=notes)


def read_pickle(path: Path, offset: int, options: OpenOptions) -> Any:
    # a pickle cannot be memory-mapped: the arrays' bytes are read into memory as the unpickler meets them
    # (streamed from the file, not read whole first: one copy of a few MB, not two)
    handle = files.open_file(path, "a checkpoint file")
    with handle:
        require_memory(os.fstat(handle.fileno()).st_size - offset, quote(path))
        handle.seek(offset)
        return restricted_load(handle, NUMPY_GLOBALS, quote(path), trust=options.trust_pickle)


def open_pickle(path: Path, options: OpenOptions) -> Checkpoint:
    return checkpoint_from(path, read_pickle(path, 0, options))


def open_object_npy(path: Path, offset: int, options: OpenOptions) -> Checkpoint:
    """A dict saved with np.save(path, obj, allow_pickle=True): a 0-d object array pickled after the header."""
    where = quote(path)
    pickled = read_pickle(path, offset, options)
    array = pickled.description(where) if isinstance(pickled, PickledArray) else None
    if array is None or array.shape != () or array.dtype.kind != "O":
        found = (f"an array of shape {list(array.shape)} and dtype {array.dtype.code}" if array is not None
                 else f"a {type(pickled).__name__}")
        raise CheckpointError(f"{where}: expected a pickled dict saved with np.save, found {found}")
    check_array(array, where)
    return checkpoint_from(path, array.data[0])
