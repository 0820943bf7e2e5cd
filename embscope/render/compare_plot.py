"""The `compare --plot` figure: the trajectory against step, and the position profiles of the first, middle and
last checkpoints overlaid. matplotlib is imported inside `figure` only (through plots.new_figure)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ..analysis.compare import Comparison
from ..text import printable
from .compare import Labels
from .plots import new_figure, save

STYLES = {"token": "tab:blue", "position": "tab:orange", "output": "tab:green"}


def steps_axis(labels: Labels) -> tuple[np.ndarray, str]:
    """Steps when every checkpoint has one, else the checkpoints' order."""
    steps = [step.value for _, step in labels.checkpoints]
    if all(s is not None for s in steps):
        return np.array(steps, dtype=np.float64), "step"
    return np.arange(len(steps), dtype=np.float64), "checkpoint (in order; some steps unknown)"


def figure(comparison: Comparison, labels: Labels):  # returns a matplotlib Figure (imported lazily)
    x, x_label = steps_axis(labels)
    fig = new_figure(13, 9)
    first, last = labels.checkpoints[0], labels.checkpoints[-1]
    source = f"{printable(str(labels.origin))}: " if labels.run else ""
    fig.suptitle(f"{source}{len(labels.checkpoints)} checkpoints, {first[1].text()} to {last[1].text()}",
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

    profiles = comparison.states.get("position", [])
    picks = sorted({0, len(profiles) // 2, len(profiles) - 1}) if profiles else []
    drawn = 0
    for index in picks:
        state = profiles[index]
        if state is None or state.profile is None or not len(state.profile.mean):
            continue
        step = labels.checkpoints[index][1]
        profile_ax.plot(state.profile.offsets, state.profile.mean, label=step.text())
        drawn += 1
    profile_ax.set_title("position similarity by distance (first, middle, last)")
    profile_ax.axhline(0, color="grey", linewidth=0.8)
    if drawn:
        profile_ax.set_xscale("log")
        profile_ax.legend(loc="best", fontsize=8)
    else:
        profile_ax.text(0.5, 0.5, "no learned position table", transform=profile_ax.transAxes, ha="center")
    profile_ax.set_xlabel("distance k (positions, log scale)")
    profile_ax.set_ylabel("mean cos(p_i, p_i+k)")
    return fig


def draw(comparison: Comparison, labels: Labels, path: Path, inputs: Iterable[Path] = ()) -> Path:
    """Write the figure whole (see render.files), never over one of the checkpoints compared."""
    return save(figure(comparison, labels), path, inputs=inputs)
