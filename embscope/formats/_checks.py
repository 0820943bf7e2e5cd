"""Checks every reader makes on what a header declares, before anything is read or allocated:
headers lie (by damage or by design), and a lie must become one clear error, not a MemoryError."""

from __future__ import annotations

import math
from pathlib import Path

from ..errors import CheckpointError
from ..text import quote

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
    # zero dimensions are skipped: an empty tensor with a dimension of 10^30 is still a lie
    elements = math.prod(max(d, 1) for d in shape)
    if elements > MAX_ELEMENTS:
        raise CheckpointError(f"{where}: shape {list(shape)} declares {elements} elements, "
                              f"an absurd size (more than 2^48)")
    return tuple(shape)


def check_extent(path: Path, offset: int, nbytes: int, where: str) -> None:
    """The declared bytes [offset, offset + nbytes) lie inside the file as it is now."""
    try:
        size = path.stat().st_size
    except OSError as err:
        raise CheckpointError(f"cannot read {quote(path)}: {err.strerror}") from None
    if offset < 0 or offset + nbytes > size:
        raise CheckpointError(f"{where}: expected {nbytes} bytes of data at offset {offset}, "
                              f"the file holds {size} bytes")
