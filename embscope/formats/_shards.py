"""The index of a sharded checkpoint, as transformers' save_pretrained writes it beside the shards
(model.safetensors.index.json, pytorch_model.bin.index.json): a JSON "weight_map" of tensor name to shard file."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from ..core import files
from ..core.errors import CheckpointError
from ..core.text import quote
from ..storage.checks import is_regular_file

MAX_INDEX_BYTES = 128 << 20  # an index names each tensor once: 200,000 entries of a few hundred bytes


def shards_of(path: Path, what: str) -> list[tuple[Path, list[str]]]:
    """(shard, the tensor names the index puts in it) for each shard, in name order; a shard must be a regular
    file beside the index, named without a folder. `what` names the index in errors ("a safetensors index")."""
    try:
        index = files.read_json(path, MAX_INDEX_BYTES, what)
        weight_map = index["weight_map"]
        if not (isinstance(weight_map, dict) and all(isinstance(v, str) for v in weight_map.values())):
            raise TypeError  # not an assert: python -O would let a hostile index through
    except (ValueError, RecursionError, KeyError, TypeError):
        raise CheckpointError(f"{quote(path)}: expected a JSON index with a \"weight_map\" of tensor name to shard "
                              "file") from None
    by_shard: dict[str, list[str]] = defaultdict(list)  # one pass over the map, not one per shard
    for name, shard_name in weight_map.items():
        by_shard[shard_name].append(name)
    found = []
    for shard_name in sorted(by_shard):
        shard = path.parent / shard_name
        if Path(shard_name).name != shard_name or not is_regular_file(shard):
            raise CheckpointError(f"{quote(path)} names shard {quote(shard_name)}, which is not in {quote(path.parent)}")
        found.append((shard, by_shard[shard_name]))
    return found


def missing(path: Path, name: str, shard: Path) -> CheckpointError:
    return CheckpointError(f"{quote(path)} puts tensor {quote(name)} in {quote(shard.name)}, whose header lacks it")
