"""A pickle reader that can only build what the caller allows: every global a pickle names is
looked up in an allow-list of harmless callables, and anything else is refused before it runs."""

from __future__ import annotations

import _compat_pickle
import collections
import importlib
import io
import pickle
import struct
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..errors import CheckpointError, EmbscopeError, UnsafePickleError

# what a broken or hostile pickle can make the unpickler raise, besides our own errors
UNPICKLE_ERRORS = (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, KeyError,
                   IndexError, ImportError, OverflowError, MemoryError, RecursionError, UnicodeDecodeError,
                   struct.error)


def numpy_module(*names: str):
    """The first of numpy's module names that imports: numpy 2 moved numpy.core to numpy._core."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ImportError(names[0])


def _latin1_encode(text: object, encoding: str = "utf-8") -> bytes:
    """Protocol 2 stores bytes as `_codecs.encode(text, "latin1")`; no other codec is needed."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError("_codecs.encode is allowed only for latin1 text")
    return text.encode("latin1")


def refuse_setstate(self, state: Any) -> None:
    """For objects the allow-list hands out: a pickle's BUILD opcode may not change them
    (a frozen slotted dataclass would otherwise accept new field values through __setstate__)."""
    raise pickle.UnpicklingError(f"a pickle tried to change a {type(self).__name__}, which is read-only")


class Harmless:
    """An allowed callable, sealed: a pickle's BUILD opcode can set attributes on the objects it names,
    and an allowed function must not be changed for the next file a long-running process opens."""

    __slots__ = ("func",)

    def __init__(self, func: Callable[..., Any]):
        object.__setattr__(self, "func", func)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("an allowed callable is read-only")

    __setstate__ = refuse_setstate

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Harmless({getattr(self.func, '__qualname__', self.func)!r})"


def _bytearray(source: Any = b"", *args: Any) -> bytearray:
    """bytearray as pickles call it (from bytes, or latin1 text in protocol 2), never from a size:
    bytearray(2**34) in a 30-byte pickle would zero 16 GiB."""
    if not isinstance(source, (bytes, str)):
        raise pickle.UnpicklingError(f"bytearray may be built from bytes or text only, not {type(source).__name__}")
    return bytearray(source, *args)


def _reconstruct_empty(multiarray: Any) -> Callable[..., np.ndarray]:
    """numpy pickles every array as _reconstruct(ndarray, (0,), b'b') and then sets its state; any
    other shape would allocate (and for object arrays fill) memory the pickle never paid for."""
    def reconstruct(subtype: Any, shape: Any, dtype: Any) -> np.ndarray:
        empty = isinstance(shape, (tuple, list)) and tuple(shape) == (0,)
        if subtype is not np.ndarray or not empty:
            raise pickle.UnpicklingError("numpy's _reconstruct is allowed only for an empty ndarray, as numpy pickles it")
        return multiarray._reconstruct(np.ndarray, (0,), dtype)
    return reconstruct


def _fresh_dtype(spec: Any, align: bool = False, copy: bool = True) -> np.dtype:
    """np.dtype as pickles call it, always a copy: the BUILD that follows must not reach numpy's shared dtypes."""
    return np.dtype(spec, bool(align), True)


def _numpy_globals() -> dict[str, Any]:
    multiarray = numpy_module("numpy._core.multiarray", "numpy.core.multiarray")
    numeric = numpy_module("numpy._core.numeric", "numpy.core.numeric")
    allowed: dict[str, Any] = {"numpy.ndarray": np.ndarray, "numpy.dtype": Harmless(_fresh_dtype)}
    # numpy 1.x pickles name numpy.core, numpy 2.x numpy._core; both mean the same functions
    for package in ("numpy.core", "numpy._core"):
        allowed[f"{package}.multiarray._reconstruct"] = Harmless(_reconstruct_empty(multiarray))
        allowed[f"{package}.multiarray.scalar"] = Harmless(multiarray.scalar)
        allowed[f"{package}.numeric._frombuffer"] = Harmless(numeric._frombuffer)  # protocol 5 arrays
    return allowed


# plain numpy arrays, numpy scalars and the containers pickle cannot express with opcodes alone;
# the types here are built-in (static) types, whose attributes cannot be set
NUMPY_GLOBALS: dict[str, Any] = {
    **_numpy_globals(),
    "collections.OrderedDict": collections.OrderedDict,
    "_codecs.encode": Harmless(_latin1_encode),
    "builtins.set": set,
    "builtins.frozenset": frozenset,
    "builtins.bytearray": Harmless(_bytearray),
    "builtins.complex": complex,
}


def _py3_name(module: str, name: str) -> tuple[str, str]:
    """Python 2 names in protocol 0-2 pickles (`__builtin__.eval`), as Python 3 would resolve them."""
    if (module, name) in _compat_pickle.NAME_MAPPING:
        return _compat_pickle.NAME_MAPPING[(module, name)]
    return _compat_pickle.IMPORT_MAPPING.get(module, module), name


ARRAY_KINDS = "biufcSU"  # plain element types; object arrays ("O") hold unpickled values, checked apart


def check_dtype_state(dtype: np.dtype, state: Any) -> None:
    """numpy's dtype.__setstate__ trusts its input: a six-element state crashes the process
    (a segfault in _multiarray_umath). Only the state numpy itself writes for this dtype passes."""
    endian = state[1] if isinstance(state, tuple) and len(state) > 1 else None
    canonical = dtype.newbyteorder(endian) if endian in ("<", ">") else dtype
    if state != canonical.__reduce__()[2]:
        raise pickle.UnpicklingError(f"a numpy dtype state numpy does not write for {dtype}: {str(state)[:80]}")


def check_array_state(array: np.ndarray, state: Any) -> None:
    """ndarray.__setstate__ gets only what numpy writes for a plain array: a shape, a plain dtype,
    and data of exactly the size they imply."""
    if not (isinstance(state, tuple) and len(state) in (4, 5)):
        raise pickle.UnpicklingError("an ndarray state that is not numpy's (version, shape, dtype, order, data)")
    if len(state) == 5 and state[0] != 1:
        raise pickle.UnpicklingError(f"an ndarray state of version {str(state[0])[:20]}, not 1")
    shape, dtype, fortran, data = state[-4:]
    if not (isinstance(shape, tuple) and all(type(d) is int and 0 <= d <= 2**48 for d in shape)):
        raise pickle.UnpicklingError(f"an ndarray shape that is not a tuple of sizes: {str(shape)[:60]}")
    if not isinstance(dtype, np.dtype) or dtype.fields is not None or dtype.subdtype is not None:
        raise pickle.UnpicklingError(f"an ndarray of dtype {str(dtype)[:40]}, not a plain element type")
    if not isinstance(fortran, bool):
        raise pickle.UnpicklingError("an ndarray order flag that is not a bool")
    count = 1
    for d in shape:
        count *= d
    if dtype.kind == "O":
        if not (isinstance(data, list) and len(data) == count):
            raise pickle.UnpicklingError(f"an object array of {count} elements without a list of {count} values")
    elif dtype.kind not in ARRAY_KINDS:
        raise pickle.UnpicklingError(f"an ndarray of dtype {dtype}, not a plain element type")
    elif not (isinstance(data, (bytes, bytearray)) and len(data) == count * dtype.itemsize):
        raise pickle.UnpicklingError(f"ndarray data of the wrong size for shape {list(shape)} of {dtype}")


class RestrictedUnpickler(pickle._Unpickler):
    """Resolves globals only through `allowed` (`"module.name"` -> object); with `trust=True`,
    names off the list are imported as plain pickle would.

    Built on pickle's pure-Python unpickler: the C one keeps its memo as an array, so a 10-byte
    pickle saying LONG_BINPUT 2**31 makes it allocate and zero 32 GiB; here the memo is a dict."""

    def __init__(self, file, allowed: Mapping[str, Any], where: str, trust: bool = False,
                 persistent_load: Callable[[Any], Any] | None = None):
        super().__init__(file)
        self.allowed, self.where, self.trust = allowed, where, trust
        self._persistent = persistent_load

    def find_class(self, module: str, name: str) -> Any:
        module, name = _py3_name(module, name)
        qualified = f"{module}.{name}"
        if qualified in self.allowed:
            return self.allowed[qualified]
        if self.trust:
            return super().find_class(module, name)
        raise UnsafePickleError(
            f"{self.where}: refused to unpickle global {qualified!r}: the file may only hold arrays, "
            "tensors and plain containers, and nothing in it was run (use --trust-pickle only for files you made)")

    def load_build(self) -> None:
        """BUILD sets an object's state through its __setstate__; numpy's trust theirs, so the state
        of a dtype or an array is checked first."""
        target, state = self.stack[-2], self.stack[-1]
        if isinstance(target, np.dtype):
            check_dtype_state(target, state)
        elif isinstance(target, np.ndarray):
            check_array_state(target, state)
        super().load_build()

    dispatch = dict(pickle._Unpickler.dispatch)
    dispatch[pickle.BUILD[0]] = load_build

    def persistent_load(self, pid: Any) -> Any:
        if self._persistent is None:
            raise pickle.UnpicklingError("a persistent id, which a plain pickle never holds")
        return self._persistent(pid)


def restricted_load(data: bytes | io.BufferedIOBase, allowed: Mapping[str, Any], where: str,
                    trust: bool = False, persistent_load: Callable[[Any], Any] | None = None) -> Any:
    """Unpickle one object; refusals raise UnsafePickleError, broken data CheckpointError, never anything else."""
    file = io.BytesIO(data) if isinstance(data, (bytes, bytearray, memoryview)) else data
    try:
        return RestrictedUnpickler(file, allowed, where, trust, persistent_load).load()
    except UnsafePickleError:
        raise
    except EmbscopeError as err:  # raised by an allowed callable, which does not know the file
        if str(err).startswith(where):
            raise
        raise type(err)(f"{where}: {err}") from None
    except Exception as err:
        detail = f"{err.__class__.__name__}: {first_line(err)}"
        if trust and not isinstance(err, UNPICKLE_ERRORS):  # code from the trusted file raised
            raise CheckpointError(f"{where}: code run by the trusted pickle failed ({detail})") from None
        raise CheckpointError(f"{where}: expected a complete pickle, found one that cannot be read ({detail})") from None


def first_line(err: BaseException) -> str:
    lines = str(err).splitlines()
    return lines[0][:200] if lines else "no detail"
