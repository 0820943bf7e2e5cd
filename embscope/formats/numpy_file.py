"""numpy `.npy` (one array, named after the file) and `.npz` (named arrays in a zip).
Headers are parsed without unpickling; plain arrays are memory-mapped when read, compressed members
inflated (bounded) one at a time."""

from __future__ import annotations

import io
import math
import os
import zipfile
from functools import partial
from pathlib import Path

import numpy as np

from ..core import files
from ..core.checkpoint import Checkpoint, TensorInfo
from ..core.errors import CheckpointError, UnsafePickleError
from ..core.memory import require_memory
from ..core.text import detail, printable, quote
from ..storage.base import DAMAGE, OpenOptions
from ..storage.checks import check_extent, map_array
from ..storage.constants import NUMPY_NUMERIC_KINDS, STEP_KEYS
from ..storage.unpickle import NUMPY_GLOBALS, restricted_load
from ._zip import data_offset, is_stored, open_zip, read_member
from .pickled import open_object_npy


def dtype_name(dtype: np.dtype, where: str) -> str:
    if dtype.hasobject:
        raise CheckpointError(f"{where}: holds pickled Python objects, not plain arrays")
    if dtype.kind not in NUMPY_NUMERIC_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise CheckpointError(f"{where}: expected numeric arrays, found dtype {printable(str(dtype))[:60]}")
    return dtype.newbyteorder("=").name
from .sniffs import MAX_HEADER, read_npy_header


def data_bytes(shape: tuple[int, ...], dtype: np.dtype) -> int:
    return math.prod(shape) * dtype.itemsize


def check_size(where: str, shape: tuple[int, ...], dtype: np.dtype, available: int) -> None:
    if data_bytes(shape, dtype) > available:
        raise CheckpointError(f"{where}: header declares {data_bytes(shape, dtype)} bytes of data, "
                              f"the file holds {available}")


def open_npy(path: Path, options: OpenOptions) -> Checkpoint:
    where = quote(path)
    with files.open_file(path, "a checkpoint file") as fp:
        shape, fortran, dtype = read_npy_header(fp, where)
        offset, size = fp.tell(), os.fstat(fp.fileno()).st_size
    name = dtype_name(dtype, where)
    check_size(where, shape, dtype, size - offset)
    info = TensorInfo(path.stem, shape, name, partial(map_array, path, dtype, offset, shape, where, fortran))
    return Checkpoint(path, {path.stem: info})


def open_pickled_npy(path: Path, options: OpenOptions) -> Checkpoint:
    """A dict saved with np.save(path, obj, allow_pickle=True): a 0-d object array pickled after the header."""
    with files.open_file(path, "a checkpoint file") as fp:
        read_npy_header(fp, quote(path))
        offset = fp.tell()
    return open_object_npy(path, offset, options)


def open_npz(path: Path, options: OpenOptions) -> Checkpoint:
    archive, zf = open_zip(path, ".npz zip")
    tensors: dict[str, TensorInfo] = {}
    step: int | None = None
    notes: list[str] = []
    with archive, zf:
        for info in zf.infolist():
            if not info.filename.endswith(".npy"):
                continue
            name = info.filename[: -len(".npy")]
            where = f"{quote(path)}: array {quote(name)}"
            try:
                head = io.BytesIO(read_member(path, info, where, limit=MAX_HEADER + 64))
                shape, fortran, dtype = read_npy_header(head, where)
                header_len = head.tell()
                if dtype.hasobject:
                    name_refused_global(path, info, header_len, where)
                dtype_str = dtype_name(dtype, where)
                if is_stored(info):  # the bytes really stored, which the mapping will read
                    check_size(where, shape, dtype, info.file_size - header_len)
                    start = data_offset(zf.fp, info, where) + header_len
                    check_extent(path, start, data_bytes(shape, dtype), where)
                    read = partial(map_array, path, dtype, start, shape, where, fortran)
                else:  # compressed members cannot be mapped; read that one member only, if memory allows
                    check_size(where, shape, dtype, info.file_size - header_len)
                    if info.file_size > header_len + data_bytes(shape, dtype):  # numpy writes nothing after
                        raise CheckpointError(f"{where}: the member holds {info.file_size - header_len} bytes of "
                                              f"data, more than the {data_bytes(shape, dtype)} its header declares")
                    read = partial(read_compressed, path, info, header_len, dtype, shape, fortran, where)
                if name in STEP_KEYS and shape == ():  # a 0-d counter saved beside the arrays
                    step = counter(read(), name, notes)
                    continue
            except DAMAGE as err:
                raise CheckpointError(f"{where}: expected a readable zip member, found damage ({detail(err)})") from None
            tensors[name] = TensorInfo(name, shape, dtype_str, read)
    return Checkpoint(path, tensors, step=step, notes=notes)


def name_refused_global(path: Path, info: zipfile.ZipInfo, header_len: int, where: str) -> None:
    """An object member is refused whatever it holds; when its pickle names a global outside the
    allow-list, the refusal names it (the restricted unpickler builds only descriptions, running nothing)."""
    require_memory(info.file_size, where)
    data = read_member(path, info, where)
    try:
        restricted_load(memoryview(data)[header_len:], NUMPY_GLOBALS, where)
    except UnsafePickleError:
        raise
    except CheckpointError:
        pass  # a broken pickle: the plain refusal that follows says enough


def counter(value: np.ndarray, name: str, notes: list[str]) -> int | None:
    """A step counter, or None (and a note) when it holds no whole number."""
    number = value.item()
    if isinstance(number, bool) or not float(number).is_integer():
        notes.append(f"the step counter {name!r} holds {number!r}, not a whole number: step unknown")
        return None
    return int(number)


def read_compressed(path: Path, info: zipfile.ZipInfo, header_len: int, dtype: np.dtype, shape: tuple[int, ...],
                    fortran: bool, where: str) -> np.ndarray:
    """One compressed member's array, inflated no further than its entry declares; read-only."""
    require_memory(info.file_size, where)
    data = read_member(path, info, where)
    array = np.frombuffer(data, dtype=dtype, count=math.prod(shape), offset=header_len)
    return array.reshape(shape, order="F" if fortran else "C")
