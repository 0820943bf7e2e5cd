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

Its names are typed re-exports stated in __init__.pyi, which lazy_loader reads to import each name's module on
first use (as the package face does): importing one module of compute (devices, to list the choices) does not import
the others and their engines.
"""

from __future__ import annotations

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
