"""Keeping memory bounded: tables are walked in blocks of rows, and data that cannot be
memory-mapped is refused, with the amount it needs, before it is materialised."""

from __future__ import annotations

import mmap
import os
from typing import Iterator

import numpy as np

from .arrays import to_float32
from .errors import CheckpointError

BLOCK_BYTES = 32 * 1024 * 1024  # float32 rows converted and reduced at a time


def available_memory() -> int | None:
    """Bytes the system can give us now (MemAvailable), or None where it cannot say."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def size_text(nbytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} bytes"


def require_memory(nbytes: int, what: str) -> None:
    """Refuse, before allocating, to load `nbytes` that the system does not have free."""
    available = available_memory()
    if available is not None and nbytes > available:
        raise CheckpointError(f"{what} needs {size_text(nbytes)} of memory to load (it cannot be memory-mapped), "
                              f"only {size_text(available)} is available")


def release(block: np.ndarray) -> None:
    """Drop the pages of a memory-mapped block from this process once it has been used, so that
    walking a table bigger than memory keeps only one block resident."""
    mapping = getattr(block, "_mmap", None)
    if not isinstance(mapping, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED") or block.size == 0:
        return
    base = np.frombuffer(mapping, dtype=np.uint8)
    start = block.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    page = mmap.PAGESIZE
    first = (start // page) * page
    try:
        mapping.madvise(mmap.MADV_DONTNEED, first, start + block.nbytes - first)
    except (OSError, ValueError):
        pass  # only a hint: the kernel may still drop the pages itself


def row_blocks(raw: np.ndarray, dtype: str, block_bytes: int = BLOCK_BYTES) -> Iterator[tuple[int, np.ndarray]]:
    """(first row, float32 rows) for consecutive blocks of a 2-D stored table; at most one block
    of converted rows exists at a time, and mapped pages are released after each block."""
    rows = raw.shape[0]
    width = max(1, int(np.prod(raw.shape[1:], dtype=np.int64))) * 4
    step = max(1, block_bytes // width)
    for start in range(0, rows, step):
        stored = raw[start:start + step]
        yield start, to_float32(stored, dtype)
        release(stored)


def row_norms(raw: np.ndarray, dtype: str, block_bytes: int = BLOCK_BYTES) -> np.ndarray:
    """L2 norm of each row, summed in float64 (half-precision rows are upcast first); a row
    holding NaN or Inf gets NaN or Inf, which the caller reports."""
    norms = np.empty(raw.shape[0], dtype=np.float64)
    for start, block in row_blocks(raw, dtype, block_bytes):
        flat = block.reshape(block.shape[0], -1)
        with np.errstate(over="ignore", invalid="ignore"):
            # einsum casts to float64 in small buffers: no float64 copy of the block is made
            norms[start:start + len(flat)] = np.sqrt(np.einsum("ij,ij->i", flat, flat, dtype=np.float64))
    return norms
