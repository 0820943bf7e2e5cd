"""The `embscope` process ends without the interpreter's teardown (embscope/__main__.py), and loses nothing by it:
its exit status, every byte it printed (more than a pipe holds), and every atexit handler the command registered,
as the interpreter's own ending would give them; an ending by an exception keeps the interpreter's own, and so
does a process the command is not the whole of (a caller of main that goes on, a handler registered before the
entry point, `python -i`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
import pytest
from conftest import interruptible, run_json

ROOT = Path(__file__).resolve().parents[1]
ENV = {**{k: v for k, v in os.environ.items() if k != "EMBSCOPE_CHECKPOINT"}, "PYTHONPATH": str(ROOT)}
# a command run by the entry point, with a witness of the teardown (its __del__ runs when the interpreter frees
# __main__'s globals) and an atexit handler registered while the command runs, as plot_style's cleanup is
WITNESSED = """import atexit, sys
import embscope.__main__ as entry

class Witness:
    def __del__(self):
        sys.stderr.write("torn down\\n")

witness = Witness()
command, mode = entry.main, sys.argv[1]

def registering():
    atexit.register(sys.stderr.write, "handler ran\\n")
    if mode == "raise":
        raise RuntimeError("a bug")
    command()

entry.main = registering
sys.argv = ["embscope", *sys.argv[2:]]
entry.program()
"""
# a caller of main that goes on after the command, with an exit handler of its own registered before it, and ends
# by its own failure: the status and the handler are the caller's
CALLER = """import atexit, sys
atexit.register(sys.stderr.write, "caller's handler ran\\n")
from embscope.__main__ import main
sys.argv = ["embscope", *sys.argv[1:]]
try:
    main()
except SystemExit as stop:
    print("command ended", stop.code)
raise RuntimeError("the caller's own failure")
"""

# a command whose exit handler is slow (a cluster's close, a large temporary folder's removal), saying on stdout when
# it starts and when it has finished
SLOW_END = """import atexit, sys, time
import embscope.__main__ as entry

def slow_end():
    print("handler started", flush=True)
    time.sleep(float(sys.argv[1]))
    print("handler ran", flush=True)

def command():
    atexit.register(slow_end)
    print("answer", flush=True)
    raise SystemExit(0)

entry.main = command
entry.program()
"""


def entry_point(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "embscope", *args], capture_output=True, env=ENV, timeout=120,
                          check=False)


def test_every_byte_printed_arrives_and_the_status_is_the_commands(tmp_path):
    table = np.random.default_rng(0).standard_normal((3000, 8)).astype(np.float32)
    table[1500:] = table[:1500]  # 1,500 identical pairs: a JSON document far larger than a pipe's 64 KB
    np.save(tmp_path / "twins.npy", table)
    done = entry_point("norms", "-c", str(tmp_path / "twins.npy"), "--json")
    assert (done.returncode, done.stderr) == (0, b"")
    assert len(done.stdout) > 1 << 16  # more than a pipe holds: the reader takes it while the command writes
    assert json.loads(done.stdout) == run_json("norms", "-c", tmp_path / "twins.npy")
    failed = entry_point("info", "-c", str(tmp_path / "missing.pt"))
    assert failed.returncode == 1 and failed.stdout == b"" and failed.stderr.count(b"\n") == 1
    usage = entry_point("similarity", "dog")
    assert usage.returncode == 2 and usage.stdout == b"" and usage.stderr.startswith(b"Error: ")


def test_the_teardown_is_skipped_after_the_handlers_of_the_command():
    done = subprocess.run([sys.executable, "-c", WITNESSED, "run", "info"], capture_output=True, text=True,
                          env=ENV, timeout=120, check=False)
    assert (done.returncode, done.stderr) == (0, "handler ran\n")
    assert "token table" in done.stdout
    # the witness does report a teardown: an ending by an exception keeps the interpreter's own
    crashed = subprocess.run([sys.executable, "-c", WITNESSED, "raise", "info"], capture_output=True, text=True,
                             env=ENV, timeout=120, check=False)
    assert crashed.returncode == 1 and "RuntimeError: a bug" in crashed.stderr
    assert crashed.stderr.endswith("handler ran\ntorn down\n")


def test_the_imports_before_the_command_register_no_exit_handler():
    """A handler registered before the entry point registers its own would run after it, that is never: none is."""
    script = ("import atexit\nregistered = []\nreal = atexit.register\n"
              "atexit.register = lambda *args, **kw: (registered.append(args[0]), real(*args, **kw))[1]\n"
              "import embscope.__main__\nprint(len(registered))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=ENV, timeout=120,
                          check=True)
    assert done.stdout == "0\n"


def test_a_caller_of_main_that_goes_on_keeps_its_own_status_and_exit_handlers():
    """A test or a script that catches the command's SystemExit and fails later ends with its own status (1, not
    the command's 0) and runs its own exit handlers, as before the quick exit."""
    done = subprocess.run([sys.executable, "-c", CALLER, "--version"], capture_output=True, text=True, env=ENV,
                          timeout=120, check=False)
    assert done.stdout.splitlines()[-1] == "command ended 0"
    assert done.returncode == 1
    assert done.stderr.endswith("RuntimeError: the caller's own failure\ncaller's handler ran\n")


def test_a_handler_registered_at_start_up_runs(tmp_path):
    """A handler registered before the entry point's own (here by sitecustomize, as coverage's process_startup
    registers the one that saves a subprocess's data) runs after it in atexit's order: the process ends as usual."""
    (tmp_path / "sitecustomize.py").write_text("import atexit, sys\n"
                                               "atexit.register(sys.stderr.write, 'start-up handler ran\\n')\n")
    env = {**ENV, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    done = subprocess.run([sys.executable, "-m", "embscope", "info", "-c", str(tmp_path / "missing.pt")],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 1 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("Error: ") and lines[1] == "start-up handler ran"


def test_python_i_goes_on_to_its_prompt_and_ends_with_its_status():
    """`python -i -m embscope`: the prompt after the command decides the status (here 7), not the command (0)."""
    done = subprocess.run([sys.executable, "-i", "-m", "embscope", "--version"], input="raise SystemExit(7)\n",
                          capture_output=True, text=True, env=ENV, timeout=120, check=False)
    assert done.returncode == 7 and done.stdout.startswith("embscope ")


def test_the_console_script_is_the_entry_point_with_the_quick_exit():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"embscope": "embscope.__main__:program"}


def signalled_in_slow_end(sleep: float, *signals: signal.Signals) -> tuple[subprocess.CompletedProcess[str], float]:
    """SLOW_END run with its exit handler sleeping `sleep` s, the signals sent once the handler has started; the
    process and the seconds from the first signal to its end."""
    process = subprocess.Popen([sys.executable, "-c", SLOW_END, str(sleep)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=ENV,
                               preexec_fn=interruptible)  # noqa: PLW1509  the tests start no threads
    assert process.stdout is not None
    lines = [process.stdout.readline(), process.stdout.readline()]
    assert lines == ["answer\n", "handler started\n"]
    sent = time.monotonic()
    for each in signals:
        process.send_signal(each)
        time.sleep(0.05)
    out, err = process.communicate(timeout=60)
    ended = time.monotonic() - sent
    return subprocess.CompletedProcess(process.args, process.returncode, "".join(lines) + out, err), ended


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_exit_handlers_run_lets_them_finish_and_gives_its_status(signum):
    """Ctrl-C while the exit handlers run raised into the handler, which Python printed as an exception it
    ignored, and the process ended 0; now the handlers finish, nothing is printed, and the status is 128 + the
    signal's number, as for a process the signal ended."""
    done, _ = signalled_in_slow_end(0.25, signum)
    assert (done.returncode, done.stderr) == (128 + signum, "")
    assert done.stdout == "answer\nhandler started\nhandler ran\n"


def test_a_second_signal_while_the_exit_handlers_run_ends_the_process_at_once():
    done, seconds = signalled_in_slow_end(30, signal.SIGTERM, signal.SIGINT)
    assert (done.returncode, done.stderr) == (128 + signal.SIGTERM, "")
    assert done.stdout == "answer\nhandler started\n"
    assert seconds < 20  # not the handler's 30 s


def test_a_signal_while_the_streams_are_flushed_gives_its_status():
    """The last exit handler flushes the standard streams, which a stopped reader can hold: a SIGTERM that came
    then was noted, but the status had been read before the flush, so the process ended 0."""
    script = """import os, signal, sys
from embscope import __main__ as entry, stopping

class Held:  # a stream whose flush is where the signal comes
    def write(self, text): return len(text)
    def flush(self): os.kill(os.getpid(), signal.SIGTERM)

came = []
sys.stdout = Held()
stopping.noted_to_the_end(came)
entry.quick_exit([0], came)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=ENV, timeout=60,
                          check=False, preexec_fn=interruptible)
    assert (done.returncode, done.stderr) == (128 + signal.SIGTERM, "")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_command_s_ending_is_on_its_way_gives_its_status(signum):
    """A signal after the command has ended but before the entry point has put its own handlers in (the
    SystemExit on its way out of cli.main): raised into the ending, it printed a traceback and the process ended 0
    (a SIGTERM sent as the answer appeared hit it one time in two). Now it is noted: 128 + its number, nothing
    printed."""
    script = f"""import os, sys
import embscope.__main__ as entry
from embscope import cli

def main():
    try:
        cli.main()
    except SystemExit:  # the command has ended: the signal comes while its SystemExit is on its way
        os.kill(os.getpid(), {int(signum)})
        raise

entry.main = main
sys.argv = ["embscope", "--version"]
entry.program()
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=ENV, timeout=60,
                          check=False, preexec_fn=interruptible)
    assert (done.returncode, done.stderr) == (128 + signum, "")
    assert done.stdout.startswith("embscope ")


def test_cli_main_from_a_script_puts_its_handlers_back_and_starts_each_run_afresh(monkeypatch):
    """A script that calls cli.main (several commands in one process) kept embscope's SIGTERM handler after it,
    and a run that SIGTERM had stopped made the next run's Ctrl-C exit 143 instead of 130."""
    from embscope import cli, stopping

    def interrupted(names):  # Ctrl-C while the command builds
        raise KeyboardInterrupt

    own = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        monkeypatch.setattr(sys, "argv", ["embscope", "--version"])
        monkeypatch.setattr(stopping, "received", [signal.SIGTERM])  # as a run SIGTERM stopped leaves it
        monkeypatch.setattr(cli, "build", interrupted)
        with pytest.raises(SystemExit) as ended:
            cli.main()
        assert ended.value.code == 130
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, own)
