"""The `compare --plot` figure. Two checkpoints: the row cosines, each row's norm in B against A, the relative
change by row and both position profiles; three or more: the trajectory against step, and the position profiles
of the first, middle and last checkpoints overlaid. matplotlib is imported inside `figure` only (through
plots.new_figure)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..analysis.compare import Comparison
from ..series import Step as CheckpointStep
from .compare import Labels
from .names import Output, checkpoint_title
from .plot_style import drawable, log_scale, wrapped
from .plots import new_figure, save

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

STYLES = {"token": "tab:blue", "position": "tab:orange", "output": "tab:green"}
MAX_POINTS = 20_000  # rows drawn per table in a scatter, evenly spaced


def steps_axis(labels: Labels) -> tuple[np.ndarray, str]:
    """Steps when every checkpoint has one, else the checkpoints' order."""
    steps = [step.value for _, step in labels.checkpoints]
    if all(s is not None for s in steps):
        return np.array(steps, dtype=np.float64), "step"
    return np.arange(len(steps), dtype=np.float64), "checkpoint (in order; some steps unknown)"


def figure(comparison: Comparison, labels: Labels) -> Figure:  # matplotlib is imported lazily
    """Two checkpoints: how each row moved; three or more: the trajectory over the steps."""
    return pair_figure(comparison, labels) if comparison.checkpoints == 2 else trajectory_figure(comparison, labels)


def named(path: Path, step: CheckpointStep) -> str:
    return checkpoint_title(path) + f" ({step.text()})"


def bins_for(values: np.ndarray) -> list[float]:
    """Histogram edges over the values' range, widened when every value is the same (two identical tables)."""
    low, high = float(values.min()), float(values.max())
    if high - low < 1e-9:
        low, high = low - 0.01, high + 0.01
    edges: list[float] = np.linspace(low, high, min(100, max(10, len(values) // 10)) + 1).tolist()
    return edges


def spread(count: int) -> np.ndarray:
    """At most MAX_POINTS indices of `count`, evenly spaced: a scatter of millions of rows takes GBs to draw."""
    return np.arange(count) if count <= MAX_POINTS else np.linspace(0, count - 1, MAX_POINTS).astype(np.int64)


def pair_figure(comparison: Comparison, labels: Labels) -> Figure:
    """A against B row by row: the row cosines, each row's norm in B against A, the relative change by row,
    and the position profiles."""
    fig = new_figure(13, 9)
    (a, step_a), (b, step_b) = labels.checkpoints
    # each name cut on its own: the title cut whole kept A's name and lost B's ("B =....safetensors")
    aligned = any(found.alignment is not None for found in comparison.tables.values())
    rotated = ("; B rotated onto A (orthogonal Procrustes): the cosines and changes are of the aligned rows"
               if aligned else "")
    fig.suptitle(wrapped(f"A = {drawable(named(a, step_a))}  vs  B = {drawable(named(b, step_b))}{rotated}", 13),
                 parse_math=False)
    (cos_ax, norm_ax), (change_ax, profile_ax) = fig.subplots(2, 2)
    for role, found in comparison.tables.items():
        colour, changes = STYLES.get(role, "tab:grey"), found.changes
        cosines = changes.cosine[np.isfinite(changes.cosine)]
        if len(cosines):
            cos_ax.hist(cosines, bins=bins_for(cosines), color=colour, alpha=0.6,
                        label=f"{role}: mean {found.summary.mean_cosine:+.3f} over {len(cosines):,} rows")
        shown = spread(changes.count)
        thinned = f", 1 in {-(-changes.count // len(shown)):,}" if len(shown) < changes.count else ""
        norm_ax.scatter(changes.norm_a[shown], changes.norm_b[shown], s=4, color=colour, alpha=0.5, linewidths=0,
                        rasterized=True,  # a dense panel: one image inside a vector file
                        label=f"{role} ({changes.count:,} rows{thinned})")
        rows = found.pairing.rows_a()[shown] - (found.pairing.start_a if role == "position" else 0)
        relative = np.where(np.isfinite(changes.relative[shown]), changes.relative[shown], np.nan)
        change_ax.scatter(rows, relative, s=4, color=colour, alpha=0.5, linewidths=0, rasterized=True,
                          label=f"{role}: {found.summary.unchanged:,} rows bitwise unchanged")
    cos_ax.set_title("row cosine A vs B, Procrustes-aligned" if aligned else "row cosine A vs B")
    cos_ax.set_xlabel("cosine")
    cos_ax.set_ylabel("rows")
    low, high = norm_ax.get_xlim()
    norm_ax.plot([low, high], [low, high], color="grey", linewidth=0.8, label="same norm")
    norm_ax.set_title("row norm in B against A")
    norm_ax.set_xlabel("L2 norm in A")
    norm_ax.set_ylabel("L2 norm in B")
    change_ax.set_title("relative change ||b - a|| / ||a|| by row")
    change_ax.set_xlabel("row (position, for the position table)")
    change_ax.set_ylabel("relative change")
    for ax in (cos_ax, norm_ax, change_ax):
        if ax.has_data():
            ax.legend(loc="best", fontsize=8)
    draw_profiles(profile_ax, comparison, labels, "position similarity by distance (A, B)")
    return fig


def trajectory_figure(comparison: Comparison, labels: Labels) -> Figure:
    x, x_label = steps_axis(labels)
    fig = new_figure(13, 9)
    first, last = labels.checkpoints[0], labels.checkpoints[-1]
    source = f"{checkpoint_title(labels.origin)}: " if labels.run else ""
    fig.suptitle(wrapped(f"{drawable(source)}{len(labels.checkpoints)} checkpoints, {first[1].text()} to "
                         f"{last[1].text()}: first {drawable(named(*first))}, last {drawable(named(*last))}", 13),
                 parse_math=False)
    (cos_ax, norm_ax), (count_ax, profile_ax) = fig.subplots(2, 2)
    cos_ax.sharex(norm_ax)  # the first checkpoint has no cosine to a previous one: keep its place on the axis
    count_ax.sharex(norm_ax)

    for role, steps in comparison.trajectory.items():
        colour = STYLES.get(role, "tab:grey")
        cos_ax.plot(x, [s.cosine_to_previous for s in steps], "o-", color=colour, label=f"{role}: to previous")
        cos_ax.plot(x, [s.cosine_to_first for s in steps], "s--", color=colour, label=f"{role}: to first")
        norm_ax.plot(x, [s.state.mean_norm if s.state else np.nan for s in steps], "o-", color=colour,
                     label=f"{role}: mean norm")
        if role == "position":
            norm_ax.plot(x, [s.state.position0_norm if s.state and s.state.position0_norm is not None else np.nan
                             for s in steps], "^:", color=colour, label="position 0 norm")
        count_ax.plot(x, [s.state.anomalies if s.state else np.nan for s in steps], "o-", color=colour,
                      label=f"{role}: anomalies")
        count_ax.plot(x, [s.unchanged_from_previous if s.unchanged_from_previous is not None else np.nan
                          for s in steps], "s--", color=colour, label=f"{role}: unchanged since previous")
    cos_ax.set_title("mean row cosine")
    cos_ax.set_ylabel("cosine")
    norm_ax.set_title("row norms")
    norm_ax.set_ylabel("L2 norm")
    count_ax.set_title("rows flagged by norms; rows bitwise unchanged")
    count_ax.set_ylabel("rows")
    for ax in (cos_ax, norm_ax, count_ax):
        ax.set_xlabel(x_label)
        ax.legend(loc="best", fontsize=8)
    draw_profiles(profile_ax, comparison, labels, "position similarity by distance (first, middle, last)")
    return fig


def draw_profiles(ax: Axes, comparison: Comparison, labels: Labels, title: str) -> None:
    """The position profiles of the first, middle and last checkpoints."""
    profiles = comparison.states.get("position", [])
    picks = sorted({0, len(profiles) // 2, len(profiles) - 1}) if profiles else []
    drawn = defined = 0
    for index in picks:
        state = profiles[index]
        if state is None or state.profile is None or not len(state.profile.mean):
            continue
        step = labels.checkpoints[index][1]
        which = ("A: " if index == 0 else "B: ") if len(profiles) == 2 else ""
        ax.plot(state.profile.offsets, state.profile.mean, label=which + step.text())
        drawn += 1
        defined += bool(np.isfinite(state.profile.mean).any())
    ax.set_title(title)
    ax.axhline(0, color="grey", linewidth=0.8)
    if defined:  # a log axis needs a point to set its limits: matplotlib raises on a curve of NaN alone
        log_scale(ax, "x")
        ax.legend(loc="best", fontsize=8)
    else:
        ax.text(0.5, 0.5, "no cosine at any distance: every position row is zero or NaN" if drawn else
                "no learned position table", transform=ax.transAxes, ha="center")
    ax.set_xlabel("distance k (positions, log scale)")
    ax.set_ylabel("mean cos(p_i, p_i+k)")


def draw(comparison: Comparison, labels: Labels, target: Output, inputs: Iterable[Path] = ()) -> Path:
    """Write the figure whole (see render.files), never over one of the checkpoints compared."""
    return save(lambda: figure(comparison, labels), target, inputs=inputs)
