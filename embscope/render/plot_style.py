"""embscope's own look for every figure, whatever matplotlib finds around it, and text every font can draw.

matplotlib reads a `matplotlibrc` from the working directory (a checkpoint folder may ship one) and from the
user's config when it is imported; `text.usetex: True` there sends every label, token strings included,
through LaTeX. `style()` draws with matplotlib's own defaults and embscope's few settings instead, and keeps
matplotlib's warnings and log lines (a bad rc value, a missing glyph, a font cache being built) off stderr.

A character no installed font can draw would be an empty box, with a warning: `drawable` draws it with a font
that has it (DejaVu Sans first, then the wide-coverage fonts of FALLBACK_FAMILIES that are installed, CJK ones
among them) or shows it escaped (`\\u72ac`). The space symbol embscope shows in tokens (U+2420, which DejaVu
lacks) becomes U+2423 OPEN BOX in a figure when no font has it.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import shutil
import sys
import tempfile
import textwrap
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.text import printable
from ..quiet import native_stderr

if TYPE_CHECKING:
    from types import ModuleType

    from matplotlib.axes import Axes
    from matplotlib.text import Annotation

MAIN_FAMILY = "DejaVu Sans"  # ships with matplotlib
# fonts that draw what DejaVu Sans does not (CJK, Indic, Arabic, symbols), in the order they are tried, each
# used only where installed; colour emoji fonts are left out (Agg cannot draw their bitmaps)
FALLBACK_FAMILIES = (
    "Noto Sans", "Noto Sans CJK JP", "Noto Sans CJK SC", "Noto Sans CJK TC", "Noto Sans CJK KR", "Noto Sans Mono CJK JP",
    "Source Han Sans", "Source Han Sans SC", "WenQuanYi Zen Hei", "WenQuanYi Micro Hei", "Droid Sans Fallback",
    "AR PL UMing CN", "IPAGothic", "TakaoGothic", "UnDotum", "NanumGothic", "Noto Sans Devanagari", "Noto Sans Arabic",
    "Noto Sans Hebrew", "Noto Sans Thai", "Noto Sans Symbols", "Noto Sans Symbols 2", "Noto Sans Math", "FreeSans",
    "FreeSerif", "Unifont", "Arial Unicode MS", "Microsoft YaHei", "SimHei", "Yu Gothic", "Meiryo", "Malgun Gothic",
    "Nirmala UI", "Segoe UI Symbol", "PingFang SC", "Hiragino Sans", "Apple SD Gothic Neo", "Apple Symbols")
MAX_LABEL = 80  # characters of a string from the file in a figure: a 200,000-character token is laid out for minutes
ELLIPSIS = "\u2026"  # where a string too long for a figure is cut (DejaVu Sans draws it)
CHAR_WIDTH = 0.6  # a DejaVu Sans character's mean width, in ems: how many fit on a title's line
MAX_BANDS = 10  # range bands labelled on one axis; more are shaded without a label
SPACE_SYMBOL, OPEN_BOX = "\u2420", "\u2423"
# settings of embscope's figures on top of matplotlib's defaults: ids in SVGs from a fixed salt (the same report
# is the same file twice); titles just above their axes (no axis has ticks on top), where matplotlib would otherwise
# measure every tick label of the axes, at each draw, to place them
OWN = {"svg.hashsalt": "embscope", "text.usetex": False, "axes.formatter.use_mathtext": False, "axes.titley": 1.0}


def matplotlib_quietly() -> ModuleType:
    """matplotlib, imported with its warnings (a bad value in a matplotlibrc) and log lines (the font cache
    being built on a first run) kept off stderr."""
    if "matplotlib" in sys.modules:
        return sys.modules["matplotlib"]
    # matplotlib validates $MPLBACKEND while it is imported and raises on a name it does not know; embscope draws
    # on its own Agg canvases whatever the backend, so the import sees Agg. A relative $HOME or $XDG_* would put
    # its config and font cache in the working directory (beside a checkpoint): a temporary folder instead. The
    # variables are put back after; matplotlib keeps the folders it found.
    settings = {"MPLBACKEND": "agg"}
    if "MPLCONFIGDIR" not in os.environ and not all(map(os.path.isabs, config_homes())):
        with contextlib.suppress(OSError):  # no temporary folder either: matplotlib makes do, quietly
            settings["MPLCONFIGDIR"] = tempfile.mkdtemp(prefix="embscope-matplotlib-")
            atexit.register(shutil.rmtree, settings["MPLCONFIGDIR"], ignore_errors=True)
    saved = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    try:
        with quiet():
            import matplotlib
            matplotlib.get_configdir(), matplotlib.get_cachedir()  # found now, with these settings, and kept
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return matplotlib


def config_homes() -> list[str]:
    """Where matplotlib looks for its config and cache folders when $MPLCONFIGDIR is unset."""
    home = os.path.expanduser("~")
    return [os.environ.get("XDG_CONFIG_HOME") or home, os.environ.get("XDG_CACHE_HOME") or home]


@contextmanager
def quiet() -> Iterator[None]:
    """No warning, no log line below ERROR and nothing on fd 2 from matplotlib inside; the caller's settings
    come back after."""
    logger = logging.getLogger("matplotlib")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), native_stderr():  # and nothing its C++ (FreeType, Agg) prints to fd 2
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


@functools.cache
def families() -> tuple[str, ...]:
    """DejaVu Sans, then each installed fallback, in the order a figure tries them."""
    matplotlib_quietly()
    from matplotlib import font_manager
    installed = {entry.name for entry in font_manager.fontManager.ttflist}
    return (MAIN_FAMILY, *(family for family in FALLBACK_FAMILIES if family in installed))


@functools.cache
def charmap(family: str) -> frozenset[int]:
    """The code points the regular face of `family` draws (read once, for the first character DejaVu lacks)."""
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font
    path = font_manager.findfont(font_manager.FontProperties(family=family), fallback_to_default=False)
    return frozenset(FT2Font(path).get_charmap())


def can_draw(code: int) -> bool:
    return any(code in charmap(family) for family in families())


def drawable(text: str) -> str:
    """A string from a file as a figure shows it: control characters and characters no installed font has
    escaped, the space symbol drawn as one the fonts have, cut to MAX_LABEL characters."""
    text = printable(clipped(text, MAX_LABEL))
    if text.isascii():
        return text
    with quiet():
        if SPACE_SYMBOL in text and not can_draw(ord(SPACE_SYMBOL)) and can_draw(ord(OPEN_BOX)):
            text = text.replace(SPACE_SYMBOL, OPEN_BOX)
        return "".join(ch if ch.isascii() or can_draw(ord(ch)) else ch.encode("unicode_escape").decode("ascii")
                       for ch in text)


def clipped(text: str, limit: int = MAX_LABEL) -> str:
    """`text` cut to `limit` characters with an ellipsis in the middle (a path keeps its file name), never with a
    note of its length inside a figure."""
    if len(text) <= limit:
        return text
    tail = (limit - 1) // 2
    return text[:limit - 1 - tail] + ELLIPSIS + text[len(text) - tail:]


def wrapped(text: str, inches: float, points: float = 12.0) -> str:
    """A title broken into lines that fit `inches` of width at `points` size, so no figure cuts it."""
    width = max(20, int(inches * 72 / (points * CHAR_WIDTH)))
    return "\n".join(textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False)) or text


def runs(rows: Iterable[int], gap: int = 0) -> list[tuple[int, int]]:
    """Sorted rows as runs, each (first, last): rows at most `gap` missing rows apart are one run (0: consecutive
    rows only)."""
    ordered = np.unique(np.fromiter(rows, dtype=np.int64))
    if not len(ordered):
        return []
    breaks = np.flatnonzero(np.diff(ordered) > gap + 1)
    firsts = np.concatenate(([ordered[0]], ordered[breaks + 1]))
    lasts = np.concatenate((ordered[breaks], [ordered[-1]]))
    return [(int(a), int(b)) for a, b in zip(firsts, lasts)]


def band_text(first: int, last: int, what: str) -> str:
    """A range band's label: "215-511: never trained", or "3: flagged" for a single row."""
    return f"{first}: {what}" if first == last else f"{first}-{last}: {what}"


def range_bands(ax: Axes, bands: Sequence[tuple[int, int, str]], color: str = "tab:red", alpha: float = 0.15,
                limit: int = MAX_BANDS, legend: str | None = None) -> list[Annotation]:
    """Each (first, last, what) shaded over rows first..last of the x axis, with one label ("215-511: never
    trained") at its top; the first `limit` bands are labelled, the rest only shaded (limit 0: a caller that
    places its own labels). `legend`: the legend entry of the first band. Returns the labels."""
    labels = []
    for n, (first, last, what) in enumerate(bands):
        ax.axvspan(first - 0.5, last + 0.5, color=color, alpha=alpha, linewidth=0, label=legend if n == 0 else None)
        if n < limit:
            labels.append(ax.annotate(drawable(band_text(first, last, what)), xy=((first + last) / 2, 1),
                                      xycoords=("data", "axes fraction"), xytext=(0, -4), textcoords="offset points",
                                      ha="center", va="top", fontsize=8, color=color, parse_math=False))
    return labels


def histogram(ax: Axes, values: np.ndarray, bins: Sequence[float], fill: bool = True, **style: Any) -> None:
    """A histogram drawn as one step outline (filled unless `fill` is False), not one rectangle per bin: the same
    picture as `ax.hist`, a single artist to lay out and draw."""
    counts, edges = np.histogram(values, bins=bins)
    ax.stairs(counts, edges, fill=fill, **style)


def log_scale(ax: Axes, which: str) -> None:
    """The x or y axis of `ax` on a log scale, its tick labels plain text ("1000", "1e-05"): matplotlib's own are
    mathtext superscripts, each parsed by a grammar, which costs more than the rest of the axis to draw."""
    from matplotlib.ticker import LogFormatter
    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    axis.set_major_formatter(LogFormatter())  # the labels matplotlib would pick, as plain text
    axis.set_minor_formatter(LogFormatter())


@contextmanager
def style() -> Iterator[None]:
    """Figures made and saved inside look as embscope draws them: matplotlib's defaults, not a matplotlibrc
    found in the working directory or the user's config, with the fonts of `families()` and no warning on stderr."""
    matplotlib = matplotlib_quietly()
    with quiet(), matplotlib.rc_context():
        matplotlib.rcdefaults()  # inside the context: the caller's settings are put back when it ends
        # the last family reached through the generic one, which an SVG's <text> then names for a viewer without
        # them: matplotlib looks up each family of the list for every text it lays out, and the last two were one
        *named, last = families()
        matplotlib.rcParams.update({**OWN, "font.family": [*named, "sans-serif"], "font.sans-serif": [last]})
        yield
