"""Turning stored tensors into float32 rows for analysis, without copying what is already float32."""

from __future__ import annotations

import numpy as np

FLOAT_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64"})

# bytes per element of every dtype a reader may report
ITEMSIZE = {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
    "int64": 8, "uint64": 8, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8,
}


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
