"""CTranslate2 `model.bin`, read from its binary layout (ctranslate2/specs/model_spec.py `_serialize`,
src/models/model.cc `Model::load`), so the library is not needed. All fields little-endian:

    uint32 binary version (1-6)
    version >= 2: string spec name ("WhisperSpec"), uint32 spec revision
    uint32 variable count, then per variable:
        string name, uint8 rank, uint32 dims[rank],
        version >= 4: uint8 dtype id, uint32 byte count; before: uint8 item size, uint32 element count
        the bytes
    version >= 3: uint32 alias count, then per alias: string alias, string variable name

A string is a uint16 length that counts a closing NUL, then the bytes. Weights quantized to int8 (int16)
carry a `<name>_scale` beside them, with int8 = round(float * scale): the weight is read as int8 / scale,
one scale per row (int16: one for the whole matrix). Variables are memory-mapped."""

from __future__ import annotations

import dataclasses
import math
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..core.arrays import stored_dtype
from ..core.checkpoint import Checkpoint, TensorInfo
from ..core.errors import CheckpointError
from ..core.memory import require_memory
from ..core.text import printable, quote
from ..storage.base import OpenOptions
from ..storage.checks import check_shape, check_tensor_count, map_array
from ..storage.constants import CTRANSLATE2_DTYPES
from ..tokenizers import find_tokenizer
from ..tokenizers.vocabulary_list import load_vocabulary_list
from ._binary import Cursor, map_file

if TYPE_CHECKING:

    from ..core.tokenizer import Tokenizer

MAX_VERSION = 6  # CURRENT_BINARY_VERSION of CTranslate2 4.x
ITEM_SIZE_DTYPES = {4: 0, 2: 2, 1: 1}  # binary versions 1-3 stored an item size: float32, int16, int8
SCALE_SUFFIX = "_scale"
# names the converter writes beside model.bin, in the order CTranslate2 itself looks for them
VOCABULARY_FILES = ("vocabulary.json", "vocabulary.txt", "shared_vocabulary.json", "shared_vocabulary.txt",
                    "target_vocabulary.json", "target_vocabulary.txt")
def read_string(cur: Cursor, what: str) -> str:
    length = cur.unpack("<H", f"the length of {what}")
    return cur.text(cur.read(length, what).split(b"\0", 1)[0], what)  # the C++ reader stops at the NUL


def read_dequantized(weight: TensorInfo, scale: TensorInfo, where: str) -> np.ndarray:
    """int8 (int16) weights over their scale: float = q / scale, per row or for the whole matrix."""
    require_memory(weight.numel * 4, f"{where} dequantized to float32")
    scales = np.asarray(scale.read(), dtype=np.float32)
    if scales.ndim == 1:
        scales = scales.reshape(-1, *([1] * (len(weight.shape) - 1)))
    return weight.read().astype(np.float32) / scales


def scale_fits(weight: TensorInfo, scale: TensorInfo) -> bool:
    return weight.dtype in ("int8", "int16") and len(weight.shape) >= 1 and scale.dtype == "float32" and (
        scale.shape in ((), (1,)) or scale.shape == weight.shape[:1])


def catalogue(path: Path) -> tuple[int, str | None, dict[str, TensorInfo], list[str], int]:
    """The binary version, the spec name, the variables (aliases included), notes, and the scale values
    taken out of the catalogue."""
    where = quote(path)
    cur = Cursor(map_file(path), where)
    version = cur.unpack("<I", "the binary version")
    if not 1 <= version <= MAX_VERSION:
        raise CheckpointError(f"{where}: CTranslate2 binary version {version}, expected 1 to {MAX_VERSION}")
    spec = None
    if version >= 2:
        spec = read_string(cur, "the spec name")
        cur.unpack("<I", "the spec revision")
    count = cur.unpack("<I", "the variable count")
    if count * 8 > cur.left():  # a name, a rank, a type and a size take 8 bytes at least
        raise CheckpointError(f"{where}: header declares {count} variables, more than the {cur.left()} bytes "
                              "left can hold")
    check_tensor_count(count, where, "variables")
    tensors: dict[str, TensorInfo] = {}
    for index in range(count):
        name = read_string(cur, f"the name of variable {index}")
        var_where = f"{where}: variable {quote(name)}"
        rank = cur.unpack("<B", f"the rank of {quote(name)}")
        shape = check_shape(tuple(cur.unpack("<I", f"the dimensions of {quote(name)}") for _ in range(rank)),
                            var_where)
        if version >= 4:
            type_id = cur.unpack("<B", f"the dtype of {quote(name)}")
            nbytes = cur.unpack("<I", f"the size of {quote(name)}")
        else:
            item_size = cur.unpack("<B", f"the item size of {quote(name)}")
            if item_size not in ITEM_SIZE_DTYPES:
                raise CheckpointError(f"{var_where}: item size {item_size}, expected 1, 2 or 4")
            type_id = ITEM_SIZE_DTYPES[item_size]
            nbytes = cur.unpack("<I", f"the size of {quote(name)}") * item_size
        if type_id >= len(CTRANSLATE2_DTYPES):
            raise CheckpointError(f"{var_where}: dtype id {type_id}, expected 0 to {len(CTRANSLATE2_DTYPES) - 1}")
        dtype = CTRANSLATE2_DTYPES[type_id]
        np_dtype = stored_dtype(dtype)
        needed = math.prod(shape) * np.dtype(np_dtype).itemsize
        if needed != nbytes:
            raise CheckpointError(f"{var_where}: shape {list(shape)} of {dtype} needs {needed} bytes, "
                                  f"the file says {nbytes}")
        start = cur.take(nbytes, f"the data of {quote(name)}")
        if name in tensors:
            raise CheckpointError(f"{var_where} appears twice")
        tensors[name] = TensorInfo(name, shape, dtype, partial(map_array, path, np_dtype, start, shape),
                                   storage=(str(path), start) if nbytes else None)
    tensors, scale_values = dequantized(path, tensors)
    notes = []
    if version >= 3:  # after dequantizing: an alias shares its variable's scale too, as in model.cc
        aliases = cur.unpack("<I", "the alias count")
        if aliases * 6 > cur.left():  # an alias is two names of 3 bytes at least
            raise CheckpointError(f"{where}: header declares {aliases} aliases, more than the {cur.left()} bytes "
                                  "left can hold")
        check_tensor_count(len(tensors) + aliases, where, "variables and aliases")
        for index in range(aliases):
            alias = read_string(cur, f"alias {index}")
            target = read_string(cur, f"the variable of alias {quote(alias)}")
            if target in tensors and alias not in tensors:
                tensors[alias] = dataclasses.replace(tensors[target], name=alias)
            else:
                notes.append(f"alias {printable(alias)} of {printable(target)} ignored: "
                             + ("no such variable" if target not in tensors else "the name is taken"))
    return version, spec, tensors, notes, scale_values


def dequantized(path: Path, tensors: dict[str, TensorInfo]) -> tuple[dict[str, TensorInfo], int]:
    """Quantized weights become float32 tensors that divide by their scale on read; the scales,
    quantization data rather than parameters, leave the catalogue (their values are counted apart)."""
    out, scale_values = dict(tensors), 0
    for name, weight in tensors.items():
        scale = tensors.get(name + SCALE_SUFFIX)
        if scale is None or not scale_fits(weight, scale):
            continue
        per = "per-row scale" if scale.shape == weight.shape[:1] and weight.shape[:1] != (1,) else "one scale"
        where = f"{quote(path)}: variable {quote(name)}"
        out[name] = TensorInfo(name, weight.shape, "float32", partial(read_dequantized, weight, scale, where),
                               weight.storage, quantization=f"{weight.dtype} / {per}")
        del out[name + SCALE_SUFFIX]
        scale_values += scale.numel
    return out, scale_values


def tokenizer_beside(directory: Path) -> Tokenizer | None:
    """A tokenizer file beside model.bin (faster-whisper ships tokenizer.json), else the converter's
    vocabulary list, which names ids and looks up whole tokens."""
    found = find_tokenizer(directory)
    if found is not None:
        return found
    for name in VOCABULARY_FILES:
        if (directory / name).is_file():
            return load_vocabulary_list(directory / name)
    return None


def open_ctranslate2(path: Path, options: OpenOptions) -> Checkpoint:
    version, spec, tensors, notes, scale_values = catalogue(path)
    notes.insert(0, f"CTranslate2 binary version {version}, spec {printable(spec or 'not recorded')}")
    quantized = sorted({t.quantization for t in tensors.values() if t.quantization})
    if quantized:
        notes.append(f"weights stored as {', '.join(quantized)} are dequantized to float32 when read")
    return Checkpoint(path, tensors, notes=notes, quantization_values=scale_values,
                      tokenizer=partial(tokenizer_beside, path.parent))
