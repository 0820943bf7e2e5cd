"""Any torch device (cuda, mps; the cpu for checking this path): the normalised table sits on the device
once; top-k and ordering stay there too, and only (block, k) results come back, one block behind the
device. fp32 is exact; bf16 is made exact by a proven error bound and an fp32 re-rank (bf16_exact), with the
symmetric half-matrix tiling for every row; tf32 and fp16 pick candidates in low precision and re-rank them in
fp32 (exact but for near-ties at the cut)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from . import bf16_bound, bf16_exact
from .devices import torch_block_bytes, torch_module
from .engine import RERANK_EXTRA_MIN, Emit, Prepared, Queries
from .rows import valid_unit_rows
from .select import exact_row

DEVICE_READ_BYTES = 64 << 20  # raw float32 rows moved to the device at a time
GATHER_ROWS = 256  # queries re-ranked at a time: a bounded gather of their candidates' rows


class TorchEngine:
    name = "torch"
    streams = False
    halves = ("bf16",)  # precisions search_every_row runs

    def supports(self, device: str, precision: str) -> bool:
        return True

    def block_bytes(self, device: str, n_columns: int, dim: int) -> int:
        return torch_block_bytes(device)

    def prepare(self, table: np.ndarray, device: str) -> Prepared:
        """Unit rows of the valid rows on the device, the work done there: raw float32 blocks move once.

        Normalises in float64 like the numpy engine (on the cpu too, so the CPU tests run this code);
        MPS has no float64, so there numpy normalises.
        """
        torch = torch_module()
        dev = torch.device(device)
        if dev.type == "mps":
            base, valid = valid_unit_rows(table)
            return Prepared(torch.from_numpy(base).to(dev), valid)
        n_rows, dim = table.shape
        unit = torch.empty((n_rows, dim), dtype=torch.float32, device=dev)
        valid = np.empty(n_rows, dtype=bool)
        rows = max(1, DEVICE_READ_BYTES // (4 * max(1, dim)))
        filled = 0
        for start in range(0, n_rows, rows):
            block = torch.from_numpy(np.ascontiguousarray(table[start:start + rows], dtype=np.float32))
            block = block.to(dev).double()
            norms = block.square().sum(dim=1).sqrt()
            ok = torch.isfinite(norms) & (norms > 0)
            kept = (block[ok] / norms[ok, None]).float()
            unit[filled:filled + kept.shape[0]] = kept
            filled += kept.shape[0]
            valid[start:start + block.shape[0]] = ok.cpu().numpy()
        return Prepared(unit[:filled], valid)

    def search_every_row(self, prepared: Prepared, count: int, emit: Emit, side: int | None = None) -> None:
        """Every row's exact top count from the upper triangle of the bf16 cosine matrix (bf16_exact), in
        square tiles of one score block."""
        torch = torch_module()
        exact = prepared.base
        n = exact.shape[0]
        if side is None:
            largest = max(1, int(np.sqrt(torch_block_bytes(exact.device.type) / 4)))
            side = -(-n // -(-n // largest))
        with torch.inference_mode(), fp32_sums(torch, exact.device):
            bf16_exact.search_every_row(torch, exact, exact.to(torch.bfloat16), count, max(1, min(n, side)), emit)

    def search(self, prepared: Prepared, queries: Queries, count: int, block: int, precision: str,
               emit: Emit) -> None:
        if precision == "bf16":
            self.search_bf16(prepared, queries, count, block, emit)
            return
        torch = torch_module()
        exact = prepared.base
        dev = exact.device
        low_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        low = exact.to(low_dtype) if low_dtype is not None else exact
        approximate = precision != "fp32"
        n_valid = exact.shape[0]
        keep = min(n_valid, count + (max(count, RERANK_EXTRA_MIN) if approximate else 1))
        complete = keep == n_valid

        def finish(start: int, host: list[Any], event: Any, scores: Any, vectors: Any,
                   lines: np.ndarray, columns: np.ndarray) -> None:
            if event is not None:
                event.synchronize()
            ids, vals, unsure = (t.numpy() for t in host)
            ids = ids.astype(np.int64)
            for row in np.flatnonzero(unsure):
                if approximate:
                    row_scores = exact @ vectors[row]
                    row_scores[torch.from_numpy(columns[lines == row]).to(dev)] = -torch.inf
                else:
                    row_scores = scores[row]
                ids[row], vals[row] = exact_row(row_scores.float().cpu().numpy(), count)
            emit(start, ids, vals)

        tf32_before = torch.backends.cuda.matmul.allow_tf32
        if dev.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        try:
            with torch.inference_mode():
                pending = None
                for start in range(0, queries.size, block):
                    stop = min(start + block, queries.size)
                    vectors = self.query_block(torch, exact, queries, start, stop)
                    lines, columns = queries.left_out(start, stop)
                    left_lines = torch.from_numpy(lines).to(dev)
                    left_columns = torch.from_numpy(columns).to(dev)
                    scores = (vectors.to(low.dtype) if approximate else vectors) @ low.T
                    scores[left_lines, left_columns] = -torch.inf
                    top_scores, top_ids = torch.topk(scores, keep, dim=1)
                    first_scores = top_scores
                    if approximate:
                        # Re-rank the candidates with exact fp32 cosines: exact except near-ties at the cut.
                        # Multiply-and-sum, not a matmul, so TF32 can never touch it.
                        top_scores = torch.cat([
                            (exact[top_ids[i:i + GATHER_ROWS]] * vectors[i:i + GATHER_ROWS, None, :]).sum(dim=2)
                            for i in range(0, stop - start, GATHER_ROWS)])
                        # Left-out columns among the candidates, as a mask: nonzero() would wait for the device.
                        hits = torch.zeros(top_ids.shape, dtype=torch.int32, device=dev)
                        hits.index_add_(0, left_lines, (top_ids[left_lines] == left_columns[:, None]).int())
                        top_scores.masked_fill_(hits > 0, -torch.inf)
                    ids, vals, unsure, first_kept = finalise_torch(
                        torch, top_ids, top_scores.float(), count, complete or approximate, first_scores)
                    if approximate and not complete:
                        # A kept row whose first-pass score equals the cut may have tied twins
                        # left outside (duplicate rows): redo those queries exactly.
                        unsure = (first_kept <= first_scores[:, -1:]).any(dim=1)
                    host, event = to_host(torch, [ids, vals, unsure])
                    if pending is not None:
                        finish(*pending)  # the device is busy with this block meanwhile
                    pending = (start, host, event, scores, vectors, lines, columns)
                if pending is not None:
                    finish(*pending)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = tf32_before

    def search_bf16(self, prepared: Prepared, queries: Queries, count: int, block: int, emit: Emit) -> None:
        """Blocks of queries through the exact bf16 path (bf16_exact)."""
        torch = torch_module()
        exact = prepared.base
        dev = exact.device
        low = exact.to(torch.bfloat16)
        table_terms = bf16_bound.rounding_terms(torch, exact, low)
        with torch.inference_mode(), fp32_sums(torch, dev):
            for start in range(0, queries.size, block):
                stop = min(start + block, queries.size)
                lines, columns = queries.left_out(start, stop)
                emit(start, *bf16_exact.search_queries(
                    torch, exact, low, table_terms, self.query_block(torch, exact, queries, start, stop), count,
                    torch.from_numpy(lines).to(dev), torch.from_numpy(columns).to(dev)))

    @staticmethod
    def query_block(torch: Any, exact: Any, queries: Queries, start: int, stop: int) -> Any:
        """The fp32 unit vectors of queries start..stop, on the device."""
        block = torch.from_numpy(queries.given[start:stop]).to(exact.device)
        return exact[block] if queries.are_rows else block

    def stream(self, table: np.ndarray, queries: np.ndarray, k: int,
               left_out: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError("the torch engine does not stream")


def finalise_torch(torch: Any, cand_ids: Any, cand_scores: Any, count: int, complete: bool,
                   carried: Any) -> tuple[Any, Any, Any, Any]:
    """select.finalise on the device: two stable sorts give (score desc, id asc) without a host trip.

    carried is reordered with the candidates and returned for the kept ones.
    """
    cand_scores = torch.where(cand_scores > -torch.inf, cand_scores.clamp(-1.0, 1.0), cand_scores)
    by_id = torch.argsort(cand_ids, dim=1)
    cand_ids, cand_scores, carried = (t.gather(1, by_id) for t in (cand_ids, cand_scores, carried))
    by_score = torch.sort(cand_scores, dim=1, descending=True, stable=True).indices
    ids, scores, carried = (t.gather(1, by_score) for t in (cand_ids, cand_scores, carried))
    if complete:
        unsure = torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)
    else:
        unsure = scores[:, -1] == scores[:, count - 1]
    return ids[:, :count], scores[:, :count], unsure, carried[:, :count]


def to_host(torch: Any, tensors: list[Any]) -> tuple[list[Any], Any]:
    """Start copying small result tensors to the host; returns (host tensors, event).

    On CUDA the copy goes to pinned memory without waiting, so the GPU can run the next
    block while the host handles this one; elsewhere the copy is simply made.
    """
    if tensors[0].device.type != "cuda":
        return [t.cpu() for t in tensors], None
    host = [torch.empty(t.shape, dtype=t.dtype, pin_memory=True) for t in tensors]
    for target, source in zip(host, tensors):
        target.copy_(source, non_blocking=True)
    event = torch.cuda.Event()
    event.record()
    return host, event


@contextmanager
def fp32_sums(torch: Any, dev: Any) -> Iterator[None]:
    """bf16 products summed in fp32, as bf16_exact's bound assumes: cuBLAS may otherwise reduce split sums in
    bf16 (allow_bf16_reduced_precision_reduction, on by default)."""
    if dev.type != "cuda":
        yield
        return
    matmul = torch.backends.cuda.matmul
    before = matmul.allow_bf16_reduced_precision_reduction
    matmul.allow_bf16_reduced_precision_reduction = False
    try:
        yield
    finally:
        matmul.allow_bf16_reduced_precision_reduction = before
