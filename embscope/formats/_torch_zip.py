"""torch.save's zip format read without torch: data.pkl is unpickled by the restricted unpickler, whose
torch names build records of where each tensor's bytes lie; no byte of a tensor is read until asked."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path
from typing import Any

from ..core.errors import CheckpointError
from ..core.memory import require_memory
from ..core.text import quote
from ..storage.descriptors import Storage, StorageType
from ..storage.unpickle import MAX_INT, TORCH_GLOBALS, restricted_load, shown
from ._torch_storage import Stored
from ._zip import MemberReader, data_offset, is_stored, open_zip, read_member

MAX_BYTEORDER = 16  # "little" or "big", and a newline
from .sniffs import data_pickle_name


class StorageLoader:
    """persistent_load for data.pkl: ('storage', kind, key, location, numel) -> a Storage whose member
    exists and holds exactly the bytes it declares; where those bytes lie goes in `stored`."""

    def __init__(self, path: Path, zf: zipfile.ZipFile, prefix: str, file_size: int):
        self.path, self.zf, self.prefix = path, zf, prefix
        self.file_size = file_size
        self.storages: dict[str, Storage] = {}
        self.stored: dict[str, Stored] = {}

    def __call__(self, pid: Any) -> Storage:
        where = quote(self.path)
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise CheckpointError(f"{where}: expected storage references in data.pkl, found {shown(pid)}")
        _, kind, key, _location, numel = pid
        if not isinstance(kind, StorageType) or not isinstance(key, str) or type(numel) is not int or not 0 <= numel <= MAX_INT:
            raise CheckpointError(f"{where}: malformed storage reference ({shown(kind)}, {shown(key)}, {shown(numel)})")
        if key in self.storages:
            if self.storages[key].kind is not kind or self.storages[key].numel != numel:
                raise CheckpointError(f"{where}: storage {quote(key)} is declared twice, differently")
            return self.storages[key]
        member = f"{self.prefix}/data/{key}"
        try:
            info = self.zf.getinfo(member)
        except KeyError:
            raise CheckpointError(f"{where}: data.pkl names storage {quote(key)}, which the archive lacks") from None
        storage = Storage(key, kind, numel)
        if info.file_size != storage.nbytes:
            raise CheckpointError(f"{where}: storage {quote(key)} declares {numel} {kind.torch_name} elements "
                                  f"({storage.nbytes} bytes), its member holds {info.file_size} bytes")
        offset = None
        if is_stored(info):
            offset = data_offset(self.zf.fp, info, where)
            if offset + storage.nbytes > self.file_size:
                raise CheckpointError(f"{where}: storage {quote(key)} runs past the end of the file")
        self.storages[key] = storage
        self.stored[key] = Stored(offset, member)
        return storage


def load_zip(path: Path, trust: bool) -> tuple[Any, dict[str, Stored], str]:
    """The object torch.save pickled, with TensorRecords where the tensors were; where each storage's
    bytes lie; and the byte order."""
    where = quote(path)
    archive, zf = open_zip(path, "torch.save zip")
    with archive, zf:
        pkl = data_pickle_name(zf.namelist())
        if pkl is None:
            raise CheckpointError(f"{where}: expected exactly one <archive>/data.pkl in the torch zip, found "
                                  f"{sum(n.endswith('data.pkl') for n in zf.namelist())}")
        prefix = pkl.rsplit("/", 1)[0]
        byteorder = read_byteorder(path, zf, prefix)
        info = zf.getinfo(pkl)
        require_memory(info.file_size, f"{where}: data.pkl")  # a compressed member can expand
        loader = StorageLoader(path, zf, prefix, os.fstat(archive.fileno()).st_size)
        # streamed: a compressed data.pkl inflates only as far as its pickle goes
        with MemberReader(path, info, f"{where}: data.pkl") as member:
            obj = restricted_load(io.BufferedReader(member), TORCH_GLOBALS, where, trust=trust,
                                  persistent_load=loader, objects=True)
    return obj, loader.stored, byteorder


def read_byteorder(path: Path, zf: zipfile.ZipFile, prefix: str) -> str:
    try:
        info = zf.getinfo(f"{prefix}/byteorder")
    except KeyError:
        return "little"  # files from torch before 1.10 have no byteorder record and are little-endian
    if info.file_size > MAX_BYTEORDER:
        raise CheckpointError(f"{quote(path)}: expected a byteorder record saying 'little' or 'big', "
                              f"found one of {info.file_size} bytes")
    text = read_member(path, info, f"{quote(path)}: the byteorder record").decode("ascii", "replace").strip()
    if text not in ("little", "big"):
        raise CheckpointError(f"{quote(path)}: expected byteorder 'little' or 'big', found {quote(text[:20])}")
    return text
