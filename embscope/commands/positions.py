"""`embscope positions`: cosine between position rows, and how similarity falls with distance."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..analysis.positions import PositionProfile, default_pairs, parse_pairs, position_pairs, position_profile
from ..errors import EmbscopeError
from ..render import console, jsonout
from .options import JsonFlag, Source, with_source

PAIRS_HELP = ("Position pairs I:J,I:J,... (e.g. 10:11,10:500), or 'default' for a set of near and far pairs "
              "that spans the table. Without --pairs and --profile the default set is shown.")


def pairs_option(text: str | None, profile: bool) -> list[tuple[int, int]] | str | None:
    """The pairs the user asked for; "default" for the default set; None for no pairs."""
    if text is None:
        return None if profile else "default"
    if text.strip().lower() == "default":
        return "default"
    try:
        return parse_pairs(text)
    except EmbscopeError as err:
        raise typer.BadParameter(str(err), param_hint="'--pairs'") from None


def check_plot_option(plot: Path | None) -> None:
    if plot is not None:
        from ..render.plots import plot_format  # the module imports matplotlib only when drawing
        try:
            plot_format(plot)
        except EmbscopeError as err:
            raise typer.BadParameter(str(err), param_hint="'--plot'") from None


def profile_doc(profile: PositionProfile) -> dict:
    return {
        "offsets": [{"offset": s.offset, "mean": s.mean, "std": s.std, "pairs": s.pairs} for s in profile.summary()],
        "nearest_is_adjacent": profile.nearest_is_adjacent,
        "positions_counted": profile.positions_counted,
        "by_offset": {"offset": profile.offsets, "mean": profile.mean, "std": profile.std, "pairs": profile.count},
    }


def positions(
    source: Source,
    pairs: Annotated[str | None, typer.Option("--pairs", metavar="I:J,...|default", help=PAIRS_HELP)] = None,
    profile: Annotated[bool, typer.Option(
        "--profile", help="Print the mean and spread of cos(p_i, p_i+k) by distance k, and how often a position's "
                          "nearest neighbour is adjacent. It does not change --plot, which always draws this curve.")] = False,
    plot: Annotated[Path | None, typer.Option(
        "--plot", metavar="FILE", help="Draw the cosine heatmap and the similarity-by-distance curve to FILE "
                                       "(.png, .svg or .pdf).")] = None,
    json: JsonFlag = False,
) -> None:
    """Cosine between learned position rows: chosen pairs, a near-to-far default set, or a profile by distance.

    Position p is table row p + first_row (OPT and RoBERTa keep 2 rows before position 0)."""
    chosen = pairs_option(pairs, profile)
    check_plot_option(plot)
    emb = source.open()
    table = emb.require_position()
    array, first_row = table.array, table.first_row
    count = max(table.rows - first_row, 0)
    notes = list(table.notes)
    report = None
    if chosen is not None:
        report = position_pairs(array, default_pairs(count) if isinstance(chosen, str) else chosen, first_row,
                                table.name)
        if not report.pairs:
            notes.append(f"the table has {count} position(s): no pair to compare")
    found_profile = None
    if profile or plot is not None:
        found_profile, matrix = position_profile(array, first_row)
        if plot is not None:
            from ..render import plots
            figure = plots.positions_figure(matrix, found_profile.mean, found_profile.std,
                                            found_profile.nearest_is_adjacent, emb.checkpoint.path.name, table.name)
            plots.save(figure, plot)
        del matrix
    if json:
        doc = {"table": table.name, "rows": table.rows, "first_row": first_row, "positions": count,
               "pairs": [{"i": p.i, "j": p.j, "distance": p.distance, "cosine": p.cosine, "reason": p.reason}
                         for p in (report.pairs if report else ())]}
        if found_profile is not None and profile:
            doc["profile"] = profile_doc(found_profile)
        if plot is not None:
            doc["plot"] = str(plot)
        doc["notes"] = notes
        jsonout.emit(doc)
        return
    out = console.out
    out.print(f"position table {console.safe(table.name)}: {count} positions x {table.dim}")
    if report is not None and report.pairs:
        grid = console.table("i", "j", "distance", "cosine")
        for p in report.pairs:
            grid.add_row(str(p.i), str(p.j), str(p.distance), console.cosine_text(jsonout.clean(p.cosine)))
        out.print(grid)
        notes += [p.reason for p in report.pairs if p.reason]
    if found_profile is not None and profile:
        print_profile(found_profile)
    if plot is not None:
        out.print(f"plot written to {console.safe(plot)}")
    console.notes(notes)


def print_profile(profile: PositionProfile) -> None:
    grid = console.table("distance k", "mean cos(p_i, p_i+k)", "std", "pairs", title="similarity by distance")
    for s in profile.summary():
        grid.add_row(str(s.offset), console.cosine_text(jsonout.clean(s.mean)), f"{s.std:.4f}", str(s.pairs))
    console.out.print(grid)
    share = jsonout.clean(profile.nearest_is_adjacent)
    console.out.print(f"nearest neighbour is i-1 or i+1 for {console.percent(share)} of "
                      f"{profile.positions_counted} positions")


def register(app: typer.Typer) -> None:
    app.command()(with_source(positions))
