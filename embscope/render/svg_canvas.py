"""A figure laid out and written as SVG with one renderer, so each text is measured once.

savefig makes a new SVG renderer for the draw, and the margins (plots.fix_layout, render.margins) would be measured
with the canvas's own (Agg, at the figure's dpi); matplotlib caches a text's size per renderer, so every tick label,
axis label and title would be measured twice. Here the margins are measured with the SVG renderer that then draws
the figure, as matplotlib's own SVG canvas draws it (backend_svg.FigureCanvasSVG.print_svg): at 72 dpi, rasterized
artists at `image_dpi`.
"""

from __future__ import annotations

from typing import IO, TYPE_CHECKING, Any

from .plots import fix_layout, rasterize_dense

if TYPE_CHECKING:
    from matplotlib.figure import Figure

POINTS = 72  # an SVG's unit is the point: matplotlib draws it at 72 dpi, whatever the figure's


def write_svg(figure: Figure, out: IO[str], image_dpi: float, metadata: dict[str, Any] | None = None) -> None:
    """The figure, its margins made once (plots.fix_layout) with the renderer that draws it, written to `out` as
    SVG text; dense artists rasterized (plots.rasterize_dense) at `image_dpi`."""
    from matplotlib.backends.backend_mixed import MixedModeRenderer
    from matplotlib.backends.backend_svg import FigureCanvasSVG, RendererSVG

    class Canvas(FigureCanvasSVG):
        """An SVG canvas whose renderer, the one the layout measures with, is the one that draws."""

        def get_renderer(self) -> Any:
            return renderer

    figure.dpi = POINTS
    width, height = figure.get_size_inches()
    # matplotlib's backends are untyped
    svg: Any = RendererSVG(width * POINTS, height * POINTS, out, image_dpi=image_dpi,  # type: ignore[no-untyped-call]
                           metadata=metadata)
    renderer: Any = MixedModeRenderer(figure, width, height, image_dpi, svg)  # type: ignore[no-untyped-call]
    Canvas(figure)
    fix_layout(figure)
    rasterize_dense(figure)
    figure.draw(renderer)
    renderer.finalize()
