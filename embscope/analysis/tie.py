"""Whether the head is tied, as config.json says and as the tensors say: info reports both, and where they
disagree the tensors decide (roles.head_of) and the head's note says so."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.checkpoint import Checkpoint, EmbeddingTables
from ..roles import config_tie


@dataclass(frozen=True)
class Tie:
    config: bool | None  # tie_word_embeddings (or a from-scratch config's tied flag); None: the config does not say
    tensors: str | None  # "equal", "different"; None: the file holds no head, or it was not compared whole

    @property
    def disagree(self) -> bool:
        return self.config is not None and self.tensors is not None and self.config != (self.tensors == "equal")


def tie_of(checkpoint: Checkpoint, tables: EmbeddingTables) -> Tie:
    return Tie(config_tie(checkpoint.config), tables.tie_tensors)
