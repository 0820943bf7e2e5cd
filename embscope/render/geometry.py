"""`geometry` results for people (a few lines and two small tables) and for programs (one JSON document)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..analysis.geometry import TOP_SHARES, Geometry
from ..core.role import Role
from . import console, header
from .console import cosine_text as cosine
from .console import number_text as number
from .console import percent, rows_text
from .jsonout import Document
from .names import Output

if TYPE_CHECKING:
    from ..embeddings import Embeddings

NOT_POSITIONS = "periods are measured along the positions of a position table"


def reasons(found: Geometry) -> dict[str, str]:
    """Why each undefined figure is null."""
    found_reasons = dict(found.reasons)
    if found.role != Role.position:
        found_reasons["periods"] = NOT_POSITIONS
    return found_reasons


def document(found: Geometry, plot: Output | None = None) -> Document:
    spectrum = found.spectrum
    periods = found.periods
    doc: dict[str, Any] = {
        "table": found.role, "name": found.name, "rows": found.rows, "first_row": found.first_row, "dim": found.dim,
        "rows_used": found.used,
        "left_out": {"zero": found.zero_rows, "not_finite": found.not_finite_rows,
                     "ids": [row + found.first_row for row in found.left_out]},
        "mean_cosine": found.mean_cosine,
        "dimensions": [{"dim": d.dim, "contribution": d.contribution, "share": d.share} for d in found.dimensions],
        "share_rule": found.share_rule,
        "spectrum": {
            **{f"top{k}_share": spectrum.shares[k] if spectrum else None for k in TOP_SHARES},
            "effective_rank": spectrum.effective_rank if spectrum else None,
            "participation_ratio": spectrum.participation_ratio if spectrum else None,
            "singular_values": spectrum.singular_values if spectrum else None},
        "partition_isotropy": found.partition_isotropy,
        "isoscore": found.isoscore,
        "all_but_the_top": {"removed": found.removed, "mean_cosine": found.abtt_mean_cosine, "rows": found.abtt_rows},
        "periods": [{"period": p.period, "frequency": p.frequency, "share": p.share} for p in periods]
        if periods is not None else None,
        "device": found.device, "reasons": reasons(found), "notes": list(found.notes),
    }
    if plot is not None:
        doc |= plot.fields()
    return doc


def undefined(value: float | None, found: Geometry, key: str, text: str) -> str:
    return text if value is not None else f"null ({found.reasons.get(key, 'undefined')})"


def spectrum_line(found: Geometry) -> str:
    spectrum = found.spectrum
    if spectrum is None:
        return f"spectrum of the centred table: null ({found.reasons.get('spectrum', 'undefined')})"
    shares = ", ".join(f"top {k}: {percent(spectrum.shares[k])}" for k in TOP_SHARES)
    return (f"spectrum of the centred table (the rows less their mean): share of the variance in the {shares}; "
            f"effective rank {number(spectrum.effective_rank)} of {found.dim}; participation ratio "
            f"{number(spectrum.participation_ratio)}")


def show(emb: Embeddings, found: Geometry, *, top: int, json: bool, plot: Output | None) -> None:
    if json:
        header.emit(document(found, plot), emb)
        return
    header.show(emb)
    out = console.out
    reserved = f" ({found.first_row} reserved rows before position 0 left out)" if found.first_row else ""
    used = "all used" if found.used == found.rows - found.first_row else f"{found.used:,} used"
    out.print(f"{found.role} table {console.safe(repr(found.name))}: {found.rows:,} rows x {found.dim}{reserved}, "
              f"{used}", soft_wrap=True)
    pairs = found.used * (found.used - 1) // 2
    out.print("mean cosine between distinct rows: " + undefined(
        found.mean_cosine, found, "mean_cosine", f"{cosine(found.mean_cosine)} (exact, over all {pairs:,} pairs)"),
        soft_wrap=True)
    if found.mean_cosine is not None:
        out.print(f"dimensions by their part of the mean cosine (Timkey & van Schijndel 2021), the "
                  f"{min(top, found.dim)} of {found.dim} with the largest share:", soft_wrap=True)
        grid = console.table("dim", "contribution", "share")
        for d in found.dimensions[:top]:
            grid.add_row(str(d.dim), f"{d.contribution:+.4g}", percent(d.share) if d.share is not None else "null")
        out.print(grid)
        out.print(f"share: {found.share_rule}", soft_wrap=True)
    out.print(spectrum_line(found), soft_wrap=True)
    out.print("partition-function isotropy (Mu & Viswanath 2018; 1 = isotropic): " + undefined(
        found.partition_isotropy, found, "partition_isotropy", number(found.partition_isotropy)), soft_wrap=True)
    out.print("IsoScore (Rudman et al. 2022; 1 = isotropic): " + undefined(
        found.isoscore, found, "isoscore", number(found.isoscore)), soft_wrap=True)
    directions = f"{found.removed} direction{'s' * (found.removed != 1)}"
    out.print(f"all-but-the-top (the mean row and the top {directions} removed): mean cosine " + undefined(
        found.abtt_mean_cosine, found, "all_but_the_top",
        f"{cosine(found.abtt_mean_cosine)} over {rows_text(found.abtt_rows)}"), soft_wrap=True)
    periods = found.periods
    if periods is not None:
        out.print(f"periods along the {found.rows - found.first_row:,} positions (rfft of the centred table), the "
                  f"largest {min(top, len(periods))} of {len(periods)}:", soft_wrap=True)
        grid = console.table("period T/k", "frequency k", "share of power")
        for p in periods[:top]:
            grid.add_row(f"{p.period:.4g}", str(p.frequency), percent(p.share))
        out.print(grid)
    elif found.role == Role.position:
        out.print(f"periods: null ({found.reasons.get('periods', 'undefined')})", soft_wrap=True)
    if plot is not None:
        out.print(console.safe(plot.written()), soft_wrap=True)
    console.notes(found.notes)
