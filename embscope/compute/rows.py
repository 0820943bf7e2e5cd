"""Reading a table's rows once, block by block: norms, unit rows, the mean row.

A row is *invalid* when its L2 norm is zero or not finite (it holds NaN or Inf). Invalid rows get an
all-zero unit vector (never NaN) and never take part in a cosine. Blocks are bounded in bytes and the
pages of a memory-mapped block are let go once it is read, so a mapped table larger than memory keeps
about one block resident.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import numpy as np

from ..core.errors import OptionError, TableError
from ..core.memory import release

# Rows per block: about 16 MB of float64 work space.
READ_BLOCK_BYTES = 16 << 20
# One block of scores on the CPU aims at this size: big enough for BLAS, small enough for caches (devices.py
# bounds it by free memory; here, so that cosines.py needs no device code).
SCORE_BLOCK_BYTES = 128 << 20


def as_table(table: object) -> np.ndarray:
    """The table as a 2-D floating array (a memory map stays a memory map), or a one-line error."""
    array = table if isinstance(table, np.ndarray) else np.asarray(table)
    if array.ndim != 2:
        raise TableError(f"expected a 2-D table (rows, dim); found shape {tuple(array.shape)}", option="table")
    if not np.issubdtype(array.dtype, np.floating):
        raise TableError(f"expected a floating-point table; found dtype {array.dtype}", option="table")
    return array


def check_ids(ids: object, n_rows: int, what: str, option: str) -> np.ndarray:
    """Row ids as int64, each within the table, or a one-line error naming the first outside it (`option`: the
    argument that gave them)."""
    found = np.asarray(ids)
    if found.size and not np.issubdtype(found.dtype, np.integer):
        raise OptionError(f"{what} must be integer row ids; found dtype {found.dtype}", option=option)
    found = found.astype(np.int64, copy=False)
    if found.size and (found.min() < 0 or found.max() >= n_rows):
        bad = found[(found < 0) | (found >= n_rows)][0]
        raise OptionError(f"{what} must lie in 0..{n_rows - 1}; found {bad}", option=option)
    return found


def block_rows_for(dim: int, block_rows: int | None = None) -> int:
    if block_rows is not None:
        if int(block_rows) < 1:
            raise OptionError(f"block_rows must be at least 1; got {block_rows}", option="block_rows")
        return int(block_rows)
    return max(1, READ_BLOCK_BYTES // (8 * max(1, dim)))


def raw_blocks(table: np.ndarray, *, rows: np.ndarray | None = None,
               block_rows: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
    """(start, rows start.. of the table as stored): slices of a memory map, or gathers of `rows`.
    The pages of each slice are let go once the caller is done with it."""
    count = table.shape[0] if rows is None else len(rows)
    step = block_rows_for(table.shape[1], block_rows)
    for start in range(0, count, step):
        block = table[start:start + step] if rows is None else table[rows[start:start + step]]
        yield start, block
        release(block)


def row_blocks(table: object, *, center: np.ndarray | None = None, rows: np.ndarray | None = None,
               block_rows: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
    """(start, float64 copy of a block of rows, less `center`): a table, memory-mapped or not, read once in
    bounded memory. rows: the row ids to read (None: every row), in the order given.
    The copy's buffer is reused for the next block (fresh pages cost more than the copy): keep results,
    not the block."""
    array = as_table(table)
    if center is not None:
        center = check_center(center, array.shape[1])
    buffer = None
    for start, raw in raw_blocks(array, rows=rows, block_rows=block_rows):
        if buffer is None:
            buffer = np.empty(raw.shape, dtype=np.float64)
        block = buffer[:raw.shape[0]]
        if center is not None:
            np.subtract(raw, center, out=block)  # widened and centred in one pass
        else:
            block[...] = raw
        yield start, block


def check_center(center: object, dim: int) -> np.ndarray:
    found = np.asarray(center, dtype=np.float64)
    if found.shape != (dim,):
        raise OptionError(f"expected a center of shape ({dim},); found shape {tuple(found.shape)}", option="center")
    return found


def normalise(block: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float64 block -> (unit float64 with zero rows where invalid, norms, valid)."""
    norms = float64_norms(block)
    valid = np.isfinite(norms) & (norms > 0)
    unit = np.zeros_like(block)
    np.divide(block, norms[:, None], out=unit, where=valid[:, None])
    return unit, norms, valid


def float64_norms(block: np.ndarray) -> np.ndarray:
    """L2 norm of each row, squared and summed in float64 without a float64 copy of the block;
    NaN for a row with a NaN, Inf for a row with an Inf (or whose squares overflow float64)."""
    with np.errstate(over="ignore", invalid="ignore"):
        norms: np.ndarray = np.sqrt(np.einsum("ij,ij->i", block, block, dtype=np.float64))
    return norms


def row_norms(table: object, *, block_rows: int | None = None) -> np.ndarray:
    """L2 norm of every row in float64, read block by block; NaN for a row with a NaN, Inf for a row with
    an Inf. Half precision is upcast before squaring, so its squares cannot overflow."""
    array = as_table(table)
    norms = np.empty(array.shape[0], dtype=np.float64)
    for start, raw in raw_blocks(array, block_rows=block_rows):
        norms[start:start + raw.shape[0]] = float64_norms(raw)
    return norms


def unit_rows(table: object, *, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Normalise rows once: (unit float32 (n, d), norms float64 (n,), valid bool (n,)), for every row or
    for the row ids in `rows`, in that order.

    Invalid rows (zero norm, NaN or Inf) have an all-zero unit row and valid False;
    their norm is what the data gives (0, NaN or Inf).
    """
    array = as_table(table)
    if rows is not None:
        rows = check_ids(np.asarray(rows).reshape(-1), array.shape[0], "rows", "rows")
    count = array.shape[0] if rows is None else len(rows)
    unit = np.empty((count, array.shape[1]), dtype=np.float32)
    norms = np.empty(count, dtype=np.float64)
    valid = np.empty(count, dtype=bool)
    for start, block in row_blocks(array, rows=rows):
        stop = start + block.shape[0]
        norms[start:stop], valid[start:stop] = normalise_into(block, unit[start:stop])
    return unit, norms, valid


def normalise_into(block: np.ndarray, out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit rows of a float64 block written into `out` (float32: divided in float64, rounded once, so no
    float64 unit rows are made), zero rows where invalid; returns (norms, valid)."""
    norms = float64_norms(block)
    valid = np.isfinite(norms) & (norms > 0)
    if valid.all():  # the usual table: a divide without a mask takes 30% less time, to the same bits
        np.divide(block, norms[:, None], out=out)
        return norms, valid
    with np.errstate(invalid="ignore", divide="ignore"):  # the buffered cast divides masked rows too
        np.divide(block, norms[:, None], out=out, where=valid[:, None])
    out[~valid] = 0.0
    return norms, valid


def unit_blocks(table: object, block_rows: int, threads: int = 1) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """(start, float32 unit rows start.., valid) for consecutive blocks of block_rows rows, normalised exactly as
    unit_rows normalises them, `threads` sharing each block (numpy lets go of the GIL in these loops). The
    buffers are reused for the next block."""
    array = as_table(table)
    n_rows, dim = array.shape
    block_rows = max(1, min(block_rows, n_rows))
    unit = np.empty((block_rows, dim), dtype=np.float32)
    valid = np.empty(block_rows, dtype=bool)
    step = block_rows_for(dim)
    spaces = [np.empty((min(step, block_rows), dim), dtype=np.float64) for _ in range(max(1, threads))]

    def normalise_part(part: tuple[int, int, np.ndarray], start: int = 0) -> None:
        low, high, space = part
        for first in range(low, high, step):
            last = min(first + step, high)
            raw = array[start + first:start + last]
            work = space[:last - first]
            work[...] = raw
            _, valid[first:last] = normalise_into(work, unit[first:last])
            release(raw)

    pool = None
    if threads > 1:
        from concurrent.futures import ThreadPoolExecutor  # 5 ms to import: only where there is work to share
        pool = ThreadPoolExecutor(threads)
    try:
        for start in range(0, n_rows, block_rows):
            count = min(block_rows, n_rows - start)
            share = -(-count // len(spaces))
            parts = [(low, min(low + share, count), space) for low, space in zip(range(0, count, share), spaces)]
            if pool is not None and len(parts) > 1:
                list(pool.map(normalise_part, parts, [start] * len(parts)))
            else:
                for part in parts:
                    normalise_part(part, start)
            yield start, unit[:count], valid[:count]
    finally:
        if pool is not None:
            pool.shutdown()


class TableChecksum:
    """CRC-32 of a table's rows as float32, in row order, fed by a pass that reads every row anyway: the
    cache keeps it beside what the pass computed, and compares it when another pass reads the table."""

    def __init__(self) -> None:
        self.value = 0

    def add(self, rows: np.ndarray) -> None:
        self.value = zlib.crc32(np.ascontiguousarray(rows, dtype=np.float32).data, self.value)


def mean_row(table: object, checksum: TableChecksum | None = None) -> np.ndarray:
    """The mean of the table's finite rows, float64 (zeros when there are none), read block by block;
    `checksum` is fed every row as the pass reads it."""
    array = as_table(table)
    total, count = np.zeros(array.shape[1], dtype=np.float64), 0
    for start, block in row_blocks(array):
        if checksum is not None:
            checksum.add(array[start:start + block.shape[0]])
        finite = np.isfinite(block).all(axis=1)
        total += block[finite].sum(axis=0)
        count += int(finite.sum())
    return total / count if count else total


def valid_unit_rows(table: object) -> tuple[np.ndarray, np.ndarray]:
    """Unit rows of the valid rows only, packed to the front: (float32 (n_valid, d), valid bool (V,))."""
    unit, _, valid = unit_rows(table)
    valid_ids = np.flatnonzero(valid)
    # rows before the first invalid one are in place already (all of them, mostly: a table-wide copy saved)
    first = int(np.argmin(valid)) if valid_ids.size < valid.size else valid_ids.size
    # In place (a source never lies behind its target), so no second table-sized copy is made.
    for start in range(first, valid_ids.size, 1 << 16):
        chunk = valid_ids[start:start + (1 << 16)]
        unit[start:start + chunk.size] = unit[chunk]
    return unit[:valid_ids.size], valid
