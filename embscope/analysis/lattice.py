"""Rows at zero at a quantized table's resolution. A table stored with one scale for the whole tensor (onnxruntime's
per-tensor uint8 or int8 Gather, ONNX's DequantizeLinear with a scalar scale) holds its values on a lattice: integer
multiples of the step (the scale; the zero point maps to 0 exactly). A row whose every value was below half a step
reads as a zero row, and one below a step and a half as a few values of +-1 step: at that resolution the rows
cannot be told from zero, nor from each other. text2tashkeel's rawi_v3.int8.onnx (236 x 128, step 0.0436) keeps 112
rows at zero and 48 more within one step of it, the characters Arabic text never holds, while its 36 Arabic letters
stand at norms 4 to 7: a median row at the bottom of the lattice made every trained letter an anomaly (z up to 113).
A float table is on no such lattice, nor is one with a scale per row or per block, and neither is judged here; a
table so quantized holds zero rows (every value below half a step), and one without any is not judged either; nor is
one whose values reach only a few steps (a one-hot table: its 'step' is its own scale, its rows told apart)."""

from __future__ import annotations

import numpy as np

LATTICE_SAMPLE = 4096  # rows whose values are checked against the lattice at most
FIRST_LOOK = 64  # the lowest-norm rows checked first: a float table fails there, before the table is read further
LATTICE_TOLERANCE = 1e-3  # of a step: how far from a multiple of it a value may lie (float32 products of the scale)
MIN_NEAR_ZERO = 8  # rows within one step of zero, not at it, at least
NEAR_ZERO_SHARE = 0.5  # ... which with the zero rows must be more than this share of the table: its median row
# the table's largest value, in steps, at least: one scale over a table spans its range in 255 levels (uint8) or 127 a
# side (int8), while a table of 0 and 1 (one-hot, multi-hot) or of -1, 0, 1 is on a lattice of its own scale, its rows
# told apart at once; with no such floor every row of a one-hot table was 'at zero'
MIN_LEVELS = 16


def lattice_reach(array: np.ndarray, rows: np.ndarray, step: float) -> float | None:
    """The largest |value| of `rows` (a sample of LATTICE_SAMPLE at most) in steps, where every one of them is an
    integer multiple of `step`; else None."""
    sample = rows if len(rows) <= LATTICE_SAMPLE else np.sort(np.random.default_rng(0).choice(
        rows, size=LATTICE_SAMPLE, replace=False))
    multiples = np.asarray(array[sample], dtype=np.float64) / step
    if np.max(np.abs(multiples - np.round(multiples)), initial=0.0) > LATTICE_TOLERANCE:
        return None
    return float(np.max(np.abs(multiples), initial=0.0))


def smallest_step(array: np.ndarray, rows: np.ndarray) -> float | None:
    """The smallest positive |value| of `rows`, None when they hold none."""
    values = np.abs(np.asarray(array[rows], dtype=np.float64))
    positive = values[values > 0]
    return float(positive.min()) if len(positive) else None


def near_zero(array: np.ndarray, norms: np.ndarray) -> tuple[np.ndarray, float] | None:
    """The non-zero rows whose every value is within one step of zero, and the step, where the table's values lie on
    a lattice and those rows and the zero rows are most of it; else None."""
    zero = norms == 0
    rest = np.flatnonzero(np.isfinite(norms) & ~zero)
    if len(rest) < MIN_NEAR_ZERO or len(rest) == len(norms):
        return None  # a table quantized so holds zero rows: those whose every value was below half a step
    lowest = rest[np.argpartition(norms[rest], min(FIRST_LOOK, len(rest)) - 1)[:FIRST_LOOK]]
    step = smallest_step(array, np.sort(lowest))
    if step is None or lattice_reach(array, np.sort(lowest), step) is None:
        return None
    # a row within one step of zero has a norm of step x sqrt(d) at most: only those are read again
    candidates = rest[norms[rest] <= step * (1 + LATTICE_TOLERANCE) * np.sqrt(array.shape[1])]
    if len(candidates) + int(zero.sum()) <= NEAR_ZERO_SHARE * len(norms):
        return None
    reach = lattice_reach(array, rest, step)
    highest = rest[np.argpartition(-norms[rest], min(FIRST_LOOK, len(rest)) - 1)[:FIRST_LOOK]]
    top = lattice_reach(array, np.sort(highest), step)  # the trained rows, however few a sample of a big table meets
    if reach is None or top is None or max(reach, top) < MIN_LEVELS:
        return None
    peaks = np.max(np.abs(np.asarray(array[candidates], dtype=np.float64)), axis=1)
    rows = candidates[peaks <= step * (1 + LATTICE_TOLERANCE)]
    if len(rows) < MIN_NEAR_ZERO or len(rows) + int(zero.sum()) <= NEAR_ZERO_SHARE * len(norms):
        return None
    return rows, step


def near_zero_evidence(rows: int, zero: int, total: int, step: float) -> str:
    return (f"{rows:,} rows lie within one quantization step ({step:.4g}) of zero in every coordinate, beside the "
            f"{zero:,} rows stored as zero: {rows + zero:,} of the table's {total:,} rows, where the file's values are "
            f"integer multiples of {step:.4g} (a table quantized with one scale); at that resolution they cannot be "
            "told from zero (never trained and shrunk by weight decay, initialised near zero, or trained too little "
            "to tell), and the rows above them are judged among themselves")
