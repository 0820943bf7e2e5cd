"""What the benchmark scripts share: the median time of a function over a few runs (one slow run on a busy
machine does not move it)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_time(fn: Callable[[], object], repeat: int = 5,
                clock: Callable[[], float] = time.perf_counter) -> float:
    """The median of `repeat` runs of `fn` on `clock` (time.process_time: CPU time, which a shared machine's
    neighbours move less than wall time)."""
    times = []
    for _ in range(repeat):
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times)
