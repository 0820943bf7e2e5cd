"""A few rows of a 2-D float table, read and decoded without numpy: a question about two words needs a
few hundred bytes of the file, and importing numpy would cost more than everything else in the answer.
Values come as Python floats holding the float32 the analysis works in (`Table.array`)."""

from __future__ import annotations

import math
import struct
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path

from ..core import files
from ..core.arrays import ITEMSIZE
from ..core.errors import CheckpointError
from ..core.text import quote
from ..storage.constants import NATIVE

Fetch = Callable[[int, int], bytes]  # (offset into the tensor's bytes, length) -> exactly those bytes
RowValues = Callable[[Sequence[int]], list[list[float]]]

FLOAT_SIZES = {name: ITEMSIZE[name] for name in ("float32", "float64", "float16", "bfloat16")}  # what decode reads


def decode(data: bytes, dtype: str, byteorder: str) -> list[float]:
    """The elements of `data`, stored as `dtype` in `byteorder` ("<" or ">"), as float32 values."""
    if dtype == "bfloat16":  # the top half of a float32: each two bytes go above two zero bytes
        little = in_order(data, 2, byteorder, "<")
        wide = bytearray(2 * len(data))
        wide[2::4], wide[3::4] = little[0::2], little[1::2]
        data, dtype, byteorder = bytes(wide), "float32", "<"
    native = in_order(data, FLOAT_SIZES[dtype], byteorder, NATIVE)
    if dtype == "float16":
        return list(struct.unpack(f"{len(native) // 2}e", native))
    if dtype == "float64":  # rounded to float32 as numpy's astype rounds it
        return array("f", memoryview(native).cast("d")).tolist()
    return array("f", native).tolist()


def in_order(data: bytes, itemsize: int, byteorder: str, wanted: str) -> bytes:
    """`data`, items of `itemsize` bytes stored in `byteorder`, in the `wanted` byte order."""
    if byteorder == wanted:
        return data
    flipped = bytearray(len(data))
    for n in range(itemsize):
        flipped[n::itemsize] = data[itemsize - 1 - n::itemsize]
    return bytes(flipped)


def row_reader(fetch: Fetch, dtype: str, byteorder: str, shape: tuple[int, ...],
               fortran: bool = False) -> RowValues | None:
    """A reader of whole rows of a 2-D table of floats; None for any other tensor, and for a Fortran-ordered
    table, whose rows' elements lie apart (numpy reads those)."""
    if dtype not in FLOAT_SIZES or len(shape) != 2 or byteorder not in ("<", ">") \
            or (fortran and shape[0] > 1 and shape[1] > 1):
        return None
    row_bytes = shape[1] * FLOAT_SIZES[dtype]

    def rows(ids: Sequence[int]) -> list[list[float]]:
        found = []
        for row in ids:
            if not 0 <= row < shape[0]:
                raise IndexError(f"row {row} of a table of {shape[0]} rows")
            found.append(decode(fetch(row * row_bytes, row_bytes), dtype, byteorder))
        return found
    return rows


def file_rows(path: Path, offset: int, dtype: str, byteorder: str, shape: tuple[int, ...],
              fortran: bool = False) -> RowValues | None:
    """Rows of a table stored at `offset` in a file, each read with one pread (the file is opened per call)."""
    def fetch(start: int, length: int) -> bytes:
        data = files.read_at(path, offset + start, length)  # a FIFO put in place of the file is refused, not waited on
        if len(data) != length:
            raise CheckpointError(f"{quote(path)}: expected {length} bytes of table data at offset {offset + start}, "
                                  f"the file now ends before them")
        return data
    return row_reader(fetch, dtype, byteorder, shape, fortran)


def buffer_rows(buffer: bytes | bytearray | memoryview, dtype: str, byteorder: str, shape: tuple[int, ...],
                fortran: bool = False) -> RowValues | None:
    """Rows of a table whose bytes are in memory (a pickle's), checked to hold the whole table."""
    view = memoryview(buffer).cast("B")
    if dtype not in FLOAT_SIZES or view.nbytes != math.prod(shape) * FLOAT_SIZES[dtype]:
        return None
    return row_reader(lambda start, length: bytes(view[start:start + length]), dtype, byteorder, shape, fortran)
