"""The command layer as a whole: every command has help and a README example, takes the shared options, opens
its answer with the checkpoint it is about, and ends in one of three documented ways (0, 1, 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest
import typer
from conftest import run, run_json

from embscope.cli import app

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = README + "".join(page.read_text(encoding="utf-8") for page in sorted((ROOT / "docs").glob("*.md")))
COMMANDS = typer.main.get_command(app).commands
SAMPLE = Path(__file__).resolve().parent.parent / "sample_checkpoints" / "nlm" / "model.pkl"
SAMPLE_LINE = "checkpoint: bundled sample (Shakespeare GPT, step 3000); pass -c PATH for your own"
# the smallest arguments each command answers with
ARGUMENTS = {"info": [], "params": [], "similarity": ["--ids", "1", "2"], "neighbors": ["--ids", "1", "-k", "2"],
             "positions": [], "norms": []}


def test_the_contract_commands_are_registered():
    assert set(ARGUMENTS) <= set(COMMANDS)


def test_every_command_has_help_a_line_in_the_readme_and_an_example_in_the_docs():
    for name, command in COMMANDS.items():
        assert command.help and command.help.strip(), name
        assert f"| `embscope {name}" in README, f"the README's table of commands has no `embscope {name}`"
        assert f"$ embscope {name}" in DOCS, f"no page shows an example of `embscope {name}`"
        assert run(name, "--help").stdout.count("--checkpoint") == 1, name  # compare too (issue 32)


def test_every_command_takes_the_shared_options():
    shared = {"--checkpoint", "--tokenizer", "--token-key", "--pos-key", "--json"}
    for name, command in COMMANDS.items():
        options = {opt for param in command.params for opt in param.opts}
        assert shared <= options, (name, shared - options)


def test_the_shared_options_come_from_the_command_class_not_a_rewritten_signature():
    """Issue 31: each command function keeps the signature it is written with (typer reads it as it is); its
    command class adds Source's options after the command's own and hands them over as one Source."""
    import dataclasses
    import inspect

    from embscope.commands.options import Source
    source_fields = [field.name for field in dataclasses.fields(Source)]
    for name, command in COMMANDS.items():
        function = command.callback.__wrapped__  # typer's wrapper around the function the module defines
        assert not hasattr(function, "__signature__"), name
        written = list(inspect.signature(function).parameters)
        assert written[0] == "ctx" and not set(written) & set(source_fields), (name, written)
        given = [param.name for param in command.params][-len(command.shared):]
        expected = [f for f in source_fields if f != "checkpoint" or name not in ("compare", "report")]
        assert given == expected, (name, given)


def test_the_source_options_reach_the_library(tmp_path, monkeypatch):
    """-c, $EMBSCOPE_CHECKPOINT, --token-key and --first-position each arrive in the Source the command opens."""
    from safetensors.numpy import save_file
    path = tmp_path / "model.safetensors"
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    save_file({"a.weight": table, "b.weight": table[:, ::-1].copy(), "pos.weight": np.eye(5, 3, dtype=np.float32)}, path)
    chosen = run_json("info", "-c", path, "--token-key", "b.weight", "--pos-key", "pos.weight", "--first-position", "2")
    monkeypatch.setenv("EMBSCOPE_CHECKPOINT", str(path))
    from_variable = run_json("info", "--token-key", "a.weight", "--pos-key", "pos.weight")
    assert chosen["checkpoint"] == from_variable["checkpoint"]
    tables = chosen["tables"]
    assert (tables["token"]["name"], tables["token"]["rule"]) == ("b.weight", "--token-key b.weight")
    assert (tables["position"]["name"], tables["position"]["first_row"]) == ("pos.weight", 2)
    assert from_variable["tables"]["token"]["name"] == "a.weight"
    assert "position p is row p+2: --first-position 2" in chosen["notes"]


@pytest.mark.parametrize("name", ["info", "params", "similarity", "positions", "norms"])
def test_device_is_offered_only_where_batched_work_runs(name):
    result = run(name, *ARGUMENTS[name], "--device", "cpu", code=2)
    assert result.stderr.startswith("Error: No such option: --device")


@pytest.mark.parametrize("name", ["params", "similarity", "neighbors", "positions", "norms"])
def test_the_first_line_names_the_bundled_sample(name):
    assert run(name, *ARGUMENTS[name]).stdout.splitlines()[0] == SAMPLE_LINE


@pytest.mark.parametrize("name", ["params", "similarity", "neighbors", "positions", "norms"])
def test_the_first_line_names_a_checkpoint_and_its_step(name, tmp_path, monkeypatch):
    path = tmp_path / "run.npz"
    rng = np.random.default_rng(0)
    np.savez(path, token_emb=rng.standard_normal((8, 4)).astype(np.float32),
             pos_emb=rng.standard_normal((6, 4)).astype(np.float32))
    assert run(name, *ARGUMENTS[name], "-c", path).stdout.splitlines()[0] == f"checkpoint: {path} (step unknown)"
    monkeypatch.setenv("EMBSCOPE_CHECKPOINT", str(path))  # named by the environment: not the sample either
    assert run(name, *ARGUMENTS[name]).stdout.splitlines()[0] == f"checkpoint: {path} (step unknown)"


@pytest.mark.parametrize("name", sorted(ARGUMENTS))
def test_every_json_document_names_the_checkpoint_and_step(name):
    doc = run_json(name, *ARGUMENTS[name])
    assert doc["checkpoint"] == str(SAMPLE) and doc["step"] == 3000


def test_json_step_is_null_when_unknown(tmp_path):
    path = tmp_path / "m.npz"
    np.savez(path, token_emb=np.eye(4, dtype=np.float32))
    doc = run_json("similarity", "--ids", "1", "2", "-c", path)
    assert doc["checkpoint"] == str(path) and doc["step"] is None


def test_embscope_alone_shows_the_help():
    assert run().stdout.startswith("Usage: embscope [OPTIONS] COMMAND [ARGS]...")


def test_version():
    assert run("--version").stdout == f"embscope {version('embscope')}\n"


@pytest.mark.parametrize("args, message, usage", [
    (["similarity", "dog"], "Error: expected at least two words (or --pairs-file), found 1",
     "Usage: embscope similarity [OPTIONS] [words]...  (see 'embscope similarity --help')"),
    (["norms", "--threshold", "abc"], ("Error: Invalid value for '--threshold': expected a finite number written in "
     "the digits 0-9 (at most 19 before the point), found 'abc'"),
     "Usage: embscope norms [OPTIONS]  (see 'embscope norms --help')"),
    (["norms", "--threshold", "nan"], ("Error: Invalid value for '--threshold': expected a finite number written in "
     "the digits 0-9 (at most 19 before the point), found 'nan'"),
     "Usage: embscope norms [OPTIONS]  (see 'embscope norms --help')"),
    (["neighbors", "--bogus"], "Error: No such option: --bogus (Possible options: --out)",
     "Usage: embscope neighbors [OPTIONS] [word]  (see 'embscope neighbors --help')"),
    (["norms", "--table", "words"], ("Error: Invalid value for '--table': 'words' is not one of 'token', 'position', "
     "'output'."), "Usage: embscope norms [OPTIONS]  (see 'embscope norms --help')"),
    (["neighbors", "--all", "--out"], "Error: Option '--out' requires an argument.",
     "Usage: embscope neighbors [OPTIONS] [word]  (see 'embscope neighbors --help')"),
    (["similarity", "--pairs-file"], "Error: Option '--pairs-file' requires an argument.",
     "Usage: embscope similarity [OPTIONS] [words]...  (see 'embscope similarity --help')"),
])
def test_usage_errors_are_one_line_and_a_usage_hint_with_exit_2(args, message, usage):
    result = run(*args, code=2)
    assert result.stderr == f"{message}\n{usage}\n"
    assert result.stdout == ""


def test_input_errors_are_one_line_with_exit_1(tmp_path):
    result = run("norms", "-c", tmp_path / "missing.pt", code=1)
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1


def test_a_name_too_long_is_one_line(tmp_path):
    result = run("info", "-c", "a" * 5000, code=1)
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1
    assert len(result.stderr) < 400


def test_the_docs_document_the_exit_codes():
    for code in ("0", "1", "2"):
        assert f"| {code} |" in DOCS


def test_json_is_one_document_and_nothing_else():
    for name, args in ARGUMENTS.items():
        out = run(name, *args, "--json").stdout
        assert out.endswith("\n") and out.count("\n") == 1, name
        json.loads(out)


def embscope_process(*args: str, stdout=subprocess.PIPE, env: dict | None = None) -> subprocess.CompletedProcess:
    """The real entry point in a child process: what a shell sees, streams and exit code."""
    environment = {k: v for k, v in os.environ.items() if k != "EMBSCOPE_CHECKPOINT"} | (env or {})
    return subprocess.run([sys.executable, "-m", "embscope", *args], stdout=stdout, stderr=subprocess.PIPE,
                          env=environment, timeout=60, check=False)


def test_a_full_disk_on_stdout_is_one_line_and_exit_1():
    with open("/dev/full", "w") as full:
        for args in (["info"], ["positions", "--json"]):
            done = embscope_process(*args, stdout=full)
            assert done.returncode == 1
            assert done.stderr == b"Error: could not write the output: No space left on device\n"


def test_a_reader_that_stops_early_ends_the_run_quietly():
    reader = subprocess.Popen(["head", "-1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    # 600 KB of rows; fp32 is numpy's product: auto (bf16 on this CPU) would import torch, two seconds of the child
    done = embscope_process("neighbors", "--all", "-k", "20", "--precision", "fp32", "--out", "-",
                            stdout=reader.stdin)
    reader.stdin.close()
    assert reader.stdout.read() == b"query_id\tquery_token\trank\tid\ttoken\tcosine\n"
    reader.wait()
    assert (done.returncode, done.stderr) == (1, b"")


def test_a_terminal_that_cannot_show_a_character_gets_an_escape():
    done = embscope_process("similarity", "é", "cat", env={"PYTHONIOENCODING": "ascii"})
    assert done.returncode == 0 and done.stderr == b""
    assert b"\\xe9" in done.stdout


def test_the_command_path_imports_no_optional_heavy_library():
    """Plain imports load embscope's own modules, numpy, typer and rich; torch and matplotlib only where a run
    draws or computes with them."""
    code = ("import sys\n"
            "from embscope.cli import app\n"
            "from typer.testing import CliRunner\n"
            "CliRunner().invoke(app, sys.argv[1:])\n"
            "print(' '.join(sorted(m for m in sys.modules if m in ('torch', 'matplotlib', 'embscope.analysis.similarity'))))")
    def loaded(*args):
        return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True,
                              env={k: v for k, v in os.environ.items() if k != "EMBSCOPE_CHECKPOINT"}).stdout.split()
    assert loaded("--help") == ["embscope.analysis.similarity"]
    assert loaded("similarity", "dog", "cat") == ["embscope.analysis.similarity"]


def test_a_run_imports_only_its_command_and_the_loader_it_uses():
    """The command line as it runs: the root's --help lists every command without importing one (nor the library),
    and `similarity` on the sample imports its own command, the one tokenizer loader its file needs and no top-k."""
    script = ("import sys\nfrom embscope.cli import main\nsys.argv = ['embscope', *sys.argv[1:]]\n"
              "try:\n    main()\nexcept SystemExit:\n    pass\n"
              "print(' '.join(sorted(m for m in sys.modules if m.startswith('embscope.'))), file=sys.stderr)")
    def loaded(*args):
        done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, check=True,
                              env={k: v for k, v in os.environ.items() if k != "EMBSCOPE_CHECKPOINT"})
        return set(done.stderr.split())
    helped = loaded("--help")
    assert not {m for m in helped if m.startswith(("embscope.commands.", "embscope.embeddings", "embscope.analysis"))
                } - {"embscope.commands.base", "embscope.commands.examples", "embscope.commands.numbers"}
    answered = loaded("similarity", "dog", "cat")
    commands = {m for m in answered if m.startswith("embscope.commands.")}
    assert commands == {"embscope.commands." + name for name in ("base", "command", "examples", "numbers",
                                                                 "options", "similarity")}
    loaders = {m for m in answered if m.startswith("embscope.tokenizers.")} - {
        "embscope.tokenizers.base", "embscope.tokenizers.byte_alphabet", "embscope.tokenizers.kinds",
        "embscope.tokenizers.sniffs", "embscope.tokenizers.bpe_merge", "embscope.tokenizers.split"}
    assert loaders == {"embscope.tokenizers.byte_bpe"}  # tiktoken_bpe, which knows names, only when one is named
    assert "embscope.compute.topk" not in answered


def closed(fd: int) -> Callable[[], None]:
    return lambda: os.close(fd)


def test_a_closed_stdout_is_one_line_and_exit_1():
    done = subprocess.run([sys.executable, "-m", "embscope", "info"], stderr=subprocess.PIPE, preexec_fn=closed(1),
                          env={k: v for k, v in os.environ.items() if k != "EMBSCOPE_CHECKPOINT"}, timeout=60,
                          check=False)
    assert (done.returncode, done.stderr) == (1, b"Error: could not write the output: standard output is closed\n")


def test_a_closed_stderr_keeps_the_exit_code():
    for args, code in ((["similarity", "dog"], 2), (["info", "-c", "/nonexistent"], 1)):
        done = subprocess.run([sys.executable, "-m", "embscope", *args], stdout=subprocess.PIPE, preexec_fn=closed(2),
                              timeout=60, check=False)
        assert (done.returncode, done.stdout) == (code, b"")


@pytest.mark.parametrize("args", [["info", "-c"], ["undertrained", "--against"], ["compare", str(SAMPLE)]])
def test_a_pipe_is_no_checkpoint(args, tmp_path):
    fifo = tmp_path / "model.bin"
    os.mkfifo(fifo)  # opening it to read would wait for a writer forever
    result = run(*args, fifo, code=1)
    assert result.stderr == f"Error: expected a checkpoint file, found a named pipe (FIFO) at '{fifo}'\n"


def test_h_is_help_for_the_app_and_every_command():
    assert run("-h").stdout == run("--help").stdout
    for name in COMMANDS:
        short = run(name, "-h").stdout
        assert short == run(name, "--help").stdout and short.startswith(f"Usage: embscope {name} "), name
        assert "-h, --help" in short, name


def count_options(command) -> list:
    """The options of a command that take a whole number, but the table shapes every command shares."""
    shapes = {"--vocab-size", "--d-model", "--context", "--first-position"}  # what the table is, not how many
    return [p for p in command.params if p.param_type_name == "option" and p.type.name in ("integer", "int range")
            and not shapes & set(p.opts)]


def test_how_many_has_one_name_per_idea_in_every_command():
    """Every option that says how many takes its names from one table (commands.options.HOW_MANY), each name with
    one meaning in every command; two names on one option only where the rows listed are the neighbours."""
    from embscope.commands.options import HOW_MANY
    seen = {}
    for name, command in COMMANDS.items():
        for param in count_options(command):
            assert set(param.opts) <= set(HOW_MANY), (name, param.opts)
            ideas = {HOW_MANY[opt] for opt in param.opts}
            assert len(ideas) == 1 or (ideas == {"neighbours", "listed"} and name in {"neighbors", "analogy"}), \
                (name, param.opts)
            assert param.help.startswith("How many "), (name, param.opts, param.help)
            for opt in param.opts:
                seen.setdefault(opt, set()).add(name)
    assert seen["-k"] == {"neighbors", "analogy", "compare"}
    assert seen["--top"] == {"neighbors", "analogy", "compare", "geometry"}
    assert seen["--remove-top"] == {"similarity", "neighbors"}
    top = run_json("neighbors", "father", "--top", "3")
    assert [n["token"] for n in top["neighbors"]] == [n["token"] for n in run_json("neighbors", "father", "-k", "3")
                                                       ["neighbors"]] and len(top["neighbors"]) == 3
    assert len(run_json("analogy", "father", "man", "woman", "--top", "2")["results"]) == 2


@pytest.mark.parametrize("args", [["--help"], ["--help", "similarity"], ["--help", "norms", "dog"]])
def test_the_root_help_lists_every_command_whatever_follows_it(args):
    script = "import sys\nfrom embscope.cli import main\nsys.argv = ['embscope', *sys.argv[1:]]\nmain()\n"
    shown = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, check=True).stdout
    assert all(f"\n  {name} " in shown for name in ("info", "similarity", "neighbors", "norms", "export"))


@pytest.mark.parametrize("given, expected", [(None, "4"), ("28", "28")])
def test_the_command_line_lets_blas_workers_sleep_unless_told_otherwise(given, expected):
    """OPENBLAS_THREAD_TIMEOUT is read when numpy loads: importing embscope sets it first, keeping a user's value.
    A finder placed before every other records the variable at the moment numpy is first looked for."""
    script = ("import os, sys\nseen = []\n"
              "class Watch:\n"
              "    def find_spec(self, name, path=None, target=None):\n"
              "        if name == 'numpy' and not seen:\n"
              "            seen.append(os.environ.get('OPENBLAS_THREAD_TIMEOUT'))\n"
              "        return None\n"
              "sys.meta_path.insert(0, Watch())\n"
              "sys.argv = ['embscope', '--version']\nfrom embscope.cli import main\n"
              "try:\n    main()\nexcept SystemExit:\n    pass\n"
              "print(seen[0] if seen else 'numpy never imported')")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    if given is not None:
        env["OPENBLAS_THREAD_TIMEOUT"] = given
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    assert found.stdout.split()[-1] == expected


def runnable(example: str) -> bool:
    """An example names no file missing from the repository (`run-a/ckpt.pt` is the user's, `gpt2` a hub id that
    this machine's cache need not hold)."""
    words = example.split()[1:]
    named = [w for i, w in enumerate(words) if "/" in w or (i and words[i - 1] == "-c")]
    return all((ROOT / w).exists() for w in named)


@pytest.mark.slow  # seconds of subprocesses: CI's slow step runs it; a cheaper test of the same feature stays in the suite
def test_every_help_page_ends_with_examples_that_run(tmp_path, monkeypatch):
    """Issue 32: -h on every command ends with one to three examples as typed, each starting `embscope <command>`;
    each that needs no file the repository lacks runs on the sample (in a temporary folder, where its outputs go)."""
    import shlex
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sample_checkpoints").symlink_to(ROOT / "sample_checkpoints")
    ran = set()
    for name in COMMANDS:
        page = run(name, "-h").stdout.rstrip("\n").split("\n")
        at = page.index("  Examples:")
        examples = [line.strip() for line in page[at + 1:]]
        assert 1 <= len(examples) <= 3 and all(e.startswith(f"embscope {name}") for e in examples), (name, examples)
        for example in filter(runnable, examples):
            run(*shlex.split(example)[1:])  # exit 0
            ran.add(name)
    assert ran == set(COMMANDS)


def test_every_help_page_ends_with_one_to_three_examples():
    """The suite's cheap form of the test above (which also runs each example): the examples are there, as typed."""
    for name in COMMANDS:
        page = run(name, "-h").stdout.rstrip("\n").split("\n")
        examples = [line.strip() for line in page[page.index("  Examples:") + 1:]]
        assert 1 <= len(examples) <= 3 and all(e.startswith(f"embscope {name}") for e in examples), (name, examples)


def test_the_command_list_shows_each_line_whole_and_says_what_c_takes():
    """`embscope --help` cut the commands' lines with "..." (issue 32); it says what -c takes and the default."""
    from embscope.commands.examples import SHORT_HELP
    page = subprocess.run([sys.executable, "-m", "embscope", "--help"], capture_output=True, text=True, check=True,
                          env={**os.environ, "COLUMNS": "80"}).stdout
    for name, line in SHORT_HELP.items():
        assert f"  {name.ljust(12)}  {line}\n" in page
    assert "\u2026" not in page and "..." not in page.split("Commands:")[1]
    flat = " ".join(page.split())
    assert "-c names: a file, a folder, or a model id in the local Hugging Face cache" in flat
    assert "Without -c: $EMBSCOPE_CHECKPOINT, else the bundled sample model." in flat


@pytest.mark.parametrize("name", ["neighbors", "similarity"])
def test_help_lists_only_the_tables_a_command_takes(name):
    """`neighbors --table` listed `position`, then refused it (issue 32): the choices are the accepted values."""
    assert "--table <token|output>" in run(name, "-h").stdout
    result = run(name, "dog", "--table", "position", code=2)
    assert result.stderr.startswith("Error: Invalid value for '--table': 'position' is not one of 'token', 'output'.")


def test_the_entry_point_collects_no_garbage_while_it_imports_and_the_command_runs_with_the_collector_on():
    """embscope.__main__ (the console script's and `python -m`'s entry) turns the collector off for the imports;
    cli.main turns it on again before the command's own work (a report makes cyclic garbage)."""
    script = ("import gc, sys\nfrom embscope.__main__ import main\noff = not gc.isenabled()\n"
              "sys.argv = ['embscope', 'similarity', 'dog', 'cat', '--json']\n"
              "try:\n    main()\nexcept SystemExit:\n    pass\n"
              "print(off, gc.isenabled(), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                          env={k: v for k, v in os.environ.items() if k != "EMBSCOPE_CHECKPOINT"})
    assert done.stderr.split() == ["True", "True"]
    assert json.loads(done.stdout)["pairs"][0]["a"] == "dog"
