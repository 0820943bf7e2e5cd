"""The HTML report's figures, drawn as SVG by render.svg_chart: the same panels, from the same numbers, as the
commands' matplotlib figures (norms_plot, plots, undertrained_plot, map, compare_plot), which `--plot` and the
Markdown report write as images. Each function returns one <svg> element as a string."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..analysis.norms import MAD_SCALE
from ..analysis.undertrained import NORM_Z, UndertrainedReport
from ..core.role import Role
from ..naming import position_name
from .compare import Labels
from .geometry_plot import LABELLED
from .map import axis_names, method_text
from .names import checkpoint_title, emb_title
from .norms import shown
from .norms_plot import LABELLED_ROWS, band, ranked_rows
from .svg_chart import RDBU_R, VIRIDIS, Axis, Figure, Panel, palette_colours

if TYPE_CHECKING:
    from ..analysis.compare import Comparison
    from ..analysis.geometry import Geometry
    from ..analysis.map import TableMap
    from ..analysis.norms import NormsReport
    from ..analysis.positions import PositionsResult
    from ..embeddings import Embeddings

BLUE, RED, ORANGE, GREEN, GREY = "tab:blue", "tab:red", "tab:orange", "tab:green", "grey"
STYLES = {"token": BLUE, "position": ORANGE, "output": GREEN}
JSON_LISTED = 1000  # flagged rows a norms figure marks at most (as `norms --json` lists them)


def edges(values: np.ndarray, bins: int | None = None) -> np.ndarray:
    """Histogram edges over the finite values, widened when they are all equal."""
    values = values[np.isfinite(values)]
    low, high = (float(values.min()), float(values.max())) if len(values) else (0.0, 1.0)
    if high - low < 1e-12:
        low, high = low - 0.5, high + 0.5
    return np.linspace(low, high, (bins or min(100, max(10, len(values) // 20))) + 1)


def norms_figure(emb: Embeddings, report: NormsReport) -> str:
    title = f"{emb_title(emb)} - {report.role} table {report.name}"
    if report.role == "position":
        return Figure(title, [[position_norms_panel(report)]], panel_height=320).svg()
    norms, flagged = report.summary.norms, report.summary.flagged
    is_flagged = np.zeros(len(norms), dtype=bool)
    is_flagged[flagged] = True
    tokenizer = report.tokenizer
    padding = np.zeros(len(norms), dtype=bool)
    if tokenizer is not None and tokenizer.vocab_size < len(norms):
        padding[tokenizer.vocab_size:] = True
    return Figure(f"{title}: L2 norms of token rows",
                  [[norms_histogram(report, is_flagged, padding), ranked_panel(report, is_flagged, padding)]],
                  panel_height=360).svg()


def position_norms_panel(report: NormsReport) -> Panel:
    """The norm by position, the flagged rows marked and the most extreme named."""
    summary = report.summary
    panel = Panel("L2 norm by position", Axis("position" if not report.first_row else
                                              f"position (row - {report.first_row})"), Axis("L2 norm"))
    norms = summary.norms
    positions = np.arange(len(norms)) - report.first_row
    panel.line(positions, np.where(np.isfinite(norms), norms, np.nan), BLUE)
    panel.rule(summary.mean, GREY, f"mean {summary.mean:.3g}", axis="y")
    panel.rule(summary.median, GREY, f"median {summary.median:.3g}", axis="y", dash="1 3")
    anomalies = summary.anomalies[:JSON_LISTED]
    drawn = [a for a in anomalies if math.isfinite(a.norm)]
    panel.dots([a.index - report.first_row for a in drawn], [a.norm for a in drawn], RED, radius=3.5, opacity=1.0)
    for a in drawn[:LABELLED_ROWS]:  # the most extreme rows, by name
        panel.label(a.index - report.first_row, a.norm,
                    f"{position_name(a.index, report.first_row)}: {a.norm:.3g}, {a.ratio_to_mean:.1f}x mean", RED)
    lost = [f"{position_name(a.index, report.first_row)} ({'NaN' if math.isnan(a.norm) else 'Inf'})"
            for a in anomalies if not math.isfinite(a.norm)]
    panel.notes = [f"not drawn: {', '.join(lost)}"] if lost else []
    return panel


def norms_histogram(report: NormsReport, is_flagged: np.ndarray, padding: np.ndarray) -> Panel:
    """The token rows' norms: the unflagged, the flagged and the padding rows, and the band that is not flagged."""
    summary = report.summary
    norms = summary.norms
    finite = np.isfinite(norms)
    unflagged = band(summary.median, summary.mad, summary.threshold)
    hist = Panel("distribution of row norms", Axis("L2 norm"), Axis("rows (log scale)", log=True))
    bins = edges(norms)
    hist.histogram(norms[finite & ~is_flagged], bins, BLUE, f"rows ({int((finite & ~is_flagged).sum()):,})")
    if is_flagged.any():
        hist.histogram(norms[finite & is_flagged], bins, RED,
                       f"flagged: |robust z| > {summary.threshold:g} ({int(is_flagged.sum()):,})")
    if padding.any():
        hist.histogram(norms[finite & padding], bins, "black", f"padding rows past the tokenizer ({int(padding.sum()):,})",
                       outline=True)
    if unflagged is not None:
        hist.span(*unflagged, GREY, f"|robust z| <= {summary.threshold:g}: not flagged")
    return hist


def ranked_panel(report: NormsReport, is_flagged: np.ndarray, padding: np.ndarray) -> Panel:
    """The lowest and highest rows by name, as bars."""
    norms = report.summary.norms
    rows = ranked_rows(norms)
    ranked = Panel(f"lowest and highest {LABELLED_ROWS} rows", Axis("L2 norm (axis starts near the lowest shown)"))
    values = norms[rows]
    if len(values):
        low, high = float(values.min()), float(values.max())
        margin = (high - low) * 0.08 or abs(high) * 0.05 or 1.0
        ranked.x.low, ranked.x.high = low - margin, high + margin
    ranked.bars(values, [f"{shown(report, row)} (row {row})" for row in rows],
                [RED if is_flagged[row] else BLUE for row in rows], [bool(padding[row]) for row in rows])
    ranked.key(BLUE, "not flagged")
    ranked.key(RED, "flagged")
    return ranked


def positions_figure(emb: Embeddings, result: PositionsResult) -> str:
    assert result.profile is not None and result.heatmap is not None
    heatmap, profile = result.heatmap, result.profile
    n = heatmap.positions
    heat = Panel(f"cosine between positions ({n} x {n})", Axis("position j"), Axis("position i", invert=True))
    heat.heatmap(heatmap.cells, (-0.5, n - 0.5, -0.5, n - 0.5), -1.0, 1.0, RDBU_R)  # row 0 at the top
    heat.colourbar = ("cosine", -1.0, 1.0, RDBU_R)
    curve = Panel("similarity by distance", Axis("distance k (positions, log scale)", log=True),
                  Axis("cos(p_i, p_i+k)"))
    offsets = np.arange(1, len(profile.mean) + 1)
    curve.band(offsets, profile.mean - profile.std, profile.mean + profile.std, BLUE, "mean +- std")
    curve.line(offsets, profile.mean, BLUE, "mean")
    curve.rule(0.0, GREY, axis="y", dash=None)
    for k in sorted({1, len(profile.mean)}):
        if len(profile.mean) and np.isfinite(profile.mean[k - 1]):
            at_end = k == len(profile.mean) and k > 1
            curve.dots([k], [profile.mean[k - 1]], RED, radius=3.5, opacity=1.0, ring=at_end)
            curve.label(k, profile.mean[k - 1], f"k={k}: {profile.mean[k - 1]:+.3f}" + (" (one pair)" if at_end else ""),
                        right=at_end)
    if math.isfinite(profile.nearest_is_adjacent):
        curve.notes = [f"nearest neighbour is adjacent (i+-1) for {profile.nearest_is_adjacent:.1%} of positions"]
    return Figure(f"{emb_title(emb)} - position table {result.table}", [[heat, curve]], panel_height=400).svg()


def undertrained_figure(reports: Sequence[UndertrainedReport], title: str) -> str:
    rows = []
    for report in reports:
        which = f"{report.table} table {report.name}: " if len(reports) > 1 else ""
        score = Panel(f"{which}indicator: cosine to the mean reference row (1st PC removed)", Axis("cosine"),
                      Axis("rows (log scale)", log=True))
        scores = report.scores
        finite = np.isfinite(scores)
        if not report.has_indicator:
            score.empty = f"no indicator: {report.reference.description}"
        else:
            threshold = report.threshold.value
            above = finite & (scores > threshold) if threshold is not None else np.zeros(len(scores), dtype=bool)
            bins = edges(scores)
            score.histogram(scores[finite & ~above], bins, BLUE, f"rows ({int((finite & ~above).sum()):,})")
            if threshold is not None:
                score.histogram(scores[above], bins, RED, f"candidates: above the threshold ({int(above.sum()):,})")
                score.rule(threshold, RED, f"threshold {threshold:+.3f} (gap {report.threshold.gap:.3g})")
            else:
                score.notes = ["no threshold: no gap stands out"]
            reference = np.zeros(len(scores), dtype=bool)
            reference[report.reference.rows] = True
            score.histogram(scores[finite & reference], bins, ORANGE, f"of which reference rows "
                            f"({int((finite & reference).sum()):,}, {report.reference.source})", outline=True)
        norms, z = report.norms, report.norm_z
        finite = np.isfinite(norms)
        norm = Panel(f"row norms: the band holds |robust z| <= {NORM_Z:g}", Axis("L2 norm"),
                     Axis("rows (log scale)", log=True))
        flagged = finite & (np.abs(np.nan_to_num(z, nan=0.0)) > NORM_Z)
        bins = edges(norms)
        norm.histogram(norms[finite & ~flagged], bins, BLUE, f"rows ({int((finite & ~flagged).sum()):,})")
        if flagged.any():
            norm.histogram(norms[flagged], bins, RED, f"norm-high / norm-low ({int(flagged.sum()):,})")
        if finite.any():
            median, spread = report.norm_median, MAD_SCALE * report.norm_mad  # as analysis measured norm_z
            norm.span(median - NORM_Z * spread, median + NORM_Z * spread, GREY,
                      f"median {median:.3g} +- {NORM_Z:g} x {spread:.3g}")
        rows.append([score, norm])
    table = f" in the {reports[0].table} table {reports[0].name}" if len(reports) == 1 else ""
    return Figure(f"{title}: under-trained candidates{table}", rows, panel_height=320).svg()


def map_figure(result: TableMap, title: str) -> str:
    coords = result.projection.coords
    x_name, y_name = axis_names(result)
    ratio = result.projection.ratio
    panel = Panel(f"{result.role} table {result.name}: {' ('.join(method_text(result))})",
                  Axis(x_name.upper() + (f" ({ratio[0]:.1%} of variance)" if ratio else "")),
                  Axis(y_name.upper() + (f" ({ratio[1]:.1%} of variance)" if ratio else "")))
    flagged = result.flagged.indices
    flagged = flagged[np.isfinite(coords[flagged]).all(axis=1)]
    if result.role is Role.position:
        rows = np.arange(result.first_row, result.rows)
        panel.line(coords[rows, 0], coords[rows, 1], GREY, width=0.6)
        positions = rows - result.first_row
        high = float(max(len(positions) - 1, 1))
        panel.dots(coords[rows, 0], coords[rows, 1], palette_colours(positions, 0.0, high, VIRIDIS),
                   radius=2.6, opacity=1.0)
        panel.colourbar = ("position", 0.0, high, VIRIDIS)
    else:
        panel.dots(coords[:, 0], coords[:, 1], BLUE, f"rows ({result.projection.used:,})", opacity=0.5)
    if len(flagged):
        panel.dots(coords[flagged, 0], coords[flagged, 1], RED, f"norm anomalies ({len(flagged):,})", radius=4,
                   ring=True)
    for p in result.points:
        if p.x is not None and p.y is not None:
            panel.dots([p.x], [p.y], "black", radius=2.5, opacity=1.0)
            panel.label(p.x, p.y, p.label if result.role is not Role.position else f"position {p.label}")
    return Figure(title, [[panel]], width=760, panel_height=560).svg()


def compare_figure(comparison: Comparison, labels: Labels) -> str:
    if comparison.checkpoints == 2:
        return pair_figure(comparison, labels)
    return trajectory_figure(comparison, labels)


def named(labels: Labels, index: int) -> str:
    path, step = labels.checkpoints[index]
    return f"{checkpoint_title(path)} ({step.text()})"


def pair_figure(comparison: Comparison, labels: Labels) -> str:
    cos = Panel("row cosine A vs B", Axis("cosine"), Axis("rows"))
    norm = Panel("row norm in B against A", Axis("L2 norm in A"), Axis("L2 norm in B"))
    change = Panel("relative change ||b - a|| / ||a|| by row", Axis("row (position, for the position table)"),
                   Axis("relative change"))
    low, high = math.inf, -math.inf
    for role, found in comparison.tables.items():
        fill, changes = STYLES.get(role, GREY), found.changes
        cosines = changes.cosine[np.isfinite(changes.cosine)]
        if len(cosines):
            cos.histogram(cosines, edges(cosines, min(100, max(10, len(cosines) // 10))), fill,
                          f"{role}: mean {found.summary.mean_cosine:+.3f} over {len(cosines):,} rows")
        norm.dots(changes.norm_a, changes.norm_b, fill, f"{role} ({changes.count:,} rows)", opacity=0.5)
        both = np.concatenate([changes.norm_a, changes.norm_b])
        both = both[np.isfinite(both)]
        if len(both):
            low, high = min(low, float(both.min())), max(high, float(both.max()))
        rows = found.pairing.rows_a() - (found.pairing.start_a if role == "position" else 0)
        relative = np.where(np.isfinite(changes.relative), changes.relative, np.nan)
        change.dots(rows, relative, fill, f"{role}: {found.summary.unchanged:,} rows bitwise unchanged", opacity=0.5)
    if math.isfinite(low):
        norm.line([low, high], [low, high], GREY, "same norm", width=0.8)
    profiles = profile_panel(comparison, labels, "position similarity by distance (A, B)")
    title = f"A = {named(labels, 0)}  vs  B = {named(labels, 1)}"
    return Figure(title, [[cos, norm], [change, profiles]], panel_height=300).svg()


def trajectory_figure(comparison: Comparison, labels: Labels) -> str:
    steps_known = all(step.value is not None for _, step in labels.checkpoints)
    x = np.array([step.value if steps_known else i for i, (_, step) in enumerate(labels.checkpoints)], dtype=np.float64)
    x_label = "step" if steps_known else "checkpoint (in order; some steps unknown)"
    cos = Panel("mean row cosine", Axis(x_label), Axis("cosine"))
    norm = Panel("row norms", Axis(x_label), Axis("L2 norm"))
    count = Panel("rows flagged by norms; rows bitwise unchanged", Axis(x_label), Axis("rows"))
    for role, steps in comparison.trajectory.items():
        fill = STYLES.get(role, GREY)
        cos.line(x, [s.cosine_to_previous for s in steps], fill, f"{role}: to previous", markers=True)
        cos.line(x, [s.cosine_to_first for s in steps], fill, f"{role}: to first", dash="5 3", markers=True)
        norm.line(x, [s.state.mean_norm if s.state else np.nan for s in steps], fill, f"{role}: mean norm",
                  markers=True)
        if role == "position":
            norm.line(x, [s.state.position0_norm if s.state and s.state.position0_norm is not None else np.nan
                          for s in steps], fill, "position 0 norm", dash="1 3", markers=True)
        count.line(x, [s.state.anomalies if s.state else np.nan for s in steps], fill, f"{role}: anomalies",
                   markers=True)
        count.line(x, [s.unchanged_from_previous if s.unchanged_from_previous is not None else np.nan for s in steps],
                   fill, f"{role}: unchanged since previous", dash="5 3", markers=True)
    first, last = labels.checkpoints[0][1], labels.checkpoints[-1][1]
    source = f"{checkpoint_title(labels.origin)}: " if labels.run else ""
    profiles = profile_panel(comparison, labels, "position similarity by distance (first, middle, last)")
    return Figure(f"{source}{len(labels.checkpoints)} checkpoints, {first.text()} to {last.text()}",
                  [[cos, norm], [count, profiles]], panel_height=300).svg()


def profile_panel(comparison: Comparison, labels: Labels, title: str) -> Panel:
    panel = Panel(title, Axis("distance k (positions, log scale)", log=True), Axis("mean cos(p_i, p_i+k)"))
    states = comparison.states.get("position", [])
    picks = sorted({0, len(states) // 2, len(states) - 1}) if states else []
    fills = ("tab:blue", "tab:orange", "tab:green")
    drawn = 0
    for index in picks:
        state = states[index]
        if state is None or state.profile is None or not len(state.profile.mean):
            continue
        which = ("A: " if index == 0 else "B: ") if len(states) == 2 else ""
        panel.line(state.profile.offsets, state.profile.mean, fills[drawn], which + labels.checkpoints[index][1].text())
        drawn += 1
    if drawn:
        panel.rule(0.0, GREY, axis="y", dash=None)
    else:
        panel.empty = "no learned position table"
    return panel


def geometry_figure(found: Geometry, title: str) -> str:
    """The panels of `geometry --plot`: each dimension's share of the mean cosine, the spectrum of the centred
    table, and a position table's power by period."""
    mean = found.mean_cosine
    dims = Panel("each dimension's part of the mean cosine", Axis("dimension"),
                 Axis(f"share of the mean cosine {mean:+.4f}" if mean else "CC_k"))
    values = found.contributions / mean if mean else found.contributions
    dims.line(np.arange(found.dim), np.nan_to_num(values), BLUE, markers=True)
    dims.rule(0.0, GREY, axis="y")
    top = found.dimensions[:LABELLED]
    shown = [d.share if d.share is not None else d.contribution for d in top]
    dims.dots([d.dim for d in top], shown, RED, radius=3.5, opacity=1.0)
    for d, value in zip(top, shown):
        dims.label(d.dim, value, f"dim {d.dim}: {value:.1%}" if d.share is not None else f"dim {d.dim}", RED,
                   right=d.dim > found.dim / 2)
    spectrum = found.spectrum
    spec = Panel("spectrum of the centred table", Axis("principal direction (largest first)"),
                 Axis("s^2 / sum s^2 (log scale)", log=True))
    if spectrum is None:
        spec.empty = found.reasons.get("spectrum", "no spectrum")
    else:
        squares = spectrum.singular_values ** 2
        shares = squares / squares.sum() if squares.sum() > 0 else squares
        spec.line(np.arange(1, len(shares) + 1), np.where(shares > 0, shares, np.nan), BLUE,
                  f"top 1 {spectrum.shares[1]:.1%}, top 10 {spectrum.shares[10]:.1%}")
        spec.rule(spectrum.effective_rank, RED, f"effective rank {spectrum.effective_rank:.1f}", dash="4 3")
    panels = [dims, spec]
    if found.periods is not None or found.role == Role.position:
        power = Panel("power along positions by period", Axis("period T/k (log scale)", log=True),
                      Axis("share of the power"))
        if found.periods is None:
            power.empty = found.reasons.get("periods", "no periods")
        else:
            ordered = sorted(found.periods, key=lambda p: p.frequency)
            power.line([p.period for p in ordered], [p.share for p in ordered], BLUE, markers=True)
            labelled = found.periods[:LABELLED]
            power.dots([p.period for p in labelled], [p.share for p in labelled], RED, radius=3.5, opacity=1.0)
            middle = math.sqrt(min(p.period for p in ordered) * max(p.period for p in ordered))  # of the log axis
            for p in labelled:
                power.label(p.period, p.share, f"T/{p.frequency} = {p.period:.4g}: {p.share:.1%}", RED,
                            right=p.period > middle)
        panels.append(power)
    return Figure(f"{title} - {found.role} table {found.name}: geometry", [panels], panel_height=320).svg()
