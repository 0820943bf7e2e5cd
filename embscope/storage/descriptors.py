"""What a pickle may describe, and phase two of reading it.

Phase one (_unpickle.py) builds only plain values and the inert descriptions below: an element type,
a shape, strides, an offset, and the bytes or the storage they lie in. Nothing here is an array.
Phase two is `check_array` / `check_record`: each description is checked against the bytes it claims
(a plain numeric element type; an element count the bytes can hold; strides that stay inside the
storage and never repeat an element) before any array exists. Only then `make_array` / `record_view`
build one, read-only, with np.frombuffer or a strided view on validated numbers."""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..core.arrays import ElementType
from ..core.errors import CheckpointError
from ..core.text import quote
from .checks import check_shape
from .constants import NUMPY_NUMERIC_KINDS

NUMERIC_NAMES = {"i": "int", "u": "uint", "f": "float"}


# --- numpy ---------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False, slots=True)
class DType:
    """A numpy element type as a pickle describes it: kind (b i u f c O S U), bytes per element, byte order."""

    kind: str
    itemsize: int
    byteorder: str  # "<" or ">"; one-byte types are stored as NATIVE

    @property
    def numeric(self) -> bool:
        return self.kind in NUMPY_NUMERIC_KINDS

    @property
    def code(self) -> str:
        return f"{self.byteorder}{self.kind}{self.itemsize}"

    @property
    def name(self) -> str:
        """numpy's name for a numeric type ("float32"), without numpy: the unpickler's table of sizes is closed."""
        return "bool" if self.kind == "b" else f"{NUMERIC_NAMES[self.kind]}{8 * self.itemsize}"


@dataclass(frozen=True, eq=False, slots=True)
class ArrayData:
    """A numpy array as its pickle describes it: the state numpy's ndarray.__setstate__ (or _frombuffer) takes."""

    dtype: DType
    shape: tuple[int, ...]
    fortran: bool
    data: bytes | bytearray | memoryview | list[Any]  # a list of values for an object array

    @property
    def count(self) -> int:
        return math.prod(self.shape)


def check_array(array: ArrayData, where: str) -> None:
    """The description is one numpy could honour exactly: its data holds the elements its shape declares."""
    check_shape(array.shape, where)
    if array.dtype.kind == "O":
        if not isinstance(array.data, list) or len(array.data) != array.count:
            raise CheckpointError(f"{where}: an object array of shape {list(array.shape)} without "
                                  f"{array.count} values")
        return
    if isinstance(array.data, list):
        raise CheckpointError(f"{where}: an array of {array.dtype.code} holding a list instead of bytes")
    nbytes = memoryview(array.data).nbytes
    if nbytes != array.count * array.dtype.itemsize:
        raise CheckpointError(f"{where}: an array of shape {list(array.shape)} and dtype {array.dtype.code} needs "
                              f"{array.count * array.dtype.itemsize} bytes, its pickle holds {nbytes}")


def numpy_dtype(dtype: DType) -> np.dtype:
    """The numpy dtype of a checked numeric description (kind and size come from a closed table)."""
    if not dtype.numeric:
        raise CheckpointError(f"expected a numeric element type, found {dtype.code}")
    return np.dtype(dtype.code)


def make_array(array: ArrayData, where: str) -> np.ndarray:
    """The array itself, read-only, over the pickle's own bytes (no copy), after check_array."""
    check_array(array, where)
    if isinstance(array.data, list):
        raise CheckpointError(f"{where}: an object array is not read as numbers")
    made = np.frombuffer(array.data, dtype=numpy_dtype(array.dtype), count=array.count)
    made = made.reshape(array.shape, order="F" if array.fortran else "C")
    made.flags.writeable = False
    return made


def scalar_value(dtype: DType, data: Any) -> Any:
    """A numpy scalar's value as a Python number (or str, bytes), decoded without numpy."""
    if not isinstance(data, (bytes, bytearray)) or len(data) != dtype.itemsize:
        raise CheckpointError(f"expected {dtype.itemsize} bytes for a numpy scalar of {dtype.code}")
    data = bytes(data)
    order: Literal["little", "big"] = "little" if dtype.byteorder == "<" else "big"
    if dtype.kind == "b":
        return any(data)
    if dtype.kind in "iu":
        return int.from_bytes(data, order, signed=dtype.kind == "i")
    floats = {2: "e", 4: "f", 8: "d"}
    if dtype.kind == "f" and dtype.itemsize in floats:
        return struct.unpack(dtype.byteorder + floats[dtype.itemsize], data)[0]
    if dtype.kind == "c" and dtype.itemsize // 2 in floats:
        return complex(*struct.unpack(dtype.byteorder + 2 * floats[dtype.itemsize // 2], data))
    if dtype.kind == "S":
        return data.rstrip(b"\0")
    if dtype.kind == "U":
        return data.decode(f"utf-32-{order[0]}e", "replace").rstrip("\0")
    raise CheckpointError(f"expected a numeric numpy scalar, found one of {dtype.code}")


# --- torch ---------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False, slots=True)
class StorageType:
    """An element type as torch names it (torch.float32, torch.FloatStorage)."""

    torch_name: str
    element: ElementType


@dataclass(frozen=True, eq=False, slots=True)
class Storage:
    """A storage a tensor record points into: `numel` elements of `kind`, `start` elements into the bytes
    stored under `key` (only legacy storage views start past 0)."""

    key: str
    kind: StorageType
    numel: int
    start: int = 0

    @property
    def nbytes(self) -> int:
        return self.numel * self.kind.element.itemsize


@dataclass(frozen=True, eq=False, slots=True)
class TensorRecord:
    """What torch's _rebuild_tensor would build, as a description: no data is touched."""

    storage: Storage
    kind: StorageType  # the tensor's element type; v3 records view an untyped (byte) storage as another type
    offset: int  # in elements of kind
    size: tuple[int, ...]
    stride: tuple[int, ...]

    @property
    def numel(self) -> int:
        return math.prod(self.size)

    @property
    def contiguous(self) -> bool:
        expected = 1
        for dim, stride in zip(reversed(self.size), reversed(self.stride)):
            if dim != 1 and stride != expected:
                return False
            expected *= dim
        return True


@dataclass(frozen=True, eq=False, slots=True)
class OtherTensor:
    """A tensor torch's weights-only loader accepts but no table is (quantized, sparse, nested, meta):
    catalogued as skipped, never read."""

    layout: str


@dataclass(frozen=True, eq=False, slots=True)
class Marker:
    """An allowed name that is not called, only passed along: numpy.ndarray as _reconstruct's class,
    torch.Tensor and torch.nn.Parameter as _rebuild_from_type_v2's type."""

    name: str


def record_text(record: TensorRecord) -> str:
    return f"size {list(record.size)}, stride {list(record.stride)} at offset {record.offset}"


def check_record(record: TensorRecord, where: str) -> None:
    """The record reads only elements its storage holds, each at most once."""
    check_shape(record.size, where)
    if len(record.size) != len(record.stride):
        raise CheckpointError(f"{where}: expected as many strides as dimensions, found size {list(record.size)} "
                              f"and stride {list(record.stride)}")
    elements = record.storage.nbytes // record.kind.element.itemsize
    if record.numel == 0:
        return
    last = record.offset + sum((d - 1) * s for d, s in zip(record.size, record.stride))
    if last >= elements:
        raise CheckpointError(f"{where}: {record_text(record)} reaches element {last} of storage "
                              f"{quote(record.storage.key)}, which holds {elements}")
    if any(s == 0 and d > 1 for d, s in zip(record.size, record.stride)) or record.numel > elements:
        raise CheckpointError(f"{where}: {record_text(record)} repeats elements of storage {quote(record.storage.key)} "
                              f"(an expanded view of {elements} elements as {record.numel}): expected stored "
                              "weights, each element once")


def record_view(record: TensorRecord, base: np.ndarray) -> np.ndarray:
    """The record's elements over `base`, the storage as a flat array of the record's element type; read-only."""
    if record.contiguous:
        view = base[record.offset: record.offset + record.numel].reshape(record.size)
    else:
        # a dimension of one element never steps: its stride, which may be any number, is left out
        strides = tuple(s * base.itemsize if d > 1 else 0 for d, s in zip(record.size, record.stride))
        view = np.lib.stride_tricks.as_strided(base[record.offset:], shape=record.size, strides=strides,
                                               writeable=False)
    view.flags.writeable = False
    return view
