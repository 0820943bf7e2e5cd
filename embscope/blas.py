"""Settings the BLAS library reads once, when numpy loads: applied when this module is imported, which
embscope/__init__.py does before anything else, so before numpy loads. A value the user has set is kept."""

from __future__ import annotations

import os

# After each call, OpenBLAS's idle workers spin for 2**OPENBLAS_THREAD_TIMEOUT cycles (default 2**28, about
# 0.1 s) before they sleep, holding a core that the top-k's selection, run between matmuls, then lacks; 2**4
# lets them sleep at once (neighbors --all on 2 cores: 80% -> 87% of the matmul floor).
SETTINGS = {"OPENBLAS_THREAD_TIMEOUT": "4"}


def settle() -> None:
    """Apply SETTINGS where the environment does not set them (it counts only before numpy is imported)."""
    for name, value in SETTINGS.items():
        os.environ.setdefault(name, value)


settle()  # on import: the package imports this module first, before numpy
