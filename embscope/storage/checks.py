"""Checks every reader makes before anything is read or allocated: headers lie (by damage or by design),
and a lie must become one clear error, not a MemoryError; and a path must name a regular file, since a
FIFO blocks the first read forever and a device (or a link to /dev/zero) never ends (embscope.core.files opens
every file so)."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..core import files
from ..core.errors import CheckpointError
from ..core.memory import watch_mapping
from ..core.text import quote
from .constants import MAX_TENSORS

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

MAX_NDIM = 32  # numpy allows 64; no real weight has more than a handful
MAX_ELEMENTS = 2 ** 48  # 1 PiB of float32: beyond this a header is lying, even for an empty tensor

def check_shape(shape: tuple[int, ...] | list[int], where: str) -> tuple[int, ...]:
    """The shape as a tuple, if it is one a real tensor could have."""
    if len(shape) > MAX_NDIM:
        raise CheckpointError(f"{where}: expected at most {MAX_NDIM} dimensions, found {len(shape)}")
    if any(type(d) is not int for d in shape):
        raise CheckpointError(f"{where}: expected integer dimensions, found shape {list(shape)}")
    if any(d < 0 for d in shape):
        raise CheckpointError(f"{where}: expected non-negative dimensions, found shape {list(shape)}")
    # a dimension of a million digits is shown by its size: multiplying or printing it would take minutes
    if any(d.bit_length() > 128 for d in shape):
        shown = [d if d.bit_length() <= 128 else f"<{d.bit_length()}-bit>" for d in shape]
        raise CheckpointError(f"{where}: shape {shown} declares an absurd number of elements (more than 2^48)")
    # zero dimensions are skipped: an empty tensor with a dimension of 10^30 is still a lie
    elements = math.prod(max(d, 1) for d in shape)
    if elements > MAX_ELEMENTS:
        raise CheckpointError(f"{where}: shape {list(shape)} declares {elements} elements, "
                              f"an absurd size (more than 2^48)")
    return tuple(shape)


def check_tensor_count(count: int, where: str, what: str = "tensors") -> None:
    """A file's count of tensors (variables, initializers, datasets) checked before any is read."""
    if count > MAX_TENSORS:
        raise CheckpointError(f"{where}: header declares {count:,} {what}, more than the {MAX_TENSORS:,} any model "
                              "file holds")


def check_extent(path: Path, offset: int, nbytes: int, where: str) -> None:
    """The declared bytes [offset, offset + nbytes) lie inside the file as it is now (a regular file: it is
    opened, and so recorded as a file the answer reads)."""
    fd, info = files.open_fd(path, "a checkpoint file")
    os.close(fd)
    extent_within(info.st_size, offset, nbytes, where)


def extent_within(size: int, offset: int, nbytes: int, where: str) -> None:
    if offset < 0 or offset + nbytes > size:
        raise CheckpointError(f"{where}: expected {nbytes} bytes of data at offset {offset}, "
                              f"the file holds {size} bytes")


def map_array(path: Path, dtype: DTypeLike, offset: int, shape: tuple[int, ...], where: str | None = None,
              fortran: bool = False) -> np.ndarray:
    """A read-only memory map of an array's bytes, for every reader: checked against the file as it is now
    (it may have shrunk since its header was read), and watched in case it shrinks while it is being read.
    `where` names the data in an error (default: the file's tensor data); an empty array maps nothing."""
    dtype = np.dtype(dtype)
    count = math.prod(shape)
    if count == 0:
        return np.zeros(shape, dtype=dtype)
    with files.open_file(path, "a checkpoint file") as file:  # the map is of this descriptor's file
        extent_within(os.fstat(file.fileno()).st_size, offset, count * dtype.itemsize,
                      where if where is not None else f"{quote(path)}: tensor data")
        watch_mapping(path, offset + count * dtype.itemsize)
        return np.memmap(file, dtype=dtype, mode="r", offset=offset, shape=shape, order="F" if fortran else "C")


is_regular_file = files.is_regular  # a regular file (links followed) exists: files beside a checkpoint are read only if so
