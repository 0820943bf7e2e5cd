"""`positions` results: pair cosines and the profile by distance, for people and for programs, and the plot."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..analysis.positions import PositionProfile, PositionsResult
from . import console, header, jsonout, plots
from .jsonout import Document
from .names import Output, emb_title

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ..embeddings import Embeddings


def profile_doc(profile: PositionProfile) -> Document:
    return {
        "offsets": [{"offset": s.offset, "mean": s.mean, "std": s.std, "pairs": s.pairs} for s in profile.summary()],
        "nearest_is_adjacent": profile.nearest_is_adjacent,
        "positions_counted": profile.positions_counted, "sampled_every": profile.sampled_every,
        "by_offset": {"offset": profile.offsets, "mean": profile.mean, "std": profile.std, "pairs": profile.count},
    }


def document(result: PositionsResult, *, profile: bool, plot: Output | None) -> Document:
    doc: dict[str, Any] = {
        "table": result.table, "rows": result.rows, "first_row": result.first_row, "positions": result.positions,
        "pairs": [{"i": p.i, "j": p.j, "distance": p.distance, "cosine": p.cosine, "reason": p.reason,
                   "never_trained": p.never_trained}
                  for p in result.pairs]}
    if profile and result.profile is not None:
        doc["profile"] = profile_doc(result.profile)
        doc["trained_profile"] = None if result.trained is None else profile_doc(result.trained)
    if plot is not None:
        doc |= plot.fields()
    doc["notes"] = list(result.notes)
    return doc


def figure(emb: Embeddings, result: PositionsResult) -> Figure:
    """The heatmap beside the similarity-by-distance curve."""
    assert result.profile is not None and result.heatmap is not None
    profile = result.profile
    return plots.positions_figure(result.heatmap, profile.mean, profile.std, profile.nearest_is_adjacent,
                                  emb_title(emb), result.table)


def draw(emb: Embeddings, result: PositionsResult, target: Output, inputs: list[Path]) -> None:
    """The figure written to `target`."""
    plots.save(lambda: figure(emb, result), target, inputs=inputs)


def show(emb: Embeddings, result: PositionsResult, *, json: bool, profile: bool, plot: Output | None) -> None:
    if json:
        header.emit(document(result, profile=profile, plot=plot), emb)
        return
    header.show(emb)
    out = console.out
    out.print(f"position table {console.safe(result.table)}: {result.positions} positions x {result.dim}")
    notes = list(result.notes)
    if result.pairs:
        marked = any(p.never_trained for p in result.pairs)
        grid = console.table("i", "j", "distance", "cosine", *(("never trained",) if marked else ()))
        for p in result.pairs:
            grid.add_row(str(p.i), str(p.j), str(p.distance), console.cosine_text(p.cosine),
                         *(("yes" if p.never_trained else "",) if marked else ()))
        out.print(grid)
        notes += [p.reason for p in result.pairs if p.reason]
    if profile and result.profile is not None:
        show_profile(result.profile)
    if plot is not None:
        out.print(console.safe(plot.written()), soft_wrap=True)
    console.notes(notes)


def show_profile(profile: PositionProfile) -> None:
    grid = console.table("distance k", "mean cos(p_i, p_i+k)", "std", "pairs", title="similarity by distance")
    for s in profile.summary():
        std = jsonout.clean(s.std)
        grid.add_row(str(s.offset), console.cosine_text(s.mean), "null" if std is None else f"{std:.4f}", str(s.pairs))
    console.out.print(grid)
    share = jsonout.clean(profile.nearest_is_adjacent)
    console.out.print(f"nearest neighbour is i-1 or i+1 for {console.percent(share)} of "
                      f"{profile.positions_counted} positions")
    if profile.sampled_every > 1:
        console.notes([sampled_note(profile)])


def sampled_note(profile: PositionProfile) -> str:
    return (f"the table is too long to compare every pair of positions: the profile and the nearest-neighbour "
            f"share come from every {profile.sampled_every}th block of positions, each compared with all later ones")
