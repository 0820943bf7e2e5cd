"""Phase one of reading a pickle: an unpickler that builds only plain values and inert descriptions.

Every global a pickle names is looked up in an allow-list of our own functions; none of them calls
numpy, torch or a builtin constructor with values from the file. numpy's dtype and _reconstruct,
torch's rebuild functions and storages become descriptions (_descriptors.py) that phase two checks
against the bytes they claim before any array exists. The opcodes that call or change an object
(REDUCE, NEWOBJ, INST, OBJ, BUILD) reach only those functions and descriptions; the raw numpy.ndarray
class, builtins.set and every other callable are gone. In torch files, an object of a class off the list that the
pickle creates with no arguments and fills with a dict (how torch.save(model) writes each module) is a Record of
those attributes, its class never imported (ObjectType). With --trust-pickle, names off the list are imported as
plain pickle would (in torch files, when the pickle calls them), and objects of those classes are built as plain
pickle builds them."""

from __future__ import annotations

import _compat_pickle
import io
import pickle
import re
import struct
from collections.abc import Callable, Mapping
from typing import IO, Any, ClassVar

from ..core.errors import CheckpointError, EmbscopeError, Message, Option, UnsafePickleError, message_of
from ..core.text import detail
from .base import DAMAGE
from .constants import (
    ELEMENT_TYPES,
    NATIVE,
    TORCH_DTYPE_ALIASES,
    TORCH_DTYPES,
    TORCH_STORAGE_CLASSES,
    TORCH_UNTYPED_STORAGE,
)
from .descriptors import ArrayData, DType, Marker, OtherTensor, Storage, StorageType, TensorRecord, scalar_value

# what the pickle machine itself raises on a broken program (a stack underflow, an unhashable key), besides DAMAGE
MACHINE_ERRORS = (*DAMAGE, TypeError, AttributeError, KeyError, IndexError)
MAX_INT = 2 ** 62  # larger sizes, strides and offsets are lies, refused before any arithmetic on them
MAX_KEY_NESTING = 64  # hashing a tuple nested 100,000 deep overflows the C stack (hash does not check depth)
TRUST = Option("trust_pickle", True)


def trust_hint() -> str:
    return Message("(use ", TRUST, " only for files you made)")


# what the user reads for the objects this module hands out, by class name
FRIENDLY = {"PickledDType": "a numpy dtype", "DType": "a numpy dtype", "PickledArray": "a numpy array",
            "ArrayData": "a numpy array", "TensorRecord": "a tensor", "Storage": "a storage",
            "OtherTensor": "a tensor of another layout", "Record": "a record", "RecordType": "a record class"}


def shown(value: Any, depth: int = 0) -> str:
    """A value from the file, short and safe to put in a message (a huge int cannot even be printed)."""
    if isinstance(value, (tuple, list)) and len(value) <= 8 and depth < 2:
        inner = ", ".join(shown(v, depth + 1) for v in value) + ("," if len(value) == 1 and isinstance(value, tuple) else "")
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    if isinstance(value, (Factory, Marker)):
        return value.name
    if isinstance(value, StorageType):
        return f"torch.{value.torch_name}"
    if type(value).__name__ in FRIENDLY:
        return FRIENDLY[type(value).__name__]
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    if isinstance(value, (str, bytes, bytearray)) and len(value) > 40:
        return repr(value[:40]) + "..."
    if isinstance(value, (int, float, bool, str, bytes, type(None))):
        return repr(value)
    return f"a {type(value).__name__}"


class Factory:
    """An allowed global: a function of ours that checks its arguments and returns a plain value or a
    description. Sealed: a pickle's BUILD must not change it for the next file a process opens."""

    __slots__ = ("func", "name")
    func: Callable[..., Any]
    name: str

    def __init__(self, func: Callable[..., Any], name: str):
        object.__setattr__(self, "func", func)
        object.__setattr__(self, "name", name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("an allowed function is read-only")

    def __call__(self, *args: Any) -> Any:
        return self.func(*args)

    def __repr__(self) -> str:
        return f"Factory({self.name})"


# --- numpy: dtype and array descriptions, completed by the BUILD opcode that numpy's pickles hold ---

DTYPE_SPEC = re.compile(r"([biufcOSU])(\d{1,9})")
NUMERIC_SIZES = {"b": (1,), "i": (1, 2, 4, 8), "u": (1, 2, 4, 8), "f": (2, 4, 8), "c": (8, 16), "O": (4, 8)}


def dtype_flag(value: Any) -> bool:
    """A dtype argument numpy writes: False/True, or the ints 0 and 1 of numpy before 1.20 (arraydescr_reduce's
    Py_BuildValue("(Nii)", obj, 0, 1); g2pM 0.1.2.5's np_ckpt.pkl)."""
    return type(value) in (bool, int) and value in (0, 1)


class PickledDType:
    """numpy.dtype(spec, align, copy) as a pickle calls it, then BUILD with the state numpy writes;
    only the element types in DTYPE_SPEC, and only the states numpy itself writes for them."""

    __slots__ = ("built", "byteorder", "itemsize", "kind")

    def __init__(self, spec: Any, align: Any = False, copy: Any = True):
        found = DTYPE_SPEC.fullmatch(spec) if isinstance(spec, str) else None
        if found is None or not dtype_flag(align) or not dtype_flag(copy):
            raise UnsafePickleError(f"refused a numpy dtype of {shown(spec)}: expected a plain element type "
                                    "(bool, int, uint, float, complex, bytes, str or object)")
        kind, size = found.group(1), int(found.group(2))
        if kind in NUMERIC_SIZES and size not in NUMERIC_SIZES[kind]:
            raise UnsafePickleError(f"refused a numpy dtype of {shown(spec)}: no such element type")
        self.kind, self.itemsize = kind, size * 4 if kind == "U" else size  # 'U2' counts characters of 4 bytes
        self.byteorder, self.built = NATIVE, False

    def canonical(self, order: str) -> tuple[int, str, None, None, None, int, int, int]:
        """The state numpy's dtype.__reduce__ writes for this element type and byte order."""
        if self.kind in NUMERIC_SIZES and self.kind != "O":
            return (3, order, None, None, None, -1, -1, 0)
        if self.kind == "O":
            return (3, "|", None, None, None, -1, -1, 63)
        if self.kind == "S":
            return (3, "|", None, None, None, self.itemsize, 1, 0)
        return (3, order, None, None, None, self.itemsize, 4, 8)  # U

    def build(self, state: Any) -> None:
        order = state[1] if isinstance(state, tuple) and len(state) == 8 and state[1] in ("<", ">", "|", "=") else None
        if self.built or order is None or state != self.canonical(order):
            raise UnsafePickleError(f"refused a numpy dtype state numpy does not write for {self.kind}{self.itemsize}: "
                                    f"{shown(state)}")
        self.byteorder = NATIVE if order in ("|", "=") or self.itemsize == 1 else order
        self.built = True

    @property
    def dtype(self) -> DType:
        return DType(self.kind, self.itemsize, self.byteorder)


def int_tuple(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, (tuple, list)) or len(value) > 64 or not all(
            type(v) is int and 0 <= v <= MAX_INT for v in value):
        raise CheckpointError(f"expected a {what} of non-negative integers, found {shown(value)}")
    return tuple(value)


class PickledArray:
    """numpy's _reconstruct(ndarray, (0,), b'b') awaiting the BUILD that gives its state, or an array
    _frombuffer described at once; `description` is what phase two checks."""

    __slots__ = ("array",)

    def __init__(self, array: ArrayData | None = None):
        self.array = array

    def build(self, state: Any) -> None:
        if self.array is not None or not isinstance(state, tuple) or len(state) not in (4, 5):
            raise UnsafePickleError("refused an ndarray state that is not numpy's (version, shape, dtype, order, data)")
        if len(state) == 5 and state[0] != 1:
            raise UnsafePickleError(f"refused an ndarray state of version {shown(state[0])}, not 1")
        shape, dtype, fortran, data = state[-4:]
        self.array = described(data, dtype, int_tuple(shape, "shape"), fortran, objects=True)

    def description(self, where: str) -> ArrayData:
        if self.array is None:
            raise CheckpointError(f"{where}: a numpy array whose contents the pickle never set")
        return self.array


def described(data: Any, dtype: Any, shape: tuple[int, ...], fortran: Any, objects: bool) -> ArrayData:
    if not isinstance(dtype, PickledDType) or not isinstance(fortran, bool):
        raise UnsafePickleError(f"refused an ndarray description with dtype {shown(dtype)} and order {shown(fortran)}")
    if dtype.kind == "O" and not (objects and isinstance(data, list)):
        raise UnsafePickleError("refused an object array that is not a list of values")
    if dtype.kind != "O" and not isinstance(data, (bytes, bytearray, memoryview)):
        raise UnsafePickleError(f"refused ndarray data that is {shown(data)}, not bytes")
    return ArrayData(dtype.dtype, shape, fortran, data)


def reconstruct(subtype: Any, shape: Any, code: Any) -> PickledArray:
    """numpy pickles every array as _reconstruct(ndarray, (0,), b'b') and then sets its state."""
    if subtype is not NDARRAY or not isinstance(shape, (tuple, list)) or tuple(shape) != (0,):
        raise UnsafePickleError("numpy's _reconstruct is allowed only for an empty ndarray, as numpy pickles it")
    return PickledArray()


def frombuffer(buffer: Any, dtype: Any, shape: Any, order: Any) -> PickledArray:
    """numpy's _frombuffer(buffer, dtype, shape, order): how protocol 5 pickles a contiguous array."""
    if order not in ("C", "F"):
        raise UnsafePickleError(f"refused an array order of {shown(order)}")
    return PickledArray(described(buffer, dtype, int_tuple(shape, "shape"), order == "F", objects=False))


def scalar(dtype: Any, data: Any = None) -> Any:
    """A numpy scalar (np.int64(3)) as the Python value it holds."""
    if not isinstance(dtype, PickledDType) or dtype.kind == "O":
        raise UnsafePickleError(f"refused a numpy scalar of {shown(dtype)}")
    return scalar_value(dtype.dtype, data)


NDARRAY = Marker("numpy.ndarray")


# --- plain containers that pickle cannot spell with opcodes alone ----------------------------------

def latin1_encode(text: Any, encoding: Any = "utf-8") -> bytes:
    """Protocol 2 stores bytes as `_codecs.encode(text, "latin1")`; no other codec is needed."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise UnsafePickleError("_codecs.encode is allowed only for latin1 text")
    return text.encode("latin1")


def byte_array(source: Any = b"", *args: Any) -> bytearray:
    """bytearray as pickles call it (from bytes, or latin1 text in protocol 2), never from a size:
    bytearray(2**34) in a 30-byte pickle would zero 16 GiB."""
    if not isinstance(source, (bytes, str)) or (isinstance(source, str) and args not in (("latin1",), ("latin-1",))):
        raise UnsafePickleError(f"bytearray may be built from bytes or latin1 text only, not {shown(source)}")
    return bytearray(source.encode("latin1") if isinstance(source, str) else source)


def number_pair(real: Any = 0, imag: Any = 0) -> complex:
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (real, imag)):
        raise UnsafePickleError("complex may be built from two numbers only")
    return complex(real, imag)


# --- records: plain objects of a few classes (fairseq's argparse.Namespace), kept as their state -----

class RecordType:
    """An allowed class whose objects are only attributes: NEWOBJ with no arguments (protocol 2 and later, which
    torch.save writes) makes an empty Record, and BUILD fills it once from a dict of attributes. The class itself
    is never imported, and nothing of it is called. (Protocols 0 and 1 spell the same through
    copyreg._reconstructor, which stays refused, except for an ObjectType over plain object: it would build any
    class named.)"""

    __slots__ = ("name",)
    name: str

    def __init__(self, name: str):
        object.__setattr__(self, "name", name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("an allowed class is read-only")

    def __repr__(self) -> str:
        return f"RecordType({self.name})"


class Record(dict[str, Any]):
    """An object of an allowed record class, as the dict of its attributes (`kind` names the class)."""

    __slots__ = ("built", "kind")

    def __init__(self, kind: str):
        super().__init__()
        self.kind, self.built = kind, False

    def build(self, state: Any) -> None:
        """The attributes pickle's default __setstate__ sets: a dict, or (dict or None, dict of __slots__ values) for
        a class with __slots__ (a dataclass(slots=True) config)."""
        parts = state if isinstance(state, tuple) and len(state) == 2 else (state,)
        if self.built or not all(part is None and len(parts) == 2 or isinstance(part, dict)
                                 and all(isinstance(key, str) for key in part) for part in parts):
            raise UnsafePickleError(f"refused a state for {self.kind} that is not one dict of named attributes: "
                                    f"{shown(state)}")
        for part in parts:
            self.update(part or {})
        self.built = True


RECORD_CLASSES = ("argparse.Namespace",)  # fairseq's training arguments


class ObjectType(RecordType):
    """A class off the list that a whole pickled model names (`__main__.GPT`, torch.nn's Embedding, a config
    dataclass), for the torch readers only: never imported. torch.save(model) writes each module as NEWOBJ with no
    arguments and BUILD with its attributes, which makes a Record as for an allowed class; calling it, or creating it
    from arguments, is refused as any global off the list is (trusted: imported then, and called)."""

    __slots__ = ("origin",)
    origin: tuple[str, str]

    def __init__(self, module: str, name: str):
        super().__init__(f"{module}.{name}")
        object.__setattr__(self, "origin", (module, name))


RECONSTRUCTOR = ("copyreg", "_reconstructor")


def plain_reconstruct(args: Any) -> bool:
    """copyreg._reconstructor(cls, object, None): object.__new__(cls), how protocols 0 and 1 create an object whose
    attributes BUILD then sets; for an off-list class that is a record (any other base or state would run code)."""
    return (isinstance(args, tuple) and len(args) == 3 and isinstance(args[0], ObjectType)
            and isinstance(args[1], ObjectType) and args[1].origin == ("builtins", "object") and args[2] is None)


def new_record(cls: Any, args: Any, kwargs: Any) -> Record:
    if not isinstance(cls, RecordType) or args != () or kwargs:
        raise UnsafePickleError(f"refused to create {shown(cls)} from {shown(args)}: a record is built from its "
                                "attributes alone")
    return Record(cls.name)


# --- torch: tensors as records of where their bytes lie ---------------------------------------------

STORAGE_TYPES: dict[str, StorageType] = {name: StorageType(name, ELEMENT_TYPES[name]) for name in TORCH_DTYPES}
UNTYPED = StorageType("untyped", ELEMENT_TYPES[TORCH_UNTYPED_STORAGE])
TENSOR_TYPES = (Marker("torch.Tensor"), Marker("torch.nn.parameter.Parameter"))


def rebuild_tensor(storage: Any, offset: Any, size: Any, stride: Any, kind: StorageType | None = None) -> TensorRecord:
    if not isinstance(storage, Storage):
        raise CheckpointError(f"expected a tensor built on a stored storage, found {shown(storage)}")
    if type(offset) is not int or not 0 <= offset <= MAX_INT:
        raise CheckpointError(f"expected a non-negative storage offset, found {shown(offset)}")
    return TensorRecord(storage, kind or storage.kind, offset, int_tuple(size, "tensor size"),
                        int_tuple(stride, "tensor stride"))


def rebuild_tensor_v1(storage: Any, storage_offset: Any, size: Any, stride: Any) -> TensorRecord:
    return rebuild_tensor(storage, storage_offset, size, stride)


def rebuild_tensor_v2(storage: Any, storage_offset: Any, size: Any, stride: Any, requires_grad: Any = False,
                      backward_hooks: Any = None, metadata: Any = None) -> TensorRecord:
    return rebuild_tensor(storage, storage_offset, size, stride)


def rebuild_tensor_v3(storage: Any, storage_offset: Any, size: Any, stride: Any, requires_grad: Any,
                      backward_hooks: Any, dtype: Any, metadata: Any = None) -> TensorRecord:
    if not isinstance(dtype, StorageType):  # v3 stores newer dtypes on an untyped (byte) storage
        raise CheckpointError(f"expected a torch dtype for a tensor, found {shown(dtype)}")
    return rebuild_tensor(storage, storage_offset, size, stride, dtype)


def rebuild_parameter(data: Any, requires_grad: Any = False, backward_hooks: Any = None,
                      state: Any = None) -> TensorRecord:
    if not isinstance(data, TensorRecord):
        raise CheckpointError(f"expected a tensor inside a Parameter, found {shown(data)}")
    return data  # a Parameter is its data


REBUILDERS = (rebuild_tensor_v1, rebuild_tensor_v2, rebuild_tensor_v3, rebuild_parameter)


def on_device(data: Any, *args: Any) -> Any:
    """A tensor saved from an accelerator through a CPU copy (or a numpy array): that copy is its data."""
    if not isinstance(data, (TensorRecord, PickledArray)):
        raise CheckpointError(f"expected a tensor's data on the CPU, found {shown(data)}")
    return data


def other_tensor(layout: str) -> Callable[..., OtherTensor]:
    """The rebuild functions of tensors that are not tables: their arguments are dropped, unused."""
    def rebuild(*args: Any) -> OtherTensor:
        return OtherTensor(layout)
    return rebuild


def rebuild_from_type_v2(func: Any, new_type: Any, args: Any, state: Any) -> Any:
    """A tensor with Python attributes: torch calls func(*args) and then sets them; we keep the tensor."""
    if not (isinstance(func, Factory) and func.func in REBUILDERS and new_type in TENSOR_TYPES
            and isinstance(args, tuple)):
        raise UnsafePickleError("refused _rebuild_from_type_v2 on anything but a plain tensor")
    return func(*args)


def torch_size(dims: Any = ()) -> tuple[int, ...]:
    return int_tuple(dims, "torch.Size")


def torch_device(kind: Any, index: Any = None) -> str:
    if not isinstance(kind, str) or not (index is None or type(index) is int):
        raise UnsafePickleError("torch.device may be built from a name and an index only")
    return kind if index is None else f"{kind}:{index}"


def allowed(functions: Mapping[str, Callable[..., Any]], plain: Mapping[str, Any]) -> dict[str, Any]:
    return {**{name: Factory(func, name) for name, func in functions.items()}, **plain}


def _numpy_names() -> dict[str, Any]:
    functions: dict[str, Callable[..., Any]] = {
        "numpy.dtype": PickledDType,
        "collections.OrderedDict": plain_dict, "collections.Counter": plain_dict,
        "_codecs.encode": latin1_encode, "builtins.bytearray": byte_array, "builtins.complex": number_pair,
        "builtins.set": plain_set, "builtins.frozenset": plain_frozenset,
    }
    # numpy 1.x pickles name numpy.core, numpy 2.x numpy._core; both mean the same functions
    for package in ("numpy.core", "numpy._core"):
        functions[f"{package}.multiarray._reconstruct"] = reconstruct
        functions[f"{package}.multiarray.scalar"] = scalar
        functions[f"{package}.numeric._frombuffer"] = frombuffer  # protocol 5 arrays
    records = {name: RecordType(name) for name in RECORD_CLASSES}
    return allowed(functions, {"numpy.ndarray": NDARRAY, **records})


def _torch_names() -> dict[str, Any]:
    functions: dict[str, Callable[..., Any]] = {
        "torch._utils._rebuild_tensor": rebuild_tensor_v1,  # files from torch before 1.0
        "torch._utils._rebuild_tensor_v2": rebuild_tensor_v2,
        "torch._utils._rebuild_tensor_v3": rebuild_tensor_v3,
        "torch._utils._rebuild_parameter": rebuild_parameter,
        "torch._utils._rebuild_parameter_with_state": rebuild_parameter,
        "torch._utils._rebuild_device_tensor_from_cpu_tensor": on_device,
        "torch._utils._rebuild_device_tensor_from_numpy": on_device,
        "torch._utils._rebuild_qtensor": other_tensor("quantized"),
        "torch._utils._rebuild_sparse_tensor": other_tensor("sparse"),
        "torch._utils._rebuild_nested_tensor": other_tensor("nested"),
        "torch._utils._rebuild_meta_tensor_no_storage": other_tensor("meta (without data)"),
        "torch.serialization._get_layout": lambda name="": Marker(f"torch layout {shown(name)}"),
        "torch.Size": torch_size,
        "torch.device": torch_device,
    }
    # the quantization schemes a quantized tensor's record names
    schemes = ("per_tensor_affine", "per_tensor_symmetric", "per_channel_affine", "per_channel_symmetric",
               "per_channel_affine_float_qparams")
    names = allowed(functions, {**{marker.name: marker for marker in TENSOR_TYPES},
                                **{f"torch.{scheme}": Marker(f"torch.{scheme}") for scheme in schemes}})
    names["torch._tensor._rebuild_from_type_v2"] = Factory(rebuild_from_type_v2, "torch._tensor._rebuild_from_type_v2")
    names["torch.storage.UntypedStorage"] = UNTYPED
    names.update({f"torch.{cls}": STORAGE_TYPES[name] for cls, name in TORCH_STORAGE_CLASSES.items()})
    names.update({f"torch.{name}": kind for name, kind in STORAGE_TYPES.items()})
    names.update({f"torch.{alias}": STORAGE_TYPES[name] for alias, name in TORCH_DTYPE_ALIASES.items()})
    return names


def plain_dict(items: Any = ()) -> dict[Any, Any]:
    """OrderedDict and Counter as plain dicts (pickle keeps the order): from nothing, a dict or key-value pairs."""
    if isinstance(items, dict):
        return dict(items)
    if isinstance(items, (list, tuple)) and all(isinstance(p, tuple) and len(p) == 2 for p in items):
        heights: dict[int, tuple[Any, int]] = {}
        for key, _ in items:
            key_height(key, heights)
        return dict(items)
    raise UnsafePickleError(f"refused a dict built from {shown(items)}")


def plain_set(items: Any = ()) -> set[Any]:
    """builtins.set as protocol 2 pickles a set: from a list of values already unpickled (never from an
    iterable whose length the file chooses, such as an array of 2**62 elements)."""
    if not isinstance(items, (list, tuple)):
        raise UnsafePickleError(f"refused a set built from {shown(items)}, not a list of values")
    heights: dict[int, tuple[Any, int]] = {}
    for item in items:
        key_height(item, heights)
    return set(items)


def plain_frozenset(items: Any = ()) -> frozenset[Any]:
    return frozenset(plain_set(items))


def key_height(value: Any, heights: dict[int, tuple[Any, int]], budget: int = MAX_KEY_NESTING) -> int:
    """How deep tuples and frozensets nest in a value about to be hashed; too deep is refused before
    hash() can overflow the C stack. `heights` remembers each container seen (and keeps it alive)."""
    if not isinstance(value, (tuple, frozenset)):
        return 0
    known = heights.get(id(value))
    if known is None:
        if budget <= 0:
            raise CheckpointError(f"a dict key or set element nested more than {MAX_KEY_NESTING} levels deep")
        known = (value, 1 + max((key_height(v, heights, budget - 1) for v in value), default=0))
        heights[id(value)] = known
    if known[1] > budget:
        raise CheckpointError(f"a dict key or set element nested more than {MAX_KEY_NESTING} levels deep")
    return known[1]


NUMPY_GLOBALS: dict[str, Any] = _numpy_names()  # plain values, numpy arrays and scalars
TORCH_GLOBALS: dict[str, Any] = {**NUMPY_GLOBALS, **_torch_names()}  # and what torch.save writes
OWN_TYPES = (Factory, Marker, RecordType, StorageType, Storage, TensorRecord, OtherTensor, PickledArray, PickledDType, ArrayData, DType)


def _py3_name(module: str, name: str) -> tuple[str, str]:
    """Python 2 names in protocol 0-2 pickles (`__builtin__.eval`), as Python 3 would resolve them."""
    if (module, name) in _compat_pickle.NAME_MAPPING:
        return _compat_pickle.NAME_MAPPING[(module, name)]
    return _compat_pickle.IMPORT_MAPPING.get(module, module), name


def refused_global(qualified: str, where: str) -> UnsafePickleError:
    return UnsafePickleError(
        Message(f"{where}{': ' if where else ''}refused to unpickle global {qualified!r}: the file may only hold "
                "arrays, tensors and plain containers, and nothing in it was run ", trust_hint()), option=TRUST)


_Base: Any = pickle._Unpickler  # its opcode methods are not in the type stubs
PIECE = 1 << 20


class Source:
    """The unpickler's input, read in pieces: a length a pickle states (BINUNICODE8 of 2**62 bytes) is never
    allocated up front, only what the file really holds."""

    def __init__(self, file: IO[bytes] | io.BufferedIOBase):
        self.file = file

    def read(self, n: int = -1) -> bytes:
        if n < 0:
            return self.file.read()
        parts, left = [], n
        while left > 0:
            piece = self.file.read(min(left, PIECE))
            if not piece:
                break
            parts.append(piece)
            left -= len(piece)
        return b"".join(parts)

    def readline(self) -> bytes:
        return self.file.readline()


class RestrictedUnpickler(pickle._Unpickler):
    """Resolves globals only through `allowed` (`"module.name"` -> factory or description); with
    `trust=True`, names off the list are imported as plain pickle would.

    Built on pickle's pure-Python unpickler: the C one keeps its memo as an array, so a 10-byte
    pickle saying LONG_BINPUT 2**31 makes it allocate and zero 32 GiB; here the memo is a dict."""

    stack: list[Any]  # the base class's machine state, which the stubs leave out
    append: Callable[[Any], None]
    pop_mark: Callable[[], list[Any]]
    read: Callable[[int], bytes]

    def __init__(self, file: Source, allowed: Mapping[str, Any], where: str, trust: bool = False,
                 persistent_load: Callable[[Any], Any] | None = None, objects: bool = False):
        super().__init__(file)
        self.allowed, self.where, self.trust, self.objects = allowed, where, trust, objects
        self._persistent = persistent_load
        self.heights: dict[int, tuple[Any, int]] = {}  # for key_height, over the whole load

    def find_class(self, module: str, name: str) -> Any:
        module, name = _py3_name(module, name)
        qualified = f"{module}.{name}"
        if qualified in self.allowed:
            return self.allowed[qualified]
        if self.objects:  # imported only if the file calls it, trusted (a model's class is in __main__)
            return ObjectType(module, name)
        if self.trust:
            return super().find_class(module, name)
        raise refused_global(qualified, self.where)

    def resolved(self, cls: ObjectType) -> Any:
        """A class off the list that the file calls or creates from arguments: refused, or, trusted, imported."""
        if not self.trust:
            raise refused_global(cls.name, self.where)
        return super().find_class(*cls.origin)

    def call(self, func: Any, args: Any) -> Any:
        """What REDUCE, INST and OBJ do: only our factories run, or, trusted, classes from outside the list."""
        if isinstance(func, ObjectType) and func.origin == RECONSTRUCTOR and plain_reconstruct(args):
            return Record(args[0].name)  # protocols 0 and 1 spell NEWOBJ with no arguments so; BUILD follows
        if isinstance(func, ObjectType):
            func = self.resolved(func)
        if isinstance(func, Factory):
            if not isinstance(args, tuple):
                raise UnsafePickleError(f"refused to call {func.name} with {shown(args)}, not an argument tuple")
            return func(*args)
        if self.trust and callable(func) and not isinstance(func, OWN_TYPES):
            return func(*args)
        raise UnsafePickleError(f"refused to call {shown(func)}: a pickle of arrays and tensors only passes it to the "
                                "functions that rebuild them, and nothing in the file was run")

    def load_bytearray8(self) -> None:
        """BYTEARRAY8 as pickle reads it, but from the bytes the file holds, not a bytearray(2**34) of zeros first."""
        (length,) = struct.unpack("<Q", self.read(8))
        data = self.read(length)
        if len(data) < length:
            raise pickle.UnpicklingError(f"BYTEARRAY8 of {length} bytes runs past the end of the pickle")
        self.append(bytearray(data))

    def load_reduce(self) -> None:
        args = self.stack.pop()
        self.stack[-1] = self.call(self.stack[-1], args)

    def _instantiate(self, klass: Any, args: list[Any]) -> None:
        if self.trust and isinstance(klass, type):
            _Base._instantiate(self, klass, args)
            return
        self.append(self.call(klass, tuple(args)))

    def load_newobj(self) -> None:
        args, cls = self.stack.pop(), self.stack.pop()
        self.append(self.new_object(cls, args, {}))

    def load_newobj_ex(self) -> None:
        kwargs, args, cls = self.stack.pop(), self.stack.pop(), self.stack.pop()
        self.append(self.new_object(cls, args, kwargs))

    def new_object(self, cls: Any, args: Any, kwargs: Any) -> Any:
        if isinstance(cls, ObjectType) and (args != () or kwargs):
            cls = self.resolved(cls)
        if isinstance(cls, RecordType):
            return new_record(cls, args, kwargs)
        if self.trust and isinstance(cls, type):
            return cls.__new__(cls, *args, **kwargs)
        raise UnsafePickleError(Message(f"refused to create an instance of {shown(cls)}: the file may only hold "
                                        "arrays, tensors and plain containers, and nothing in it was run ",
                                        trust_hint()), option=TRUST)

    def load_build(self) -> None:
        """BUILD completes our descriptions (a dtype's byte order, an array's state) and nothing else;
        a dict's attributes (torch's state_dict._metadata) are dropped."""
        state = self.stack.pop()
        target = self.stack[-1]
        if isinstance(target, (PickledDType, PickledArray, Record)):
            target.build(state)
        elif isinstance(target, OWN_TYPES):
            raise UnsafePickleError(f"a pickle tried to change {shown(target)}, which is read-only")
        elif type(target) is dict and isinstance(state, dict):
            pass
        elif self.trust:
            self.stack.append(state)
            _Base.load_build(self)
        else:
            raise UnsafePickleError(f"refused to set the state of {shown(target)}: the file may only hold arrays, "
                                    "tensors and plain containers")

    # --- where values are hashed: a key must not nest deeper than the C stack can hash ---

    def load_dict(self) -> None:
        items = self.pop_mark()
        for key in items[::2]:
            key_height(key, self.heights)
        self.append({items[i]: items[i + 1] for i in range(0, len(items), 2)})

    def load_setitem(self) -> None:
        key_height(self.stack[-2], self.heights)
        _Base.load_setitem(self)

    def load_setitems(self) -> None:
        items = self.pop_mark()
        target = self.stack[-1]
        for i in range(0, len(items), 2):
            key_height(items[i], self.heights)
            target[items[i]] = items[i + 1]

    def load_additems(self) -> None:
        items = self.pop_mark()
        target = self.stack[-1]
        if not isinstance(target, set):
            raise pickle.UnpicklingError(f"ADDITEMS on {shown(target)}, not a set")
        for item in items:
            key_height(item, self.heights)
        target.update(items)

    def load_frozenset(self) -> None:
        items = self.pop_mark()
        for item in items:
            key_height(item, self.heights)
        self.append(frozenset(items))

    dispatch: ClassVar[dict[int, Callable[..., None]]] = dict(_Base.dispatch)
    for _opcode, _method in ((pickle.BYTEARRAY8, load_bytearray8), (pickle.REDUCE, load_reduce), (pickle.NEWOBJ, load_newobj),
                             (pickle.NEWOBJ_EX, load_newobj_ex), (pickle.BUILD, load_build),
                             (pickle.DICT, load_dict), (pickle.SETITEM, load_setitem),
                             (pickle.SETITEMS, load_setitems), (pickle.ADDITEMS, load_additems),
                             (pickle.FROZENSET, load_frozenset)):
        dispatch[_opcode[0]] = _method
    del _opcode, _method

    def persistent_load(self, pid: Any) -> Any:
        if self._persistent is None:
            raise pickle.UnpicklingError("a persistent id, which a plain pickle never holds")
        return self._persistent(pid)


def restricted_load(data: bytes | bytearray | memoryview | io.BufferedIOBase, allowed: Mapping[str, Any], where: str,
                    trust: bool = False, persistent_load: Callable[[Any], Any] | None = None,
                    objects: bool = False) -> Any:
    """Unpickle one object; refusals raise UnsafePickleError, broken data CheckpointError, never anything else.
    `objects`: objects of classes off the list become Records of their attributes (a model torch.save pickled
    whole), their classes never imported."""
    file = Source(io.BytesIO(data) if isinstance(data, (bytes, bytearray, memoryview)) else data)
    try:
        return RestrictedUnpickler(file, allowed, where, trust, persistent_load, objects).load()
    except EmbscopeError as err:  # raised by an allowed function, which does not know the file
        if str(err).startswith(where):
            raise
        raise err.reworded(Message(f"{where}: ", message_of(err))) from None
    except MemoryError:
        raise CheckpointError(f"{where}: needs more memory than is available") from None
    except MACHINE_ERRORS as err:
        raise CheckpointError(f"{where}: expected a complete pickle, found one that cannot be read ({detail(err)})") from None
    except Exception as err:
        if not trust:
            raise
        raise CheckpointError(f"{where}: code run by the trusted pickle failed ({detail(err)})") from None


def unpickle_plain(data: bytes, where: str) -> Any:
    """The object a pickle of plain values holds (dicts, lists, strings, numbers), read by the restricted unpickler
    with no global allowed: for the tokenizers' pickled files (nanoGPT's meta.pkl), which import no reader."""
    return restricted_load(data, {}, where)
