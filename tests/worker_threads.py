"""One thread per pool in each pytest-xdist worker: imported by conftest.py first, before numpy or torch load
(they read these settings once, when they load).

`-n auto` starts one worker per core. Each worker's OpenBLAS (numpy) and OpenMP (torch) pools would start a thread
per core as well, and their idle threads spin waiting for work while the other worker needs the core: on 2 cores,
a fifth of the suite's CPU went to that. A value the tester has set is kept; a run without workers (-n 0) keeps
the libraries' defaults."""

from __future__ import annotations

import os

if os.environ.get("PYTEST_XDIST_WORKER"):  # xdist sets it before the worker loads any conftest
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(name, "1")
