"""The README stays true: every console example prints what the README shows, and CI runs its commands."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from conftest import run

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def console_examples() -> list[tuple[str, str]]:
    """(command, expected output) for each `$ embscope ...` line in ```console blocks."""
    examples = []
    for block in re.findall(r"```console\n(.*?)```", README, flags=re.S):
        for chunk in re.split(r"^\$ ", block, flags=re.M)[1:]:
            command, _, output = chunk.partition("\n")
            examples.append((command, output))
    return examples


EXAMPLES = console_examples()


def test_the_readme_has_examples():
    assert len(EXAMPLES) >= 6


@pytest.mark.parametrize("command, expected", EXAMPLES, ids=[c for c, _ in EXAMPLES])
def test_console_example_prints_what_the_readme_shows(command, expected, monkeypatch):
    monkeypatch.chdir(ROOT)
    words = shlex.split(command)
    assert words[0] == "embscope"
    assert run(*words[1:]).stdout.rstrip() == expected.rstrip()


def test_ci_runs_the_readme_commands():
    ci = (ROOT / ".ci" / "run").read_text()
    for marker in ("install", "test"):
        block = re.search(rf"<!-- {marker} -->\n```bash\n(.*?)\n```\n<!-- /{marker} -->", README, flags=re.S)
        assert block, marker
        assert f"'/<!-- {marker} -->/,/<!-- \\/{marker} -->/p'" in ci  # what CI runs is that block
        assert f"#   {block.group(1)}" in ci  # and the comment that names it is not stale
