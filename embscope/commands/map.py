"""`embscope map`: a 2-D map of a table (PCA, or UMAP), probe words placed on it, flagged rows marked."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from ..analysis.map import table_map
from ..errors import EmbscopeError
from ..render import map as render
from ..roles import Role
from .options import JsonFlag, Source, with_source


class Method(str, Enum):
    pca = "pca"
    umap = "umap"


def check_plot(plot: str | None) -> None:
    """A --plot FILE names a format and an existing folder: checked before any work."""
    if not plot:
        return
    from ..render.plots import plot_format
    try:
        plot_format(Path(plot))
    except EmbscopeError as err:
        raise typer.BadParameter(str(err), param_hint="'--plot'") from None
    if not Path(plot).parent.is_dir():
        raise typer.BadParameter(f"expected an existing directory for the plot file, found none: "
                                 f"{Path(plot).parent}", param_hint="'--plot'")


def map_command(
    source: Source,
    table: Annotated[Role, typer.Option(
        "--table", help="The table to map; position: its path through the first two components, coloured by "
                        "position.")] = Role.token,
    method: Annotated[Method, typer.Option(
        "--method", help="pca: numpy's SVD of the centred rows; umap: UMAP (needs umap-learn, the [umap] "
                         "extra).")] = Method.pca,
    words: Annotated[str | None, typer.Option(
        "--words", metavar="W1,W2,...", help="Probe words to place on the map (default: a handful of frequent "
                                             "one-token words the tokenizer has).", show_default=False)] = None,
    exact: Annotated[bool, typer.Option(
        "--exact", help="Encode each word exactly as typed, without a leading space.")] = False,
    plot: Annotated[str | None, typer.Option(
        "--plot", metavar="[FILE]", show_default=False,
        help="Draw the map to FILE (.png, .svg or .pdf); alone, to <checkpoint>-<table>-map.png in the working "
             "directory.")] = None,
    json: JsonFlag = False,
) -> None:
    """A 2-D map of a table: the explained variance of two principal components and where the probe words
    (or positions) lie; --plot draws every row, flagged rows in red, probe words labelled."""
    check_plot(plot)
    probe_words = [w.strip() for w in words.split(",") if w.strip()] if words is not None else None
    if words is not None and not probe_words:
        raise typer.BadParameter("expected words separated by commas, found none", param_hint="'--words'")
    emb = source.open()
    result = table_map(emb, table, method=method.value, words=probe_words, exact=exact)
    target = render.plot_target(plot, emb, table)
    if target is not None:
        render.draw(emb, result, target)
    render.show(emb, result, target, json)


def register(app: typer.Typer) -> None:
    app.command("map")(with_source(map_command))
