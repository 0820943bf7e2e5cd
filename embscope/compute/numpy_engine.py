"""fp32 on the CPU with numpy: measured faster here than torch-cpu for this matmul."""

from __future__ import annotations

import numpy as np

from .devices import cpu_block_bytes, cpu_threads, threads_for
from .engine import Emit, HostEngine, Prepared, Queries
from .rows import unit_blocks
from .select import column_top, select_top
from .streamed import StreamedTopK, merge_top

STREAM_BLOCK_BYTES = 32 << 20


class NumpyEngine(HostEngine):
    name = "numpy"
    streams = True
    halves = ("fp32",)  # precisions search_every_row runs

    def supports(self, device: str, precision: str) -> bool:
        return device == "cpu" and precision == "fp32"

    def search(self, prepared: Prepared, queries: Queries, count: int, block: int, precision: str,
               emit: Emit) -> None:
        base = prepared.base
        threads = cpu_threads()
        buffer = np.empty((min(block, queries.size), base.shape[0]), dtype=np.float32)
        for start in range(0, queries.size, block):
            stop = min(start + block, queries.size)
            scores = buffer[:stop - start]
            np.matmul(queries.host_block(base, start, stop), base.T, out=scores)
            lines, columns = queries.left_out(start, stop)
            scores[lines, columns] = -np.inf
            # a second selection thread gains only when OpenBLAS's idle worker is not spinning on the other core
            # just after np.matmul: the command line sets that (blas.py)
            emit(start, *select_top(scores, count, threads))

    def search_every_row(self, prepared: Prepared, count: int, emit: Emit, side: int | None = None) -> None:
        """Every row's top count, itself left out, from the upper triangle of the cosine matrix: each square
        tile of scores is worked out once and selected from for its rows and for its columns (the cosine of i
        and j is that of j and i), so half the products are made. Row blocks are emitted in order, each once the
        tiles of its row and of its column are done. side: the tiles' (default: within 7/8 of a score block)."""
        base = prepared.base
        n = base.shape[0]
        threads = cpu_threads()
        if side is None:  # tiles of equal size, each within 7/8 of a score block: the rest is the selection's room
            largest = max(1, int(np.sqrt(cpu_block_bytes(n, base.shape[1]) * 7 / 8 / 4)))
            side = -(-n // -(-n // largest))
        side = max(1, min(n, side))
        buffer = np.empty((side, side), dtype=np.float32)
        best_ids = np.full((n, count), -1, dtype=np.int64)
        best_scores = np.full((n, count), -np.inf, dtype=np.float32)

        def take(rows: slice, ids: np.ndarray, scores: np.ndarray) -> None:
            best_ids[rows], best_scores[rows] = merge_top(best_ids[rows], best_scores[rows], ids, scores)

        for first in range(0, n, side):
            rows = slice(first, min(first + side, n))
            for column in range(first, n, side):
                columns = slice(column, min(column + side, n))
                scores = buffer[:rows.stop - rows.start, :columns.stop - columns.start]
                np.matmul(base[rows], base[columns].T, out=scores)
                if column == first:
                    np.fill_diagonal(scores, -np.inf)  # the row itself
                ids, found = select_top(scores, min(count, scores.shape[1]), threads)
                take(rows, ids + column, found)
                if column != first:  # the tile's columns are rows too: their best among this tile's rows
                    ids, found = column_top(scores, min(count, scores.shape[0]), threads)
                    take(columns, ids + first, found)
            emit(first, best_ids[rows], best_scores[rows])

    def stream(self, table: np.ndarray, queries: np.ndarray, k: int,
               left_out: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        threads = threads_for(table.shape[0] * (table.shape[1] + len(queries)))  # the rows read, their scores
        found = StreamedTopK(queries, k, left_out, threads)
        for start, unit, valid in unit_blocks(table, stream_rows(len(queries), table.shape[1]), threads):
            found.add(start, unit, valid)
        return found.result()


def stream_rows(n_queries: int, dim: int) -> int:
    """Table rows per streamed block: their unit rows, and the queries' scores against them, each within
    STREAM_BLOCK_BYTES (small enough to stay near the cache, large enough for BLAS)."""
    return max(1, STREAM_BLOCK_BYTES // (4 * max(1, n_queries, dim)))

