"""Device choice and the batched kernels: rows read block by block, cosines, and one top-k.

Numpy in, numpy out. Only numpy is imported at module level; torch is imported lazily, and only when a
torch device (cuda, mps) or a torch-only precision is chosen.

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

from ..registry import lazy_attributes

# public name -> the module that defines it; each is imported when first used, so that the command line
# can read DEVICES without loading numpy
_API = {
    "RandomPairs": "cosines", "cosine_blocks": "cosines", "cosines_to": "cosines", "pair_cosines": "cosines",
    "random_pairs": "cosines",
    "DEVICES": "devices", "PRECISIONS": "devices", "resolve_device": "devices", "resolve_precision": "devices", "precision_run": "devices",
    "precision_label": "devices",
    "TableChecksum": "rows", "mean_row": "rows", "row_blocks": "rows", "row_norms": "rows", "unit_rows": "rows",
    "TopK": "topk", "topk_rows": "topk", "topk_vectors": "topk", "topk_stream": "topk", "topk_scores": "topk",
    "StreamedTopK": "streamed",
}
__all__ = sorted(_API)  # noqa: PLE0605  the names of the table above, kept in one place


__getattr__ = lazy_attributes(__name__, _API, globals())


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
