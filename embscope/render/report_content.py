"""What a report says, written once for both formats (report_html, report_md): sections of lines, tables and
figures. Numbers are formatted as the console prints them, and each table cell keeps the full-precision number
it shows. Every string here is plain text, and each format escapes all of it. Figures are drawn by the
commands' own figure functions, the ones `--plot` draws (matplotlib, saved as SVG: inline in the page, files
beside report.md), only when a format writes them.

A section is a key in analysis.report.SECTIONS, its title in TITLES and its builder in BUILDERS (a Report ->
blocks). A Figure block's `draw` makes the matplotlib figure."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar

from ..analysis.geometry import TOP_SHARES, Geometry
from ..analysis.map import TableMap
from ..analysis.norms import DUPLICATE_COSINE, NormsReport, rule_text
from ..analysis.report import SECTIONS, Absent, CompareSection, Missing, NeighborsSection, Report
from ..analysis.undertrained import THRESHOLD_RULE, UndertrainedReport
from ..core.errors import Message, Spelling, spelled
from ..core.role import Role
from ..core.text import printable, shape_text, visible
from . import compare as compare_text
from . import geometry as geometry_text
from . import header
from . import map as map_text
from . import norms as norms_text
from . import positions as positions_text
from . import undertrained as undertrained_text
from .compare_plot import figure as compare_figure
from .console import cosine_text, count_text, number_text, percent
from .geometry_plot import figure as geometry_figure
from .info import HEAD_ROWS
from .jsonout import clean
from .lookup_notes import grouped_notes
from .names import emb_title
from .undertrained_plot import undertrained_figure

LISTED_ROWS = 20  # anomalies and candidates listed per table; the commands' --json lists more
LISTED_MOVERS = 10  # movers listed per table in the compare section
TITLES = {"info": "Checkpoint and tables", "params": "Parameters", "norms": "Row norms", "positions": "Positions",
          "undertrained": "Under-trained tokens", "neighbors": "Nearest neighbours of probe words",
          "map": "2-D map", "geometry": "Geometry of the tables", "compare": "Across checkpoints"}
LISTED_GEOMETRY = 5  # dimensions and periods listed per table in the geometry section


@dataclass(frozen=True)
class Cell:
    text: str
    value: float | None = None  # the number shown, at full precision (None: undefined, or not a number)
    number: bool = False
    token: bool = False  # a token string or a name from the file


@dataclass(frozen=True)
class Line:
    text: str
    kind: str = "text"  # text, heading (a table's name within a section), note, missing (why not made: a failure),
    # or absent (what the checkpoint has nothing for: a tied head, no position table)
    gist: bool = True  # a note given again may be cut to what precedes its first colon (said_once); False where
    # that is no gist but the words the note is about (lookup notes: "the, and, king: the space before ...")


@dataclass(frozen=True)
class Grid:
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    title: str | None = None
    compact: bool = False  # one of several small tables side by side


@dataclass(frozen=True)
class Figure:
    name: str  # the SVG's name in a Markdown folder, without extension; unique within a report
    alt: str
    draw: Callable[[], Any]  # -> a matplotlib Figure, built when the format writes it


Block = Line | Grid | Figure
Found = TypeVar("Found")  # what a per-table section measured of one table


@dataclass(frozen=True)
class Section:
    key: str  # one of analysis.report.SECTIONS
    title: str
    blocks: tuple[Block, ...]

    @property
    def missing(self) -> str | None:
        """Why the whole section could not be made; None when it was."""
        return self.only("missing")

    @property
    def absent(self) -> str | None:
        """Why the whole section is left out (the checkpoint has nothing for it); None when it is not."""
        return self.only("absent")

    @property
    def mark(self) -> str:
        """What the table of contents says after a section's title when it is not there."""
        return " (not made)" if self.missing else " (left out)" if self.absent else ""

    @property
    def made(self) -> bool:
        return self.missing is None and self.absent is None

    def only(self, kind: str) -> str | None:
        first = self.blocks[0] if len(self.blocks) == 1 else None
        return first.text if isinstance(first, Line) and first.kind == kind else None


def spelled_section(section: Section, spell: Spelling) -> Section:
    """The section with the options its lines and titles name spelled by `spell`."""
    return Section(section.key, section.title, tuple(spelled_block(block, spell) for block in section.blocks))


def spelled_block(block: Block, spell: Spelling) -> Block:
    if isinstance(block, Line):
        return replace(block, text=spelled(block.text, spell))
    if isinstance(block, Grid):
        rows = tuple(tuple(replace(cell, text=spelled(cell.text, spell)) for cell in row) for row in block.rows)
        return replace(block, rows=rows, title=None if block.title is None else spelled(block.title, spell))
    return block


def number(value: float | None, text: str) -> Cell:
    return Cell(text, clean(value), number=True)


def count(value: int | None) -> Cell:
    return number(value, count_text(value))


def cosine(value: float | None) -> Cell:
    return number(value, cosine_text(value))


def four(value: float | None) -> Cell:
    """A number to 4 significant digits, as `norms` and `compare` print them."""
    return number(value, number_text(value))


def text(value: object) -> Cell:
    return Cell(value if isinstance(value, str) else str(value))  # a message keeps its options


def token(value: str) -> Cell:
    return Cell(visible(value), token=True)


def notes(lines: Iterable[str]) -> list[Block]:
    return [Line(line, "note") for line in lines]


def word_notes(noted: Iterable[tuple[str, str | None]]) -> list[Block]:
    """The lookup notes of words (grouped_notes): each begins with the words it is about, not with its gist."""
    return [Line(line, "note", gist=False) for line in grouped_notes(noted)]


def kind(found: Missing) -> str:
    """A part that failed is "missing" (shown as an error); one the checkpoint has nothing for is "absent"."""
    return "absent" if isinstance(found, Absent) else "missing"


def missing(found: Missing) -> list[Block]:
    return [Line(found.why, kind(found))]


# ----------------------------------------------------------------------------- sections


def info_blocks(report: Report) -> list[Block]:
    info = report.info
    tensors = len(info.tensors)
    step = f"step {info.step}" if info.step is not None else "step unknown"
    blocks: list[Block] = [Line(f"format {info.format}, {tensors} tensor{'s' * (tensors != 1)}, {step}")]
    tok = info.tokenizer
    blocks.append(Line(f"tokenizer {tok.kind}, {tok.vocab_size} ids, {header.place(report.emb, tok.path)}" if tok
                       else "tokenizer: none"))
    rows = []
    for role, table in info.tables.items():
        if table is None:
            rows.append((text(role.value), text(HEAD_ROWS[info.head] if role is Role.output else "none"), text(""),
                         text(""), text("")))
            continue
        stored = table.tensor.quantization
        rows.append((text(role.value), token(table.name), text(shape_text(table.tensor.shape)),
                     text(table.tensor.dtype + (f" (stored as {stored})" if stored else "")), text(table.rule)))
    blocks.append(Grid(("role", "tensor", "shape", "dtype", "found by"), tuple(rows)))
    return blocks + notes(info.notes)


def params_blocks(report: Report) -> list[Block]:
    params = report.params
    if isinstance(params, Missing):
        return missing(params)
    shares = params.shares

    def row(label: str, value: int | None, share: float | None) -> tuple[Cell, ...]:
        return text(label), count(value), number(share, percent(share))

    rows = [row(f"token ({params.token_name})", params.token, shares["token"])]
    if params.position_name is not None:
        rows.append(row(f"position ({params.position_name})", params.position, shares["position"]))
    else:
        rows.append((text("position"), text("none (no learned table)"), text("-")))
    if params.output_name is not None:
        rows.append(row(f"output ({params.output_name})", params.output, shares["output"]))
    else:
        rows.append((text("output projection"), text(HEAD_ROWS[params.head]), text("-")))
    rows.append(row("token + position", params.embeddings, shares["embeddings"]))
    rows.append(row("whole checkpoint", params.total, 1.0))
    blocks: list[Block] = [Grid(("table", "parameters", "share of total"), tuple(rows)),
                           Line(f"total counts {params.source} ({params.total / 1e6:.2f}M).")]
    if params.position:
        blocks.append(Line(f"nanoGPT's convention leaves the position table out: {params.total_without_position:,} "
                           f"({params.total_without_position / 1e6:.2f}M)."))
    blocks += [Line(f"the {role} table is stored as {stored}: its stored elements are counted, and it is "
                    "dequantized to float32 to be read.") for role, stored in params.quantization.items()]
    return blocks + notes(params.notes)


def norms_table_blocks(report: Report, found: NormsReport) -> list[Block]:
    summary = found.summary
    blocks: list[Block] = [
        Line(f"{found.role} table '{found.name}': {summary.rows:,} rows x {found.dim}", "heading"),
        Grid(("rows with a finite norm", "mean", "median", "min", "max", "MAD"),
             ((count(summary.count), four(summary.mean), four(summary.median), four(summary.min), four(summary.max),
               four(summary.mad)),)),
        Line(norms_text.untrained_line(found.untrained)),
        Line(f"rule: {rule_text(summary.threshold, summary.mad, summary)}")]
    anomalies = summary.anomalies
    if anomalies:
        blocks.append(Grid(("row", "name", "norm", "x mean", "reason"), tuple(
            (count(a.index), token(found.label(a.index)) if found.role != "position" else text(found.label(a.index)),
             four(a.norm), number(a.ratio_to_mean, norms_text.ratio(a.ratio_to_mean)), text(a.reason))
            for a in anomalies[:LISTED_ROWS]), title=f"anomalies ({len(anomalies):,}), the most extreme first"))
        if len(anomalies) > LISTED_ROWS:
            blocks.append(Line(f"... and {len(anomalies) - LISTED_ROWS:,} more (`embscope norms --table {found.role} "
                               "--json` lists them)"))
    else:
        blocks.append(Line("anomalies: none"))
    duplicates = found.duplicates
    if duplicates.total:
        blocks.append(Grid(("row a", "row b", "cosine", "identical"), tuple(
            (text(f"{d.a} {found.label(d.a)}"), text(f"{d.b} {found.label(d.b)}"), number(d.cosine, f"{d.cosine:.6f}"),
             text("yes" if d.identical else "no")) for d in duplicates.pairs[:LISTED_ROWS]),
            title=f"near-duplicate rows (cosine > {DUPLICATE_COSINE}): {duplicates.total:,}"))
    else:
        blocks.append(Line(f"near-duplicate rows (cosine > {DUPLICATE_COSINE}): none"))
    blocks.append(Figure(f"norms-{found.role}", f"L2 norms of the {found.role} table",
                         partial(norms_text.figure, report.emb, found)))
    return blocks + notes(found.notes)


def norms_blocks(report: Report) -> list[Block]:
    return each_table(report, report.norms, norms_table_blocks)


def each_table(report: Report, by_role: Mapping[str, Found | Missing],
               blocks_of: Callable[[Report, Found], list[Block]]) -> list[Block]:
    """A per-table section: each table's blocks, in role order, or one line saying why a table has none."""
    blocks: list[Block] = []
    for role, found in by_role.items():
        if isinstance(found, Missing):
            blocks.append(Line(Message(f"{'output projection' if role == 'output' else role + ' table'}: ", found.why),
                               kind(found)))
        else:
            blocks += blocks_of(report, found)
    return blocks


def positions_blocks(report: Report) -> list[Block]:
    section = report.positions
    if isinstance(section, Missing):
        return missing(section)
    result, zero = section.result, section.position0
    reserved = f" ({result.first_row} reserved rows come before position 0)" if result.first_row else ""
    blocks: list[Block] = [
        Line(f"position table '{result.table}': {result.positions:,} positions x {result.dim}{reserved}"),
        Grid(("position 0 norm", "mean norm", "x mean", "robust z", "flagged by norms"),
             ((four(zero.norm), four(section.norms.summary.mean),
               number(zero.ratio_to_mean, norms_text.ratio(zero.ratio_to_mean)), number(zero.z, f"{zero.z:+.3g}"),
               text("yes" if section.position0_flagged else "no")),),
             title="position 0 against the mean (the rule of `embscope norms`)"),
        Figure("positions", "cosine heatmap between positions, and similarity by distance",
               partial(positions_text.figure, report.emb, result))]
    profile = result.profile
    if profile is not None:
        blocks.append(Grid(("distance k", "mean cos(p_i, p_i+k)", "std", "pairs"), tuple(
            (count(s.offset), cosine(s.mean), number(s.std, f"{s.std:.4f}"), count(s.pairs)) for s in profile.summary()),
            title="similarity by distance"))
        blocks.append(Line(f"nearest neighbour is i-1 or i+1 for {percent(clean(profile.nearest_is_adjacent))} of "
                           f"{profile.positions_counted:,} positions"))
    if result.pairs:
        blocks.append(Grid(("i", "j", "distance", "cosine"), tuple(
            (count(p.i), count(p.j), count(p.distance), cosine(p.cosine)) for p in result.pairs),
            title="near and far pairs (the default set of `embscope positions`)"))
    sampled = [positions_text.sampled_note(profile)] if profile is not None and profile.sampled_every > 1 else []
    return blocks + notes([*result.notes, *sampled, *(p.reason for p in result.pairs if p.reason)])


def undertrained_table_blocks(found: UndertrainedReport, name: Callable[[int], str]) -> list[Block]:
    threshold = found.threshold
    value = "none" if threshold.value is None else f"{threshold.value:+.4f}"
    blocks: list[Block] = [
        Line(f"{found.table} table '{found.name}': {found.rows:,} rows", "heading"),
        Line(f"reference: {found.reference.source}, {found.reference.description}"),
        Line(f"threshold: {value}, {threshold.why}")]
    candidates = found.candidates
    if not candidates:
        return [*blocks, Line("candidates: none")]
    title = f"candidates ({len(candidates):,}" + (f"; {found.verified:,} verified by the tokenizer)"
                                                  if found.verified is not None else ")")
    blocks.append(Grid(("id", "token", "score", "norm", "norm z", "signals", "tokenizer"), tuple(
        (count(c.id), token(name(c.id)), number(c.score, undertrained_text.number(c.score, "+.4f")),
         number(c.norm, undertrained_text.number(c.norm, ".4g")),
         number(c.norm_z, undertrained_text.number(c.norm_z, "+.1f")), text(undertrained_text.signals_text(c)),
         text(undertrained_text.kinds_text(c))) for c in candidates[:LISTED_ROWS]), title=title + ", highest score first"))
    if len(candidates) > LISTED_ROWS:
        blocks.append(Line(f"... and {len(candidates) - LISTED_ROWS:,} more (`embscope undertrained --json` lists all)"))
    return blocks


def undertrained_blocks(report: Report) -> list[Block]:
    found = report.undertrained
    if isinstance(found, Missing):
        return missing(found)
    blocks: list[Block] = []
    if found.kinds is not None:
        kinds = ", ".join(f"{kind} {n:,}" for kind, n in found.kinds.counts().items() if n)
        blocks.append(Line(f"tokenizer: {found.kinds.vocab_size:,} ids; {kinds or 'every id round-trips'}"))
    blocks += [Line(f"indicator: {undertrained_text.INDICATOR}"), Line(f"threshold rule: {THRESHOLD_RULE}"),
               Line(undertrained_text.NORM_RULE)]
    for table in found.reports:
        blocks += undertrained_table_blocks(table, undertrained_text.namers(report.emb)(table))
    title = emb_title(report.emb)
    blocks.append(Figure("undertrained", "the indicator and the row norms, with the threshold and the candidates",
                         partial(undertrained_figure, found.reports, title)))
    return blocks + notes(undertrained_text.said_once(found.notes, found.reports))


def neighbors_blocks(report: Report) -> list[Block]:
    section: NeighborsSection | Missing = report.neighbors
    if isinstance(section, Missing):
        return missing(section)
    blocks: list[Block] = [Line(Message("words: ", section.rule, f"; for each, the {section.k} nearest rows of the "
                                        "token table by cosine (`embscope neighbors WORD`)"))]
    noted = []
    for entry in section.words:
        found = entry.result
        if isinstance(found, Missing):
            blocks.append(Line(Message(f"{entry.word}: ", found.why), kind(found)))
            continue
        query = found.query
        used = " ".join(t if t == f"#{i}" else f"{i} '{visible(t)}'" for i, t in zip(query.ids, query.tokens))
        if found.reason is not None:
            blocks.append(Line(Message(f"{query.text} -> {used}: no neighbours: ", found.reason), "missing"))
        else:
            blocks.append(Grid(("rank", "id", "token", "cosine"), tuple(
                (count(rank), count(n.id), token(n.token + (" (padding)" if n.padding else "")), cosine(n.cosine))
                for rank, n in enumerate(found.neighbors, start=1)), title=f"{query.text} -> {used}", compact=True))
        noted.append((query.text, found.note))
    return blocks + word_notes(noted)


def map_table_blocks(report: Report, found: TableMap) -> list[Block]:
    method, how = map_text.method_text(found)
    position = found.role is Role.position
    what = "position" if position else "word"
    blocks: list[Block] = [Line(f"{method} of the {found.role} table '{found.name}': {found.projection.used:,} rows "
                                f"x {found.dim} ({how})", "heading")]
    variance = map_text.variance_text(found)
    if variance:
        blocks.append(Line(variance))
    x_name, y_name = map_text.axis_names(found)
    if found.points:
        columns = (what, x_name, y_name) if position else (what, "tokens", x_name, y_name)
        blocks.append(Grid(columns, tuple(
            (text(p.label), *(() if position else (text(" ".join(f"{i} '{visible(t)}'"
                                                                  for i, t in zip(p.ids, p.tokens))),)),
             number(p.x, map_text.coordinate(p.x)), number(p.y, map_text.coordinate(p.y))) for p in found.points),
            title=Message(f"{what}s on the map: ", found.probe_rule)))
    else:
        blocks.append(Line(found.probe_rule))
    flagged = len(found.flagged)
    blocks.append(Line(f"{flagged:,} row{'s' * (flagged != 1)} flagged as norm anomalies (the rule of `embscope "
                       "norms`), ringed in red"))
    title = emb_title(report.emb)
    blocks.append(Figure(f"map-{found.role.value}", f"2-D map of the {found.role} table",
                         partial(map_text.map_figure, found, title)))
    return blocks + word_notes((p.label, p.note) for p in found.points) + notes(found.notes)


def map_blocks(report: Report) -> list[Block]:
    blocks: list[Block] = []
    for role, found in report.maps.items():
        if isinstance(found, Missing):
            blocks.append(Line(Message(f"{role} table: ", found.why), kind(found)))
        else:
            blocks += map_table_blocks(report, found)
    return blocks


def geometry_table_blocks(report: Report, found: Geometry) -> list[Block]:
    spectrum = found.spectrum
    used = "all used" if found.used == found.rows - found.first_row else f"{found.used:,} used"
    measures = [("mean cosine between distinct rows (exact)", cosine(found.mean_cosine)),
                *((f"share of the variance in the top {k} direction{'s' * (k != 1)}", number(
                    spectrum.shares[k] if spectrum else None, percent(spectrum.shares[k] if spectrum else None)))
                  for k in TOP_SHARES),
                ("effective rank (Roy & Vetterli 2007)", four(spectrum.effective_rank if spectrum else None)),
                ("participation ratio", four(spectrum.participation_ratio if spectrum else None)),
                ("partition-function isotropy (Mu & Viswanath 2018)", four(found.partition_isotropy)),
                ("IsoScore (Rudman et al. 2022)", four(found.isoscore)),
                ((f"mean cosine, all-but-the-top (mean and {found.removed} direction{'s' * (found.removed != 1)} "
                 "removed)"), cosine(found.abtt_mean_cosine))]
    blocks: list[Block] = [
        Line(f"{found.role} table '{found.name}': {found.rows:,} rows x {found.dim}, {used}", "heading"),
        Grid(("measure", "value"), tuple((text(measure), cell) for measure, cell in measures)),
        Grid(("dim", "contribution", "share"), tuple(
            (count(d.dim), number(d.contribution, f"{d.contribution:+.4g}"), number(d.share, percent(d.share)))
            for d in found.dimensions[:LISTED_GEOMETRY]),
            title="dimensions by their part of the mean cosine (Timkey & van Schijndel 2021)", compact=True)]
    periods = found.periods
    if periods is not None:
        blocks.append(Grid(("period T/k", "frequency k", "share of power"), tuple(
            (number(p.period, f"{p.period:.4g}"), count(p.frequency), number(p.share, percent(p.share)))
            for p in periods[:LISTED_GEOMETRY]), title="periods along positions", compact=True))
    blocks.append(Figure(f"geometry-{found.role}", f"geometry of the {found.role} table",
                         partial(geometry_figure, found, emb_title(report.emb))))
    undefined = [f"{key.replace('_', ' ')}: {why}" for key, why in geometry_text.reasons(found).items()
                 if key != "periods" or found.role == Role.position]
    return blocks + notes([*found.notes, *undefined])


def geometry_blocks(report: Report) -> list[Block]:
    return [Line("what embscope geometry reports for each table; docs/geometry.md defines every figure"),
            *each_table(report, report.geometry, geometry_table_blocks)]


def printable_name(name: object) -> str:
    return printable(str(name))


def compare_blocks(report: Report) -> list[Block]:
    section: CompareSection | Missing = report.compare
    if isinstance(section, Missing):
        return missing(section)
    series, comparison = section.series, section.series.comparison
    labels = compare_text.Labels(series.checkpoints, section.origin, series.table_names, series.names,
                                 series.names_b, notes=list(report.notes), audit=series.audit)
    listed = ", ".join(f"{path} ({step.text()})" for path, step in series.checkpoints)
    blocks: list[Block] = [Line(f"{len(series.checkpoints)} checkpoints, in order: {listed}; the tables compared "
                                "in detail are the first (A) and the last (B)")]
    # first, as `compare` says it; the page escapes what it shows itself
    blocks += [Line(line) for line in compare_text.audit_lines(series.audit, labels, printable_name)]
    if comparison.checkpoints >= 3:
        blocks += trajectory_blocks(section)
    for role, found in comparison.tables.items():
        summary = found.summary
        name_a, name_b = series.table_names[role]
        names = f"'{name_a}'" + ("" if name_b == name_a else f" / '{name_b}'")
        what = "positions" if role == "position" else "rows"
        blocks.append(Line(f"{role} table {names}: {summary.rows:,} {what} compared", "heading"))
        measures = [("mean row cosine A vs B", cosine(summary.mean_cosine)),
                    ("median row cosine", cosine(summary.median_cosine)),
                    *((f"row cosine, percentile {p}", cosine(summary.percentiles[p])) for p in summary.percentiles),
                    ("mean relative change ||b - a|| / ||a||", four(summary.mean_relative)),
                    ("median relative change", four(summary.median_relative)),
                    ("mean row norm in A", four(summary.mean_norm_a)), ("mean row norm in B", four(summary.mean_norm_b)),
                    ("rows bitwise unchanged", count(summary.unchanged)),
                    ("linear CKA (Kornblith et al. 2019)", four(found.cka.value if found.cka is not None else None))]
        if found.neighbors is not None:
            overlap = found.neighbors
            drawn = f"{len(overlap.jaccard):,} rows drawn with seed {overlap.seed}"
            measures.append((f"neighbour overlap (Jaccard of top-{overlap.k} sets, {drawn})", four(overlap.mean)))
        blocks.append(Grid(("measure", "value"), tuple((text(measure), cell) for measure, cell in measures)))
        name = series.names[role]
        changes, rows_a = found.changes, found.pairing.rows_a()
        if len(found.movers):
            blocks.append(Grid(("row", "name", "cosine", "norm A", "norm B", "relative change"), tuple(
                (count(int(rows_a[i])), token(name(int(rows_a[i]))) if role != "position" else text(name(int(rows_a[i]))),
                 cosine(changes.cosine[i]), four(changes.norm_a[i]), four(changes.norm_b[i]),
                 four(changes.relative[i])) for i in found.movers[:LISTED_MOVERS]),
                title="top movers (largest relative change first)"))
    blocks.append(Figure("compare", "how the rows moved between the checkpoints, and the position profiles",
                         partial(compare_figure, comparison, labels)))
    return blocks + notes(compare_text.all_notes(comparison, labels))


def step_cosine(value: float) -> Cell:
    """A trajectory's mean cosine; "-" where there is none (the first checkpoint has no previous one), not null."""
    return cosine(value) if clean(value) is not None else Cell("-")


def trajectory_blocks(section: CompareSection) -> list[Block]:
    series = section.series
    blocks: list[Block] = []
    for role, steps in series.comparison.trajectory.items():
        position = role == "position"
        columns = ("step", "cos to previous", "cos to first", "mean norm", *(("position 0 norm",) if position else ()),
                   "anomalies", "unchanged")
        rows = []
        for index, ((_, step), entry) in enumerate(zip(series.checkpoints, steps)):
            state = entry.state
            rows.append((
                count(step.value) if step.value is not None else text(f"#{index + 1}"),
                step_cosine(entry.cosine_to_previous), step_cosine(entry.cosine_to_first),
                four(state.mean_norm if state else None),
                *((four(state.position0_norm if state else None),) if position else ()),
                count(state.anomalies) if state else text("-"), count(entry.unchanged_from_previous)))
        blocks.append(Grid(columns, tuple(rows), title=f"trajectory of the {role} table: mean row cosine; rows bitwise "
                                                       "unchanged since the previous checkpoint"))
    return blocks


BUILDERS: dict[str, Callable[[Report], list[Block]]] = {
    "info": info_blocks, "params": params_blocks, "norms": norms_blocks, "positions": positions_blocks,
    "undertrained": undertrained_blocks, "neighbors": neighbors_blocks, "map": map_blocks, "geometry": geometry_blocks,
    "compare": compare_blocks}


def sections(report: Report) -> list[Section]:
    """Every section of the report, in order; a note said in full once (said_once)."""
    return said_once([Section(key, TITLES[key], tuple(BUILDERS[key](report))) for key in SECTIONS])


def said_once(made: list[Section]) -> list[Section]:
    """A note that an earlier section already gave in full (a tokenizer that is not the table's, in every section
    that names rows) is given again only by its gist (what comes before its first colon), where it is, and what a
    section adds to it."""
    first: dict[str, str] = {}  # a note's text -> the title of the section that gave it
    kept = []
    for section in made:
        blocks: list[Block] = []
        for block in section.blocks:
            if isinstance(block, Line) and block.kind == "note" and block.gist:
                given = next((text for text in first if said_before(block.text, text)), None)
                if given is None:
                    first[block.text] = section.title
                else:
                    block = Line(f"{given.split(': ', 1)[0]} (the note under {first[given]} above)"
                                 f"{block.text[len(given):]}", "note")
            blocks.append(block)
        kept.append(replace(section, blocks=tuple(blocks)))
    return kept


def said_before(note: str, earlier: str) -> bool:
    """`note` is `earlier`, or `earlier` and what a section adds to it ('; ...', ' (...)', ': ...'); not a note that
    only begins with the same characters ('row 1 has zero norm' is no part of 'row 12 has ...', nor 'rows 1-4' of
    'rows 1-40')."""
    rest = note[len(earlier):]
    return note.startswith(earlier) and (not rest or rest.startswith(("; ", " (", ": ")))


def heading(report: Report) -> list[str]:
    """The lines that open the report: the checkpoint it is about, and every checkpoint it covers."""
    lines = [header.checkpoint_line(report.emb)]
    if len(report.checkpoints) > 1:
        lines.append(f"the sections about one checkpoint describe the last of the {len(report.checkpoints)} given; "
                     "the last section compares them all")
    return lines
