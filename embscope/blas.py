"""Settings the BLAS and OpenMP libraries read once, when numpy (or torch) loads: applied when this module is
imported, which embscope/__init__.py does before anything else, so before either loads. A value the user has set
is kept."""

from __future__ import annotations

import os

# After each call, OpenBLAS's idle workers spin for 2**OPENBLAS_THREAD_TIMEOUT cycles (default 2**28, about
# 0.1 s) before they sleep, holding a core that the top-k's selection, run between matmuls, then lacks; 2**4
# lets them sleep at once (neighbors --all on 2 cores: 80% -> 87% of the matmul floor).
# torch's OpenMP workers (the bf16 search) likewise spin at each op's end by default; on a machine whose cores are
# shared, a worker then waits on one that is descheduled, op after op: neighbors --all bf16 at 16,384 x 512 on 2
# shared cores (load 2.8) ran 2.7-10 s, bimodal, against a steady 2.5-3.2 s with workers that sleep.
SETTINGS = {"OPENBLAS_THREAD_TIMEOUT": "4", "OMP_WAIT_POLICY": "PASSIVE"}


def settle() -> None:
    """Apply SETTINGS where the environment does not set them (it counts only before numpy is imported)."""
    for name, value in SETTINGS.items():
        os.environ.setdefault(name, value)


settle()  # on import: the package imports this module first, before numpy
