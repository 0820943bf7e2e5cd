"""Device choice and the batched kernels: unit rows, pair cosines, all-rows top-k.

Numpy in, numpy out. Only numpy is imported here at module level; torch is imported
lazily, and only when a torch device (cuda, mps) or a torch-only precision is chosen.

Conventions shared by every function:
- A row is *invalid* when its L2 norm is zero or not finite (it holds NaN or Inf).
  Invalid rows get an all-zero unit vector (never NaN), never appear as neighbours,
  and any cosine involving them is NaN, which callers turn into null plus a reason.
- Cosines are clipped to [-1, 1] (fp32 rounding can give 1.0000001 for a row and itself).
- Ties in top-k are broken by the lower row id first, on every device.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import sys
from dataclasses import dataclass
from typing import Callable

import numpy as np

from embscope.errors import EmbscopeError
from embscope.memory import available_memory

DEVICES = ("auto", "cpu", "cuda", "mps")
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "auto")

# Rows per block when reading a table once (norms, unit rows): ~16 MB of float64 work space.
_READ_BLOCK_BYTES = 16 << 20
# The block-score matrix of topk_all aims at this size: big enough for BLAS, small enough for caches.
_SCORE_BLOCK_BYTES = 128 << 20
# Low precision keeps this many candidates beyond k before the exact fp32 re-rank.
_RERANK_EXTRA_MIN = 32


@dataclass
class TopK:
    """Nearest neighbours of each query row, best first.

    ids: int64 (Q, k) row ids, -1 where there is no neighbour (invalid query, or fewer
    than k valid rows to choose from); scores: float32 (Q, k) cosines, NaN where id is -1;
    query_ids: int64 (Q,) the row each line of ids/scores belongs to.
    """

    ids: np.ndarray
    scores: np.ndarray
    query_ids: np.ndarray


# ---------------------------------------------------------------- devices


def _torch():
    try:
        import torch
    except ImportError:
        raise EmbscopeError("this device or precision needs torch, which is not installed "
                            "(pip install torch)") from None
    return torch


def _gpu_evidence() -> bool:
    # Rule for "auto": importing torch costs ~1.5 s, so it is imported only when torch is
    # installed AND the machine shows a GPU cheaply (NVIDIA/ROCm/WSL device nodes on Linux,
    # any macOS arm64 for MPS); CUDA_VISIBLE_DEVICES="" or "-1" counts as no GPU.
    if sys.platform == "darwin":
        return os.uname().machine == "arm64"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    return bool(glob.glob("/dev/nvidia[0-9]*") or os.path.exists("/dev/kfd")
                or os.path.exists("/dev/dxg"))


def _mps_available(torch) -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def resolve_device(device: str = "auto") -> str:
    """Turn "auto" | "cpu" | "cuda" | "mps" into the device the kernels will use.

    "auto" gives "cuda" when torch sees a CUDA GPU, else "mps" when available, else "cpu".
    Asking for "cuda" or "mps" without one raises EmbscopeError.
    """
    if device not in DEVICES:
        raise EmbscopeError(f"device must be one of {', '.join(DEVICES)}; got {device!r}")
    if device == "cpu":
        return "cpu"
    if device == "auto":
        torch_loaded = "torch" in sys.modules
        if not torch_loaded and (importlib.util.find_spec("torch") is None or not _gpu_evidence()):
            return "cpu"
        torch = _torch()
        if torch.cuda.is_available():
            return "cuda"
        return "mps" if _mps_available(torch) else "cpu"
    torch = _torch()
    if device == "cuda" and not torch.cuda.is_available():
        raise EmbscopeError("device cuda was asked for, but torch sees no CUDA GPU on this machine")
    if device == "mps" and not _mps_available(torch):
        raise EmbscopeError("device mps was asked for, but torch reports MPS as unavailable")
    return device


def _available_memory() -> int:
    """Bytes of RAM free for new work; a cautious guess when the OS will not say."""
    free = available_memory()
    return free if free is not None else 2 << 30


# ---------------------------------------------------------------- rows


def _as_table(table) -> np.ndarray:
    if not isinstance(table, np.ndarray):
        table = np.asarray(table)
    if table.ndim != 2:
        raise EmbscopeError(f"expected a 2-D table (rows, dim); found shape {tuple(table.shape)}")
    if not np.issubdtype(table.dtype, np.floating):
        raise EmbscopeError(f"expected a floating-point table; found dtype {table.dtype}")
    return table


def _row_blocks(table: np.ndarray, center: np.ndarray | None = None):
    """(start, float64 copy of rows, less `center`) blocks, so a memmap is read once in bounded memory."""
    rows = max(1, _READ_BLOCK_BYTES // (8 * max(1, table.shape[1])))
    for start in range(0, table.shape[0], rows):
        block = np.array(table[start:start + rows], dtype=np.float64)
        if center is not None:
            block -= center
        yield start, block


def mean_row(table) -> np.ndarray:
    """The mean of the table's finite rows, float64 (zeros when there are none), read block by block."""
    table = _as_table(table)
    total, count = np.zeros(table.shape[1], dtype=np.float64), 0
    for _, block in _row_blocks(table):
        finite = np.isfinite(block).all(axis=1)
        total += block[finite].sum(axis=0)
        count += int(finite.sum())
    return total / count if count else total


def _normalise(block: np.ndarray):
    """float64 block -> (unit float64 with zero rows where invalid, norms, valid)."""
    with np.errstate(over="ignore", invalid="ignore"):
        norms = np.sqrt(np.einsum("ij,ij->i", block, block))
    valid = np.isfinite(norms) & (norms > 0)
    unit = np.zeros_like(block)
    np.divide(block, norms[:, None], out=unit, where=valid[:, None])
    return unit, norms, valid


def unit_rows(table):
    """Normalise every row once: (unit float32 (V, d), norms float64 (V,), valid bool (V,)).

    Invalid rows (zero norm, NaN or Inf) have an all-zero unit row and valid False;
    their norm is what the data gives (0, NaN or Inf).
    """
    table = _as_table(table)
    n_rows, dim = table.shape
    unit = np.empty((n_rows, dim), dtype=np.float32)
    norms = np.empty(n_rows, dtype=np.float64)
    valid = np.empty(n_rows, dtype=bool)
    for start, block in _row_blocks(table):
        stop = start + block.shape[0]
        unit[start:stop], norms[start:stop], valid[start:stop] = _normalise(block)
    return unit, norms, valid


def _row_validity(table: np.ndarray, center: np.ndarray | None = None) -> np.ndarray:
    valid = np.empty(table.shape[0], dtype=bool)
    for start, block in _row_blocks(table, center):
        valid[start:start + block.shape[0]] = _normalise(block)[2]
    return valid


def _check_ids(ids: np.ndarray, n_rows: int, what: str) -> np.ndarray:
    ids = np.asarray(ids)
    if ids.size and not np.issubdtype(ids.dtype, np.integer):
        raise EmbscopeError(f"{what} must be integer row ids; found dtype {ids.dtype}")
    ids = ids.astype(np.int64, copy=False)
    if ids.size and (ids.min() < 0 or ids.max() >= n_rows):
        bad = ids[(ids < 0) | (ids >= n_rows)][0]
        raise EmbscopeError(f"{what} must lie in 0..{n_rows - 1}; found {bad}")
    return ids


# ---------------------------------------------------------------- cosines


def pair_cosines(table, pairs, *, center: np.ndarray | None = None) -> np.ndarray:
    """Cosine of each (i, j) pair of rows, float64 (n,); NaN where either row is invalid.

    center, when given, is subtracted from both rows first (e.g. the table mean).
    Only the rows named in pairs are read.
    """
    table = _as_table(table)
    pairs = np.asarray(pairs)
    if pairs.ndim != 2 or pairs.shape[1] != 2:
        raise EmbscopeError(f"expected pairs of shape (n, 2); found shape {tuple(pairs.shape)}")
    pairs = _check_ids(pairs, table.shape[0], "pair row ids")
    if pairs.shape[0] == 0:
        return np.empty(0, dtype=np.float64)
    needed, where = np.unique(pairs, return_inverse=True)
    rows = np.asarray(table[needed], dtype=np.float64)
    if center is not None:
        center = np.asarray(center, dtype=np.float64)
        if center.shape != (table.shape[1],):
            raise EmbscopeError(f"expected a center of shape ({table.shape[1]},); "
                                f"found shape {tuple(center.shape)}")
        rows -= center
    unit, _, valid = _normalise(rows)
    where = where.reshape(pairs.shape)
    cos = np.einsum("ij,ij->i", unit[where[:, 0]], unit[where[:, 1]])
    np.clip(cos, -1.0, 1.0, out=cos)
    cos[~(valid[where[:, 0]] & valid[where[:, 1]])] = np.nan
    return cos


def cosine_matrix(table, rows: np.ndarray | None = None) -> np.ndarray:
    """Full cosine matrix float32 (T, T) of the given rows (all rows by default).

    Meant for small tables such as position tables (T up to ~8192: 256 MB out).
    Rows and columns of invalid rows are NaN; the diagonal of a valid row is exactly 1.
    """
    table = _as_table(table)
    if rows is not None:
        rows = _check_ids(np.asarray(rows).reshape(-1), table.shape[0], "rows")
        table = np.asarray(table[rows])
    unit, _, valid = unit_rows(table)
    n = unit.shape[0]
    out = np.empty((n, n), dtype=np.float32)
    block = max(1, _SCORE_BLOCK_BYTES // (4 * max(1, n)))
    for start in range(0, n, block):
        np.matmul(unit[start:start + block], unit.T, out=out[start:start + block])
    np.clip(out, -1.0, 1.0, out=out)
    out[~valid, :] = np.nan
    out[:, ~valid] = np.nan
    diagonal = np.flatnonzero(valid)
    out[diagonal, diagonal] = 1.0
    return out


def mean_random_cosine(table, center: np.ndarray | None = None) -> float:
    """Exact mean cosine over all ordered pairs of distinct valid rows (less `center` when given).

    From the sum s of unit rows: (||s||^2 - sum ||u_i||^2) / (n (n - 1)); NaN if n < 2.
    """
    table = _as_table(table)
    total = np.zeros(table.shape[1], dtype=np.float64)
    squares = 0.0
    count = 0
    for _, block in _row_blocks(table, center):
        unit, _, valid = _normalise(block)
        total += unit.sum(axis=0)
        squares += float(np.einsum("ij,ij->", unit, unit))
        count += int(valid.sum())
    if count < 2:
        return float("nan")
    return float((total @ total - squares) / (count * (count - 1)))


def random_pair_cosines(table, n_pairs: int = 10000, seed: int = 0, center: np.ndarray | None = None) -> np.ndarray:
    """Cosines of n_pairs random pairs of distinct valid rows (less `center` when given), drawn with a fixed seed.

    For percentiles of the background similarity; empty when fewer than 2 rows are valid.
    """
    table = _as_table(table)
    valid_ids = np.flatnonzero(_row_validity(table, center))
    n = valid_ids.size
    if n < 2 or n_pairs <= 0:
        return np.empty(0, dtype=np.float64)
    rng = np.random.default_rng(seed)
    first = rng.integers(0, n, size=n_pairs)
    # Draw the second from the n-1 others and skip over the first: distinct, still uniform.
    second = rng.integers(0, n - 1, size=n_pairs)
    second += second >= first
    pairs = np.stack([valid_ids[first], valid_ids[second]], axis=1)
    return pair_cosines(table, pairs, center=center)


# ---------------------------------------------------------------- top-k selection


def _clip_cosines(scores: np.ndarray) -> np.ndarray:
    """Clip to [-1, 1] in place, but keep -inf: it marks an excluded column (the query itself)."""
    np.minimum(scores, 1.0, out=scores)
    np.maximum(scores, -1.0, out=scores, where=scores > -np.inf)
    return scores


def _finalise(cand_ids, cand_scores, count, complete, carried=None):
    """Order candidates by (score desc, id asc) and keep count of them.

    Candidates must hold the top-m columns by score (ties cut arbitrarily). Returns
    (ids, scores, unsure): unsure rows may have lost a tied neighbour to the cut and
    must be redone on the full row; never unsure when the candidates are complete.
    With carried (same shape as the candidates), its kept entries come fourth.
    """
    _clip_cosines(cand_scores)
    order = np.lexsort((cand_ids, -cand_scores), axis=-1)
    ids = np.take_along_axis(cand_ids, order, axis=1)
    scores = np.take_along_axis(cand_scores, order, axis=1)
    if complete or count == 0:
        unsure = np.zeros(ids.shape[0], dtype=bool)
    else:
        unsure = scores[:, -1] == scores[:, count - 1]
    if carried is None:
        return ids[:, :count], scores[:, :count], unsure
    return ids[:, :count], scores[:, :count], unsure, np.take_along_axis(carried, order[:, :count], 1)


def _exact_row(row_scores: np.ndarray, count: int):
    """Top count of one full row with ties by id; the slow path for tie-heavy rows."""
    row = _clip_cosines(np.array(row_scores, dtype=np.float32))
    threshold = np.partition(row, row.size - count)[row.size - count]
    cand = np.flatnonzero(row >= threshold)
    order = np.lexsort((cand, -row[cand]))[:count]
    return cand[order], row[cand[order]]


def _select_numpy(scores: np.ndarray, count: int):
    """Top count columns per row of a float32 block (count < columns), ties by id.

    Wide rows use group maxima: column c belongs to group c % G; the count best groups
    hold every column above the count-th best group maximum, so only their R = V // G
    columns (plus the tail past R * G) need a partial sort. This reads the block about
    twice instead of argpartition's many passes. Returns (ids, scores, unsure).
    """
    n_rows, width = scores.shape
    groups = 1 << int(np.log2(max(1.0, np.sqrt(width * (count + 1)))))
    per_group = width // groups
    if groups < 2 * (count + 1) or per_group < 4:
        part = np.argpartition(-scores, count, axis=1)[:, :count + 1]
        return _finalise(part, np.take_along_axis(scores, part, axis=1), count, False)
    body = np.lib.stride_tricks.as_strided(
        scores, shape=(n_rows, per_group, groups),
        strides=(scores.strides[0], groups * scores.strides[1], scores.strides[1]),
        writeable=False)
    group_max = body.max(axis=1)
    best_groups = np.argpartition(-group_max, count - 1, axis=1)[:, :count]
    threshold = np.take_along_axis(group_max, best_groups, axis=1).min(axis=1)
    # More groups reaching the threshold than were kept: a tie may sit outside; redo the row.
    tied_groups = (group_max >= threshold[:, None]).sum(axis=1) > count
    offsets = np.arange(per_group, dtype=np.int64) * groups
    cand = (best_groups[:, :, None] + offsets[None, None, :]).reshape(n_rows, -1)
    tail = np.arange(per_group * groups, width, dtype=np.int64)
    if tail.size:
        cand = np.concatenate([cand, np.broadcast_to(tail, (n_rows, tail.size))], axis=1)
    cand_scores = np.take_along_axis(scores, cand, axis=1)
    part = np.argpartition(-cand_scores, count, axis=1)[:, :count + 1]
    ids, vals, unsure = _finalise(np.take_along_axis(cand, part, axis=1),
                                  np.take_along_axis(cand_scores, part, axis=1), count, False)
    return ids, vals, unsure | tied_groups


# ---------------------------------------------------------------- top-k drivers


def _cpu_block_budget(n_rows: int, dim: int) -> int:
    """Bytes for one block of scores on the CPU: _SCORE_BLOCK_BYTES, but no more than twice
    the unit table (a small table gains nothing from a huge block) nor 1/8 of free RAM."""
    table_bytes = 4 * n_rows * dim
    return int(min(_SCORE_BLOCK_BYTES, max(16 << 20, 2 * table_bytes), _available_memory() // 8))


def _query_block_rows(n_columns: int, block_rows, budget_bytes: int) -> int:
    if block_rows is not None:
        if int(block_rows) < 1:
            raise EmbscopeError(f"block_rows must be at least 1; got {block_rows}")
        return int(block_rows)
    return max(1, budget_bytes // (4 * max(1, n_columns)))


def _topk_numpy(base, qpos, count, exclude_self, block, emit):
    """fp32 on the CPU with numpy: measured faster here than torch-cpu for this matmul."""
    n_valid = base.shape[0]
    buffer = np.empty((min(block, qpos.size), n_valid), dtype=np.float32)
    for start in range(0, qpos.size, block):
        pos = qpos[start:start + block]
        scores = buffer[:pos.size]
        np.matmul(base[pos], base.T, out=scores)
        if exclude_self:
            scores[np.arange(pos.size), pos] = -np.inf
        if count + 1 >= n_valid:
            cand = np.broadcast_to(np.arange(n_valid, dtype=np.int64), scores.shape).copy()
            ids, vals, unsure = _finalise(cand, scores.copy(), count, True)
        else:
            # Row chunks keep the selection's index temporaries small beside the block.
            parts = [_select_numpy(scores[i:i + 1024], count) for i in range(0, pos.size, 1024)]
            ids, vals, unsure = (np.concatenate(p) for p in zip(*parts))
        for row in np.flatnonzero(unsure):
            ids[row], vals[row] = _exact_row(scores[row], count)
        emit(start, ids, vals)


def _topk_cpu_bf16(base, qpos, count, exclude_self, block, emit):
    """bf16 on the CPU: torch for the bf16 matmul only (about 3x numpy's fp32 on CPUs with
    avx512_bf16 or AMX), numpy for selection and the exact fp32 re-rank (faster than torch's
    small sorts on the CPU)."""
    torch = _torch()
    n_valid = base.shape[0]
    keep = min(n_valid, count + max(count, _RERANK_EXTRA_MIN))
    low = torch.from_numpy(base).to(torch.bfloat16)
    for start in range(0, qpos.size, block):
        pos = qpos[start:start + block]
        with torch.inference_mode():
            scores = (low[torch.from_numpy(pos)] @ low.T).float().numpy()
        if exclude_self:
            scores[np.arange(pos.size), pos] = -np.inf
        if keep == n_valid:
            cand = np.broadcast_to(np.arange(n_valid, dtype=np.int64), scores.shape).copy()
        else:
            cand = np.concatenate([_select_numpy(scores[i:i + 1024], keep)[0]
                                   for i in range(0, pos.size, 1024)])
        first = np.take_along_axis(scores, cand, axis=1)
        exact = np.concatenate([  # 256 rows at a time: a bounded gather
            np.einsum("bd,bkd->bk", base[pos[i:i + 256]], base[cand[i:i + 256]])
            for i in range(0, pos.size, 256)])
        if exclude_self:
            exact[cand == pos[:, None]] = -np.inf
        ids, vals, _, first_kept = _finalise(cand, exact, count, True, carried=first)
        # As on torch devices: a kept row level with the first-pass cut may have twins outside.
        unsure = ((first_kept <= first.min(axis=1, keepdims=True)).any(axis=1)
                  if keep < n_valid else np.zeros(pos.size, dtype=bool))
        for row in np.flatnonzero(unsure):
            row_scores = base @ base[pos[row]]
            if exclude_self:
                row_scores[pos[row]] = -np.inf
            ids[row], vals[row] = _exact_row(row_scores, count)
        emit(start, ids, vals)


def _finalise_torch(torch, cand_ids, cand_scores, count, complete, carried):
    """_finalise on the device: two stable sorts give (score desc, id asc) without a host trip.

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


def _compact_unit_rows(table: np.ndarray):
    """Unit rows of the valid rows only, packed to the front: (base float32 view, valid)."""
    unit, _, valid = unit_rows(table)
    valid_ids = np.flatnonzero(valid)
    # In place (a source never lies behind its target), so no second table-sized copy is made;
    # invalid rows are gone, so they cannot be neighbours.
    for start in range(0, valid_ids.size, 1 << 16):
        chunk = valid_ids[start:start + (1 << 16)]
        unit[start:start + chunk.size] = unit[chunk]
    return unit[:valid_ids.size], valid


def _compact_unit_rows_torch(torch, table: np.ndarray, dev):
    """_compact_unit_rows with the work on the device: raw float32 blocks move once.

    Normalises in float64 like the numpy path (on the cpu too, so the CPU tests run this
    code); MPS has no float64, so there the numpy path normalises.
    """
    if dev.type == "mps":
        base, valid = _compact_unit_rows(table)
        return torch.from_numpy(base).to(dev), valid
    n_rows, dim = table.shape
    base = torch.empty((n_rows, dim), dtype=torch.float32, device=dev)
    valid = np.empty(n_rows, dtype=bool)
    rows = max(1, (64 << 20) // (4 * max(1, dim)))
    filled = 0
    for start in range(0, n_rows, rows):
        block = torch.from_numpy(np.ascontiguousarray(table[start:start + rows], dtype=np.float32))
        block = block.to(dev).double()
        norms = block.square().sum(dim=1).sqrt()
        ok = torch.isfinite(norms) & (norms > 0)
        unit = (block[ok] / norms[ok, None]).float()
        base[filled:filled + unit.shape[0]] = unit
        filled += unit.shape[0]
        valid[start:start + block.shape[0]] = ok.cpu().numpy()
    return base[:filled], valid


def _to_host(torch, tensors):
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


def _topk_torch(exact, qpos, count, exclude_self, block, emit, precision):
    """Any torch device: the normalised table sits on the device once; top-k and ordering
    stay there too, and only (block, k) results come back, one block behind the device."""
    torch = _torch()
    dev = exact.device
    low_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    low = exact.to(low_dtype) if low_dtype is not None else exact
    approximate = precision != "fp32"
    n_valid = exact.shape[0]
    keep = min(n_valid, count + (max(count, _RERANK_EXTRA_MIN) if approximate else 1))
    complete = keep == n_valid

    def finish(start, host, event, scores, queries, pos):
        if event is not None:
            event.synchronize()
        ids, vals, unsure = (t.numpy() for t in host)
        ids = ids.astype(np.int64)
        for row in np.flatnonzero(unsure):
            if approximate:
                row_scores = exact @ queries[row]
                if exclude_self:
                    row_scores[pos[row]] = -torch.inf
            else:
                row_scores = scores[row]
            ids[row], vals[row] = _exact_row(row_scores.float().cpu().numpy(), count)
        emit(start, ids, vals)

    tf32_before = torch.backends.cuda.matmul.allow_tf32
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    try:
        with torch.inference_mode():
            pending = None
            for start in range(0, qpos.size, block):
                pos = torch.from_numpy(qpos[start:start + block]).to(dev)
                queries = exact[pos]
                scores = (queries.to(low.dtype) if approximate else queries) @ low.T
                if exclude_self:
                    scores[torch.arange(pos.numel(), device=dev), pos] = -torch.inf
                top_scores, top_ids = torch.topk(scores, keep, dim=1)
                first_scores = top_scores
                if approximate:
                    # Re-rank the candidates with exact fp32 cosines: exact except near-ties at the cut.
                    # Multiply-and-sum, not a matmul, so TF32 can never touch it; 256 rows at a time.
                    top_scores = torch.cat([
                        (exact[top_ids[i:i + 256]] * queries[i:i + 256, None, :]).sum(dim=2)
                        for i in range(0, pos.numel(), 256)])
                    if exclude_self:
                        top_scores[top_ids == pos[:, None]] = -torch.inf
                ids, vals, unsure, first_kept = _finalise_torch(
                    torch, top_ids, top_scores.float(), count, complete or approximate, first_scores)
                if approximate and not complete:
                    # A kept row whose first-pass score equals the cut may have tied twins
                    # left outside (duplicate rows): redo those queries exactly.
                    unsure = (first_kept <= first_scores[:, -1:]).any(dim=1)
                host, event = _to_host(torch, [ids, vals, unsure])
                if pending is not None:
                    finish(*pending)  # the device is busy with this block meanwhile
                pending = (start, host, event, scores, queries, pos)
            if pending is not None:
                finish(*pending)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32_before


def resolve_precision(precision: str, device: str) -> str:
    """Turn "auto" into a precision for the device; any other value passes through.

    On a GPU, "auto" is low-precision candidates with an exact fp32 re-rank: bf16 where
    the GPU supports it, else fp16. On the CPU it is fp32: on a 2-core AVX512-BF16 CPU without AMX,
    bf16 candidates + re-rank measured level with fp32 end to end (the bf16 matmul is 2-3x
    faster, but converting and selecting among more candidates eats the gain).
    """
    if precision != "auto":
        return precision
    if device == "cpu":
        return "fp32"
    if device == "cuda":
        return "bf16" if _torch().cuda.is_bf16_supported() else "fp16"
    return "fp16"


def _torch_block_budget(device: str) -> int:
    if device == "cuda":
        import torch
        free, _ = torch.cuda.mem_get_info()
        return int(min(1 << 30, free // 8))
    return int(min(_SCORE_BLOCK_BYTES, _available_memory() // 8))


def topk_all(table, k: int, *, queries: np.ndarray | None = None, exclude_self: bool = True,
             device: str = "auto", precision: str = "fp32", block_rows: int | None = None,
             progress: Callable[[int, int], None] | None = None,
             backend: str | None = None) -> TopK:
    """The k most cosine-similar valid rows for each query row, in blocks of queries.

    queries: row ids to search for (None = every row). The table is normalised once and
    each block of queries is multiplied against the whole table; only the block's top-k
    is kept, so the Q x V score matrix never exists. When fewer than k valid rows are
    available (excluding the query itself when exclude_self) the rest is padded with
    id -1 and score NaN; an invalid query gets all -1 / NaN.

    precision: "fp32" exact; "tf32" (cuda), "bf16" (cuda, mps, or cpu via torch) and
    "fp16" (cuda, mps) pick k + max(k, 32) candidates in low precision and re-rank them
    with exact fp32 cosines (exact but for near-ties at the cut; rows tied exactly at the
    cut are redone in fp32); "auto" is resolve_precision's choice for the device.
    progress(done_rows, total_rows) is called after each block.
    backend: None picks numpy for fp32 on the cpu and torch otherwise; "torch" forces the
    torch code path (so the GPU path can be checked on a CPU); "numpy" needs cpu + fp32.
    """
    table = _as_table(table)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise EmbscopeError(f"k must be a positive integer; got {k!r}")
    if precision not in PRECISIONS:
        raise EmbscopeError(f"precision must be one of {', '.join(PRECISIONS)}; got {precision!r}")
    k = int(k)
    n_rows = table.shape[0]
    query_ids = (np.arange(n_rows, dtype=np.int64) if queries is None
                 else _check_ids(np.asarray(queries).reshape(-1), n_rows, "query row ids"))
    device = resolve_device(device)
    precision = resolve_precision(precision, device)
    if backend not in (None, "numpy", "torch"):
        raise EmbscopeError(f"backend must be numpy or torch; got {backend!r}")
    # With backend="torch" the CPU runs every GPU precision path as is, to check it.
    if device == "cpu" and precision == "fp16" and backend != "torch":
        raise EmbscopeError("precision fp16 needs a GPU (cuda or mps); use fp32 or bf16 on cpu")
    if device == "cpu" and precision == "tf32" and backend != "torch":
        precision = "fp32"  # tf32 is a tensor-core mode; the CPU computes fp32 anyway
    # numpy's BLAS beat torch-cpu for fp32 here (181 vs 138 GFLOP/s on 2 cores), so the CPU
    # uses numpy unless asked for torch; bf16 on the CPU borrows only torch's bf16 matmul.
    if device != "cpu" or backend == "torch":
        engine = "torch"
    else:
        engine = "numpy" if precision == "fp32" else "cpu-bf16"
    if backend == "numpy" and engine != "numpy":
        raise EmbscopeError(f"the numpy backend runs fp32 on the cpu only; "
                            f"got device {device} and precision {precision}")
    if engine == "torch":
        torch = _torch()
        base, valid = _compact_unit_rows_torch(torch, table, torch.device(device))
    else:
        base, valid = _compact_unit_rows(table)
    valid_ids = np.flatnonzero(valid)
    position = np.cumsum(valid, dtype=np.int64) - 1  # row id -> index in base

    n_queries = query_ids.size
    out_ids = np.full((n_queries, k), -1, dtype=np.int64)
    out_scores = np.full((n_queries, k), np.nan, dtype=np.float32)
    query_valid = valid[query_ids]
    valid_lines = np.flatnonzero(query_valid)
    qpos = position[query_ids[valid_lines]]
    count = min(k, valid_ids.size - (1 if exclude_self else 0))

    def emit(start, ids, vals):
        lines = valid_lines[start:start + ids.shape[0]]
        out_ids[lines, :count] = valid_ids[ids]
        out_scores[lines, :count] = vals
        if progress is not None:
            done = n_queries if start + ids.shape[0] >= qpos.size else int(lines[-1]) + 1
            progress(done, n_queries)

    if count <= 0 or qpos.size == 0:
        if progress is not None:
            progress(n_queries, n_queries)
        return TopK(out_ids, out_scores, query_ids)
    budget = (_torch_block_budget(device) if engine == "torch"
              else _cpu_block_budget(valid_ids.size, table.shape[1]))
    block = _query_block_rows(valid_ids.size, block_rows, budget)
    if engine == "torch":
        _topk_torch(base, qpos, count, exclude_self, block, emit, precision)
    elif engine == "cpu-bf16":
        _topk_cpu_bf16(base, qpos, count, exclude_self, block, emit)
    else:
        _topk_numpy(base, qpos, count, exclude_self, block, emit)
    return TopK(out_ids, out_scores, query_ids)
