"""FORMATS: every checkpoint format, in the order a file is put to them; the first whose sniff says yes opens
it, and its name is the checkpoint's format. The order matters only where a sniff is weak; each entry says why
it stands where it does. The table holds only what sniffing needs (a magic number, a name, or a light function
in sniffs.py) and where each reader is: a run imports the one reader whose sniff said yes. A new reader is a
module here with an open function, its sniff, and one entry below."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from ..core.checkpoint import Checkpoint
from ..registry import Kind, Probe, Sniff, listed
from ..storage.base import SHAPES_GIVEN, OpenOptions
from ..storage.constants import (
    COREML_SUFFIX,
    GGUF_MAGIC,
    HDF5_MAGIC,
    KERAS_HDF5,
    KERAS_ZIP,
    LEGACY_GGML_MAGICS,
    NPY_MAGIC,
    ONNX_SUFFIX,
    SAFETENSORS_INDEX_SUFFIX,
    TFLITE_IDENTIFIER,
    TORCH_INDEX_SUFFIX,
    TORCH_LEGACY_HEAD,
    ZIP_MAGIC,
)
from .sniffs import (
    holds_objects,
    looks_like_andrea,
    looks_like_ctranslate2,
    looks_like_keras_zip,
    looks_like_npz,
    looks_like_pickle,
    looks_like_safetensors,
    looks_like_tf_index,
    looks_like_torch_zip,
)


class Reader(Protocol):
    """A format's open function: the checkpoint in a file of that format, catalogued from its headers."""

    def __call__(self, path: Path, options: OpenOptions, /) -> Checkpoint: ...


def reader(module: str, function: str) -> str:
    """Where a reader is: `function` in embscope.formats.`module`."""
    return f"embscope.formats.{module}:{function}"


def starts_with(magic: bytes) -> Sniff:
    return lambda probe: probe.head.startswith(magic)


def zipped(sniff: Sniff) -> Sniff:
    """A sniff that opens the zip directory, asked only of a file that starts as a zip does."""
    return lambda probe: probe.head.startswith(ZIP_MAGIC) and sniff(probe)


def name_ends(ending: str) -> Sniff:
    return lambda probe: probe.path.name.endswith(ending)


def suffix(name: str) -> Sniff:
    return lambda probe: probe.path.suffix.lower() == name


def legacy_ggml(probe: Probe) -> bool:
    return probe.head[:4] in LEGACY_GGML_MAGICS


def tflite(probe: Probe) -> bool:
    return probe.head[4:8] == TFLITE_IDENTIFIER


STRONG = "a magic number no other format's header starts with"

FORMATS: tuple[Kind[Reader], ...] = listed(
    Kind("GGUF", starts_with(GGUF_MAGIC), reader("gguf_file", "open_gguf"), f"first: {STRONG} ('GGUF')"),
    Kind(KERAS_HDF5, starts_with(HDF5_MAGIC), reader("keras_h5", "open_h5"), f"first: {STRONG} (the HDF5 signature)"),
    Kind("CTranslate2", looks_like_ctranslate2, reader("ctranslate2_file", "open_ctranslate2"),
         "a small version, then a NUL-terminated spec name; before ANDREA, since both are called model.bin"),
    Kind("legacy GGML", legacy_ggml, reader("unreadable", "refuse_legacy_ggml"),
         f"{STRONG} (llama.cpp's before GGUF); named, not read: the message says what it is"),
    Kind("TensorFlow Lite", tflite, reader("unreadable", "refuse_tflite"),
         f"{STRONG} (the flatbuffer identifier, bytes 4-8); named, not read"),
    Kind(SHAPES_GIVEN, looks_like_andrea, reader("andrea", "open_andrea"),
         "no magic, but its 8-byte header promises the exact file size; before safetensors and the pickles: a step "
         "of 640 starts a dump with 80 02 (a pickle's PROTO), and a first weight can look like a safetensors header"),
    Kind("safetensors (sharded)", name_ends(SAFETENSORS_INDEX_SUFFIX), reader("safetensors_file", "open_sharded"),
         "by name (*.safetensors.index.json): the index is JSON, which no magic claims"),
    Kind("pytorch (sharded)", name_ends(TORCH_INDEX_SUFFIX), reader("pytorch_file", "open_sharded"),
         "by name (*.bin.index.json), as the safetensors index"),
    Kind("safetensors", looks_like_safetensors, reader("safetensors_file", "open_single"),
         "an 8-byte length, then '{': after ANDREA, whose first weight can look so"),
    Kind("numpy .npy (pickled dict)", holds_objects, reader("numpy_file", "open_pickled_npy"),
         "the .npy magic and a header of dtype object (np.save of a dict): before the plain .npy, which takes any"),
    Kind("numpy .npy", starts_with(NPY_MAGIC), reader("numpy_file", "open_npy"), STRONG + " ('\\x93NUMPY')"),
    Kind("pytorch", zipped(looks_like_torch_zip), reader("pytorch_file", "open_zip"),
         "a zip holding <archive>/data.pkl: before .npz, the other zip"),
    Kind("numpy .npz", zipped(looks_like_npz), reader("numpy_file", "open_npz"), "a zip of .npy members only"),
    Kind(KERAS_ZIP, zipped(looks_like_keras_zip), reader("keras_zip", "open_keras"),
         "a zip holding model.weights.h5 (Keras 3's model.save): after the torch zip and .npz, which it cannot be"),
    Kind("TensorFlow checkpoint", looks_like_tf_index, reader("tf_checkpoint", "open_tf_checkpoint"),
         "by name (*.index) and the table magic in its last 8 bytes: its first bytes are a table record's, which "
         "no magic claims; before the pickles, which claim any file named so"),
    Kind("pytorch (legacy)", starts_with(TORCH_LEGACY_HEAD), reader("pytorch_file", "open_legacy"),
         "torch's pickled magic number: before plain pickles, since the file is also one"),
    Kind("nlm params pickle", looks_like_pickle, reader("pickled", "open_pickle"),
         "it claims any pickle, and any file named .pkl, .pickle or .p: after every pickle with a magic of its own"),
    Kind("ONNX", suffix(ONNX_SUFFIX), reader("onnx_file", "open_onnx"),
         "by suffix alone (a protobuf has no magic): after every sniff that reads bytes"),
    Kind("Core ML", suffix(COREML_SUFFIX), reader("unreadable", "refuse_coreml"), "by suffix alone, as ONNX; named, not read"),
)
