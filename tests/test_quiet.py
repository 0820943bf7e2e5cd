"""No warning on stderr: the values of round three's r13 files made numpy warn while their tables were read (an
overflow in a cast, a divide by a CTranslate2 scale of 0, a product past float32, NaN block scales), and the
answer (exit 0) carried two lines of a library's source path. Each is the table's own note now, said once,
and the rows it made Inf or NaN are reported by the answer as before."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import reader_samples as samples
from conftest import run_json

ROOT = Path(__file__).resolve().parents[1]


def r13_files(directory: Path) -> dict[str, tuple[Path, str]]:
    """The four r13 cases, each written by its format's writer: file -> (path, the note its read adds)."""
    from onnx import helper, numpy_helper
    rng = np.random.default_rng(0)
    cases: dict[str, tuple[Path, str]] = {}
    for name in ("gguf_f64", "gguf_q4k", "ct2", "onnx"):
        (directory / name).mkdir()
    huge = np.full((8, 32), 1.7e308)  # finite float64, past float32's range
    cases["gguf_f64"] = (samples.write_gguf(directory / "gguf_f64" / "model.gguf", {"token_embd.weight": huge},
                                            arch="llama", context=None),
                         ("256 values in 8 rows of 'token_embd.weight' lie past float32's range (3.4e38) and read "
                          "as Inf"))
    blocks = rng.integers(0, 256, (64, 144), dtype=np.uint8)  # one Q4_K block a row, random bytes: some scales NaN
    cases["gguf_q4k"] = (samples.write_gguf(directory / "gguf_q4k" / "model.gguf",
                                            {"token_embd.weight": (blocks, "Q4_K")}, arch="llama", context=None),
                         "are Inf or NaN once dequantized (Q4_K)")
    weights = {"decoder/embeddings/weight": rng.integers(-127, 127, (64, 16)).astype(np.int8),
               "decoder/embeddings/weight_scale": np.zeros(64, np.float32)}
    cases["ct2"] = (samples.write_ctranslate2(directory / "ct2" / "model.bin", weights,
                                              spec="TransformerDecoderModelSpec"),
                    "64 rows of 'decoder/embeddings/weight' are Inf or NaN once dequantized")
    node = helper.make_node("DequantizeLinear", ["Wq", "Ws"], ["wte"])
    graph = helper.make_graph([node], "g", [], [], initializer=[
        numpy_helper.from_array(np.full((64, 16), 2**31 - 1, np.int32), "Wq"),
        numpy_helper.from_array(np.float32(1e30), "Ws")])
    path = directory / "onnx" / "model.onnx"
    path.write_bytes(helper.make_model(graph).SerializeToString())
    cases["onnx"] = (path, "64 rows of 'wte' are Inf or NaN once dequantized")
    return cases


def test_the_r13_files_answer_with_notes_and_no_warning(tmp_path):
    for name, (path, note) in r13_files(tmp_path).items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            doc = run_json("norms", "--table", "token", "-c", path)
        runtime = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        assert not runtime, (name, runtime)
        assert sum(note in n for n in doc["notes"]) == 1, (name, doc["notes"])
        assert any(a["norm"] is None for a in doc["anomalies"]), name  # the rows are the answer's anomalies too


def test_their_stderr_is_empty_in_a_real_process(tmp_path):
    """As a shell runs it: Python's default warning filters, the real stderr."""
    paths = [str(path) for path, _ in r13_files(tmp_path).values()]
    code = ("import sys\nfrom embscope.cli import build\n"
            "for path in sys.argv[1:]:\n"
            "    assert build(['norms'])(['norms', '--table', 'token', '-c', path], standalone_mode=False) == 0\n")
    done = subprocess.run([sys.executable, "-c", code, *paths], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          check=False)
    assert done.returncode == 0 and done.stderr == "", done.stderr[-2000:]
    assert done.stdout.count("note: ") >= len(paths)


def test_a_stored_inf_is_the_file_s_own_and_needs_no_note(tmp_path):
    """Only what reading made is a note: a float32 table that stores Inf is reported as it is, without one."""
    from safetensors.numpy import save_file
    values = np.ones((8, 4), np.float32)
    values[2, 1] = np.inf
    save_file({"wte": values}, str(tmp_path / "model.safetensors"))
    doc = run_json("norms", "--table", "token", "-c", tmp_path / "model.safetensors")
    assert not [n for n in doc["notes"] if "Inf or NaN" in n or "float32's range" in n]
    assert [a["index"] for a in doc["anomalies"]] == [2]


def test_a_float64_table_within_float32_range_has_no_note(tmp_path):
    np.savez(tmp_path / "params.npz", token_emb=np.random.default_rng(1).standard_normal((8, 4)))
    doc = run_json("norms", "--table", "token", "-c", tmp_path / "params.npz")
    assert not [n for n in doc["notes"] if "float32's range" in n]
