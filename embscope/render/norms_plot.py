"""The token-norms figure of `norms --plot`: the distribution of row norms with the band of unflagged norms,
beside the lowest and highest rows by name. Flagged rows are red in both panels, padding rows hatched,
legends sit below the data, and at most LABELLED_ROWS points carry a label."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..analysis.norms import MAD_SCALE
from .plot_style import drawable, histogram, log_scale
from .plots import new_figure

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

LABELLED_ROWS = 10  # lowest and highest rows drawn by name; flagged rows labelled in the histogram at most
FLAGGED = "tab:red"
ROWS = "tab:blue"
BAND = "grey"
PADDING_HATCH = "///"


def ranked_rows(norms: np.ndarray, count: int = LABELLED_ROWS) -> list[int]:
    """The rows with the lowest and the highest finite norms, lowest first: the rows drawn by name."""
    order = np.argsort(np.where(np.isfinite(norms), norms, np.inf), kind="stable")[:int(np.isfinite(norms).sum())]
    lowest = [int(row) for row in order[:count]]
    return lowest + [int(row) for row in order[-count:] if row not in lowest]


def band(median: float, mad: float, threshold: float) -> tuple[float, float] | None:
    """The norms no row is flagged for: median +- threshold x 1.4826 MAD (None when MAD is 0 or undefined)."""
    if not (math.isfinite(mad) and mad > 0):
        return None
    return max(median - threshold * MAD_SCALE * mad, 0.0), median + threshold * MAD_SCALE * mad  # norms are >= 0


def token_norms_figure(norms: np.ndarray, median: float, mad: float, threshold: float, flagged: np.ndarray,
                       z: np.ndarray, names: dict[int, str], checkpoint: str, table: str,
                       padding_from: int | None = None, size: tuple[float, float] = (13, 5.5)) -> Figure:
    """`flagged`: row ids of the flagged rows, most extreme first (an array: there may be millions); `z`: every
    row's robust z; `names`: row -> token string for the rows drawn by name; `padding_from`: the first row
    past the tokenizer (None: unknown or none)."""
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

    def name(row: int) -> str:
        return f"{names.get(row, f'#{row}')} (row {row})"

    draw_distribution(hist_ax, norms, finite, is_flagged, padding, unflagged_band, threshold)
    labelled = [(int(row), float(z[row])) for row in flagged[finite[flagged]][:LABELLED_ROWS]]
    # the labels stand in a column on the side away from the rows they name
    left = bool(labelled) and float(np.median([norms[row] for row, _ in labelled])) > median
    for place, (row, row_z) in enumerate(labelled):
        hist_ax.annotate(drawable(f"{name(row)}: z {row_z:+.3g}"), xy=(norms[row], 0), xycoords=("data", "axes fraction"),
                         xytext=(0.02 if left else 0.98, 0.95 - 0.06 * place), textcoords="axes fraction",
                         ha="left" if left else "right", fontsize=7, color=FLAGGED, parse_math=False,
                         arrowprops={"arrowstyle": "-", "color": FLAGGED, "alpha": 0.4, "lw": 0.6})
    lost = [drawable(name(int(row))) for row in flagged[~finite[flagged]][:LABELLED_ROWS]]
    if lost:
        hist_ax.text(0.98, 0.98, "no finite norm: " + ", ".join(lost), transform=hist_ax.transAxes,
                     ha="right", va="top", fontsize=7, color=FLAGGED, parse_math=False)
    draw_ranked(rank_ax, norms, is_flagged, padding, unflagged_band, name)
    return figure


def draw_distribution(ax: Axes, norms: np.ndarray, finite: np.ndarray, flagged: np.ndarray,
                      padding: np.ndarray, unflagged: tuple[float, float] | None, threshold: float) -> None:
    values = norms[finite]
    low, high = (float(values.min()), float(values.max())) if len(values) else (0.0, 1.0)
    bins = np.linspace(low, high if high > low else low + 1, min(100, max(10, len(values) // 20)) + 1).tolist()
    histogram(ax, norms[finite & ~flagged], bins, color=ROWS, label=f"rows ({int((finite & ~flagged).sum()):,})")
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
                unflagged: tuple[float, float] | None, name: Callable[[int], str]) -> None:
    from matplotlib.patches import Patch
    shown = ranked_rows(norms)
    values = norms[shown]
    y = np.arange(len(shown))
    ax.barh(y, values, color=[FLAGGED if flagged[row] else ROWS for row in shown],
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
    handles = [Patch(color=ROWS, label="not flagged"), Patch(color=FLAGGED, label="flagged")]
    if padding[shown].any():
        handles.append(Patch(facecolor="white", edgecolor="black", hatch=PADDING_HATCH, label="padding row"))
    if unflagged is not None:
        handles.append(Patch(color=BAND, alpha=0.15, label="band of unflagged norms"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=len(handles), fontsize=8,
              frameon=False)
