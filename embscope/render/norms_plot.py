"""The token-norms figure of `norms --plot`: the distribution of row norms with the band of unflagged norms,
beside the lowest and highest rows by name. Flagged rows are red in both panels, padding rows hatched,
legends sit below the data, and at most LABELLED_ROWS points carry a label."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..analysis.norms import MAD_SCALE
from ..core.text import printable
from .plot_style import band_text, drawable, histogram, log_scale, range_bands, runs, wrapped
from .plots import new_figure

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

LABELLED_ROWS = 10  # lowest and highest rows drawn by name; flagged rows labelled in the histogram at most
FLAGGED = "tab:red"
ROWS = "tab:blue"
BAND = "grey"
PADDING_HATCH = "///"
UNTRAINED = "tab:orange"


def ranked_rows(norms: np.ndarray, count: int = LABELLED_ROWS) -> list[int]:
    """The rows with the lowest and the highest finite norms, lowest first: the rows drawn by name."""
    order = np.argsort(np.where(np.isfinite(norms), norms, np.inf), kind="stable")[:int(np.isfinite(norms).sum())]
    lowest = [int(row) for row in order[:count]]
    return lowest + [int(row) for row in order[-count:] if row not in lowest]


def connector(colour: str, start: float = 0.5) -> dict[str, object]:
    """A label's thin line to the point it names, from its text's lower edge (every label stands above its point),
    `start` of the way along it, 4 points off (the text's padding of 2 and matplotlib's shrink of 2). A line
    straight down from the middle is where matplotlib would start it by clipping it to the padded box, a bisection
    in Python that took a fifth of the token figure's drawing. In a column of labels, the line to a row beyond the
    column leaves the text's end that faces the row, so it passes below the labels under it."""
    return {"arrowstyle": "-", "color": colour, "alpha": 0.4, "lw": 0.6, "patchA": None, "relpos": (start, 0.0),
            "shrinkA": 4}


def band(median: float, mad: float, threshold: float) -> tuple[float, float] | None:
    """The norms no row is flagged for: median +- threshold x 1.4826 MAD (None when MAD is 0 or undefined)."""
    if not (math.isfinite(mad) and mad > 0):
        return None
    return max(median - threshold * MAD_SCALE * mad, 0.0), median + threshold * MAD_SCALE * mad  # norms are >= 0


def token_norms_figure(norms: np.ndarray, median: float, mad: float, threshold: float, flagged: np.ndarray,
                       z: np.ndarray, names: dict[int, str], checkpoint: str, table: str,
                       padding_from: int | None = None, size: tuple[float, float] = (13, 5.5),
                       untrained: np.ndarray | None = None) -> Figure:
    """`flagged`: row ids of the flagged rows, most extreme first (an array: there may be millions); `z`: every
    row's robust z; `names`: row -> token string for the rows drawn by name; `padding_from`: the first row
    past the tokenizer (None: unknown or none); `untrained`: row ids of the rows that never trained."""
    figure = new_figure(*size)
    figure.suptitle(f"{drawable(checkpoint)} - {drawable(table)}: L2 norms of token rows", parse_math=False)
    hist_ax, rank_ax = figure.subplots(1, 2)
    rows = len(norms)
    finite = np.isfinite(norms)
    is_flagged = np.zeros(rows, dtype=bool)
    is_flagged[flagged] = True
    padding = np.zeros(rows, dtype=bool)
    if padding_from is not None:
        padding[padding_from:] = True
    unflagged_band = band(median, mad, threshold)

    def name(row: int) -> str:  # a row without a token string is its number once, not "#9 (row 9)"
        return f"{names[row]} (row {row})" if row in names else f"row {row}"

    never = np.zeros(rows, dtype=bool)
    if untrained is not None:
        never[untrained] = True
    draw_distribution(hist_ax, norms, finite, is_flagged, padding, unflagged_band, threshold, never)
    labelled = [(int(row), float(z[row])) for row in flagged[finite[flagged]][:LABELLED_ROWS]]
    # the labels stand in a column on the side away from the rows they name
    left = bool(labelled) and float(np.median([norms[row] for row, _ in labelled])) > median
    for place, (row, row_z) in enumerate(labelled):
        # a row beyond the column (on the median's other side): its line leaves the text's end that faces it
        beyond = (float(norms[row]) > median) == left
        hist_ax.annotate(drawable(f"{name(row)}: z {row_z:+.3g}"), xy=(norms[row], 0), xycoords=("data", "axes fraction"),
                         xytext=(0.02 if left else 0.98, 0.95 - 0.06 * place), textcoords="axes fraction",
                         ha="left" if left else "right", fontsize=7, color=FLAGGED, parse_math=False,
                         arrowprops=connector(FLAGGED, (1.0 if left else 0.0) if beyond else 0.5))
    lost = [drawable(name(int(row))) for row in flagged[~finite[flagged]][:LABELLED_ROWS]]
    if lost:
        hist_ax.text(0.98, 0.98, "no finite norm: " + ", ".join(lost), transform=hist_ax.transAxes,
                     ha="right", va="top", fontsize=7, color=FLAGGED, parse_math=False)
    draw_ranked(rank_ax, norms, is_flagged, padding, unflagged_band, name, never)
    return figure


def draw_distribution(ax: Axes, norms: np.ndarray, finite: np.ndarray, flagged: np.ndarray,
                      padding: np.ndarray, unflagged: tuple[float, float] | None, threshold: float,
                      never: np.ndarray | None = None) -> None:
    """The histogram of norms; `never`: the rows that never trained, drawn in a colour of their own."""
    values = norms[finite]
    low, high = (float(values.min()), float(values.max())) if len(values) else (0.0, 1.0)
    bins = np.linspace(low, high if high > low else low + 1, min(100, max(10, len(values) // 20)) + 1).tolist()
    never = never if never is not None else np.zeros(len(norms), dtype=bool)
    plain = finite & ~flagged & ~never
    if plain.any():  # a legend names only what is drawn: no "rows (0)" when every row is flagged or untrained
        histogram(ax, norms[plain], bins, color=ROWS, label=f"rows ({int(plain.sum()):,})")
    if never.any():
        histogram(ax, norms[finite & never], bins, color=UNTRAINED, label=f"never trained ({int(never.sum()):,})")
    if flagged.any():
        histogram(ax, norms[finite & flagged], bins, color=FLAGGED,
                  label=f"flagged: |robust z| > {threshold:g} ({int(flagged.sum()):,})")
    if padding.any():
        histogram(ax, norms[finite & padding], bins, fill=False, hatch=PADDING_HATCH, color="black",
                  label=f"padding rows past the tokenizer ({int(padding.sum()):,})")
    if unflagged is not None:
        ax.axvspan(*unflagged, color=BAND, alpha=0.15, label=f"|robust z| <= {threshold:g}: not flagged")
    log_scale(ax, "y")
    ax.set_title("distribution of row norms")
    ax.set_xlabel("L2 norm")
    ax.set_ylabel("rows (log scale)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=8, frameon=False)


def draw_ranked(ax: Axes, norms: np.ndarray, flagged: np.ndarray, padding: np.ndarray,
                unflagged: tuple[float, float] | None, name: Callable[[int], str],
                never: np.ndarray | None = None) -> None:
    from matplotlib.patches import Patch
    shown = ranked_rows(norms)
    values = norms[shown]
    y = np.arange(len(shown))
    never = never if never is not None else np.zeros(len(norms), dtype=bool)
    ax.barh(y, values, color=[FLAGGED if flagged[row] else UNTRAINED if never[row] else ROWS for row in shown],
            hatch=[PADDING_HATCH if padding[row] else "" for row in shown], edgecolor="black", linewidth=0.3)
    ax.set_yticks(y, [drawable(name(row)) for row in shown])
    for tick in ax.get_yticklabels():
        tick.set_parse_math(False)
    ax.invert_yaxis()
    if unflagged is not None:
        ax.axvspan(*unflagged, color=BAND, alpha=0.15)
    if len(values):  # start where the differences show, not at zero (after the band, which would widen it)
        low, high = float(values.min()), float(values.max())
        margin = (high - low) * 0.08 or abs(high) * 0.05 or 1.0
        ax.set_xlim(low - margin, high + margin)
    ax.set_title(f"lowest and highest {LABELLED_ROWS} rows")
    ax.set_xlabel("L2 norm (axis starts near the lowest shown)")
    handles = []  # only the kinds of bar drawn
    if (~flagged[shown] & ~never[shown]).any():
        handles.append(Patch(color=ROWS, label="not flagged"))
    if flagged[shown].any():
        handles.append(Patch(color=FLAGGED, label="flagged"))
    if never[shown].any():
        handles.append(Patch(color=UNTRAINED, label="never trained"))
    if padding[shown].any():
        handles.append(Patch(facecolor="white", edgecolor="black", hatch=PADDING_HATCH, label="padding row"))
    if unflagged is not None:
        handles.append(Patch(color=BAND, alpha=0.15, label="band of unflagged norms"))
    if handles:  # a table of NaN or Inf rows draws no bar, and a legend of no columns raised ValueError
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=min(len(handles), 3),
                  fontsize=8, frameon=False)  # 4 or 5 on one line run past a half-width panel


# ---------------------------------------------------------------- the position-norms figure

JOIN_GAP = 1  # flagged rows with this many rows between them are one run, drawn as one shaded range
SHADED_RUN = 3  # flagged rows in a run drawn as a shaded range rather than dots


def position_norms_figure(norms: np.ndarray, median: float, flagged: list[tuple[int, float, float]],
                          untrained: list[tuple[int, int]], untrained_text: str, trend: np.ndarray | None,
                          checkpoint: str, table: str, first_row: int = 0,
                          size: tuple[float, float] = (11, 5)) -> Figure:
    """Norm by position: never-trained ranges shaded with one label each, runs of flagged rows shaded with one
    label each, single flagged rows as dots; at most LABELLED_ROWS labels in all, the most extreme first.
    `flagged`: (row, norm, robust z), most extreme first; `untrained`: (first row, last row) ranges."""
    figure = new_figure(*size)
    ax = figure.subplots()
    x = np.arange(len(norms)) - first_row
    ax.plot(x, np.where(np.isfinite(norms), norms, np.nan), color=ROWS, linewidth=1, label="L2 norm")
    if trend is not None:
        ax.plot(x, trend, color=BAND, linewidth=0.8, linestyle="--", label="running median of trained neighbours")
    ax.axhline(median, color=BAND, linestyle=":", linewidth=0.8, label=f"median {median:.3g}")
    labels: list[tuple[float, float, str, str]] = []  # (x, y, text, colour) in the order they are wanted
    range_bands(ax, [(a - first_row, b - first_row, "") for a, b in untrained], color=UNTRAINED, alpha=0.18,
                limit=0, legend=f"never trained ({sum(b - a + 1 for a, b in untrained):,} rows)")  # labelled below
    labels += [((a + b) / 2 - first_row, float(np.nanmax(norms[a:b + 1])),
                band_text(a - first_row, b - first_row, "never trained"), UNTRAINED) for a, b in untrained]
    finite = [(row, norm, z) for row, norm, z in flagged if math.isfinite(norm)]
    labels += flagged_labels(ax, norms, finite, first_row)
    dots = [row for row, _, _ in finite]
    if dots:
        ax.plot(np.array(dots) - first_row, norms[dots], "o", color=FLAGGED, markersize=4,
                label=f"flagged ({len(flagged):,})")
    for place, (lx, ly, text, colour) in enumerate(labels[:LABELLED_ROWS]):
        ax.annotate(drawable(text), xy=(lx, ly), xytext=(0, 8 + 11 * (place % 3)), textcoords="offset points",
                    ha="center", fontsize=8, color=colour, parse_math=False,
                    arrowprops=connector(colour))
    if len(labels) > LABELLED_ROWS:
        ax.text(0.99, 0.01, f"{len(labels) - LABELLED_ROWS} more flagged places not labelled (see the listing)",
                transform=ax.transAxes, ha="right", va="bottom", fontsize=7, color=FLAGGED)
    lost = [f"position {row - first_row} ({'NaN' if math.isnan(norm) else 'Inf'})"
            for row, norm, _ in flagged if not math.isfinite(norm)][:LABELLED_ROWS]
    if lost:
        ax.text(0.01, 0.99, "not drawn: " + ", ".join(lost), transform=ax.transAxes, va="top", fontsize=8,
                color=FLAGGED, parse_math=False)
    # titles whole (never cut to MAX_LABEL as `drawable` would), control characters escaped, wrapped to the width
    ax.set_title(wrapped(printable(f"{checkpoint} - {table}: L2 norm by position"), size[0]), parse_math=False)
    if untrained_text:  # the verdict in its own words, above the title
        figure.suptitle(wrapped(printable(untrained_text), size[0]), fontsize=8, color=UNTRAINED, parse_math=False)
    ax.set_xlabel("position" if not first_row else f"position (row - {first_row})")
    ax.set_ylabel("L2 norm")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=4, fontsize=8, frameon=False)
    return figure


def flagged_labels(ax: Axes, norms: np.ndarray, finite: list[tuple[int, float, float]],
                   first_row: int) -> list[tuple[float, float, str, str]]:
    """Runs of SHADED_RUN or more flagged rows shaded, one label each; single rows labelled by themselves; the
    labels in order of the most extreme row they hold."""
    severity = {row: index for index, (row, _, _) in enumerate(finite)}
    z_of = {row: z for row, _, z in finite}
    labels: list[tuple[float, float, str, str]] = []
    for a, b in sorted(runs(severity, JOIN_GAP), key=lambda run: min(severity[r] for r in severity
                                                                    if run[0] <= r <= run[1])):
        members = [row for row in severity if a <= row <= b]
        if b - a + 1 >= SHADED_RUN:
            range_bands(ax, [(a - first_row, b - first_row, "")], color=FLAGGED, limit=0)  # labelled by the caller
            labels.append(((a + b) / 2 - first_row, float(np.nanmax(norms[a:b + 1])),
                           band_text(a - first_row, b - first_row, f"{len(members)} flagged"), FLAGGED))
            continue
        labels += [(row - first_row, float(norms[row]),
                    f"position {row - first_row}: {norms[row]:.3g}, z {z_of[row]:+.3g}", FLAGGED) for row in members]
    return labels

