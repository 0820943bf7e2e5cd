"""Settings the BLAS library reads once, when numpy loads: applied when this module is imported, which
embscope/__init__.py does before anything else, so before numpy loads. A value the user has set is kept.
And `one_thread()`: OpenBLAS's thread count set to one for the length of a block (small work), then put back."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

# After each call, OpenBLAS's idle workers spin for 2**OPENBLAS_THREAD_TIMEOUT cycles (default 2**28, about
# 0.1 s) before they sleep, holding a core that the top-k's selection, run between matmuls, then lacks; 2**4
# lets them sleep at once (neighbors --all on 2 cores: 80% -> 87% of the matmul floor).
SETTINGS = {"OPENBLAS_THREAD_TIMEOUT": "4"}


def settle() -> None:
    """Apply SETTINGS where the environment does not set them (it counts only before numpy is imported)."""
    for name, value in SETTINGS.items():
        os.environ.setdefault(name, value)


settle()  # on import: the package imports this module first, before numpy


# OpenBLAS's thread-count calls, by the names its builds export: numpy's wheels (scipy-openblas, 64-bit ints), then
# a system or older numpy OpenBLAS
THREAD_CALLS = (("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
                ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
                ("openblas_get_num_threads", "openblas_set_num_threads"))
_lock = threading.Lock()  # the thread count is one per process: blocks in two threads share one setting
_inside: list[int] = []  # the thread count found when the outermost open block began, one entry per open block


def openblas_threads() -> tuple[Callable[[], int], Callable[[int], None]] | None:
    """The (get, set) of the thread count of the OpenBLAS this process has loaded (numpy's), found among the
    libraries mapped into it (/proc/self/maps); None where there is none to find (another BLAS, another system)."""
    import ctypes
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            paths = sorted({line.split(maxsplit=5)[-1].strip() for line in maps if "openblas" in line.lower()})
    except OSError:
        return None
    for path in paths:
        try:
            library = ctypes.CDLL(path)  # already loaded: the same handle, nothing loaded again
        except OSError:
            continue
        for get_name, set_name in THREAD_CALLS:
            if hasattr(library, get_name) and hasattr(library, set_name):
                get, put = getattr(library, get_name), getattr(library, set_name)
                get.argtypes, get.restype = [], ctypes.c_int
                put.argtypes, put.restype = [ctypes.c_int], None
                return get, put
    return None


@contextmanager
def one_thread() -> Iterator[None]:
    """OpenBLAS on one thread inside the block, its thread count put back when the last open block ends. For
    products too small to share: waking the second thread for each costs more CPU than it saves, many times more
    on a busy machine, where the caller spins until the woken thread gets a core."""
    calls = openblas_threads()
    if calls is None:
        yield
        return
    get, put = calls
    with _lock:
        _inside.append(get() if not _inside else _inside[0])
        put(1)
    try:
        yield
    finally:
        with _lock:
            before = _inside.pop()
            if not _inside:
                put(before)
