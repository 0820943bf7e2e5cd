"""Outputs all or nothing (issue 33, round four's r10): SIGTERM and SIGHUP clean up as Ctrl-C does, and a folder
of outputs (export's Projector files, report --format md) is built beside its target and moved into place only
when every file is complete, so a failure part way (a full disk) leaves the target as it was."""

from __future__ import annotations

import errno
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import run

from embscope import stopping

ROOT = Path(__file__).resolve().parents[1]


def command(*args: object) -> list[str]:
    return [sys.executable, "-m", "embscope", *map(str, args)]


def environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def stopped_once_begun(process: subprocess.Popen, stop: int, begun: Callable[[], bool]) -> bytes:
    """Send `stop` as soon as `begun()` says the run's output is being written; the run's stderr."""
    deadline = time.monotonic() + 120
    while process.poll() is None and time.monotonic() < deadline and not begun():
        time.sleep(0.002)
    assert process.poll() is None, "the run ended before its output was begun"
    process.send_signal(stop)
    return process.communicate(timeout=120)[1]


# SIGHUP takes the handler SIGTERM takes (both checked in-process below): its child process is CI's slow step
@pytest.mark.parametrize("stop", [signal.SIGTERM, pytest.param(signal.SIGHUP, marks=pytest.mark.slow)])
def test_a_signal_part_way_through_export_leaves_nothing(tmp_path, stop):
    # 5,000 rows: the output is begun about a second before the run would end (timed here), ample for a
    # poll every 2 ms; 20,000 took three times the CPU for the same check
    np.save(tmp_path / "table.npy", np.random.default_rng(0).standard_normal((5_000, 256)).astype(np.float32))
    out = tmp_path / "out"
    process = subprocess.Popen(command("export", "-c", tmp_path / "table.npy", "--out", out), cwd=tmp_path,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=environment())
    err = stopped_once_begun(process, stop, lambda: any(p.name.endswith(".partial") for p in tmp_path.iterdir()))
    assert process.returncode == 128 + stop, (process.returncode, err)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["table.npy"]
    assert err == b"Error: interrupted\n"


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP])
def test_both_signals_stop_a_run_as_ctrl_c_does_in_process(monkeypatch, stop):
    """The cheap check of the real-process test above for both signals: the handler main installs turns each
    into Stopped (a KeyboardInterrupt, so every `finally` runs) and the exit status into 128 + its number."""
    monkeypatch.setattr(stopping, "received", [])
    kept = {signum: signal.getsignal(signum) for signum in stopping.STOPPING}
    try:
        for signum in stopping.STOPPING:  # as a process starts; a suite run under nohup ignores SIGHUP, which install keeps
            signal.signal(signum, signal.SIG_DFL)
        stopping.install()
        assert {signal.getsignal(signum) for signum in stopping.STOPPING} == {stopping.stop}
        with pytest.raises(stopping.Stopped):
            signal.raise_signal(stop)  # its handler runs before raise_signal returns (never in a gc callback)
    finally:
        for signum, handler in kept.items():
            signal.signal(signum, handler)
    assert stopping.exit_code(130) == 128 + stop and stopping.exit_code(1) == 1


def full_disk_after(limit: int) -> None:
    """In the child: a file written past `limit` bytes fails with EFBIG, as a full disk fails with ENOSPC."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_export_that_fails_part_way_leaves_the_folder_as_it_was(tmp_path):
    np.save(tmp_path / "table.npy", np.random.default_rng(0).standard_normal((2_000, 64)).astype(np.float32))
    out = tmp_path / "out"
    out.mkdir()
    (out / "metadata.tsv").write_text("an earlier export\n")
    done = subprocess.run(command("export", "-c", tmp_path / "table.npy", "--out", out), cwd=tmp_path,
                          capture_output=True, text=True, env=environment(), timeout=300, check=False,
                          preexec_fn=lambda: full_disk_after(200_000))  # the vectors file is ~2.5 MB
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("Error: ") and len(done.stderr.splitlines()) == 1, done.stderr
    assert f"'{out / 'vectors.tsv'}'" in done.stderr  # named where it was asked for, not the temporary folder
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out", "table.npy"]
    assert [path.name for path in out.iterdir()] == ["metadata.tsv"]
    assert (out / "metadata.tsv").read_text() == "an earlier export\n"


def test_export_into_an_existing_folder_replaces_its_files_whole(tmp_path):
    table = np.random.default_rng(0).standard_normal((30, 4)).astype(np.float32)
    np.save(tmp_path / "table.npy", table)
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("not ours\n")
    run("export", "-c", tmp_path / "table.npy", "--out", out)
    assert sorted(path.name for path in out.iterdir()) == ["keep.txt", "metadata.tsv", "projector_config.pbtxt",
                                                           "vectors.tsv"]
    vectors = np.loadtxt(out / "vectors.tsv", delimiter="\t", dtype=np.float32)
    np.testing.assert_allclose(vectors, table, rtol=1e-6)
    assert not [path for path in tmp_path.iterdir() if path.name.endswith(".partial")]


def test_a_markdown_report_that_fails_part_way_leaves_no_folder(tmp_path, monkeypatch):
    from matplotlib.figure import Figure
    saved = Figure.savefig
    calls = []

    def full_on_the_third(self, target, *args, **kwargs):  # two figures written, then the disk is full
        calls.append(1)
        if len(calls) == 3:
            target.write(b"\x89PNG partial")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return saved(self, target, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", full_on_the_third)
    out = tmp_path / "md"
    result = run("report", "--format", "md", "--out", out, code=1)
    assert result.stderr.startswith("Error: expected to write the plot file ")
    assert "No space left on device" in result.stderr and len(result.stderr.splitlines()) == 1
    assert f"'{out}{os.sep}" in result.stderr
    assert list(tmp_path.iterdir()) == []  # no md/, no temporary folder


@pytest.mark.slow  # seconds of subprocesses: CI's slow step runs it; a cheaper test of the same feature stays in the suite
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_part_way_through_neighbors_all_leaves_nothing(tmp_path, stop):
    """Round five's D attack: `neighbors --all --out` writes its one file beside its target, so a signal while it
    is written leaves neither the file nor its temporary."""
    np.save(tmp_path / "table.npy", np.random.default_rng(0).standard_normal((20_000, 64)).astype(np.float32))
    out = tmp_path / "out"
    out.mkdir()
    process = subprocess.Popen(command("neighbors", "--all", "-k", "5", "-c", tmp_path / "table.npy",
                                       "--out", out / "n.tsv"), cwd=tmp_path, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, env=environment())
    err = stopped_once_begun(process, stop, lambda: any(out.iterdir()))
    assert process.returncode == 128 + stop, (process.returncode, err)
    assert list(out.iterdir()) == [] and sorted(path.name for path in tmp_path.iterdir()) == ["out", "table.npy"]
    assert err == b"Error: interrupted\n"


@pytest.mark.parametrize("make", ["file", "folder"])
def test_a_stop_the_moment_the_temporary_exists_leaves_nothing(tmp_path, monkeypatch, make):
    """A signal can land between the temporary being made and the code that would remove it: the name is chosen
    before it is made, so the cleanup knows it whenever the stop comes (here, right as os.open or os.mkdir
    returns)."""
    from embscope.render import files as outputs
    real = {"file": os.open, "folder": os.mkdir}[make]

    def made_then_stopped(*args, **kwargs):
        real(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(outputs.os, "open" if make == "file" else "mkdir", made_then_stopped)
    with pytest.raises(KeyboardInterrupt):
        if make == "file":
            with outputs.written_whole(tmp_path / "out.tsv", "the output file") as f:
                f.write(b"never")
        else:
            with outputs.folder_built_whole(tmp_path / "out", "the output folder", {"a.txt": "a file"}):
                pass
    assert list(tmp_path.iterdir()) == []


def test_a_signal_while_the_command_imports_is_one_line_and_its_status():
    """SIGTERM while cli.main builds the command (its modules import, a quarter of a second of a report's start):
    one line and 128 + 15, as later in the run, not a traceback."""
    script = ("import signal, sys\nimport embscope.cli as cli\n"
              "def build(names):\n    signal.raise_signal(signal.SIGTERM)  # as a kill arriving during the imports\n"
              "cli.build = build\nsys.argv = ['embscope', 'report']\ncli.main()\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environment(),
                          timeout=120, check=False)
    assert (done.returncode, done.stderr) == (128 + signal.SIGTERM, "Error: interrupted\n")


def stopped_in_child(setup: str, args: list[str], stop: str = "signal.raise_signal(signal.SIGTERM)") -> tuple[int, str]:
    """cli.main run in a child after `setup`, which calls `stopped()` where the signal is to arrive."""
    script = (f"import signal, sys\nimport embscope.cli as cli\ndef stopped(*args, **kwargs):\n    {stop}\n{setup}\n"
              f"sys.argv = ['embscope', *{args!r}]\ncli.main()\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environment(),
                          timeout=120, check=False)
    return done.returncode, done.stderr


def test_a_signal_while_the_command_works_is_the_same_one_line_and_status():
    """typer turns a KeyboardInterrupt inside the command into exit 130 and prints nothing: the run said nothing
    where a signal a moment earlier (above) says it was interrupted."""
    setup = "import embscope.commands.info as info\ninfo.info_report = stopped  # as a kill arriving during the work"
    assert stopped_in_child(setup, ["info"]) == (128 + signal.SIGTERM, "Error: interrupted\n")
    ctrl_c = stopped_in_child(setup, ["info"], stop="raise KeyboardInterrupt")
    assert ctrl_c == (130, "Error: interrupted\n")


def test_a_signal_between_building_the_command_and_running_it_is_one_line():
    """After build, before typer parses the command line (the collector frozen, typer's click command made): not
    inside build's handler nor typer's, so it was a traceback."""
    setup = "import gc\ngc.freeze = stopped  # the first call after build"
    assert stopped_in_child(setup, ["info"]) == (128 + signal.SIGTERM, "Error: interrupted\n")


def test_ctrl_c_while_the_command_line_imports_is_one_line():
    """Ctrl-C while __main__ imports cli (a tenth of a second of every start, before main has a handler): one line
    and 130, not a traceback. The stopping signals' handler is not in place yet: their default ends the process."""
    script = ("import runpy, sys\nclass Stop:\n    def find_spec(self, name, path=None, target=None):\n"
              "        if name == 'embscope.cli':\n            raise KeyboardInterrupt  # as Ctrl-C during the import\n"
              "sys.meta_path.insert(0, Stop())\nsys.argv = ['embscope', 'info']\n"
              "runpy.run_module('embscope', run_name='__main__', alter_sys=True)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environment(),
                          timeout=120, check=False)
    assert (done.returncode, done.stderr) == (130, "Error: interrupted\n")


def test_held_signals_reach_the_handler_before_when_the_step_ends_and_a_second_at_once(monkeypatch):
    """stopping.held, which a local Dask cluster's start runs under: Ctrl-C inside waits for the block's end, and the
    block sees it; a second one is not held; SIGTERM goes to the handler there was (here main's, stopping.stop)."""
    monkeypatch.setattr(stopping, "received", [])
    kept = {signum: signal.getsignal(signum) for signum in stopping.HELD}
    ended = []
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        with pytest.raises(KeyboardInterrupt), stopping.held() as came:
            signal.raise_signal(signal.SIGINT)
            ended.append(list(came))  # still running: held
        assert ended == [[signal.SIGINT]]
        with pytest.raises(KeyboardInterrupt), stopping.held():
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGINT)
            ended.append("not reached")
        assert ended == [[signal.SIGINT]]
        stopping.install()
        with pytest.raises(stopping.Stopped), stopping.held():
            signal.raise_signal(signal.SIGTERM)
        assert stopping.received == [signal.SIGTERM]
        with pytest.raises(stopping.Stopped), stopping.held():  # SIGTERM, then Ctrl-C: the first goes first
            signal.raise_signal(signal.SIGTERM)
            signal.raise_signal(signal.SIGINT)
        assert stopping.received == [signal.SIGTERM, signal.SIGTERM]
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # an ignored signal stays ignored
        with stopping.held():
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        assert {signum: signal.getsignal(signum) for signum in stopping.HELD} == {
            signal.SIGINT: signal.default_int_handler, signal.SIGTERM: stopping.stop, signal.SIGHUP: signal.SIG_IGN}
    finally:
        for signum, handler in kept.items():
            signal.signal(signum, handler)


def test_nothing_is_held_outside_the_main_thread():
    """Python runs signal handlers in the main thread only: another thread's step holds nothing."""
    before = {signum: signal.getsignal(signum) for signum in stopping.HELD}
    seen = []

    def step():
        with stopping.held() as came:
            seen.append((came, {signum: signal.getsignal(signum) for signum in stopping.HELD}))

    worker = threading.Thread(target=step)
    worker.start()
    worker.join()
    assert seen == [([], before)]
