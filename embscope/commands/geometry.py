"""`embscope geometry`: the shape of a whole table (mean cosine and each dimension's part of it, the spectrum,
partition-function isotropy, IsoScore, all-but-the-top, a position table's periods)."""

from typing import Annotated

import typer

from ..analysis.geometry import geometry
from ..core.role import Role
from ..render import geometry as render
from ..render.files import input_files
from ..render.geometry_plot import draw
from ..render.progress import stages
from .command import SourceCommand
from .device_options import AUTO_DEVICE, DeviceOption
from .options import JsonFlag, source_of
from .plot_option import PlotOption, check_plot, plot_path

LISTED = 10  # shown in --help: dimensions and periods listed in the console


def geometry_command(
    ctx: typer.Context,
    table: Annotated[Role, typer.Option(
        "--table", help="Which table: token, position, or output (an untied head).")] = Role.token,
    top: Annotated[int, typer.Option("--top", min=1, help="How many dimensions and periods to list (--json lists all).")] = LISTED,
    plot: PlotOption = None,
    device: DeviceOption = AUTO_DEVICE,
    json: JsonFlag = False,
) -> None:
    """The shape of a table: mean cosine and each dimension's part of it, the spectrum of the centred table,
    partition-function isotropy, IsoScore, all-but-the-top, and a position table's periods (docs/geometry.md)."""
    source = source_of(ctx)
    check_plot(plot)
    emb = source.open()
    with stages() as stage:
        found = geometry(emb, table.value, device=device.value, stages=stage)
    target = plot_path(plot, emb.checkpoint.path, found.role, "geometry")
    if target is not None:
        draw(found, emb, target, input_files(emb))
    render.show(emb, found, top=top, json=json, plot=target)


def register(app: typer.Typer) -> None:
    app.command("geometry", cls=SourceCommand)(geometry_command)
