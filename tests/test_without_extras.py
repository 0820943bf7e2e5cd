"""Issue 32: the card's `norms --plot` printed a 56-line traceback on an install without matplotlib. Each optional
package in turn is made missing in a child process (tests/without_package/sitecustomize.py, on PYTHONPATH): every
run that needs it ends in one line naming it and the extra that installs it, exit 1; every other run answers.
One child per package runs its commands in-process, so the whole test costs a few seconds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_checkpoints"
BLOCKER = Path(__file__).resolve().parent / "without_package"
EXTRAS = {"matplotlib": "plot", "tokenizers": "hf", "torch": "torch", "sentencepiece": "sentencepiece",
          "gguf": "gguf", "onnx": "onnx", "h5py": "h5", "regex": "regex", "tiktoken": "tiktoken"}

# every command, with --plot where it has one, on the bundled sample: these need none of the optional packages
# but matplotlib (for the plot), so without any other one they answer
PLOTS = [["norms", "--plot", "n.png"], ["positions", "--plot", "p.png"], ["undertrained", "--plot", "u.png"],
         ["map", "--plot", "m.png"], ["geometry", "--plot", "g.png"],
         ["compare", str(SAMPLES / "nlm"), str(SAMPLES / "nlm_step1000"), "--sample", "0", "--plot", "c.png"],
         ["report", "--format", "md", "--out", "report-md"]]
OTHERS = [["info"], ["similarity", "dog", "cat"], ["neighbors", "father", "-k", "3"]]  # a few, to keep it quick

DRIVER = """
import json, sys
from typer.testing import CliRunner
from embscope.cli import app
found = []
for args in json.loads(sys.argv[1]):
    result = CliRunner().invoke(app, args)
    escaped = result.exception if not isinstance(result.exception, (SystemExit, type(None))) else None
    found.append([result.exit_code, result.stderr, repr(escaped) if escaped else None])
print(json.dumps(found))
"""


def files_needing(package: str, tmp_path: Path) -> list[list[str]]:
    """Runs that need the package, on files its real writer made: they must name it."""
    table = np.random.default_rng(0).standard_normal((16, 4)).astype(np.float32)
    if package == "gguf":
        import gguf
        writer = gguf.GGUFWriter(str(tmp_path / "m.gguf"), "llama")
        writer.add_tensor("token_embd.weight", table)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
    if package == "onnx":
        import onnx
        from onnx import helper, numpy_helper
        graph = helper.make_graph([], "g", [], [], [numpy_helper.from_array(table, "embed_tokens.weight")])
        onnx.save(helper.make_model(graph), str(tmp_path / "m.onnx"))
    if package == "h5py":
        import h5py
        with h5py.File(tmp_path / "m.h5", "w") as f:
            f.create_dataset("embedding/embeddings:0", data=table)
    if package == "sentencepiece":
        import sentencepiece
        with open(tmp_path / "tokenizer.model", "wb") as out:
            sentencepiece.SentencePieceTrainer.train(
                sentence_iterator=iter(["the dog bites the man", "a dog and a cat"] * 20), model_writer=out,
                vocab_size=40, model_type="bpe", minloglevel=2)
    runs = {
        "matplotlib": PLOTS,
        "tokenizers": [["similarity", "dog", "cat", "-c", str(SAMPLES / "hf"), "--tokenizer",
                        str(SAMPLES / "hf" / "tokenizer.json")]],
        "torch": [["neighbors", "--all", "--out", "n.tsv", "--device", "cuda"]],
        "sentencepiece": [["similarity", "dog", "cat", "--tokenizer", str(tmp_path / "tokenizer.model")]],
        "gguf": [["info", "-c", str(tmp_path / "m.gguf")]],
        "onnx": [["info", "-c", str(tmp_path / "m.onnx")]],
        "h5py": [["info", "-c", str(tmp_path / "m.h5")]],
    }
    return runs.get(package, [])  # regex and tiktoken: the sample's runs, which need neither


def run_without(package: str, runs: list[list[str]], cwd: Path) -> list[tuple[int, str, str | None]]:
    env = {**os.environ, "EMBSCOPE_TEST_WITHOUT": package,
           "PYTHONPATH": os.pathsep.join([str(BLOCKER), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(runs)], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return [tuple(entry) for entry in json.loads(done.stdout)]


# a child process of its own each (about a second): three stay in the suite, one of each kind of use (a format's
# library, the compute engine, the plots); CI's slow step runs the others, which go through the same check
IN_THE_SUITE = ("matplotlib", "onnx", "torch")


@pytest.mark.parametrize("package", [package if package in IN_THE_SUITE else pytest.param(package,
                                                                                                 marks=pytest.mark.slow)
                                     for package in sorted(EXTRAS)])
def test_a_missing_package_is_one_line_naming_its_extra(tmp_path, package):
    needing = files_needing(package, tmp_path)
    # the commands that do not need it answer; matplotlib's are its own runs, the others a few of the sample's
    others = OTHERS if package != "matplotlib" else OTHERS[:1]
    found = run_without(package, [*needing, *others], tmp_path)
    for args, (code, stderr, escaped) in zip([*needing, *others], found):
        assert escaped is None, (package, args, escaped)
        if args in needing:
            assert code == 1, (package, args, code, stderr)
            assert stderr.count("\n") == 1 and f"the {package!r} package (pip install 'embscope[{EXTRAS[package]}]')" \
                in stderr, (package, args, stderr)
        else:
            assert code == 0 and "Traceback" not in stderr, (package, args, code, stderr)
