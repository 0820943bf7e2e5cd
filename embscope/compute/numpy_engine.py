"""fp32 on the CPU with numpy: measured faster here than torch-cpu for this matmul."""

from __future__ import annotations

import numpy as np

from .devices import cpu_threads
from .engine import Emit, HostEngine, Prepared, Queries
from .rows import unit_blocks
from .select import select_top
from .streamed import StreamedTopK

STREAM_BLOCK_BYTES = 32 << 20


class NumpyEngine(HostEngine):
    name = "numpy"
    streams = True

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

    def stream(self, table: np.ndarray, queries: np.ndarray, k: int,
               left_out: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        threads = cpu_threads()
        found = StreamedTopK(queries, k, left_out, threads)
        for start, unit, valid in unit_blocks(table, stream_rows(len(queries), table.shape[1]), threads):
            found.add(start, unit, valid)
        return found.result()


def stream_rows(n_queries: int, dim: int) -> int:
    """Table rows per streamed block: their unit rows, and the queries' scores against them, each within
    STREAM_BLOCK_BYTES (small enough to stay near the cache, large enough for BLAS)."""
    return max(1, STREAM_BLOCK_BYTES // (4 * max(1, n_queries, dim)))
