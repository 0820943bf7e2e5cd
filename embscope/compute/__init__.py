"""Device choice and the batched kernels: rows read block by block, cosines, and one top-k.

Numpy in, numpy out. torch is imported only when a torch device (cuda, mps) or a torch-only precision is
chosen.

Conventions shared by every function:
- A row is *invalid* when its L2 norm is zero or not finite (it holds NaN or Inf).
  Invalid rows get an all-zero unit vector (never NaN), never appear as neighbours,
  and any cosine involving them is NaN, which callers turn into null plus a reason.
- Cosines are clipped to [-1, 1] (fp32 rounding can give 1.0000001 for a row and itself).
- Ties in top-k are broken by the lower row id first, on every device.

Modules: devices (where work runs), rows (norms, unit rows, the mean row, the blocked row reader),
cosines (pairs, the random-pair baseline, cosine blocks), topk (the one top-k entry point and the engine
table), and one module per engine: numpy_engine, bf16_engine (bf16 on the CPU), torch_engine.
"""

from __future__ import annotations

from .cosines import RandomPairs, cosine_blocks, cosines_to, pair_cosines, random_pairs
from .devices import DEVICES, PRECISIONS, precision_label, precision_run, resolve_device, resolve_precision
from .rows import TableChecksum, mean_row, raw_blocks, row_blocks, row_norms, unit_rows
from .streamed import StreamedTopK
from .topk import TopK, topk_rows, topk_scores, topk_stream, topk_vectors

__all__ = [
    "DEVICES",
    "PRECISIONS",
    "RandomPairs",
    "StreamedTopK",
    "TableChecksum",
    "TopK",
    "cosine_blocks",
    "cosines_to",
    "mean_row",
    "pair_cosines",
    "precision_label",
    "precision_run",
    "random_pairs",
    "raw_blocks",
    "resolve_device",
    "resolve_precision",
    "row_blocks",
    "row_norms",
    "topk_rows",
    "topk_scores",
    "topk_stream",
    "topk_vectors",
    "unit_rows",
]
