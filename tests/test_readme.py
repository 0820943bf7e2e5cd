"""The README and the pages of docs/ stay true: every console example prints what the page shows, the Python
example runs and its comments hold, and CI runs the README's two commands."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from conftest import run

from embscope.core.role import Role

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
PAGES = {"README.md": README} | {f"docs/{page.name}": page.read_text(encoding="utf-8")
                                  for page in sorted((ROOT / "docs").glob("*.md"))}


def console_examples() -> list[tuple[str, str, str]]:
    """(page, command, expected output) for each `$ embscope ...` line in ```console blocks of every page."""
    examples = []
    for page, text in PAGES.items():
        for block in re.findall(r"```console\n(.*?)```", text, flags=re.DOTALL):
            for chunk in re.split(r"^\$ ", block, flags=re.MULTILINE)[1:]:
                command, _, output = chunk.partition("\n")
                examples.append((page, command, output))
    return examples


EXAMPLES = console_examples()
# the report draws every figure (six seconds of CPU): tests/test_report.py checks its lines against this page on the
# same run, and CI's slow step runs the example itself
SLOW_EXAMPLES = {("docs/commands.md", "embscope report --out /tmp/embscope-report.html")}


def test_the_pages_have_examples():
    assert len([e for e in EXAMPLES if e[0] == "README.md"]) >= 2 and len(EXAMPLES) >= 15
    assert {page for page, _, _ in EXAMPLES} >= {"README.md", "docs/commands.md"}
    assert SLOW_EXAMPLES <= {example[:2] for example in EXAMPLES}  # each still on its page


def test_the_readme_links_every_page_of_docs():
    for page in PAGES:
        if page.startswith("docs/"):
            assert f"]({page})" in README, page


@pytest.mark.parametrize("page, command, expected", [
    pytest.param(*example, marks=[pytest.mark.slow] if example[:2] in SLOW_EXAMPLES else [],
                 id=f"{example[0]}: {example[1]}") for example in EXAMPLES])
def test_console_example_prints_what_the_page_shows(page, command, expected, monkeypatch, tmp_path):
    # a working directory of its own (`--plot` alone writes there), in which the paths the pages use mean what
    # they mean in the checkout; examples run at once in other workers never meet
    (tmp_path / "sample_checkpoints").symlink_to(ROOT / "sample_checkpoints")
    monkeypatch.chdir(tmp_path)
    words = shlex.split(command)
    assert words[0] == "embscope"
    assert run(*words[1:]).stdout.rstrip() == expected.rstrip()


def test_ci_runs_the_readme_commands():
    ci = (ROOT / ".ci" / "run").read_text()
    for marker in ("install", "test"):
        block = re.search(rf"<!-- {marker} -->\n```bash\n(.*?)\n```\n<!-- /{marker} -->", README, flags=re.DOTALL)
        assert block, marker
        assert f"'/<!-- {marker} -->/,/<!-- \\/{marker} -->/p'" in ci  # what CI runs is that block
        assert f"#   {block.group(1)}" in ci  # and the comment that names it is not stale


def test_the_python_example_runs_and_its_comments_hold(monkeypatch):
    monkeypatch.chdir(ROOT)
    (code,) = re.findall(r"```python\n(.*?)```", PAGES["docs/python.md"], flags=re.DOTALL)
    found: dict = {}
    exec(compile(code, "docs/python.md", "exec"), found)  # noqa: S102  the page's own example
    lines = {line.split("#")[0].strip(): line.split("#", 1)[1].strip() for line in code.splitlines() if "#" in line}
    emb, embscope = found["emb"], found["embscope"]
    assert lines["emb.token.array.shape"].endswith(str(emb.token.array.shape))
    cosine = embscope.similarity(emb, ["father", "mother"]).pairs[0].cosine
    assert lines['embscope.similarity(emb, ["father", "mother"]).pairs[0].cosine'] == f"{cosine:.3f}..."
    neighbours = [n.token for n in embscope.neighbors(emb, "father", k=3).neighbors]
    assert lines['[n.token for n in embscope.neighbors(emb, "father", k=3).neighbors]'] == ", ".join(neighbours)
    assert found["top"].ids.shape == (emb.token.rows, 10)
    answers = [a.token for a in embscope.analogy(emb, "father", "man", "woman", k=3).answers]
    assert lines['[a.token for a in embscope.analogy(emb, "father", "man", "woman", k=3).answers]'] == ", ".join(answers)
    assert found["found"].reports[0].table is Role.token and found["found"].reports[0].candidates
