"""numpy `.npy` (one array, named after the file) and `.npz` (named arrays in a zip).
Headers are parsed without unpickling; plain arrays are memory-mapped when read."""

from __future__ import annotations

import tokenize
import zipfile
from functools import partial
from pathlib import Path

import numpy as np

from ..checkpoint import Checkpoint, TensorInfo
from ..errors import CheckpointError, UnsafePickleError
from ..memory import require_memory
from ..text import printable, quote
from . import Format, OpenOptions, register
from ._checks import check_extent, check_shape
from ._zip import ZIP_DAMAGE, data_offset, is_stored
from .pickled import STEP_KEYS

NPY_MAGIC = b"\x93NUMPY"


def read_npy_header(fp, where: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    try:
        version = np.lib.format.read_magic(fp)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fp)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fp, max_header_size=1 << 20)
    except (ValueError, EOFError, SyntaxError, TypeError, tokenize.TokenError, RecursionError, MemoryError) as err:
        detail = printable(str(err))[:120]
        raise CheckpointError(f"{where}: expected a .npy header, found one numpy cannot parse ({detail})") from None
    return check_shape(shape, where), fortran, dtype


def dtype_name(dtype: np.dtype, where: str) -> str:
    if dtype.hasobject:
        raise CheckpointError(f"{where}: holds pickled Python objects, not plain arrays")
    if dtype.kind not in "biuf":
        raise CheckpointError(f"{where}: expected numeric arrays, found dtype {dtype}")
    return dtype.newbyteorder("=").name


def mapped(path: Path, dtype: np.dtype, offset: int, shape: tuple[int, ...], fortran: bool) -> np.ndarray:
    if 0 in shape:
        return np.zeros(shape, dtype=dtype)
    # checked again now: the file may have shrunk since its header was read
    check_extent(path, offset, int(np.prod(shape, dtype=object)) * dtype.itemsize, f"{quote(path)}: array data")
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape, order="F" if fortran else "C")


def check_size(where: str, shape: tuple[int, ...], dtype: np.dtype, available: int) -> None:
    needed = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if needed > available:
        raise CheckpointError(f"{where}: header declares {needed} bytes of data, the file holds {available}")


def open_npy(path: Path, options: OpenOptions) -> Checkpoint:
    where = quote(path)
    with open(path, "rb") as fp:
        shape, fortran, dtype = read_npy_header(fp, where)
        offset = fp.tell()
    if dtype.hasobject:
        from .pickled import open_object_npy  # a pickled dict saved with np.save(allow_pickle=True)
        return open_object_npy(path, offset, options)
    name = dtype_name(dtype, where)
    check_size(where, shape, dtype, path.stat().st_size - offset)
    info = TensorInfo(path.stem, shape, name, partial(mapped, path, dtype, offset, shape, fortran))
    return Checkpoint(path, "numpy .npy", {path.stem: info})


def open_npz(path: Path, options: OpenOptions) -> Checkpoint:
    tensors, step = {}, None
    try:
        zf = zipfile.ZipFile(path)
    except ZIP_DAMAGE as err:
        raise CheckpointError(f"{quote(path)}: expected a readable .npz zip archive ({err})") from None
    notes = []
    with zf:
        for info in zf.infolist():
            if not info.filename.endswith(".npy"):
                continue
            name = info.filename[: -len(".npy")]
            where = f"{quote(path)}: array {quote(name)}"
            try:
                with zf.open(info) as member:
                    shape, fortran, dtype = read_npy_header(member, where)
                    header_len = member.tell()
                if dtype.hasobject:
                    name_refused_global(zf, info, header_len, where)
                dtype_str = dtype_name(dtype, where)
                if is_stored(info):  # the bytes really stored, which the mapping will read
                    check_size(where, shape, dtype, min(info.file_size, info.compress_size) - header_len)
                    start = data_offset(zf, info) + header_len
                    check_extent(path, start, int(np.prod(shape, dtype=object)) * dtype.itemsize, where)
                else:
                    check_size(where, shape, dtype, info.file_size - header_len)
                if name in STEP_KEYS and shape == ():  # a 0-d counter saved beside the arrays
                    with zf.open(info) as member:
                        step = counter(np.lib.format.read_array(member, allow_pickle=False), name, notes)
                    continue
            except ZIP_DAMAGE as err:
                raise damaged_member(where, err) from None
            if is_stored(info):
                read = partial(mapped, path, dtype, start, shape, fortran)
            else:  # compressed members cannot be mapped; read that one member only, if memory allows
                read = partial(read_member, path, info.filename, int(np.prod(shape, dtype=object)) * dtype.itemsize, where)
            tensors[name] = TensorInfo(name, shape, dtype_str, read)
    return Checkpoint(path, "numpy .npz", tensors, step=step, notes=notes)


def name_refused_global(zf: zipfile.ZipFile, info: zipfile.ZipInfo, header_len: int, where: str) -> None:
    """An object member is refused whatever it holds; when its pickle names a global outside the
    allow-list, the refusal names it (the restricted unpickler stops at that global, running nothing)."""
    from ._unpickle import NUMPY_GLOBALS, restricted_load
    require_memory(info.file_size, where)
    with zf.open(info) as member:
        member.seek(header_len)
        data = member.read()
    try:
        restricted_load(data, NUMPY_GLOBALS, where)
    except UnsafePickleError:
        raise
    except CheckpointError:
        pass  # a broken pickle: the plain refusal below says enough


def counter(value: np.ndarray, name: str, notes: list[str]) -> int | None:
    """A step counter, or None (and a note) when it holds no whole number."""
    number = value.item()
    if isinstance(number, bool) or not float(number).is_integer():
        notes.append(f"the step counter {name!r} holds {number!r}, not a whole number: step unknown")
        return None
    return int(number)


def damaged_member(where: str, err: BaseException) -> CheckpointError:
    return CheckpointError(f"{where}: expected a readable zip member, found damage "
                           f"({type(err).__name__}: {printable(str(err))[:120]})")


def read_member(path: Path, member: str, nbytes: int, where: str) -> np.ndarray:
    require_memory(nbytes, where)
    try:
        with zipfile.ZipFile(path) as zf, zf.open(member) as f:
            return np.lib.format.read_array(f, allow_pickle=False)
    except ZIP_DAMAGE as err:
        raise damaged_member(where, err) from None


def looks_like_npz(path: Path, head: bytes, size: int) -> bool:
    if not head.startswith(b"PK\x03\x04"):
        return False
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
    except ZIP_DAMAGE:
        return path.suffix.lower() == ".npz"  # a broken .npz should hear why it is broken
    return bool(names) and all(n.endswith(".npy") for n in names)


register(Format("numpy .npy", lambda path, head, size: head.startswith(NPY_MAGIC), open_npy, priority=10))
register(Format("numpy .npz", looks_like_npz, open_npz, priority=20))
