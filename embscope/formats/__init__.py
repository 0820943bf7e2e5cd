"""Format readers. FORMATS lists them in the order they are asked whether they recognise a file;
`open_checkpoint` opens a file, or the one checkpoint in a directory, with the first that does.

A new reader is a module here that defines its Format(name, sniff, open); it joins by one entry in
FORMATS, placed by what its sniff can be confused with, with the reason beside it."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..checkpoint import Checkpoint
from ..errors import CheckpointError, EmbscopeError
from ..text import quote
from . import (
    andrea,
    ctranslate2_file,
    gguf_file,
    keras_h5,
    numpy_file,
    onnx_file,
    pickled,
    pytorch_file,
    safetensors_file,
    unreadable,
)
from ._base import DAMAGE, Format, OpenOptions, damaged
from ._checks import is_regular_file, read_head
from ._state_dict import read_hf_config
from .constants import NOT_WEIGHTS, PREFERRED_IN_DIRECTORY

__all__ = ["FORMATS", "Format", "OpenOptions", "find_in_directory", "open_checkpoint", "sniff"]

# Readers with a magic number cannot be confused with one another; the order matters where a sniff is weak.
FORMATS: tuple[Format, ...] = (
    gguf_file.GGUF,  # strong magics first: "GGUF", the HDF5 signature, CTranslate2's header, the legacy GGML
    keras_h5.KERAS_H5,  # and TFLite identifiers; none can be another format's header
    ctranslate2_file.CTRANSLATE2,  # before ANDREA: both are called model.bin
    unreadable.LEGACY_GGML,  # named, not read: the message says what the file is
    unreadable.TFLITE,
    andrea.ANDREA,  # first: it has no magic, but its 8-byte header promises the exact file size; a step of 640
    #                 starts a dump with 80 02 (a pickle's PROTO) and a first weight can look like a safetensors header
    safetensors_file.SHARDED,  # by name (*.safetensors.index.json): the index is JSON, which no magic claims
    safetensors_file.SINGLE,  # an 8-byte length, then "{"
    numpy_file.NPY,  # the \x93NUMPY magic
    pytorch_file.ZIP,  # a zip holding <archive>/data.pkl; a zip of .npy members only is an .npz instead
    numpy_file.NPZ,
    pytorch_file.LEGACY,  # torch's pickled magic number: before plain pickles, since the file is also one
    pickled.PICKLE,  # it claims any pickle, and any file named .pkl, .pickle or .p
    onnx_file.ONNX,  # by suffix alone (.onnx: a protobuf has no magic), after every sniff that reads bytes
    unreadable.COREML,  # by suffix (.mlmodel), named, not read
)


def sniff(path: Path) -> Format | None:
    head, size = read_head(path)
    return next((fmt for fmt in FORMATS if fmt.sniff(path, head, size)), None)


class GuardedRead(functools.partial):
    """A tensor's reader, with the same func and args, whose failures on damaged data become a CheckpointError."""

    where = ""

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except EmbscopeError:
            raise
        except DAMAGE as err:
            raise damaged(self.where, err) from None


def guarded(read: Callable, where: str) -> GuardedRead:
    if isinstance(read, functools.partial):
        read = GuardedRead(read.func, *read.args, **read.keywords)
    else:
        read = GuardedRead(read)
    read.where = where
    return read


DEFAULT_OPTIONS = OpenOptions()


def open_checkpoint(path: str | Path, options: OpenOptions = DEFAULT_OPTIONS) -> Checkpoint:
    """The checkpoint at `path` (a file, or a directory holding one), catalogued from its headers, with the
    config.json beside it merged under what the file itself records."""
    path = Path(path)
    try:
        exists = path.exists()
    except OSError as err:  # a name too long for the file system, for one
        raise CheckpointError(f"cannot read {quote(path)}: {err.strerror}") from None
    if not exists:
        raise CheckpointError(f"expected a checkpoint file or directory, found nothing at {quote(path)}")
    try:
        if path.is_dir():
            path = find_in_directory(path)
        fmt = sniff(path)
        if fmt is None:
            known = ", ".join(f.name for f in FORMATS)
            raise CheckpointError(f"{quote(path)} is not a checkpoint embscope knows (tried {known})")
        checkpoint = fmt.open(path, options)
    except EmbscopeError:
        raise
    except DAMAGE as err:
        raise damaged(quote(path), err) from None
    checkpoint.config = {**read_hf_config(checkpoint.directory), **checkpoint.config}
    checkpoint.tensors = {name: dataclasses.replace(t, read=guarded(t.read, f"{quote(path)}: tensor {quote(name)}"),
                                                    rows=t.rows and guarded(t.rows, f"{quote(path)}: tensor {quote(name)}"))
                          for name, t in checkpoint.tensors.items()}
    return checkpoint


def sniff_readable(path: Path) -> Format | None:
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
    if not found:
        raise CheckpointError(f"expected a checkpoint in directory {quote(directory)}, found no weights file")
    if len(found) > 1:
        names = ", ".join(quote(p.name) for p in found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        raise CheckpointError(f"directory {quote(directory)} holds several checkpoints ({names}); pass one with -c")
    return found[0]
