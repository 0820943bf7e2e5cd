"""Hostile tokenizer files (reproducers r06-r09 and r19 in shared/attacks): each is refused or
stopped with one line. Anything that could hang or allocate if the guard failed runs in a child process
under a memory and a time limit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import write_minbpe

from embscope.core.errors import CheckpointError, EmbscopeError, TokenError
from embscope.tokenizers import find_tokenizer, load_tokenizer
from embscope.tokenizers.split import compile_split_pattern

ROOT = Path(__file__).resolve().parents[1]
# r07: (?:(?:(?:(?:(?:.*)*)*)*)*)*X takes forever in re; regex sees through it, but not through this one
REGEX_BACKTRACKER = r"(?:(a+)\1)+b"


def run_limited(code: str, memory_bytes: int = 1_500_000_000, seconds: int = 30) -> subprocess.CompletedProcess:
    """Python code in a child with its address space and CPU time capped, so a failed guard cannot hurt."""
    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds))

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=seconds * 2,
                          preexec_fn=limit, env=env, cwd=ROOT, check=False)


LOAD_AND_ENCODE = """
import sys
from embscope.core.errors import EmbscopeError
from embscope.tokenizers import load_tokenizer
try:
    print(load_tokenizer(sys.argv[1] if len(sys.argv) > 1 else {path!r}).encode({text!r}))
except EmbscopeError as err:
    print("error:", err)
"""


def test_doubling_merges_are_refused_before_they_allocate(tmp_path):
    # r06: merge i joins id 255+i with itself, so piece 256+i has 2**(i+1) bytes: 40 merges would take 2 TB
    path = write_minbpe(tmp_path / "tokenizer.model", "", [(97, 97)] + [(256 + k, 256 + k) for k in range(39)])
    done = run_limited(LOAD_AND_ENCODE.format(path=str(path), text="aaaa"))
    assert done.stdout.strip() == (
        "error: expected tokens of at most 1024 bytes in tokenizer.model, found merge 10 (265 265) making one "
        "of 2,048 bytes"
    ), done.stderr


def test_catastrophic_split_pattern_is_stopped(tmp_path):
    # r07: the pattern backtracks for ever on a run of a's; regex's timeout stops it, Ctrl-C would too
    pytest.importorskip("regex")
    path = write_minbpe(tmp_path / "tokenizer.model", REGEX_BACKTRACKER, [])
    code = "import embscope.tokenizers.split as s; s.MATCH_TIMEOUT_S = 0.2\n" + LOAD_AND_ENCODE.format(
        path=str(path), text="a" * 300)
    done = run_limited(code)
    assert done.stdout.strip() == (
        "error: the split pattern in tokenizer.model took over 0.203 s on 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' "
        "and was stopped: it backtracks without end, so this tokenizer cannot encode text"
    ), done.stderr


@pytest.mark.parametrize(("pattern", "reason"), [
    (r"(?:(?:(?:(?:(?:.*)*)*)*)*)*X", "nests one repeat inside another"),
    (r"(a|aa)*X", "repeats an alternation"),
    (r"(a)\1", "uses a back-reference"),
    (r"\w*\s*X", "has 2 repeats in one sequence"),
])
def test_without_regex_risky_patterns_are_refused(tmp_path, monkeypatch, pattern, reason):
    monkeypatch.setitem(sys.modules, "regex", None)
    with pytest.raises(EmbscopeError) as err:
        load_tokenizer(write_minbpe(tmp_path / "t.model", pattern, []))
    assert str(err.value) == (
        f"the split pattern in t.model {reason}, which Python's re could take forever to match; "
        "matching it safely needs the 'regex' package (pip install 'embscope[regex]')"
    )


def test_patterns_of_bounded_shape_run_in_re():
    # nlm's, the sample's, and GPT-2's without \p: one repeat per alternative, nothing nested
    for pattern in (r"\w+|\s|[^\w\s]+", r" |[A-Za-z]+|[0-9]+|\n+|[^A-Za-z0-9 \n]+", r"'s|'t| ?\w+|\s+(?!\S)|\s+"):
        assert compile_split_pattern(pattern, "t.model").engine == "re"
    pytest.importorskip("regex")
    assert compile_split_pattern(REGEX_BACKTRACKER, "t.model").engine == "regex"


def test_a_text_the_two_engines_cut_apart_differently_is_refused(monkeypatch):
    """minbpe splits with regex, nlm's trainer with re, into the same file: where \\w, \\s or \\d make them cut a
    text apart differently ('x²': re's \\w takes '²', regex's does not), neither cut is given. Text both cut
    alike is cut so, by re."""
    import re

    import regex

    pattern = r"\w+|\s|[^\w\s]+"
    split = compile_split_pattern(pattern, "t.model")
    assert split.engine == "re"
    for text in ("dog bites", "naïve café", "日本語 text", "a\tb\n"):  # where both agree
        assert split.chunks(text) == re.findall(pattern, text) == regex.findall(pattern, text)
    for text in ("x²", "cafe\u0301", ":\x1f", "👩\u200d💻"):
        assert re.findall(pattern, text) != regex.findall(pattern, text)
        with pytest.raises(TokenError, match=r"^the split pattern in t\.model cuts .* one way in Python's re and "
                                             r"another in the regex package \(minbpe's\)"):
            split.chunks(text)
    # without regex, nothing can tell: only text of the characters both read alike is cut
    monkeypatch.setitem(sys.modules, "regex", None)
    split = compile_split_pattern(pattern, "t.model")
    assert split.chunks("dog bites, 42 times") == re.findall(pattern, "dog bites, 42 times")
    for text in ("naïve", ":\x1f"):
        with pytest.raises(TokenError, match="needs the 'regex' package"):
            split.chunks(text)
    # a pattern of characters named one by one means the same in both: nothing is refused
    assert compile_split_pattern(r" |[A-Za-z]+|[0-9]+|\n+|[^A-Za-z0-9 \n]+", "t.model").chunks("x²") == ["x", "²"]


COUNTED_REPEATS_REFUSED = (
    "expected the counted repeats ({m,n}) of the split pattern in tokenizer.model to multiply to at most "
    "100,000, found more"
)


def test_repeat_count_too_big(tmp_path):
    # r09: re raises OverflowError, not re.error, on a{4294967296}
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(write_minbpe(tmp_path / "tokenizer.model", "a{4294967296}", [(97, 97)]))
    assert str(err.value) == COUNTED_REPEATS_REFUSED


def test_nested_counted_repeats_are_refused_before_they_unroll(tmp_path):
    # regex unrolls counted repeats as it compiles: this 27-byte pattern would take gigabytes
    path = write_minbpe(tmp_path / "tokenizer.model", "(?:(?:a{1000}){1000}){1000}", [(97, 97)])
    done = run_limited(LOAD_AND_ENCODE.format(path=str(path), text="a"))
    assert done.stdout.strip() == "error: " + COUNTED_REPEATS_REFUSED, done.stderr


def test_pattern_too_long_or_too_deep(tmp_path):
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(write_minbpe(tmp_path / "t.model", "a" * 10_001, []))
    assert str(err.value) == "expected a split pattern of at most 10,000 characters in t.model, found 10,001"
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(write_minbpe(tmp_path / "t.model", "(" * 3000 + ")" * 3000, []))
    assert str(err.value).startswith("expected a regular expression as the split pattern in t.model, found '((((")


def test_marker_of_the_wrong_type_in_an_ignored_place(tmp_path):
    # r08: a Metaspace with replacement 5 inside a Fuse decoder's extra "decoders" key, which the library ignores
    pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer, models

    hf = Tokenizer(models.WordLevel({"[UNK]": 0, "dog": 1}, unk_token="[UNK]"))
    hf.save(str(tmp_path / "tokenizer.json"))
    doc = json.loads((tmp_path / "tokenizer.json").read_text())
    doc["decoder"] = {"type": "Fuse", "decoders": [{"type": "Metaspace", "replacement": 5}]}
    (tmp_path / "tokenizer.json").write_text(json.dumps(doc))
    tokenizer = load_tokenizer(tmp_path / "tokenizer.json")
    assert tokenizer.token_string(1) == "dog"


def test_bpe_merges_checked_however_the_type_is_spelled(tmp_path, capfd):
    # the library panics on a merge making a token outside the vocabulary; "\\u0042PE" is "BPE" to it too
    pytest.importorskip("tokenizers")
    model = '{"type": "\\u0042P\\u0045", "vocab": {"a": 0, "bcd": 1}, "merges": [["a", "bcd"]]}'
    (tmp_path / "tokenizer.json").write_text('{"version": "1.0", "added_tokens": [], "model": ' + model + "}")
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(tmp_path / "tokenizer.json")
    assert str(err.value) == ("expected merge 0 of tokenizer.json ('a' + 'bcd') to make a token of the vocabulary, "
                              "found 'abcd' missing")
    assert "panicked" not in capfd.readouterr().err


def test_bpe_merges_checked_when_the_type_is_left_out(tmp_path, capfd):
    # the library builds a BPE from a model with vocab and merges and no "type": it would panic the same way
    pytest.importorskip("tokenizers")
    model = '{"vocab": {"a": 0, "b": 1}, "m\\u0065rges": ["a b"]}'
    (tmp_path / "tokenizer.json").write_text('{"version": "1.0", "added_tokens": [], "model": ' + model + "}")
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(tmp_path / "tokenizer.json")
    assert str(err.value) == ("expected merge 0 of tokenizer.json ('a' + 'b') to make a token of the vocabulary, "
                              "found 'ab' missing")
    assert "panicked" not in capfd.readouterr().err


@pytest.mark.parametrize(("name", "document", "message"), [
    ("merges.json", {"merges": [[97, 98]], "special_tokens": {"\udcff": 300}},
     "expected the special token with id 300 in merges.json to be text, found '\\udcff', which holds a lone surrogate"),
    ("harris_segments.json", ["dog", "\udcff"],
     "expected segment 1 in harris_segments.json to be text, found '\\udcff', which holds a lone surrogate"),
])
def test_lone_surrogates_are_refused(tmp_path, name, document, message):
    # r19: JSON can spell "\udcff", which no writer can print
    (tmp_path / name).write_text(json.dumps(document))
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(tmp_path / name)
    assert str(err.value) == message


def test_gpt2_vocabulary_with_a_lone_surrogate(tmp_path):
    (tmp_path / "vocab.json").write_text(json.dumps({"a": 0, "\udcff": 1}))
    (tmp_path / "merges.txt").write_text("#version: 0.2\n")
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(tmp_path / "vocab.json")
    assert str(err.value) == (
        "expected the token with id 1 in vocab.json to be text, found '\\udcff', which holds a lone surrogate"
    )


def test_token_strings_are_always_text(tmp_path):
    """Every id of every byte-level kind names valid text: bytes that are not UTF-8 are escaped."""
    path = write_minbpe(tmp_path / "t.model", "", [(0xE2, 0x80), (256, 0x94), (0xFF, 0xFE)])
    tokenizer = load_tokenizer(path)
    strings = [tokenizer.token_string(id) for id in range(tokenizer.vocab_size)]
    assert all(string.encode("utf-8") for string in strings)
    assert strings[256:] == ["\\xe2\\x80", "—", "\\xff\\xfe"]


def test_paths_that_are_not_files(tmp_path):
    fifo = tmp_path / "tokenizer.json"
    os.mkfifo(fifo)
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(fifo)  # opening a FIFO would block for ever
    assert str(err.value) == f"expected a tokenizer file at {fifo}, found something that is not a regular file"
    with pytest.raises(CheckpointError) as err:  # found by its name, and said, not taken for no tokenizer
        find_tokenizer(tmp_path)
    assert str(err.value) == f"expected a tokenizer file at {fifo}, found something that is not a regular file"
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(tmp_path / ("a" * 5000))
    assert str(err.value).endswith(": File name too long")


def test_unused_ids_raise_token_error(tmp_path):
    # r20: ids between the merges and a special token far above them name no token
    path = tmp_path / "tokenizer.model"
    path.write_text("minbpe v1\n\n1\n<|endoftext|> 400\n104 101\n256 108\n257 108\n")
    tokenizer = load_tokenizer(path)
    assert tokenizer.vocab_size == 401 and tokenizer.token_string(400) == "<|endoftext|>"
    with pytest.raises(TokenError) as err:
        tokenizer.token_string(300)
    assert str(err.value) == "token id 300 is not used by the byte-bpe tokenizer tokenizer.model"
