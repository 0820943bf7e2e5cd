"""`embscope map` for people (rich), for programs (one JSON document), and as a plot (matplotlib's Agg canvas,
imported only when drawing, no pyplot)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..analysis.map import Point, TableMap
from ..core.errors import Message, Option
from ..core.role import Role
from . import console, header, plots
from .files import input_files
from .flags import as_flags
from .jsonout import Document
from .label_placement import place_labels
from .lookup_notes import grouped_notes
from .names import Output, emb_title
from .norms import untrained_document, untrained_line
from .plot_style import drawable, wrapped

if TYPE_CHECKING:
    from ..embeddings import Embeddings

JSON_LISTED = 1000  # flagged rows listed in --json, with the total
# rows a plot draws (and --json lists of the position path) at most, evenly spaced: Agg cannot draw a path
# through millions of points (OverflowError), and a scatter of them takes GBs; flagged rows past it are the
# least extreme
MAX_DRAWN = 100_000


def thinned(rows: np.ndarray) -> tuple[np.ndarray, int]:
    """Every step-th of `rows`, at most MAX_DRAWN of them, and the step."""
    step = -(-len(rows) // MAX_DRAWN) if len(rows) > MAX_DRAWN else 1
    return rows[::step], step

def axis_names(result: TableMap) -> tuple[str, str]:
    return ("pc1", "pc2") if result.projection.method == "pca" else ("umap1", "umap2")


def method_text(result: TableMap) -> tuple[str, str]:
    """The method, and how it was run."""
    if result.projection.method == "umap":
        return "UMAP", "cosine metric"
    routes = {"svd": "numpy SVD", "covariance": "d x d covariance, eigh", "gram": "n x n Gram matrix, eigh",
              "sampled gram": f"Gram matrix of {result.projection.sampled or 0:,} sampled rows, eigh"}
    return "PCA", "centred rows, " + routes[result.projection.route]


def variance_text(result: TableMap) -> str | None:
    projection = result.projection
    if projection.variance is None or projection.ratio is None:  # UMAP, or nothing to explain (a note says so)
        return None
    (v1, v2), (r1, r2) = projection.variance, projection.ratio
    return (f"component 1 explains {r1:.2%} of the variance ({v1:.4g}), component 2 {r2:.2%} ({v2:.4g}); "
            f"together {r1 + r2:.2%}")


def point_doc(p: Point) -> Document:
    return {"label": p.label, "ids": list(p.ids), "tokens": list(p.tokens), "x": p.x, "y": p.y, "note": p.note}


def document(result: TableMap, plot: Output | None) -> Document:
    projection = result.projection
    doc: dict[str, Any] = {
        "table": result.role.value, "table_name": result.name, "rows": result.rows, "dim": result.dim,
        "method": projection.method, "route": projection.route, "used": projection.used,
        "left_out": projection.left_out.tolist(),
        "explained_variance": list(projection.variance) if projection.variance else None,
        "explained_variance_ratio": list(projection.ratio) if projection.ratio else None,
        "probes": [point_doc(p) for p in result.points], "probe_rule": result.probe_rule,
        "flagged": [{"id": f.id, "label": f.label, "x": f.x, "y": f.y, "reason": f.reason}
                    for f in result.flagged[:JSON_LISTED]],
        "flagged_found": len(result.flagged), "untrained": untrained_document(result.untrained),
        "plot": None, "notes": list(result.notes),
    }
    if plot is not None:
        doc |= plot.fields()
    if result.role is Role.position:  # the path in position order, evenly thinned past MAX_DRAWN points
        coords = projection.coords
        every = max(1, -(-(result.rows - result.first_row) // MAX_DRAWN))
        doc["path"] = [{"position": row - result.first_row, "row": row, "x": coords[row, 0], "y": coords[row, 1]}
                       for row in range(result.first_row, result.rows, every)]
        doc["path_every"] = every
    return doc


def coordinate(value: float | None) -> str:
    return "-" if value is None else f"{value:+.4f}"


def show(emb: Embeddings, result: TableMap, plot: Output | None, json: bool) -> None:
    if json:
        header.emit(document(result, plot), emb)
        return
    out = console.out
    header.show(emb)
    method, how = method_text(result)
    out.print(f"{method} of the {result.role} table '{console.safe(result.name)}': {result.projection.used:,} rows "
              f"x {result.dim} ({how})", soft_wrap=True)
    variance = variance_text(result)
    if variance:
        out.print(variance)
    x_name, y_name = axis_names(result)
    what = "position" if result.role is Role.position else "word"
    if result.points:
        out.print(f"{what}s on the map: {console.safe(result.probe_rule)}", soft_wrap=True)
        columns = (what, x_name, y_name) if result.role is Role.position else (what, "tokens", x_name, y_name)
        grid = console.table(*columns)
        for p in result.points:
            cells = [console.safe(p.label)]
            if result.role is not Role.position:
                cells.append(console.tokens_text(p.ids, p.tokens))
            grid.add_row(*cells, coordinate(p.x), coordinate(p.y))
        out.print(grid)
    else:
        out.print(console.safe(result.probe_rule))
    flagged = len(result.flagged)
    out.print(console.safe(untrained_line(result.untrained)), soft_wrap=True)
    out.print(as_flags(Message(f"{flagged:,} row{'s' * (flagged != 1)} flagged as norm anomalies (the rule of "
                               "`embscope norms`)", ", drawn in red" if plot is not None
                               else Message("; ", Option("plot"), " draws them in red"))))
    if plot is not None:
        out.print(console.safe(plot.written()), soft_wrap=True)
    console.notes([*grouped_notes((p.label, p.note) for p in result.points), *result.notes])


def draw(emb: Embeddings, result: TableMap, target: Output) -> None:
    """Write the map to a plot file (never over a file the answer was read from)."""
    plots.save(lambda: map_figure(result, emb_title(emb)), target, inputs=input_files(emb))


def map_figure(result: TableMap, checkpoint: str) -> Any:  # a matplotlib Figure: matplotlib is imported only to draw
    """Every row a dot, flagged rows ringed in red, probe words labelled; for the position table, the path
    through the positions coloured by position."""
    figure = plots.new_figure(9, 7.5)
    ax = figure.subplots()
    coords = result.projection.coords
    x_name, y_name = axis_names(result)
    ratio = result.projection.ratio
    ax.set_xlabel(x_name.upper() + (f" ({ratio[0]:.1%} of variance)" if ratio else ""))
    ax.set_ylabel(y_name.upper() + (f" ({ratio[1]:.1%} of variance)" if ratio else ""))
    ax.set_title(wrapped(f"{drawable(checkpoint)} - {result.role} table {drawable(result.name)}: "
                         f"{' ('.join(method_text(result))})", 8.0), parse_math=False)
    flagged = result.flagged.indices
    flagged = flagged[np.isfinite(coords[flagged]).all(axis=1)]  # rows left off the map are not drawn
    if result.role is Role.position:
        path_rows, step = thinned(np.arange(result.first_row, result.rows))
        ax.plot(coords[path_rows, 0], coords[path_rows, 1], color="grey", linewidth=0.6, zorder=1)
        dots = ax.scatter(coords[path_rows, 0], coords[path_rows, 1], c=path_rows - result.first_row, cmap="viridis",
                          s=14, zorder=2)
        plots.colour_bar(figure, dots, ax, "position")
        if step > 1:
            ax.text(0.01, 0.01, f"1 position in {step:,} drawn", transform=ax.transAxes, fontsize=8)
    else:
        rows, step = thinned(np.arange(len(coords)))
        drawn = f"; 1 in {step:,} drawn" if step > 1 else ""
        ax.scatter(coords[rows, 0], coords[rows, 1], s=4, color="tab:blue", alpha=0.5, linewidths=0,
                   label=f"rows ({result.projection.used:,}{drawn})")
    if len(flagged):
        drawn = f"; the {MAX_DRAWN:,} most extreme drawn" if len(flagged) > MAX_DRAWN else ""
        ax.scatter(coords[flagged[:MAX_DRAWN], 0], coords[flagged[:MAX_DRAWN], 1], s=40, facecolors="none",
                   edgecolors="tab:red", linewidths=1.0, zorder=3, label=f"norm anomalies ({len(flagged):,}{drawn})")
    shown = [(p.label if result.role is not Role.position else f"position {p.label}", p.x, p.y)
             for p in result.points if p.x is not None and p.y is not None]
    for _, x, y in shown:
        ax.plot([x], [y], "o", color="black", markersize=4, zorder=4)
    if result.role is not Role.position or len(flagged):
        ax.legend(loc="best", fontsize=8)
    place_labels(figure, ax, shown)  # last: the layout is fixed with everything else in place
    return figure
