"""Every registered command has help text and is shown in the README."""

from __future__ import annotations

from pathlib import Path

import typer

from embscope.cli import app
from conftest import run

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
COMMANDS = typer.main.get_command(app).commands
TAKES_CHECKPOINTS_AS_ARGUMENTS = {"compare"}  # several checkpoints, so no -c


def test_the_contract_commands_are_registered():
    assert {"info", "similarity", "neighbors", "positions", "norms", "params"} <= set(COMMANDS)


def test_every_command_has_help_and_a_readme_example():
    for name, command in COMMANDS.items():
        assert command.help and command.help.strip(), name
        assert f"embscope {name}" in README, f"README shows no example of `embscope {name}`"
        expected = 0 if name in TAKES_CHECKPOINTS_AS_ARGUMENTS else 1
        assert run(name, "--help").stdout.count("--checkpoint") == expected, name


def test_every_command_takes_the_shared_options():
    shared = {"--checkpoint", "--tokenizer", "--token-key", "--pos-key", "--device", "--json"}
    for name, command in COMMANDS.items():
        options = {opt for param in command.params for opt in param.opts}
        wanted = shared - {"--checkpoint"} if name in TAKES_CHECKPOINTS_AS_ARGUMENTS else shared
        assert wanted <= options, (name, wanted - options)
