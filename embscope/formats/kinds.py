"""FORMATS: every checkpoint format, in the order a file is put to them; the first whose sniff says yes opens
it, and its name is the checkpoint's format. The order matters only where a sniff is weak; each entry says why
it stands where it does. A new reader is a module here with a sniff and an open function, and one entry below."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..core.checkpoint import Checkpoint
from ..registry import Kind, Probe, Sniff, listed
from ..storage.base import OpenOptions
from ..storage.constants import (
    COREML_SUFFIX,
    GGUF_MAGIC,
    HDF5_MAGIC,
    LEGACY_GGML_MAGICS,
    NPY_MAGIC,
    ONNX_SUFFIX,
    SAFETENSORS_INDEX_SUFFIX,
    TFLITE_IDENTIFIER,
    TORCH_INDEX_SUFFIX,
    TORCH_LEGACY_HEAD,
    ZIP_MAGIC,
)
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

Reader = Callable[[Path, OpenOptions], Checkpoint]


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
    Kind("GGUF", starts_with(GGUF_MAGIC), gguf_file.open_gguf, f"first: {STRONG} ('GGUF')"),
    Kind("Keras HDF5", starts_with(HDF5_MAGIC), keras_h5.open_h5, f"first: {STRONG} (the HDF5 signature)"),
    Kind("CTranslate2", ctranslate2_file.looks_like_ctranslate2, ctranslate2_file.open_ctranslate2,
         "a small version, then a NUL-terminated spec name; before ANDREA, since both are called model.bin"),
    Kind("legacy GGML", legacy_ggml, unreadable.refuse_legacy_ggml,
         f"{STRONG} (llama.cpp's before GGUF); named, not read: the message says what it is"),
    Kind("TensorFlow Lite", tflite, unreadable.refuse_tflite,
         f"{STRONG} (the flatbuffer identifier, bytes 4-8); named, not read"),
    Kind("ANDREA flat float32", andrea.looks_like_andrea, andrea.open_andrea,
         "no magic, but its 8-byte header promises the exact file size; before safetensors and the pickles: a step "
         "of 640 starts a dump with 80 02 (a pickle's PROTO), and a first weight can look like a safetensors header"),
    Kind("safetensors (sharded)", name_ends(SAFETENSORS_INDEX_SUFFIX), safetensors_file.open_sharded,
         "by name (*.safetensors.index.json): the index is JSON, which no magic claims"),
    Kind("pytorch (sharded)", name_ends(TORCH_INDEX_SUFFIX), pytorch_file.open_sharded,
         "by name (*.bin.index.json), as the safetensors index"),
    Kind("safetensors", safetensors_file.looks_like_safetensors, safetensors_file.open_single,
         "an 8-byte length, then '{': after ANDREA, whose first weight can look so"),
    Kind("numpy .npy (pickled dict)", numpy_file.holds_objects, numpy_file.open_pickled_npy,
         "the .npy magic and a header of dtype object (np.save of a dict): before the plain .npy, which takes any"),
    Kind("numpy .npy", starts_with(NPY_MAGIC), numpy_file.open_npy, STRONG + " ('\\x93NUMPY')"),
    Kind("pytorch", zipped(pytorch_file.looks_like_torch_zip), pytorch_file.open_zip,
         "a zip holding <archive>/data.pkl: before .npz, the other zip"),
    Kind("numpy .npz", zipped(numpy_file.looks_like_npz), numpy_file.open_npz, "a zip of .npy members only"),
    Kind("pytorch (legacy)", starts_with(TORCH_LEGACY_HEAD), pytorch_file.open_legacy,
         "torch's pickled magic number: before plain pickles, since the file is also one"),
    Kind("nlm params pickle", pickled.looks_like_pickle, pickled.open_pickle,
         "it claims any pickle, and any file named .pkl, .pickle or .p: after every pickle with a magic of its own"),
    Kind("ONNX", suffix(ONNX_SUFFIX), onnx_file.open_onnx,
         "by suffix alone (a protobuf has no magic): after every sniff that reads bytes"),
    Kind("Core ML", suffix(COREML_SUFFIX), unreadable.refuse_coreml, "by suffix alone, as ONNX; named, not read"),
)
