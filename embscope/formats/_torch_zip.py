"""torch.save's zip format read without torch: data.pkl is unpickled with an allow-list that maps
torch's rebuild functions onto records of where each tensor's bytes lie; no byte is read until asked."""

from __future__ import annotations

import math
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CheckpointError
from ..memory import require_memory
from ..text import quote
from ._checks import check_extent, check_shape
from ._unpickle import NUMPY_GLOBALS, Harmless, refuse_setstate, restricted_load
from ._zip import ZIP_DAMAGE, data_offset, is_stored


# every object the allow-list hands out is frozen and slotted: a pickle's BUILD opcode cannot change it
@dataclass(frozen=True, slots=True)
class Kind:
    """An element type as torch names it; `dtype` is ours (None: numpy cannot hold it)."""

    torch_name: str
    dtype: str | None
    numpy: str  # the stored bytes, without byte order ("u2" for bfloat16)
    itemsize: int
    __setstate__ = refuse_setstate


KINDS = [Kind("float32", "float32", "f4", 4), Kind("float64", "float64", "f8", 8),
         Kind("float16", "float16", "f2", 2), Kind("bfloat16", "bfloat16", "u2", 2),
         Kind("int64", "int64", "i8", 8), Kind("int32", "int32", "i4", 4), Kind("int16", "int16", "i2", 2),
         Kind("int8", "int8", "i1", 1), Kind("uint8", "uint8", "u1", 1), Kind("bool", "bool", "b1", 1),
         Kind("uint16", "uint16", "u2", 2), Kind("uint32", "uint32", "u4", 4), Kind("uint64", "uint64", "u8", 8),
         Kind("complex64", None, "c8", 8), Kind("complex128", None, "c16", 16),
         Kind("float8_e4m3fn", None, "u1", 1), Kind("float8_e5m2", None, "u1", 1),
         Kind("float8_e4m3fnuz", None, "u1", 1), Kind("float8_e5m2fnuz", None, "u1", 1)]
KIND = {k.torch_name: k for k in KINDS}

# the legacy typed-storage classes torch.save names for each element type (torch 2.x still writes them)
STORAGE_CLASSES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16", "BFloat16Storage": "bfloat16",
    "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16", "CharStorage": "int8",
    "ByteStorage": "uint8", "BoolStorage": "bool", "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128",
}
UNTYPED = Kind("untyped", "uint8", "u1", 1)  # torch.storage.UntypedStorage: numel counts bytes
DTYPE_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "long": "int64", "int": "int32",
                 "short": "int16"}


@dataclass(frozen=True, slots=True)
class Storage:
    """One `data/<key>` member: its element kind and where its bytes start in the file."""

    key: str
    kind: Kind
    nbytes: int
    file_offset: int | None  # None: the member is compressed and cannot be memory-mapped
    member: str
    __setstate__ = refuse_setstate


@dataclass(frozen=True, slots=True)
class TensorRecord:
    """What torch's _rebuild_tensor would build, as a description: no data is touched."""

    storage: Storage
    kind: Kind
    offset: int  # in elements of `kind`
    size: tuple[int, ...]
    stride: tuple[int, ...]
    __setstate__ = refuse_setstate

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


@dataclass(frozen=True, slots=True)
class TypeMarker:
    """Stands in for torch.Tensor / torch.nn.Parameter where a pickle names the class itself."""

    name: str
    __setstate__ = refuse_setstate


# stride-0 views repeat their storage; a saved buffer may (position_ids is (1, T) over T), a weight
# never does, and a view repeating a few bytes a billion times would make every row walk endless
MAX_EXPANSION = 1024


def int_tuple(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, (tuple, list)) or not all(type(v) is int and v >= 0 for v in value):
        raise CheckpointError(f"expected a tensor {what} of non-negative integers, found {quote(repr(value)[:60])}")
    return tuple(value)


def rebuild_tensor(storage: Any, offset: Any, size: Any, stride: Any, kind: Kind | None = None) -> TensorRecord:
    if not isinstance(storage, Storage):
        raise CheckpointError(f"expected a tensor built on a stored storage, found {type(storage).__name__}")
    if type(offset) is not int or offset < 0:
        raise CheckpointError(f"expected a non-negative storage offset, found {quote(repr(offset)[:60])}")
    size, stride = check_shape(int_tuple(size, "size"), "tensor"), int_tuple(stride, "stride")
    if len(size) != len(stride):
        raise CheckpointError(f"expected as many strides as dimensions, found size {list(size)} and stride {list(stride)}")
    kind = kind or storage.kind
    record = TensorRecord(storage, kind, offset, size, stride)
    elements = storage.nbytes // kind.itemsize
    if record.numel:
        last = offset + sum((d - 1) * s for d, s in zip(size, stride))
        if last >= elements:
            raise CheckpointError(f"tensor of size {list(size)}, stride {list(stride)} at offset {offset} reaches "
                                  f"element {last} of storage {quote(storage.key)}, which holds {elements}")
        if record.numel > max(elements, 1) * MAX_EXPANSION:
            raise CheckpointError(f"tensor of size {list(size)}, stride {list(stride)} repeats the {elements} elements "
                                  f"of storage {quote(storage.key)} {record.numel // max(elements, 1):,} times: "
                                  f"expected a weight, found an expanded view larger than any table")
    return record


def rebuild_tensor_v1(storage, storage_offset, size, stride) -> TensorRecord:
    return rebuild_tensor(storage, storage_offset, size, stride)


def rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                      metadata=None) -> TensorRecord:
    return rebuild_tensor(storage, storage_offset, size, stride)


def rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype,
                      metadata=None) -> TensorRecord:
    if not isinstance(dtype, Kind):  # v3 stores newer dtypes on an untyped (byte) storage
        raise CheckpointError(f"expected a torch dtype for a tensor, found {type(dtype).__name__}")
    return rebuild_tensor(storage, storage_offset, size, stride, dtype)


def rebuild_parameter(data, requires_grad=False, backward_hooks=None, state=None) -> Any:
    return data  # a Parameter is its data


REBUILDERS = (rebuild_tensor_v1, rebuild_tensor_v2, rebuild_tensor_v3, rebuild_parameter)


def rebuild_from_type_v2(func, new_type, args, state) -> Any:
    """A tensor with Python attributes: torch calls func(*args) and then sets them; we keep the tensor."""
    if not (isinstance(func, Harmless) and func.func in REBUILDERS and isinstance(new_type, TypeMarker)
            and isinstance(args, tuple)):
        raise CheckpointError("expected a plain tensor inside _rebuild_from_type_v2, found something else")
    return func(*args)


def torch_size(dims=()) -> tuple:
    return tuple(int_tuple(dims, "size"))


def torch_device(kind: Any, index: Any = None) -> str:
    return str(kind) if index is None else f"{kind}:{index}"


def _torch_globals() -> dict[str, Any]:
    allowed: dict[str, Any] = {
        "torch._utils._rebuild_tensor": Harmless(rebuild_tensor_v1),  # files from torch before 1.0
        "torch._utils._rebuild_tensor_v2": Harmless(rebuild_tensor_v2),
        "torch._utils._rebuild_tensor_v3": Harmless(rebuild_tensor_v3),
        "torch._utils._rebuild_parameter": Harmless(rebuild_parameter),
        "torch._utils._rebuild_parameter_with_state": Harmless(rebuild_parameter),
        "torch._tensor._rebuild_from_type_v2": Harmless(rebuild_from_type_v2),
        "torch.Tensor": TypeMarker("torch.Tensor"),
        "torch.nn.parameter.Parameter": TypeMarker("torch.nn.parameter.Parameter"),
        "torch.Size": Harmless(torch_size),
        "torch.device": Harmless(torch_device),
        "torch.storage.UntypedStorage": UNTYPED,
    }
    allowed.update({f"torch.{cls}": KIND[name] for cls, name in STORAGE_CLASSES.items()})
    allowed.update({f"torch.{name}": kind for name, kind in KIND.items()})
    allowed.update({f"torch.{alias}": KIND[name] for alias, name in DTYPE_ALIASES.items()})
    return allowed


TORCH_GLOBALS: dict[str, Any] = {**NUMPY_GLOBALS, **_torch_globals()}


def data_pickle_name(names: list[str]) -> str | None:
    """`<prefix>/data.pkl`, the one member every torch.save zip holds; None when there is none."""
    found = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
    return found[0] if len(found) == 1 else None


class StorageLoader:
    """persistent_load for data.pkl: ('storage', kind, key, location, numel) -> a checked Storage."""

    def __init__(self, path: Path, zf: zipfile.ZipFile, prefix: str):
        self.path, self.zf, self.prefix = path, zf, prefix
        self.file_size = path.stat().st_size
        self.loaded: dict[str, Storage] = {}

    def __call__(self, pid: Any) -> Storage:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise CheckpointError(f"{quote(self.path)}: expected storage references in data.pkl, found "
                                  f"{quote(repr(pid)[:60])}")
        _, kind, key, _location, numel = pid
        if not isinstance(kind, Kind) or not isinstance(key, str) or type(numel) is not int or numel < 0:
            raise CheckpointError(f"{quote(self.path)}: malformed storage reference {quote(repr(pid)[:80])}")
        if key in self.loaded:
            if self.loaded[key].kind != kind:
                raise CheckpointError(f"{quote(self.path)}: storage {quote(key)} is declared with two element types")
            return self.loaded[key]
        member = f"{self.prefix}/data/{key}"
        try:
            info = self.zf.getinfo(member)
        except KeyError:
            raise CheckpointError(f"{quote(self.path)}: data.pkl names storage {quote(key)}, which the archive lacks") from None
        nbytes = numel * kind.itemsize
        if info.file_size != nbytes:
            raise CheckpointError(f"{quote(self.path)}: storage {quote(key)} declares {numel} {kind.torch_name} "
                                  f"elements ({nbytes} bytes), its member holds {info.file_size} bytes")
        offset = None
        if is_stored(info):
            offset = data_offset(self.zf, info)
            if offset + nbytes > self.file_size:
                raise CheckpointError(f"{quote(self.path)}: storage {quote(key)} runs past the end of the file")
        self.loaded[key] = Storage(key, kind, nbytes, offset, member)
        return self.loaded[key]


def load_zip(path: Path, trust: bool) -> tuple[Any, str]:
    """The object torch.save pickled, with TensorRecords where the tensors were, and the byte order."""
    try:
        zf = zipfile.ZipFile(path)
    except ZIP_DAMAGE as err:
        raise CheckpointError(f"{quote(path)}: expected a readable torch.save zip archive ({err})") from None
    with zf:
        pkl = data_pickle_name(zf.namelist())
        if pkl is None:
            raise CheckpointError(f"{quote(path)}: expected exactly one <archive>/data.pkl in the torch zip, found "
                                  f"{sum(n.endswith('data.pkl') for n in zf.namelist())}")
        prefix = pkl.rsplit("/", 1)[0]
        byteorder = read_byteorder(path, zf, prefix)
        require_memory(zf.getinfo(pkl).file_size, f"{quote(path)}: data.pkl")  # a compressed member can expand
        try:
            data = zf.read(pkl)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:  # zlib.error is not an OSError
            raise CheckpointError(f"{quote(path)}: data.pkl cannot be read from the archive ({err})") from None
        except Exception as err:
            raise CheckpointError(f"{quote(path)}: data.pkl cannot be read from the archive ({err.__class__.__name__})") from None
        obj = restricted_load(data, TORCH_GLOBALS, quote(path), trust=trust,
                              persistent_load=StorageLoader(path, zf, prefix))
    return obj, byteorder


def read_byteorder(path: Path, zf: zipfile.ZipFile, prefix: str) -> str:
    try:
        text = zf.read(f"{prefix}/byteorder").decode("ascii", "replace").strip()
    except KeyError:
        return "little"  # files from torch before 1.10 have no byteorder record and are little-endian
    except ZIP_DAMAGE as err:
        raise CheckpointError(f"{quote(path)}: the byteorder record cannot be read from the archive ({err})") from None
    if text not in ("little", "big"):
        raise CheckpointError(f"{quote(path)}: expected byteorder 'little' or 'big', found {quote(text[:20])}")
    return text


def read_tensor(path: Path, record: TensorRecord, byteorder: str) -> np.ndarray:
    """The tensor's elements: a memory map of the stored member, viewed with the tensor's size and stride."""
    dtype = np.dtype(record.kind.numpy).newbyteorder("<" if byteorder == "little" else ">")
    if record.numel == 0:
        return np.zeros(record.size, dtype=dtype)
    storage = record.storage
    elements = storage.nbytes // dtype.itemsize
    if record.offset + sum((d - 1) * s for d, s in zip(record.size, record.stride)) >= elements:
        raise CheckpointError(f"tensor at offset {record.offset} runs past storage {quote(storage.key)}")  # checked at load too
    if storage.file_offset is not None:
        # checked again now: the file may have shrunk since its header was read
        check_extent(path, storage.file_offset, elements * dtype.itemsize, f"{quote(path)}: storage {quote(storage.key)}")
        base = np.memmap(path, dtype=dtype, mode="r", offset=storage.file_offset, shape=(elements,))
    else:
        require_memory(storage.nbytes, f"{quote(path)}: compressed storage {quote(storage.key)}")
        try:
            with zipfile.ZipFile(path) as zf:
                base = np.frombuffer(zf.read(storage.member), dtype=dtype, count=elements)
        except ZIP_DAMAGE as err:
            raise CheckpointError(f"{quote(path)}: storage {quote(storage.key)} cannot be read from the archive "
                                  f"({err.__class__.__name__}: {err})") from None
    if record.contiguous:
        return base[record.offset: record.offset + record.numel].reshape(record.size)
    strides = tuple(s * dtype.itemsize for s in record.stride)
    return np.lib.stride_tricks.as_strided(base[record.offset:], shape=record.size, strides=strides, writeable=False)
