"""compare on a real dask.distributed cluster: a scheduler and two worker processes started here as the dask command
line starts them (127.0.0.1 only, one thread each), never a mock. The answer on the cluster is the one-machine answer
to the last digit; an unreachable scheduler, a checkpoint a worker cannot read and a worker that dies mid-run are
one line each."""

from __future__ import annotations

import atexit
import gc
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import interruptible, invoke, run
from pickle_gadgets import assert_error_line

import embscope
from embscope.analysis import distributed
from embscope.analysis.compare import CompareOptions
from embscope.analysis.distributed import LIBRARY_LOGGERS, LeftStarting, quiet_library, step_task


@pytest.fixture(scope="module", autouse=True)
def _distributed():
    # imported by the first test that runs (pandas and the rest, a second of CPU): only that worker pays
    pytest.importorskip("distributed")

V, D, T = 400, 16, 32
STEPS = [100, 200, 300, 400, 500]


def write_run(folder: Path, steps=STEPS, rows: int = V) -> Path:
    """nanoGPT's ckpt_<step>.pt, tables drifting from step to step."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(1)
    token, position = rng.standard_normal((rows, D)), rng.standard_normal((T, D))
    for step in steps:
        token = token * 1.02 + 0.2 * rng.standard_normal(token.shape)
        position = position + 0.1 * rng.standard_normal(position.shape)
        torch.save({"model": {"transformer.wte.weight": torch.from_numpy(token.astype(np.float32)),
                              "transformer.wpe.weight": torch.from_numpy(position.astype(np.float32))},
                    "model_args": {"vocab_size": rows, "block_size": T, "n_embd": D}, "iter_num": step},
                   folder / f"ckpt_{step}.pt")
    return folder


class Cluster:
    """`dask scheduler --scheduler-file F` and `dask worker --scheduler-file F` as subprocesses."""

    def __init__(self, folder: Path, workers: int = 2, nanny: bool = True, env: dict[str, str] | None = None):
        self.file = folder / "scheduler.json"
        self.env = {**os.environ, **(env or {})}
        logs = open(folder / "cluster.log", "wb")  # noqa: SIM115  closed with the processes
        self.logs = logs
        self.scheduler = subprocess.Popen(
            [sys.executable, "-m", "dask", "scheduler", "--scheduler-file", str(self.file), "--host", "127.0.0.1",
             "--port", "0", "--no-dashboard"], stdout=logs, stderr=logs, env=self.env)
        self.wait_for(lambda: self.file.exists() and self.file.stat().st_size > 0)
        self.workers = [subprocess.Popen(
            [sys.executable, "-m", "dask", "worker", "--scheduler-file", str(self.file), "--nthreads", "1",
             "--host", "127.0.0.1", "--no-dashboard", *([] if nanny else ["--no-nanny"])],
            stdout=logs, stderr=logs, env=self.env, cwd=folder) for _ in range(workers)]
        self.wait_for(lambda: self.connected() == workers)

    @property
    def address(self) -> str:
        return json.loads(self.file.read_text())["address"]

    def connected(self) -> int:
        from distributed import Client
        with Client(scheduler_file=str(self.file), timeout="5s") as client:
            return len(client.scheduler_info()["workers"])

    @staticmethod
    def wait_for(ready, seconds: float = 60.0) -> None:
        deadline = time.monotonic() + seconds
        while not ready():
            assert time.monotonic() < deadline, "the dask cluster did not start"
            time.sleep(0.2)

    def close(self) -> None:
        for process in [*self.workers, self.scheduler]:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in [*self.workers, self.scheduler]:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
        self.logs.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    started = Cluster(tmp_path_factory.mktemp("dask"))
    yield started
    started.close()


def test_a_task_runs_with_the_collector_on_in_a_worker_that_imported_the_entry_point(tmp_path):
    """A LocalCluster's worker started from the console script re-imports it, and so embscope.__main__, which turns
    the collector off for a command's imports; the worker runs no command, so its task turns the collector on."""
    run_folder = write_run(tmp_path / "run", steps=STEPS[:2])
    paths = [str(run_folder / f"ckpt_{step}.pt") for step in STEPS[:2]]
    gc.disable()  # as importing embscope.__main__ leaves it
    try:
        result = step_task(paths, 1, CompareOptions(), (), embscope.open)
        assert gc.isenabled()
    finally:
        gc.enable()
    assert result.index == 1 and set(result.checkpoints) == {0, 1}


@pytest.mark.slow  # the module's real scheduler and two workers take about 12 s to start and stop: CI's slow step
def test_the_cluster_gives_the_one_machine_answer_to_the_last_digit(tmp_path, cluster):
    folder = write_run(tmp_path / "run")
    args = ("compare", folder, "--sample", 60, "-k", 5, "--json")
    alone = run(*args).stdout
    on_cluster = run(*args, "--scheduler", cluster.file).stdout
    assert on_cluster == alone
    doc = json.loads(on_cluster)
    assert [c["step"] for c in doc["checkpoints"]] == STEPS and len(doc["trajectory"]) == len(STEPS)
    by_address = run(*args, "--scheduler", cluster.address).stdout  # the tcp:// address works as the file does
    assert by_address == alone


def test_a_local_cluster_gives_the_one_machine_answer_and_says_nothing_on_stderr(tmp_path):
    """`--scheduler local`: worker processes started here, fd 2 of theirs on the null device (quiet.children_quiet);
    a real process, so that anything a worker or the resource tracker prints would be read."""
    folder = write_run(tmp_path / "run", steps=[100, 200, 300])
    args = ("compare", folder, "--sample", 30, "-k", 5, "--json")
    alone = run(*args).stdout
    done = subprocess.run([sys.executable, "-m", "embscope", *map(str, args), "--scheduler", "local"],
                          capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == alone


@pytest.mark.slow  # the module's real scheduler and two workers take about 12 s to start and stop: CI's slow step
def test_each_finished_task_moves_the_progress(tmp_path, cluster):
    import embscope
    from embscope.analysis.compare import CompareOptions
    from embscope.analysis.distributed import compare_on_scheduler
    folder = write_run(tmp_path / "run")
    calls = []
    paths = sorted(folder.glob("ckpt_*.pt"), key=lambda p: int(p.stem.split("_")[1]))
    found = compare_on_scheduler(paths, embscope.open, CompareOptions(sample=20, k=3), str(cluster.file),
                                 stages=lambda name: lambda done, total: calls.append((name, done, total)))
    on_cluster = [call for call in calls if call[0] == "checkpoints on the Dask scheduler"]
    assert on_cluster == [("checkpoints on the Dask scheduler", n, len(STEPS) - 1) for n in range(1, len(STEPS))]
    assert [step.value for _, step in found.checkpoints] == STEPS


@pytest.mark.slow  # the module's real scheduler and two workers take about 12 s to start and stop: CI's slow step
def test_a_checkpoint_a_worker_cannot_read_is_one_line_naming_it_and_the_worker(tmp_path, cluster):
    folder = write_run(tmp_path / "run")
    broken = folder / "ckpt_300.pt"
    broken.write_bytes(broken.read_bytes()[:200])  # cut short
    result = invoke("compare", folder / "ckpt_100.pt", folder / "ckpt_200.pt", broken, folder / "ckpt_400.pt",
                    "--scheduler", cluster.file, "--sample", 10)
    line = assert_error_line(result, "could not read", "ckpt_300.pt", "worker tcp://127.0.0.1:")
    assert "every checkpoint must be readable at the same path from every worker" in line


def test_an_unreachable_scheduler_is_one_line(tmp_path, monkeypatch):
    # the wait the message names, shortened: 5 s in a run (nothing answers at port 9: the whole wait is spent)
    monkeypatch.setattr(distributed, "CONNECT_TIMEOUT", "200ms")
    folder = write_run(tmp_path / "run", steps=[100, 200])
    started = time.monotonic()
    result = invoke("compare", folder, "--scheduler", "tcp://127.0.0.1:9", "--sample", 10)
    # a --scheduler value that names no scheduler is a bad option value: a usage error, exit 2
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and "Traceback" not in result.output
    assert "expected a Dask scheduler at 'tcp://127.0.0.1:9', found none that answers within 200ms" in errors[0]
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("content, found", [
    ("garbage\n", "found a file that is not JSON"),  # dask retried, then failed its own assert: a traceback
    ('{"address": null}', "found no \"address\" string in it"),
    ('[1, 2]', "found no \"address\" string in it"),
])
def test_a_scheduler_file_that_names_no_address_is_one_line(tmp_path, content, found):
    folder = write_run(tmp_path / "run", steps=[100, 200])
    (tmp_path / "scheduler.json").write_text(content)
    result = invoke("compare", folder, "--scheduler", tmp_path / "scheduler.json", "--sample", 10)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    assert errors[0].startswith(f"Error: Invalid value for '--scheduler': expected a Dask scheduler file at "
                                f"'{tmp_path / 'scheduler.json'}' (JSON with an \"address\"), {found}"), errors[0]


@pytest.mark.parametrize("make, found", [(lambda p: p.mkdir(), "a directory"),
                                         (lambda p: os.mkfifo(p), "a named pipe (FIFO)")])
def test_a_scheduler_path_that_is_no_file_says_what_it_is(tmp_path, make, found):
    # a folder or a FIFO named as the scheduler was taken for an address: 'found none that answers within 5s:
    # missing port number in address'
    folder = write_run(tmp_path / "run", steps=[100, 200])
    make(tmp_path / "scheduler")
    result = invoke("compare", folder, "--scheduler", tmp_path / "scheduler", "--sample", 10)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[0] == (f"Error: Invalid value for '--scheduler': expected a Dask scheduler file "
                                             f"at '{tmp_path / 'scheduler'}' (JSON with an \"address\"), found {found}")


@pytest.mark.slow  # a cluster of its own and a run long enough to kill a worker in: about 40 s here
def test_a_worker_that_dies_mid_run_is_one_line(tmp_path):
    """Workers without a nanny (nothing restarts them) and a scheduler that retries no task: a worker killed while
    it compares a checkpoint ends the run with one line."""
    folder = write_run(tmp_path / "run", steps=list(range(100, 1300, 100)), rows=40_000)
    dying = Cluster(tmp_path, workers=2, nanny=False, env={"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"})
    try:
        def kill_a_busy_worker():
            from distributed import Client
            with Client(scheduler_file=str(dying.file), timeout="5s") as client:
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    busy = [worker for worker, tasks in client.processing().items() if tasks]
                    if busy:
                        pid = client.run(os.getpid, workers=busy[:1])[busy[0]]
                        os.kill(pid, signal.SIGKILL)
                        return
                    time.sleep(0.05)
        killer = threading.Thread(target=kill_a_busy_worker)
        killer.start()
        result = invoke("compare", folder, "--scheduler", dying.file, "--sample", 10, "--no-cka")
        killer.join()
        assert_error_line(result, "died mid-run")
    finally:
        dying.close()


def descendants(pid: int) -> set[int]:
    """The processes below pid now, from /proc (each one's parent in its stat line)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except (OSError, ValueError):
            continue
        if entry.name.isdigit():
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# the cluster's start is the window: the interrupt lands as its first process (a worker, the resource tracker)
# appears, and a moment later, while the workers start; SIGTERM's handler is Ctrl-C's (test_outputs_whole.py)
# each starts a local cluster in a child process (about 3 s of CPU): CI's slow step; the interrupts held around a
# cluster's start and close below run in the README's command
@pytest.mark.slow
@pytest.mark.parametrize("stop, later", [(signal.SIGINT, 0.0), (signal.SIGTERM, 0.2)])
def test_an_interrupt_while_the_local_cluster_starts_is_one_line_and_leaves_no_process(tmp_path, stop, later):
    """Dask's exit handler closed the half-started cluster and printed its AssertionError (a worker still in
    Status.init), a worker spawned as the run ended printed its traceback, and multiprocessing's resource tracker
    warned of a leaked semaphore: each after the run's one line."""
    folder = write_run(tmp_path / "run", steps=[100, 200])
    process = subprocess.Popen([sys.executable, "-m", "embscope", "compare", "-c", str(folder), "--scheduler", "local",
                                "--sample", "10"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
                               env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
                               preexec_fn=interruptible)  # noqa: PLW1509  the tests start no threads
    seen: set[int] = set()
    deadline = time.monotonic() + 120
    while process.poll() is None and time.monotonic() < deadline and not seen:
        seen = descendants(process.pid)
        time.sleep(0.005)
    time.sleep(later)
    seen |= descendants(process.pid)
    assert process.poll() is None, "the run ended before its cluster started"
    process.send_signal(stop)
    out, err = process.communicate(timeout=120)
    assert (process.returncode, out, err) == (128 + stop, b"", b"Error: interrupted\n")
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in seen) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in seen if alive(pid)]


def one_worker(kwargs: dict) -> dict:
    """local_cluster's arguments with one worker process, not one a core: what these tests hold or interrupt is the
    cluster's start and close, the same with one worker, and each worker process is half a second of CPU."""
    assert kwargs["n_workers"] >= 1 and kwargs["processes"]  # the product's cluster is of worker processes
    return {**kwargs, "n_workers": 1}


def test_the_libraries_log_levels_come_back_after_an_interrupt_unless_it_left_a_cluster_starting():
    """A library caller's process goes on after a Ctrl-C: dask's, tornado's and asyncio's loggers were left at
    CRITICAL + 1 for its life. Only an interrupt that left a LocalCluster starting (LeftStarting) keeps them quiet."""
    loggers = [logging.getLogger(name) for name in LIBRARY_LOGGERS]
    before = [logger.level for logger in loggers]
    try:
        for n, logger in enumerate(loggers):
            logger.setLevel(10 + n)
        with pytest.raises(KeyboardInterrupt), quiet_library():
            assert [logger.level for logger in loggers] == [logging.CRITICAL + 1] * len(loggers)
            raise KeyboardInterrupt
        assert [logger.level for logger in loggers] == [10, 11, 12, 13]
        with pytest.raises(LeftStarting), quiet_library():
            raise LeftStarting
        assert [logger.level for logger in loggers] == [logging.CRITICAL + 1] * len(loggers)
    finally:
        for logger, level in zip(loggers, before):
            logger.setLevel(level)


def test_an_interrupt_held_until_the_local_cluster_closed_leaves_dask_its_exit_handler(monkeypatch):
    """Held (stopping.held), the interrupt finds the cluster started and closed: nothing is left starting, so dask's
    exit handler, which closes a library caller's own clusters, stays registered; a second interrupt, which leaves
    the cluster starting, takes it away and says so (LeftStarting)."""
    lib = distributed.library()
    real, started = lib.LocalCluster, []

    def interrupted(times: int):
        def start(**kwargs):
            for _ in range(times):
                signal.raise_signal(signal.SIGINT)  # as Ctrl-C while the workers start
            started.append(real(**one_worker(kwargs)))
            return started[-1]
        return start

    unregistered = []
    monkeypatch.setattr(atexit, "unregister", unregistered.append)
    monkeypatch.setattr(lib, "LocalCluster", interrupted(1))
    kept = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt) as raised:
            distributed.local_cluster(lib)
        assert not isinstance(raised.value, distributed.LeftStarting)
        assert (len(started), started[0].status.name, unregistered) == (1, "closed", [])
        monkeypatch.setattr(lib, "LocalCluster", interrupted(2))
        with pytest.raises(distributed.LeftStarting):
            distributed.local_cluster(lib)
        assert (len(started), unregistered) == (1, [lib.deploy.spec.close_clusters])
    finally:
        signal.signal(signal.SIGINT, kept)


def test_the_local_clusters_scheduler_serves_http_on_a_free_local_port_not_dasks_8787():
    """dashboard_address=None still started the scheduler's HTTP server on dask's default 127.0.0.1:8787: a second
    cluster (another run, another session) found it held and dask warned; the server now takes a free port of this
    machine's loopback address, and no dashboard."""
    lib = distributed.library()

    class Lib:
        LocalCluster = staticmethod(lambda **kwargs: lib.LocalCluster(**one_worker(kwargs)))
        deploy = lib.deploy

    cluster = distributed.local_cluster(Lib)
    try:
        bound = [sock.getsockname() for sock in cluster.scheduler.http_server._sockets.values()]
    finally:
        cluster.close()
    assert bound and all(host == "127.0.0.1" and port != 8787 for host, port in bound)


def test_a_local_cluster_started_outside_the_main_thread_leaves_the_other_threads_stderr_alone(capfd):
    """No interrupt is held outside the main thread (stopping.held), so nothing there needs the workers quiet; fd 2
    moved to the null device for the start (quiet.children_quiet) dropped what the process's other threads printed
    meanwhile (a library caller's logging, its own progress)."""
    lib = distributed.library()
    starting, printed, found = threading.Event(), threading.Event(), []

    class Cluster(lib.LocalCluster):
        def __init__(self, **kwargs):
            starting.set()
            printed.wait(30)  # the main thread prints while the workers start
            super().__init__(**one_worker(kwargs))

    class Lib:
        LocalCluster = Cluster
        deploy = lib.deploy

    def start():
        found.append(distributed.local_cluster(Lib))

    worker = threading.Thread(target=start)
    worker.start()
    starting.wait(30)
    os.write(2, b"the main thread, meanwhile\n")
    printed.set()
    worker.join(120)
    found[0].close()
    assert "the main thread, meanwhile\n" in capfd.readouterr().err


def test_a_held_signal_whose_handler_lets_the_run_go_on_gets_a_running_cluster(monkeypatch):
    """A library caller's own handler that notes a signal and goes on (a graceful stop at its next step): the
    cluster closed for the held signal was handed back closed, and the run failed with 'expected a Dask scheduler
    at 'local', found none that answers'."""
    lib = distributed.library()
    real, noted = lib.LocalCluster, []

    def start(**kwargs):
        if not noted:
            signal.raise_signal(signal.SIGINT)  # as the caller's signal while the workers start
        return real(**one_worker(kwargs))

    monkeypatch.setattr(lib, "LocalCluster", start)
    kept = signal.signal(signal.SIGINT, lambda signum, frame: noted.append(signum))
    try:
        cluster = distributed.local_cluster(lib)
        try:
            assert (noted, cluster.status.name) == ([signal.SIGINT], "running")
        finally:
            cluster.close()
    finally:
        signal.signal(signal.SIGINT, kept)


def test_an_interrupt_while_the_cluster_closes_waits_for_the_close(monkeypatch):
    """Ctrl-C while the run's client and cluster close (the run's end, or the interrupt's own clean-up): stopped part
    way, the cluster was left closing, and dask's exit handler waited its 10 s timeout on it before the process
    could end. Held (distributed.closed), the close finishes and the interrupt goes on after it."""
    lib = distributed.library()
    with distributed.quiet_library():
        cluster = lib.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                                   dashboard_address=None)
    real = cluster.close

    def interrupted_close(*args, **kwargs):
        signal.raise_signal(signal.SIGINT)  # as Ctrl-C as the close begins
        return real(*args, **kwargs)

    monkeypatch.setattr(cluster, "close", interrupted_close)
    kept = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            distributed.closed(None, cluster)
    finally:
        signal.signal(signal.SIGINT, kept)
        if cluster.status.name != "closed":
            real()
    assert cluster.status.name == "closed"
