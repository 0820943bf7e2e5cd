"""Format readers. FORMATS lists them in the order they are asked whether they recognise a file;
`open_checkpoint` opens a file, or the one checkpoint in a directory, with the first that does.

A new reader is a module here with a sniff and an open function; it joins by one entry in FORMATS, placed
by what its sniff can be confused with, with the reason beside it. A reader's module is imported only when
its sniff is asked (a magic number in FORMATS spares even that) or its open is called."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..checkpoint import Checkpoint, TensorInfo
from ..errors import CheckpointError, EmbscopeError, Option
from ..lazy import lazy_function
from ..text import quote
from ._base import DAMAGE, Format, OpenOptions, damaged
from ._checks import is_regular_file, read_head
from .constants import (
    COREML_SUFFIX,
    EXPORT_FOLDER,
    EXPORT_MODEL,
    GGUF_MAGIC,
    HDF5_MAGIC,
    LEGACY_GGML_MAGICS,
    NOT_WEIGHTS,
    NPY_MAGIC,
    ONNX_SUFFIX,
    PREFERRED_IN_DIRECTORY,
    SAFETENSORS_INDEX_SUFFIX,
    TFLITE_IDENTIFIER,
    TORCH_INDEX_SUFFIX,
    TORCH_LEGACY_HEAD,
    ZIP_MAGIC,
)

__all__ = ["FORMATS", "Format", "OpenOptions", "find_in_directory", "open_checkpoint", "sniff"]

Sniff = Callable[[Path, bytes, int], bool]


def reader(module: str, function: str) -> Callable[..., Any]:
    """A reader module's function: a file is put to the readers in turn, and one whose magic number rules the
    file out is never imported."""
    return lazy_function(f"{__name__}.{module}", function)


def starts_with(magic: bytes) -> Sniff:
    return lambda path, head, size: head.startswith(magic)


def zipped(sniff: Sniff) -> Sniff:
    """A sniff that opens the zip directory, asked only of a file that starts as a zip does."""
    return lambda path, head, size: head.startswith(ZIP_MAGIC) and sniff(path, head, size)


def suffix(name: str) -> Sniff:
    return lambda path, head, size: path.suffix.lower() == name


# Readers with a magic number cannot be confused with one another; the order matters where a sniff is weak.
FORMATS: tuple[Format, ...] = (
    # strong magics first: "GGUF", the HDF5 signature, CTranslate2's header, the legacy GGML and TFLite
    # identifiers; none can be another format's header
    Format("GGUF", starts_with(GGUF_MAGIC), reader("gguf_file", "open_gguf")),
    Format("Keras HDF5", starts_with(HDF5_MAGIC), reader("keras_h5", "open_h5")),
    Format("CTranslate2", reader("ctranslate2_file", "looks_like_ctranslate2"),  # before ANDREA: both are
           reader("ctranslate2_file", "open_ctranslate2")),                       # called model.bin
    Format("legacy GGML", lambda path, head, size: head[:4] in LEGACY_GGML_MAGICS,  # named, not read: the
           reader("unreadable", "refuse_legacy_ggml")),                             # message says what it is
    Format("TensorFlow Lite", lambda path, head, size: head[4:8] == TFLITE_IDENTIFIER,
           reader("unreadable", "refuse_tflite")),
    # ANDREA has no magic, but its 8-byte header promises the exact file size; a step of 640 starts a dump
    # with 80 02 (a pickle's PROTO) and a first weight can look like a safetensors header
    Format("ANDREA flat float32", reader("andrea", "looks_like_andrea"), reader("andrea", "open_andrea")),
    # by name (*.safetensors.index.json): the index is JSON, which no magic claims
    Format("safetensors (sharded)", lambda path, head, size: path.name.endswith(SAFETENSORS_INDEX_SUFFIX),
           reader("safetensors_file", "open_sharded")),
    Format("pytorch (sharded)", lambda path, head, size: path.name.endswith(TORCH_INDEX_SUFFIX),
           reader("pytorch_file", "open_sharded")),
    Format("safetensors", reader("safetensors_file", "looks_like_safetensors"),  # an 8-byte length, then "{"
           reader("safetensors_file", "open_single")),
    Format("numpy .npy", starts_with(NPY_MAGIC), reader("numpy_file", "open_npy")),
    # a zip holding <archive>/data.pkl; a zip of .npy members only is an .npz instead
    Format("pytorch", zipped(reader("pytorch_file", "looks_like_torch_zip")), reader("pytorch_file", "open_zip")),
    Format("numpy .npz", zipped(reader("numpy_file", "looks_like_npz")), reader("numpy_file", "open_npz")),
    # torch's pickled magic number: before plain pickles, since the file is also one
    Format("pytorch (legacy)", starts_with(TORCH_LEGACY_HEAD), reader("pytorch_file", "open_legacy")),
    # it claims any pickle, and any file named .pkl, .pickle or .p
    Format("nlm params pickle", reader("pickled", "looks_like_pickle"), reader("pickled", "open_pickle")),
    # by suffix alone (.onnx: a protobuf has no magic), after every sniff that reads bytes
    Format("ONNX", suffix(ONNX_SUFFIX), reader("onnx_file", "open_onnx")),
    Format("Core ML", suffix(COREML_SUFFIX), reader("unreadable", "refuse_coreml")),  # named, not read
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


def guarded_tensor(tensor: TensorInfo, where: str) -> TensorInfo:
    return dataclasses.replace(tensor, read=guarded(tensor.read, where),
                               read_rows=guarded(tensor.read_rows, where) if tensor.read_rows else None)


DEFAULT_OPTIONS = OpenOptions()


def open_checkpoint(path: str | Path, options: OpenOptions = DEFAULT_OPTIONS) -> Checkpoint:
    """The checkpoint at `path` (a file, or a directory holding one), catalogued from its headers, with the
    config.json beside it merged under what the file itself records."""
    path = Path(path)
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
    except CheckpointError as err:
        err.path = err.path or path  # the file it is about, for code that handles it
        raise
    except EmbscopeError:
        raise
    except DAMAGE as err:
        raise damaged(quote(path), err) from None
    from ._state_dict import read_hf_config  # with the pickle helpers, which not every format needs
    checkpoint.config = {**read_hf_config(checkpoint.directory), **checkpoint.config}
    checkpoint.tensors = {name: guarded_tensor(t, f"{quote(path)}: tensor {quote(name)}")
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
    if not found and (directory / EXPORT_FOLDER).is_dir():
        return onnx_export(directory / EXPORT_FOLDER)
    if not found:
        raise CheckpointError(f"expected a checkpoint in directory {quote(directory)}, found no weights file")
    if len(found) > 1:
        names = ", ".join(quote(p.name) for p in found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        raise CheckpointError(f"directory {quote(directory)} holds several checkpoints ({names}); pass one with "
                              f"{Option('path', noun='its path')}", path=directory)
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
    names = ", ".join(quote(p.name) for p in chosen[:5]) + (f" and {len(chosen) - 5} more" if len(chosen) > 5 else "")
    raise CheckpointError(f"directory {quote(folder.parent)} holds several ONNX exports in {EXPORT_FOLDER}/ ({names}); "
                          f"pass one with {Option('path', noun='its path')}", path=folder)
