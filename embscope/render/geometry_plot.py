"""The figure of `geometry --plot`: each dimension's share of the mean cosine (a rogue dimension stands out as
one tall bar), the singular value spectrum of the centred table, and for a position table the power along
positions by period."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..analysis.geometry import Geometry
from ..core.text import printable
from .names import Output, emb_title
from .plot_style import drawable, log_scale, wrapped
from .plots import label, new_figure, save

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ..embeddings import Embeddings

LABELLED = 3  # dimensions and periods named on the plot
PANEL_WIDTH = 6.0  # inches
MARK = "tab:red"


def draw_dimensions(ax: Axes, found: Geometry) -> None:
    mean = found.mean_cosine
    values = found.contributions / mean if mean else found.contributions
    ax.stairs(np.nan_to_num(values), np.arange(found.dim + 1) - 0.5, fill=True, color="tab:blue")  # one patch
    for d in found.dimensions[:LABELLED]:
        value = d.share if d.share is not None else d.contribution
        ax.bar([d.dim], [value], width=1.0, color=MARK)
        label(ax, f"dim {d.dim}: {value:.1%}" if d.share is not None else f"dim {d.dim}", (d.dim, value),
              color=MARK)
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_title(wrapped("each dimension's part of the mean cosine" + (f" ({mean:+.4f})" if mean is not None else ""),
                         PANEL_WIDTH))
    ax.set_xlabel("dimension")
    ax.set_ylabel("share of the mean cosine" if mean else "CC_k (the mean cosine is 0 or undefined)")


def say_why(ax: Axes, reason: str) -> None:
    """The panel's figure could not be drawn: the reason in its place, drawn literally."""
    ax.text(0.5, 0.5, printable(reason), ha="center", va="center", transform=ax.transAxes, parse_math=False, wrap=True)


def draw_spectrum(ax: Axes, found: Geometry) -> None:
    spectrum = found.spectrum
    if spectrum is None:
        say_why(ax, found.reasons.get("spectrum", "no spectrum"))
        return
    squares = spectrum.singular_values ** 2
    shares = squares / squares.sum()
    index = np.arange(1, len(shares) + 1)
    shown = shares > 0
    ax.plot(index[shown], shares[shown], color="tab:blue", label="share of the variance")
    log_scale(ax, "y")
    ax.axvline(spectrum.effective_rank, color=MARK, linestyle="--", linewidth=0.8,
               label=f"effective rank {spectrum.effective_rank:.1f}")
    twin = ax.twinx()
    twin.plot(index, np.cumsum(shares), color="grey", linewidth=0.8, label="cumulative")
    twin.set_ylim(0, 1.02)
    twin.set_ylabel("cumulative share")
    ax.set_xlim(1, max(2, min(found.used, found.dim)))  # every direction the table has: min(V, d)
    ax.set_title(wrapped(f"spectrum of the centred table: top 1 {spectrum.shares[1]:.1%}, top 10 "
                         f"{spectrum.shares[10]:.1%}", PANEL_WIDTH))
    ax.set_xlabel("principal direction (largest first)")
    ax.set_ylabel("s^2 / sum s^2 (log scale)")
    ax.legend(loc="upper right", fontsize=8)


def draw_periods(ax: Axes, found: Geometry) -> None:
    periods = found.periods
    if periods is None:
        say_why(ax, found.reasons.get("periods", "no periods"))
        return
    ordered = sorted(periods, key=lambda p: p.frequency)
    ax.plot([p.period for p in ordered], [p.share for p in ordered], color="tab:blue", marker=".", markersize=3)
    longest = max(p.period for p in periods)
    for p in periods[:LABELLED]:
        ax.plot([p.period], [p.share], "o", color=MARK)
        right = p.period > longest / 4  # near the right edge: the label goes to the left of its point
        label(ax, f"T/{p.frequency} = {p.period:.4g}: {p.share:.1%}", (p.period, p.share), color=MARK,
              offset=(-6, 6) if right else (6, 6), ha="right" if right else "left")
    log_scale(ax, "x")
    ax.set_title(wrapped("power along positions by period (rfft of the centred table)", PANEL_WIDTH))
    ax.set_xlabel("period (positions, log scale)")
    ax.set_ylabel("share of the power")


def figure(found: Geometry, checkpoint: str) -> Figure:  # `checkpoint` as names.emb_title gives it
    panels = 3 if found.power is not None or found.role == "position" else 2
    fig = new_figure(PANEL_WIDTH * panels, 5)
    fig.suptitle(wrapped(f"{drawable(checkpoint)} - {found.role} table {drawable(found.name)}: geometry",
                         PANEL_WIDTH * panels), parse_math=False)
    axes = fig.subplots(1, panels)
    draw_dimensions(axes[0], found)
    draw_spectrum(axes[1], found)
    if panels == 3:
        draw_periods(axes[2], found)
    return fig


def draw(found: Geometry, emb: Embeddings, target: Output, inputs: list[Path]) -> None:
    """The figure written to `target`, titled with the checkpoint as every plot names it."""
    checkpoint = emb_title(emb)
    save(lambda: figure(found, checkpoint), target, inputs=inputs)
