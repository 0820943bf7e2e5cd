"""The run audit of `compare`: checkpoints that are not what their place in the run says.

- Duplicates: checkpoints whose tables are byte-identical to an earlier checkpoint's (the digests found in the
  read that compared them, analysis.compare). Each is paired with the first checkpoint that holds the same bytes.
- Out of order: a checkpoint whose table breaks the run's trend on both of its measures at once: its cosine to the
  first checkpoint and its mean row norm each lie outside the values of the steps beside it, by at least
  REVERSAL_SHARE of the run's typical change between steps there (the smaller of the whole run's median change
  and the median within PACE_WINDOW steps: a run slows down) (a step repeated in a row counts as one point). A
  checkpoint beside a much larger break only echoes it and is not named. A swapped pair of steps (3, 5, 4, 6) and a later or
  earlier model served at a step (EleutherAI/pythia #206: the final model at step 50000) do; a smooth run, a plateau
  that wiggles in one measure, and a repeated step do not. The evidence names the values and where the table fits.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .compare import Comparison

REVERSAL_SHARE = 0.4  # of the median non-zero change between steps (its local pace): smaller reversals are the run's own noise
PACE_WINDOW = 3  # changes on each side that set a point's local pace
ECHO_RATIO = 2.0  # a reversal beside one this many times larger is that one's echo


@dataclass(frozen=True)
class Duplicate:
    first: int  # checkpoint indices: `second` holds the same bytes as `first`
    second: int
    tables: tuple[str, ...]  # the roles whose tables are byte-identical


@dataclass(frozen=True)
class OutOfOrder:
    index: int
    evidence: str


@dataclass(frozen=True)
class Audit:
    duplicates: tuple[Duplicate, ...]
    out_of_order: tuple[OutOfOrder, ...]


def duplicates(comparison: Comparison) -> list[Duplicate]:
    """Each checkpoint whose tables repeat an earlier one's bytes, with the first checkpoint that holds them."""
    seen: dict[str, dict[bytes, int]] = {role: {} for role in comparison.digests}
    found: list[Duplicate] = []
    for index in range(comparison.checkpoints):
        earlier: dict[int, list[str]] = {}
        for role, digests in comparison.digests.items():
            digest = digests.get(index)
            if digest is None:
                continue
            first = seen[role].setdefault(digest, index)
            if first != index:
                earlier.setdefault(first, []).append(role)
        found += [Duplicate(first, index, tuple(roles)) for first, roles in sorted(earlier.items())]
    return found


def measures(comparison: Comparison, role: str) -> tuple[np.ndarray, np.ndarray]:
    """The cosine to the first checkpoint (1 at the first) and the mean row norm of a table, per checkpoint."""
    steps = comparison.trajectory[role]
    cosines = np.array([1.0 if i == 0 else step.cosine_to_first for i, step in enumerate(steps)])
    norms = np.array([step.state.mean_norm if step.state is not None else math.nan for step in steps])
    return cosines, norms


def severity(values: np.ndarray) -> np.ndarray:
    """Per point: how far its value lies outside those of the two beside it, in the run's median change between
    steps (0 where it lies between them, or at an end)."""
    change = np.diff(values)
    moved = np.abs(change[np.isfinite(change) & (change != 0)])
    out = np.zeros(len(values))
    if len(values) < 3 or not len(moved):
        return out
    before, after = change[:-1], change[1:]
    with np.errstate(invalid="ignore"):
        out[1:-1] = np.where(before * after < 0, np.minimum(np.abs(before), np.abs(after)), 0.0) / pace(change, moved)
    return out


def pace(change: np.ndarray, moved: np.ndarray) -> np.ndarray:
    """Per inner point: the run's typical change between steps there, the smaller of the whole run's median and the
    median within PACE_WINDOW steps each side, since a run slows down (its early steps would hide a late swap)."""
    whole = float(np.median(moved))
    local = np.full(len(change) - 1, whole)
    for point in range(1, len(change)):
        near = change[max(0, point - PACE_WINDOW):point + PACE_WINDOW]
        near = np.abs(near[np.isfinite(near) & (near != 0)])
        if len(near) >= PACE_WINDOW:
            local[point - 1] = min(whole, float(np.median(near)))
    return local


def runs_of_equal(cosines: np.ndarray, norms: np.ndarray) -> list[list[int]]:
    """Checkpoints with finite measures, consecutive ones holding the same values (a repeated step) as one point."""
    groups: list[list[int]] = []
    for index in np.flatnonzero(np.isfinite(cosines) & np.isfinite(norms)).tolist():
        last = groups[-1][-1] if groups else None
        if last is not None and (cosines[last], norms[last]) == (cosines[index], norms[index]):
            groups[-1].append(index)
        else:
            groups.append([index])
    return groups


def misplaced(cosines: np.ndarray, norms: np.ndarray) -> list[tuple[list[int], int, int]]:
    """(checkpoints, left neighbour, right neighbour) of each point that breaks the trend on both measures; a point
    beside a far larger break (the neighbour of a jump to another model and back) is that break's echo, not one."""
    groups = runs_of_equal(cosines, norms)
    firsts = [group[0] for group in groups]
    score = np.minimum(severity(cosines[firsts]), severity(norms[firsts]))
    found = []
    for g in np.flatnonzero(score >= REVERSAL_SHARE).tolist():
        if any(0 <= n < len(groups) and score[n] > ECHO_RATIO * score[g] for n in (g - 1, g + 1)):
            continue
        found.append((groups[g], groups[g - 1][-1], groups[g + 1][0]))
    return found


def fits(cosines: np.ndarray, index: int, names: Sequence[str]) -> str:
    """Where the table's cosine to the first would sit among the other checkpoints, in the run's order."""
    value = cosines[index]
    others = [i for i in range(len(cosines)) if i != index and math.isfinite(cosines[i])]
    for left, right in itertools.pairwise(others):
        if min(cosines[left], cosines[right]) <= value <= max(cosines[left], cosines[right]):
            return f"; by its cosine to the first it fits between {names[left]} and {names[right]}"
    if len(others) >= 2:
        last, first = cosines[others[-1]], cosines[others[0]]
        if (value < last) == (last < first):  # past the last, in the direction the run moves
            return f"; by its cosine to the first it fits after {names[others[-1]]}, the last"
    return ""


def evidence(role: str, index: int, around: tuple[int, int], cosines: np.ndarray, norms: np.ndarray,
             names: Sequence[str]) -> str:
    (left, right), name = around, names.__getitem__
    return (f"{role} table: cosine to the first checkpoint {cosines[index]:+.4f} lies outside {name(left)}'s "
            f"{cosines[left]:+.4f} and {name(right)}'s {cosines[right]:+.4f}, and mean row norm {norms[index]:.4g} "
            f"outside {norms[left]:.4g} and {norms[right]:.4g}: against the run's trend{fits(cosines, index, names)}")


def out_of_order(comparison: Comparison, names: Sequence[str]) -> list[OutOfOrder]:
    """Checkpoints that do not fit between their neighbours, on both measures of some table."""
    found: dict[int, list[str]] = {}
    for role in comparison.trajectory:
        cosines, norms = measures(comparison, role)
        for members, left, right in misplaced(cosines, norms):
            for index in members:
                found.setdefault(index, []).append(evidence(role, index, (left, right), cosines, norms, names))
    return [OutOfOrder(index, "; ".join(lines)) for index, lines in sorted(found.items())]


def audit(comparison: Comparison, names: Sequence[str]) -> Audit:
    """`names`: what to call each checkpoint in the evidence ("step 500", or "checkpoint 3" where no step is known)."""
    return Audit(tuple(duplicates(comparison)), tuple(out_of_order(comparison, names)))
