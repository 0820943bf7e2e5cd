"""`embscope report`: the file it writes (one HTML page, or a Markdown folder) and what it prints about it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from ..analysis.report import Report
from ..core.errors import Message, Option, OutputError, Spelling, library_words, spelled
from ..core.text import quote, shortened
from ..registry import Entry, entries, named
from ..version import VERSION
from . import console, header
from .files import OUT, check_directory
from .jsonout import Document
from .names import Output, checkpoint_label, default_output, emb_title
from .report_content import Section, heading, sections, spelled_section
from .report_html import write_html
from .report_md import REPORT_FILE, write_markdown

Writer = Callable[[Output, str, Sequence[str], Sequence[Section], str, Iterable[Path]], list[Path]]
WRITERS: tuple[Entry[Writer], ...] = entries(
    Entry("html", write_html, "the default: one self-contained page, figures inline as SVG"),
    Entry("md", write_markdown, "a folder: REPORT_FILE and its figures as SVG files beside it, for GitHub and blogs"))
DEFAULT_SUFFIX = {"html": "-report.html", "md": "-report"}  # after the checkpoint's label (names.checkpoint_label)
HTML_SUFFIXES = (".html", ".htm")
MARKDOWN = Option("fmt", "md")  # the format `write` takes as fmt
FILE_SUFFIXES = (*HTML_SUFFIXES, ".md")  # names that say "a file", not the folder --format md writes


def check_name(out: Path, fmt: str) -> None:
    """--out names what the format writes: an .html file, or a folder for Markdown. Checked before any work."""
    suffix = out.suffix.lower()
    if fmt == "html" and suffix not in HTML_SUFFIXES:
        raise OutputError(f"expected a report file ending in .html or .htm, found {quote(shortened(str(out)))}",
                          path=out, option=OUT)
    if fmt == "md" and suffix in FILE_SUFFIXES:
        raise OutputError(Message("expected a folder for ", MARKDOWN, f" ({REPORT_FILE} and the figures go in it), "
                                  f"found the file name {quote(shortened(str(out)))}"), path=out, option=OUT)


def check_place(out: Path, fmt: str) -> None:
    """The folder the report goes to exists (and a Markdown folder is not a file). Checked before any work."""
    check_directory(out, OUT)
    if fmt == "md" and out.exists() and not out.is_dir():
        raise OutputError(Message("expected ", OUT, " to name a folder for ", MARKDOWN,
                                  f", found a file: {quote(out)}"), path=out, option=OUT)


def default_target(fmt: str, named_by: Path, covers: Sequence[Path]) -> Output:
    """Where the report goes without --out: `<checkpoint>-report.html` (or the folder `<checkpoint>-report`) in the
    working directory, unless another checkpoint's report holds that name (names.default_output)."""
    base = Path(checkpoint_label(named_by) + DEFAULT_SUFFIX[fmt])
    marker = (lambda folder: folder / REPORT_FILE) if fmt == "md" else (lambda file: file)
    return default_output(base, covers, marker)


def title(report: Report) -> str:
    """The report's title: the checkpoint it describes, as names.checkpoint_title names it (with the run's other
    checkpoints counted)."""
    more = len(report.checkpoints) - 1
    return f"embscope report: {emb_title(report.emb)}" + (f", and {more} earlier checkpoint{'s' * (more != 1)}"
                                                          if more > 0 else "")


def write(report: Report, out: Output, fmt: str, inputs: Iterable[Path], *,
          spell: Spelling = library_words) -> tuple[list[Section], list[Path]]:
    """The report's sections, and the files written (the report first, then any figure files). Its text names
    options as `spell` does: the library's keywords, or the command line's flags."""
    found = [spelled_section(section, spell) for section in sections(report)]
    opening = [spelled(line, spell) for line in heading(report)]
    return found, named(WRITERS, fmt)(out, title(report), opening, found, VERSION, inputs)


write_report = write  # the name the package face exports (embscope.write_report)


def document(report: Report, out: Output, fmt: str, found: Sequence[Section], files: Sequence[Path]) -> Document:
    return {**out.fields("out"), "format": fmt, "files": [str(f) for f in files],
            "sections": [s.key for s in found if s.made],
            "missing": {s.key: s.missing for s in found if s.missing},
            "absent": {s.key: s.absent for s in found if s.absent},
            "checkpoints": [str(p) for p in report.checkpoints] or [str(report.emb.checkpoint.path)],
            "notes": list(report.notes)}


def show(report: Report, out: Output, fmt: str, found: Sequence[Section], files: Sequence[Path], json: bool) -> None:
    if json:
        header.emit(document(report, out, fmt, found, files), report.emb)
        return
    header.show(report.emb)
    made = ", ".join(s.key for s in found if s.made)
    figures = len(files) - 1
    beside = f", with {figures} figure{'s' * (figures != 1)} (SVG) beside it" if fmt == "md" else ""
    console.out.print(f"wrote the report to {console.safe(files[0])}{beside}{console.safe(out.how())}: {made}",
                      soft_wrap=True)
    for section in found:
        if section.missing:
            console.out.print(f"not made: {section.key} ({console.safe(section.missing)})", soft_wrap=True)
        elif section.absent:
            console.out.print(f"left out: {section.key} ({console.safe(section.absent)})", soft_wrap=True)
    console.notes(report.notes)
