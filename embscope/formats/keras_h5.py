"""Keras / TensorFlow weights in HDF5 (`tf_model.h5` of Hugging Face, `model.save_weights("x.h5")`),
read through `h5py`. Every numeric dataset is a tensor, named by its HDF5 path with the `:0` of TF
variable names dropped and "/" read as "." (so `bert/embeddings/word_embeddings/weight:0` matches the
names of roles.KNOWN by suffix). Contiguous, uncompressed datasets are memory-mapped at their file
offset; chunked or compressed ones are read through h5py when used. Data kept in other files (external
storage, virtual datasets) is refused. The same reader takes the `model.weights.h5` inside a `.keras` zip
(formats.keras_zip): a Source says where the HDF5 bytes lie (the whole file, a stored member at its offset in
the zip, or a compressed member inflated into memory) and offsets are read relative to it.

libhdf5 can loop for ever on a damaged file (an attribute whose global-heap object size is one byte off),
beyond the reach of Ctrl-C, so every call into h5py runs in a child process with a time and a memory limit
(formats._isolated). Before a chunked table is read, its chunks are checked against the table: one chunk
far bigger than the table (libhdf5 inflates a whole chunk to read a row of it), or chunks never written
(which read as the fill value: a 4 KB file declared a 4 GiB table), is refused before anything is allocated."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
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
from ..storage.checks import check_extent, check_shape, check_tensor_count, extent_within, map_array
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


MAX_LAYER_NAME = 1000  # a layer's name, kept from its vars group: Keras names are short


@dataclass(frozen=True)
class Source:
    """Where an HDF5 file's bytes lie: the whole of `path`; or, in the zip at `path`, the member `member`, stored
    at `start` for `length` bytes, or inflated into `data` (a compressed member, read bounded)."""

    path: Path
    member: str | None = None
    start: int = 0
    length: int | None = None
    data: bytes | None = field(default=None, repr=False)

    @property
    def where(self) -> str:
        return quote(self.path) if self.member is None else f"{quote(self.path)}: member {quote(self.member)}"


class Window(io.RawIOBase):
    """`length` bytes of an open descriptor from `start`, as a file of their own: how h5py's file-object driver
    reads a stored zip member in place. Read by pread, so a forked child and its parent share no file position."""

    def __init__(self, fd: int, start: int, length: int):
        super().__init__()
        self.fd, self.start, self.length, self.position = fd, start, length, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.length}[whence]
        self.position = max(0, base + offset)
        return self.position

    def readinto(self, buffer: Any) -> int:
        count = min(len(buffer), self.length - self.position)
        if count <= 0:
            return 0
        data = os.pread(self.fd, count, self.start + self.position)
        buffer[:len(data)] = data
        self.position += len(data)
        return len(data)


@contextlib.contextmanager
def hdf5_target(source: Source) -> Iterator[Any]:
    """What h5py.File opens for `source`, in this process (a forked child inherits it): the checked descriptor's
    name for a whole file, a Window on it for a stored member, the inflated bytes for a compressed one."""
    if source.data is not None:
        yield io.BytesIO(source.data)
    elif source.length is None:
        with files.opened_path(source.path, "an HDF5 file") as name:  # libhdf5 opens the descriptor checked here
            yield name
    else:
        fd, _ = files.open_fd(source.path, "a checkpoint file")
        try:
            yield Window(fd, source.start, source.length)
        finally:
            os.close(fd)


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
            "stored_chunks": int(num_chunks()) if dataset.chunks and num_chunks is not None else None,
            "layer": layer_name(dataset)}


def layer_name(dataset: Any) -> str | None:
    """The name of the layer a Keras 3 weight belongs to: its `vars` group's `name` attribute (Keras 3 files a
    weight as <layer path>/vars/<i>, the path by class, the layer's own name on the group); None elsewhere."""
    parent = dataset.parent
    if not parent.name.endswith("/vars"):
        return None
    name = parent.attrs.get("name")
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    return name[:MAX_LAYER_NAME] if isinstance(name, str) else None


def embedding_initializers(model_config: Any) -> list[Any] | None:
    """The embeddings_initializer of every Embedding layer a full-model save's model_config names (nested models
    too); None where the file holds no readable model_config (a weights-only save)."""
    if isinstance(model_config, bytes):
        model_config = model_config.decode("utf-8", "replace")
    try:
        tree = json.loads(model_config) if isinstance(model_config, str) else None
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth: no initializer known
        return None
    return initializers_in(tree)


def initializers_in(tree: Any) -> list[Any] | None:
    """The embeddings_initializer of every Embedding layer in a parsed model config; None for no config."""
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


def catalogue(source: Source, name: Any) -> dict[str, Any]:
    """Every dataset's record, how many hold no numbers, and the Keras version the file names; `name` is what
    libhdf5 opens (hdf5_target's, made in the parent, which the child inherits)."""
    h5py = require_h5py(source.path)
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
                check_tensor_count(MAX_TENSORS + 1, source.where, "datasets (or more)")
            version = f.attrs.get("keras_version")
            initializers = embedding_initializers(f.attrs.get("model_config"))
    except H5_DAMAGE as err:
        raise damage(source.where, err) from None
    if isinstance(version, bytes):
        version = version.decode("utf-8", "replace")
    return {"datasets": records, "skipped": skipped, "version": version if isinstance(version, str) else None,
            "initializers": initializers}


def read_into(source: Source, name: Any, hdf5_path: str, target: np.ndarray) -> None:
    h5py = require_h5py(source.path)
    try:
        with h5py.File(name, "r", locking=False) as f:
            dataset = f[hdf5_path]
            if target.ndim == 0:
                target[()] = dataset[()]
            else:
                dataset.read_direct(target)
    except H5_DAMAGE as err:
        raise damage(f"{source.where}: dataset {quote(hdf5_path)}", err) from None


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


def read_through_h5py(source: Source, record: dict[str, Any], shape: tuple[int, ...]) -> np.ndarray:
    """The table read by h5py in a child process, into memory shared with it."""
    dtype = np.dtype(record["dtype"])
    where = f"{source.where}: dataset {quote(record['path'])}"
    chunk_bytes = check_chunks(record, shape, dtype.itemsize, where)
    count = math.prod(shape)
    if count == 0:
        return np.zeros(shape, dtype=dtype)
    nbytes = count * dtype.itemsize
    require_memory(nbytes, where)
    buffer = shared_buffer(nbytes)
    table = np.frombuffer(buffer, dtype=dtype, count=count).reshape(shape)
    with hdf5_target(source) as name:
        run_isolated(partial(read_into, source, name, record["path"], table), what=where, library=LIBRARY,
                     seconds=READ_SECONDS + nbytes / READ_BYTES_PER_SECOND, memory=READ_MEMORY + 2 * chunk_bytes)
    return table


def inflated_array(data: bytes, dtype: np.dtype, offset: int, shape: tuple[int, ...]) -> np.ndarray:
    """A contiguous dataset of an inflated member, read in place (read-only, as the bytes are)."""
    return np.frombuffer(data, dtype=dtype, count=math.prod(shape), offset=offset).reshape(shape)


def contiguous_reader(source: Source, dtype: np.dtype, offset: int, shape: tuple[int, ...],
                      where: str) -> tuple[Any, Any]:
    """(read, storage key) of a contiguous, uncompressed dataset at `offset` of the HDF5 bytes: memory-mapped
    from the file (at the member's offset within the zip), or read in place from an inflated member."""
    nbytes = math.prod(shape) * dtype.itemsize
    if source.data is not None:
        extent_within(len(source.data), offset, nbytes, where)
        return partial(inflated_array, source.data, dtype, offset, shape), None
    if source.length is not None:
        extent_within(source.length, offset, nbytes, where)  # inside the member, not only inside the zip
    at = source.start + offset
    check_extent(source.path, at, nbytes, where)
    return partial(map_array, source.path, dtype, at, shape), (str(source.path), at) if nbytes else None


def dataset_info(source: Source, record: dict[str, Any]) -> TensorInfo:
    """A numeric dataset as a lazy tensor."""
    where = f"{source.where}: dataset {quote(record['path'])}"
    dtype = np.dtype(record["dtype"])
    shape = check_shape(record["shape"], where)
    if record["elsewhere"]:
        raise CheckpointError(f"{where} keeps its data in other files; refused")
    offset = record["offset"]
    if offset is not None and record["chunks"] is None and not record["compressed"]:
        read, storage = contiguous_reader(source, dtype, offset, shape, where)
    else:
        read, storage = partial(read_through_h5py, source, record, shape), None
    return TensorInfo(tensor_name(record["path"]), shape, dtype.newbyteorder("=").name, read, storage)


# Keras' save_model writes the model's weights under 'model_weights' and, unless include_optimizer=False, the
# optimizer's state under 'optimizer_weights' (tf-keras hdf5_format.save_model_to_hdf5): Adam's two moments per
# weight, which shakkala 1.7's simple_model.h5 counted in its total, 1,515,348 values for a model of 505,116.
# Keras 3 (saving_lib, .weights.h5 and the .keras zip's model.weights.h5) files the layers under 'layers' and a
# compiled model's optimizer variables (its iteration count, learning rate, moments) under 'optimizer'.
MODEL_GROUP, OPTIMIZER_GROUP = "model_weights", "optimizer_weights"
LAYOUTS = ((MODEL_GROUP, OPTIMIZER_GROUP, "Keras' save_model"), ("layers", "optimizer", "Keras 3's saving_lib"))


def model_records(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str, str]:
    """The datasets of the model, those of its optimizer's state where the file keeps both, that state's group and
    the writer that keeps it there."""
    def under(group: str, record: dict[str, Any]) -> bool:
        return str(record["path"]).startswith(f"{group}/")

    for model, optimizer, writer in LAYOUTS:
        if any(under(model, record) for record in records):
            return ([r for r in records if not under(optimizer, r)], [r for r in records if under(optimizer, r)],
                    optimizer, writer)
    return records, [], "", ""


@dataclass
class Weights:
    """What an HDF5 file of weights holds: its tensors, the layer each Keras 3 weight belongs to (by tensor name),
    the notes to show, and what the file says of Keras (the catalogue's version and initializers)."""

    tensors: dict[str, TensorInfo]
    layers: dict[str, str]
    notes: list[str]
    found: dict[str, Any]


def read_weights(source: Source) -> Weights:
    """The datasets of the HDF5 bytes at `source`, catalogued in a child, each a lazy tensor."""
    require_h5py(source.path)  # the missing extra is said here, not from the child
    with hdf5_target(source) as name:
        found = run_isolated(partial(catalogue, source, name), what=source.where, library=LIBRARY,
                             seconds=CATALOGUE_SECONDS, memory=CATALOGUE_MEMORY)
    records, optimizer, optimizer_group, writer = model_records(found["datasets"])
    tensors: dict[str, TensorInfo] = {}
    layers: dict[str, str] = {}
    for record in records:
        info = dataset_info(source, record)
        if info.name in tensors:
            raise CheckpointError(f"{source.where}: datasets {quote(record['path'])} and another both read as "
                                  f"{quote(info.name)}")
        tensors[info.name] = info
        if isinstance(record.get("layer"), str):
            layers[info.name] = record["layer"]
    notes = []
    if found["skipped"]:
        notes.append(f"{found['skipped']} datasets that hold no numbers (strings, records) are left out")
    if optimizer:
        values = sum(math.prod(record["shape"]) for record in optimizer)
        notes.append(f"{len(optimizer)} datasets under '{optimizer_group}' ({values:,} values: the optimizer's state "
                     f"that {writer} keeps beside the model's weights, not parameters) are left out")
    return Weights(tensors, layers, notes, found)


# Keras 3's saving_lib files a layer's weights under its class's snake-case name ('layers/embedding_1/vars/0': a
# keras.layers.Embedding; keras-hub's 'reversible_embedding' is another class) and a .weights.h5 stores no version
KERAS3_EMBEDDING = re.compile(r"(.+/)?layers/embedding(_\d+)?/vars/0")
KERAS3_UNSTATED = "3 (a .weights.h5 in saving_lib's layout, which stores no version)"


def unstated_keras3(records: list[dict[str, Any]]) -> str | None:
    """The Keras a .weights.h5 that names none was saved by, where its layout says Keras 3 and every layer filed as an
    embedding is a keras.layers.Embedding: whose default draw analysis.untrained then takes, as for a Keras file
    that does not store its initializer (a 2,000 x 64 Embedding trained with Adam, saved by save_weights: norms
    found none of its 500 never-seen rows at the draw, and undertrained called its 12 most frequent rows norm-high,
    where the same model's .keras, whose config.json names the draw, did neither)."""
    layers = [str(r["path"]) for r in records if str(r["path"]).startswith("layers/")]
    embeddings = [p for p in layers if "embedding" in p.rsplit("/vars/", 1)[0].rsplit("/", 1)[-1]]
    if embeddings and all(KERAS3_EMBEDDING.fullmatch(p) for p in embeddings):
        return KERAS3_UNSTATED
    return None


# the table class saving_lib files by its snake-case name ('layers/embedding_1/vars/0') whose role the path cannot
# say (keras-hub's reversible_embedding and position_embedding say theirs: roles.KNOWN)
KERAS3_TABLE_PATHS = {"embedding": "Embedding"}


def path_layers(layers: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Tensor name -> (the layer's own name, its class), for the Keras 3 table weights whose path gives the class
    ('layers.embedding_1.vars.0': an Embedding) and whose vars group gives the name ('pos_emb'): what a .keras zip's
    config.json says, read from a .weights.h5 that has none."""
    found = {}
    for name, layer in layers.items():
        filed = re.fullmatch(r"(?:.*\.)?([a-z_]+?)(?:_\d+)?\.vars\.\d+", name)
        if filed is not None and filed.group(1) in KERAS3_TABLE_PATHS:
            found[name] = (layer, KERAS3_TABLE_PATHS[filed.group(1)])
    return found


def open_h5(path: Path, options: OpenOptions) -> Checkpoint:
    weights = read_weights(Source(path))
    version = weights.found["version"]
    saved = f" saved by Keras {printable(shortened(version))}" if isinstance(version, str) else ""
    notes = [f"HDF5 weights{saved}; tensor names are the dataset paths with '/' as '.' and ':0' dropped",
             *weights.notes]
    # the Keras version: whose defaults the weights were drawn from (analysis.untrained's init scale), unless the
    # file's model_config names another initializer for its Embedding layers (RandomNormal(0.02): not uniform 0.05)
    stated = version if isinstance(version, str) else unstated_keras3(weights.found["datasets"])
    config = init_config(stated, weights.found.get("initializers"))
    return Checkpoint(path, weights.tensors, config=config, notes=notes,  # config.json beside it: open_checkpoint
                      layers=path_layers(weights.layers))
