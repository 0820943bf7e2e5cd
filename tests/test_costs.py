"""Every cost bounded by the input and stated limits: one test per class of cost, each
built on files the real writers made and checked against a plain numpy or counting reference. The hostile
sizes of the reproducers are scaled down, or the stated limit is lowered, so that the test would
take the old time or memory if the bound were gone, and takes milliseconds now."""

from __future__ import annotations

import json
import os
import re
import signal
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import reader_samples as samples
from conftest import run, run_json

import embscope
from embscope.core.errors import CheckpointError, TableError
from embscope.formats import open_checkpoint


def safetensors_table(path: Path, table: np.ndarray, name: str = "wte.weight") -> Path:
    from safetensors.numpy import save_file
    save_file({name: table}, str(path))
    return path


def word_level(path: Path, vocab: dict[str, int]) -> Path:
    """A tokenizer.json the tokenizers library writes: a WordLevel model over `vocab`, split at whitespace."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(path))
    return path


def peak_bytes(call):
    """(call()'s result, the most memory numpy and Python held at once during it, beyond what was held before)."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = call()
        return result, tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def table(rows: int, dim: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)


# -- ids walked only where rows exist ------------------------------------------------------------

class CountingTokenizer:
    """A tokenizer that counts the ids it is asked to name."""

    def __init__(self, inner):
        self.inner, self.named = inner, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def token_string(self, token_id):
        self.named += 1
        return self.inner.token_string(token_id)


def test_probe_words_walk_only_the_ids_that_are_rows(tmp_path):
    """r02: a tokenizer.json whose largest id is 2**32 - 1 (vocab_size 2**32) beside a 64-row table: the probe
    words are looked for among the 64 ids that have rows, so naming costs 64 ids, not 2**32."""
    from embscope.analysis.probes import COMMON_WORDS, default_probe_words
    safetensors_table(tmp_path / "model.safetensors", table(64, 8))
    vocab = {"[UNK]": 0, "the": 1, "cat": 2, "dog": 3, "far": 2**32 - 1}
    # written as JSON: the tokenizers library saves such a vocabulary empty (it walks ids up to its size)
    (tmp_path / "tokenizer.json").write_text(json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}}))
    emb = embscope.open(tmp_path)
    assert emb.tokenizer.vocab_size == 2**32
    counting = CountingTokenizer(emb.tokenizer)
    assert default_probe_words(counting, emb.token.rows) == ["the", "cat", "dog"]
    # the common words (each looked up and its token named), then the 64 rows, and the few words found named again:
    # bounded by the word list and the table, never by the largest id
    assert counting.named <= len(COMMON_WORDS) + 64 + 10
    doc = run_json("map", "-c", tmp_path)
    assert [p["label"] for p in doc["probes"]] == ["the", "cat", "dog"]


def test_probe_words_are_short_words_whatever_the_vocabulary_holds(tmp_path):
    """r01: one token of 20,000 letters; its endings alone would be 200 MB (L^2 / 2). A probe word has 3 to 24
    letters, so the long one is not a candidate and the rule's memory stays small."""
    from embscope.analysis.probes import MAX_LETTERS, default_probe_words, word_of
    assert word_of("a" * MAX_LETTERS) == "a" * MAX_LETTERS and word_of("a" * (MAX_LETTERS + 1)) is None
    safetensors_table(tmp_path / "model.safetensors", table(64, 8))
    lines = ["[UNK]", "a" * 20_000, "dog", "cat"] + [f"[unused{k}]" for k in range(60)]
    (tmp_path / "vocab.txt").write_text("\n".join(lines) + "\n")
    tokenizer = embscope.open(tmp_path).tokenizer
    words, peak = peak_bytes(lambda: default_probe_words(tokenizer, 64))
    assert words == ["dog", "cat"]
    assert peak < 2 << 20, peak


# -- tokens cut to a stated length --------------------------------------------------------------

def long_token_model(directory: Path, length: int) -> str:
    """A 64-row table whose row 3 is zero (flagged by norms), named by a token of `length` characters."""
    rows = table(64, 8)
    rows[3] = 0
    safetensors_table(directory / "model.safetensors", rows)
    long = ("ab " * (length // 3 + 1))[:length]
    vocab = {"[UNK]": 0, "x1": 1, "x2": 2, long: 3, **{f"w{i}": i for i in range(4, 64)}}
    word_level(directory / "tokenizer.json", vocab)
    return long


def test_tables_and_plots_show_a_cut_token_and_say_so(tmp_path):
    """r09, r23: a token of 200,000 characters is printed as its first TOKEN_SHOWN characters and its length,
    and labels a plot by its first PLOT_TOKEN_SHOWN (the plot's layout took 191 s and 4.4 GB)."""
    from embscope.analysis.norms import norms_report
    from embscope.core.text import PLOT_TOKEN_SHOWN, TOKEN_SHOWN
    from embscope.render.norms import figure
    long = long_token_model(tmp_path, 200_000)
    out = run("norms", "--table", "token", "-c", tmp_path).stdout
    shown = long[:TOKEN_SHOWN].replace(" ", "\u2420")
    name_cell = "".join(line.split("\u2502")[2].strip() for line in out.splitlines() if line.startswith("\u2502"))
    assert name_cell.replace(" ", "") == shown + "\u2026(200,000characters)"  # the cell's wrapped lines, joined
    assert len(out) < 5000
    emb = embscope.open(tmp_path)
    drawn = figure(emb, norms_report(emb, "token"), None)
    texts = [t.get_text() for t in drawn.findobj(lambda artist: hasattr(artist, "get_text"))]
    # the plot draws a space as U+2423 (render.plot_style: the font has no U+2420)
    label = long[:PLOT_TOKEN_SHOWN].replace(" ", "\u2423") + "\u2026 (200,000 characters)"
    assert any(label in text for text in texts)
    assert max(len(text) for text in texts) < 120


def test_the_round_trip_leaves_out_tokens_past_its_limit_and_says_how_many(tmp_path):
    """r09's undertrained: encoding back a token of 2,000 characters costs its length; past ROUND_TRIP_MAX_CHARS
    it is not encoded, never marked unreachable for it, and counted in a note."""
    from embscope.analysis.token_kinds import ROUND_TRIP_MAX_CHARS, token_kinds
    long_token_model(tmp_path, 2000)
    kinds = token_kinds(embscope.open(tmp_path).tokenizer, 64)
    assert kinds.too_long == 1 and not kinds["unreachable"][3]
    notes = run_json("undertrained", "-c", tmp_path)["notes"]
    assert f"1 tokens longer than {ROUND_TRIP_MAX_CHARS:,} characters were not encoded back" in " ".join(notes)


# -- a split pattern's timeout paid once ----------------------------------------------------------

BACKTRACKER = r"(?:a|a)*\d"  # r20: exponential in the run of a's


def test_a_split_pattern_that_runs_into_its_timeout_refuses_the_tokenizer_once(tmp_path, monkeypatch):
    """r20: a minbpe model whose pattern backtracks for ever, and merges making 'aa', 'aaa', ... 'a' * 41: every
    token's round trip would pay the timeout (1 s each, 84 s in all). The first timeout stops the pattern for
    good: later texts are refused without running it, and undertrained says so in one note."""
    pytest.importorskip("regex")
    from embscope.tokenizers import split
    monkeypatch.setattr(split, "MATCH_TIMEOUT_S", 0.2)
    pattern = split.compile_split_pattern(BACKTRACKER, "tokenizer.model")
    with pytest.raises(CheckpointError, match="took over .* and was stopped"):
        pattern.chunks("a" * 300)

    class Untouchable:
        def finditer(self, *args, **kwargs):
            raise AssertionError("the stopped pattern ran again")
    pattern._compiled = Untouchable()
    with pytest.raises(CheckpointError, match="took over .* and was stopped"):
        pattern.chunks("aaa1")

    safetensors_table(tmp_path / "model.safetensors", table(256 + 40, 8))
    merges = ["97 97"] + [f"{255 + i} 97" for i in range(1, 40)]
    (tmp_path / "tokenizer.model").write_text(f"minbpe v1\n{BACKTRACKER}\n0\n" + "\n".join(merges) + "\n")
    doc = run_json("undertrained", "-c", tmp_path, "--device", "cpu")
    refused = [note for note in doc["notes"] if note.startswith("tokenizer refused: the split pattern")]
    assert len(refused) == 1 and doc["tables"][0]["verified"] is None


# -- tensor counts capped in every format ----------------------------------------------------------

def test_every_format_caps_its_tensor_count_before_reading_them(tmp_path, monkeypatch):
    """r11: CTranslate2 variables and aliases, GGUF tensors, ONNX initializers (counted on the protobuf wire,
    before onnx parses the file) and HDF5 datasets are held to MAX_TENSORS, as safetensors' header is."""
    import onnx

    from embscope.formats import keras_h5
    from embscope.storage import checks as _checks
    monkeypatch.setattr(_checks, "MAX_TENSORS", 3)
    monkeypatch.setattr(keras_h5, "MAX_TENSORS", 3)
    five = {f"layer{i}.weight": table(4, 4, i) for i in range(5)}
    gguf_dir, ct2_dir, onnx_dir, h5_dir = (tmp_path / d for d in ("gguf", "ct2", "onnx", "h5"))
    for d in (gguf_dir, ct2_dir, onnx_dir, h5_dir):
        d.mkdir()
    files = {
        "tensors": samples.write_gguf(gguf_dir / "model.gguf", five),
        "variables": samples.write_ctranslate2(ct2_dir / "model.bin", five),
        "initializers": samples.write_onnx(onnx_dir / "model.onnx", five),
        "datasets": samples.write_h5(h5_dir / "tf_model.h5", five),
    }

    def parsed(*args, **kwargs):
        raise AssertionError("onnx parsed a file whose count was over the cap")
    monkeypatch.setattr(onnx, "load", parsed)
    for what, path in files.items():
        with pytest.raises(CheckpointError, match=rf"declares \d+ {what}.*, more than the 3 any model file holds"):
            open_checkpoint(path)
    aliased = samples.write_ctranslate2(ct2_dir / "aliased.bin", dict(list(five.items())[:2]),
                                        aliases={f"alias{i}": "layer0.weight" for i in range(2)})
    with pytest.raises(CheckpointError, match="declares 4 variables and aliases, more than the 3"):
        open_checkpoint(aliased)


# -- d x d work bounded ---------------------------------------------------------------------------

def numpy_components(rows: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """The two leading principal directions of `rows` about `mean`, by numpy's SVD, each turned so that its largest
    entry is positive (the sign rule of the map)."""
    _, _, vt = np.linalg.svd(rows.astype(np.float64) - mean, full_matrices=False)
    top = vt[:2]
    return top * np.sign(top[np.arange(2), np.argmax(np.abs(top), axis=1)])[:, None]


def test_a_wide_table_is_mapped_through_its_gram_matrix_or_a_stated_sample(tmp_path, monkeypatch):
    """r22: a d x d eigendecomposition past SQUARE_MAX_SIDE is never made. A table of fewer rows than that goes
    through its n x n Gram matrix (exactly numpy's PCA); one past it in both directions through the Gram matrix
    of SQUARE_MAX_SIDE rows drawn with SAMPLE_SEED, and the map says so."""
    from embscope.analysis import map as mapping
    rng = np.random.default_rng(1)
    wide = (rng.standard_normal((60, 300)) * np.linspace(3, 0.1, 300)).astype(np.float32)
    exact = mapping.pca_2d(wide, max_svd_bytes=0, max_side=100)
    mean = wide.astype(np.float64).mean(axis=0)
    assert exact.route == "gram" and exact.sampled is None
    np.testing.assert_allclose(exact.coords, (wide - mean) @ numpy_components(wide, mean).T, atol=1e-9)
    spread = np.linalg.svd(wide.astype(np.float64) - mean, compute_uv=False) ** 2
    assert exact.variance == pytest.approx(tuple(spread[:2] / 59), rel=1e-9)
    assert exact.ratio == pytest.approx(tuple(spread[:2] / spread.sum()), rel=1e-9)

    tall = (rng.standard_normal((400, 300)) * np.linspace(3, 0.1, 300)).astype(np.float32)
    sampled = mapping.pca_2d(tall, max_svd_bytes=0, max_side=100)
    drawn = np.sort(np.random.default_rng(mapping.SAMPLE_SEED).choice(np.arange(400), 100, replace=False))
    mean = tall.astype(np.float64).mean(axis=0)
    assert sampled.route == "sampled gram" and sampled.sampled == 100 and sampled.used == 400
    np.testing.assert_allclose(sampled.coords, (tall - mean) @ numpy_components(tall[drawn], mean).T, atol=1e-9)

    np.savez(tmp_path / "params.npz", token_emb=tall)
    monkeypatch.setattr(mapping, "SQUARE_MAX_SIDE", 100)
    monkeypatch.setattr(mapping, "SVD_MAX_BYTES", 0)
    doc = run_json("map", "-c", tmp_path / "params.npz")
    assert doc["route"] == "sampled gram"
    assert any("the components are those of 100 rows drawn with seed 0" in note for note in doc["notes"])


def test_procrustes_is_refused_past_its_stated_width(tmp_path, monkeypatch):
    """r22: two 2-row tables 8,000 wide took 176 s and 3 GB in the d x d SVD; past PROCRUSTES_MAX_DIM the
    alignment is refused before anything is allocated."""
    from embscope.analysis import compare
    monkeypatch.setattr(compare, "PROCRUSTES_MAX_DIM", 8)
    a, b = safetensors_table(tmp_path / "a.safetensors", table(4, 16, 1)), safetensors_table(
        tmp_path / "b.safetensors", table(4, 16, 2))
    with pytest.raises(TableError, match="at most 8 columns to align by Procrustes .* found 16"):
        compare.procrustes(table(4, 16, 1), table(4, 16, 2), compare.by_index(4, 4))
    result = run("compare", a, b, "--align", "procrustes", code=1)
    assert result.stderr.startswith("Error: expected tables of at most 8 columns to align by Procrustes")


# -- dequantization and chunk sizes checked against the table ---------------------------------------

def test_an_onnx_block_size_past_its_axis_is_read_as_the_axis(tmp_path):
    """r12: DequantizeLinear with block_size 2**27 on a 64 x 16 int8 table: the scale was repeated 2**27 times
    (8.2 GB) before being cut to 64 rows. Its values are those of one block over the axis: q * scale, by numpy."""
    from onnx import helper, numpy_helper
    q = np.random.default_rng(0).integers(-127, 127, (64, 16)).astype(np.int8)
    scale = np.linspace(0.01, 0.16, 16, dtype=np.float32).reshape(1, 16)
    for block, expected in ((2**27, None), (-1, "block size -1 is negative")):
        node = helper.make_node("DequantizeLinear", ["Wq", "Ws"], ["wte"], axis=0, block_size=block)
        graph = helper.make_graph([node], "g", [], [], initializer=[numpy_helper.from_array(q, "Wq"),
                                                                      numpy_helper.from_array(scale, "Ws")])
        path = tmp_path / f"model{block}.onnx"
        path.write_bytes(helper.make_model(graph).SerializeToString())
        if expected:
            with pytest.raises(CheckpointError, match=expected):
                open_checkpoint(path)
            continue
        values, peak = peak_bytes(open_checkpoint(path).tensors["wte"].read)
        np.testing.assert_array_equal(values, q.astype(np.float32) * scale)
        assert peak < 1 << 20, peak


def write_h5(path: Path, **create) -> Path:
    import h5py
    with h5py.File(path, "w") as f:
        f.attrs["keras_version"] = b"2.15.0"
        data = create.pop("data", None)
        dataset = f.create_dataset("bert/embeddings/word_embeddings/weight:0", **create)
        if data is not None:
            dataset[...] = data
    return path


def test_h5_chunks_are_checked_against_the_table_before_anything_is_allocated(tmp_path, monkeypatch):
    """r05, r15: a chunk bigger than the table (libhdf5 inflates a whole chunk to read a row: 2 GiB for a 64 x 16
    table) and chunks never written (which read as the fill value: 4.3 GB from a 4.5 KB file) are refused; a
    table whose chunks are all written reads as h5py reads it."""
    from embscope.formats import keras_h5
    h5py = pytest.importorskip("h5py")
    values = table(64, 16)
    monkeypatch.setattr(keras_h5, "CHUNK_SLACK", 8 << 10)  # 8 KiB, so that a 64 KiB chunk is "huge" here
    cases = {
        "one chunk [1024, 16] holds 64.0 KiB, more than the whole table [64, 16] (4.0 KiB)":
            write_h5(tmp_path / "huge.h5", shape=(64, 16), maxshape=(None, 16), dtype="f4", chunks=(1024, 16),
                     compression="gzip", data=values),
        "only 0 of its 32,768 chunks were ever written":
            write_h5(tmp_path / "unwritten.h5", shape=(2**21, 512), dtype="f4", chunks=(1024, 32), fillvalue=0.5),
        "its data was never written":
            write_h5(tmp_path / "contiguous.h5", shape=(2**21, 512), dtype="f4"),
    }
    partial = write_h5(tmp_path / "partial.h5", shape=(64, 16), dtype="f4", chunks=(16, 16))
    with h5py.File(partial, "a") as f:
        f["bert/embeddings/word_embeddings/weight:0"][:16] = values[:16]
    cases["only 1 of its 4 chunks were ever written"] = partial
    for message, path in cases.items():
        def read(path: Path = path, message: str = message) -> None:
            with pytest.raises(CheckpointError, match=re.escape(message)):
                _ = embscope.open(path).token.array
        _, peak = peak_bytes(read)
        assert peak < 16 << 20, (message, peak)
    whole = write_h5(tmp_path / "whole.h5", shape=(64, 16), dtype="f4", chunks=(16, 16), compression="gzip",
                     data=values)
    with h5py.File(whole, "r") as f:
        reference = f["bert/embeddings/word_embeddings/weight:0"][()]
    np.testing.assert_array_equal(embscope.open(whole).token.array, reference)


# -- foreign libraries that can hang --------------------------------------------------------------

def test_a_libhdf5_that_never_returns_is_stopped_in_its_child(tmp_path, monkeypatch):
    """r10: one byte of the global-heap object holding keras_version changed 0x00 -> 0x06: libhdf5 never returns
    from reading it, and Ctrl-C cannot stop it. h5py runs in a child with a time limit, so the file is refused in
    one line when the limit is up (0.4 s here: the forked child reaches the heap in milliseconds, then spins
    until the limit, so the limit is the test's CPU)."""
    from embscope.formats import keras_h5
    h5py = pytest.importorskip("h5py")
    monkeypatch.setattr(keras_h5, "CATALOGUE_SECONDS", 0.4)
    path = tmp_path / "tf_model.h5"
    with h5py.File(path, "w") as f:
        f.attrs["keras_version"] = b"2.15.0"  # a variable-length string: in the global heap
        f.create_dataset("tf/wte/weight:0", data=table(64, 16))
    raw = bytearray(path.read_bytes())
    heap = raw.find(b"GCOL")
    assert raw[heap + 24:heap + 26] == b"\x06\x00"
    raw[heap + 25] = 6
    path.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="the HDF5 library did not finish within 0.4 s and was stopped"):
        open_checkpoint(path)


def test_the_child_reports_a_crash_a_memory_limit_and_an_error_in_one_line():
    from embscope.core.errors import EmbscopeError
    from embscope.formats._isolated import run_isolated

    def crash():
        os.kill(os.getpid(), signal.SIGSEGV)

    def hungry():
        return len(bytearray(1 << 30))

    def refuses():
        raise EmbscopeError("expected a table, found none")
    limits = {"seconds": 30, "memory": 256 << 20, "what": "'x.h5'", "library": "the HDF5 library"}
    assert run_isolated(lambda: {"rows": [1, 2]}, **limits) == {"rows": [1, 2]}
    with pytest.raises(CheckpointError, match=r"^'x.h5': the HDF5 library crashed on it \(the process reading it was "
                                              r"killed by SIGSEGV\); refused$"):
        run_isolated(crash, **limits)
    with pytest.raises(CheckpointError, match=r"^'x.h5': the HDF5 library needed more than 256.0 MiB of memory"):
        run_isolated(hungry, **limits)
    with pytest.raises(CheckpointError, match="^expected a table, found none$"):
        run_isolated(refuses, **limits)


# -- per-row arrays of norms ----------------------------------------------------------------------

@pytest.mark.parametrize("kind, bound", [("zeros", 3.0), ("normal", 1.5)])
def test_the_norm_summary_holds_a_few_arrays_of_the_norms(kind, bound):
    """Round two's r10: 2**26 rows of one column (a 16 KB npz) took 3.4 GB in norms. The summary's peak is now a
    few arrays of the norms' size: a table of zero rows (every row flagged) and a normal one."""
    from embscope.analysis.norms import summarize
    rows = 2**20
    norms = np.zeros(rows) if kind == "zeros" else np.abs(np.random.default_rng(0).standard_normal(rows))
    summary, peak = peak_bytes(lambda: summarize(norms))
    assert len(summary.flagged) == rows or kind == "normal"
    assert peak < bound * norms.nbytes, peak / norms.nbytes  # the code before: 5.2 and 3.1 times



# ----------------------------------------------------------------------------- round four (issue 33)

def test_paths_are_resolved_as_realpath_resolves_them_each_folder_once(tmp_path, monkeypatch):
    """real_paths.RealPaths against os.path.realpath on links (relative, absolute, chained, with ".."), and the
    lstat calls counted: 300 paths through one 200-folder chain cost the chain once, not 300 times (r03, r04)."""
    from embscope import real_paths
    deep = tmp_path.joinpath(*["d"] * 200)
    deep.mkdir(parents=True)
    (deep / "data").write_bytes(b"x")
    (tmp_path / "up").symlink_to("d/d/../d")  # ".." after a link: the link's target, then its parent
    (tmp_path / "abs").symlink_to(deep / "data")
    (tmp_path / "chain").symlink_to("abs")
    resolver = real_paths.RealPaths()
    for path in (tmp_path / "up" / "d", tmp_path / "chain", tmp_path / "up" / ".." / "d", tmp_path / "missing" / "x",
                 deep / "data"):
        assert resolver.resolve(path) == Path(os.path.realpath(path)), path
    calls = []
    real_lstat = os.lstat
    monkeypatch.setattr(real_paths.os, "lstat", lambda p: calls.append(p) or real_lstat(p))
    fresh = real_paths.RealPaths()
    for _ in range(300):
        fresh.resolve(deep / "data")
    assert len(calls) == len((deep / "data").parts) - 1  # once for each name below the root
    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(OSError) as caught:
        real_paths.RealPaths().resolve(tmp_path / "loop")
    assert caught.value.errno == 40  # ELOOP
    with pytest.raises(OSError):
        real_paths.RealPaths(max_parts=64).resolve(deep / "data")


def test_an_onnx_location_past_its_stated_depth_is_refused_in_one_line(tmp_path):
    from onnx import TensorProto, helper

    from embscope.formats.onnx_file import MAX_LOCATION_PARTS
    folder = tmp_path.joinpath(*["d"] * 300)
    folder.mkdir(parents=True)
    data = np.random.default_rng(0).standard_normal((8, 4)).astype("<f4")
    (folder / "data").write_bytes(data.tobytes())
    tensor = TensorProto(name="embeddings.word_embeddings.weight", data_type=TensorProto.FLOAT, dims=[8, 4],
                         data_location=TensorProto.EXTERNAL)
    for key, value in (("location", "d/" * 300 + "data"), ("offset", "0"), ("length", str(data.nbytes))):
        tensor.external_data.add(key=key, value=value)
    path = tmp_path / "model.onnx"
    path.write_bytes(helper.make_model(helper.make_graph([], "g", [], [], initializer=[tensor])).SerializeToString())
    result = run("info", "-c", path, code=1)
    assert f"is not a file name of at most {MAX_LOCATION_PARTS} folders" in result.stderr
    assert result.stderr.count("\n") == 1


def test_user_defined_tokens_are_found_by_one_automaton(tmp_path):
    """substrings.Substrings against `in` on random strings; and the GGUF partition, cut by llama.cpp's rule
    (longest first, each across what the longer left), asks the automaton once per text, not once per token."""
    import random

    from embscope.tokenizers.gguf_vocab import UserDefined
    from embscope.tokenizers.substrings import Substrings
    rng = random.Random(1)
    for _ in range(500):
        strings = ["".join(rng.choice("abc") for _ in range(rng.randint(1, 5))) for _ in range(rng.randint(1, 12))]
        text = "".join(rng.choice("abcd") for _ in range(rng.randint(0, 20)))
        assert Substrings(strings).found(text) == {i for i, s in enumerate(strings) if s in text}
    tokens = ["ab", "abc", "b", "x"] + [f"a{i}" for i in range(5000)]
    cut = UserDefined(tokens, list(range(len(tokens))))
    # abc (3 bytes, id 1) first, then a12 (3 bytes, id 16), then ab (0) in what is left, then b (2)
    assert cut.partition("zabcab a12b") == ["z", 1, 0, " ", 16, 2]
    assert cut.partition("a4999") == [5003]


def test_a_megabyte_name_is_printed_cut_with_its_length(tmp_path):
    """r06: a tensor name of 1,000,000 characters: info and the report show its start, its end and its length."""
    from embscope.core.text import TEXT_SHOWN
    name = "x" * 1_000_000 + ".wte.weight"
    path = safetensors_table(tmp_path / "model.safetensors", np.eye(8, dtype=np.float32), name)
    out = run("info", "-c", path).stdout
    assert "(1,000,011characters)" in re.sub(r"[\s\u2502]", "", out) and len(out) < 20 * TEXT_SHOWN  # in a folded cell
    run("report", "-c", path, "--out", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "1,000,011 characters" in page and "x" * 10_000 not in page
    assert run_json("info", "-c", path)["tables"]["token"]["name"] == name  # JSON keeps it whole


def test_a_table_of_few_rows_gets_its_geometry_from_the_gram_matrix(monkeypatch):
    """r07: 5 rows x 64 columns, against plain numpy statements of the figures over the d x d matrices; and no
    d x d matrix is made (np.linalg.eigh sees only 5 x 5 ones)."""
    from embscope.analysis.geometry import table_geometry
    from embscope.compute.moments import StoredRows
    rng = np.random.default_rng(3)
    table = rng.standard_normal((5, 64)) * np.linspace(0.2, 3.0, 64) + 0.4
    seen = []
    real_eigh = np.linalg.eigh
    monkeypatch.setattr(np.linalg, "eigh", lambda m: seen.append(m.shape) or real_eigh(m))
    found = table_geometry(StoredRows(table.astype(np.float32)), "token", "t", device="cpu")
    assert seen and all(shape == (5, 5) for shape in seen)
    w = table.astype(np.float32).astype(np.float64)
    centred = w - w.mean(0)
    singular = np.linalg.svd(centred, compute_uv=False)  # 5 values, the 5th zero: the centred rows have rank 4
    np.testing.assert_allclose(found.spectrum.singular_values[:4], singular[:4], rtol=1e-9)
    assert not found.spectrum.singular_values[4:].any() and len(found.spectrum.singular_values) == 64
    _, vectors = real_eigh(w.T @ w)  # the d x d statement of the partition function (Mu & Viswanath 2018)
    z = np.concatenate([np.exp(w @ vectors).sum(0), np.exp(-w @ vectors).sum(0)])
    assert found.partition_isotropy == pytest.approx(z.min() / z.max(), rel=1e-6)
    top = np.linalg.svd(centred, full_matrices=False)[2][:1].T  # all-but-the-top removes max(1, 64 // 100) = 1
    residual = centred - centred @ top @ top.T
    unit = residual / np.linalg.norm(residual, axis=1, keepdims=True)
    pairs = unit @ unit.T
    assert found.abtt_mean_cosine == pytest.approx((pairs.sum() - 5) / 20, abs=1e-9)


def test_cka_of_few_pairs_is_the_d_x_d_value_from_n_x_n_matrices():
    """r07's compare: 4 pairs of 300-wide rows; the value against the d x d statement of Kornblith et al."""
    from embscope.analysis.cka import linear_cka
    from embscope.analysis.compare import Pairing
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((4, 300)), rng.standard_normal((4, 200))
    b[:, :3] += a[:, :3] * 4
    found = linear_cka(a.astype(np.float32), b.astype(np.float32), Pairing(4), device="cpu")
    x, y = a.astype(np.float32).astype(np.float64), b.astype(np.float32).astype(np.float64)
    x, y = x - x.mean(0), y - y.mean(0)
    expected = np.linalg.norm(y.T @ x) ** 2 / (np.linalg.norm(x.T @ x) * np.linalg.norm(y.T @ y))
    assert found.rows == 4 and found.value == pytest.approx(expected, rel=1e-9)


def test_memory_that_runs_out_anywhere_is_one_line(monkeypatch):
    """r09's class: numpy's own MemoryError (an allocation of an exabyte, raised where the norms are computed)
    reaches the CLI as one line saying what could not be allocated, never a traceback."""
    from embscope.analysis import norms

    def exabyte(array):
        return np.empty(1 << 60, dtype=np.uint8)

    monkeypatch.setattr(norms, "row_norms", exabyte)
    result = run("norms", code=1)
    assert result.stderr.startswith("Error: expected enough memory for this answer, found too little (Unable to "
                                    "allocate 1.00 EiB")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
