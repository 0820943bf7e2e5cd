"""`compare` for people (rich tables) and for programs (one JSON document)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..analysis.audit import Audit
from ..analysis.compare import (
    PERCENTILES,
    Alignment,
    Comparison,
    NeighborOverlap,
    TableComparison,
    TableState,
    TrajectoryPoint,
)
from ..analysis.compare_series import Namer
from ..core.errors import Message, Option
from ..core.text import quote
from ..series import Step as CheckpointStep
from . import console, jsonout
from .console import cosine_text as cosine
from .console import number_text as number
from .console import rows_text
from .flags import as_flags
from .jsonout import Document
from .names import Output

LISTED_INLINE = 10  # rows named in the one-line list of unchanged rows
ALIGN = Option("align", True, text="procrustes")  # CompareOptions.align; the command line's one method


@dataclass(frozen=True)
class Labels:
    """What the numbers are about, beside the comparison itself."""

    checkpoints: list[tuple[Path, CheckpointStep]]
    origin: Path  # the first path given, or the folder
    table_names: dict[str, tuple[str, str]]  # role -> the table's name in the first and the last checkpoint
    names: dict[str, Namer]  # role -> how to name a row of the first checkpoint's table
    names_b: dict[str, Namer]  # role -> how to name a row of the last checkpoint's table
    words: list[tuple[str, int | None, str | None]] = field(default_factory=list)  # (word, A row, why not used)
    notes: list[str] = field(default_factory=list)  # about the checkpoints themselves: how to read everything after
    plot: Output | None = None
    run: bool = False  # one folder of a run's checkpoints was given (origin), rather than the checkpoints themselves
    audit: Audit | None = None  # duplicate and out-of-order checkpoints, shown before anything else

    @property
    def step(self) -> int | None:
        """The step of what `origin` names: the run's last step, or the first checkpoint's."""
        return self.checkpoints[-1 if self.run else 0][1].value


def checkpoint_text(path: Path, step: CheckpointStep) -> str:
    return f"{console.safe(path)} ({step.text()})"


# ----------------------------------------------------------------------------- JSON


def table_document(found: TableComparison, labels: Labels) -> Document:
    name, name_b = labels.names[found.role], labels.names_b[found.role]
    summary, changes = found.summary, found.changes
    rows_a, rows_b = found.pairing.rows_a(), found.pairing.rows_b()

    def row(index: int) -> Document:
        entry = {"id": int(rows_a[index]), "token": name(int(rows_a[index])), "cosine": changes.cosine[index],
                 "norm_a": changes.norm_a[index], "norm_b": changes.norm_b[index],
                 "relative_change": changes.relative[index]}
        if rows_b[index] != rows_a[index]:
            entry["id_b"] = int(rows_b[index])
        return entry

    table_a, table_b = labels.table_names[found.role]
    doc = {
        "name": table_a, "name_b": table_b, "rows_compared": summary.rows, "rows_with_cosine": summary.defined,
        "pairing": found.pairing.note, "mean_row_cosine": summary.mean_cosine,
        "median_row_cosine": summary.median_cosine,
        "percentiles": {str(p): summary.percentiles[p] for p in PERCENTILES},
        "mean_relative_change": summary.mean_relative, "median_relative_change": summary.median_relative,
        "mean_norm_a": summary.mean_norm_a, "mean_norm_b": summary.mean_norm_b,
        "unchanged_rows": summary.unchanged,
        "unchanged_ids": [int(i) for i in rows_a[changes.unchanged]],
        "movers": [row(int(i)) for i in found.movers],
        "stable": [row(int(i)) for i in found.stable],
        "neighbor_overlap": None,
        "looks_like_different_runs": found.different_runs,
        "cka": found.cka.value if found.cka is not None else None,
    }
    if found.neighbors is not None:
        overlap = found.neighbors
        doc["neighbor_overlap"] = {
            "k": overlap.k, "rows": len(overlap.jaccard), "words": overlap.words, "sample_seed": overlap.seed,
            "mean_jaccard": overlap.mean,
            "by_word": [{"word": word, "id": int(overlap.rows_a[i]), "jaccard": overlap.jaccard[i],
                         "neighbors_a": [name(int(j)) for j in overlap.neighbors_a[i] if j >= 0],
                         "neighbors_b": [name_b(int(j)) for j in overlap.neighbors_b[i] if j >= 0]}
                        for word, i in word_queries(labels, overlap)],
        }
    if found.alignment is not None:
        doc["alignment"] = {"method": "procrustes", "residual": found.alignment.residual,
                            "rows": found.alignment.rows, "mean_row_cosine_unaligned": found.unaligned_mean_cosine,
                            "chance_mean_row_cosine": found.alignment.chance}
    return doc


def chance_text(alignment: Alignment | None) -> str:
    """What unrelated tables of the same shape reach after the same kind of fit, where it was drawn."""
    if alignment is None or alignment.chance is None:
        return ""
    return (f" (unrelated Gaussian tables of these {alignment.rows:,} rows reach {cosine(alignment.chance)} after "
            "their own fit)")


def word_queries(labels: Labels, overlap: NeighborOverlap) -> list[tuple[str, int]]:
    """(word, query index) for each --words entry whose row was queried (a row with no partner in B is not)."""
    queried = {int(row): i for i, row in enumerate(overlap.rows_a[:overlap.words])}
    return [(word, queried[row]) for word, row, _ in labels.words if row is not None and row in queried]


def state_document(state: TableState | None) -> Document | None:
    if state is None:
        return None
    doc: Document = {"rows": state.rows, "mean_norm": state.mean_norm, "anomalies": state.anomalies}
    if state.position0_norm is not None:
        doc["position0_norm"] = state.position0_norm
        doc["position0_ratio_to_mean"] = state.position0_norm / state.mean_norm if state.mean_norm else None
    if state.profile is not None:
        doc["profile"] = [{"offset": s.offset, "mean": s.mean, "std": s.std, "pairs": s.pairs}
                          for s in state.profile.summary()]
    return doc


def step_document(step: TrajectoryPoint) -> Document:
    doc = {"mean_row_cosine_to_previous": step.cosine_to_previous, "mean_row_cosine_to_first": step.cosine_to_first,
           "unchanged_rows": step.unchanged_from_previous, **(state_document(step.state) or {})}
    if step.note:
        doc["note"] = step.note
    return doc


def document(comparison: Comparison, labels: Labels) -> Document:
    checkpoints = labels.checkpoints
    doc: Document = {
        "checkpoint": str(labels.origin),
        "step": labels.step,
        "checkpoints": [{"path": str(path), "step": step.value, "step_from": step.source} for path, step in checkpoints],
        **({"audit": audit_document(labels.audit, checkpoints)} if labels.audit is not None else {}),
        "tables": {role: table_document(found, labels) for role, found in comparison.tables.items()},
        "states": {role: [state_document(s) for s in states] for role, states in comparison.states.items()},
    }
    if comparison.checkpoints >= 3:
        doc["trajectory"] = [
            {"path": str(path), "step": step.value,
             "tables": {role: step_document(steps[i]) for role, steps in comparison.trajectory.items()}}
            for i, (path, step) in enumerate(checkpoints)]
    doc["words"] = [{"word": word, "id": row, "note": why} for word, row, why in labels.words]
    if labels.plot is not None:
        doc |= labels.plot.fields()
    doc["notes"] = all_notes(comparison, labels)
    return doc


def audit_document(audit: Audit, checkpoints: list[tuple[Path, CheckpointStep]]) -> Document:
    def step(index: int) -> int | None:
        return checkpoints[index][1].value
    return {"duplicates": [{"steps": [step(d.first), step(d.second)], "tables": list(d.tables),
                            "paths": [str(checkpoints[d.first][0]), str(checkpoints[d.second][0])]}
                           for d in audit.duplicates],
            "out_of_order": [{"step": step(o.index), "path": str(checkpoints[o.index][0]), "evidence": o.evidence}
                             for o in audit.out_of_order]}


def audit_lines(audit: Audit, labels: Labels, safe: Callable[[object], str] = console.safe) -> list[str]:
    """The audit's lines; `safe` makes a name printable where they go (the console escapes rich markup too)."""
    def name(index: int) -> str:
        path, step = labels.checkpoints[index]
        return f"{safe(listed_name(path, labels) if labels.run else path)} ({step.text()})"
    lines = [f"audit: duplicate: {name(d.second)} holds byte for byte the {' and '.join(d.tables)} "
             f"table{'s' * (len(d.tables) > 1)} of {name(d.first)}" for d in audit.duplicates]
    lines += [f"audit: out of order: {name(o.index)}: {safe(o.evidence)}" for o in audit.out_of_order]
    return lines or ["audit: no duplicate or out-of-order checkpoint found"]


def leading_notes(comparison: Comparison, labels: Labels) -> list[str]:
    """The notes that decide how to read everything else (one file twice, tables left out, rows paired by string
    or cut to the shorter table, two different runs): printed before any table."""
    notes = list(labels.notes) + list(comparison.notes)
    for role, found in comparison.tables.items():
        if found.pairing.note:
            notes.append(Message(f"{role} table: ", found.pairing.note))
        if found.different_runs:
            notes.append(Message(f"{role} table: the mean row cosine is {found.summary.mean_cosine:+.3f} while the "
                                 f"mean norms agree ({found.summary.mean_norm_a:.3g} and "
                                 f"{found.summary.mean_norm_b:.3g}): these look like two different runs, whose rows "
                                 "live in different bases; try ", ALIGN))
    return notes


def trailing_notes(comparison: Comparison, labels: Labels) -> list[str]:
    """The notes about some of the rows: printed after the tables they are about."""
    notes = []
    for role, found in comparison.tables.items():
        undefined = found.summary.rows - found.summary.defined
        if undefined:
            notes.append(f"{role} table: {undefined:,} rows are zero or hold NaN/Inf in A or B: their cosine is "
                         "undefined and left out of the statistics")
        if found.neighbors is not None:
            queried = {word for word, _ in word_queries(labels, found.neighbors)}
            notes += [Message(f"{role} table: ", Option("words"), f" {word!r} has no row in B to compare with")
                      for word, row, _ in labels.words if row is not None and word not in queried]
        notes += [Message(f"{role} table: ", why) for why in cka_notes(found)]
    notes += [Message(Option("words"), f" {word!r}: ", why) for word, row, why in labels.words if why]
    return notes


def cka_notes(found: TableComparison) -> list[str]:
    """Why linear CKA is null, when it is."""
    if found.cka is None:
        return [Message("linear CKA was not computed (", Option("cka", False), ")")] if found.pairing.count else []
    if found.cka.skipped:
        return [f"linear CKA {found.cka.skipped}"]
    if math.isnan(found.cka.value):
        return ["linear CKA is undefined: fewer than 2 rows are finite in both tables, or a table is constant over them"]
    return []


def all_notes(comparison: Comparison, labels: Labels) -> list[str]:
    return leading_notes(comparison, labels) + trailing_notes(comparison, labels)


def step_cosine(value: float) -> str:
    """A trajectory's mean cosine; "-" where there is none (the first checkpoint has no previous one)."""
    return "-" if jsonout.clean(value) is None else cosine(value)


def step_number(value: float | None) -> str:
    """A trajectory's measure; "-" where the checkpoint has none (a table it lacks)."""
    return "-" if jsonout.clean(value) is None else number(value)


def emit(comparison: Comparison, labels: Labels) -> None:
    jsonout.emit(document(comparison, labels))


# ----------------------------------------------------------------------------- console


def header(labels: Labels) -> str:
    checkpoints = labels.checkpoints
    if len(checkpoints) == 2:
        (a, step_a), (b, step_b) = checkpoints
        return f"compare: A = {checkpoint_text(a, step_a)}, B = {checkpoint_text(b, step_b)}"
    first, last = checkpoints[0][1], checkpoints[-1][1]
    steps = f"{first.text()} to {last.text()}"
    if labels.run:
        return f"compare: {len(checkpoints)} checkpoints from {console.safe(labels.origin)}, {steps}"
    listed = ", ".join(console.safe(path) for path, _ in checkpoints)
    return f"compare: {len(checkpoints)} checkpoints, {steps}: {listed}"


def print_trajectory(comparison: Comparison, labels: Labels) -> None:
    names = [listed_name(path, labels) for path, _ in labels.checkpoints]
    if len(set(names)) < len(names):  # checkpoints given one by one, each a model.safetensors: their paths
        names = [str(path) for path, _ in labels.checkpoints]
    listed = ", ".join(f"{console.safe(name)} ({step.text()})" for name, (_, step) in zip(names, labels.checkpoints))
    console.out.print(f"checkpoints in order: {listed}", soft_wrap=True)
    for role, steps in comparison.trajectory.items():
        position = role == "position"
        columns = ["step", "cos to previous", "cos to first", "mean norm"]
        columns += ["position 0 norm"] if position else []
        columns += ["anomalies", "unchanged"]
        grid = console.table(*columns, title=f"trajectory of the {role} table: mean row cosine; rows bitwise "
                                             "unchanged since the previous checkpoint")
        for index, ((path, step), entry) in enumerate(zip(labels.checkpoints, steps)):
            state = entry.state
            cells = [f"{step.value:,}" if step.value is not None else f"#{index + 1}",
                     step_cosine(entry.cosine_to_previous), step_cosine(entry.cosine_to_first),
                     step_number(state.mean_norm if state else None)]
            if position:
                cells.append(step_number(state.position0_norm if state else None))
            cells += [str(state.anomalies) if state else "-",
                      f"{entry.unchanged_from_previous:,}" if entry.unchanged_from_previous is not None else "-"]
            grid.add_row(*cells)
        console.out.print(grid)


def listed_name(path: Path, labels: Labels) -> str:
    """A checkpoint of the trajectory by its file name, or as the run folder holds it (checkpoint-100/
    model.safetensors): every save_pretrained step has the same file name, which alone tells none apart."""
    if labels.run:
        try:
            return str(path.relative_to(labels.origin))
        except ValueError:
            pass
    return path.name


def print_rows(title: str, found: TableComparison, indices: np.ndarray, name: Namer) -> None:
    if not len(indices):
        return
    changes, rows_a = found.changes, found.pairing.rows_a()
    grid = console.table("row", "name", "cosine", "norm A", "norm B", "relative change", title=title)
    for index in indices:
        row = int(rows_a[index])
        grid.add_row(str(row), console.safe(name(row)), cosine(changes.cosine[index]), number(changes.norm_a[index]),
                     number(changes.norm_b[index]), number(changes.relative[index]))
    console.out.print(grid)


def print_table(found: TableComparison, labels: Labels, states: list[TableState | None]) -> None:
    out, summary, role = console.out, found.summary, found.role
    table_a, table_b = labels.table_names[role]
    names = console.safe(repr(table_a)) + ("" if table_b == table_a else f" / {console.safe(repr(table_b))}")
    what = "positions" if role == "position" else "rows"
    out.print(f"{role} table {names}: {summary.rows:,} {what} compared", soft_wrap=True)
    if found.alignment is not None:
        out.print(f"  aligned: B rotated onto A by orthogonal Procrustes over {rows_text(found.alignment.rows)}, "
                  f"residual ||B R - A|| / ||A|| = {number(found.alignment.residual)} (mean row cosine before: "
                  f"{cosine(found.unaligned_mean_cosine)}){chance_text(found.alignment)}", soft_wrap=True)
    percentiles = "  ".join(f"{p}%: {cosine(summary.percentiles[p])}" for p in PERCENTILES)
    out.print(f"  row cosine A vs B: mean {cosine(summary.mean_cosine)}  median {cosine(summary.median_cosine)}  "
              f"{percentiles}", soft_wrap=True)
    out.print(f"  relative change ||b - a|| / ||a||: mean {number(summary.mean_relative)}  median "
              f"{number(summary.median_relative)}", soft_wrap=True)
    out.print(f"  mean row norm: A {number(summary.mean_norm_a)}, B {number(summary.mean_norm_b)}")
    if found.cka is not None:
        out.print(f"  linear CKA (Kornblith et al. 2019): {number(found.cka.value)} over {found.cka.rows:,} {what}")
    unchanged = summary.unchanged
    listed = ""
    if unchanged:
        rows = found.pairing.rows_a()[found.changes.unchanged][:LISTED_INLINE]
        listed = ": " + inline(rows, labels.names[role], role) + (", ..." if unchanged > LISTED_INLINE else "")
    every = " (all)" if unchanged and unchanged == summary.rows else ""
    out.print(f"  rows bitwise unchanged: {unchanged:,}{every}{listed}", soft_wrap=True)
    if found.neighbors is not None:
        overlap = found.neighbors
        sampled = len(overlap.jaccard) - overlap.words
        over = rows_text(len(overlap.jaccard))
        out.print(as_flags(Message(f"  neighbour overlap (Jaccard of top-{overlap.k} sets): mean "
                                   f"{number(overlap.mean)} over {over} ({overlap.words} from ",
                                   Option("words"), f", {sampled:,} drawn with seed {overlap.seed})")), soft_wrap=True)
        name, name_b = labels.names[role], labels.names_b[role]
        for word, i in word_queries(labels, overlap):
            out.print(f"    {console.safe(quote(word))}: Jaccard {number(overlap.jaccard[i], 3)}; A: "
                      f"{inline(overlap.neighbors_a[i], name, role)}; B: {inline(overlap.neighbors_b[i], name_b, role)}",
                      soft_wrap=True)
    if role == "position":
        print_positions(states, labels)
    print_rows("top movers (largest relative change first)", found, found.movers, labels.names[role])
    print_rows("most stable rows (smallest change first; bitwise unchanged rows left out)", found, found.stable,
               labels.names[role])


def inline(rows: np.ndarray, name: Namer, role: str) -> str:
    """Rows named in a line of text; token strings quoted (not `#id`), so a leading space or an empty token shows."""
    named = [(int(row), name(int(row))) for row in rows if row >= 0]
    return ", ".join(console.safe(text if role == "position" or text == f"#{row}" else quote(text))
                     for row, text in named)


def print_positions(states: list[TableState | None], labels: Labels) -> None:
    first, last = states[0], states[-1]
    for which, state in (("A", first), ("B", last)):
        if state is not None and state.position0_norm is not None:
            ratio = state.position0_norm / state.mean_norm if state.mean_norm else math.nan
            console.out.print(f"  position 0 norm in {which}: {number(state.position0_norm)} ({number(ratio, 3)}x the "
                              f"mean {number(state.mean_norm)})")
    if first is None or last is None or first.profile is None or last.profile is None:
        return
    grid = console.table("distance k", "A: mean cos(p_i, p_i+k)", "B: mean cos(p_i, p_i+k)",
                         title="similarity by distance")
    by_offset_b = {s.offset: s.mean for s in last.profile.summary()}
    for s in first.profile.summary():
        grid.add_row(str(s.offset), cosine(s.mean), cosine(by_offset_b.get(s.offset)))
    console.out.print(grid)


def show(comparison: Comparison, labels: Labels) -> None:
    out = console.out
    out.print(header(labels), soft_wrap=True)
    if labels.audit is not None:
        for line in audit_lines(labels.audit, labels):
            out.print(line, soft_wrap=True)
    console.notes(leading_notes(comparison, labels))
    if comparison.checkpoints >= 3:
        print_trajectory(comparison, labels)
        (a, step_a), (b, step_b) = labels.checkpoints[0], labels.checkpoints[-1]
        out.print(f"first against last: A = {checkpoint_text(a, step_a)}, B = {checkpoint_text(b, step_b)}",
                  soft_wrap=True)
    for role, found in comparison.tables.items():
        print_table(found, labels, comparison.states[role])
    if labels.plot is not None:
        out.print(console.safe(labels.plot.written()), soft_wrap=True)
    console.notes(trailing_notes(comparison, labels))
