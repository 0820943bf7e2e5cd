"""Numbers worth keeping between runs (the random-pair baseline of a table), in the user's cache directory:
$XDG_CACHE_HOME/embscope, else ~/.cache/embscope; never beside the checkpoint, which embscope never writes.

An entry is found by what it was computed from: the checkpoint's files (size, modification time and a
checksum of their first bytes, where format headers live) and the parameters of the computation. That
description is the entry's first line, checked when it is read, so two descriptions whose file names
collide never answer for each other. The values follow as little-endian float64, after their length and
CRC-32, so an entry cut short or changed is computed again rather than read. Reading an entry needs
neither numpy nor a hash library: a small question answered from the cache imports neither. A cache that
cannot be read or written is no error: the numbers are computed again.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import zlib
from array import array
from collections.abc import Iterable
from pathlib import Path

from .inputs import open_to_read

VERSION = 2  # bump when a cached computation or the entry layout changes
HEAD_BYTES = 1 << 16  # the start of each file checksummed into its identity
MAX_FILES = 256  # a directory with more files than this is not cached (identity would cost too much)
MAX_ENTRIES = 512  # entries kept; the oldest go first
MAX_VALUES = 1 << 20  # values an entry may hold: a bigger file there is not one of ours
MAX_KEY_BYTES = 1 << 16  # an entry's first line, its description
SUFFIX = ".entry"
CHECK_BYTES = 12  # the values' byte length (8) and CRC-32 (4), between the description and the values


def directory() -> Path:
    base = os.environ.get("XDG_CACHE_HOME", "")
    return (Path(base) if os.path.isabs(base) else Path.home() / ".cache") / "embscope"


def file_identity(path: Path) -> list | None:
    """(name, size, mtime_ns, CRC-32 of the first 64 KiB) of a file, or of each regular file directly in a
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
                head = zlib.crc32(handle.read(HEAD_BYTES))
            identity.append([file.name, stat.st_size, stat.st_mtime_ns, head])
        return identity
    except OSError:
        return None


def key(kind: str, checkpoint: Path, **parameters: object) -> str | None:
    """The description of the entry for `kind` computed from `checkpoint` with these parameters (one line of
    JSON); None: do not cache."""
    identity = file_identity(checkpoint)
    if identity is None:
        return None
    text = json.dumps([VERSION, kind, str(checkpoint.resolve()), identity, parameters], sort_keys=True, default=str)
    return text if len(text.encode()) <= MAX_KEY_BYTES else None


def entry_path(description: str) -> Path:
    data = description.encode()
    return directory() / f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}{SUFFIX}"


def load(description: str) -> array | None:
    """The float64 values stored under `description` (what `key` gives), or None."""
    try:
        fd, info = open_to_read(entry_path(description))  # a FIFO or device planted there is not waited on or read
        with open(fd, "rb") as handle:
            if not stat.S_ISREG(info.st_mode):
                return None
            data = handle.read(MAX_KEY_BYTES + 1 + CHECK_BYTES + 8 * MAX_VALUES + 1)
    except OSError:
        return None
    described, newline, rest = data.partition(b"\n")
    check, body = rest[:CHECK_BYTES], rest[CHECK_BYTES:]
    if not newline or described != description.encode() or check != checksum(body) or len(body) % 8 \
            or len(body) > 8 * MAX_VALUES:
        return None  # another entry's file, or one cut short or changed since it was written
    values = array("d", body)
    if sys.byteorder != "little":
        values.byteswap()
    return values


def store(description: str, values: Iterable[float]) -> None:
    """Keep float64 values under `description`, written whole (a temporary file renamed into place)."""
    import tempfile
    packed = array("d", values)
    if sys.byteorder != "little":
        packed.byteswap()
    folder = directory()
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=".entry-", suffix=SUFFIX)
        try:
            with os.fdopen(handle, "wb") as out:
                body = packed.tobytes()
                out.write(description.encode() + b"\n" + checksum(body) + body)
            os.replace(temporary, entry_path(description))
        except BaseException:
            os.unlink(temporary)
            raise
        prune(folder)
    except OSError:
        pass  # a read-only or full disk costs only the next run's time


def checksum(body: bytes) -> bytes:
    """The values' length and CRC-32, written before them: an entry cut short or changed is not read."""
    return len(body).to_bytes(8, "little") + zlib.crc32(body).to_bytes(4, "little")


def prune(folder: Path) -> None:
    for old in folder.glob("*.npy"):  # baselines in the layout before this one, which nothing reads now
        old.unlink(missing_ok=True)
    entries = sorted(folder.glob(f"*{SUFFIX}"), key=lambda entry: entry.stat().st_mtime_ns)
    for entry in entries[:max(0, len(entries) - MAX_ENTRIES)]:
        entry.unlink(missing_ok=True)
