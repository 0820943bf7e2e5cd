"""Which row of table B each compared row of table A meets: what compare walks and what CKA is taken over."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .sweep import block_rows


@dataclass(frozen=True, eq=False)
class Pairing:
    """Which row of B each compared row of A meets: rows start_a.. and start_b.. in step, or explicit ids."""

    count: int
    start_a: int = 0
    start_b: int = 0
    ids_a: np.ndarray | None = None  # int64 (count,), with ids_b: explicit pairs (rows matched by token string)
    ids_b: np.ndarray | None = None
    note: str | None = None

    def rows_a(self) -> np.ndarray:
        return self.ids_a if self.ids_a is not None else np.arange(self.start_a, self.start_a + self.count)

    def rows_b(self) -> np.ndarray:
        return self.ids_b if self.ids_b is not None else np.arange(self.start_b, self.start_b + self.count)

    def pair_of(self, rows: np.ndarray, side: str, table_rows: int) -> np.ndarray:
        """The pair index of each row of one side's table ("a" or "b"); -1 for a row in no pair."""
        lookup = np.full(table_rows, -1, dtype=np.int64)
        lookup[self.rows_a() if side == "a" else self.rows_b()] = np.arange(self.count)
        pairs: np.ndarray = lookup[rows]
        return pairs

    def covers(self, a: np.ndarray, b: np.ndarray) -> bool:
        """Every row of both tables, each with its own index: the row norms found are the tables' own."""
        return self.ids_a is None and self.start_a == self.start_b == 0 and self.count == len(a) == len(b)

    def blocks(self, a: np.ndarray, b: np.ndarray) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """(first pair, rows of A, rows of B) for consecutive blocks of block_rows(a) pairs."""
        rows = block_rows(a)
        for start in range(0, self.count, rows):
            yield (start, *self.block(a, b, start, min(start + rows, self.count)))

    def block(self, a: np.ndarray, b: np.ndarray, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """The rows of A and of B of pairs start..stop."""
        if self.ids_a is None or self.ids_b is None:
            return a[self.start_a + start:self.start_a + stop], b[self.start_b + start:self.start_b + stop]
        return a[self.ids_a[start:stop]], b[self.ids_b[start:stop]]

    def same_as(self, other: Pairing) -> bool:
        """Pairs the same rows (so one read of B serves both)."""
        return (self.ids_a is None and other.ids_a is None and self.ids_b is None and other.ids_b is None
                and (self.count, self.start_a, self.start_b) == (other.count, other.start_a, other.start_b))
