"""Top-k of a few query vectors while the table goes past once, block by block: no normalised copy of the
table is made and the scores never exceed one block. Exact: each block's top k (ties to the lower column) is
merged with the best so far by (score desc, row id asc), which is the top k of the whole row.

Once every query holds k rows, a block's only candidates are its scores at or above the query's k-th best so far
(a row below it cannot enter): they are found with one comparison of the block and merged by the same order, so
the selection's work falls to that comparison (on random rows, about k ln(blocks) candidates a query in all)."""

from __future__ import annotations

import numpy as np

from .select import clip_cosines, finalise, select_top

# a block whose scores at or above the k-th best so far are more than this share of it (a table of many equal rows)
# goes through its own selection instead: the candidates' sort would cost more
MOST_ABOVE = 1 / 16

Found = tuple[np.ndarray, np.ndarray, np.ndarray]  # (query line, row id, clipped score) of each candidate


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
        self.buffer: np.ndarray | None = None  # a block's scores, flat: a block of fewer rows is contiguous too
        self.above: np.ndarray | None = None  # which of them reach their query's k-th best

    def add(self, start: int, unit: np.ndarray, valid: np.ndarray) -> None:
        """Rows start.. of the table as float32 unit rows, and which of them are valid (the others never
        count). Rows of the same table may come in any order, each once."""
        rows = unit.shape[0]
        if rows == 0 or len(self.queries) == 0:
            return
        if self.buffer is None or self.buffer.size < len(self.queries) * rows:
            self.buffer = np.empty(len(self.queries) * rows, dtype=np.float32)
            self.above = np.empty(self.buffer.size, dtype=bool)
        scores = self.scored(start, unit, valid, self.buffer[:len(self.queries) * rows].reshape(-1, rows))
        kth = self.scores[:, -1]
        if (kth > -1.0).all():  # every query holds k rows above -1 (a clipped -1 may hide a lower one)
            self.merge_found(self.above_kth(start, scores, kth))
            return
        ids, vals = select_top(scores, min(self.k, rows), self.threads)
        self.merge(ids + start, vals)

    def scored(self, start: int, unit: np.ndarray, valid: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """The queries' cosines to rows start.. into `scores`, -inf where a row never counts for a query."""
        np.matmul(self.queries, unit.T, out=scores)
        if not valid.all():
            scores[:, ~valid] = -np.inf
        low, high = np.searchsorted(self.left_rows, (start, start + unit.shape[0]))
        scores[self.left_lines[low:high], self.left_rows[low:high] - start] = -np.inf
        return scores

    def above_kth(self, start: int, scores: np.ndarray, kth: np.ndarray) -> Found:
        """(query line, row id, clipped score) of every score at or above its query's k-th best so far (a row
        below it cannot enter); when they are too many, the block's own top k of each query instead."""
        assert self.above is not None
        above = self.above[:scores.size]
        np.greater_equal(scores, kth[:, None], out=above.reshape(scores.shape))  # clipping keeps this order
        if np.count_nonzero(above) > scores.size * MOST_ABOVE:  # counted first: their ids would take 8 bytes each
            ids, vals = select_top(scores, min(self.k, scores.shape[1]), self.threads)
            return np.repeat(np.arange(len(scores)), ids.shape[1]), (ids + start).reshape(-1), vals.reshape(-1)
        where = np.flatnonzero(above)  # a flat search: many times faster than a 2-D one
        lines, columns = np.divmod(where, scores.shape[1])
        return lines, columns + start, clip_cosines(scores.reshape(-1)[where])

    def merge_found(self, found: Found) -> None:
        """Each query's k best of what it holds and what was found, by (score desc, row id asc): only the queries
        something was found for are sorted again."""
        lines, found_ids, found_scores = found
        if not lines.size:
            return
        touched = np.unique(lines)
        k = self.ids.shape[1]
        every = np.concatenate([np.repeat(np.arange(len(touched)), k), np.searchsorted(touched, lines)])
        ids = np.concatenate([self.ids[touched].reshape(-1), found_ids])
        scores = np.concatenate([self.scores[touched].reshape(-1), found_scores])
        order = np.lexsort((ids, -scores, every))
        counts = np.bincount(every, minlength=len(touched))
        kept = order[(np.cumsum(counts) - counts)[:, None] + np.arange(k)]  # each query holds k or more
        self.ids[touched], self.scores[touched] = ids[kept], scores[kept]

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
