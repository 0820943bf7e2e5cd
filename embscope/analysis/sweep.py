"""One read of a checkpoint's table against one or two earlier ones (the previous and the first of a series): each
pair of rows' cosine, norms, relative change and bitwise equality, the rows shared out over the cores. When asked,
the unit rows of the tables read are handed to neighbour searches as they pass, so that the neighbour sets cost
no read of their own.

Rows go in blocks of about BLOCK_BYTES of float64 per table, each block widened to float64 on its own, so there
is never a whole float64 copy of a table; the pages of a memory-mapped block are let go once it is read.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..compute.devices import cpu_threads
from ..compute.streamed import StreamedTopK
from ..core.memory import release

BLOCK_BYTES = 1 << 20  # float64 work space per block of rows and table: three per thread stay near the cache
SEARCH_ROWS_BYTES = 16 << 20  # unit rows gathered per table before they go to its neighbour search (and Q x as many scores)

Progress = Callable[[int, int], None]


class Paired(Protocol):
    """Which row of B each compared row of A meets (analysis.compare.Pairing)."""

    @property
    def count(self) -> int: ...

    def block(self, a: np.ndarray, b: np.ndarray, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]: ...


@dataclass(frozen=True, eq=False)
class RowChanges:
    """One entry per compared pair of rows."""

    cosine: np.ndarray  # float64; NaN when either row is zero or holds NaN/Inf
    norm_a: np.ndarray  # float64
    norm_b: np.ndarray  # float64 (after the rotation, when aligned: a rotation keeps norms)
    relative: np.ndarray  # float64 ||b - a|| / ||a||; Inf when a is zero and b is not, NaN when undefined
    unchanged: np.ndarray  # bool: the stored bits of the two rows are equal
    # uint64 (count, 2): a hash of each paired row's stored bits, of A and of B, where the sweep was asked for them
    # (the run audit tells byte-identical tables apart by them, found in this read rather than a second one)
    hash_a: np.ndarray | None = None
    hash_b: np.ndarray | None = None

    @property
    def count(self) -> int:
        return len(self.cosine)


def block_rows(table: np.ndarray) -> int:
    """Rows of about BLOCK_BYTES in float64."""
    return max(1, BLOCK_BYTES // (8 * max(1, int(table.shape[1]))))


@functools.cache
def hash_keys(width: int, itemsize: int) -> np.ndarray:
    """Odd 64-bit multipliers, two per stored word of a row: a row's hash is its words times these, summed mod 2**64
    (two independent sums: a chance of about 2**-64 that two different rows agree in both)."""
    keys: np.ndarray = np.random.default_rng(0x5EED).integers(0, 2**63, size=(width, 2), dtype=np.uint64) * 2 + 1
    return keys


def row_hashes(block: np.ndarray) -> np.ndarray:
    """uint64 (rows, 2): a hash of each row's stored bits (any dtype of 1, 2, 4 or 8 bytes)."""
    rows = np.ascontiguousarray(block).reshape(len(block), math.prod(block.shape[1:]))
    words = rows.view(np.dtype(f"u{rows.dtype.itemsize}")).astype(np.uint64)
    with np.errstate(over="ignore"):
        hashed: np.ndarray = words @ hash_keys(words.shape[1], rows.dtype.itemsize)
    return hashed


def same_bits(block_a: np.ndarray, block_b: np.ndarray) -> np.ndarray:
    """Per row: are the stored values bit for bit equal? (Values compare NaN unequal and -0.0 equal to 0.0.)"""
    if block_a.dtype != block_b.dtype or block_a.shape[1] != block_b.shape[1]:
        return np.zeros(len(block_a), dtype=bool)
    word = np.dtype(f"u{block_a.dtype.itemsize}")
    same: np.ndarray = (np.ascontiguousarray(block_a).view(word)
                        == np.ascontiguousarray(block_b).view(word)).all(axis=1)
    return same


class Outputs:
    """The arrays one sweep fills for each earlier table, and the unit rows it gathers for the searches."""

    def __init__(self, n: int, olds: int, dim: int, searched: Sequence[int], chunk: int, hashed: Sequence[int] = ()):
        self.cosine, self.norm_a, self.relative = (np.empty((olds, n)) for _ in range(3))
        self.norm_b = np.empty(n)
        self.unchanged = np.empty((olds, n), dtype=bool)
        self.units = {table: np.empty((chunk, dim), dtype=np.float32) for table in searched}
        self.valid = {table: np.empty(chunk, dtype=bool) for table in searched}
        self.hashes = {table: np.empty((n, 2), dtype=np.uint64) for table in hashed}  # 0.. the olds, len(olds) b
        self.olds = olds

    def changes(self, old: int) -> RowChanges:
        return RowChanges(self.cosine[old], self.norm_a[old], self.norm_b, self.relative[old], self.unchanged[old],
                          self.hashes.get(old), self.hashes.get(self.olds))


def sweep(b: np.ndarray, olds: Sequence[np.ndarray], pairing: Paired, *, rotation: np.ndarray | None = None,
          searches: Mapping[int, StreamedTopK] | None = None, progress: Progress | None = None,
          hashed: Sequence[int] = ()) -> list[RowChanges]:
    """The row changes from each table in `olds` to `b` (each paired with b by `pairing`), reading b once.
    With `rotation` (d, d), b's rows are compared as b @ rotation; bitwise equality is of the stored rows.
    searches: neighbour searches by table (0.. the olds, len(olds) b), fed each table's unit rows as they pass,
    normalised exactly as compute.unit_rows does; the pairing must then pair every row of each with its own index.
    hashed: the tables (numbered as for searches) whose paired rows' stored bits are hashed as they pass."""
    searches = dict(searches or {})
    n, dim = pairing.count, b.shape[1]
    threads = cpu_threads()
    chunk = max(1, min(n, SEARCH_ROWS_BYTES // (4 * max(1, dim)))) if searches else max(1, n)
    out = Outputs(n, len(olds), dim, list(searches), chunk, hashed)
    spaces = [[np.empty((block_rows(b), dim)) for _ in range(3)] for _ in range(threads)]

    def rows_of(part: tuple[int, int, int, list[np.ndarray]]) -> None:
        low, high, offset, space = part
        step = block_rows(b)
        for start in range(low, high, step):
            changes_of_block(olds, b, pairing, start, min(start + step, high), offset, out, space, rotation)

    pool = None
    if threads > 1 and n > block_rows(b):
        from concurrent.futures import ThreadPoolExecutor  # 5 ms to import: only where there is work to share
        pool = ThreadPoolExecutor(threads)
    try:
        for first in range(0, n, chunk):
            last = min(first + chunk, n)
            share = -(-(last - first) // threads)
            parts = [(low, min(low + share, last), first, space)
                     for low, space in zip(range(first, last, share), spaces)]
            if pool is not None and len(parts) > 1:
                list(pool.map(rows_of, parts))  # numpy lets go of the GIL in these loops
            else:
                for part in parts:
                    rows_of(part)
            for table, search in searches.items():
                search.add(first, out.units[table][:last - first], out.valid[table][:last - first])
            if progress is not None:
                progress(last, n)
    finally:
        if pool is not None:
            pool.shutdown()
    return [out.changes(old) for old in range(len(olds))]


def changes_of_block(olds: Sequence[np.ndarray], b: np.ndarray, pairing: Paired, start: int, stop: int, offset: int,
                     out: Outputs, spaces: list[np.ndarray], rotation: np.ndarray | None) -> None:
    """Pairs start..stop: their changes into `out`, and the unit rows the searches need (rows counted from offset)."""
    rows = stop - start
    xa, xb, difference = (space[:rows] for space in spaces)
    raw_b = None
    squares_b = norm_b = np.empty(0)
    for old, a in enumerate(olds):
        raw_a, raw_b = pairing.block(a, b, start, stop)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            if old == 0:
                np.copyto(xb, raw_b)
                if rotation is not None:
                    xb[:] = xb @ rotation
                squares_b = np.einsum("ij,ij->i", xb, xb)
                norm_b = np.sqrt(squares_b)
                out.norm_b[start:stop] = norm_b
                unit_rows_into(out, len(olds), xb, norm_b, start - offset)
                if len(olds) in out.hashes:
                    out.hashes[len(olds)][start:stop] = row_hashes(raw_b)
            if old in out.hashes:
                out.hashes[old][start:stop] = row_hashes(raw_a)
            np.copyto(xa, raw_a)
            squares_a = np.einsum("ij,ij->i", xa, xa)
            norm_a = np.sqrt(squares_a)
            unit_rows_into(out, old, xa, norm_a, start - offset)
            np.subtract(xb, xa, out=difference)  # the difference of two float32 values is exact in float64
            squares_moved = np.einsum("ij,ij->i", difference, difference)
            # a.b from the three sums of squares: one pass less, and no cancellation where it matters (b near a)
            dot = (squares_a + squares_b - squares_moved) / 2
            moved = np.sqrt(squares_moved)
            defined = np.isfinite(norm_a) & np.isfinite(norm_b) & (norm_a > 0) & (norm_b > 0)
            out.cosine[old, start:stop] = np.where(defined, np.clip(dot / (norm_a * norm_b), -1.0, 1.0), np.nan)
            out.relative[old, start:stop] = np.where(np.isfinite(moved) & np.isfinite(norm_a),
                                                     np.where(moved == 0, 0.0, moved / norm_a), np.nan)
        # unrotated, only rows equal in value (or holding NaN) can have equal bits: check just those
        maybe = np.flatnonzero(~(moved > 0)) if rotation is None else np.arange(rows)
        out.unchanged[old, start:stop] = False
        if len(maybe):
            out.unchanged[old, start + maybe] = same_bits(raw_a[maybe], raw_b[maybe])
        out.norm_a[old, start:stop] = norm_a
        release(raw_a)
    if raw_b is not None:
        release(raw_b)


def unit_rows_into(out: Outputs, table: int, block: np.ndarray, norms: np.ndarray, at: int) -> None:
    """The block's unit rows into the table's gathered rows (if a search wants them), as compute.normalise_into
    makes them: divided in float64, rounded once to float32, zero rows where invalid."""
    if table not in out.units:
        return
    unit, valid = out.units[table][at:at + len(block)], out.valid[table][at:at + len(block)]
    valid[:] = np.isfinite(norms) & (norms > 0)
    with np.errstate(invalid="ignore", divide="ignore"):  # the buffered cast divides masked rows too
        np.divide(block, norms[:, None], out=unit, where=valid[:, None])
    unit[~valid] = 0.0
