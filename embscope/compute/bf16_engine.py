"""bf16 on the CPU: torch for the bf16 matmul only (about 3x numpy's fp32 on CPUs with avx512_bf16 or AMX),
numpy for selection and the exact fp32 re-rank (faster than torch's small sorts on the CPU)."""

from __future__ import annotations

import numpy as np

from .devices import torch_module
from .engine import RERANK_EXTRA_MIN, Emit, HostEngine, Prepared, Queries
from .select import candidates, every_column, exact_row, finalise, group_buffer, mark_left_out, select_rows

GATHER_ROWS = 256  # queries re-ranked at a time: a bounded gather of their candidates' rows


class CpuBf16Engine(HostEngine):
    name = "cpu-bf16"
    streams = False

    def supports(self, device: str, precision: str) -> bool:
        return device == "cpu" and precision == "bf16"

    def search(self, prepared: Prepared, queries: Queries, count: int, block: int, precision: str,
               emit: Emit) -> None:
        torch = torch_module()
        base = prepared.base
        n_valid = base.shape[0]
        keep = min(n_valid, count + max(count, RERANK_EXTRA_MIN))
        low = torch.from_numpy(base).to(torch.bfloat16)
        for start in range(0, queries.size, block):
            stop = min(start + block, queries.size)
            vectors = queries.host_block(base, start, stop)
            with torch.inference_mode():
                scores = (torch.from_numpy(vectors).to(torch.bfloat16) @ low.T).float().numpy()
            lines, columns = queries.left_out(start, stop)
            scores[lines, columns] = -np.inf
            if keep == n_valid:
                cand = every_column(scores)
            else:
                maxima, chunk = group_buffer(n_valid, keep), select_rows(n_valid)
                cand = np.concatenate([candidates(scores[i:i + chunk], keep, maxima)[0]
                                       for i in range(0, stop - start, chunk)])
            first = np.take_along_axis(scores, cand, axis=1)
            exact = np.concatenate([np.einsum("bd,bkd->bk", vectors[i:i + GATHER_ROWS], base[cand[i:i + GATHER_ROWS]])
                                    for i in range(0, stop - start, GATHER_ROWS)])
            mark_left_out(exact, cand, lines, columns)
            ids, vals, _, order = finalise(cand, exact, count, True)
            first_kept = np.take_along_axis(first, order[:, :count], axis=1)
            # As on torch devices: a kept row level with the first-pass cut may have twins outside.
            unsure = ((first_kept <= first.min(axis=1, keepdims=True)).any(axis=1)
                      if keep < n_valid else np.zeros(stop - start, dtype=bool))
            for row in np.flatnonzero(unsure):
                row_scores = base @ vectors[row]
                row_scores[columns[lines == row]] = -np.inf
                ids[row], vals[row] = exact_row(row_scores, count)
            emit(start, ids, vals)

    def stream(self, table: np.ndarray, queries: np.ndarray, k: int,
               left_out: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError("the cpu-bf16 engine does not stream")
