"""The d x d statistics of whole tables, read block by block, never V x V: the sums and scatter matrix of a
table's rows (geometry, all-but-the-top), their projections onto d directions (the partition function), and
the cross products of two tables' paired rows (linear CKA).

Blocks are widened to float64 where the work runs (the projections' d x d product alone is float32, of the rows
less their mean, with float64 sums: it is half the cost and log Z keeps about 1e-7 x ||w - mean||): numpy on the CPU, torch on a GPU (the device choice of
compute.devices, as the top-k makes it). One implementation serves both: each pass is written in the operations
numpy and torch share (`@`, `.sum(0)`, `einsum`, `sqrt`, `exp`, `amax`, boolean masks), over the array module
that `Work` names. MPS has no float64, so it computes on the host.

A row is *invalid* when its L2 norm is zero or not finite (NaN or Inf): it takes no part in any sum, and is
counted. Scatter matrices are summed about a shift (the first block's mean) and corrected once at the end, so
a large common offset costs no precision (Welford's idea, by blocks).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.arrays import to_float32
from ..core.errors import TableError
from .devices import resolve_device, torch_module
from .rows import raw_blocks

BLOCK_BYTES = 32 << 20  # float64 work space per block: rows enough for BLAS to run near its peak
LEFT_OUT_LISTED = 10  # ids of invalid rows kept for the notes
# a row whose part outside the removed directions is below this share of its norm is, to float64, in their span
RESIDUAL_TOLERANCE = 1e-10

# the widest d x d float64 matrix these passes build: 512 MiB, an eigh of minutes (Llama-2-70B's 8,192 columns); a
# 4 x 30,000 table (a 1.4 MB file) asked for 6.7 GiB
MAX_SIDE = 8192

Progress = Callable[[int, int], None]


def check_side(side: int, what: str) -> None:
    """Refuse, before anything is allocated, a side x side float64 matrix past MAX_SIDE."""
    if side > MAX_SIDE:
        raise TableError(f"expected at most {MAX_SIDE:,} columns for {what} (a d x d float64 matrix), found {side:,}: "
                         f"the {side:,} x {side:,} matrix alone would take {side * side * 8 / (1 << 30):.1f} GiB")


@dataclass(frozen=True, eq=False)
class StoredRows:
    """A table's rows as the file stores them (a memory map where the format allows): float arrays as they are,
    bfloat16 as its uint16 bits, widened block by block, so no float32 copy of a half-precision table is made.
    Rows before `first` (a position table's reserved rows) are not read."""

    array: np.ndarray
    dtype: str = "float32"  # the TensorInfo name of the element type; "bfloat16": `array` holds the bits
    first: int = 0

    @property
    def rows(self) -> int:
        return max(int(self.array.shape[0]) - self.first, 0)

    @property
    def dim(self) -> int:
        return int(self.array.shape[1])

    def blocks(self, rows: int) -> Iterator[tuple[int, np.ndarray]]:
        """(start, float rows start.. counted from `first`): views of a mapped float32 table, converted copies
        otherwise; the pages of each block are let go once the caller is done with it."""
        for start, raw in raw_blocks(self.array[self.first:], block_rows=rows):
            yield start, to_float32(raw, self.dtype) if self.dtype == "bfloat16" else raw


def block_rows(dim: int) -> int:
    return max(1, BLOCK_BYTES // (8 * max(1, dim)))


def block_size(rows: StoredRows) -> int:
    """The rows a pass's block holds: block_rows, or the whole table where it is smaller. Its buffers are no
    larger than the table: a block buffer's pages are zeroed on first touch (huge ones, numpy asks), and the
    exponent buffer's lines lie a block apart (the sample's geometry: 0.1 s of page faults for 1,024 rows)."""
    return max(1, min(block_rows(rows.dim), rows.rows))


class Work:
    """Where a pass computes: an array module (numpy, or torch) and a device, with the few calls that differ."""

    def __init__(self, device: str = "cpu", use_torch: bool | None = None):
        self.device = device
        self.torch = device != "cpu" if use_torch is None else use_torch  # torch on the cpu: tests of the GPU path
        self.xp: Any = torch_module() if self.torch else np

    def put(self, block: np.ndarray, space: np.ndarray | None = None) -> Any:
        """A host block as float64 where the work runs; on the host into `space` when given (a buffer from
        `space`, reused block after block: fresh pages cost more than the copy)."""
        if not self.torch:
            if space is not None:
                np.copyto(space[:len(block)], block)
                return space[:len(block)]
            return np.array(block, dtype=np.float64)  # a copy always: a float64 table's map is read-only
        return self.xp.from_numpy(np.array(block)).to(self.device).double()  # torch wants a writable array

    def space(self, rows: int, dim: int) -> np.ndarray | None:
        """A float64 buffer for blocks of up to `rows` rows on the host (None where torch works)."""
        return None if self.torch else np.empty((rows, dim))

    def less(self, block: np.ndarray, mean: Any, space: np.ndarray | None = None) -> Any:
        """A host block less `mean` (float64 where the work runs): numpy widens and subtracts in one pass, into
        `space` when given."""
        if not self.torch:
            return np.subtract(block, mean, out=space[:len(block)] if space is not None else None, dtype=np.float64)
        widened = self.put(block)
        widened -= mean
        return widened

    def squares(self, x: Any, space: np.ndarray | None = None) -> Any:
        """x * x, into `space` when given."""
        return x * x if space is None else np.multiply(x, x, out=space[:len(x)])

    def single(self, value: Any) -> Any:
        return value.float() if self.torch else value.astype(np.float32)

    def double(self, value: Any) -> Any:
        return value.double() if self.torch else value.astype(np.float64)

    def zeros(self, *shape: int) -> Any:
        if not self.torch:
            return np.zeros(shape, dtype=np.float64)
        return self.xp.zeros(shape, dtype=self.xp.float64, device=self.device)

    def full(self, value: float, *shape: int) -> Any:
        if not self.torch:
            return np.full(shape, value, dtype=np.float64)
        return self.xp.full(shape, value, dtype=self.xp.float64, device=self.device)

    def host(self, value: Any) -> np.ndarray:
        """A result as a numpy array (float64, or bool)."""
        return value.cpu().numpy() if self.torch else np.asarray(value)

    def eigh(self, matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Eigenvalues (ascending) and eigenvectors (columns) of a symmetric float64 matrix."""
        if not self.torch:
            return np.linalg.eigh(matrix)
        values, vectors = self.xp.linalg.eigh(self.put(matrix))
        return self.host(values), self.host(vectors)


def work_for(device: str) -> tuple[Work, str | None]:
    """The Work for a device choice ("auto" = a GPU when torch sees one), and a note when it differs."""
    resolved = resolve_device(device)
    if resolved == "mps":
        return Work("cpu"), "MPS has no float64: the geometry ran on the CPU"
    return Work(resolved), None


@dataclass(frozen=True, eq=False)
class TableMoments:
    """What one pass over a table's valid rows gives."""

    rows: int  # rows read
    valid: np.ndarray  # bool (rows,): the rows that take part
    zero: int  # rows of zero norm, left out
    not_finite: int  # rows holding NaN or Inf (or whose squares overflow), left out
    left_out: tuple[int, ...]  # the first LEFT_OUT_LISTED left-out row ids
    mean: np.ndarray  # float64 (d,): the mean valid row
    unit_sum: np.ndarray  # float64 (d,): sum of the valid rows scaled to unit length
    unit_squares: np.ndarray  # float64 (d,): per dimension, the sum of the squares of those unit rows
    scatter: np.ndarray  # float64 (d, d): sum over valid rows of (w - mean)(w - mean)^T

    @property
    def used(self) -> int:
        return int(self.valid.sum())

    def uncentred(self) -> np.ndarray:
        """W^T W over the valid rows: the scatter plus n mean mean^T."""
        gram: np.ndarray = self.scatter + self.used * np.outer(self.mean, self.mean)
        return gram


def table_moments(rows: StoredRows, work: Work, progress: Progress | None = None) -> TableMoments:
    """One pass: which rows are valid, their mean, the sum of their unit rows and its squares, and the scatter.
    A table wider than MAX_SIDE is refused (TableError) before the pass."""
    check_side(rows.dim, "the scatter matrix of a table's rows")
    with np.errstate(over="ignore", invalid="ignore"):  # an overflowing row is counted (not finite), not warned of
        return _table_moments(rows, work, progress)


def _table_moments(rows: StoredRows, work: Work, progress: Progress | None) -> TableMoments:
    xp, dim = work.xp, rows.dim
    valid = np.zeros(rows.rows, dtype=bool)
    unit_sum, unit_squares, total, scatter = work.zeros(dim), work.zeros(dim), work.zeros(dim), work.zeros(dim, dim)
    shift = None
    zero = not_finite = 0
    left_out: list[int] = []
    size = block_size(rows)
    space, squares = work.space(size, dim), work.space(size, dim)
    for start, raw in rows.blocks(size):
        x = work.put(raw, space)
        norms = xp.sqrt(xp.einsum("ij,ij->i", x, x))
        finite = xp.isfinite(norms)
        ok = finite & (norms > 0)
        ok_host = work.host(ok)
        valid[start:start + len(ok_host)] = ok_host
        if progress is not None:
            progress(start + len(ok_host), rows.rows)
        if not ok_host.all():
            bad = np.flatnonzero(~ok_host)
            infinite = int((~work.host(finite)).sum())
            not_finite += infinite
            zero += len(bad) - infinite
            left_out += (start + bad[:max(LEFT_OUT_LISTED - len(left_out), 0)]).tolist()
            x, norms = x[ok], norms[ok]
        if len(norms) == 0:
            continue
        inverse = 1 / norms  # the unit rows' sums as products with weights 1 / |w|: no unit copy of the block
        unit_sum += inverse @ x
        unit_squares += (inverse * inverse) @ work.squares(x, squares)
        if shift is None:
            shift = x.mean(0)
        x -= shift
        total += x.sum(0)
        scatter += x.T @ x
    used = int(valid.sum())
    offset = total / used if used else total  # the mean less the shift
    if used:
        scatter -= used * (offset[:, None] * offset[None, :])
    mean = offset + shift if shift is not None else offset
    return TableMoments(rows.rows, valid, zero, not_finite, tuple(left_out), work.host(mean), work.host(unit_sum),
                        work.host(unit_squares), work.host((scatter + scatter.T) / 2))


@dataclass(frozen=True, eq=False)
class Projections:
    """What the second pass gives: log partition functions, and the rows in the all-but-the-top space."""

    log_z_plus: np.ndarray  # float64 (d,): log sum_i exp(c_j . w_i) for each direction c_j
    log_z_minus: np.ndarray  # float64 (d,): the same for -c_j
    residual_unit_sum: np.ndarray  # float64 (d,): sum of the unit residuals of the rows outside `removed`'s span
    residual_rows: int  # valid rows with a residual (the rest lie, to float64, in the removed directions)


def projections(rows: StoredRows, moments: TableMoments, directions: np.ndarray, removed: np.ndarray, work: Work,
                progress: Progress | None = None) -> Projections:
    """One pass over the valid rows: log Z(c) = log sum exp(c . w) for c = +- each column of `directions`, summed
    in log space (a running maximum per column) so that no exp overflows; and each row less the mean with its part
    in the span of `removed` (orthonormal columns) taken out, scaled to unit length and summed."""
    with np.errstate(over="ignore", invalid="ignore"):  # a float32 product that overflows is redone in float64
        return _projections(rows, moments, directions, removed, work, progress)


def _projections(rows: StoredRows, moments: TableMoments, directions: np.ndarray, removed: np.ndarray, work: Work,
                 progress: Progress | None) -> Projections:
    xp = work.xp
    count = directions.shape[1]
    basis, drop, mean = work.put(directions), work.put(removed), work.put(moments.mean)
    basis32 = work.single(basis)
    along = mean @ basis  # c . mean, in float64: the part of every projection the float32 product leaves out
    peak = {sign: work.full(-np.inf, count) for sign in (1, -1)}
    scaled = {sign: work.zeros(count) for sign in (1, -1)}
    residual_sum = work.zeros(rows.dim)
    residual_rows = 0
    size = block_size(rows)
    space, exponents = work.space(size, rows.dim), work.space(count, size)
    for start, raw in rows.blocks(size):
        ok = moments.valid[start:start + raw.shape[0]]
        if progress is not None:
            progress(start + raw.shape[0], rows.rows)
        if not ok.any():
            continue
        x = work.less(raw if ok.all() else raw[ok], mean, space)
        # the d x d product, the pass's whole cost, in float32 (twice the speed) on the rows less their mean, so
        # an offset costs no precision; the sums stay float64. Directions by rows (d, rows): each direction's sums
        # and maxima run along contiguous memory
        projected = basis32.T @ work.single(x).T
        if not bool(xp.isfinite(projected).all()):  # rows near float32's largest value: this block in float64
            projected = basis.T @ x.T
        for sign in (1, -1):
            peak[sign], scaled[sign] = exponential_sums(work, projected, along, sign, peak[sign], scaled[sign],
                                                        exponents)
        kept, unit_sum = residual_units(work, x, drop)
        residual_sum += unit_sum
        residual_rows += kept
    log_z = {sign: work.host(peak[sign] + xp.log(scaled[sign])) for sign in (1, -1)}
    return Projections(log_z[1], log_z[-1], work.host(residual_sum), residual_rows)


def exponential_sums(work: Work, projected: Any, along: Any, sign: int, peak: Any, scaled: Any,
                     space: np.ndarray | None = None) -> tuple[Any, Any]:
    """The running (peak, sum of exp(value - peak)) of each direction, values = sign (projected + along), this
    block of (d, rows) projections (float32, or float64) added: the peak of the block is taken on `projected` (the
    rounded sum keeps its order), and each exponent is made in one float64 operation, with no negated copy, into
    `space` when given."""
    xp = work.xp
    top = work.double(xp.amax(projected, 1) if sign == 1 else xp.amin(projected, 1)) + along
    new_peak = xp.maximum(peak, top if sign == 1 else -top)
    out = space[:, :projected.shape[1]] if space is not None else None
    if sign == 1:
        exponent = xp.add(projected, (along - new_peak)[:, None], out=out)
    else:
        exponent = xp.subtract(-(along + new_peak)[:, None], projected, out=out)
    exponentials = xp.exp(exponent, out=exponent)
    return new_peak, scaled * xp.exp(peak - new_peak) + exponentials.sum(1)


def residual_units(work: Work, x: Any, drop: Any) -> tuple[int, Any]:
    """Each row of `x` (float64) with its part in the span of `drop` (orthonormal columns) taken out: how many keep
    a part (RESIDUAL_TOLERANCE), and the sum of those parts at unit length, as products with weights 1 / |part|.
    |part|^2 = |x|^2 - |x . drop|^2, exact to a few roundings where the part keeps half the row or more; a row
    closer to the span has its part made and measured (the difference would cancel)."""
    xp = work.xp
    squares = xp.einsum("ij,ij->i", x, x)
    inside = x @ drop
    left = squares - xp.einsum("ij,ij->i", inside, inside)
    near = left < squares / 2
    part = x[near] - inside[near] @ drop.T
    left[near] = xp.einsum("ij,ij->i", part, part)
    residual = xp.sqrt(left)
    keep = residual > RESIDUAL_TOLERANCE * xp.sqrt(squares)
    weights = xp.where(keep, 1 / xp.where(keep, residual, 1.0), 0.0)
    # the near rows' parts summed as made (x less its span would cancel), the rest as x less its span of the sum
    near_sum = weights[near] @ part
    weights[near] = 0.0
    return int(keep.sum()), near_sum + (weights @ x - (weights @ inside) @ drop.T)


def project_out(rows: StoredRows, mean: np.ndarray, removed: np.ndarray) -> np.ndarray:
    """float32 (rows, d): each row less `mean`, with its part in the span of `removed` (orthonormal columns) taken
    out, worked in float64 block by block on the host (the work is rows x d x D, D small). A zero row stays zero:
    a row with no direction gets none there either."""
    out = np.empty((rows.rows, rows.dim), dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):  # a NaN row stays NaN, and has no cosine
        for start, raw in rows.blocks(block_rows(rows.dim)):
            zero = (raw == 0).all(axis=1)
            x = np.asarray(raw, dtype=np.float64) - mean
            x -= (x @ removed) @ removed.T
            x[zero] = 0.0
            out[start:start + len(x)] = x
    return out


@dataclass(frozen=True, eq=False)
class CrossMoments:
    """The column-centred products of two tables' paired rows: X^T X, Y^T Y and Y^T X, over the pairs finite in both."""

    rows: int  # pairs used
    xx: np.ndarray  # float64 (d1, d1)
    yy: np.ndarray  # float64 (d2, d2)
    yx: np.ndarray  # float64 (d2, d1)


def cross_moments(pairs: Iterator[tuple[np.ndarray, np.ndarray]], dim_x: int, dim_y: int, work: Work) -> CrossMoments:
    """Each (block of X, block of Y) pair of row blocks, summed about the first block's means and centred at the end."""
    with np.errstate(over="ignore", invalid="ignore"):  # a float32 product that overflows is redone in float64
        return _cross_moments(pairs, dim_x, dim_y, work)


def _cross_moments(pairs: Iterator[tuple[np.ndarray, np.ndarray]], dim_x: int, dim_y: int, work: Work) -> CrossMoments:
    # one (d1 + d2) square of sums: [X Y]^T [X Y] holds X^T X, Y^T Y and Y^T X (and X^T Y, which goes unused)
    gram, total = work.zeros(dim_x + dim_y, dim_x + dim_y), work.zeros(dim_x + dim_y)
    shift = None
    used = 0
    stacked: np.ndarray | None = None  # the float32 [X Y] block of the numpy path, its buffer reused
    for raw_x, raw_y in pairs:
        if shift is None:
            shift = _first_shift(raw_x, raw_y, work)
            if shift is None:
                continue  # no pair of this block is finite in both
        if not work.torch:
            if stacked is None or len(stacked) < len(raw_x):
                stacked = np.empty((len(raw_x), dim_x + dim_y), dtype=np.float32)
            rows = _stacked_block(raw_x, raw_y, shift, stacked[:len(raw_x)], gram, total)
            if rows is not None:
                used += rows
                continue
        used += _widened_block(raw_x, raw_y, shift, gram, total, work)
    if used:
        mean = total / used
        gram -= used * (mean[:, None] * mean[None, :])
    xx, yy, yx = gram[:dim_x, :dim_x], gram[dim_x:, dim_x:], gram[dim_x:, :dim_x]
    return CrossMoments(used, work.host(xx), work.host(yy), work.host(yx))


def _first_shift(raw_x: np.ndarray, raw_y: np.ndarray, work: Work) -> Any:
    """The means of the first block's pairs finite in both tables, [x y] in one float64 vector: the sums are taken
    about them (None when no pair of the block is finite)."""
    xp = work.xp
    x, y = work.put(raw_x), work.put(raw_y)
    finite = xp.isfinite(x).all(1) & xp.isfinite(y).all(1)
    if not bool(finite.any()):
        return None
    return xp.concatenate([x[finite].mean(0), y[finite].mean(0)])


def _stacked_block(raw_x: np.ndarray, raw_y: np.ndarray, shift: np.ndarray, stacked: np.ndarray, gram: np.ndarray,
                   total: np.ndarray) -> int | None:
    """The numpy path's block: [X Y] less the shift, rounded to float32 once into `stacked`, and its one product
    [X Y]^T [X Y] (a matrix times its own transpose, which numpy hands to BLAS's syrk: half a general product's
    work), summed into float64. None, and nothing summed, when a value or the product is not finite (a NaN row, or
    rows near float32's limit): the caller works that block in float64."""
    dim_x = raw_x.shape[1]
    np.subtract(raw_x, shift[:dim_x], out=stacked[:, :dim_x], casting="same_kind")
    np.subtract(raw_y, shift[dim_x:], out=stacked[:, dim_x:], casting="same_kind")
    product = stacked.T @ stacked
    if not np.isfinite(product).all():  # a NaN or Inf anywhere in the block reaches the diagonal
        return None
    gram += product
    total += stacked.sum(0, dtype=np.float64)
    return len(stacked)


def _widened_block(raw_x: np.ndarray, raw_y: np.ndarray, shift: Any, gram: Any, total: Any, work: Work) -> int:
    """A block in float64 where the work runs: its pairs finite in both tables, less the shift; the three d x d
    products in float32 (twice the speed), summed in float64, or in float64 where float32's overflow."""
    xp = work.xp
    dim_x = raw_x.shape[1]
    x, y = work.put(raw_x), work.put(raw_y)
    finite = xp.isfinite(x).all(1) & xp.isfinite(y).all(1)
    if not bool(finite.all()):
        x, y = x[finite], y[finite]
    if x.shape[0] == 0:
        return 0
    x -= shift[:dim_x]
    y -= shift[dim_x:]
    total[:dim_x] += x.sum(0)
    total[dim_x:] += y.sum(0)
    x32, y32 = (x.float(), y.float()) if work.torch else (x.astype(np.float32), y.astype(np.float32))
    products = (x32.T @ x32, y32.T @ y32, y32.T @ x32)
    if not all(bool(xp.isfinite(p).all()) for p in products):  # rows near float32's limit: in float64
        products = (x.T @ x, y.T @ y, y.T @ x)
    xx, yy, yx = (product.double() if work.torch else product for product in products)
    gram[:dim_x, :dim_x] += xx
    gram[dim_x:, dim_x:] += yy
    gram[dim_x:, :dim_x] += yx
    return int(x.shape[0])
