"""Numbers worth keeping between runs (the random-pair baseline of a table), in the user's cache directory:
$XDG_CACHE_HOME/embscope, else ~/.cache/embscope; never beside the checkpoint, which embscope never writes.

An entry is found by what it was computed from: every file the table's bytes come from (the checkpoint, and
the shard or ONNX external data that holds the table), each by its path, size, modification and change
times, inode and device, and the parameters of the computation. The change time moves on every write and
cannot be set back (utime sets it to now), so a file rewritten in place with its size and mtime restored,
or replaced by another, no longer matches. That description is the entry's first line, checked when it is
read, so two descriptions whose file names collide never answer for each other. Then come the body's
length and CRC-32 (an entry cut short or changed is computed again rather than read), and the body: the
CRC-32 of the table as the pass that computed the values read it, then the values as little-endian
float64. A run that reads the whole table anyway compares that checksum, and computes again where it
differs; a run answered from the cache reads no byte of the table for it. Reading an entry needs neither
numpy nor a hash library: a small question answered from the cache imports neither. A cache that cannot be
read or written is no error: the numbers are computed again.

Only entries are ever removed or replaced: files named as entries are named (16 hex digits, `.entry`, or
the temporary name one is written under) whose first line is an entry's description. Anything else in the
folder, a checkpoint kept there or another program's file, is left alone.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import zlib
from array import array
from collections.abc import Iterable, Sequence
from pathlib import Path

from .core import files
from .core.errors import CheckpointError

VERSION = 3  # bump when a cached computation or the entry layout changes
MAX_FILES = 256  # a directory with more files than this is not cached (identity would cost too much)
MAX_ENTRIES = 512  # entries kept; the oldest go first
MAX_VALUES = 1 << 20  # values an entry may hold: a bigger file there is not one of ours
MAX_KEY_BYTES = 1 << 16  # an entry's first line, its description
SUFFIX = ".entry"
TEMPORARY_PREFIX = ".entry-"
CHECK_BYTES = 12  # the body's byte length (8) and CRC-32 (4), between the description and the body
TABLE_CHECK_BYTES = 8  # the table's CRC-32, first in the body
MAX_ENTRY_BYTES = MAX_KEY_BYTES + 1 + CHECK_BYTES + TABLE_CHECK_BYTES + 8 * MAX_VALUES
ENTRY_NAME = re.compile(r"(?:[0-9a-f]{16}|\.entry-[a-z0-9_]+)\.entry")  # entry_path's names, and store's temporaries
ENTRY_HEAD = re.compile(rb'\[\d+, "[a-z0-9-]+", ')  # how every entry's description has begun (json.dumps of key)


def directory() -> Path | None:
    """The cache folder, or None when the environment names no home for it: HOME unset for a uid with no
    passwd entry (a container's --user, env -i), or a relative HOME (which would put the cache in the working
    directory, beside a checkpoint). No cache is then used; the numbers are computed each run."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(base):
        return Path(base) / "embscope"
    try:
        home = os.path.expanduser("~")
    except (KeyError, RuntimeError, OSError):
        return None
    return Path(home) / ".cache" / "embscope" if os.path.isabs(home) else None


def file_identity(path: Path) -> list[list[str | int]] | None:
    """(path, size, mtime_ns, ctime_ns, inode, device) of a file, links followed, or of each regular file
    directly in a directory; None where that cannot be said cheaply. No byte of a file is read."""
    try:
        if path.is_dir():
            found = sorted(entry for entry in path.iterdir() if entry.is_file())
            if len(found) > MAX_FILES:
                return None
        else:
            found = [path]
        identity: list[list[str | int]] = []
        for file in found:
            info = file.stat()
            identity.append([str(file.resolve()), info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino,
                             info.st_dev])
        return identity
    except (OSError, ValueError):
        return None


def key(kind: str, sources: Sequence[Path], **parameters: object) -> str | None:
    """The description of the entry for `kind` computed from the files in `sources` (the checkpoint first, then
    the files its table's bytes come from) with these parameters (one line of JSON); None: do not cache."""
    identity = []
    for source in dict.fromkeys(Path(s) for s in sources):
        found = file_identity(source)
        if found is None:
            return None
        identity.append(found)
    text = json.dumps([VERSION, kind, identity, parameters], sort_keys=True, default=str)
    return text if len(text.encode()) <= MAX_KEY_BYTES else None


def entry_path(description: str) -> Path | None:
    folder = directory()
    if folder is None:
        return None
    data = description.encode()
    return folder / f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}{SUFFIX}"


def load(description: str, table_checksum: int | None = None) -> array[float] | None:
    """The float64 values stored under `description` (what `key` gives), or None. `table_checksum`: the
    table's CRC-32 when this run has read the whole table anyway; an entry computed from other bytes is None."""
    path = entry_path(description)
    if path is None:
        return None
    try:  # a FIFO or device planted there is refused, not waited on or read; embscope's own file, not an input
        data = files.read_bytes(path, MAX_ENTRY_BYTES, "a cache entry", record=False)
    except CheckpointError:
        return None
    described, newline, rest = data.partition(b"\n")
    check, body = rest[:CHECK_BYTES], rest[CHECK_BYTES:]
    values = body[TABLE_CHECK_BYTES:]
    if not newline or described != description.encode() or check != checksum(body) \
            or len(body) < TABLE_CHECK_BYTES or len(values) % 8 or len(values) > 8 * MAX_VALUES:
        return None  # another entry's file, or one cut short or changed since it was written
    if table_checksum is not None and int.from_bytes(body[:TABLE_CHECK_BYTES], "little") != table_checksum:
        return None  # the table's bytes are not those the values were computed from
    found = array("d", values)
    if sys.byteorder != "little":
        found.byteswap()
    return found


def store(description: str, values: Iterable[float], table_checksum: int) -> None:
    """Keep float64 values under `description`, computed from a table whose CRC-32 is `table_checksum`;
    written whole (a temporary file renamed into place), and only over an entry (or nothing)."""
    import tempfile
    packed = array("d", values)
    if sys.byteorder != "little":
        packed.byteswap()
    folder, target = directory(), entry_path(description)
    if folder is None or target is None:
        return  # no home for a cache: the next run computes again
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if os.path.lexists(target) and not is_entry(target):
            return  # something else has the entry's name: it is not replaced, and this run is not cached
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=TEMPORARY_PREFIX, suffix=SUFFIX)
        try:
            with os.fdopen(handle, "wb") as out:
                body = table_checksum.to_bytes(TABLE_CHECK_BYTES, "little") + packed.tobytes()
                out.write(description.encode() + b"\n" + checksum(body) + body)
            os.replace(temporary, target)
        except BaseException:
            os.unlink(temporary)
            raise
        prune(folder)
    except OSError:
        pass  # a read-only or full disk costs only the next run's time


def checksum(body: bytes) -> bytes:
    """The body's length and CRC-32, written before it: an entry cut short or changed is not read."""
    return len(body).to_bytes(8, "little") + zlib.crc32(body).to_bytes(4, "little")


def is_entry(path: Path) -> bool:
    """An entry this cache wrote: a regular file (not a link) with an entry's name, whose first line begins as an
    entry's description does, and not a file this run read (a checkpoint kept in the folder)."""
    if not ENTRY_NAME.fullmatch(path.name):
        return False
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode) or files.was_read(path):
            return False
    except OSError:
        return False
    head = files.peek(path, 64)
    return head is not None and ENTRY_HEAD.match(head) is not None


def prune(folder: Path) -> None:
    """Keep the newest MAX_ENTRIES entries; only entries are counted or removed."""
    named = [entry for entry in folder.iterdir() if ENTRY_NAME.fullmatch(entry.name)]
    if len(named) <= MAX_ENTRIES:
        return  # the common case: nothing opened
    aged = []
    for entry in named:
        try:
            if is_entry(entry):
                aged.append((os.lstat(entry).st_mtime_ns, entry))
        except OSError:
            continue  # gone already
    aged.sort()
    for _, entry in aged[:max(0, len(aged) - MAX_ENTRIES)]:
        entry.unlink(missing_ok=True)
