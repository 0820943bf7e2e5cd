"""What every top-k engine is given and must do. An engine holds the normalised table where it computes
(host memory, a GPU), multiplies blocks of queries against it and hands back each block's top columns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .devices import cpu_block_bytes
from .rows import valid_unit_rows

# Low precision keeps this many candidates beyond k (at least k more) before the exact fp32 re-rank.
RERANK_EXTRA_MIN = 32

# emit(start, ids, scores): the top `count` columns of queries start.. of a search, best first.
Emit = Callable[[int, np.ndarray, np.ndarray], None]


@dataclass(frozen=True, eq=False)
class Prepared:
    """The unit rows of the valid rows, packed to the front, as the engine holds them."""

    base: Any  # numpy float32 (n_valid, d), or a torch tensor on the device
    valid: np.ndarray  # bool (V,): which table rows are columns of base, in order


@dataclass(frozen=True, eq=False)
class Queries:
    """The query side of one search, in the columns of the prepared table."""

    given: np.ndarray  # int64 (Q,) columns of base that are the queries, or float32 (Q, d) unit query vectors
    left_lines: np.ndarray  # with left_columns: (query, column) pairs scored -inf, sorted by query
    left_columns: np.ndarray

    @property
    def are_rows(self) -> bool:
        return self.given.ndim == 1

    @property
    def size(self) -> int:
        return len(self.given)

    def left_out(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """The pairs of queries start..stop, with lines counted from start."""
        low, high = np.searchsorted(self.left_lines, (start, stop))
        return self.left_lines[low:high] - start, self.left_columns[low:high]

    def host_block(self, base: np.ndarray, start: int, stop: int) -> np.ndarray:
        """float32 unit vectors of queries start..stop, from a base held in host memory."""
        return base[self.given[start:stop]] if self.are_rows else self.given[start:stop]


class Engine(Protocol):
    name: str
    streams: bool  # can search for a few queries while reading the table once (stream)

    def supports(self, device: str, precision: str) -> bool: ...

    def block_bytes(self, device: str, n_columns: int, dim: int) -> int:
        """Bytes one block of float32 scores may take."""
        ...

    def prepare(self, table: np.ndarray, device: str) -> Prepared: ...

    def search(self, prepared: Prepared, queries: Queries, count: int, block: int, precision: str,
               emit: Emit) -> None:
        """Blocks of `block` queries; emit each block's top `count` columns (count <= valid rows)."""
        ...

    def stream(self, table: np.ndarray, queries: np.ndarray, k: int,
               left_out: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """The top k valid rows of each unit query vector, read from the table as it goes past once (no
        normalised copy): (int64 (Q, k) ids, float32 scores), id -1 and score -inf where there is none.
        left_out: (query, row id) pairs never returned."""
        ...


class HostEngine:
    """What the engines that compute on the host share: blocks sized for the CPU's caches and memory, and the
    unit rows of the valid rows held in host memory."""

    def block_bytes(self, device: str, n_columns: int, dim: int) -> int:
        return cpu_block_bytes(n_columns, dim)

    def prepare(self, table: np.ndarray, device: str) -> Prepared:
        return Prepared(*valid_unit_rows(table))
