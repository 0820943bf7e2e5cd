"""The `undertrained --plot` figure: for each table analysed, one row of two panels: the indicator's
histogram with the reference rows and the threshold marked, beside the norms with the band of ordinary
norms. matplotlib is imported inside plots' functions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..analysis.norms import MAD_SCALE
from ..analysis.undertrained import NORM_Z, UndertrainedReport
from .plot_style import drawable, log_scale, wrapped
from .plots import new_figure

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

CANDIDATE = "tab:red"
REFERENCE = "tab:orange"
ROWS = "tab:blue"


def undertrained_figure(reports: Sequence[UndertrainedReport], checkpoint: str) -> Figure:
    figure = new_figure(13, 5.5 * len(reports))
    figure.suptitle(wrapped(f"{drawable(checkpoint)}: under-trained candidates", 13), parse_math=False)
    for report, row in zip(reports, figure.subfigures(len(reports), 1, squeeze=False)[:, 0]):
        row.suptitle(wrapped(f"{report.table} table {drawable(report.name)}: {len(report.candidates):,} candidates",
                             13, 10), parse_math=False, fontsize=10)
        score_ax, norm_ax = row.subplots(1, 2)
        draw_indicator(score_ax, report)
        draw_norms(norm_ax, report)
    return figure


def bins_for(values: np.ndarray) -> list[float]:
    low, high = (float(values.min()), float(values.max())) if len(values) else (0.0, 1.0)
    if high <= low:
        low, high = low - 0.5, high + 0.5
    edges: list[float] = np.linspace(low, high, min(100, max(20, len(values) // 20)) + 1).tolist()
    return edges


def draw_indicator(ax: Axes, report: UndertrainedReport) -> None:
    ax.set_title("indicator: cosine to the mean reference row (1st PC removed)")
    if not report.has_indicator:
        ax.text(0.5, 0.5, f"no indicator:\n{drawable(report.reference.description)}", transform=ax.transAxes,
                ha="center", va="center", wrap=True, parse_math=False)
        ax.set_axis_off()
        return
    scores = report.scores
    finite = np.isfinite(scores)
    in_reference = np.zeros(len(scores), dtype=bool)
    in_reference[report.reference.rows] = True
    threshold = report.threshold.value
    above = finite & (scores > threshold) if threshold is not None else np.zeros(len(scores), dtype=bool)
    bins = bins_for(scores[finite])
    ax.hist(scores[finite & ~above], bins=bins, color=ROWS, histtype="stepfilled", label=f"rows ({int((finite & ~above).sum()):,})")
    if threshold is not None:
        ax.hist(scores[above], bins=bins, color=CANDIDATE, histtype="stepfilled", label=f"candidates: above the threshold ({int(above.sum()):,})")
        ax.axvline(threshold, color=CANDIDATE, linestyle="--", linewidth=1.2,
                   label=f"threshold {threshold:+.3f} (gap {report.threshold.gap:.3g})")
    else:
        ax.text(0.02, 0.97, "no threshold: no gap stands out", transform=ax.transAxes, va="top", fontsize=9)
    ax.hist(scores[finite & in_reference], bins=bins, histtype="step", color=REFERENCE, linewidth=1.5,
            label=f"of which reference rows ({int((finite & in_reference).sum()):,}, {report.reference.source})")
    log_scale(ax, "y")
    ax.set_xlabel("cosine")
    ax.set_ylabel("rows (log scale)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=8, frameon=False)


def draw_norms(ax: Axes, report: UndertrainedReport) -> None:
    norms, z = report.norms, report.norm_z
    finite = np.isfinite(norms)
    ax.set_title(f"row norms: the band holds |robust z| <= {NORM_Z:g}")
    flagged = finite & (np.abs(np.nan_to_num(z, nan=0.0)) > NORM_Z)
    bins = bins_for(norms[finite])
    ax.hist(norms[finite & ~flagged], bins=bins, color=ROWS, histtype="stepfilled", label=f"rows ({int((finite & ~flagged).sum()):,})")
    if flagged.any():
        ax.hist(norms[flagged], bins=bins, color=CANDIDATE, histtype="stepfilled", label=f"norm-high / norm-low ({int(flagged.sum()):,})")
    if finite.any():
        median, spread = report.norm_median, MAD_SCALE * report.norm_mad  # as analysis measured norm_z
        ax.axvspan(median - NORM_Z * spread, median + NORM_Z * spread, color="grey", alpha=0.15,
                   label=f"median {median:.3g} +- {NORM_Z:g} x {spread:.3g}")
    log_scale(ax, "y")
    ax.set_xlabel("L2 norm")
    ax.set_ylabel("rows (log scale)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=8, frameon=False)
