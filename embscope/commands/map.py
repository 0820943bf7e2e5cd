"""`embscope map`: a 2-D map of a table (PCA, or UMAP), probe words placed on it, flagged rows marked."""

from enum import Enum
from typing import Annotated

import typer

from ..analysis.map import table_map
from ..core.role import Role
from ..render import map as render
from ..render.progress import stages
from .command import SourceCommand
from .options import ExactFlag, JsonFlag, check_lookup_flags, parse_words, source_of
from .plot_option import PlotOption, check_plot, plot_path


class Method(str, Enum):
    pca = "pca"
    umap = "umap"


def map_command(
    ctx: typer.Context,
    table: Annotated[Role, typer.Option(
        "--table", help="The table to map; position: its path through the first two components, coloured by "
                        "position.")] = Role.token,
    method: Annotated[Method, typer.Option(
        "--method", help="pca: numpy's SVD of the centred rows; umap: UMAP (needs umap-learn, the [umap] "
                         "extra).")] = Method.pca,
    words: Annotated[str | None, typer.Option(
        "--words", metavar="W1,W2,...", help="Probe words to place on the map (default: a handful of frequent "
                                             "one-token words the tokenizer has).", show_default=False)] = None,
    exact: ExactFlag = False,
    plot: PlotOption = None,
    json: JsonFlag = False,
) -> None:
    """A 2-D map of a table: the explained variance of two principal components and where the probe words
    (or positions) lie; --plot draws every row, flagged rows in red, probe words labelled."""
    source = source_of(ctx)
    check_lookup_flags("the position table's points are positions" if table is Role.position else None, exact=exact)
    check_plot(plot)
    probe_words = parse_words(words)
    emb = source.open()
    with stages() as stage:  # UMAP's import and fit take tens of seconds
        result = table_map(emb, table, method=method.value, words=probe_words, exact=exact, stages=stage)
    target = plot_path(plot, emb.checkpoint.path, table.value, "map")
    if target is not None:
        render.draw(emb, result, target)
    render.show(emb, result, target, json)


def register(app: typer.Typer) -> None:
    app.command("map", cls=SourceCommand)(map_command)
