"""bf16 on the CPU, made exact (bf16_exact): torch multiplies in bf16 (about 3.5x fp32 on CPUs with
avx512_bf16 or AMX) and selects on blocks with topk; the candidates are re-ranked in fp32. The unit rows stay
numpy's, shared with torch without a copy."""

from __future__ import annotations

import numpy as np

from . import bf16_bound, bf16_exact
from .devices import cpu_block_bytes, torch_module
from .engine import Emit, HostEngine, Prepared, Queries


class CpuBf16Engine(HostEngine):
    name = "cpu-bf16"
    streams = False
    halves = ("bf16",)  # precisions search_every_row runs

    def supports(self, device: str, precision: str) -> bool:
        return device == "cpu" and precision == "bf16"

    def search(self, prepared: Prepared, queries: Queries, count: int, block: int, precision: str,
               emit: Emit) -> None:
        torch = torch_module()
        exact = torch.from_numpy(prepared.base)
        low = exact.to(torch.bfloat16)
        table_terms = bf16_bound.rounding_terms(torch, exact, low)
        with torch.inference_mode():
            for start in range(0, queries.size, block):
                stop = min(start + block, queries.size)
                vectors = torch.from_numpy(np.ascontiguousarray(queries.host_block(prepared.base, start, stop)))
                lines, columns = queries.left_out(start, stop)
                emit(start, *bf16_exact.search_queries(torch, exact, low, table_terms, vectors, count,
                                                        torch.from_numpy(lines), torch.from_numpy(columns)))

    def search_every_row(self, prepared: Prepared, count: int, emit: Emit, side: int | None = None) -> None:
        """Every row's top count from the upper triangle of the bf16 cosine matrix (bf16_exact), in square
        tiles within 7/8 of a score block, as the numpy engine tiles fp32 but of 2-byte scores (wider tiles: a line
        meets 5 instead of 7 at 32,768 rows, and its later cuts are higher, so 14% fewer scores pass them), their side
        a multiple of the places a coarse peak covers (no tile but the last has places read one by one)."""
        torch = torch_module()
        exact = torch.from_numpy(prepared.base)
        n = exact.shape[0]
        if side is None:
            largest = max(1, int(np.sqrt(cpu_block_bytes(n, exact.shape[1]) * 7 / 8 / 2)))
            even = -(-n // -(-n // largest))  # as few tiles a side as fit, of even sides
            step = bf16_exact.GROUP * bf16_exact.COARSE
            side = -(-even // step) * step
        with torch.inference_mode():
            bf16_exact.search_every_row(torch, exact, exact.to(torch.bfloat16), count, max(1, min(n, side)), emit)

    def stream(self, table: np.ndarray, queries: np.ndarray, k: int,
               left_out: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError("the cpu-bf16 engine does not stream")
