"""What the user types reaches embscope whole, and comes back bounded (issue 33, round five): a word typed under a
locale that is not UTF-8 (LC_ALL=POSIX, as cron and minimal containers run) is looked up as the word it is, and a
refusal that quotes what was typed (20,000 extra arguments) is still one line of bounded length."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cosine, invoke

from embscope.core.errors import TokenError
from embscope.core.text import TEXT_SHOWN
from embscope.lookup import typed_word
from embscope.sample import default_checkpoint

ROOT = Path(__file__).resolve().parents[1]
HF = ROOT / "sample_checkpoints" / "hf"


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[bytes]:
    """The command line in a process of its own, under the locale given: argv is decoded as that locale says."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    full.pop("PYTHONIOENCODING", None)
    return subprocess.run([sys.executable, "-m", "embscope", *args], capture_output=True, env=full, timeout=300,
                          check=False)


def test_a_word_typed_under_the_posix_locale_is_the_word_typed():
    posix = cli("similarity", "café", "naïve", "--json", "-c", str(HF), LC_ALL="POSIX", PYTHONUTF8="0")
    assert posix.returncode == 0 and posix.stderr == b"", posix.stderr
    utf8 = cli("similarity", "café", "naïve", "--json", "-c", str(HF), LC_ALL="C.UTF-8")
    assert utf8.returncode == 0, utf8.stderr
    found, expected = json.loads(posix.stdout)["pairs"][0], json.loads(utf8.stdout)["pairs"][0]
    assert found == expected and (found["a"], found["b"]) == ("café", "naïve")
    # the cosine is that of the mean rows of the ids named, worked out here from the table itself
    from safetensors.numpy import load_file
    table = load_file(str(HF / "model.safetensors"))["wte.weight"]
    a, b = table[found["a_ids"]].mean(axis=0), table[found["b_ids"]].mean(axis=0)
    assert found["cosine"] == pytest.approx(cosine(a, b), abs=1e-6)
    assert len(found["a_ids"]) >= 2  # 'é' is two UTF-8 bytes the tokenizer has: the word was not cut at it


def test_bytes_that_are_not_utf8_are_refused_as_such():
    done = cli("similarity", os.fsdecode(b"\xff\xfe"), "cat", "-c", str(HF), LC_ALL="POSIX",
               PYTHONUTF8="0")
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 1 and len(lines) == 1, lines
    assert lines[0].startswith("Error: expected a word in UTF-8") and "not UTF-8" in lines[0]


def test_typed_word_restores_the_bytes_of_surrogate_escapes():
    assert typed_word("caf\udcc3\udca9") == "café"
    assert typed_word("plain") == "plain"
    with pytest.raises(TokenError, match="not UTF-8"):
        typed_word("\udcff")


def test_a_refusal_quoting_twenty_thousand_arguments_is_one_bounded_line():
    words = [str(i) for i in range(20_000)]
    result = invoke("neighbors", *words, "-c", default_checkpoint())
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0].startswith("Error: Got unexpected extra argument")
    assert len(lines) == 2 and lines[1].startswith("Usage:")  # the usage line, as for every usage error
    assert len(lines[0]) < TEXT_SHOWN + 100
    assert "(108,8" in lines[0] or "characters)" in lines[0]  # the cut is said, with the length
