"""An empty name on the command line names nothing: `-c ''` is not the current directory and `--token-key ''`
is not "discover it"; each is a usage error (exit 2, one line and the usage hint), before anything is opened. So is
a second -c for a command that answers about one checkpoint."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run

import embscope
from embscope.core.errors import EmbscopeError

CASES = {
    "-c": "'--checkpoint' / '-c' (env var: 'EMBSCOPE_CHECKPOINT'): expected a checkpoint path or model id, found an "
          "empty string",
    "--tokenizer": "'--tokenizer': expected a tokenizer file, found an empty string",
    "--token-key": "'--token-key': expected a tensor name, found an empty string",
    "--pos-key": "'--pos-key': expected a tensor name, found an empty string",
    "--output-key": "'--output-key': expected a tensor name, found an empty string",
}


@pytest.mark.parametrize("option", list(CASES))
@pytest.mark.parametrize("command", ["info", "similarity", "params"])
def test_an_empty_name_is_a_usage_error(option, command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # were '' read as '.', this folder (empty) would be opened
    words = ["dog", "cat"] if command == "similarity" else []
    result = run(command, *words, option, "", code=2)
    lines = result.stderr.splitlines()
    assert lines[0] == f"Error: Invalid value for {CASES[option]}" and lines[1].startswith("Usage: ")
    assert len(lines) == 2 and result.stdout == ""


def test_compare_and_report_refuse_an_empty_checkpoint(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    compare = run("compare", "", "other.pt", code=2)
    assert compare.stderr.splitlines()[0] == ("Error: Invalid value for 'CHECKPOINT...': expected a checkpoint path "
                                              "or model id, found an empty string")
    report = run("report", "-c", "", code=2)
    assert report.stderr.splitlines()[0] == ("Error: Invalid value for '--checkpoint' / '-c': expected a checkpoint "
                                             "path or model id, found an empty string")


def test_the_library_refuses_an_empty_path_too():
    with pytest.raises(EmbscopeError, match=r"^expected a checkpoint path or model id, found an empty string$"):
        embscope.open("")


FILES = [
    (("export", "--out", ""), "'--out': expected a file or folder to write"),
    (("export", "--format", "word2vec", "--out", ""), "'--out': expected a file or folder to write"),
    (("report", "--format", "md", "--out", ""), "'--out': expected a file or folder to write"),
    (("neighbors", "--all", "--out", ""), "'--out': expected a file or folder to write"),
    (("neighbors", "--all", "--out", "n.tsv", "--queries", ""), "'--queries': expected a file to read"),
    (("similarity", "--pairs-file", ""), "'--pairs-file': expected a file to read"),
    (("analogy", "--file", ""), "'--file': expected a file to read"),
    (("undertrained", "--against", ""), "'--against': expected a checkpoint path or model id"),
]


@pytest.mark.parametrize("args, said", FILES, ids=[" ".join(a[:-1]) for a, _ in FILES])
def test_an_empty_file_or_folder_is_a_usage_error(args, said, tmp_path, monkeypatch):
    # '' was the current directory: export and report --format md filled it with their files, --against read it as
    # the checkpoint, and the inputs were refused as "a directory at '.'", which no one typed
    monkeypatch.chdir(tmp_path)
    lines = run(*args, code=2).stderr.splitlines()
    assert lines[0] == f"Error: Invalid value for {said}, found an empty string" and lines[1].startswith("Usage: ")
    assert len(lines) == 2 and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("given", [("-c", "a.npy", "-c", "b.npy"), ("-ca.npy", "--checkpoint=b.npy")])
@pytest.mark.parametrize("command", ["info", "norms", "geometry"])
def test_a_second_checkpoint_for_a_one_checkpoint_command_is_a_usage_error(given, command):
    # click kept the last of a repeated -c: `info -c a.npy -c b.npy` answered about b.npy alone, without a word
    lines = run(command, *given, code=2).stderr.splitlines()
    assert lines[0] == (f"Error: -c given 2 times: {command} answers about one checkpoint (compare and report take "
                        "several)") and lines[1].startswith("Usage: ") and len(lines) == 2


def test_a_value_that_looks_like_c_is_no_second_checkpoint(tmp_path):
    np.save(tmp_path / "t.npy", np.ones((4, 3), np.float32))
    result = run("info", "--token-key", "-c", "-c", tmp_path / "t.npy", code=1)  # a tensor named '-c'
    assert result.stderr == "Error: expected a tensor named '-c' for the token table, found none\n"


@pytest.mark.parametrize("argument, value, said", [
    ("vocab_size", 1.5, "vocab_size=1.5: expected a positive integer"),
    ("vocab_size", True, "vocab_size=True: expected a positive integer"),
    ("first_position", 1.5, "first_position=1.5: expected a row number (an integer)"),
    ("token_key", "", "token_key='': expected a name or path, found an empty string"),
    ("token_key", 5, "token_key=5: expected a name or path, found int"),
    ("tokenizer", "", "tokenizer='': expected a name or path, found an empty string"),
])
def test_the_library_refuses_open_arguments_the_command_line_refuses(argument, value, said):
    # vocab_size=1.5 opened the ANDREA sample as a table of 1.5 rows, first_position=1.5 put position p at row
    # p + 1.5, token_key=5 raised TypeError, and '' named nothing, where the command line refuses each
    with pytest.raises(embscope.OptionError) as err:
        embscope.open("sample_checkpoints/andrea", **{argument: value})
    assert str(err.value) == said and err.value.option == argument
