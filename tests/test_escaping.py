"""Untrusted names are escaped: tensor names, file names and token strings holding control
characters, rich markup, emoji codes or lone surrogates print safely on the console and stay
exact in JSON."""

from __future__ import annotations

import io
import json
import struct

import numpy as np
import pytest
from conftest import run
from rich.console import Console

from embscope.core.text import printable, quote, visible
from embscope.render import console, jsonout

# ESC [2J clears the screen, \r returns the cursor, \x07 rings the bell, U+202E reverses the text
# that follows, \x9b is the 8-bit CSI, \udcff is what a name that was not UTF-8 decodes to
HOSTILE = "\x1b[2J[bold red]x[/]\r\x07:thumbs_up:\u202e\x9b\udcff"
TERMINAL_ACTORS = ("\x1b", "\r", "\x07", "\u202e", "\x9b", "\udcff")


def hostile_safetensors(path, name: str, offsets=(0, 16)):
    """A safetensors file by hand: json.dumps spells the odd characters as \\u escapes, as the format allows."""
    header = json.dumps({name: {"dtype": "F32", "shape": [2, 2], "data_offsets": list(offsets)}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + struct.pack("<4f", 1.0, 0.0, 0.0, 2.0))
    return path


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    """Names are long: a wide console keeps each on one line, so the tests can look for it."""
    monkeypatch.setattr(console.out, "_width", 400)


def assert_inert(text: str):
    for ch in TERMINAL_ACTORS:
        assert ch not in text, f"{ch!r} reached the terminal"


def test_printable_escapes_every_character_that_acts_on_a_terminal():
    assert printable(HOSTILE) == "\\x1b[2J[bold red]x[/]\\r\\x07:thumbs_up:\\u202e\\x9b\\udcff"
    assert printable("dog été 狗 🐕") == "dog été 狗 🐕"  # printable text is left alone


def test_quote_escapes_once():
    assert quote("a\x1bb") == "'a\\x1bb'"  # one backslash, not two
    assert quote("[red]x") == "'[red]x'"  # markup is console.safe's job, done once on the whole line


def test_safe_shows_markup_and_emoji_codes_as_written():
    buffer = io.StringIO()
    Console(file=buffer, width=200, emoji=False).print(f"[bold]{console.safe(HOSTILE)}[/bold]")
    assert buffer.getvalue() == printable(HOSTILE) + "\n"
    buffer = io.StringIO()
    console.out.file = buffer  # the real console object: its emoji setting matters too
    try:
        console.out.print("[bold]" + console.safe(":thumbs_up: [red]x[/red]\\") + "[/bold]")  # a backslash before a tag
    finally:
        console.out.file = None
    assert buffer.getvalue() == ":thumbs_up: [red]x[/red]\\\n"


def test_info_console_escapes_a_hostile_tensor_name(tmp_path):
    path = hostile_safetensors(tmp_path / "model.safetensors", HOSTILE + ".wte.weight")
    result = run("info", "-c", path)
    assert_inert(result.stdout)
    assert "\\x1b[2J[bold red]x[/]\\r\\x07:thumbs_up:\\u202e\\x9b\\udcff.wte.weight" in result.stdout
    assert "👍" not in result.stdout


def test_info_json_keeps_a_hostile_tensor_name_exact(tmp_path):
    name = HOSTILE + ".wte.weight"
    path = hostile_safetensors(tmp_path / "model.safetensors", name)
    result = run("info", "-c", path, "--json")
    assert_inert(result.stdout)
    assert json.loads(result.stdout)["tables"]["token"]["name"] == name


def test_hostile_file_name_is_escaped_in_info_and_exact_in_json(tmp_path):
    path = hostile_safetensors(tmp_path / "m\x1b[2J\x07[red]x.safetensors", "wte")
    result = run("info", "-c", path)
    assert_inert(result.stdout)
    assert "m\\x1b[2J\\x07[red]x.safetensors" in result.stdout
    assert json.loads(run("info", "-c", path, "--json").stdout)["checkpoint"] == str(path)


def test_error_naming_a_hostile_tensor_is_one_escaped_line(tmp_path):
    path = hostile_safetensors(tmp_path / "model.safetensors", HOSTILE, offsets=(0, 999))
    result = run("info", "-c", path, code=1)
    assert result.stdout == ""
    assert_inert(result.stderr)
    assert result.stderr == (f"Error: {quote(path)}: tensor "
                             "'\\x1b[2J[bold red]x[/]\\r\\x07:thumbs_up:\\u202e\\x9b\\udcff': "
                             "data_offsets '[0, 999]' lie outside the 16 data bytes\n")


def test_error_echoing_a_hostile_key_from_the_command_line(tmp_path):
    path = hostile_safetensors(tmp_path / "model.safetensors", "wte")
    result = run("info", "-c", path, "--token-key", "\x1b]0;pwned\x07[blink]", code=1)
    assert_inert(result.stderr)
    assert result.stderr == "Error: expected a tensor named '\\x1b]0;pwned\\x07[blink]' for the token table, found none\n"


@pytest.mark.parametrize("text", [HOSTILE, "\U000e0001tag", "🐕 dog", "\x7f", "line\u2028break"])
def test_json_strings_round_trip_exactly_and_only_printable_characters_are_raw(text):
    out = jsonout.dumps({"name": text, "nan": float("nan")})
    assert json.loads(out) == {"name": text, "nan": None}
    assert all(ch.isprintable() for ch in out)
    if text == "🐕 dog":
        assert "🐕" in out  # readable tokens stay readable


# -- token strings from a tokenizer file -------------------------------------------------------------

HOSTILE_TOKENS = ["\x1b[2J", "[bold red]x[/]", "\r\x07bell", ":thumbs_up:", "\u202eevil"]


@pytest.fixture
def hostile_tokens(tmp_path):
    """A Harris tokenizer whose segments (ids 257..261) are hostile strings, and a table whose rows
    for them are zero, so that norms lists them as anomalies by their token strings."""
    from safetensors.numpy import save_file
    table = np.random.default_rng(4).standard_normal((270, 4)).astype(np.float32)
    table[257:262] = 0.0
    save_file({"wte": table}, str(tmp_path / "model.safetensors"))
    (tmp_path / "harris_segments.json").write_text(json.dumps(HOSTILE_TOKENS), encoding="utf-8")
    return tmp_path / "model.safetensors"


@pytest.mark.parametrize("command", [("norms", "--table", "token"), ("undertrained",)])
def test_console_escapes_token_strings(hostile_tokens, command):
    result = run(*command, "-c", hostile_tokens)
    assert_inert(result.stdout)
    for token in HOSTILE_TOKENS:
        assert visible(token) in result.stdout  # printable, with spaces shown as the symbol for space
    assert "👍" not in result.stdout


def test_norms_json_keeps_token_strings_exact(hostile_tokens):
    result = run("norms", "--table", "token", "-c", hostile_tokens, "--json")
    assert_inert(result.stdout)
    labels = {a["index"]: a["label"] for a in json.loads(result.stdout)["anomalies"]}
    assert [labels[257 + i] for i in range(len(HOSTILE_TOKENS))] == HOSTILE_TOKENS


def test_similarity_console_and_json_with_hostile_tokens(hostile_tokens):
    result = run("similarity", "--ids", "257", "258", "259", "-c", hostile_tokens)
    assert_inert(result.stdout)
    assert "\\x1b[2J" in result.stdout and "[bold red]x[/]" in result.stdout
    doc = json.loads(run("similarity", "--ids", "257", "258", "-c", hostile_tokens, "--json").stdout)
    assert doc["pairs"][0]["a_tokens"] == [HOSTILE_TOKENS[0]] and doc["pairs"][0]["b_tokens"] == [HOSTILE_TOKENS[1]]
