"""Fixed sinusoidal position tables (Vaswani et al. 2017, section 3.5), which a model computes and does not learn:
a from-scratch PyTorch model saves the PyTorch tutorial's PositionalEncoding buffer (`pos_encoder.pe`) in its
state_dict, and `params` would count it as parameters. A tensor is one when its values are, within half-precision
rounding, the table one of the common layouts gives (FORMULAS): sin and cos interleaved (the tutorial, the Annotated
Transformer) or in two halves (tensor2tensor, fairseq's SinusoidalPositionalEmbedding, Whisper), with frequencies
10000^(-2i/d) or 10000^(-i/(d/2 - 1)). Only tensors no role took, named like positions, and no larger than
MOST_VALUES are read."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable

import numpy as np

from ..core.arrays import to_float32
from ..core.checkpoint import TensorInfo

MOST_ZERO_ROWS = 2  # rows of zeros a table may hold besides: padding rows
MOST_VALUES = 1 << 24  # 64 MB of float32: a position table of 16,384 x 1,024; larger tensors are not read for this
TOLERANCE = 2e-3  # more than bfloat16's rounding of values in [-1, 1] (at most 2^-9), float16's (2^-11)
# a last name part that names positions: pe, pos_enc, positional_encoding, pos_embedding, sinusoid, ...
POSITION_NAME = re.compile(r"(^|_)(pe|pos|position|positional|sinusoid|sinusoidal)(_|$)|^pos|^position|^sinus",
                           re.IGNORECASE)


def frequencies_pairs(dim: int) -> np.ndarray:
    """10000^(-2i/d), i < d/2: the tutorial's div_term."""
    return np.exp(np.arange(0, dim, 2, dtype=np.float64) * (-math.log(10000.0) / dim))


def frequencies_halves(dim: int) -> np.ndarray:
    """10000^(-i/(d/2 - 1)), i < d/2: tensor2tensor's and fairseq's get_embedding, Whisper's sinusoids."""
    half = dim // 2
    return np.exp(np.arange(half, dtype=np.float64) * (-math.log(10000.0) / max(1, half - 1)))


def interleaved(angles: np.ndarray) -> np.ndarray:
    table = np.empty((angles.shape[0], 2 * angles.shape[1]))
    table[:, 0::2], table[:, 1::2] = np.sin(angles), np.cos(angles)
    return table


def halves(angles: np.ndarray) -> np.ndarray:
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)


# (what it is, the frequencies of a width, how sin and cos are laid out)
FORMULAS: tuple[tuple[str, Callable[[int], np.ndarray], Callable[[np.ndarray], np.ndarray]], ...] = (
    ("sin and cos interleaved, frequencies 10000^(-2i/d): the PyTorch tutorial's PositionalEncoding",
     frequencies_pairs, interleaved),
    ("sin then cos in halves, frequencies 10000^(-i/(d/2 - 1)): tensor2tensor's, fairseq's, Whisper's",
     frequencies_halves, halves),
    ("sin then cos in halves, frequencies 10000^(-2i/d)", frequencies_pairs, halves),
)


def positions_shape(tensor: TensorInfo) -> tuple[int, int] | None:
    """(positions, width) of a tensor whose dimensions but two are 1 ((L, 1, d) as the tutorial keeps it, (1, L, d)),
    the width even; None otherwise."""
    sizes = [size for size in tensor.shape if size != 1]
    if len(sizes) != 2 or sizes[1] % 2 or sizes[0] < 2:
        return None
    return sizes[0], sizes[1]


def formula_of(values: np.ndarray) -> str | None:
    """The layout whose table `values` (positions x width, row p for position p) is within TOLERANCE, a few rows of
    zeros aside (fairseq zeroes its padding_idx's row); None when it is none of them."""
    rows, dim = values.shape
    if not np.isfinite(values).all() or np.abs(values).max() > 1 + TOLERANCE:
        return None
    kept = np.flatnonzero(np.any(values != 0, axis=1))
    if rows - len(kept) > MOST_ZERO_ROWS or len(kept) < 2:
        return None
    for said, frequencies, layout in FORMULAS:
        expected = layout(kept.astype(np.float64)[:, None] * frequencies(dim)[None, :])
        if np.abs(values[kept] - expected).max() <= TOLERANCE:
            return said
    return None


def fixed_sinusoids(tensors: Iterable[TensorInfo], taken: frozenset[str]) -> list[tuple[TensorInfo, str]]:
    """The tensors no role took (`taken`: their names) that are fixed sinusoid tables, each with its layout."""
    found = []
    for tensor in tensors:
        shape = positions_shape(tensor) if tensor.is_float and tensor.name not in taken else None
        if shape is None or shape[0] * shape[1] > MOST_VALUES:
            continue
        if not POSITION_NAME.search(tensor.name.rsplit(".", 1)[-1]):
            continue
        said = formula_of(to_float32(tensor.read(), tensor.dtype).astype(np.float64).reshape(shape))
        if said is not None:
            found.append((tensor, said))
    return found
