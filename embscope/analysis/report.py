"""What `embscope report` gathers, section by section, from the library functions the commands call, so every
number in a report is the number the command prints. A section that cannot be made holds the one line that
says why (the error the command would print, or what the checkpoint lacks).

With several checkpoints (or a folder of a run) the sections about one checkpoint describe the last, the one
training reached last; the compare section covers them all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ..blas import one_thread
from ..core.errors import EmbscopeError, Message, Option, message_of
from ..core.role import Role
from ..lookup import word_list
from ..series import is_run_folder, path_list
from .compare_series import SeriesComparison, compare_series, run_checkpoints
from .geometry import Geometry, geometry
from .info import InfoReport, info_report
from .map import TableMap, table_map
from .neighbors import NeighborsResult, neighbors
from .norms import Anomaly, NormsReport, norms_report
from .params import ParamsReport, params_report
from .positions import PositionsResult, positions
from .probes import given_rule, probe_words
from .stages import Stages, quiet
from .undertrained import UndertrainedTables, undertrained_tables
from .untrained import Untrained

if TYPE_CHECKING:
    from ..embeddings import Embeddings

SECTIONS = ("info", "params", "norms", "positions", "undertrained", "neighbors", "map", "geometry", "compare")  # in order
NEIGHBOR_K = 10  # the `neighbors` command's default -k
NORM_ROLES = tuple(Role)  # token, position, output
MAP_ROLES = (Role.token, Role.position)
# values (rows x columns) of a checkpoint's largest table up to which its report runs BLAS on one thread: every
# product and decomposition of such a table is short, and waking OpenBLAS's second thread for each costs more CPU
# than it saves (the sample's token table: 2^17 values)
ONE_THREAD_VALUES = 1 << 20

T = TypeVar("T")


def one_checkpoint() -> str:
    more = Option("checkpoints", noun="give two or more", lead="repeat ")
    return Message("one checkpoint given: ", more, ", or give a folder of a run's checkpoints, to compare")


# a checkpoint path -> its tables, opened with the options the user gave; None: the default checkpoint
Opener = Callable[[Path | None], "Embeddings"]


@dataclass(frozen=True)
class Missing:
    """A section, or a part of one, that could not be made, and why."""

    why: str


@dataclass(frozen=True)
class Absent(Missing):
    """A part the checkpoint has nothing for (a tied head, no learned position table, no tokenizer, one checkpoint
    to compare): said as a fact about the checkpoint, not as a failure."""


@dataclass(frozen=True, eq=False)
class PositionsSection:
    result: PositionsResult  # the default pairs, the profile by distance and the heatmap
    norms: NormsReport  # the position table's norms (the norms section's)

    @property
    def position0(self) -> Anomaly:
        """Position 0's norm against the mean, as `embscope norms` measures a row (flagged or not)."""
        return self.norms.summary.anomaly(self.norms.first_row)

    @property
    def position0_flagged(self) -> bool:
        return bool((self.norms.summary.flagged == self.norms.first_row).any())


@dataclass(frozen=True)
class WordNeighbors:
    word: str
    result: NeighborsResult | Missing


@dataclass(frozen=True)
class NeighborsSection:
    rule: str  # how the words were chosen
    k: int
    words: tuple[WordNeighbors, ...]


@dataclass(frozen=True, eq=False)
class CompareSection:
    series: SeriesComparison
    origin: Path  # the first checkpoint given, or the folder of the run


@dataclass(frozen=True, eq=False)
class Report:
    emb: Embeddings  # the checkpoint the sections about one checkpoint describe
    checkpoints: tuple[Path, ...]  # every checkpoint the report covers, in order (empty: the default one)
    info: InfoReport
    params: ParamsReport | Missing
    norms: dict[str, NormsReport | Missing]  # by role: token, position, output
    positions: PositionsSection | Missing
    undertrained: UndertrainedTables | Missing
    neighbors: NeighborsSection | Missing
    maps: dict[str, TableMap | Missing]  # by role: token, position
    compare: CompareSection | Missing
    notes: tuple[str, ...] = ()  # about the checkpoints: how a run's folder was ordered
    geometry: dict[str, Geometry | Missing] = field(default_factory=dict)  # by role: token, position, output


def attempt(make: Callable[[], T]) -> T | Missing:
    """A part of the report, or why it could not be made: the error its command would print."""
    try:
        return make()
    except EmbscopeError as err:
        return Missing(message_of(err))


def report_checkpoints(given: Sequence[Path], open_path: Opener) -> tuple[list[Path], Path | None, list[str]]:
    """The checkpoints a report covers, in order, what names them together (the first, or the run's folder),
    and notes: one folder of a run's checkpoints is ordered by step; checkpoints named are kept in order."""
    if len(given) == 1 and is_run_folder(given[0]):
        ordered, notes = run_checkpoints(given[0], open_path)
        return ordered, given[0], notes
    return list(given), (given[0] if given else None), []


def each_table(emb: Embeddings, measure: Callable[[Role], T]) -> dict[str, T | Missing]:
    """`measure` of each table the checkpoint has (an output projection only when it is untied); why not, for
    the position table or head it lacks."""
    found: dict[str, T | Missing] = {}
    for role in NORM_ROLES:
        if role is Role.position and emb.position is None:
            found[role.value] = Absent("no learned position table (see the positions section)")
        elif role is Role.output and emb.output is None:
            found[role.value] = Absent(emb.tables.head_note or f"the head is {emb.tables.head.value}")
        else:
            found[role.value] = attempt(partial(measure, role))
    return found


def norms_of(emb: Embeddings) -> dict[str, NormsReport | Missing]:
    return each_table(emb, partial(norms_report, emb))


def positions_of(emb: Embeddings, norms: NormsReport | Missing) -> PositionsSection | Missing:
    if emb.position is None:
        return Absent(emb.tables.missing[Role.position])
    result = attempt(lambda: positions(emb, default=True, profile=True, heatmap=True))
    if isinstance(result, Missing):
        return result
    if isinstance(norms, Missing):
        return norms
    if result.positions == 0:
        return Missing(f"the position table {result.table!r} has no row past its {result.first_row} reserved rows")
    return PositionsSection(result, norms)


def neighbors_of(emb: Embeddings, words: Sequence[str] | None, k: int) -> NeighborsSection | Missing:
    """Each probe word's k nearest token rows; the words given, else the probe-word rule (analysis.probes)."""
    table = attempt(lambda: emb.token)  # no token table: the section says why, as neighbors would
    if isinstance(table, Missing):
        return table
    tokenizer, why_none = emb.tokenizer_for_names(table)
    if tokenizer is None:
        failed = attempt(lambda: emb.tokenizer)  # one that fails to load is a failure; none at all is a fact
        kind = Missing if isinstance(failed, Missing) else Absent
        return kind(Message("no probe words to look up: ", why_none or ""))
    rule = given_rule()
    if not words:
        words, rule = probe_words(tokenizer, table.rows)
        if not words:
            return Missing(Message("no probe words: the tokenizer has no one-token word of 3+ lower-case letters; "
                                   "name some with ", Option("words")))
    found = tuple(WordNeighbors(word, attempt(partial(neighbors, emb, word, k))) for word in words)
    return NeighborsSection(rule, k, found)


def geometry_of(emb: Embeddings, stages: Stages = quiet) -> dict[str, Geometry | Missing]:
    """`embscope geometry` of each table the checkpoint has (an output projection only when it is untied)."""
    return each_table(emb, lambda role: geometry(emb, role, stages=stages))


def maps_of(emb: Embeddings, words: Sequence[str] | None,
            norms: dict[str, NormsReport | Missing] | None = None) -> dict[str, TableMap | Missing]:
    """`embscope map` of the token and position tables, with the verdicts of the norms section where it has them
    (the same call of norms.judged: found once)."""
    found: dict[str, TableMap | Missing] = {}
    for role in MAP_ROLES:
        if role is Role.position and emb.position is None:
            found[role.value] = Absent("no learned position table (see the positions section)")
        else:
            chosen = list(words) if words and role is Role.token else None
            known = (norms or {}).get(role.value)
            verdicts = (known.summary, known.untrained) \
                if isinstance(known, NormsReport) and known.untrained is not None else None
            found[role.value] = attempt(partial(table_map, emb, role, words=chosen, verdicts=verdicts))
    return found


def never_trained(norms: dict[str, NormsReport | Missing]) -> dict[str, Untrained]:
    """The never-trained rows the norms section found, by role, for the undertrained section's seed: a table
    counted from row 0 (the position table's reserved rows shift its verdict)."""
    return {role: found.untrained for role, found in norms.items()
            if isinstance(found, NormsReport) and found.untrained is not None and found.first_row == 0}


def gather(checkpoints: Sequence[Path], open_path: Opener, *, words: Sequence[str] | None = None,
           origin: Path | None = None, notes: Sequence[str] = (), stages: Stages = quiet) -> Report:
    """Every section of the report on `checkpoints` (in order; empty: the default checkpoint). `words`: the probe
    words for the neighbours and the map (None: the probe-word rule); `origin`: what names the checkpoints
    together (default: the first)."""
    words = word_list(words, "words") if words is not None else None  # refused before any checkpoint is opened
    checkpoints = path_list(checkpoints, "checkpoints")
    emb = open_path(checkpoints[-1] if checkpoints else None)
    with one_thread() if largest_table(emb) <= ONE_THREAD_VALUES else nullcontext():
        return sections_of(emb, checkpoints, open_path, words=words, origin=origin, notes=notes, stages=stages)


def largest_table(emb: Embeddings) -> int:
    """The values (rows x columns) of the checkpoint's largest table."""
    tables = (emb.tables.token, emb.tables.position, emb.tables.output)
    return max((table.rows * table.dim for table in tables if table is not None), default=0)


def sections_of(emb: Embeddings, checkpoints: Sequence[Path], open_path: Opener, *, words: Sequence[str] | None,
                origin: Path | None, notes: Sequence[str], stages: Stages) -> Report:
    """Every section of the report, about `emb` (the last of `checkpoints`)."""
    norms = norms_of(emb)
    compare: CompareSection | Missing = Absent(one_checkpoint())
    if len(checkpoints) >= 2:  # a checkpoint named that cannot be read is an error, as in `compare`
        compare = CompareSection(compare_series(checkpoints, open_path, ready={len(checkpoints) - 1: emb},
                                                stages=stages), origin or checkpoints[0])
    return Report(
        emb=emb, checkpoints=tuple(checkpoints), info=info_report(emb), params=attempt(partial(params_report, emb)),
        norms=norms, positions=positions_of(emb, norms["position"]),
        undertrained=attempt(lambda: undertrained_tables(emb, stages=stages, untrained=never_trained(norms))),
        neighbors=neighbors_of(emb, words, NEIGHBOR_K), maps=maps_of(emb, words, norms), compare=compare,
        notes=tuple(notes), geometry=geometry_of(emb, stages))


report = gather  # the name the package face exports (embscope.report)
