"""Keras / TensorFlow weights in HDF5 (`tf_model.h5` of Hugging Face, `model.save_weights("x.h5")`),
read through `h5py`. Every numeric dataset is a tensor, named by its HDF5 path with the `:0` of TF
variable names dropped and "/" read as "." (so `bert/embeddings/word_embeddings/weight:0` matches the
names of roles.KNOWN by suffix). Contiguous, uncompressed datasets are memory-mapped at their file
offset; chunked or compressed ones are read through h5py when used. Data kept in other files (external
storage, virtual datasets) is refused."""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import files
from ..checkpoint import Checkpoint, TensorInfo
from ..errors import CheckpointError
from ..memory import require_memory
from ..text import detail, printable, quote
from ._base import OpenOptions, require_package
from ._checks import check_extent, check_shape, map_array

if TYPE_CHECKING:
    import numpy as np

TF_VARIABLE_SUFFIX = ":0"
# what h5py raises on a damaged file: the HDF5 library's errors arrive as these
H5_DAMAGE = (OSError, KeyError, RuntimeError, ValueError, TypeError)


def require_h5py(path: Path) -> Any:
    return require_package("h5py", path, "an HDF5 (Keras) file", "h5")


def tensor_name(hdf5_path: str) -> str:
    return hdf5_path.removesuffix(TF_VARIABLE_SUFFIX).replace("/", ".")


def damage(where: str, err: BaseException) -> CheckpointError:
    return CheckpointError(f"{where}: expected an HDF5 file h5py can read, found damage ({detail(err)})")


def read_through_h5py(path: Path, hdf5_path: str, nbytes: int) -> np.ndarray:
    import numpy as np
    h5py = require_h5py(path)
    where = f"{quote(path)}: dataset {quote(hdf5_path)}"
    require_memory(nbytes, where)
    try:  # libhdf5 opens the file itself: it is handed the descriptor checked here (files.opened_path)
        with files.opened_path(path, "an HDF5 file") as name, h5py.File(name, "r", locking=False) as f:
            return np.asarray(f[hdf5_path][()])
    except H5_DAMAGE as err:
        raise damage(where, err) from None


def dataset_info(path: Path, hdf5_path: str, dataset: Any) -> TensorInfo | None:
    """A numeric dataset as a lazy tensor; None for strings and compound records."""
    where = f"{quote(path)}: dataset {quote(hdf5_path)}"
    dtype = dataset.dtype
    if dtype.fields is not None or dtype.kind not in "biuf":
        return None
    shape = check_shape(tuple(dataset.shape), where)
    if dataset.is_virtual or dataset.external:
        raise CheckpointError(f"{where} keeps its data in other files; refused")
    nbytes = math.prod(shape) * dtype.itemsize
    offset = dataset.id.get_offset()
    if offset is not None and dataset.chunks is None and dataset.compression is None:
        check_extent(path, offset, nbytes, where)
        read = partial(map_array, path, dtype, offset, shape)
        storage = (str(path), offset) if nbytes else None
    else:
        read, storage = partial(read_through_h5py, path, hdf5_path, nbytes), None
    return TensorInfo(tensor_name(hdf5_path), shape, dtype.newbyteorder("=").name, read, storage)


def open_h5(path: Path, options: OpenOptions) -> Checkpoint:
    h5py = require_h5py(path)
    tensors: dict[str, TensorInfo] = {}
    skipped, notes = 0, []
    try:  # libhdf5 opens the file itself: it is handed the descriptor checked here (files.opened_path)
        with files.opened_path(path, "an HDF5 file") as name, h5py.File(name, "r", locking=False) as f:
            found: list[tuple[str, Any]] = []
            f.visititems(lambda name, obj: found.append((name, obj)) if isinstance(obj, h5py.Dataset) else None)
            for hdf5_path, dataset in found:
                info = dataset_info(path, hdf5_path, dataset)
                if info is None:
                    skipped += 1
                elif info.name in tensors:
                    raise CheckpointError(f"{quote(path)}: datasets {quote(hdf5_path)} and another both read as "
                                          f"{quote(info.name)}")
                else:
                    tensors[info.name] = info
            version = f.attrs.get("keras_version")
    except CheckpointError:
        raise
    except H5_DAMAGE as err:
        raise damage(quote(path), err) from None
    if isinstance(version, bytes):
        version = version.decode("utf-8", "replace")
    notes.append(f"HDF5 weights{f' saved by Keras {printable(version)}' if isinstance(version, str) else ''}; "
                 "tensor names are the dataset paths with '/' as '.' and ':0' dropped")
    if skipped:
        notes.append(f"{skipped} datasets that hold no numbers (strings, records) are left out")
    return Checkpoint(path, "Keras HDF5", tensors, notes=notes)  # config.json beside it: open_checkpoint
