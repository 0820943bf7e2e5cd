"""torch.save's legacy format (before torch 1.6, or `_use_new_zipfile_serialization=False`) read without
torch: five pickles in a row (the magic number, the protocol version, system info, the object, the list
of storage keys), then each storage's raw bytes in the order of that list (an int64 element count, then
the elements, little-endian). All five pickles go through the restricted unpickler; each storage's size
is checked against the record that declared it and against the file before anything is read, and the
storages are memory-mapped where they lie."""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any, BinaryIO

from ..core import files
from ..core.errors import CheckpointError
from ..core.text import quote
from ..storage.constants import TORCH_LEGACY_MAGIC, TORCH_LEGACY_PROTOCOL
from ..storage.descriptors import Storage, StorageType
from ..storage.unpickle import MAX_INT, TORCH_GLOBALS, ObjectType, restricted_load, shown
from ._torch_storage import Stored

COUNT = struct.Struct("<q")  # each storage's element count, before its bytes


class LegacyStorages:
    """persistent_load for the object pickle: ('storage', kind, key, location, numel, view) -> a Storage;
    ('module', class, source file, source) -> the class, as the legacy format refers to a pickled model's classes.
    `view` is None, or (view key, offset, size) for a slice of the storage under `key` (torch < 1.0)."""

    def __init__(self, where: str):
        self.where = where
        self.roots: dict[str, Storage] = {}

    def __call__(self, pid: Any) -> Storage | ObjectType:
        if isinstance(pid, tuple) and len(pid) == 4 and pid[0] == "module" and isinstance(pid[1], ObjectType):
            return pid[1]  # a pickled model's class, beside its source text (which torch.load compares, we ignore)
        return self.storage(pid)

    def storage(self, pid: Any) -> Storage:
        if not (isinstance(pid, tuple) and len(pid) == 6 and pid[0] == "storage"):
            raise CheckpointError(f"{self.where}: expected storage references, found {shown(pid)}")
        _, kind, key, _location, numel, view = pid
        if not isinstance(kind, StorageType) or not isinstance(key, str) or type(numel) is not int or not 0 <= numel <= MAX_INT:
            raise CheckpointError(f"{self.where}: malformed storage reference ({shown(kind)}, {shown(key)}, {shown(numel)})")
        root = self.roots.setdefault(key, Storage(key, kind, numel))
        if root.kind is not kind or root.numel != numel:
            raise CheckpointError(f"{self.where}: storage {quote(key)} is declared twice, differently")
        if view is None:
            return root
        if not (isinstance(view, tuple) and len(view) == 3 and all(type(v) is int and 0 <= v <= MAX_INT
                                                                    for v in view[1:])):
            raise CheckpointError(f"{self.where}: malformed storage view {shown(view)}")
        _, offset, size = view
        if offset + size > numel:
            raise CheckpointError(f"{self.where}: a view of {size} elements at {offset} runs past storage "
                                  f"{quote(key)} of {numel}")
        return Storage(key, kind, size, start=offset)


def expect(value: Any, wanted: Any, what: str, where: str) -> None:
    if value != wanted or type(value) is not type(wanted):
        raise CheckpointError(f"{where}: expected {what} {wanted!r}, found {shown(value)}")


def load_legacy(path: Path, trust: bool) -> tuple[Any, dict[str, Stored]]:
    """The object torch.save pickled, with TensorRecords where the tensors were, and where each storage lies."""
    where = f"{quote(path)} (legacy PyTorch file)"
    loader = LegacyStorages(where)
    with files.open_file(path, "a checkpoint file") as f:
        expect(restricted_load(f, {}, where), TORCH_LEGACY_MAGIC, "the magic number", where)
        expect(restricted_load(f, {}, where), TORCH_LEGACY_PROTOCOL, "protocol version", where)
        info = restricted_load(f, {}, where)
        if not isinstance(info, dict) or info.get("little_endian") is not True:
            raise CheckpointError(f"{where}: expected system info of a little-endian machine, found {shown(info)}")
        obj = restricted_load(f, TORCH_GLOBALS, where, trust=trust, persistent_load=loader, objects=True)
        keys = restricted_load(f, {}, where)
        if not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)) or len(set(keys)) != len(keys):
            raise CheckpointError(f"{where}: expected a list of distinct storage keys, found {shown(keys)}")
        stored = locate_storages(f, os.fstat(f.fileno()).st_size, keys, loader.roots, where)
    return obj, stored


def locate_storages(f: BinaryIO, size: int, keys: list[str], roots: dict[str, Storage],
                    where: str) -> dict[str, Stored]:
    """Where each storage's elements start, walking the raw section: every count is checked against the
    record that declared the storage and against the file's size before the walk moves past it."""
    unknown = [k for k in keys if k not in roots]
    missing = [k for k in roots if k not in keys]
    if unknown or missing:
        key = (unknown or missing)[0]
        raise CheckpointError(f"{where}: storage {quote(key)} is " + ("listed but never used" if unknown else
                                                                      "used but not listed among the stored ones"))
    stored, position = {}, f.tell()
    for key in keys:
        f.seek(position)
        head = f.read(COUNT.size)
        if len(head) < COUNT.size:
            raise CheckpointError(f"{where}: the file ends before storage {quote(key)}")
        (count,) = COUNT.unpack(head)
        root = roots[key]
        if count != root.numel:
            raise CheckpointError(f"{where}: storage {quote(key)} holds {count} elements, its record declares "
                                  f"{root.numel}")
        start = position + COUNT.size
        if start + root.nbytes > size:
            raise CheckpointError(f"{where}: storage {quote(key)} of {root.nbytes} bytes runs past the end of "
                                  f"the file ({size} bytes)")
        stored[key] = Stored(start)
        position = start + root.nbytes
    return stored
