"""Errors speak the library's words and carry what they are about as fields; the command line alone spells
options as its flags (a Python caller of `similarity(..., merge=False)` was told about `--no-merge`)."""

from __future__ import annotations

import ast
import os
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import typer
from conftest import source_nodes
from safetensors.numpy import save_file

from embscope import cli
from embscope.core.errors import (
    CheckpointError,
    EmbscopeError,
    Message,
    MissingPackageError,
    Option,
    OptionError,
    TableError,
    TokenError,
    TokenizerError,
    joined,
    library_words,
    message_of,
    replaced,
    spelled,
)
from embscope.core.role import Role

PACKAGE = Path(cli.__file__).resolve().parent
FLAG = re.compile(r"(?<![\w-])(--?[a-z][a-z0-9-]*)")


def command_line_flags() -> set[str]:
    """Every flag some command of embscope takes, read from the typer app itself."""
    group = typer.main.get_command(cli.app)
    ctx = typer.Context(group)
    flags: set[str] = set()
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        for param in command.params:
            flags |= {opt for opt in (*param.opts, *param.secondary_opts) if opt.startswith("-")}
    return flags - {"--help", "-h"}


def message_strings(path: Path) -> list[tuple[int, str]]:
    """The strings of a module that can reach a user, docstrings left out, with their lines: an f-string whole,
    each value in it as {}."""
    nodes = source_nodes(path)
    skipped = {id(node.body[0].value) for node in nodes
               if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
               and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    found = []
    for node in nodes:
        if isinstance(node, ast.JoinedStr):
            skipped |= {id(part) for part in node.values}
            found.append((node.lineno, "".join(part.value if isinstance(part, ast.Constant) else "{}"
                                               for part in node.values)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped:
            found.append((node.lineno, node.value))
    return found


def test_the_library_names_no_flag_of_the_command_line():
    flags = command_line_flags()
    assert {"--no-merge", "--token-key", "--tokenizer", "-c", "-k", "--out"} <= flags  # the reading works
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in ("cli.py", "render/flags.py") or relative.startswith("commands/"):
            continue  # the command line's own modules, and its spelling of an option: they own the flags
        for line, text in message_strings(path):
            text = re.sub(r"`embscope [^`]*`", "", text)  # a whole command line to run, as the report suggests
            found += [f"{relative}:{line}: {flag}" for flag in FLAG.findall(text) if flag in flags]
    assert found == []


def test_an_option_is_named_by_its_keyword_and_spelled_as_a_flag_by_the_command_line():
    cases = [(Option("merge", False), "merge=False", "--no-merge"),
             (Option("token_key", metavar="NAME"), "token_key=NAME", "--token-key NAME"),
             (Option("token_key", "alt"), "token_key='alt'", "--token-key alt"),
             (Option("k", 5000, text="5,000"), "k=5000", "-k 5,000"),
             (Option("ids", True), "ids=True", "--ids"),
             (Option("tokenizer"), "the tokenizer argument", "--tokenizer"),
             (Option("path", noun="its path"), "its path", "-c"),
             (Option("method", "umap"), "method='umap'", "--method umap")]
    assert [library_words(option) for option, _, _ in cases] == [words for _, words, _ in cases]
    assert [str(option) for option, _, _ in cases] == [words for _, words, _ in cases]
    assert [cli.flag(option) for option, _, _ in cases] == [flag for _, _, flag in cases]


def test_the_same_refusal_from_python_and_from_the_command_line(tmp_path):
    from conftest import run

    from embscope.formats.andrea import from_flag
    with pytest.raises(OptionError) as err:
        from_flag(0, "d_model")
    assert (str(err.value), err.value.option) == ("d_model=0: expected a positive integer", "d_model")
    assert spelled(message_of(err.value), cli.flag) == "--d-model 0: expected a positive integer"
    missing = run("info", "-c", tmp_path / "missing.pt", code=1)  # and the command line's boundary prints one line
    assert missing.stderr.startswith("Error: ") and missing.stderr.count("\n") == 1


def test_fields_survive_a_copy_across_processes_and_a_reworded_message():
    err = TableError("expected a tensor named 'x' for the token table, found none", role=Role.token,
                     option="token_key", path="model.safetensors")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is TableError and str(back) == str(err)
    assert (back.role, back.option, back.path) == (Role.token, "token_key", Path("model.safetensors"))
    moved = err.reworded(f"model.safetensors: {err}")
    assert type(moved) is TableError and moved.role is Role.token and str(moved).startswith("model.safetensors: ")


def test_one_missing_package_error_with_one_wording():
    err = MissingPackageError("reading vocab.json", "tokenizers", "hf", path="vocab.json")
    assert str(err) == "reading vocab.json needs the 'tokenizers' package (pip install 'embscope[hf]')"
    assert (err.package, err.extra, err.what, err.path) == ("tokenizers", "hf", "reading vocab.json", Path("vocab.json"))
    assert isinstance(err, EmbscopeError) and not isinstance(err, CheckpointError)  # the file may be sound: installing the extra answers it
    back = pickle.loads(pickle.dumps(err))
    assert (type(back), str(back), back.package) == (MissingPackageError, str(err), "tokenizers")


def test_a_damaged_tokenizer_is_a_tokenizer_error(tmp_path):
    from embscope.tokenizers import load_tokenizer
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(TokenizerError) as err:
        load_tokenizer(tmp_path / "tokenizer.json")
    assert isinstance(err.value, CheckpointError) and err.value.path == tmp_path / "tokenizer.json"


def test_a_tokenizer_file_refused_by_the_reader_is_a_tokenizer_error(tmp_path):
    """embscope.core.files refuses a file over the tokenizers' size limit before reading it: that is still a
    TokenizerError about the file, as a damaged one is."""
    from embscope.tokenizers import load_tokenizer
    from embscope.tokenizers.base import MAX_TOKENIZER_BYTES
    path = tmp_path / "tokenizer.json"
    with open(path, "wb") as f:
        f.truncate(MAX_TOKENIZER_BYTES + 1)  # sparse: no disk used
    with pytest.raises(TokenizerError) as err:
        load_tokenizer(path)
    assert err.value.path == path and "tokenizer.json" in str(err.value)


@pytest.mark.parametrize("make", ["missing", "directory", "fifo"])
def test_a_pairs_file_that_cannot_be_read_is_an_input_error(tmp_path, make):
    from embscope.core.errors import InputError
    from embscope.inputs import read_pairs
    path = tmp_path / "pairs.txt"
    if make == "directory":
        path.mkdir()
    elif make == "fifo":
        os.mkfifo(path)
    with pytest.raises(InputError) as err:
        list(read_pairs(path, None))
    assert (err.value.path, err.value.option) == (path, "pairs_file") and "pairs.txt" in str(err.value)


def test_words_for_the_position_map_are_refused_before_any_work():
    import embscope
    from embscope.analysis.map import table_map
    with pytest.raises(OptionError) as err:
        table_map(embscope.open(), Role.position, words=["father"])
    assert (err.value.option, err.value.role) == ("words", Role.position)


def test_a_checkpoint_error_names_its_file_as_a_field(tmp_path):
    from embscope.formats import open_checkpoint
    path = tmp_path / "model.safetensors"
    save_file({"wte.weight": np.ones((4, 3), np.float32)}, path)
    path.write_bytes(path.read_bytes()[:-8])  # cut short: the header promises more bytes than there are
    with pytest.raises(CheckpointError) as err:
        open_checkpoint(tmp_path)  # a folder: the file found in it is the one the error is about
    assert err.value.path == path and "model.safetensors" in str(err.value)
    with pytest.raises(CheckpointError) as err:
        open_checkpoint(tmp_path / "missing.pt")
    assert err.value.path == tmp_path / "missing.pt"


def test_every_option_a_message_names_is_a_flag_of_the_command_line():
    from embscope.roles import KEY_OPTIONS
    flags = command_line_flags()
    named = [Option(name) for name in KEY_OPTIONS.values()]
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in source_nodes(path):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Option"
                    and node.args and isinstance(node.args[0], ast.Constant)):
                value = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else None
                named.append(Option(node.args[0].value, value if isinstance(value, bool) else None))
    assert len(named) > 30
    assert sorted({cli.flag(option) for option in named} - flags) == []


def test_an_error_about_forty_candidate_tables_is_one_short_line(tmp_path):
    """Issue 32: a real quantised ONNX file's candidates made a 1.8 KB error line. Forty 2-D tensors, none of them
    a token table by name or config: the error is one line of at most 300 characters, counting them all."""
    from conftest import run
    path = tmp_path / "forty.safetensors"
    names = [f"encoder.layers.{i}.self_attention.query_key_value.weight" for i in range(40)]
    save_file({name: np.zeros((8, 4), np.float32) for name in names}, path)
    for command in (["similarity", "dog", "cat"], ["positions"], ["report", "--out", tmp_path / "r.html"]):
        result = run(*command, "-c", path, code=1 if command[0] != "report" else 0)
        if command[0] == "report":  # the report is written; its sections that need the tables say why, shortly
            page = (tmp_path / "r.html").read_text(encoding="utf-8")
            assert "40 2-D float tensors, e.g." in page and names[39] not in page
            continue
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and len(lines[0]) <= 300, lines
        assert "candidates: 40 2-D float tensors, e.g. 'encoder.layers.0." in lines[0]
        assert "(and 3" in lines[0] and "more; `embscope info` lists them)" in lines[0]


def test_a_list_that_fits_is_given_whole_and_a_long_one_is_counted():
    from embscope.listing import clipped_list
    assert clipped_list(["'a'", "'b'"], "tensors") == "'a', 'b'"
    entries = [f"'t{i}'" for i in range(40)]
    assert clipped_list(entries, "tensors", budget=20) == ("40 tensors, e.g. 't0', 't1', 't2' (and 37 more; "
                                                           "`embscope info` lists them)")
    assert clipped_list(entries, "files", budget=20, where=None) == "40 files, e.g. 't0', 't1', 't2' (and 37 more)"
    long = ["'" + "x" * 200 + "'", "'y'"]
    assert len(clipped_list(long, "tensors")) < 120


@pytest.mark.parametrize("args, flag", [
    (["neighbors", "--all", "--out", "-", "--precision", "fp16", "--device", "cpu"], "--precision"),
    (["export", "--rows", "5000:6000", "--out", "{tmp}/rows.tsv"], "--rows"),  # the sample's table has 1,024 rows
    (["similarity", "dog", "cat", "--remove-top", "500"], "--remove-top"),  # wider than the sample's 128 columns
])
def test_a_bad_option_value_the_library_finds_is_a_usage_error(tmp_path, args, flag):
    """DESIGN's contract: a bad option value or combination exits 2, though the library finds it (against the
    table or the machine); issue 32 found `neighbors --precision fp16 --device cpu` exiting 1."""
    from conftest import run
    result = run(*[a.replace("{tmp}", str(tmp_path)) for a in args], code=2)
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"Error: Invalid value for '{flag}': ") and lines[1].startswith("Usage: ")
    assert result.stdout == "" and not (tmp_path / "rows.tsv").exists()


def test_a_message_keeps_its_options_for_whoever_shows_it():
    """A message is a str in the library's words; its options stay parts, so the command line spells the same
    message with its flags. Adding, joining, pickling and rewording keep them; an f-string keeps only the words."""
    message = Message("pass ", Option("tokenizer", metavar="FILE"), ", or use ", Option("ids", True))
    assert isinstance(message, str) and message == "pass tokenizer=FILE, or use ids=True"
    assert spelled(message, cli.flag) == "pass --tokenizer FILE, or use --ids"
    assert spelled(message, library_words) == str(message) and spelled("plain text", cli.flag) == "plain text"
    made = ["model.bin: " + message + ".", joined("; ", ["first", message]), pickle.loads(pickle.dumps(message)),
            replaced(message, "pass", "give")]
    assert [spelled(m, cli.flag) for m in made] == ["model.bin: pass --tokenizer FILE, or use --ids.",
                                                    "first; pass --tokenizer FILE, or use --ids",
                                                    "pass --tokenizer FILE, or use --ids",
                                                    "give --tokenizer FILE, or use --ids"]
    assert spelled(f"{message}", cli.flag) == "pass tokenizer=FILE, or use ids=True"
    err = TokenError(message, option="ids")
    moved = pickle.loads(pickle.dumps(err.reworded(Message("model.bin: ", message_of(err)))))
    assert type(moved) is TokenError and moved.option == "ids"
    assert (str(moved), spelled(message_of(moved), cli.flag)) == ("model.bin: pass tokenizer=FILE, or use ids=True",
                                                                 "model.bin: pass --tokenizer FILE, or use --ids")


def test_no_state_says_who_is_asking(monkeypatch):
    """The spelling is the command line's when it shows text, not a state of the library while a command runs
    (a module global did that): a library call made inside a running command reads the library's words, and the
    command's own error line the flags."""
    from conftest import run

    from embscope.commands import similarity as command
    from embscope.core import errors
    from embscope.formats.andrea import from_flag
    inside = []

    def refused(*args, **kwargs):
        try:
            from_flag(0, "d_model")
        except OptionError as err:
            inside.append(str(err))
            raise

    monkeypatch.setattr(command, "words_similarity", refused)
    result = run("similarity", "dog", "cat", code=2)
    assert inside == ["d_model=0: expected a positive integer"]
    assert result.stderr.splitlines()[0] == ("Error: Invalid value for '--d-model': --d-model 0: expected a positive "
                                             "integer")
    tree = ast.parse(Path(errors.__file__).read_text(encoding="utf-8"))
    assert not [node for node in ast.walk(tree) if isinstance(node, (ast.Global, ast.Nonlocal))]
    assert not hasattr(errors, "options_spelled")


def option_made(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("Option", "key_option", "shape_option"))


def options_in_f_strings(package: Path) -> list[str]:
    """Where an f-string, or str(), takes an option made in place or a module's Option constant."""
    found = []
    for path in sorted(package.rglob("*.py")):
        nodes = source_nodes(path)
        constants = {target.id for node in nodes[0].body if isinstance(node, ast.Assign) and option_made(node.value)
                     for target in node.targets if isinstance(target, ast.Name)}
        for node in nodes:
            value = (node.value if isinstance(node, ast.FormattedValue) else
                     node.args[0] if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                     and node.func.id == "str" and len(node.args) == 1 else None)
            if value is not None and (option_made(value) or isinstance(value, ast.Name) and value.id in constants):
                found.append(f"{path.relative_to(package).as_posix()}:{node.lineno}")
    return found


def test_an_option_goes_into_a_message_as_a_part_never_through_an_f_string():
    """An f-string or str() keeps only the library's words, which the command line could not spell as its flag."""
    assert options_in_f_strings(PACKAGE) == []
