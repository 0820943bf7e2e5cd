"""The report as one self-contained HTML file: CSS inline, figures inline as SVG, no script, and nothing the
page would fetch (no CDN, font or image from elsewhere; a heatmap is a data: PNG inside its SVG).

Figures are the ones `--plot` draws, by the same functions (matplotlib), as SVG with text as <text> elements in
the figure's font family (svg.fonttype "none": a path per glyph costs more to write and to read), which matplotlib
escapes as XML, so no string from the checkpoint becomes markup inside a figure (the text comments matplotlib
writes are removed), and dense artists (heatmaps, scatters of many points) rasterized into a PNG inside the SVG;
its XML prologue and metadata block, which name W3C and matplotlib URLs, are dropped. Each figure's layout is
solved once, with the renderer that draws it, and a string measured for one figure of the page is not measured
again for another (svg_canvas).
Without matplotlib the page is still written, a line in place of each figure saying what it needs. Each
figure's ids get a prefix of their own, so figures in one page never share an id. Every string, from a file or
not, is escaped with html.escape.
"""

from __future__ import annotations

import html
import io
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import count, groupby
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.errors import needs_package
from ..core.text import bounded, printable
from .files import refuse_inputs, written_whole
from .names import RECORD_KEY, Output
from .plot_style import style
from .report_content import Block, Cell, Figure, Grid, Line, Section
from .svg_canvas import TextSizes, write_svg

if TYPE_CHECKING:
    from matplotlib.figure import Figure as Drawing  # report_content.Figure is the page's figure block

RASTER_DPI = 150
# what matplotlib writes that the page does not need: references to outside URLs, and text from the figure
PROLOGUE = re.compile(r"\A.*?(?=<svg\b)", re.DOTALL)
METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL)
COMMENT = re.compile(r"<!--.*?-->\s*", re.DOTALL)
# an id, or a reference to one; "id" and "href" not inside a longer name (\b, written as a look back past the first
# letter, so that every branch opens with a letter: the regex engine then skips ahead to those letters, 7x faster)
IDS = re.compile(r'i(?<!\wi)d="|xlink:href="#|h(?<!\wh)ref="#|url\(#')

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 78em;
       padding: 0 1.5em; color: #1d1d1f; background: #fff; line-height: 1.45; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.3em; border-bottom: 1px solid #d0d0d7; padding-bottom: 0.2em; margin-top: 2.2em; }
h3 { font-size: 1.05em; margin: 1.4em 0 0.4em; }
p { margin: 0.35em 0; }
nav ol { columns: 2; padding-left: 1.4em; }
table { border-collapse: collapse; margin: 0.3em 0 1em; font-size: 0.92em; }
p.title { font-weight: 600; margin-top: 0.8em; }
th, td { border: 1px solid #d0d0d7; padding: 0.2em 0.6em; text-align: left; vertical-align: top; }
th { background: #f2f2f6; }
td.number { text-align: right; font-variant-numeric: tabular-nums; }
code, td.token { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; white-space: pre-wrap; }
div.tables { display: flex; flex-wrap: wrap; gap: 0 1.2em; align-items: flex-start; }
figure { margin: 1em 0; }
figure svg { max-width: 100%; height: auto; }
p.note { color: #555; font-size: 0.92em; }
p.missing { color: #8a1f11; background: #fbeeec; padding: 0.3em 0.6em; border-left: 3px solid #c0392b; }
p.absent { color: #555; }
footer { margin-top: 3em; color: #777; font-size: 0.85em; }
"""


def escaped(value: object) -> str:
    """Any string as HTML text: control characters shown as escapes, then &, <, > and quotes escaped; a very long
    one cut (text.bounded)."""
    return html.escape(printable(bounded(str(value))))


def prefixed(svg: str, prefix: str) -> str:
    """An <svg> element with its ids (and the references to them) prefixed: figures in one page never share one."""
    return IDS.sub(lambda m: m.group() + prefix, svg)


def matplotlib_svg(draw: Callable[[], Drawing], prefix: str, sizes: TextSizes | None = None) -> str:
    """A figure in embscope's style (plot_style), as an inline <svg> element; without matplotlib, a line that says
    so. `sizes`: the text sizes the page's figures measured (svg_canvas.TextSizes)."""
    import importlib.util
    if importlib.util.find_spec("matplotlib") is None:
        return line_html(Line(needs_package("this figure", "matplotlib", "plot"), "missing"))
    with style():
        return svg(draw(), prefix, sizes)


def svg(figure: Drawing, prefix: str, sizes: TextSizes | None = None) -> str:
    """The figure as an inline <svg> element, its ids prefixed with `prefix`; `sizes` as write_svg takes them."""
    import matplotlib
    buffer = io.StringIO()
    # text as <text> elements in the figure's font family (escaped as XML by matplotlib); ids from a fixed salt, so
    # the same report is the same file twice
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "embscope-report", "svg.image_inline": True}):
        write_svg(figure, buffer, RASTER_DPI, metadata={"Date": None}, sizes=sizes)
    text = buffer.getvalue()
    text = COMMENT.sub("", METADATA.sub("", PROLOGUE.sub("", text, count=1), count=1))
    return prefixed(text, prefix)


def cell_html(cell: Cell) -> str:
    if cell.number:
        return f'<td class="number" data-value="{escaped(json.dumps(cell.value))}">{escaped(cell.text)}</td>'
    return f'<td class="token">{escaped(cell.text)}</td>' if cell.token else f"<td>{escaped(cell.text)}</td>"


def grid_html(grid: Grid) -> str:
    """A table, its title above it (as wide as the text, not the table)."""
    title = f'<p class="title">{escaped(grid.title)}</p>\n' if grid.title else ""
    head = "".join(f"<th>{escaped(column)}</th>" for column in grid.columns)
    rows = "\n".join(f"<tr>{''.join(cell_html(cell) for cell in row)}</tr>" for row in grid.rows)
    return f'<div class="grid">\n{title}<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{rows}\n</tbody></table>\n</div>'



def line_html(line: Line) -> str:
    if line.kind == "heading":
        return f"<h3>{escaped(line.text)}</h3>"
    if line.kind == "note":
        return f'<p class="note">note: {escaped(line.text)}</p>'
    if line.kind == "missing":
        return f'<p class="missing">not made: {escaped(line.text)}</p>'
    if line.kind == "absent":
        return f'<p class="absent">left out: {escaped(line.text)}</p>'
    return f"<p>{escaped(line.text)}</p>"


def block_html(block: Block, numbers: Iterator[int], sizes: TextSizes) -> str:
    if isinstance(block, Figure):
        drawn = matplotlib_svg(block.draw, f"f{next(numbers)}-", sizes)
        return (f'<figure id="figure-{escaped(block.name)}" role="img" aria-label="{escaped(block.alt)}">\n'
                f"{drawn}\n</figure>")
    return grid_html(block) if isinstance(block, Grid) else line_html(block)


def blocks_html(blocks: Sequence[Block], numbers: Iterator[int], sizes: TextSizes) -> Iterator[str]:
    """Each block as HTML, runs of compact tables side by side; `numbers` numbers the figures of the page, which
    share the text sizes they measure (`sizes`)."""
    for compact, run in groupby(blocks, key=lambda block: isinstance(block, Grid) and block.compact):
        if compact:
            yield '<div class="tables">\n' + "\n".join(grid_html(g) for g in run if isinstance(g, Grid)) + "\n</div>"
        else:
            yield from (block_html(block, numbers, sizes) for block in run)


def document(title: str, opening: Sequence[str], sections: Sequence[Section], version: str,
             record: str | None = None) -> str:
    """The whole page; `record`: what it records about its checkpoints (names.record), in a meta element."""
    numbers, sizes = count(1), TextSizes()
    toc = "\n".join(f'<li><a href="#{s.key}">{escaped(s.title)}</a>' + s.mark + "</li>"
                    for s in sections)
    body = []
    for section in sections:
        kind = ' class="missing"' if section.missing else ' class="absent"' if section.absent else ""
        inner = "\n".join(blocks_html(section.blocks, numbers, sizes))
        body.append(f'<section id="{section.key}"{kind}>\n<h2>{escaped(section.title)}</h2>\n{inner}\n</section>')
    lines = "\n".join(f"<p>{escaped(line)}</p>" for line in opening)
    nl = "\n"
    recorded = f'<meta name="{RECORD_KEY}" content="{record}">\n' if record else ""
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n{recorded}'
            f"<title>{escaped(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
            f"<header>\n<h1>{escaped(title)}</h1>\n{lines}\n<nav><ol>\n{toc}\n</ol></nav>\n</header>\n"
            f"{nl.join(body)}\n<footer>made by embscope {escaped(version)}</footer>\n</body>\n</html>\n")


def write_html(out: Output, title: str, opening: Sequence[str], sections: Sequence[Section], version: str,
               inputs: Iterable[Path]) -> list[Path]:
    """The report written whole to `out`, never over a file it was read from (refused before a figure is drawn)."""
    inputs, path = list(inputs), Path(out.path)
    refuse_inputs(path, "the report file", inputs)
    page = document(title, opening, sections, version, out.record)
    with written_whole(path, "the report file", binary=False, inputs=inputs) as f:
        f.write(page)
    return [Path(path)]
