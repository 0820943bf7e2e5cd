"""A model torch.save pickled whole (`torch.save(model)`, not its state_dict): its classes are never imported. Each
module is the Record of the attributes its pickle sets, and its parameters and persistent buffers are named as
`model.state_dict()` names them: a module's own parameters, then its buffers, then each child's, depth first."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..core.errors import CheckpointError
from ..core.text import quote
from ..storage.constants import CONFIG_KEYS, STATE_DICT_KEYS
from ..storage.unpickle import ObjectType, Record
from ._state_dict import MAX_DEPTH, Visits, key_text


def is_module(value: Any) -> bool:
    """A Record with the attributes every torch.nn.Module sets in its __init__."""
    return isinstance(value, Record) and all(isinstance(value.get(key), dict) for key in ("_parameters", "_modules"))


def module_tensors(module: Record, where: str, prefix: str = "", depth: int = 0,
                   visits: Visits | None = None) -> Iterator[tuple[str, Any, bool]]:
    """(name, tensor, whether it is a buffer) in state_dict()'s order."""
    if depth >= MAX_DEPTH:  # a pickle can nest modules without end, or hold itself
        raise CheckpointError(f"{where}: expected modules nested at most {MAX_DEPTH} deep, found deeper nesting "
                              f"at {quote(prefix[:80])}")
    visits = visits or Visits(where)  # a module shared under two names at each level: 2**32 names
    visits.visit(prefix)
    buffers = module.get("_buffers")
    left_out = module.get("_non_persistent_buffers_set")  # buffers state_dict() leaves out (a causal mask)
    left_out = left_out if isinstance(left_out, (set, frozenset)) else set()
    for group, buffer in ((module["_parameters"], False), (buffers if isinstance(buffers, dict) else {}, True)):
        for name, tensor in group.items():
            if tensor is not None and name not in left_out:
                visits.visit(prefix)
                yield f"{prefix}{key_text(name)}", tensor, buffer
    for name, child in module["_modules"].items():
        if child is None:
            continue
        if not is_module(child):
            raise CheckpointError(f"{where}: expected submodule {quote(prefix + key_text(name))} of the pickled model "
                                  f"to be a module, found {kind_of(child)}")
        yield from module_tensors(child, where, f"{prefix}{key_text(name)}.", depth + 1, visits)


def kind_of(value: Any) -> str:
    if isinstance(value, ObjectType):  # a class itself, never imported
        return f"the class {value.name!r}"
    return f"an object of class {value.kind!r}" if isinstance(value, Record) else f"a {type(value).__name__}"


def model_config(module: Record) -> dict[str, Any]:
    """The model's config object (nanoGPT's GPTConfig under `config`) as the config a checkpoint saves beside."""
    return {key: dict(module[key]) for key in CONFIG_KEYS if isinstance(module.get(key), dict)}


def unpickled_model(obj: Any, where: str) -> tuple[Any, list[str], frozenset[str]]:
    """obj as the reader of state dicts takes it: a whole model, alone or under a state-dict key ("model"), becomes
    the state dict it holds, its config beside it, with a note, and the names of its buffers (BatchNorm's running
    statistics, a pruning mask: in state_dict(), not in parameters()); anything else is obj itself."""
    if is_module(obj):
        key, model, outer = "model", obj, {}
    elif isinstance(obj, dict) and (key := next((k for k in STATE_DICT_KEYS if is_module(obj.get(k))), "")):
        model, outer = obj[key], {k: v for k, v in obj.items() if k != key}
    elif isinstance(obj, Record):
        raise CheckpointError(f"{where}: expected a state dict, a dict holding one or a whole torch.nn model, "
                              f"found {kind_of(obj)}")
    else:
        return obj, [], frozenset()
    found = list(module_tensors(model, where))
    state = {name: tensor for name, tensor, _ in found}
    note = (f"read the parameters of a whole pickled model of class {model.kind!r} as its state_dict() names them; "
            "its code was never imported or run")
    return {**model_config(model), **outer, key: state}, [note], frozenset(name for name, _, buffer in found if buffer)
