"""float32 products of a block of rows by a few columns, in pieces OpenBLAS runs on one thread: past
SINGLE_THREAD_PRODUCT multiply-adds its gemm wakes its other threads, which costs more CPU than it saves on a
product this thin. The pieces go to numpy as one stacked product (numpy calls gemm for each, in C), not one
call each from Python: half the CPU time of a Python loop over 81-row pieces (64 columns, 50 wide)."""

from __future__ import annotations

import numpy as np

SINGLE_THREAD_PRODUCT = 1 << 18  # multiply-adds below which OpenBLAS's gemm runs on one thread
LEAST_PIECE = 64  # rows a piece at least: of wide rows, pieces on one thread would be too thin to run well


def thin_product(rows: np.ndarray, columns: np.ndarray, out: np.ndarray, least: int = LEAST_PIECE) -> None:
    """out = rows @ columns, float32: rows (n, d), columns (d, k), out (n, k) C-ordered (its pieces are views);
    pieces of `least` rows at least."""
    if not out.flags.c_contiguous:
        raise ValueError("thin_product writes into a C-ordered array only")
    piece = max(least, SINGLE_THREAD_PRODUCT // (rows.shape[1] * columns.shape[1]))
    whole = len(rows) - len(rows) % piece
    if whole:
        np.matmul(rows[:whole].reshape(-1, piece, rows.shape[1]), columns[None],
                  out=out[:whole].reshape(-1, piece, columns.shape[1]))
    if whole < len(rows):
        np.matmul(rows[whole:], columns, out=out[whole:])
