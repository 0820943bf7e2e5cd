"""One JSON document on stdout: full float precision, and null where a number is undefined."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np


def clean(value):
    """Plain JSON values: numpy scalars unwrapped, NaN and Inf turned into null."""
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, np.ndarray):
        return [clean(v) for v in value.tolist()]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, Path):
        return str(value)
    return value


def emit(document: dict) -> None:
    sys.stdout.write(json.dumps(clean(document), allow_nan=False, ensure_ascii=False) + "\n")
