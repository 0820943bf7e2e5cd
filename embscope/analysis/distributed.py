"""`compare` on a Dask cluster: each checkpoint of the series after the first is one task, run on a worker of a
dask.distributed scheduler (its address, or `local` for a LocalCluster of worker processes here).

A task opens its checkpoint, the previous one and the first, and does exactly the step the one-machine series does
for it (SeriesWalk.step: the read against the previous and the first, the table's state, its digest; for the last,
the neighbour sets found in that read), so the answer is the one-machine answer to the last digit. The client opens
only the first and the last checkpoint, for first-against-last in detail and to name their rows. Every checkpoint
must be readable at the same path from every worker: a worker that cannot read one is one line naming the file and
the worker. An unreachable scheduler, a worker that dies mid-run and a cluster left without workers are one line
each, never a hang."""

from __future__ import annotations

import atexit
import contextlib
import gc
import logging
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import stopping
from ..core import files
from ..core.errors import CheckpointError, EmbscopeError, Message, MissingPackageError, Option, OptionError, message_of
from ..core.text import quote
from ..quiet import children_quiet
from ..series import Step, checkpoint_step
from .compare import CompareOptions, NeighborOverlap, SeriesWalk, TableState, TrajectoryPoint
from .compare_series import SeriesComparison, finished, namer, tables_of, unnamed
from .stages import Stages, quiet
from .sweep import RowChanges

if TYPE_CHECKING:
    from ..embeddings import Embeddings

LOCAL = "local"  # a LocalCluster of worker processes on this machine
SCHEDULER = Option("scheduler", metavar="ADDRESS")  # spelled as whoever answers writes it
SCHEDULER_FILE_BYTES = 1 << 20  # dask writes a few hundred bytes
CONNECT_TIMEOUT = "5s"  # an address that answers nothing is one line after this, not a hang
NO_WORKER_WAIT = 30.0  # seconds a cluster may stay without a worker while tasks wait, before it is one line
POLL = 0.5  # seconds between looks at the tasks and the workers
LIBRARY_LOGGERS = ("distributed", "tornado", "asyncio", "bokeh")  # their records must not reach stderr

Opener = Callable[[Path], "Embeddings"]


@dataclass
class StepResult:
    """What one task found for checkpoint `index` (and for the first, in the task of checkpoint 1)."""

    index: int
    checkpoints: dict[int, tuple[str, Step]]  # index -> (the file opened, relative to the path given; its step)
    roles: dict[int, tuple[str, ...]]  # index -> the roles of its tables, in order
    moves: dict[str, TrajectoryPoint] = field(default_factory=dict)
    states: dict[str, dict[int, TableState]] = field(default_factory=dict)
    digests: dict[str, dict[int, bytes]] = field(default_factory=dict)
    to_first: dict[str, RowChanges] = field(default_factory=dict)  # the last checkpoint's read against the first
    neighbors: dict[str, NeighborOverlap] = field(default_factory=dict)


@dataclass(frozen=True)
class StepFailure:
    """A checkpoint the worker could not read: the path given, the worker's address, why."""

    path: str
    worker: str
    message: str


def opened_name(given: Path, emb: Embeddings) -> str:
    """The file opened, as a path relative to the one given ("" when it is that path): the client words it as the
    user named the checkpoint, whatever the worker's own working folder."""
    opened = Path(emb.checkpoint.path)
    try:
        relative = opened.relative_to(given)
    except ValueError:
        return str(opened)
    return "" if relative == Path() else str(relative)


def step_task(paths: Sequence[str], index: int, options: CompareOptions, word_rows: Sequence[int],
              opener: Opener) -> StepResult | StepFailure:
    """Checkpoint `index` against the previous and the first, as SeriesWalk.step does it in the one-machine series."""
    # a local worker started from the console script re-imports its main script, so embscope.__main__, which turns
    # the collector off until a command starts: none starts in a worker
    gc.enable()
    wanted = sorted({0, index - 1, index})
    opened: dict[int, Embeddings] = {}
    for i in wanted:
        try:
            opened[i] = opener(Path(paths[i]))
        except EmbscopeError as err:
            return StepFailure(paths[i], worker_address(), message_of(err))
    tables = {i: tables_of(emb) for i, emb in opened.items()}
    result = StepResult(index, {i: (opened_name(Path(paths[i]), emb), checkpoint_step(emb.checkpoint))
                                for i, emb in opened.items()},
                        {i: tuple(found) for i, found in tables.items()})
    walk = SeriesWalk(options, None, word_rows, quiet, len(paths))
    for role, table in tables[0].items():
        walk.step(0, role, table)
    if index > 1:
        walk.previous.update(tables[index - 1])
    for role, table in tables[index].items():
        if role in walk.first:
            walk.step(index, role, table)
    result.moves = {role: moves[index] for role, moves in walk.moves.items() if index in moves}
    result.states = {role: {i: state for i, state in states.items() if i == index or index == 1}
                     for role, states in walk.states.items()}
    result.digests, result.to_first, result.neighbors = walk.digests, walk.to_first, walk.found_neighbors
    return result


def worker_address() -> str:
    try:
        from distributed import get_worker
        return str(get_worker().address)
    except ValueError:  # not on a worker (the task run in this process)
        return "this process"


@contextlib.contextmanager
def quiet_library() -> Iterator[None]:
    """dask's and tornado's log records and warnings kept off stderr while the cluster is in use, and after an
    interrupt that left a cluster starting (LeftStarting), which ends the run: that cluster logs as it goes. Any
    other ending puts the levels back (a library caller's process goes on after a Ctrl-C)."""
    loggers = [logging.getLogger(name) for name in LIBRARY_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    except LeftStarting:
        raise
    except BaseException:
        restore_levels(loggers, levels)
        raise
    restore_levels(loggers, levels)


class LeftStarting(KeyboardInterrupt):
    """An interrupt that left a LocalCluster starting (a second one, not held): it goes on with the process."""


def restore_levels(loggers: list[logging.Logger], levels: list[int]) -> None:
    for logger, level in zip(loggers, levels):
        logger.setLevel(level)


def library() -> Any:
    """dask.distributed, or the one line that names the extra that installs it."""
    try:
        import distributed
    except ImportError:
        raise MissingPackageError(Message("running compare on a scheduler (", SCHEDULER, ")"), "distributed", "dask",
                                  option="scheduler") from None
    return distributed


def local_cluster(lib: Any) -> Any:
    """A LocalCluster of worker processes on this machine. An interrupt while its workers start waits for them
    (stopping.held), and the started cluster is closed before it goes on: stopped part way, dask's exit handler
    fails to close it and prints that failure after the interrupt's one line. A held signal whose handler lets the
    run go on (a library caller's own) leaves the cluster running. A second interrupt goes on at once: then the
    half-started cluster is left to end with the process (LeftStarting), its processes quiet (children_quiet, in
    the main thread, where interrupts come: a worker spawned then prints a traceback)."""
    cluster = None
    # no interrupt is held outside the main thread: nothing there needs the workers quiet, and moving fd 2 would
    # drop what the process's other threads print meanwhile
    quiet = children_quiet() if threading.current_thread() is threading.main_thread() else contextlib.nullcontext()
    try:
        with stopping.held(), quiet:
            # no dashboard; the scheduler's own HTTP server (it starts one anyway) on a free port of this machine,
            # not dask's fixed 8787, which another cluster may hold (dask then warns and takes another)
            cluster = lib.LocalCluster(n_workers=min(4, os.cpu_count() or 1), threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address=None, silence_logs=logging.CRITICAL,
                                       scheduler_kwargs={"dashboard_address": "127.0.0.1:0"})
    except KeyboardInterrupt as interrupt:  # Ctrl-C, or a stopping signal (stopping.py)
        if cluster is not None:  # held until the cluster had started: nothing is left starting
            closed(cluster)
            raise
        atexit.unregister(lib.deploy.spec.close_clusters)
        raise LeftStarting(*interrupt.args) from interrupt
    return cluster


@contextlib.contextmanager
def connected(address: str) -> Iterator[Any]:
    """A Client of the scheduler at `address` (a tcp:// address, or a scheduler file), or of a LocalCluster of
    worker processes for "local"."""
    lib = library()
    with quiet_library():
        cluster = None
        try:
            if address == LOCAL:
                cluster = local_cluster(lib)
                client = lib.Client(cluster, timeout=CONNECT_TIMEOUT)
            elif files.status(address) is not None:  # a scheduler file, or what a path names instead (a folder)
                client = lib.Client(address_in(address), timeout=CONNECT_TIMEOUT)
            else:
                client = lib.Client(address, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError, ValueError, TypeError, RuntimeError) as err:  # RuntimeError: workers not started
            closed(cluster)
            raise OptionError(f"expected a Dask scheduler at {quote(address)}, found none that answers within "
                              f"{CONNECT_TIMEOUT}: {' '.join(str(err).split()) or type(err).__name__}",
                              option="scheduler") from None
        except KeyboardInterrupt:  # while the client connects
            closed(cluster)
            raise
        try:
            yield client
        finally:
            closed(client, cluster)


def address_in(scheduler_file: str) -> str:
    """The address a scheduler file (`dask scheduler --scheduler-file`) holds, read here: dask's own reading of a
    file that is not JSON, or holds no address, ends in an AssertionError of its own."""
    expected = f"expected a Dask scheduler file at {quote(scheduler_file)} (JSON with an \"address\"), "
    found = files.status(scheduler_file)
    other = files.not_regular(found.st_mode) if found is not None else None
    if other is not None:  # a folder or a FIFO there: said, where dask took it for an address ('missing port')
        raise OptionError(expected + f"found {other}", option="scheduler")
    try:
        document = files.read_json(scheduler_file, SCHEDULER_FILE_BYTES, "a Dask scheduler file")
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise OptionError(expected + "found a file that is not JSON", option="scheduler") from None
    except EmbscopeError as err:
        raise OptionError(Message(expected + "found: ", message_of(err)), option="scheduler") from None
    address = document.get("address") if isinstance(document, dict) else None
    if not isinstance(address, str) or not address:
        raise OptionError(expected + "found no \"address\" string in it", option="scheduler")
    return address


def closed(*parts: Any) -> None:
    """Each of parts (a client, a cluster; None: none) closed with interrupts held (stopping.held): one part way
    leaves a cluster closing, and dask's exit handler waits its 10 s timeout on it before the process can end."""
    with stopping.held():
        for part in parts:
            if part is not None:
                part.close()


def gather(client: Any, futures: dict[Any, int], address: str, paths: Sequence[str], stages: Stages
           ) -> dict[int, StepResult]:
    """Each task's result as it finishes (progress on stderr); a failure, a dead worker or no workers: one line."""
    lib = library()
    progress = stages("checkpoints on the Dask scheduler")
    results: dict[int, StepResult] = {}
    no_worker_since: float | None = None
    pending = set(futures)
    while pending:
        try:
            done, _ = lib.wait(list(pending), timeout=POLL, return_when="FIRST_COMPLETED")
        except TimeoutError:
            done = set()
        except OSError as err:
            raise lost(address, err) from None
        for future in done:
            pending.discard(future)
            index = futures[future]
            try:
                found = future.result()
            except lib.KilledWorker:
                raise CheckpointError(f"the Dask worker reading {quote(paths[index])} died mid-run (the scheduler "
                                      "gave up on its task): see the worker's log", path=paths[index]) from None
            except OSError as err:
                raise lost(address, err) from None
            if isinstance(found, StepFailure):
                raise CheckpointError(Message(f"worker {found.worker} could not read {quote(found.path)}: every "
                                              "checkpoint must be readable at the same path from every worker (",
                                              found.message, ")"), path=found.path)
            results[index] = found
            progress(len(results), len(futures))
        no_worker_since = waited_without_workers(client, address, no_worker_since, bool(pending))
    return results


def lost(address: str, err: BaseException) -> CheckpointError:
    return CheckpointError(f"lost the Dask scheduler at {quote(address)} mid-run: "
                           f"{' '.join(str(err).split()) or type(err).__name__}")


def waited_without_workers(client: Any, address: str, since: float | None, waiting: bool) -> float | None:
    """When the cluster has had no worker while tasks wait; past NO_WORKER_WAIT seconds, one line."""
    if not waiting:
        return None
    try:
        workers = client.scheduler_info().get("workers", {})
    except OSError as err:
        raise lost(address, err) from None
    if workers:
        return None
    now = time.monotonic()
    if since is not None and now - since > NO_WORKER_WAIT:
        raise CheckpointError(f"the Dask scheduler at {quote(address)} has had no worker for {NO_WORKER_WAIT:.0f} s "
                              "while checkpoints wait: its workers died or never joined")
    return since if since is not None else now


def run_on_scheduler(paths: Sequence[Path], opener: Opener, options: CompareOptions, address: str,
                     word_rows: Sequence[int] = (), stages: Stages = quiet) -> tuple[SeriesWalk, dict[int, StepResult]]:
    """Every step of the series as a task; the walk holds what they found, as the one-machine series would."""
    absolute = [os.path.abspath(path) for path in paths]  # the workers' working folder may be another one
    with connected(address) as client, quiet_library():
        futures = {client.submit(step_task, absolute, index, options, tuple(word_rows), opener, pure=False): index
                   for index in range(1, len(paths))}
        results = gather(client, futures, address, [str(p) for p in paths], stages)
    walk = SeriesWalk(options, None, word_rows, stages, len(paths))
    for index in sorted(results):
        found = results[index]
        for role, move in found.moves.items():
            walk.moves.setdefault(role, {})[index] = move
        for role, states in found.states.items():
            walk.states.setdefault(role, {}).update(states)
        for role, digests in found.digests.items():
            walk.digests.setdefault(role, {}).update(digests)
    last = results[len(paths) - 1]  # first against last: what the last step's read found
    walk.to_first.update(last.to_first)
    walk.found_neighbors.update(last.neighbors)
    return walk, results


def same_tables(results: dict[int, StepResult], paths: Sequence[Path]) -> None:
    """Each checkpoint holds the tables the first holds: a table that comes or goes within a series needs the
    one-machine walk, which keeps the first and the previous checkpoint that has it."""
    first = results[min(results)].roles[0]
    for found in results.values():
        for index, roles in found.roles.items():
            if roles != first:
                raise CheckpointError(Message("compare on a scheduler (", SCHEDULER, ") needs every checkpoint to hold "
                                              f"the tables of the first ({', '.join(first)}); {quote(paths[index])} "
                                              f"holds {', '.join(roles) or 'none'}: compare them on one machine"),
                                      path=paths[index])


def compare_on_scheduler(paths: Sequence[Path], opener: Opener, options: CompareOptions, address: str, *,
                         word_rows: Sequence[int] = (), stages: Stages = quiet,
                         on_open: Callable[[Embeddings], None] | None = None) -> SeriesComparison:
    """compare_series with each step a task on the Dask scheduler at `address` ("local": a LocalCluster here)."""
    if len(paths) < 2:
        raise ValueError(f"expected two or more checkpoints to compare, found {len(paths)}")
    walk, results = run_on_scheduler(paths, opener, options, address, word_rows, stages)
    same_tables(results, paths)
    first, last = opener(paths[0]), opener(paths[-1])
    first_tables, last_tables = tables_of(first), tables_of(last)
    for emb in (first, last):
        if on_open is not None:
            on_open(emb)
    walk.first.update((role, (0, table)) for role, table in first_tables.items())
    comparison = walk.comparison(len(paths), last_tables)
    opened: list[tuple[Path, Step]] = []
    for index, path in enumerate(paths):
        name, step = results[max(index, 1)].checkpoints[index]
        opened.append((Path(path) / name if name else Path(path), step))
    names = {role: namer(first, role, table.first_row) for role, table in first_tables.items()}
    names_b = {role: namer(last, role, table.first_row) for role, table in last_tables.items()}
    table_names = {role: (first.table(role).name, last.table(role).name) for role in comparison.tables}
    return finished(comparison, opened, table_names, names, names_b, unnamed(last, last_tables))
