"""PyTorch `.pt/.pth/.bin`: a raw state dict, a nanoGPT-style dict holding one, or a whole pickled model. Both torch.save formats,
the zip and the legacy one, are read without torch: their pickles by the restricted unpickler, their
storages memory-mapped where they lie. --trust-pickle lets a file name classes off the allow-list."""

from __future__ import annotations

import dataclasses
from functools import partial
from pathlib import Path
from typing import Any

from ..core import files
from ..core.arrays import FP8_WEIGHT_DTYPES, to_float32
from ..core.checkpoint import Checkpoint, TensorInfo
from ..core.errors import CheckpointError
from ..core.text import quote
from ..storage.base import OpenOptions
from ..storage.constants import TORCH_LEGACY_HEAD, ZIP_MAGIC
from ..storage.descriptors import OtherTensor, TensorRecord, check_record
from ..storage.unpickle import PickledArray
from ._fairseq import fairseq_config, fairseq_step
from ._shards import missing, shards_of
from ._state_dict import (
    array_tensor,
    find_config,
    find_step,
    flatten,
    plain_value,
    state_dict_of,
    strip_wrapper_prefixes,
)
from ._torch_legacy import load_legacy
from ._torch_module import unpickled_model
from ._torch_storage import Stored, read_record
from ._torch_zip import load_zip
from ._whisper import whisper_head


def is_tensor(value: Any) -> bool:
    return isinstance(value, (TensorRecord, PickledArray, OtherTensor))


class TorchFile:
    """One opened torch.save file: its path, where its storages lie, and its byte order."""

    def __init__(self, path: Path, stored: dict[str, Stored], byteorder: str):
        self.path, self.stored, self.byteorder = path, stored, byteorder

    def tensor(self, name: str, value: Any) -> TensorInfo | None:
        """A tensor's catalogue entry, checked against its storage now; None when numpy cannot hold its type."""
        if isinstance(value, PickledArray):
            return array_tensor(self.path, name, value)
        if isinstance(value, OtherTensor):
            return None
        record: TensorRecord = value
        where = f"{quote(self.path)}: tensor {quote(name)}"
        if not record.kind.element.readable:
            return None
        check_record(record, where)
        itemsize = record.kind.element.itemsize
        storage = (str(self.path), record.storage.key,
                   record.storage.start * record.storage.kind.element.itemsize + record.offset * itemsize)
        read = partial(read_record, self.path, record, self.stored[record.storage.key], self.byteorder, where)
        return TensorInfo(name, record.size, record.kind.element.name, read, storage)

    def value(self, value: Any) -> Any:
        """A one-element tensor beside the state dict (a step saved as a tensor) as a Python number."""
        if isinstance(value, TensorRecord) and value.numel == 1 and value.kind.element.readable:
            raw = read_record(self.path, value, self.stored[value.storage.key], self.byteorder,
                              f"{quote(self.path)}: a value beside the state dict").reshape(())
            return to_float32(raw, value.kind.element.name).item() if value.kind.element.is_float else raw.item()
        return plain_value(value)

    def checkpoint(self, obj: Any) -> Checkpoint:
        obj, model_notes, buffers = unpickled_model(obj, quote(self.path))
        state = state_dict_of(self.path, obj, is_tensor)
        found = [(name, value) for name, value in flatten(state, where=quote(self.path)) if is_tensor(value)]
        renamed, notes = strip_wrapper_prefixes([name for name, _ in found])
        notes = model_notes + notes
        tensors: dict[str, TensorInfo] = {}
        unreadable: list[str] = []  # element types numpy cannot hold
        skipped_parameters = 0  # FP8 weights among them
        layouts: list[str] = []  # quantized, sparse, nested, meta
        for name, value in found:
            info = self.tensor(renamed[name], value)
            if info is None:
                (layouts if isinstance(value, OtherTensor) else unreadable).append(name)
                if isinstance(value, TensorRecord) and value.kind.element.name in FP8_WEIGHT_DTYPES:
                    skipped_parameters += value.numel
                continue
            tensors[info.name] = info
        if unreadable:
            notes.append(f"{len(unreadable)} tensors of element types numpy cannot hold were skipped "
                         f"(e.g. {min(unreadable)})")
        if layouts:
            notes.append(f"{len(layouts)} quantized, sparse, nested or meta tensors were skipped (e.g. {min(layouts)})")
        if not tensors:
            raise CheckpointError(f"{quote(self.path)}: expected tensors numpy can read in the state dict, found none")
        top = obj if isinstance(obj, dict) else {}
        step = find_step(top, self.value)
        tied, said = whisper_head(top, set(tensors))
        return Checkpoint(self.path, tensors, step=fairseq_step(top) if step is None else step,
                          config={**find_config(top, self.value), **fairseq_config(top)}, notes=notes + said,
                          skipped_parameters=skipped_parameters, tied=tied,
                          buffers=frozenset(renamed[name] for name, _ in found if name in buffers))


def open_zip(path: Path, options: OpenOptions) -> Checkpoint:
    obj, stored, byteorder = load_zip(path, options.trust_pickle)
    return TorchFile(path, stored, byteorder).checkpoint(obj)


def open_legacy(path: Path, options: OpenOptions) -> Checkpoint:
    obj, stored = load_legacy(path, options.trust_pickle)
    return TorchFile(path, stored, "little").checkpoint(obj)


def open_sharded(path: Path, options: OpenOptions) -> Checkpoint:
    """pytorch_model.bin.index.json over torch.save shards (save_pretrained with safe_serialization=False): each
    shard's pickle is read, its tables from the shard that holds them, which is their source."""
    tensors = {}
    for shard, names in shards_of(path, "a pytorch index"):
        head = files.peek(shard, len(TORCH_LEGACY_HEAD)) or b""
        if head.startswith(ZIP_MAGIC):
            shard_tensors = open_zip(shard, options).tensors
        elif head.startswith(TORCH_LEGACY_HEAD):
            shard_tensors = open_legacy(shard, options).tensors
        else:
            raise CheckpointError(f"{quote(path)} names shard {quote(shard.name)}, which is not a torch.save file")
        for name in names:
            if name not in shard_tensors:
                raise missing(path, name, shard)
            tensors[name] = dataclasses.replace(shard_tensors[name], sources=(shard,))
    return Checkpoint(path, tensors)
