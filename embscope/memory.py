"""Keeping memory bounded: data that cannot be memory-mapped is refused, with the amount it needs,
before it is materialised; mapped blocks are let go once read (analysis.norms walks tables so)."""

from __future__ import annotations

import mmap
import os

import numpy as np

from .errors import CheckpointError


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
    try:
        base = np.frombuffer(mapping, dtype=np.uint8)
        start = block.__array_interface__["data"][0] - base.__array_interface__["data"][0]
        first = (start // mmap.PAGESIZE) * mmap.PAGESIZE
        mapping.madvise(mmap.MADV_DONTNEED, first, start + block.nbytes - first)
    except (OSError, ValueError):
        pass  # only a hint (a closed map, a block outside it): the kernel may still drop the pages itself
