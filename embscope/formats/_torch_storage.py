"""A tensor record's elements, from wherever its container keeps the storage's bytes: memory-mapped where
they lie in the file, or inflated (bounded) from a compressed zip member."""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core import files
from ..core.memory import require_memory
from ..core.text import quote
from ..storage.checks import map_array
from ..storage.descriptors import TensorRecord, check_record, record_view
from ._zip import read_member


@dataclass(frozen=True)
class Stored:
    """Where a storage's bytes lie: at `offset` in the file, or (offset None) in a compressed zip `member`."""

    offset: int | None
    member: str | None = None


def read_record(path: Path, record: TensorRecord, stored: Stored, byteorder: str, where: str) -> np.ndarray:
    """The record's elements, read-only, after check_record; a memory map where the bytes are stored plainly."""
    check_record(record, where)
    dtype = np.dtype(record.kind.element.stored).newbyteorder("<" if byteorder == "little" else ">")
    if record.numel == 0:
        return np.zeros(record.size, dtype=dtype)
    storage = record.storage
    start = storage.start * storage.kind.element.itemsize  # bytes before a legacy storage view
    elements = storage.nbytes // dtype.itemsize
    if stored.offset is not None:
        base = map_array(path, dtype, stored.offset + start, (elements,), where)
    else:
        require_memory(storage.nbytes, f"{quote(path)}: compressed storage {quote(storage.key)}")
        with files.open_file(path, "a checkpoint file") as archive, zipfile.ZipFile(archive) as zf:
            info = zf.getinfo(stored.member or "")
        data = read_member(path, info, f"{quote(path)}: storage {quote(storage.key)}")
        base = np.frombuffer(data, dtype=dtype, count=elements, offset=start)
    return record_view(record, base)
