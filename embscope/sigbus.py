"""The command line's answer to SIGBUS: reading a page of a memory map past the end of a file that another
program cut short (np.save or torch.save over an existing file truncates it first) raises SIGBUS, which kills
the process without a word. cli.main installs a handler that names the file in one line and exits 1 instead.
The library never installs it: ending the process is the command line's to decide, not a notebook's kernel's.
A Python signal handler cannot do it: it would run only after the faulting instruction, which the kernel
restarts forever; so the handler is a C callback, through ctypes."""

from __future__ import annotations

import ctypes
import os
import signal
from typing import Any

from .core.memory import mapped_files
from .core.text import quote

_handler: Any = None  # the installed C callback, kept alive


def install() -> None:
    """Name a file cut short under a map in one line and exit 1, for the rest of this process (once)."""
    global _handler
    if _handler is not None or not hasattr(signal, "SIGBUS"):
        return
    try:
        callback_type = ctypes.CFUNCTYPE(None, ctypes.c_int)
        libc = ctypes.CDLL(None)
        libc.signal.argtypes = [ctypes.c_int, callback_type]
        libc.signal.restype = ctypes.c_void_p
        _handler = callback_type(file_changed)
        libc.signal(signal.SIGBUS, _handler)
    except (OSError, AttributeError):
        _handler = False  # no libc here: the process dies of SIGBUS as before


def file_changed(signum: int) -> None:
    """SIGBUS: the one line the user reads, then exit 1, before the kernel's default kills us silently."""
    shrunk = []
    for name, end in mapped_files().items():
        try:
            size = os.stat(name).st_size
        except OSError:
            size = -1
        if size < end:
            shrunk.append((name, size, end))
    if shrunk:
        name, size, end = shrunk[0]
        now = "is gone" if size < 0 else f"now holds {size} bytes"
        line = (f"Error: {quote(name)} changed while it was being read: it {now}, the data read needs {end}; "
                "nothing was written (run again once the file is complete)\n")
    else:
        line = "Error: a memory-mapped checkpoint file changed while it was being read (SIGBUS)\n"
    os.write(2, line.encode("utf-8", "replace"))
    os._exit(1)
