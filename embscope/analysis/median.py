"""The median of a 1-D array of non-negative floats (norms, deviations), to the bit np.median's, in a fifth of its
time on a large array: np.median partitions around three places at once (the middle two and the last, for NaN),
which numpy does with its generic selection (3.9 ms for 400,000 float64 here), while a partition around one place
takes numpy's vectorised one (0.6 ms); the middle value below it is then the largest of the lower half. It also
leaves numpy.ma unimported (np.median imports it on its first call, to check for a masked array)."""

from __future__ import annotations

import math

import numpy as np


def median_of(values: np.ndarray, overwrite: bool = False) -> float:
    """float(np.median(values)) of a 1-D float array with no -0.0 (np.median may pick either zero where both lie
    in the middle): the middle value, or the mean of the middle two as np.median takes it; NaN when any value is
    NaN or there is none. `overwrite` partitions `values` in place (np.median's overwrite_input)."""
    size = len(values)
    if not size:
        return math.nan
    half = size // 2
    part = values if overwrite else values.copy()
    part.partition(half)  # part[half] the middle value; the lower half at most it, the upper half at least it
    if np.isnan(part[half:].max()):  # NaN sorts last, so any NaN lies in the upper half
        return math.nan
    if size % 2:
        return float(part[half])
    return float(np.mean(np.array([part[:half].max(), part[half]], dtype=part.dtype)))  # np.median's mean of two
