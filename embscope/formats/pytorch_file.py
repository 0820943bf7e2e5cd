"""PyTorch `.pt/.pth/.bin`: a raw state dict or a nanoGPT-style dict holding one. The zip format is
read without importing torch; the legacy format needs torch.load (weights_only=True unless --trust-pickle)."""

from __future__ import annotations

import pickle
import re
import zipfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ..arrays import to_float32
from ..checkpoint import Checkpoint, TensorInfo
from ..errors import CheckpointError, UnsafePickleError
from ..memory import require_memory
from ..text import quote
from . import Format, OpenOptions, register
from ._torch_zip import TORCH_GLOBALS, UNTYPED, Storage, TensorRecord, data_pickle_name, load_zip, read_tensor
from ._unpickle import numpy_module, restricted_load
from ._zip import ZIP_DAMAGE
from .pickled import (
    CONFIG_KEYS,
    IGNORED_KEYS,
    STEP_KEYS,
    array_tensor,
    find_config,
    find_step,
    flatten,
    is_torch_legacy,
)

STATE_DICT_KEYS = ("model", "state_dict", "model_state_dict", "module")
TORCH_SUFFIXES = (".pt", ".pth", ".ckpt")  # .bin is left out: an ANDREA dump may start with PK by chance
# prefixes every tensor name gets from a wrapper, and the wrapper that adds it
WRAPPER_PREFIXES = (("_orig_mod.", "torch.compile"), ("module.", "DistributedDataParallel"))


def has_tensors(value: Any, is_tensor: Callable[[Any], bool], where: str) -> bool:
    return isinstance(value, dict) and any(is_tensor(v) for _, v in flatten(value, where=where))


def state_dict_of(path: Path, obj: Any, is_tensor: Callable[[Any], bool]) -> dict:
    if not isinstance(obj, dict):
        raise CheckpointError(f"{quote(path)}: expected a state dict or a dict holding one, found {type(obj).__name__}")
    for key in STATE_DICT_KEYS:
        if has_tensors(obj.get(key), is_tensor, quote(path)):
            return obj[key]
    if has_tensors(obj, is_tensor, quote(path)):
        return {k: v for k, v in obj.items() if k not in IGNORED_KEYS | set(STEP_KEYS) | set(CONFIG_KEYS)}
    raise CheckpointError(f"{quote(path)}: expected tensors in the file (a state dict, or one under "
                          f"{', '.join(repr(k) for k in STATE_DICT_KEYS)}), found none")


def strip_wrapper_prefixes(names: list[str]) -> tuple[dict[str, str], list[str]]:
    """Stored name -> name without the prefix torch.compile or DDP adds to every tensor."""
    renamed, notes = {n: n for n in names}, []
    changed = True
    while changed and renamed:
        changed = False
        for prefix, wrapper in WRAPPER_PREFIXES:
            if all(new.startswith(prefix) for new in renamed.values()):
                renamed = {old: new[len(prefix):] for old, new in renamed.items()}
                notes.append(f"stripped the {prefix!r} prefix {wrapper} adds to every tensor name")
                changed = True
    return renamed, notes


def build_checkpoint(path: Path, obj: Any, is_tensor: Callable[[Any], bool],
                     tensor_info: Callable[[str, Any], TensorInfo | None], scalar: Callable[[Any], Any],
                     notes: list[str]) -> Checkpoint:
    state = state_dict_of(path, obj, is_tensor)
    found = [(name, value) for name, value in flatten(state, where=quote(path)) if is_tensor(value)]
    renamed, prefix_notes = strip_wrapper_prefixes([name for name, _ in found])
    tensors, unreadable = {}, set()
    for name, value in found:
        info = tensor_info(renamed[name], value)
        if info is None:
            unreadable.add(name)
            continue
        tensors[info.name] = info
    if unreadable:
        notes.append(f"{len(unreadable)} tensors of element types numpy cannot hold were skipped "
                     f"(e.g. {sorted(unreadable)[0]})")
    if not tensors:
        raise CheckpointError(f"{quote(path)}: expected tensors numpy can read in the state dict, found none")
    top = {k: scalar(v) for k, v in obj.items()} if isinstance(obj, dict) else {}
    return Checkpoint(path, "pytorch", tensors, step=find_step(top), config=find_config(top),
                      notes=prefix_notes + notes)


# --- the zip format, read without torch ---

def record_info(path: Path, byteorder: str, name: str, record: TensorRecord) -> TensorInfo | None:
    if record.kind.dtype is None:
        return None
    storage = (str(path), record.storage.key, record.offset * record.kind.itemsize)
    return TensorInfo(name, record.size, record.kind.dtype, partial(read_tensor, path, record, byteorder), storage)


def zip_value(path: Path, byteorder: str, value: Any) -> Any:
    """A one-element tensor beside the state dict (a step saved as a tensor) as a Python number."""
    if isinstance(value, TensorRecord) and value.numel == 1 and value.kind.dtype is not None:
        raw = read_tensor(path, value, byteorder).reshape(())
        return (to_float32(raw, "bfloat16") if value.kind.dtype == "bfloat16" else raw).item()
    return value


def open_zip(path: Path, options: OpenOptions) -> Checkpoint:
    obj, byteorder = load_zip(path, options.trust_pickle)

    def tensor_info(name: str, value: Any) -> TensorInfo | None:
        if isinstance(value, np.ndarray):
            return array_tensor(path, name, value)
        return record_info(path, byteorder, name, value)

    return build_checkpoint(path, obj, lambda v: isinstance(v, (TensorRecord, np.ndarray)), tensor_info,
                            partial(zip_value, path, byteorder), [])


def looks_like_torch_zip(path: Path, head: bytes, size: int) -> bool:
    if not head.startswith(b"PK\x03\x04"):
        return False
    try:
        with zipfile.ZipFile(path) as zf:
            return data_pickle_name(zf.namelist()) is not None
    except ZIP_DAMAGE:
        return path.suffix.lower() in TORCH_SUFFIXES  # a broken .pt should hear why it is broken, not "unknown"


# --- the legacy format (torch.save(..., _use_new_zipfile_serialization=False)), through torch ---

def numpy_safe_globals() -> list:
    """numpy arrays and scalars in a legacy file, for torch's weights_only unpickler (under both module names)."""
    multiarray = numpy_module("numpy._core.multiarray", "numpy.core.multiarray")
    allowed = [np.ndarray, np.dtype]
    for package in ("numpy.core", "numpy._core"):
        allowed += [(multiarray._reconstruct, f"{package}.multiarray._reconstruct"),
                    (multiarray.scalar, f"{package}.multiarray.scalar")]
    allowed += [type(np.dtype(t)) for t in ("f2", "f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "?")]
    return allowed


def torch_array(tensor) -> np.ndarray:
    import torch
    tensor = tensor.detach()
    if tensor.dtype == torch.bfloat16:  # numpy has no bfloat16: keep its bits, as every reader does
        return tensor.view(torch.int16).numpy().view(np.uint16)
    return tensor.numpy()


def torch_tensor_info(path: Path, name: str, tensor) -> TensorInfo | None:
    dtype = str(tensor.dtype).removeprefix("torch.")
    if dtype not in ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
                     "uint16", "uint32", "uint64"):
        return None
    storage = (str(path), "legacy", tensor.untyped_storage().data_ptr(), tensor.storage_offset() * tensor.element_size())
    return TensorInfo(name, tuple(tensor.shape), dtype, partial(torch_array, tensor), storage)


def refused_global(message: str) -> str | None:
    found = re.search(r"GLOBAL ([\w.]+)", message)
    return found.group(1) if found else None


LEGACY_PICKLES = 4  # magic number, protocol version, system info, then the object; raw storages follow


def scan_legacy(path: Path, where: str) -> None:
    """Run the legacy file's pickles through our own allow-list first, so a refusal names the global
    as Python 3 resolves it (torch's message spells some names the Python 2 way, or drops the module)."""
    placeholder = Storage("?", UNTYPED, 1 << 62, None, "?")  # shapes are checked by torch.load, later
    with open(path, "rb") as f:
        for _ in range(LEGACY_PICKLES):
            restricted_load(f, TORCH_GLOBALS, where, persistent_load=lambda pid: placeholder)


def open_legacy(path: Path, options: OpenOptions) -> Checkpoint:
    where = quote(path)
    if not options.trust_pickle:
        scan_legacy(path, f"{where} (legacy PyTorch file)")
    try:
        import torch
    except ImportError:
        raise CheckpointError(f"{where} is a legacy (pre-zip) PyTorch file, which needs torch to read, and torch "
                              "is not installed (pip install torch, or re-save the file with a current torch)") from None
    require_memory(path.stat().st_size, f"{where} (legacy PyTorch file, read whole)")
    try:
        with torch.serialization.safe_globals(numpy_safe_globals()):
            obj = torch.load(path, weights_only=not options.trust_pickle, map_location="cpu")
    except pickle.UnpicklingError as err:
        name = refused_global(str(err))
        if name is None:
            raise CheckpointError(f"{where}: expected a readable legacy PyTorch file ({str(err).splitlines()[0][:200]})") from None
        raise UnsafePickleError(f"{where}: refused to unpickle global {name!r}: the file may only hold arrays, "
                                "tensors and plain containers, and nothing in it was run "
                                "(use --trust-pickle only for files you made)") from None
    except Exception as err:
        lines = str(err).splitlines()
        raise CheckpointError(f"{where}: expected a readable legacy PyTorch file, torch.load failed "
                              f"({err.__class__.__name__}: {lines[0][:200] if lines else ''})") from None

    def scalar(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            return value.detach().float().item() if value.is_floating_point() else value.item()
        return value

    return build_checkpoint(path, obj, lambda v: isinstance(v, (torch.Tensor, np.ndarray)),
                            lambda name, v: array_tensor(path, name, v) if isinstance(v, np.ndarray)
                            else torch_tensor_info(path, name, v), scalar,
                            [f"legacy torch.save format: read with torch.load(weights_only={not options.trust_pickle}), "
                             "all tensors loaded into memory"])


register(Format("pytorch", looks_like_torch_zip, open_zip, priority=15))
register(Format("pytorch (legacy)", lambda path, head, size: is_torch_legacy(head), open_legacy, priority=25))
