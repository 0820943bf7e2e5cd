"""Keeping memory bounded: data that cannot be memory-mapped is refused, with the amount it needs,
before it is materialised; mapped blocks are let go once read (analysis.norms walks tables so); and a
mapped file's needed length is noted, for the command line's one line when it is cut short (sigbus.py)."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import numpy as np

from . import files
from .errors import CheckpointError

MEMINFO_BYTES = 1 << 16  # /proc/meminfo is a few dozen short lines


def available_memory() -> int | None:
    """Bytes the system can give us now (MemAvailable), or None where it cannot say."""
    try:  # a system file, not an input of the answer: not recorded
        for line in files.read_bytes("/proc/meminfo", MEMINFO_BYTES, "/proc/meminfo", record=False).splitlines():
            if line.startswith(b"MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (CheckpointError, ValueError, IndexError):
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
        base = np.frombuffer(mapping, dtype=np.uint8).__array_interface__["data"][0]
        # the span the block's elements cover, not its nbytes from its start: a block of rows of a
        # Fortran-order table has one piece in every column, spread over the whole map
        low, high = byte_bounds(block)
        first = ((low - base) // mmap.PAGESIZE) * mmap.PAGESIZE
        mapping.madvise(mmap.MADV_DONTNEED, first, min(high - base, len(mapping)) - first)
    except (OSError, ValueError):
        pass  # only a hint (a closed map, a block outside it): the kernel may still drop the pages itself


def byte_bounds(array: np.ndarray) -> tuple[int, int]:
    """The first address an array's elements use, and one past the last."""
    try:
        from numpy.lib.array_utils import byte_bounds as bounds  # numpy 2
    except ImportError:
        bounds = getattr(np, "byte_bounds")  # noqa: B009 - numpy 1 only, unknown to numpy 2's type stubs
    return bounds(array)


# --- a file that shrinks under a memory map -----------------------------------------------------

_mapped: dict[str, int] = {}  # path -> the bytes our maps of it need


def watch_mapping(path: Path, end: int) -> None:
    """Note that `path` is mapped up to byte `end`. Reading a page of a map past the end of a file that
    another program cut short (np.save or torch.save over an existing file truncates it first) raises
    SIGBUS; the command line's handler (sigbus.py, installed by cli.main, never by the library) reads this
    note to name the file."""
    _mapped[str(path)] = max(_mapped.get(str(path), 0), end)


def mapped_files() -> dict[str, int]:
    """Each file mapped so far, with the bytes our maps of it need."""
    return dict(_mapped)
