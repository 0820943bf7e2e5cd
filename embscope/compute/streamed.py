"""Top-k of a few query vectors while the table goes past once, block by block: no normalised copy of the
table is made and the scores never exceed one block. Exact: each block's top k (ties to the lower column) is
merged with the best so far by (score desc, row id asc), which is the top k of the whole row."""

from __future__ import annotations

import numpy as np

from .select import finalise, select_top


class StreamedTopK:
    """The k best rows so far for each of Q unit query vectors (float32 (Q, d)), as blocks of the table's
    unit rows are added in any order. left_out: (query line, row id) pairs never returned (the query itself,
    a merged word's own tokens)."""

    def __init__(self, queries: np.ndarray, k: int, left_out: tuple[np.ndarray, np.ndarray] | None = None,
                 threads: int = 1):
        self.queries = queries
        self.k = k
        self.threads = threads
        lines, rows = left_out if left_out is not None else (np.empty(0, np.int64), np.empty(0, np.int64))
        order = np.argsort(rows, kind="stable")  # by row, so each block finds its own with a search
        self.left_lines, self.left_rows = lines[order], rows[order]
        self.ids = np.full((len(queries), k), -1, dtype=np.int64)
        self.scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
        self.buffer: np.ndarray | None = None

    def add(self, start: int, unit: np.ndarray, valid: np.ndarray) -> None:
        """Rows start.. of the table as float32 unit rows, and which of them are valid (the others never
        count). Rows of the same table may come in any order, each once."""
        rows = unit.shape[0]
        if rows == 0 or len(self.queries) == 0:
            return
        if self.buffer is None or self.buffer.shape[1] < rows:
            self.buffer = np.empty((len(self.queries), rows), dtype=np.float32)
        scores = self.buffer[:, :rows]
        np.matmul(self.queries, unit.T, out=scores)
        if not valid.all():
            scores[:, ~valid] = -np.inf
        low, high = np.searchsorted(self.left_rows, (start, start + rows))
        scores[self.left_lines[low:high], self.left_rows[low:high] - start] = -np.inf
        ids, vals = select_top(scores, min(self.k, rows), self.threads)
        self.merge(ids + start, vals)

    def merge(self, ids: np.ndarray, scores: np.ndarray) -> None:
        self.ids, self.scores = merge_top(self.ids, self.scores, ids, scores)

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """(int64 (Q, k) row ids, float32 (Q, k) cosines) best first; id -1 and score -inf past the last row
        that could be returned."""
        missing = self.scores == -np.inf
        return np.where(missing, -1, self.ids), self.scores


def merge_top(ids: np.ndarray, scores: np.ndarray, more_ids: np.ndarray,
              more_scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The best ids.shape[1] of two sets of candidates per row, by (score desc, id asc): exact when each set
    holds its own part's top of the row."""
    best_ids, best_scores, _, _ = finalise(np.concatenate([ids, more_ids], axis=1),
                                           np.concatenate([scores, more_scores], axis=1), ids.shape[1], True)
    return np.ascontiguousarray(best_ids), np.ascontiguousarray(best_scores)
