"""Files are never changed: every registered command, run on a checkpoint of every format, leaves
the checkpoint's directory byte-for-byte and name-for-name as it was, and writes nothing to the
working directory; plots and outputs go only where the user says.

The commands are walked from the typer app, so a new command is covered as soon as it is
registered; one that needs arguments gets them from ARGUMENTS below (the test says so if missing)."""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

import corpus
import pytest
import typer
from conftest import run

from embscope.cli import app

# Arguments each command needs beyond -c; {out} is a directory the user named for outputs.
ARGUMENTS: dict[str, list[list[str]]] = {
    "info": [[], ["--json"]],
    "params": [[], ["--json"]],
    "similarity": [["--ids", "1", "2", "3"], ["--ids", "1", "2", "--json"]],
    "neighbors": [["--ids", "1", "-k", "3"], ["--all", "--out", "{out}/neighbors.jsonl"],
                  ["--all", "--out", "{out}/neighbors.npz", "-k", "2"]],
    "positions": [["--pairs", "0:1,2:5"], ["--json"]],
    "norms": [["--table", "token"], ["--table", "position", "--plot", "{out}/norms.png"], ["--json"]],
    "compare": [["--sample", "5", "--json"]],  # its plot's place: tests/test_compare.py
    "undertrained": [[], ["--json", "--plot", "{out}/undertrained.png"]],
    "export": [["--out", "{out}/projector"], ["--format", "word2vec", "--table", "position", "--out", "{out}/w2v.txt"]],
    "analogy": [["--ids", "1", "2", "3", "-k", "2"], ["--ids", "1", "2", "3", "--method", "3cosmul", "--json"]],
    "map": [[], ["--table", "position", "--json"]],
    "geometry": [[], ["--table", "position", "--json", "--plot", "{out}/geometry.png"]],
    "report": [["--out", "{out}/report.html"]],  # the Markdown folder's place: tests/test_report.py
}
TAKES_CHECKPOINTS_AS_ARGUMENTS = {"compare"}  # given the checkpoint twice, not with -c
# report reads through the other commands' library calls, which run on every format here; two formats check
# its own writing (it draws every figure, three seconds of CPU a format): safetensors here, nlm-pickle in CI's slow
# step (test_the_report_changes_nothing_on_a_second_format below)
ONLY_ON = {"report": {"safetensors"}}
# a plot is drawn from the tables the command's other runs read on every format; drawing it (a third of a second)
# writes the same way whatever the format, so the plotting runs are made on the same two formats
PLOTS_ON = {"safetensors", "nlm-pickle"}
# the outputs a command may write, all inside {out}
OUTPUTS = {"neighbors.jsonl", "neighbors.npz", "norms.png", "undertrained.png", "projector", "w2v.txt", "report.html",
           "geometry.png"}
FORMATS = ["safetensors", "safetensors-index", "npz", "npz-compressed", "andrea", "nlm-pickle", "npy-object",
           "pytorch", "pytorch-legacy"]


@functools.cache  # building the group's parsers takes 12 ms; the names are the same for every test here
def registered_commands() -> tuple[str, ...]:
    return tuple(sorted(typer.main.get_command(app).commands))


def snapshot(directory: Path) -> dict[str, tuple[str, int, int]]:
    """Every file under `directory`: content hash, mode and modification time."""
    state = {}
    for path in sorted(directory.rglob("*")):
        stat = path.stat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        state[str(path.relative_to(directory))] = (digest, stat.st_mode, stat.st_mtime_ns)
    return state


def test_every_command_is_exercised():
    missing = [name for name in registered_commands() if name not in ARGUMENTS]
    assert not missing, f"add the arguments these commands need to ARGUMENTS: {missing}"


def commands_change_nothing(fmt: str, tmp_path: Path, monkeypatch, commands: tuple[str, ...]) -> int:
    """Run each of `commands` with each of its ARGUMENTS on a checkpoint of `fmt`; how many runs were made."""
    checkpoint_dir, out_dir, work_dir = tmp_path / "ckpt", tmp_path / "out", tmp_path / "cwd"
    for d in (checkpoint_dir, out_dir, work_dir):
        d.mkdir()
    entry, _ = corpus.SAMPLES[fmt].build(checkpoint_dir)
    monkeypatch.chdir(work_dir)  # a command that writes "next to" the user would show up here
    before = snapshot(checkpoint_dir)
    ran = 0
    for command in commands:
        for extra in ARGUMENTS.get(command, [[]]):
            if "--plot" in extra and fmt not in PLOTS_ON:
                continue
            given = [str(entry)] * 2 if command in TAKES_CHECKPOINTS_AS_ARGUMENTS else ["-c", str(entry)]
            args = [command, *given, *[a.format(out=out_dir) for a in extra]]
            run(*args)  # valid files: every command runs
            assert snapshot(checkpoint_dir) == before, f"{args} changed the checkpoint directory"
            assert not any(work_dir.iterdir()), f"{args} wrote into the working directory"
            ran += 1
    assert {p.name for p in out_dir.iterdir()} <= OUTPUTS  # only what the user asked for, only where
    return ran


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_command_changes_the_checkpoint_or_writes_beside_it(fmt, tmp_path, monkeypatch):
    commands = tuple(command for command in registered_commands() if fmt in ONLY_ON.get(command, {fmt}))
    ran = commands_change_nothing(fmt, tmp_path, monkeypatch, commands)
    assert ran >= len(registered_commands()) - len(ONLY_ON)


@pytest.mark.slow  # the report on safetensors above is the README command's check of the same; CI's slow step
def test_the_report_changes_nothing_on_a_second_format(tmp_path, monkeypatch):
    assert commands_change_nothing("nlm-pickle", tmp_path, monkeypatch, ("report",)) == len(ARGUMENTS["report"])


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_file_descriptor_on_the_checkpoint_outlives_a_command(fmt, tmp_path):
    """A reader that leaks an open file (a zip archive never closed) keeps a replaced checkpoint alive."""
    entry, _ = corpus.SAMPLES[fmt].build(tmp_path)
    for command in ("info", "params"):
        run(command, "-c", entry)
    fds = Path("/proc/self/fd")
    if not fds.is_dir():
        pytest.skip("no /proc on this system")
    open_paths = set()
    for fd in fds.iterdir():
        try:
            open_paths.add(os.readlink(fd))
        except OSError:
            continue
    assert not {p for p in open_paths if p.startswith(str(tmp_path))}
