"""The median of a 1-D float array, to the bit np.median's, without importing numpy.ma: np.median imports it on
its first call (to check for masked arrays), a tenth of numpy's own start-up, which `norms` needs nowhere else."""

from __future__ import annotations

import math

import numpy as np


def median_of(values: np.ndarray, overwrite: bool = False) -> float:
    """np.median(values) of a 1-D float array: the middle value of a partition, or the mean of the middle two;
    NaN when any value is NaN or there is none. `overwrite` partitions `values` in place (np.median's
    overwrite_input)."""
    size = len(values)
    if not size:
        return math.nan
    half = size // 2
    middle = [half - 1, half] if size % 2 == 0 else [half]
    part = values if overwrite else values.copy()
    part.partition(middle + [-1])  # the largest last: NaN sorts there, as np.median checks
    if np.isnan(part[-1]):
        return math.nan
    return float(np.mean(part[half - 1:half + 1])) if size % 2 == 0 else float(part[half])
