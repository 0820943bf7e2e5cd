"""Fixed sinusoidal position tables (Vaswani et al. 2017, section 3.5), which a model computes and does not learn:
a from-scratch PyTorch model saves the PyTorch tutorial's PositionalEncoding buffer (`pos_encoder.pe`) in its
state_dict, and `params` would count it as parameters. A tensor is one when its values are, within half-precision
rounding, the table one of the common layouts gives (FORMULAS): sin and cos interleaved (the tutorial, the Annotated
Transformer) or in two halves (tensor2tensor, fairseq's SinusoidalPositionalEmbedding, Whisper), with frequencies
10000^(-2i/d) or 10000^(-i/(d/2 - 1)). Only tensors no role took, named like positions (named_like_positions: torch's, Keras', CTranslate2's
names), and no larger than MOST_VALUES are read."""

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
# writers compute the angle position x frequency in float32 (torch.arange times a float32 frequency, itself rounded):
# a few units in the last place of the angle, which sin and cos pass on: 4 x 2^-23 of position p at frequency 1
ANGLE_ERROR = 2.0 ** -21
SAMPLE_VALUES = 1 << 16  # values compared with each formula: evenly spaced rows, whatever the table's size
# a name part that names positions: pe, pos_enc, positional_encoding, pos_embedding, embed_positions, sinusoid, ...
POSITION_NAME = re.compile(r"(^|_)(pe|pos|position|positions|positional|sinusoid|sinusoidal)(_|$)|^pos|^position|"
                           r"^sinus", re.IGNORECASE)
# the parts after a layer's own name that name no layer: torch's '.weight', Keras' 'vars/0' and 'embeddings',
# CTranslate2's 'encodings' ('encoder/position_encodings/encodings'); '.' and '/' both separate parts
GENERIC_PARTS = frozenset({"weight", "embeddings", "encodings", "vars"})


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
    """The layout whose table `values` (positions x width, row p for position p) is within TOLERANCE (and the float32
    angle's error at position p, ANGLE_ERROR x p), a few rows of zeros aside (fairseq zeroes its padding_idx's row);
    None when it is none of them."""
    rows, dim = values.shape
    low, high = float(values.min()), float(values.max())  # NaN and inf fail isfinite: no copy of a large table
    if not (math.isfinite(low) and math.isfinite(high)) or max(-low, high) > 1 + TOLERANCE:
        return None
    kept = np.flatnonzero(np.any(values != 0, axis=1))
    if rows - len(kept) > MOST_ZERO_ROWS or len(kept) < 2:
        return None
    # a learned table moves every row off the formula: evenly spaced rows, the first and the last among them, tell
    sample = kept[np.unique(np.linspace(0, len(kept) - 1, max(2, min(len(kept), SAMPLE_VALUES // dim))).astype(int))]
    positions = sample.astype(np.float64)[:, None]
    found = values[sample].astype(np.float64)
    allowed = TOLERANCE + ANGLE_ERROR * positions  # every layout's highest frequency is 1
    for said, frequencies, layout in FORMULAS:
        if (np.abs(found - layout(positions * frequencies(dim)[None, :])) <= allowed).all():
            return said
    return None


def named_like_positions(name: str) -> bool:
    """The last part of a tensor's name that names its layer (the generic parts after it left out) names positions:
    'pos_encoder.pe', HF Whisper's 'model.encoder.embed_positions.weight', CTranslate2's
    'encoder/position_encodings/encodings', Keras 3's 'layers/positional_encoding/vars/0'."""
    parts = [part for part in re.split(r"[./]", name) if part and not part.isdigit() and part not in GENERIC_PARTS]
    return bool(parts) and POSITION_NAME.search(parts[-1]) is not None


def fixed_sinusoids(tensors: Iterable[TensorInfo],
                    taken: frozenset[str]) -> tuple[list[tuple[TensorInfo, str]], list[TensorInfo]]:
    """The tensors no role took (`taken`: their names) that are fixed sinusoid tables, each with its layout; and
    those named like positions, of a table's shape, too large to read for it (MOST_VALUES), to be said."""
    found, unread = [], []
    for tensor in tensors:
        shape = positions_shape(tensor) if tensor.is_float and tensor.name not in taken else None
        if shape is None or not named_like_positions(tensor.name):
            continue
        if shape[0] * shape[1] > MOST_VALUES:
            unread.append(tensor)
        elif (said := sinusoid_of(tensor)) is not None:
            found.append((tensor, said))
    return found, unread


def sinusoid_of(tensor: TensorInfo) -> str | None:
    """The layout of a tensor that is a fixed sinusoid table, read only when it holds at most MOST_VALUES; None
    for any other tensor, or one too large to tell."""
    shape = positions_shape(tensor) if tensor.is_float else None
    if shape is None or shape[0] * shape[1] > MOST_VALUES:
        return None
    return formula_of(to_float32(tensor.read(), tensor.dtype).reshape(shape))
