"""What the readers of nested checkpoints share (pickled params dicts, torch.save files): tensors named by
their path through nested dicts, the state dict inside a training checkpoint, the step counter and the
config saved beside it, and Hugging Face's config.json beside any checkpoint."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, cast

from ..core.checkpoint import TensorInfo
from ..core.errors import CheckpointError
from ..core.text import quote
from ..storage.constants import CONFIG_KEYS, IGNORED_KEYS, STATE_DICT_KEYS, STEP_KEYS, WRAPPER_PREFIXES
from ..storage.descriptors import check_array, make_array, scalar_value
from ..storage.unpickle import PickledArray

PLAIN_TYPES = (str, int, float, bool, type(None))  # config values kept; tensors and objects are not settings
MAX_DEPTH = 32  # a pickle can nest without end, or hold itself
# values one walk may visit: a pickle that shares one dict under two keys at each of 32 levels names 2**32 paths in a
# few hundred bytes; a real checkpoint's state dict, its optimizer state beside it, holds far fewer
MAX_VISITS = 1_000_000

ValueOf = Callable[[Any], Any]  # a value as a plain Python value (a one-element array as its number)


class Visits:
    """What one walk of a pickled tree may still visit (MAX_VISITS): its paths, not its objects, are counted."""

    def __init__(self, where: str):
        self.where, self.left = where, MAX_VISITS

    def visit(self, prefix: str) -> None:
        self.left -= 1
        if self.left < 0:
            raise CheckpointError(f"{self.where}: expected at most {MAX_VISITS:,} values in the checkpoint, found more "
                                  f"(a container shared under many names?) at {quote(prefix[:80])}")


def flatten(value: Any, prefix: str = "", depth: int = 0, where: str = "",
            visits: Visits | None = None) -> Iterator[tuple[str, Any]]:
    """Nested dicts and lists of arrays, as dotted names: params["layer0"]["attn"]["q"] -> layer0.attn.q."""
    if isinstance(value, (dict, list, tuple)) and depth >= MAX_DEPTH:
        raise CheckpointError(f"{where}: expected values nested at most {MAX_DEPTH} deep, found deeper nesting "
                              f"(or a container holding itself) at {quote(prefix[:80])}")
    visits = visits or Visits(where)
    visits.visit(prefix)
    if isinstance(value, dict):
        for key, item in value.items():
            yield from flatten(item, f"{prefix}{key_text(key)}.", depth + 1, where, visits)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from flatten(item, f"{prefix}{index}.", depth + 1, where, visits)
    else:
        yield prefix[:-1], value


def key_text(key: Any) -> str:
    if isinstance(key, int) and key.bit_length() > 64:
        return f"<{key.bit_length()}-bit integer>"  # str() refuses integers of more than 4300 digits
    return str(key)[:200]


def plain_value(value: Any) -> Any:
    """A pickled 0-d numeric array (np.array(120)) as the Python number it holds; anything else as it is."""
    array = value.array if isinstance(value, PickledArray) else None
    if (array is not None and array.shape == () and array.dtype.numeric and not isinstance(array.data, list)
            and memoryview(array.data).nbytes == array.dtype.itemsize):
        return scalar_value(array.dtype, bytes(array.data))
    return value


def step_value(value: Any) -> int | None:
    """A whole number of steps (an int, or a float with nothing after the point), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int):
        return value if abs(value) < 2**63 else None  # float() of a 600-bit integer overflows
    return int(value) if value.is_integer() and abs(value) < 2**63 else None


def find_step(doc: dict[Any, Any], value_of: ValueOf = plain_value) -> int | None:
    for key in STEP_KEYS:
        if key in doc:
            step = step_value(value_of(doc[key]))
            if step is not None:
                return step
    return None


def find_config(doc: dict[Any, Any], value_of: ValueOf = plain_value) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for key in CONFIG_KEYS:
        if isinstance(doc.get(key), dict):
            values = {key_text(k): value_of(v) for k, v in doc[key].items()}
            config.update({k: v for k, v in values.items() if isinstance(v, PLAIN_TYPES)})
    return config


def not_weights(key: Any) -> bool:
    """A key beside the tensors of a flat checkpoint that holds no weights: optimizer state, step, config."""
    return key in IGNORED_KEYS or key in STEP_KEYS or key in CONFIG_KEYS


def has_tensors(value: Any, is_tensor: Callable[[Any], bool], where: str) -> bool:
    return isinstance(value, dict) and any(is_tensor(v) for _, v in flatten(value, where=where))


def state_dict_of(path: Path, obj: Any, is_tensor: Callable[[Any], bool]) -> dict[Any, Any]:
    """The state dict inside a training checkpoint (under "model", "state_dict", ...), or the dict itself."""
    if not isinstance(obj, dict):
        raise CheckpointError(f"{quote(path)}: expected a state dict or a dict holding one, found {type(obj).__name__}")
    for key in STATE_DICT_KEYS:
        if has_tensors(inner := obj.get(key), is_tensor, quote(path)):
            return cast(dict[Any, Any], inner)  # has_tensors found a dict
    if has_tensors(obj, is_tensor, quote(path)):
        return {k: v for k, v in obj.items() if not not_weights(k)}
    raise CheckpointError(f"{quote(path)}: expected tensors in the file (a state dict, or one under "
                          f"{', '.join(repr(k) for k in STATE_DICT_KEYS)}), found none")


def strip_wrapper_prefixes(names: list[str]) -> tuple[dict[str, str], list[str]]:
    """Stored name -> name without the prefix torch.compile or DDP adds to every tensor."""
    renamed, notes = {n: n for n in names}, []
    changed = True
    while changed and renamed:
        changed = False
        for prefix, wrapper in WRAPPER_PREFIXES:
            if all(new.startswith(prefix) for new in renamed.values()):
                renamed = {old: new[len(prefix):] for old, new in renamed.items()}
                notes.append(f"stripped the {prefix!r} prefix {wrapper} adds to every tensor name")
                changed = True
    return renamed, notes


def array_tensor(path: Path, name: str, pickled: PickledArray) -> TensorInfo | None:
    """A numpy array a pickle describes, checked against its bytes now (phase two) and made only when read;
    None when it holds no numbers (strings, objects, complex). The same array under two names is one storage."""
    where = f"{quote(path)}: array {quote(name)}"
    array = pickled.description(where)
    check_array(array, where)
    if not array.dtype.numeric:
        return None
    return TensorInfo(name, array.shape, array.dtype.name, partial(make_array, array, where),
                      storage=(str(path), "pickle", id(pickled)))
