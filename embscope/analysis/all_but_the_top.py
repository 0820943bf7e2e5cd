"""The all-but-the-top space (Mu & Viswanath 2018): every row less the table's mean row, with its part along the
top D principal directions of the centred table taken out. `similarity` and `neighbors` ask in it with
`--remove-top D`; `geometry` reports the mean cosine there with D = d / 100."""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from ..compute.moments import StoredRows, project_out, table_moments, work_for
from ..core.errors import OptionError, TableError
from .geometry_spectra import variances


@dataclass(frozen=True, eq=False)
class RemovedTop:
    removed: int  # principal directions taken out
    share: float  # their share of the centred table's variance
    table: np.ndarray  # float32 (V, d): the rows in the all-but-the-top space

    def describe(self, table: str) -> str:
        """One line: what the cosines were computed on."""
        return (f"cosines in the all-but-the-top space of the {table} table: the mean row and the top {self.removed} "
                f"principal direction{'s' * (self.removed != 1)} ({self.share:.2%} of the centred variance) removed "
                "from every row")


def remove_top(table: np.ndarray, removed: int, *, device: str = "auto") -> RemovedTop:
    """The rows of `table` in the all-but-the-top space with `removed` directions taken out. The mean and the
    directions are those of the rows with a direction (zero, NaN and Inf rows are left out of them); a zero row stays
    zero and a row holding NaN or Inf stays so: neither has a cosine there."""
    dim = table.shape[1]
    # 1.5 and "3" raised TypeError from numpy, True removed one direction
    if isinstance(removed, bool) or not isinstance(removed, numbers.Integral) or not 1 <= removed < dim:
        raise OptionError(f"expected a number of directions to remove from 1 to {dim - 1} (the table is {dim} wide), "
                          f"found {removed!r}", option="remove_top")
    work, _ = work_for(device)
    rows = StoredRows(table)
    moments = table_moments(rows, work)
    if moments.used < 2:
        raise TableError(f"expected 2 or more rows with a direction to find principal directions, found "
                         f"{moments.used}")
    squares, directions = variances(moments.scatter, work)
    total = float(squares.sum())
    share = float(squares[:removed].sum() / total) if total > 0 else 0.0
    return RemovedTop(removed, share, project_out(rows, moments.mean, directions[:, :removed]))
