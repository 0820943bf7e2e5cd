"""The report as Markdown (GitHub's flavour, for pull requests and blog posts): `report.md` and one SVG per
figure in a folder (the figures `--plot` draws). Every string is escaped: control characters shown as escapes, the characters that act
inline (emphasis, code, links, raw HTML and entities, table cells, strikethrough, headings) backslash-escaped
as CommonMark allows, and a paragraph that would open a list or a heading escaped at its start; numbers and
prose stay readable. GitHub may still show a bare URL in a token string as a link (its autolinker works on the
text), which fetches nothing."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..core.text import bounded, printable
from .files import OUT, Named, folder_built_whole, written_whole
from .names import RECORD_KEY, Output
from .plots import save
from .report_content import Block, Cell, Figure, Grid, Line, Section

REPORT_FILE = "report.md"
ACTIVE = re.compile(r"([\\`*_\[\]<>&|~#])")  # what acts inline, wherever it stands
BLOCK_START = re.compile(r"^([-+=]|\d+(?=[.)]))")  # what opens a list or underlines a heading at a line's start


def escaped(value: object) -> str:
    return ACTIVE.sub(r"\\\1", printable(bounded(str(value))))  # a very long string cut (text.bounded)


def paragraph(value: object) -> str:
    """Escaped text that stays a paragraph, whatever it starts with."""
    return BLOCK_START.sub(lambda m: "\\" + m.group() if not m.group().isdigit() else m.group() + "\\", escaped(value))


def anchor(title: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def cell_md(cell: Cell) -> str:
    return escaped(cell.text) or " "


def grid_md(grid: Grid) -> list[str]:
    lines = [f"**{escaped(grid.title)}**", ""] if grid.title else []
    lines.append("| " + " | ".join(escaped(c) for c in grid.columns) + " |")
    lines.append("| " + " | ".join("---:" if any(row[i].number for row in grid.rows) else "---"
                                   for i in range(len(grid.columns))) + " |")
    lines += ["| " + " | ".join(cell_md(cell) for cell in row) + " |" for row in grid.rows]
    return [*lines, ""]


def line_md(line: Line) -> list[str]:
    prefix = {"heading": "### ", "note": "*note:* ", "missing": "**not made:** ", "absent": "*left out:* "}.get(
        line.kind, "")
    return [prefix + (escaped(line.text) if prefix else paragraph(line.text)), ""]


def block_md(block: Block, folder: Path, record: str | None, inputs: list[Path], written: list[Path]) -> list[str]:
    if isinstance(block, Figure):
        path = save(block.draw, Output(folder / f"{block.name}.svg", record), inputs=inputs)
        written.append(path)
        return [f"![{escaped(block.alt)}]({block.name}.svg)", ""]
    return grid_md(block) if isinstance(block, Grid) else line_md(block)


def write_markdown(out: Output, title: str, opening: Sequence[str], sections: Sequence[Section],
                   version: str, inputs: Iterable[Path]) -> list[Path]:
    """report.md and its SVG figures in the folder `out` (made when missing; its parent must exist), each written whole and
    never over a file the report was read from; report.md opens with a comment holding what it records about its
    checkpoints (names.record). Returns the files written, report.md first."""
    inputs, folder = list(inputs), Path(out.path)
    report = folder / REPORT_FILE
    figures = [folder / f"{block.name}.svg" for section in sections for block in section.blocks
               if isinstance(block, Figure)]
    names: dict[str, Named] = {path.name: "the report file" if path == report else "the plot file"
                               for path in (report, *figures)}
    written: list[Path] = []
    lines = [f"<!-- {RECORD_KEY}: {out.record} -->"] if out.record else []
    lines += [f"# {escaped(title)}", "", *(f"{paragraph(line)}  " for line in opening), ""]
    lines += [f"{n}. [{escaped(s.title)}](#{anchor(s.title)})" + s.mark
              for n, s in enumerate(sections, start=1)]
    lines.append("")
    # all or nothing: built in a temporary folder beside `folder`, moved into place once every file is written
    # (every name is refused first, before a figure is drawn, when it would replace a file this run read)
    with folder_built_whole(folder, OUT, names, inputs) as building:
        for section in sections:
            lines += [f"## {escaped(section.title)}", ""]
            for block in section.blocks:
                lines += block_md(block, building, out.record, inputs, written)
        lines.append(f"*made by embscope {escaped(version)}*")
        with written_whole(building / REPORT_FILE, "the report file", binary=False, inputs=inputs) as f:
            f.write("\n".join(lines) + "\n")
    return [report, *(folder / path.name for path in written)]
