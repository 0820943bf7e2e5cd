"""A figure laid out and written as SVG with one renderer, so each text is measured once.

savefig makes a new SVG renderer for the draw, and the margins (plots.fix_layout, render.margins) would be measured
with the canvas's own (Agg, at the figure's dpi); matplotlib caches a text's size per renderer, so every tick label,
axis label and title would be measured twice. Here the margins are measured with the SVG renderer that then draws
the figure, as matplotlib's own SVG canvas draws it (backend_svg.FigureCanvasSVG.print_svg): at 72 dpi, rasterized
artists at `image_dpi`.

The renderer also gives each font's line metrics (ascent, descent, line gap) once: matplotlib 3.11 lays out every
text with them, looking the font up and reading two of its tables each time (about 50 µs; 1,400 layouts in the
report's figures). It asks a renderer that has `_get_font_height_metrics` instead (its backends' hook for fonts of
their own); ours gives the numbers matplotlib's own path computes, kept per font and size, for the one figure it
draws. An older matplotlib never asks, and lays its texts out as before.

The figures of one page can share the sizes of the strings they measure (`TextSizes`): an SVG renderer measures a
string in points, the same for every figure drawn under the same settings, and FreeType's layout of a short string
takes about 0.25 ms in matplotlib 3.11 (the report's eight figures measure 288 strings, 190 of them different).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import IO, TYPE_CHECKING, Any

from .plots import fix_layout, rasterize_dense

if TYPE_CHECKING:
    from matplotlib.figure import Figure

POINTS = 72  # an SVG's unit is the point: matplotlib draws it at 72 dpi, whatever the figure's
# where matplotlib reads a font's line metrics, in the order it tries them: (table, line gap, ascent, descent)
LINE_METRICS = (("OS/2", "sTypoLineGap", "sTypoAscender", "sTypoDescender"), ("hhea", "lineGap", "ascent", "descent"))


class TextSizes:
    """The sizes an SVG renderer measured, (string, font, math or not) -> (width, height, descent) in points, kept for
    the figures of one page: valid while matplotlib's settings stay those they were measured under (a figure drawn
    under others starts them again)."""

    def __init__(self) -> None:
        self.settings: Mapping[str, Any] = {}
        self.sizes: dict[tuple[Any, ...], tuple[float, float, float]] = {}

    def under(self, settings: Mapping[str, Any]) -> dict[tuple[Any, ...], tuple[float, float, float]]:
        """The sizes measured under `settings` (matplotlib's rcParams now)."""
        if settings != self.settings:
            self.settings, self.sizes = settings, {}
        return self.sizes


def write_svg(figure: Figure, out: IO[str], image_dpi: float, metadata: dict[str, Any] | None = None,
              sizes: TextSizes | None = None) -> None:
    """The figure, its margins made once (plots.fix_layout) with the renderer that draws it, written to `out` as
    SVG text; dense artists rasterized (plots.rasterize_dense) at `image_dpi`. `sizes`: the sizes of strings measured
    for the page's other figures (TextSizes), used and added to."""
    import matplotlib
    from matplotlib.backends.backend_mixed import MixedModeRenderer
    from matplotlib.backends.backend_svg import FigureCanvasSVG

    class Canvas(FigureCanvasSVG):
        """An SVG canvas whose renderer, the one the layout measures with, is the one that draws."""

        def get_renderer(self) -> Any:
            return renderer

    figure.dpi = POINTS
    width, height = figure.get_size_inches()
    settings: Any = matplotlib.rcParams.copy()  # copied as matplotlib copies it: no warning for a deprecated key
    measured = (sizes if sizes is not None else TextSizes()).under(settings)
    svg: Any = renderer_class()(figure, measured, width * POINTS, height * POINTS, out, image_dpi=image_dpi,
                                metadata=metadata)
    renderer: Any = MixedModeRenderer(figure, width, height, image_dpi, svg)  # type: ignore[no-untyped-call]
    Canvas(figure)
    fix_layout(figure)
    rasterize_dense(figure)
    figure.draw(renderer)
    renderer.finalize()


@functools.cache
def renderer_class() -> type:
    """matplotlib's SVG renderer, giving each font's line metrics once, and the size of a string measured already
    (a class made once matplotlib is imported: embscope starts without it)."""
    from matplotlib.backends.backend_svg import RendererSVG

    class Renderer(RendererSVG):
        def __init__(self, figure: Figure, sizes: dict[tuple[Any, ...], tuple[float, float, float]], *args: Any,
                     **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]  # matplotlib's backends are untyped
            self.drawing = figure  # its dpi scales the metrics, as matplotlib scales them for each text
            self.line_metrics: dict[tuple[Any, ...], tuple[float | None, float | None, float | None]] = {}
            self.sizes = sizes

        def get_text_width_height_descent(self, s: str, prop: Any, ismath: Any) -> tuple[float, float, float]:
            """matplotlib's measurement of `s` in points (TextToPath: the font, its size and the string), once."""
            key = (s, ismath, *font_key(prop), prop.get_math_fontfamily())
            found = self.sizes.get(key)
            if found is None:
                found = self.sizes[key] = super().get_text_width_height_descent(  # type: ignore[no-untyped-call]
                    s, prop, ismath)
            return found

        def _get_font_height_metrics(self, prop: Any) -> tuple[float | None, float | None, float | None]:
            """(ascent, descent, line gap) of the font `prop` names, in pixels, as matplotlib's Text computes them."""
            key = (*font_key(prop), self.drawing.dpi)
            found = self.line_metrics.get(key)
            if found is None:
                found = self.line_metrics[key] = line_metrics(prop, self.drawing.dpi)
            return found

    return Renderer


def font_key(prop: Any) -> tuple[Any, ...]:
    """What names a font and its size in matplotlib's FontProperties `prop` (what its hash is made of)."""
    return (tuple(prop.get_family()), prop.get_style(), prop.get_variant(), prop.get_weight(), prop.get_stretch(),
            prop.get_size_in_points(), prop.get_file())


def line_metrics(prop: Any, dpi: float) -> tuple[float | None, float | None, float | None]:
    """(ascent, descent, line gap) of the font `prop` names at `dpi`, in pixels: what matplotlib's Text._get_layout
    reads from the font's tables (the same arithmetic, so the same floats); all None where the font has neither
    table (matplotlib then measures "lp")."""
    from matplotlib.font_manager import fontManager, get_font
    font: Any = get_font(fontManager._find_fonts_by_props(prop))  # its tables are read by name, as matplotlib reads them
    for table_name, gap, ascent, descent in LINE_METRICS:
        table = font.get_sfnt_table(table_name)
        if table is None:
            continue
        scale = 1 / font.get_sfnt_table("head")["unitsPerEm"] * prop.get_size_in_points() * dpi / 72
        return table[ascent] * scale, -table[descent] * scale, table[gap] * scale
    return None, None, None
