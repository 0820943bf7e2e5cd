"""How many parameters the lookup tables hold, and their share of the whole checkpoint."""

from __future__ import annotations

from dataclasses import dataclass

from ..checkpoint import Checkpoint, EmbeddingTables
from ..roles import is_parameter


@dataclass(frozen=True)
class ParamsReport:
    total: int
    token: int
    position: int | None  # None: no learned position table
    output: int | None  # None: the head is tied to the token table
    tied: bool
    source: str  # where `total` comes from

    @property
    def embeddings(self) -> int:
        return self.token + (self.position or 0)

    @property
    def total_without_position(self) -> int:
        """nanoGPT's convention: get_num_params() leaves the position table out."""
        return self.total - (self.position or 0)

    @property
    def shares(self) -> dict[str, float | None]:
        def share(n: int | None) -> float | None:
            return None if n is None or not self.total else n / self.total
        return {"token": share(self.token), "position": share(self.position),
                "output": share(self.output), "embeddings": share(self.embeddings)}


def count_parameters(checkpoint: Checkpoint, skip: frozenset[str] = frozenset()) -> int:
    """Float tensors, each storage counted once (a tied head is stored once); buffers left out."""
    seen, total = set(), 0
    for tensor in checkpoint.tensors.values():
        if tensor.name in skip or not is_parameter(tensor):
            continue
        key = (tensor.storage, tensor.shape) if tensor.storage is not None else tensor.name
        if key not in seen:
            seen.add(key)
            total += tensor.numel
    return total


def params_report(checkpoint: Checkpoint, tables: EmbeddingTables) -> ParamsReport:
    if checkpoint.declared_params is not None:
        total, source = checkpoint.declared_params, "the parameter count in the file's header"
    else:
        skip = frozenset({tables.tied_copy}) if tables.tied_copy else frozenset()
        total, source = count_parameters(checkpoint, skip), "float tensors in the file, shared storage counted once"
    position = tables.position.tensor.numel if tables.position else None
    output = tables.output.tensor.numel if tables.output else None
    return ParamsReport(total, tables.token.tensor.numel, position, output, tables.tied, source)
