"""No crash on any input: mutated small files of every format either open and give norms, or
raise an EmbscopeError (which the CLI turns into exit code 1). Any other exception is a bug.

The README's test command runs short budgets; CI runs this file again with EMBSCOPE_FUZZ_BUDGET=full (a step of
its own in .ci/run), and the longer run is tests/fuzz/run_fuzz.py."""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import warnings
from pathlib import Path

import corpus
import pytest
import target
from conftest import invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from embscope.core.errors import EmbscopeError

FULL = os.environ.get("EMBSCOPE_FUZZ_BUDGET") == "full"
MUTANTS = 30 if FULL else 5  # hypothesis examples per format
MUTANT_SEEDS = 3 if FULL else 2  # mutants per format through the CLI: one and two mutations
PICKLE_PROGRAMS = 1400  # inputs of the pickle family (full budget only): a seventh for each of its seven inputs
TOKENIZER_KINDS = 700  # inputs of the tokenizer-kinds family (full budget only): a seventh for each of its seven kinds

mutation_ops = st.lists(st.tuples(st.sampled_from(corpus.MUTATIONS), st.integers(0, 2**32 - 1)), min_size=1, max_size=4)


def apply(data: bytes, ops, fix_length: bool) -> bytes:
    out = bytearray(data)
    for mutation, seed in ops:
        mutation(out, random.Random(seed))
    if fix_length:
        corpus.fix_safetensors_length(out)
    return bytes(out)


@pytest.mark.parametrize("name", list(corpus.SAMPLES))
def test_every_valid_sample_opens(name, tmp_path):
    """The unmutated samples are valid, so the mutants start from files that work."""
    entry, _ = corpus.SAMPLES[name].build(tmp_path)
    assert target.exercise(entry) == "ok"


@pytest.mark.parametrize("name", list(corpus.SAMPLES))
@settings(max_examples=MUTANTS, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(ops=mutation_ops, fix_length=st.booleans())
def test_mutated_file_gives_result_or_embscope_error(name, ops, fix_length):
    with tempfile.TemporaryDirectory() as directory:
        sample = corpus.SAMPLES[name]
        entry, victim = sample.build(Path(directory))
        victim.write_bytes(apply(victim.read_bytes(), ops, fix_length))
        if sample.after is not None:
            sample.after(entry, victim)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                target.exercise(entry)
            except EmbscopeError as err:
                assert str(err) and "\n" not in str(err)  # one line for the user


def test_cli_exits_1_with_one_line_on_a_damaged_file(tmp_path):
    entry, victim = corpus.SAMPLES["npz-compressed"].build(tmp_path)
    victim.write_bytes(victim.read_bytes()[:-30])  # the zip's central directory cut short
    result = invoke("info", "-c", entry)
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: ") and result.output.count("\n") == 1
    assert "Traceback" not in result.output


def test_file_that_shrinks_after_opening_is_an_error_not_a_crash(tmp_path):
    """The catalogue is read from the header; if the file is cut before the data is mapped,
    the read is refused with the sizes rather than failing inside numpy's mmap."""
    from embscope.formats import open_checkpoint
    from embscope.roles import find_tables
    entry, _ = corpus.SAMPLES["safetensors"].build(tmp_path)
    checkpoint = open_checkpoint(entry)
    tables = find_tables(checkpoint)
    with open(entry, "r+b") as f:
        f.truncate(entry.stat().st_size - 16)
    with pytest.raises(EmbscopeError, match=r"expected \d+ bytes of data at offset \d+, the file holds \d+ bytes"):
        _ = tables.token.array


@pytest.mark.parametrize("name", list(corpus.SAMPLES))
def test_cli_on_mutated_files_exits_0_or_1_with_one_line(name, tmp_path):
    """The commands themselves, not only the library: rendering, JSON and the tokenizer note included."""
    for seed in range(MUTANT_SEEDS):
        directory = tmp_path / str(seed)
        directory.mkdir()
        entry = corpus.build_mutant(corpus.SAMPLES[name], directory, seed=7919 * seed + 1, count=1 + seed % 2)
        for args in (["info"], ["norms", "--table", "token", "--json"]):
            result = invoke(*args, "-c", entry)
            assert result.exit_code in (0, 1), (args, seed, result.output, result.exception)
            if result.exit_code == 1:
                assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1, result.stderr
            elif "--json" in args:
                json.loads(result.stdout, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))


# run_fuzz's child per input name costs 0.7 s of CPU however few its inputs (seven names: five seconds): the README's
# command runs hostile pickles in every container in-process (tests/test_hostile_pickles.py) and the harness's checks
# below (fd 2, one-line refusals); the full budget runs the generator under the caps (and CI 50,000 a family)
@pytest.mark.skipif(not FULL, reason="runs with the full fuzz budget (EMBSCOPE_FUZZ_BUDGET=full, CI's step)")
def test_short_fuzz_of_pickle_programs_in_every_container():
    """The structure-aware pickle generator, programs over the five pickle containers (and mutants of real
    pickles; 1,400 inputs in CI's full budget), each input under run_fuzz's caps: no crash, hang, slow input or
    input over the memory cap. The long run (100,000 per family) is `tests/fuzz/run_fuzz.py -n 100000`."""
    import subprocess
    script = Path(__file__).resolve().parent / "fuzz" / "run_fuzz.py"
    done = subprocess.run([sys.executable, str(script), "-f", "pickle", "-n", str(PICKLE_PROGRAMS), "--seed", "7"],
                          capture_output=True, text=True, timeout=240, check=False)
    summary = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 0, (summary, done.stderr[-3000:])
    assert summary == f"ALL: 1 families, tried {PICKLE_PROGRAMS}, crash 0, hang 0, slow 0, over memory cap 0, stderr 0"
    per_container = PICKLE_PROGRAMS // 7  # run_fuzz gives each input a seventh: five containers, two real pickles
    assert all(f"pickle-program-{name}: tried {per_container}," in done.stdout
               for name in ("pkl", "npy-object", "npz-object", "torch-zip", "torch-legacy"))


# run_fuzz's child per sample costs 0.7 s of CPU however few its inputs: the README's command fuzzes these formats
# in-process (above), and the full budget runs them under the caps (CI also runs 100,000 a family, .ci/run)
@pytest.mark.skipif(not FULL, reason="runs with the full fuzz budget (EMBSCOPE_FUZZ_BUDGET=full, CI's step)")
def test_short_fuzz_of_the_formats_read_through_foreign_libraries():
    """The h5, GGUF and ONNX mutation fuzzers, 100 inputs per family under run_fuzz's caps
    (an address-space cap, a time limit per input, a hang limit): no crash, hang, slow input or input over the cap.
    CI runs 100,000 per family with the same seed (.ci/run)."""
    import subprocess
    script = Path(__file__).resolve().parent / "fuzz" / "run_fuzz.py"
    done = subprocess.run([sys.executable, str(script), "-f", "h5", "-f", "gguf", "-f", "onnx",
                           "-n", "100", "--seed", "1"], capture_output=True, text=True, timeout=240, check=False)
    summary = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 0, (summary, done.stderr[-3000:])
    assert summary == "ALL: 3 families, tried 310, crash 0, hang 0, slow 0, over memory cap 0, stderr 0"  # 100 per family,
    # spread over its samples (12 for each of the nine h5 ones, 50 for each GGUF one, 34 for each of the three ONNX ones)


# seven tokenizer kinds, a child each (five seconds of CPU): the README's command reads fd 2 of the native ones in
# tests/test_native_stderr.py and checks the harness's fd-2 count below; the full budget runs these under the caps
@pytest.mark.skipif(not FULL, reason="runs with the full fuzz budget (EMBSCOPE_FUZZ_BUDGET=full, CI's step)")
def test_short_fuzz_of_the_tokenizer_kinds_with_stderr_read():
    """SentencePiece models, a Unigram tokenizer.json with a Precompiled charsmap, .tiktoken, vocab.txt and
    meta.pkl (tests/fuzz/tokenizer_samples.py), each input with fd 2 read: a library that prints there (round
    four's r01, 187 of 1,500 Precompiled mutants printed a Rust panic) is a fault, as is a refusal of more than one
    line. CI runs 100,000 of each family (.ci/run)."""
    import subprocess
    script = Path(__file__).resolve().parent / "fuzz" / "run_fuzz.py"
    done = subprocess.run([sys.executable, str(script), "-f", "tokenizer-kinds", "-n", str(TOKENIZER_KINDS),
                           "--seed", "3"], capture_output=True, text=True, timeout=600, check=False)
    summary = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 0, (summary, done.stderr[-3000:])
    assert summary == f"ALL: 1 families, tried {TOKENIZER_KINDS}, crash 0, hang 0, slow 0, over memory cap 0, stderr 0"


def test_the_harness_counts_what_a_library_prints_on_fd_2():
    """The check can fail: output on fd 2 during an input, or a refusal of two lines, is a fault."""
    import run_fuzz
    with run_fuzz.fd2.capture() as printed:
        os.write(2, b"thread '<unnamed>' panicked at normalizers/mod.rs:143\n")
    assert printed.text.startswith("thread '<unnamed>' panicked")
    assert run_fuzz.stderr_fault(printed.text, None).startswith("thread")
    assert run_fuzz.stderr_fault("", EmbscopeError("one line")) == ""
    assert run_fuzz.stderr_fault("", EmbscopeError("two\nlines")).startswith("a refusal of 2 lines")
