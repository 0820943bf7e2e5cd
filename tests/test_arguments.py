"""No traceback from any argument: every number option of every command (found by walking the command
line, so a new option is covered without a word here), and the options and arguments that carry numbers
in text (--rows, --pairs, --size, --ids), refuse NaN, infinities, digits of other scripts, numbers of
thousands of digits, negatives and empty values in one line; a number that is only very large either
answers or is refused, never a traceback."""

from __future__ import annotations

import pytest
import typer
from conftest import invoke

from embscope.cli import COMMANDS, app
from embscope.sample import default_checkpoint

BAD = ["nan", "NaN", "inf", "-inf", "1e999", "\u00b2", "\u0663", "\uff13", "1_0", "", "0x10", "9" * 5000, "-1"]
HUGE = str(2**63 - 1)  # the largest number accepted: valid, so the command must answer or refuse it in one line
NUMBER_TYPES = ("int", "int range", "float", "float range")


def base_args(command: str, tmp_path) -> list[str]:
    """What makes each command valid on the bundled sample, so that only the option under test can fail."""
    sample = str(default_checkpoint())
    return {"similarity": ["dog", "cat"], "neighbors": ["dog"], "analogy": ["king", "man", "woman"],
            "compare": [sample, sample], "export": ["--out", str(tmp_path / "export")],
            "report": ["--out", str(tmp_path / "report.html")]}.get(command, [])


def number_options() -> list[tuple[str, str]]:
    """(command, option) for every number option of every command, as the command line declares them."""
    commands = typer.main.get_command(app).commands
    return [(name, param.opts[0]) for name in COMMANDS for param in commands[name].params
            if param.param_type_name == "option" and param.type.name in NUMBER_TYPES]


def first_of_each() -> list[tuple[str, str]]:
    """One command per option name, for the runs of the whole command line (the walk below covers the rest)."""
    seen: dict[str, str] = {}
    for command, option in number_options():
        seen.setdefault(option, command)
    return [(command, option) for option, command in seen.items()]


def one_line_refusal(result, code: int) -> None:
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.splitlines()
    assert lines[0].startswith("Error: ") and len(lines[0]) < 400, lines[:1]
    assert len(lines) == (2 if code == 2 else 1) and "Traceback" not in result.stderr


def test_the_walk_finds_the_number_options():
    found = number_options()
    assert {("neighbors", "-k"), ("norms", "--dpi"), ("norms", "--threshold"), ("compare", "--sample"),
            ("export", "--top-norms"), ("info", "--vocab-size"), ("report", "--context")} <= set(found)
    assert len(found) >= 3 * len(COMMANDS)  # --vocab-size, --d-model and --context on every command


def test_every_number_option_of_every_command_refuses_what_is_not_a_number():
    """Each option's type as the group hands it to the parser (resolve_command makes it strict), fed each value."""
    group = typer.main.get_command(app)
    for name in COMMANDS:
        ctx = group.make_context("embscope", [name], resilient_parsing=True)
        _, command, _ = group.resolve_command(ctx, [name])
        for param in command.params:
            if param.param_type_name != "option" or param.type.name not in NUMBER_TYPES:
                continue
            for value in BAD:
                with pytest.raises(typer.BadParameter):
                    param.type.convert(value, param, ctx)
                    pytest.fail(f"{name} {param.opts[0]} took {value[:20]!r}")
            assert param.type.convert("12", param, ctx) == 12  # a number still reads as one


@pytest.mark.parametrize("command, option", first_of_each())
def test_the_command_line_refuses_them_in_one_line(command, option, tmp_path):
    for value in ("nan", "\u00b2", "9" * 5000, "-1"):
        result = invoke(command, *base_args(command, tmp_path), option, value)
        one_line_refusal(result, 2)
        assert option in result.stderr.splitlines()[0], (value, result.stderr)


@pytest.mark.parametrize("command, option", first_of_each())
def test_a_number_of_the_most_digits_answers_or_is_refused_in_one_line(command, option, tmp_path):
    result = invoke(command, *base_args(command, tmp_path), option, HUGE)
    if result.exit_code:
        one_line_refusal(result, result.exit_code)
    else:
        assert "Traceback" not in result.stderr


@pytest.mark.parametrize("args, code", [
    (["export", "--out", "{tmp}/e", "--rows", "{value}"], 2),
    (["positions", "--pairs", "1:{value}"], 2),
    (["norms", "--plot", "{tmp}/n.png", "--size", "{value}x5"], 2),
    # ids are the command's words: a word that is no id is an input error (1), one that reads as an option (-inf) a
    # usage error (2)
    (["similarity", "--ids", "{value}", "3"], None),
    (["neighbors", "--ids", "{value}"], None),
    (["analogy", "--ids", "1", "2", "{value}"], None),
])
def test_numbers_written_in_text_refuse_what_is_not_a_number(args, code, tmp_path):
    for value in BAD + [HUGE + "9"]:
        filled = [a.format(tmp=tmp_path, value=value) for a in args]
        result = invoke(*filled)
        one_line_refusal(result, code or (2 if value.startswith("-") else 1))


def test_r08_cases_are_usage_errors(tmp_path):
    """The three values of the round-three report, as typed there."""
    for args, option in ((["norms", "--plot", str(tmp_path / "n.png"), "--dpi", "nan"], "--dpi"),
                         (["export", "--out", str(tmp_path / "e1"), "--rows", "\u00b2"], "--rows"),
                         (["export", "--out", str(tmp_path / "e2"), "--rows", "9" * 5000], "--rows")):
        result = invoke(*args)
        one_line_refusal(result, 2)
        assert result.stderr.startswith(f"Error: Invalid value for '{option}'")
