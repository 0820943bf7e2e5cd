"""How far a bf16 score may lie from the exact cosine, measured on the table's own rows (bf16_exact's cuts;
docs/speed.md derives it).

x, y: float32 rows, x~, y~ their bf16 roundings, d entries. Real arithmetic, Cauchy-Schwarz:
  input:        |x.y - x~.y~| = |(x - x~).y + x~.(y - y~)| <= ||x - x~|| ||y|| + ||x~|| ||y - y~||
  accumulation: each product of two bf16 numbers is exact in fp32 (8 + 8 significant bits <= 24); summing d of
                them in fp32 in any order errs by at most g_d sum |x~_i y~_i| <= g_d ||x~|| ||y~||,
                g_d = d v / (1 - d v), v = 2^-24
  reference:    numpy's fp32 cosine (fp32 products, fp32 sums) is off x.y by at most g_d ||x|| ||y||
  output:       the sum s' is handed back rounded to bf16 (u = 2^-8, to nearest): |t - s'| <= u |t|, relative
                to the score, so it stays out of the per-row terms and goes into the cut (lowest)
Per row i, the worst over every column j: E_i = e_i N + m_i e + g_d m_i m (e_i = ||x_i - x~_i||,
m_i = ||x~_i||, N, e, m: the largest ||y||, ||y - y~||, ||y~|| of the columns) and G_i = g_d ||x_i|| N; the
margin is M_i = 2 (E_i + G_i) (+ CUT_SLACK). Each norm is rounded up (rounding_terms). The a priori worst
case for unit rows, e_i <= u (1 + v), is about twice what random rows measure (score_error_bound).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

BF16_UNIT = 2.0 ** -8  # unit roundoff of bf16 (8 significant bits), round to nearest
FP32_UNIT = 2.0 ** -24
# the fp32 arithmetic of a cut (a few roundings of numbers below 4), and products AMX flushes to zero when
# subnormal (at most d 2^-126 in all): both far below this
CUT_SLACK = 2.0 ** -20
UP = 1 + 2.0 ** -40  # more than the few float64 roundings (2^-53 each) of a root, a product or a sum of norms
TERMS_ROWS = 4096  # rows brought to the host at a time for their norms


@dataclass(frozen=True)
class RoundingTerms:
    """Per row, never below the true values: error = ||x - x~||, norm = ||x||, low_norm = ||x~||
    (x~: the row in bf16)."""

    error: np.ndarray
    norm: np.ndarray
    low_norm: np.ndarray


def rounding_terms(torch: Any, exact: Any, low: Any) -> RoundingTerms:
    """The norms of fp32 rows (on any device), of the differences from their bf16 copies low and (at most) of
    those copies: ||x~|| <= ||x|| + ||x - x~||. On the host in fp32, a few rows at a time: x - x~ is exact in
    fp32 (x~ lies within a factor 2 of x), and an fp32 sum of d squares is at least (1 - g_d) times the true
    one, in any order; the roots are taken in float64."""
    dim = exact.shape[1]
    squares = np.empty((2, exact.shape[0]), dtype=np.float32)
    for start in range(0, exact.shape[0], TERMS_ROWS):
        x = exact[start:start + TERMS_ROWS].cpu().numpy()
        diff = x - bf16_values(torch, low[start:start + TERMS_ROWS].cpu())
        squares[0, start:start + x.shape[0]] = np.einsum("ij,ij->i", diff, diff)
        squares[1, start:start + x.shape[0]] = np.einsum("ij,ij->i", x, x)
    error, norm = np.sqrt(squares.astype(np.float64) / (1 - accumulation(dim))) * UP
    return RoundingTerms(error, norm, (norm + error) * UP)


def bf16_values(torch: Any, low: Any) -> np.ndarray:
    """A bf16 CPU tensor's numbers as float32 numpy, exactly: its 16 bits are the top half of theirs."""
    bits = low.view(torch.int16).numpy().view(np.uint16).astype(np.uint32) << 16
    values: np.ndarray = bits.view(np.float32)
    return values


def accumulation(dim: int) -> float:
    """g_d: the relative error of an fp32 sum of dim terms, in any order."""
    return dim * FP32_UNIT / (1 - dim * FP32_UNIT)


def margins(rows: RoundingTerms, columns: RoundingTerms, dim: int) -> np.ndarray:
    """M_i (float64) of each row against every column: twice the most row i's bf16 sum s' and its fp32
    reference cosine r each differ from the exact cosine, for any column, plus CUT_SLACK."""
    if columns.norm.size == 0:
        return np.full(rows.norm.shape, CUT_SLACK)
    g = accumulation(dim)
    most, error, low_norm = float(columns.norm.max()), float(columns.error.max()), float(columns.low_norm.max())
    score = rows.error * most + rows.low_norm * error + g * rows.low_norm * low_norm
    margin: np.ndarray = 2 * (score + g * rows.norm * most) * UP + CUT_SLACK
    return margin


def on_device(torch: Any, values: np.ndarray, device: Any) -> Any:
    """float64 margins as fp32 on the device, never rounded down."""
    return torch.from_numpy((values * (1 + 2.0 ** -20)).astype(np.float32)).to(device)


def lowest(torch: Any, kth: Any, margin: Any) -> Any:
    """The cut of rows whose count-th best bf16 score is kth (fp32 tensors): c - u |c| with
    c = kth - u |kth| - margin. Every column of the fp32 top count has a bf16 score at or above it."""
    c = kth - BF16_UNIT * kth.abs() - margin
    return c - BF16_UNIT * c.abs()


def score_error_bound(dim: int) -> float:
    """The a priori worst case for float32 unit rows (|x| <= 1 + v), any table: e_i <= u (1 + v), m_i <=
    (1 + u)(1 + v), the output's u |t| at |t| <= (1 + u)^2 (1 + v)^2 (1 + g_d). A table's margins(), plus twice
    the output term, never exceed twice this; the measured ones are about half of it on random rows."""
    u, v = BF16_UNIT, FP32_UNIT
    gamma = accumulation(dim)
    norms = (1 + v) ** 2
    inputs = (2 * u + u * u) * norms
    summed = gamma * (1 + u) ** 2 * norms
    output = u * (1 + u) ** 2 * norms * (1 + gamma)
    reference = gamma * norms
    return inputs + summed + output + reference
