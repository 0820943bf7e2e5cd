"""Numbers worth keeping between runs (the random-pair baseline of a table), in the user's cache directory:
$XDG_CACHE_HOME/embscope, else ~/.cache/embscope; never beside the checkpoint, which embscope never writes.

An entry is found by what it was computed from: the checkpoint's files (size, modification time and a
hash of their first bytes, where format headers live) and the parameters of the computation. A cache that
cannot be read or written is no error: the numbers are computed again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
from array import array
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


VERSION = 1  # bump when a cached computation changes
HEAD_BYTES = 1 << 16  # the start of each file hashed into its identity
MAX_FILES = 256  # a directory with more files than this is not cached (identity would cost too much)
MAX_ENTRIES = 512  # entries kept; the oldest go first
MAX_VALUES = 1 << 20  # values an entry may hold: a bigger file there is not one of ours
NPY_HEADER_BYTES = 128  # np.save pads its version 1.0 header to a multiple of 64 bytes; a vector's fits in 128
# what np.save writes for a little-endian float64 vector: magic, version 1.0, header length, header dict
NPY_FLOAT64_VECTOR = re.compile(rb"\x93NUMPY\x01\x00(..)\{'descr': '<f8', 'fortran_order': False, "
                                rb"'shape': \((\d{1,7}),\), \} *\n", re.DOTALL)


def directory() -> Path:
    base = os.environ.get("XDG_CACHE_HOME", "")
    return (Path(base) if os.path.isabs(base) else Path.home() / ".cache") / "embscope"


def file_identity(path: Path) -> list | None:
    """(name, size, mtime_ns, sha256 of the first 64 KiB) of a file, or of each regular file directly in a
    directory; None where that cannot be said cheaply."""
    try:
        if path.is_dir():
            files = sorted(entry for entry in path.iterdir() if entry.is_file())
            if len(files) > MAX_FILES:
                return None
        else:
            files = [path]
        identity = []
        for file in files:
            stat = file.stat()
            with open(file, "rb") as handle:
                head = hashlib.sha256(handle.read(HEAD_BYTES)).hexdigest()
            identity.append([file.name, stat.st_size, stat.st_mtime_ns, head])
        return identity
    except OSError:
        return None


def key(kind: str, checkpoint: Path, **parameters: object) -> str | None:
    """The entry name for `kind` computed from `checkpoint` with these parameters; None: do not cache."""
    identity = file_identity(checkpoint)
    if identity is None:
        return None
    text = json.dumps([VERSION, kind, str(checkpoint.resolve()), identity, parameters], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def load(name: str) -> array | None:
    """The float64 values stored under `name`, or None. Read without numpy: a cached baseline is what lets a
    small question be answered without importing it."""
    try:
        with open(directory() / f"{name}.npy", "rb") as handle:
            data = handle.read(NPY_HEADER_BYTES + 8 * MAX_VALUES + 1)
    except OSError:
        return None
    found = NPY_FLOAT64_VECTOR.match(data)
    if found is None:
        return None
    count, body = int(found.group(2)), data[found.end():]
    if count > MAX_VALUES or len(body) != 8 * count:
        return None
    values = array("d", body)
    if sys.byteorder != "little":
        values.byteswap()
    return values


def store(name: str, values: np.ndarray) -> None:
    """Keep float64 values under `name`, written whole (a temporary file renamed into place)."""
    import numpy as np
    folder = directory()
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=".entry-", suffix=".npy")
        try:
            with os.fdopen(handle, "wb") as out:
                np.save(out, np.asarray(values, dtype=np.float64), allow_pickle=False)
            os.replace(temporary, folder / f"{name}.npy")
        except BaseException:
            os.unlink(temporary)
            raise
        prune(folder)
    except OSError:
        pass  # a read-only or full disk costs only the next run's time


def prune(folder: Path) -> None:
    entries = sorted(folder.glob("*.npy"), key=lambda entry: entry.stat().st_mtime_ns)
    for entry in entries[:max(0, len(entries) - MAX_ENTRIES)]:
        entry.unlink(missing_ok=True)
