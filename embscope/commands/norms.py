"""`embscope norms`: per-row L2 norms, the rows flagged as anomalies (and why) and near-duplicate rows;
for token tables it points to `embscope undertrained`."""

from typing import Annotated

import typer

from ..analysis.norms import norms_report
from ..core.role import Role
from ..core.text import shortened
from ..digits import decimal_number
from ..render import norms as render
from ..render.files import input_files
from .command import SourceCommand
from .options import JsonFlag, finite, refuse, source_of
from .plot_option import PlotOption, check_plot, plot_path

DEFAULT_THRESHOLD = 6.0  # shown in --help; the library's own default (analysis.norms) is checked equal by a test
DEFAULT_DPI = 100
# the canvas is 4 bytes a pixel (~0.5 GB here): enough for the default sizes at the highest --dpi, while
# --size 100x100 --dpi 1200 would need 58 GB
MAX_PIXELS = 120_000_000


def size_option(text: str) -> tuple[float, float] | None:
    """--size WxH in inches; "" for the figure's own size."""
    if not text:
        return None
    width, _, height = text.lower().partition("x")
    found = (decimal_number(width) or 0.0, decimal_number(height) or 0.0)
    if not all(1 <= side <= 100 for side in found):
        raise refuse(f"expected WxH in inches, each 1 to 100 (e.g. 13x5.5), found {shortened(text)!r}", "--size")
    return found


def check_pixels(size: tuple[float, float] | None, dpi: float) -> None:
    if size is not None and size[0] * size[1] * dpi * dpi > MAX_PIXELS:
        pixels = size[0] * size[1] * dpi * dpi / 1e6
        raise refuse(f"expected a plot of at most {MAX_PIXELS // 1_000_000} million pixels, found "
                     f"{size[0]:g}x{size[1]:g} inches at {dpi:g} dpi: {pixels:,.0f} million", "--dpi")


def norms(
    ctx: typer.Context,
    table: Annotated[Role | None, typer.Option(
        "--table", help="Which table: position (the default when there is one), token, or output (an untied "
                        "head).", show_default=False)] = None,
    threshold: Annotated[float, typer.Option(
        "--threshold", min=0.0, callback=finite, help="Robust z beyond which a row's norm is an anomaly: "
                                                      "(norm - median) / (1.4826 x MAD).")] = DEFAULT_THRESHOLD,
    plot: PlotOption = None,
    dpi: Annotated[float | None, typer.Option("--dpi", min=10, max=1200, show_default=False,
                                              help=f"Dots per inch of a --plot PNG; default {DEFAULT_DPI}.")] = None,
    size: Annotated[str, typer.Option("--size", metavar="WxH", help="Size of the --plot figure in inches, e.g. 13x5.5; "
                                                                     "default 13x5.5 (token), 11x5 (position).",
                                      show_default=False)] = "",
    json: JsonFlag = False,
) -> None:
    """Per-row L2 norms: count, mean, median, min, max, the rows flagged as anomalies (the rule stated once,
    the most extreme first) and near-duplicate rows. Under-trained tokens: see `embscope undertrained`."""
    source = source_of(ctx)
    check_plot(plot)
    figure_size = size_option(size)
    if plot is None and (size or dpi is not None):
        raise refuse("--size and --dpi size the plot: they go with --plot")
    dpi = DEFAULT_DPI if dpi is None else dpi
    check_pixels(figure_size, dpi)
    emb = source.open()
    report = norms_report(emb, table.value if table is not None else None, threshold)
    target = plot_path(plot, emb.checkpoint.path, report.role, "norms")
    if target is not None:
        render.draw(emb, report, target, input_files(emb), figure_size, dpi)
    render.show(emb, report, json=json, plot=target)


def register(app: typer.Typer) -> None:
    app.command(cls=SourceCommand)(norms)
