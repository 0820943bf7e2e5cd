"""Element types, and turning stored tensors into float32 rows for analysis without copying what is
already float32. The element-type table is the one every reader and the catalogue consult
(formats/constants.py maps each format's own type names onto it)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)  # compared nowhere: no __eq__ and __hash__ to build at import
class ElementType:
    """An element type a tensor may have: its size, how numpy holds its bytes, and whether it is read at all."""

    name: str  # as a TensorInfo reports it: numpy's name, or "bfloat16"
    itemsize: int
    stored: str  # numpy's code for the stored bytes, byte order left out ("u2" holds bfloat16's bits)
    readable: bool = True  # False: no numpy number holds it (complex, float8); such tensors are skipped with a note
    is_float: bool = False


ELEMENT_TYPES: dict[str, ElementType] = {t.name: t for t in (
    ElementType("float32", 4, "f4", is_float=True), ElementType("float64", 8, "f8", is_float=True),
    ElementType("float16", 2, "f2", is_float=True), ElementType("bfloat16", 2, "u2", is_float=True),
    ElementType("int64", 8, "i8"), ElementType("int32", 4, "i4"), ElementType("int16", 2, "i2"),
    ElementType("int8", 1, "i1"), ElementType("uint8", 1, "u1"), ElementType("bool", 1, "b1"),
    ElementType("uint16", 2, "u2"), ElementType("uint32", 4, "u4"), ElementType("uint64", 8, "u8"),
    ElementType("complex64", 8, "c8", readable=False), ElementType("complex128", 16, "c16", readable=False),
    ElementType("complex32", 4, "u4", readable=False), ElementType("float8_e4m3fn", 1, "u1", readable=False),
    ElementType("float8_e5m2", 1, "u1", readable=False), ElementType("float8_e4m3fnuz", 1, "u1", readable=False),
    ElementType("float8_e5m2fnuz", 1, "u1", readable=False), ElementType("float8_e8m0fnu", 1, "u1", readable=False),
    ElementType("float4_e2m1fn_x2", 1, "u1", readable=False), ElementType("bits16", 2, "u2", readable=False),
    *(ElementType(name, 1, "u1", readable=False) for name in (  # packed, bit-level and quantized types
        "bits8", "bits1x8", "bits2x4", "bits4x2", "qint8", "quint8", "quint4x2", "quint2x4",
        *(f"int{n}" for n in range(1, 8)), *(f"uint{n}" for n in range(1, 8)))),
    ElementType("qint32", 4, "i4", readable=False),
)}

def stored_dtype(name: str, byteorder: str = "<") -> str:
    """numpy's code for the stored bytes of element type `name` in a file of this byte order ("<f4" for float32):
    readers map their format's type names onto ELEMENT_TYPES and take the code from here."""
    return byteorder + ELEMENT_TYPES[name].stored


# bytes per element of every dtype a reader may report
ITEMSIZE = {t.name: t.itemsize for t in ELEMENT_TYPES.values() if t.readable}
FLOAT_DTYPES = frozenset(t.name for t in ELEMENT_TYPES.values() if t.is_float)
# the float types a model's weights are stored in that no numpy number holds: an FP8 model's linear layers are its
# parameters, though never read (E8M0 holds block scales, no weights)
FP8_WEIGHT_DTYPES = frozenset({"float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"})


def to_float32(raw: np.ndarray, dtype: str) -> np.ndarray:
    """`raw` as float32: itself when it is already native float32, else one converted copy.
    bf16 arrives as uint16 because numpy has no bfloat16."""
    if dtype == "bfloat16":
        # a bf16 value is the top half of the float32 with the same bits; shifted in place, one copy
        wide = raw.astype(np.uint32)
        wide <<= 16
        return wide.view(np.float32)
    if raw.dtype == np.float32 and raw.dtype.isnative:
        return raw
    return raw.astype(np.float32)
