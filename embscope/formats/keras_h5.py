"""Keras / TensorFlow weights in HDF5 (`tf_model.h5` of Hugging Face, `model.save_weights("x.h5")`),
read through `h5py`. Every numeric dataset is a tensor, named by its HDF5 path with the `:0` of TF
variable names dropped and "/" read as "." (so `bert/embeddings/word_embeddings/weight:0` matches the
names of roles.KNOWN by suffix). Contiguous, uncompressed datasets are memory-mapped at their file
offset; chunked or compressed ones are read through h5py when used. Data kept in other files (external
storage, virtual datasets) is refused.

libhdf5 can loop for ever on a damaged file (an attribute whose global-heap object size is one byte off),
beyond the reach of Ctrl-C, so every call into h5py runs in a child process with a time and a memory limit
(formats._isolated). Before a chunked table is read, its chunks are checked against the table: one chunk
far bigger than the table (libhdf5 inflates a whole chunk to read a row of it), or chunks never written
(which read as the fill value: a 4 KB file declared a 4 GiB table), is refused before anything is allocated."""

from __future__ import annotations

import json
import math
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ..core import files
from ..core.checkpoint import Checkpoint, TensorInfo
from ..core.errors import CheckpointError
from ..core.memory import require_memory, size_text
from ..core.text import detail, printable, quote, shortened
from ..storage.base import OpenOptions, require_package
from ..storage.checks import check_extent, check_shape, check_tensor_count, map_array
from ..storage.constants import MAX_TENSORS
from ._isolated import run_isolated, shared_buffer

TF_VARIABLE_SUFFIX = ":0"
# what h5py raises on a damaged file: the HDF5 library's errors arrive as these
H5_DAMAGE = (OSError, KeyError, RuntimeError, ValueError, TypeError)
LIBRARY = "the HDF5 library"
CATALOGUE_SECONDS = 5.0  # a real file's datasets are listed in milliseconds
CATALOGUE_MEMORY = 512 << 20  # what listing them may take beyond this process's own memory
READ_SECONDS = 30.0  # reading a table through h5py: this, plus a second for each READ_BYTES_PER_SECOND
READ_BYTES_PER_SECOND = 50 << 20  # inflating gzip runs several times faster on any machine
READ_MEMORY = 512 << 20  # beyond the table itself (in shared memory) and two of its chunks
CHUNK_SLACK = 16 << 20  # a chunk may be this big even for a smaller table (writers round chunks up)


def require_h5py(path: Path) -> Any:
    return require_package("h5py", path, "an HDF5 (Keras) file", "h5")


def tensor_name(hdf5_path: str) -> str:
    return hdf5_path.removesuffix(TF_VARIABLE_SUFFIX).replace("/", ".")


def damage(where: str, err: BaseException) -> CheckpointError:
    return CheckpointError(f"{where}: expected an HDF5 file h5py can read, found damage ({detail(err)})")


# -- in the child process: h5py's calls -------------------------------------------------------

def dataset_record(hdf5_path: str, dataset: Any) -> dict[str, Any] | None:
    """What the parent needs of a numeric dataset, as JSON; None for strings and compound records."""
    dtype = dataset.dtype
    if dtype.fields is not None or dtype.kind not in "biuf":
        return None
    num_chunks = getattr(dataset.id, "get_num_chunks", None)  # HDF5 1.10.5 and later
    return {"path": hdf5_path, "dtype": dtype.str, "shape": [int(d) for d in dataset.shape],
            "offset": dataset.id.get_offset(), "chunks": list(dataset.chunks) if dataset.chunks else None,
            "compressed": dataset.compression is not None, "elsewhere": bool(dataset.is_virtual or dataset.external),
            "stored_bytes": int(dataset.id.get_storage_size()),
            "stored_chunks": int(num_chunks()) if dataset.chunks and num_chunks is not None else None}


def embedding_initializers(model_config: Any) -> list[Any] | None:
    """The embeddings_initializer of every Embedding layer a full-model save's model_config names (nested models
    too); None where the file holds no readable model_config (a weights-only save)."""
    if isinstance(model_config, bytes):
        model_config = model_config.decode("utf-8", "replace")
    try:
        tree = json.loads(model_config) if isinstance(model_config, str) else None
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth: no initializer known
        return None
    found: list[Any] = []
    stack = [tree] if tree is not None else []
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("class_name") == "Embedding" and isinstance(node.get("config"), dict):
                found.append(node["config"].get("embeddings_initializer"))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found if tree is not None else None


def is_keras_default(initializer: Any) -> bool:
    """keras.layers.Embedding's default: 'uniform', serialized by name (Keras 2) or as RandomUniform(-0.05, 0.05)."""
    if isinstance(initializer, str):
        return initializer in ("uniform", "random_uniform", "RandomUniform")
    if not isinstance(initializer, dict) or initializer.get("class_name") not in ("RandomUniform", "uniform"):
        return False
    config = initializer.get("config")
    config = config if isinstance(config, dict) else {}
    return bool(config.get("minval", -0.05) == -0.05 and config.get("maxval", 0.05) == 0.05)


def init_config(version: Any, initializers: list[Any] | None) -> dict[str, Any]:
    """What analysis.untrained reads of the token rows' initialisation: the Keras version whose Embedding default
    they were drawn from, and whether the file's model_config says so; none where it names another initializer."""
    if not isinstance(version, str) or (initializers and not all(map(is_keras_default, initializers))):
        return {}
    return {"keras_version": version, "keras_initializer_stored": bool(initializers)}


def catalogue(path: Path, name: str) -> dict[str, Any]:
    """Every dataset's record, how many hold no numbers, and the Keras version the file names; `name` is the
    file libhdf5 opens (the descriptor files.opened_path checked in the parent, which the child inherits)."""
    h5py = require_h5py(path)
    records: list[dict[str, Any]] = []
    skipped = 0

    def visit(name: str, obj: Any) -> bool | None:
        nonlocal skipped
        if not isinstance(obj, h5py.Dataset):
            return None
        if len(records) + skipped >= MAX_TENSORS:
            return True  # stops the visit
        record = dataset_record(name, obj)
        if record is None:
            skipped += 1
        else:
            records.append(record)
        return None
    try:
        with h5py.File(name, "r", locking=False) as f:
            if f.visititems(visit):
                check_tensor_count(MAX_TENSORS + 1, quote(path), "datasets (or more)")
            version = f.attrs.get("keras_version")
            initializers = embedding_initializers(f.attrs.get("model_config"))
    except H5_DAMAGE as err:
        raise damage(quote(path), err) from None
    if isinstance(version, bytes):
        version = version.decode("utf-8", "replace")
    return {"datasets": records, "skipped": skipped, "version": version if isinstance(version, str) else None,
            "initializers": initializers}


def read_into(path: Path, name: str, hdf5_path: str, target: np.ndarray) -> None:
    h5py = require_h5py(path)
    try:
        with h5py.File(name, "r", locking=False) as f:
            dataset = f[hdf5_path]
            if target.ndim == 0:
                target[()] = dataset[()]
            else:
                dataset.read_direct(target)
    except H5_DAMAGE as err:
        raise damage(f"{quote(path)}: dataset {quote(hdf5_path)}", err) from None


# -- in this process ---------------------------------------------------------------------------

def check_chunks(record: dict[str, Any], shape: tuple[int, ...], itemsize: int, where: str) -> int:
    """The bytes of one chunk, once the chunks are known to fit the table and to be all written."""
    nbytes = math.prod(shape) * itemsize
    chunks = record["chunks"]
    if chunks is None:
        if record["offset"] is None and record["stored_bytes"] == 0 and nbytes:
            raise CheckpointError(f"{where}: its data was never written (the file stores none of its "
                                  f"{size_text(nbytes)}; it would read as the fill value); refused")
        return 0
    if len(chunks) != len(shape) or any(type(c) is not int or c < 1 for c in chunks):
        raise CheckpointError(f"{where}: expected chunks of {len(shape)} positive dimensions, found {chunks}")
    chunk_bytes: int = math.prod(chunks) * itemsize
    if chunk_bytes > max(nbytes, CHUNK_SLACK):
        raise CheckpointError(f"{where}: one chunk {list(chunks)} holds {size_text(chunk_bytes)}, more than the whole "
                              f"table {list(shape)} ({size_text(nbytes)}), and reading it inflates a whole chunk; "
                              "refused")
    expected = math.prod(-(-d // c) for d, c in zip(shape, chunks))
    stored = record["stored_chunks"]
    if stored is not None and stored < expected:
        raise CheckpointError(f"{where}: only {stored:,} of its {expected:,} chunks were ever written (the rest "
                              "would read as the fill value); refused")
    return chunk_bytes


def read_through_h5py(path: Path, record: dict[str, Any], shape: tuple[int, ...]) -> np.ndarray:
    """The table read by h5py in a child process, into memory shared with it."""
    dtype = np.dtype(record["dtype"])
    where = f"{quote(path)}: dataset {quote(record['path'])}"
    chunk_bytes = check_chunks(record, shape, dtype.itemsize, where)
    count = math.prod(shape)
    if count == 0:
        return np.zeros(shape, dtype=dtype)
    nbytes = count * dtype.itemsize
    require_memory(nbytes, where)
    buffer = shared_buffer(nbytes)
    table = np.frombuffer(buffer, dtype=dtype, count=count).reshape(shape)
    with files.opened_path(path, "an HDF5 file") as name:  # libhdf5 opens the descriptor checked here
        run_isolated(partial(read_into, path, name, record["path"], table), what=where, library=LIBRARY,
                     seconds=READ_SECONDS + nbytes / READ_BYTES_PER_SECOND, memory=READ_MEMORY + 2 * chunk_bytes)
    return table


def dataset_info(path: Path, record: dict[str, Any]) -> TensorInfo:
    """A numeric dataset as a lazy tensor."""
    where = f"{quote(path)}: dataset {quote(record['path'])}"
    dtype = np.dtype(record["dtype"])
    shape = check_shape(record["shape"], where)
    if record["elsewhere"]:
        raise CheckpointError(f"{where} keeps its data in other files; refused")
    nbytes = math.prod(shape) * dtype.itemsize
    offset = record["offset"]
    if offset is not None and record["chunks"] is None and not record["compressed"]:
        check_extent(path, offset, nbytes, where)
        read = partial(map_array, path, dtype, offset, shape)
        storage = (str(path), offset) if nbytes else None
    else:
        read, storage = partial(read_through_h5py, path, record, shape), None
    return TensorInfo(tensor_name(record["path"]), shape, dtype.newbyteorder("=").name, read, storage)


# Keras' save_model writes the model's weights under 'model_weights' and, unless include_optimizer=False, the
# optimizer's state under 'optimizer_weights' (tf-keras hdf5_format.save_model_to_hdf5): Adam's two moments per
# weight, which shakkala 1.7's simple_model.h5 counted in its total, 1,515,348 values for a model of 505,116
MODEL_GROUP, OPTIMIZER_GROUP = "model_weights", "optimizer_weights"


def model_records(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The datasets of the model, and those of its optimizer's state where the file keeps both."""
    def under(group: str, record: dict[str, Any]) -> bool:
        return str(record["path"]).startswith(f"{group}/")

    if not any(under(MODEL_GROUP, record) for record in records):
        return records, []
    return ([r for r in records if not under(OPTIMIZER_GROUP, r)], [r for r in records if under(OPTIMIZER_GROUP, r)])


def open_h5(path: Path, options: OpenOptions) -> Checkpoint:
    require_h5py(path)  # the missing extra is said here, not from the child
    with files.opened_path(path, "an HDF5 file") as name:  # libhdf5 opens the descriptor checked here
        found = run_isolated(partial(catalogue, path, name), what=quote(path), library=LIBRARY,
                             seconds=CATALOGUE_SECONDS, memory=CATALOGUE_MEMORY)
    records, optimizer = model_records(found["datasets"])
    tensors: dict[str, TensorInfo] = {}
    for record in records:
        info = dataset_info(path, record)
        if info.name in tensors:
            raise CheckpointError(f"{quote(path)}: datasets {quote(record['path'])} and another both read as "
                                  f"{quote(info.name)}")
        tensors[info.name] = info
    version, skipped = found["version"], found["skipped"]
    saved = f" saved by Keras {printable(shortened(version))}" if isinstance(version, str) else ""
    notes = [f"HDF5 weights{saved}; tensor names are the dataset paths with '/' as '.' and ':0' dropped"]
    if skipped:
        notes.append(f"{skipped} datasets that hold no numbers (strings, records) are left out")
    if optimizer:
        values = sum(math.prod(record["shape"]) for record in optimizer)
        notes.append(f"{len(optimizer)} datasets under '{OPTIMIZER_GROUP}' ({values:,} values: the optimizer's state "
                     "that Keras' save_model keeps beside the model's weights, not parameters) are left out")
    # the Keras version: whose defaults the weights were drawn from (analysis.untrained's init scale), unless the
    # file's model_config names another initializer for its Embedding layers (RandomNormal(0.02): not uniform 0.05)
    config = init_config(version, found.get("initializers"))
    return Checkpoint(path, tensors, config=config, notes=notes)  # config.json beside it: open_checkpoint
