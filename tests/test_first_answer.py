"""A question about a few rows is answered without numpy: rows decoded in plain Python, the cached baseline
read without numpy, and the same numbers as the numpy path."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest
from byte_tokenizer import ByteWordTokenizer

import embscope
from embscope import cache
from embscope.analysis import similarity as similarity_module
from embscope.formats._rows import buffer_rows, decode, file_rows

SPECIAL = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-40, 1e39, -1e39, 1e-50, 65504.0, 7e4]


def values(seed: int = 0, count: int = 64) -> np.ndarray:
    found = np.random.default_rng(seed).standard_normal(count) * 100
    found[:len(SPECIAL)] = SPECIAL
    return found


@pytest.mark.parametrize("name, code", [("float32", "f4"), ("float64", "f8"), ("float16", "f2")])
@pytest.mark.parametrize("order", ["<", ">"])
def test_decode_gives_what_numpy_reads(name, code, order):
    with np.errstate(over="ignore"):  # 1e39 is beyond float16 and float32: inf, in numpy as in Python
        stored = values().astype(order + code)
        expected = stored.astype(np.float32).astype(np.float64)
    assert np.array_equal(np.array(decode(stored.tobytes(), name, order)), expected, equal_nan=True)


@pytest.mark.parametrize("order", ["<", ">"])
def test_decode_bfloat16_is_the_top_half_of_a_float32(order):
    with np.errstate(over="ignore"):
        bits = (values().astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    expected = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    assert np.array_equal(np.array(decode(bits.astype(order + "u2").tobytes(), "bfloat16", order)), expected,
                          equal_nan=True)


def test_rows_from_a_buffer_and_a_file(tmp_path):
    table = np.random.default_rng(1).standard_normal((6, 5)).astype(np.float32)
    assert buffer_rows(table.tobytes(), "float32", "<", (6, 5))([5, 0, 5]) == table[[5, 0, 5]].tolist()
    assert buffer_rows(table.tobytes()[:-4], "float32", "<", (6, 5)) is None  # bytes that do not hold the table
    assert buffer_rows(table.tobytes(), "int32", "<", (6, 5)) is None  # not a float table: numpy reads it
    path = tmp_path / "rows.bin"
    path.write_bytes(b"header" + table.astype(">f8").tobytes())
    read = file_rows(path, 6, "float64", ">", (6, 5))
    assert read([2, 3]) == table[[2, 3]].tolist()
    assert file_rows(path, 6, "float64", ">", (6, 5), fortran=True) is None
    with pytest.raises(IndexError):
        read([6])
    path.write_bytes(b"header" + table.astype(">f8").tobytes()[:100])  # cut short after it was opened
    with pytest.raises(embscope.CheckpointError, match="the file now ends before them"):
        read([4])


def test_the_rows_each_format_reads_without_numpy_are_the_table(tmp_path):
    from safetensors.numpy import save_file
    table = np.random.default_rng(2).standard_normal((9, 4)).astype(np.float16)
    with open(tmp_path / "model.pkl", "wb") as handle:
        pickle.dump({"params": {"token_emb": table.astype(">f4")}}, handle)
    save_file({"wte.weight": table}, str(tmp_path / "model.safetensors"))
    np.save(tmp_path / "token_emb.npy", table.astype(np.float64))
    for name in ("model.pkl", "model.safetensors", "token_emb.npy"):
        token = embscope.open(tmp_path / name).token
        assert token.tensor.read_rows is not None, name
        assert token.row_values([8, 1]) == token.array[[8, 1]].tolist() == table[[8, 1]].astype(np.float32).tolist()


def test_a_few_pairs_in_python_agree_with_the_numpy_path(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    # rows enough that the 10,000 sampled pairs hardly hold the pairs asked: a cosine one ulp apart from its
    # copy in the sample would move its percentile by the copies' share
    table = rng.standard_normal((3000, 24)).astype(np.float32)
    table[5] = 0.0
    table[6, 3] = np.nan
    np.savez(tmp_path / "model.npz", token_emb=table)
    emb = embscope.open(tmp_path / "model.npz")
    items = [1, 2, 5, 6, 30, 2999]
    few = embscope.similarity(emb, items, ids=True)
    monkeypatch.setattr(similarity_module, "FEW_PAIRS", 0)  # every pair through compute.pair_cosines
    batched = embscope.similarity(emb, items, ids=True)
    assert [q.reason for q in few.queries] == [q.reason for q in batched.queries]
    for a, b in zip(few.pairs, batched.pairs):
        assert (a.reason, a.percentile is None) == (b.reason, b.percentile is None)
        if b.cosine is not None:
            assert a.cosine == pytest.approx(b.cosine, abs=1e-12) and a.percentile == pytest.approx(b.percentile)
    unit = table[1].astype(np.float64) / np.linalg.norm(table[1].astype(np.float64))
    other = table[30].astype(np.float64) / np.linalg.norm(table[30].astype(np.float64))
    assert few.pairs[3].cosine == pytest.approx(float(unit @ other), abs=1e-12)  # (1, 30): worked out here


def test_a_cache_entry_answers_only_for_its_own_description(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cache.store("first", [0.5, -1.0, 2.0], 7)
    assert list(cache.load("first")) == [0.5, -1.0, 2.0]
    assert list(cache.load("first", 7)) == [0.5, -1.0, 2.0]  # computed from a table of the same checksum
    assert cache.load("first", 8) is None  # from another table's bytes
    assert cache.load("second") is None
    cache.entry_path("second").write_bytes(b"first\n" + bytes(8))  # a file name shared by two descriptions
    assert cache.load("second") is None
    cache.entry_path("third").write_bytes(b"third\n" + bytes(7))  # cut short
    assert cache.load("third") is None
    os.mkfifo(cache.entry_path("fourth"))  # planted where an entry would be: not waited on
    assert cache.load("fourth") is None
    written = cache.entry_path("first").read_bytes()
    # description, length + CRC, the table's checksum, values
    assert written[:6] == b"first\n" and len(written) == 6 + 12 + 8 + 3 * 8
    assert int.from_bytes(written[18:26], "little") == 7
    cache.entry_path("first").write_bytes(written[:-8])  # one value lost, the rest still whole values
    assert cache.load("first") is None
    cache.entry_path("first").write_bytes(written[:-1] + b"\x00")  # one byte changed
    assert cache.load("first") is None


def test_similarity_of_two_words_answers_alike_from_the_cache(tmp_path):
    """The second run takes the baseline from the cache the first wrote, and answers the same."""
    script = ("import sys\nsys.argv = ['embscope', 'similarity', 'dog', 'cat', '--json']\n"
              "from embscope.cli import main\n"
              "main()\n")
    env = {k: v for k, v in os.environ.items() if k != "EMBSCOPE_CHECKPOINT"}
    env["XDG_CACHE_HOME"] = str(tmp_path)
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
            for _ in range(2)]
    assert [run.stderr for run in runs] == ["", ""] and any(tmp_path.rglob("*"))
    first, second = (json.loads(run.stdout) for run in runs)
    assert first == second and first["baseline"]["sample_size"] == 10000


@pytest.mark.parametrize("center", [False, True])  # the few-pairs path, and numpy's (no RuntimeWarning)
def test_a_merged_word_of_plus_and_minus_inf_rows_is_a_reason_not_a_crash(tmp_path, center):
    table = np.random.default_rng(4).standard_normal((264, 8)).astype(np.float32)
    table[ord("o"), 2], table[ord("x"), 2] = np.inf, -np.inf  # their mean is NaN; math.fsum raises on inf + -inf
    np.savez(tmp_path / "model.npz", token_emb=table)
    emb = embscope.open(tmp_path / "model.npz")
    emb.tokenizer = ByteWordTokenizer()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (pair,) = embscope.similarity(emb, ["ox", "dog"], center=center).pairs
    assert (pair.cosine, pair.percentile) == (None, None)
    assert pair.reason == "row 111 ('o') holds NaN or Inf"


@pytest.mark.parametrize("args", [["--help"], ["--help", "similarity"], ["--help", "norms", "dog"]])
def test_the_root_help_lists_every_command_whatever_follows_it(args):
    script = "import sys\nfrom embscope.cli import main\nsys.argv = ['embscope', *sys.argv[1:]]\nmain()\n"
    shown = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, check=True).stdout
    assert all(f"\n  {name} " in shown for name in ("info", "similarity", "neighbors", "norms", "export"))


def test_a_fifo_put_in_place_of_the_file_is_refused_not_waited_on(tmp_path):
    import signal
    path = tmp_path / "rows.bin"
    path.write_bytes(np.ones((2, 2), "<f4").tobytes())
    read = file_rows(path, 0, "float32", "<", (2, 2))
    path.unlink()
    os.mkfifo(path)

    def hung(signum, frame):
        raise TimeoutError("the open of the FIFO blocked")
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(5)
    try:
        with pytest.raises(embscope.CheckpointError, match=r"^expected a checkpoint file, found a named pipe \(FIFO\) at "):
            read([1])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("given, expected", [(None, "4"), ("28", "28")])
def test_the_command_line_lets_blas_workers_sleep_unless_told_otherwise(given, expected):
    """OPENBLAS_THREAD_TIMEOUT is read when numpy loads: importing embscope sets it before numpy loads, keeping a
    user's value."""
    script = ("import os, sys\n"
              "class Watch:\n"  # what the variable holds when numpy is first imported
              "    def find_spec(self, name, path=None, target=None):\n"
              "        if name == 'numpy': print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'), 'at numpy')\n"
              "sys.meta_path.insert(0, Watch())\n"
              "sys.argv = ['embscope', '--version']\nfrom embscope.cli import main\n"
              "try:\n    main()\nexcept SystemExit:\n    pass\n"
              "print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'), 'numpy' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    if given is not None:
        env["OPENBLAS_THREAD_TIMEOUT"] = given
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    assert found.stdout.split()[:3] == [expected, "at", "numpy"]
    assert found.stdout.split()[-2:] == [expected, "True"]
