"""Charts written as SVG by hand, for the HTML report: panels of lines, bands, histograms, bars, dots and heatmaps
with their axes, ticks and legends. Drawing six figures with matplotlib costs the report most of its time (each
one lays out every tick label twice); these are strings built from numpy arrays, in milliseconds.

Text stays text (the page's own fonts draw it, CJK included, so nothing is a box) and every string is escaped
(html.escape of text.printable). Dense series are thinned to MAX_POINTS points, evenly spaced, and a legend that
says so; a heatmap is one PNG image inside the SVG (written here with zlib), never a rectangle per cell.
"""

from __future__ import annotations

import base64
import html
import math
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from ..text import bounded, printable, shortened

SVG_TEXT_SHOWN = 200  # characters of one text element: a figure's width holds fewer

COLOURS = {"tab:blue": "#1f77b4", "tab:orange": "#ff7f0e", "tab:green": "#2ca02c", "tab:red": "#d62728",
           "tab:purple": "#9467bd", "tab:grey": "#7f7f7f", "grey": "#808080", "black": "#000000"}
# matplotlib's RdBu_r (its 11 ColorBrewer anchors) and viridis (sampled at 17 even steps); colours between them are
# interpolated (tests/test_report_figures.py checks them against matplotlib's own tables)
RDBU_R = ("#053061", "#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7", "#fddbc7", "#f4a582", "#d6604d",
          "#b2182b", "#67001f")
VIRIDIS = ("#440154", "#48186a", "#472d7b", "#424086", "#3b528b", "#33638d", "#2c728e", "#26828e", "#21918c",
           "#1fa088", "#28ae80", "#3fbc73", "#5ec962", "#84d44b", "#addc30", "#d8e219", "#fde725")
MAX_POINTS = 4000  # dots or line vertices drawn per series; more are thinned, evenly
FONT = 11  # px
CHAR = 0.6 * FONT  # the width of a character, for margins
MAX_LABEL = 48  # characters of a label from the file


def escaped(text: object) -> str:
    return html.escape(printable(bounded(str(text), SVG_TEXT_SHOWN)))  # a title quoting a 6 MB name stays short


def colour(name: str) -> str:
    return COLOURS.get(name, name)


def label_text(text: str) -> str:
    """A string from the file as a chart shows it: escaped, cut short."""
    return shortened(text, MAX_LABEL)


def thinned(count: int) -> np.ndarray:
    """At most MAX_POINTS indices of `count`, evenly spaced, the first and last kept."""
    return np.arange(count) if count <= MAX_POINTS else np.unique(np.linspace(0, count - 1, MAX_POINTS).astype(np.int64))


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round values from low to high, about `count` of them, steps of 1, 2 or 5 times a power of ten."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low] if math.isfinite(low) else []
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(low / step - 1e-9) * step
    return [round(first + i * step, 12) for i in range(int((high - first) / step + 1e-9) + 1)]


def tick_text(value: float) -> str:
    return f"{value:.4g}" if value else "0"


@dataclass
class Axis:
    label: str = ""
    log: bool = False
    invert: bool = False  # low at the top (a heatmap's row 0), or at the right
    low: float | None = None  # fixed limits; None: from the data
    high: float | None = None
    seen: list[float] = field(default_factory=list)  # the data's extremes

    def see(self, values: np.ndarray) -> None:
        values = np.asarray(values, dtype=np.float64)
        values = values[np.isfinite(values) & ((values > 0) if self.log else True)]
        if len(values):
            self.seen += [float(values.min()), float(values.max())]

    def limits(self) -> tuple[float, float]:
        low = self.low if self.low is not None else (min(self.seen) if self.seen else 0.0)
        high = self.high if self.high is not None else (max(self.seen) if self.seen else 1.0)
        if self.log:
            low, high = max(low, 1e-300), max(high, 1e-300)
            if high <= low:
                low, high = low / 2, high * 2
            if self.low is None and self.high is None:  # 4% of the decades on each side
                pad = (high / low) ** 0.04
                return low / pad, high * pad
            return low, high
        if high <= low:
            pad = abs(low) * 0.05 or 0.5
            return low - pad, high + pad
        if self.low is None and self.high is None:
            pad = (high - low) * 0.04
            return low - pad, high + pad
        return low, high

    def scale(self, values: np.ndarray) -> np.ndarray:
        """Values as fractions of the axis (0 at low, 1 at high); NaN where they cannot be drawn."""
        low, high = self.limits()
        values = np.asarray(values, dtype=np.float64)
        if self.log:
            with np.errstate(divide="ignore", invalid="ignore"):
                scaled = np.where(values > 0, (np.log10(values) - math.log10(low)) / math.log10(high / low), np.nan)
        else:
            scaled = (values - low) / (high - low)
        return 1 - scaled if self.invert else scaled

    def ticks(self) -> list[tuple[float, str]]:
        low, high = self.limits()
        if self.log:
            decades = range(math.ceil(math.log10(low) - 1e-9), math.floor(math.log10(high) + 1e-9) + 1)
            return [(10.0 ** d, tick_text(10.0 ** d)) for d in decades]
        return [(t, tick_text(t)) for t in nice_ticks(low, high)]


Scale = Callable[[np.ndarray], np.ndarray]  # data values to pixels along one axis
Draw = Callable[[Scale, Scale], str]


@dataclass
class Panel:
    """One chart: items drawn in data coordinates, mapped onto the panel's box when the figure is laid out."""

    title: str
    x: Axis = field(default_factory=Axis)
    y: Axis = field(default_factory=Axis)
    categories: list[str] | None = None  # a bar chart's row names, top to bottom, on the y axis
    items: list[Draw] = field(default_factory=list)
    # (colour, label, opacity, line): a box of that colour, or with `line` (a dash pattern, "" solid) a line
    legend: list[tuple[str, str, float, str | None]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # lines of text in the panel's top left corner
    empty: str | None = None  # drawn instead of axes: why there is nothing to show
    colourbar: tuple[str, float, float, Sequence[str]] | None = None  # (name, low, high, palette) beside the axes

    def key(self, fill: str, label: str | None, opacity: float = 1.0, line: str | None = None) -> None:
        if label:
            self.legend.append((colour(fill), label, opacity, line))

    def line(self, xs: ArrayLike, ys: ArrayLike, fill: str, label: str | None = None, width: float = 1.2,
             dash: str | None = None, markers: bool = False) -> None:
        x, y = np.asarray(xs, dtype=np.float64), np.asarray(ys, dtype=np.float64)
        keep = thinned(len(x))
        x, y = x[keep], y[keep]
        self.x.see(x)
        self.y.see(y)
        self.key(fill, label, line=dash or "")

        def draw(fx: Scale, fy: Scale) -> str:
            px, py = fx(x), fy(y)
            good = np.isfinite(px) & np.isfinite(py)
            parts, run = [], []
            for ok, a, b in zip(good, px, py):
                if ok:
                    run.append(f"{a:.1f},{b:.1f}")
                elif run:
                    parts.append(run)
                    run = []
            parts += [run] if run else []
            style = f' stroke-dasharray="{dash}"' if dash else ""
            out = "".join(f'<polyline points="{" ".join(p)}" fill="none" stroke="{colour(fill)}" '
                          f'stroke-width="{width}"{style}/>' for p in parts)
            if markers:
                out += "".join(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="2.5" fill="{colour(fill)}"/>'
                               for ok, a, b in zip(good, px, py) if ok)
            return out
        self.items.append(draw)

    def band(self, xs: ArrayLike, low: ArrayLike, high: ArrayLike, fill: str, label: str | None = None) -> None:
        x, lo, hi = (np.asarray(v, dtype=np.float64) for v in (xs, low, high))
        keep = thinned(len(x))
        x, lo, hi = x[keep], lo[keep], hi[keep]
        self.x.see(x)
        self.y.see(np.concatenate([lo, hi]))
        self.key(fill, label, 0.2)

        def draw(fx: Scale, fy: Scale) -> str:
            px, bottom, top = fx(x), fy(lo), fy(hi)
            good = np.isfinite(px) & np.isfinite(bottom) & np.isfinite(top)
            if not good.any():
                return ""
            points = [f"{a:.1f},{b:.1f}" for a, b in zip(px[good], top[good])]
            points += [f"{a:.1f},{b:.1f}" for a, b in zip(px[good][::-1], bottom[good][::-1])]
            return f'<polygon points="{" ".join(points)}" fill="{colour(fill)}" fill-opacity="0.2" stroke="none"/>'
        self.items.append(draw)

    def histogram(self, values: ArrayLike, edges: ArrayLike, fill: str, label: str | None = None,
                  outline: bool = False) -> None:
        """Counts of `values` in the bins `edges`, as bars (or, `outline`, a step line over them)."""
        counts, bounds = np.histogram(np.asarray(values, dtype=np.float64), bins=np.asarray(edges, dtype=np.float64))
        self.x.see(bounds)
        # on a log axis a bar of one row needs room below 1 to show
        self.y.see(np.append(counts[counts > 0], 0.5) if self.y.log else np.append(counts, 0))
        self.key(fill, label)

        def draw(fx: Scale, fy: Scale) -> str:
            left, right = fx(bounds[:-1]), fx(bounds[1:])
            base = float(fy(np.array([self.y.limits()[0] if self.y.log else 0.0]))[0])
            top = fy(counts.astype(np.float64))
            shape = []
            for a, b, t, n in zip(left, right, top, counts):
                if n > 0 and np.isfinite(t):
                    shape.append(f"M{a:.1f} {base:.1f}V{t:.1f}H{b:.1f}V{base:.1f}")
            if not shape:
                return ""
            paint = f'fill="none" stroke="{colour(fill)}" stroke-width="1.5"' if outline else f'fill="{colour(fill)}"'
            return f'<path d="{"".join(shape)}" {paint}/>'
        self.items.append(draw)

    def bars(self, values: ArrayLike, names: list[str], fills: list[str], hatched: list[bool] | None = None) -> None:
        """Horizontal bars, one per name, top to bottom (a ranking)."""
        self.categories = [label_text(n) for n in names]
        lengths = np.asarray(values, dtype=np.float64)
        self.x.see(lengths)
        self.y.low, self.y.high = -0.5, len(names) - 0.5

        def draw(fx: Scale, fy: Scale) -> str:
            x0 = float(fx(np.array([self.x.limits()[0]]))[0])
            out = []
            for i, (value, fill) in enumerate(zip(lengths, fills)):
                x1 = float(fx(np.array([value]))[0])
                top, bottom = float(fy(np.array([i - 0.4]))[0]), float(fy(np.array([i + 0.4]))[0])
                if math.isfinite(x1):
                    y, h = min(top, bottom), abs(bottom - top)
                    dash = ' stroke-dasharray="2 2"' if hatched and hatched[i] else ""
                    out.append(f'<rect x="{x0:.1f}" y="{y:.1f}" width="{max(x1 - x0, 0):.1f}" height="{h:.1f}" '
                               f'fill="{colour(fill)}" stroke="#000" stroke-width="0.4"{dash}/>')
            return "".join(out)
        self.items.append(draw)

    def dots(self, xs: ArrayLike, ys: ArrayLike, fill: str | Sequence[str], label: str | None = None,
             radius: float = 1.8, ring: bool = False, opacity: float = 0.6) -> None:
        x, y = np.asarray(xs, dtype=np.float64), np.asarray(ys, dtype=np.float64)
        keep, count = thinned(len(x)), len(x)
        x, y = x[keep], y[keep]
        fills = [colour(fill)] * len(x) if isinstance(fill, str) else [colour(f) for f in np.asarray(fill)[keep]]
        self.x.see(x)
        self.y.see(y)
        if label:
            drawn = f"; {len(keep):,} of them drawn, evenly spaced" if len(keep) < count else ""
            self.legend.append((fills[0] if fills else "#000", label + drawn, 1.0, None))

        def draw(fx: Scale, fy: Scale) -> str:
            px, py = fx(x), fy(y)
            paint = ('fill="none" stroke="{}" stroke-width="1"' if ring else 'fill="{}"')
            return "".join(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="{radius}" ' + paint.format(f) +
                           (f' fill-opacity="{opacity}"' if not ring else "") + "/>"
                           for a, b, f in zip(px, py, fills) if math.isfinite(a) and math.isfinite(b))
        self.items.append(draw)

    def span(self, low: float, high: float, fill: str = "grey", label: str | None = None, axis: str = "x") -> None:
        """A shaded band across the panel, from low to high along one axis."""
        self.key(fill, label, 0.15)

        def draw(fx: Scale, fy: Scale) -> str:
            if axis == "x":
                a, b = fx(np.array([low, high]))
                y0, y1 = fy(np.array(self.y.limits()))
                if not (np.isfinite(a) and np.isfinite(b)):
                    return ""
                return (f'<rect x="{min(a, b):.1f}" y="{min(y0, y1):.1f}" width="{abs(b - a):.1f}" '
                        f'height="{abs(y1 - y0):.1f}" fill="{colour(fill)}" fill-opacity="0.15"/>')
            return ""
        self.items.append(draw)

    def rule(self, value: float, fill: str = "grey", label: str | None = None, axis: str = "x",
             dash: str | None = "4 3") -> None:
        """A line across the panel at one value of an axis."""
        self.key(fill, label, line=dash or "")
        (self.x if axis == "x" else self.y).see(np.array([value]))

        def draw(fx: Scale, fy: Scale) -> str:
            style = f' stroke-dasharray="{dash}"' if dash else ""
            if axis == "x":
                (a,), (y0, y1) = fx(np.array([value])), fy(np.array(self.y.limits()))
                return (f'<line x1="{a:.1f}" x2="{a:.1f}" y1="{y0:.1f}" y2="{y1:.1f}" stroke="{colour(fill)}" '
                        f'stroke-width="1"{style}/>') if np.isfinite(a) else ""
            (b,), (x0, x1) = fy(np.array([value])), fx(np.array(self.x.limits()))
            return (f'<line x1="{x0:.1f}" x2="{x1:.1f}" y1="{b:.1f}" y2="{b:.1f}" stroke="{colour(fill)}" '
                    f'stroke-width="1"{style}/>') if np.isfinite(b) else ""
        self.items.append(draw)

    def label(self, x: float, y: float, text: str, fill: str = "black", right: bool = False) -> None:
        """A text label at a data point (a probe word, a flagged row)."""
        def draw(fx: Scale, fy: Scale) -> str:
            (a,), (b,) = fx(np.array([x])), fy(np.array([y]))
            if not (np.isfinite(a) and np.isfinite(b)):
                return ""
            anchor = "end" if right else "start"
            return (f'<text x="{a + (-5 if right else 5):.1f}" y="{b - 4:.1f}" font-size="{FONT - 2}" '
                    f'text-anchor="{anchor}" fill="{colour(fill)}">{escaped(label_text(text))}</text>')
        self.items.append(draw)

    def heatmap(self, cells: np.ndarray, extent: tuple[float, float, float, float], low: float, high: float,
                palette: Sequence[str] = RDBU_R) -> None:
        """A matrix of values as one image over `extent` (x0, x1, y0, y1 in data units; row 0 at y0)."""
        x0, x1, y0, y1 = extent
        self.x.low, self.x.high, self.y.low, self.y.high = x0, x1, y0, y1
        image = png(rgb(cells, low, high, palette))

        def draw(fx: Scale, fy: Scale) -> str:
            (a, b), (c, d) = fx(np.array([x0, x1])), fy(np.array([y0, y1]))
            return (f'<image x="{min(a, b):.1f}" y="{min(c, d):.1f}" width="{abs(b - a):.1f}" height="{abs(d - c):.1f}" '
                    f'preserveAspectRatio="none" style="image-rendering:pixelated" '
                    f'href="data:image/png;base64,{image}"/>')
        self.items.append(draw)


def rgb(values: np.ndarray, low: float, high: float, palette: Sequence[str]) -> np.ndarray:
    """uint8 (rows, columns, 3) of `values` on a palette sampled at even steps; NaN is white."""
    anchors = np.array([[int(c[i:i + 2], 16) for i in (1, 3, 5)] for c in palette], dtype=np.float64)
    scaled = np.clip((np.asarray(values, dtype=np.float64) - low) / ((high - low) or 1.0), 0, 1) * (len(palette) - 1)
    scaled = np.nan_to_num(scaled, nan=0.0)
    below = np.minimum(np.floor(scaled).astype(np.int64), len(palette) - 2)
    part = (scaled - below)[..., None]
    out: np.ndarray = anchors[below] * (1 - part) + anchors[below + 1] * part
    out[~np.isfinite(np.asarray(values, dtype=np.float64))] = 255
    return np.round(out).astype(np.uint8)


def palette_colours(values: np.ndarray, low: float, high: float, palette: Sequence[str] = VIRIDIS) -> list[str]:
    return ["#{:02x}{:02x}{:02x}".format(*pixel) for pixel in rgb(np.asarray(values), low, high, palette)]


def png(pixels: np.ndarray) -> str:
    """An RGB image as a base64 PNG (filter 0 on every row)."""
    height, width, _ = pixels.shape
    raw = b"".join(b"\0" + pixels[row].tobytes() for row in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))
    return base64.b64encode(data).decode("ascii")


@dataclass
class Figure:
    """Panels in a grid, a title above them; `svg()` lays them out and writes the <svg> element."""

    title: str
    panels: list[list[Panel]]
    width: float = 960
    panel_height: float = 300

    def svg(self) -> str:
        columns = max(len(row) for row in self.panels)
        cell = self.width / columns
        out, top, number = [], 30.0, 0
        for row in self.panels:
            legend_lines = max((legend_height(p, cell) for p in row), default=0)
            height = self.panel_height + legend_lines
            for index, panel in enumerate(row):
                number += 1
                out.append(panel_svg(panel, index * cell, top, cell, height, legend_lines, f"clip{number}"))
            top += height + 10
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width:.0f} {top:.0f}" '
                f'width="{self.width:.0f}" height="{top:.0f}" font-family="system-ui, sans-serif" '
                f'font-size="{FONT}">')
        title = f'<text x="{self.width / 2:.0f}" y="18" text-anchor="middle" font-size="{FONT + 3}">{escaped(self.title)}</text>'
        return head + title + "".join(out) + "</svg>"


def legend_height(panel: Panel, width: float) -> float:
    """Pixels below the axes for the legend, one entry a line (long labels wrap onto a second)."""
    per_line = max(10, int((width - 40) / CHAR))
    return sum(14 * (1 + (len(label) + 3) // per_line) for _, label, _, _ in panel.legend)


Box = tuple[float, float, float, float]  # x, y, width, height of a panel's axes, in pixels
Colourbar = tuple[str, float, float, Sequence[str]]  # (name, low, high, palette), as Panel.colourbar


def panel_svg(panel: Panel, x: float, y: float, width: float, height: float, legend: float, clip: str) -> str:
    """One panel in the box (x, y, width, height), `legend` pixels of it below the axes; `clip`: its clip path's id."""
    bar = panel.colourbar
    title = shortened(panel.title, max(20, int(width / (CHAR * 1.1))))  # bold letters are wider
    out = [(f'<text x="{x + width / 2:.1f}" y="{y + 12:.1f}" text-anchor="middle" font-weight="600">'
            f'{escaped(title)}</text>')]
    if panel.empty is not None:
        out.append(f'<text x="{x + width / 2:.1f}" y="{y + height / 2:.1f}" text-anchor="middle" fill="#555">'
                   f'{escaped(label_text(panel.empty))}</text>')
        return "".join(out)
    left = left_margin(panel)
    right = 90 if bar else 14
    box = (x + left, y + 22, width - left - right, height - legend - 22 - 40)  # x, y, w, h of the axes
    bx, by, bw, bh = box

    def fx(values: np.ndarray) -> np.ndarray:
        return bx + panel.x.scale(values) * bw

    def fy(values: np.ndarray) -> np.ndarray:
        if panel.categories is not None:  # category 0 on top
            return by + (np.asarray(values, dtype=np.float64) + 0.5) / len(panel.categories) * bh
        return by + bh - panel.y.scale(values) * bh
    out.append(f'<clipPath id="{clip}"><rect x="{bx:.1f}" y="{by:.1f}" width="{bw:.1f}" height="{bh:.1f}"/></clipPath>')
    out.append(f'<g clip-path="url(#{clip})">' + "".join(draw(fx, fy) for draw in panel.items) + "</g>")
    out.append(f'<rect x="{bx:.1f}" y="{by:.1f}" width="{bw:.1f}" height="{bh:.1f}" fill="none" stroke="#333" '
               'stroke-width="0.8"/>')
    out += x_ticks_svg(panel, fx, box) + y_ticks_svg(panel, fy, box) + labels_svg(panel, x, box)
    out += legend_svg(panel, x, width, by + bh + 44)
    if bar is not None:
        out += colourbar_svg(bar, box)
    return "".join(out)


def left_margin(panel: Panel) -> float:
    """Pixels left of the axes: the longest category name or y tick, and the y label."""
    return 16 + (max((len(c) for c in panel.categories), default=0) * CHAR if panel.categories else
                 max(len(t) for _, t in panel.y.ticks() or [(0, "0")]) * CHAR + 8) + (14 if panel.y.label else 0)


def x_ticks_svg(panel: Panel, fx: Scale, box: Box) -> list[str]:
    bx, by, bw, bh = box
    out = []
    for value, text in panel.x.ticks():
        (px,) = fx(np.array([value]))
        if np.isfinite(px) and bx - 0.5 <= px <= bx + bw + 0.5:
            out.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{by + bh:.1f}" y2="{by + bh + 4:.1f}" stroke="#333"/>'
                       f'<text x="{px:.1f}" y="{by + bh + 15:.1f}" text-anchor="middle">{escaped(text)}</text>')
    return out


def y_ticks_svg(panel: Panel, fy: Scale, box: Box) -> list[str]:
    """The category names, or the y ticks."""
    bx, by, _, bh = box
    out = []
    if panel.categories is not None:
        for i, name in enumerate(panel.categories):
            (py,) = fy(np.array([i]))
            out.append(f'<text x="{bx - 4:.1f}" y="{py + 4:.1f}" text-anchor="end" font-size="{FONT - 1}">'
                       f'{escaped(name)}</text>')
    else:
        for value, text in panel.y.ticks():
            (py,) = fy(np.array([value]))
            if np.isfinite(py) and by - 0.5 <= py <= by + bh + 0.5:
                out.append(f'<line x1="{bx - 4:.1f}" x2="{bx:.1f}" y1="{py:.1f}" y2="{py:.1f}" stroke="#333"/>'
                           f'<text x="{bx - 6:.1f}" y="{py + 4:.1f}" text-anchor="end">{escaped(text)}</text>')
    return out


def labels_svg(panel: Panel, x: float, box: Box) -> list[str]:
    """The axis labels, and the notes in the top left corner."""
    bx, by, bw, bh = box
    out = []
    if panel.x.label:
        out.append(f'<text x="{bx + bw / 2:.1f}" y="{by + bh + 30:.1f}" text-anchor="middle">'
                   f'{escaped(panel.x.label)}</text>')
    if panel.y.label:
        out.append(f'<text transform="translate({x + 12:.1f} {by + bh / 2:.1f}) rotate(-90)" text-anchor="middle">'
                   f'{escaped(panel.y.label)}</text>')
    for i, note in enumerate(panel.notes):
        out.append(f'<text x="{bx + 6:.1f}" y="{by + 14 + 13 * i:.1f}" font-size="{FONT - 1}" fill="#333">'
                   f'{escaped(note)}</text>')
    return out


def legend_svg(panel: Panel, x: float, width: float, ly: float) -> list[str]:
    """The legend below the axes from `ly` down, one entry a line (long labels wrap)."""
    out = []
    per_line = max(10, int((width - 40) / CHAR))
    for fill, text, opacity, line in panel.legend:
        if line is None:
            out.append(f'<rect x="{x + 16:.1f}" y="{ly - 9:.1f}" width="10" height="10" fill="{fill}" '
                       f'fill-opacity="{opacity}" stroke="{fill}" stroke-width="0.5"/>')
        else:
            dash = f' stroke-dasharray="{line}"' if line else ""
            out.append(f'<line x1="{x + 12:.1f}" x2="{x + 28:.1f}" y1="{ly - 4:.1f}" y2="{ly - 4:.1f}" stroke="{fill}" '
                       f'stroke-width="1.5"{dash}/>')
        for start in range(0, len(text), per_line):
            out.append(f'<text x="{x + 32:.1f}" y="{ly:.1f}">{escaped(text[start:start + per_line])}</text>')
            ly += 14
    return out


def colourbar_svg(bar: Colourbar, box: Box) -> list[str]:
    bx, by, bw, bh = box
    name, low, high, palette = bar
    strip = png(rgb(np.linspace(high, low, 128)[:, None], low, high, palette))
    out = [(f'<image x="{bx + bw + 14:.1f}" y="{by:.1f}" width="12" height="{bh:.1f}" preserveAspectRatio="none" '
            f'href="data:image/png;base64,{strip}"/>')]
    for value in nice_ticks(low, high, 4):
        py = by + (high - value) / ((high - low) or 1) * bh
        out.append(f'<text x="{bx + bw + 30:.1f}" y="{py + 4:.1f}">{escaped(tick_text(value))}</text>')
    out.append(f'<text x="{bx + bw + 18:.1f}" y="{by - 6:.1f}" text-anchor="middle">{escaped(name)}</text>')
    return out
