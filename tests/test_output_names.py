"""Default plot and report names: different checkpoints get different names (the folder or hub model id stands in
for a stem such as `model` or `ckpt`), a name is replaced only when it holds the same checkpoint's output (the
record read back from the PNG, HTML or report.md), and titles name the checkpoint the same way. The checkpoints
are written by the real writers: torch.save for nanoGPT's ckpt.pt, safetensors' save_file with config.json as
save_pretrained leaves a folder, pickle for a from-scratch params dict."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import run
from safetensors.numpy import save_file

from embscope.render.names import checkpoint_label, checkpoint_title, record, written_for

PNG = b"\x89PNG\r\n\x1a\n"


def tables(seed: int, vocab: int = 64, context: int = 32, dim: int = 8) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((vocab, dim)).astype(np.float32), rng.standard_normal((context, dim)).astype(np.float32)


def hf_folder(folder: Path, seed: int) -> Path:
    """What GPT2LMHeadModel.save_pretrained writes: model.safetensors (metadata format pt) beside config.json."""
    from safetensors.numpy import save_file
    folder.mkdir(parents=True)
    wte, wpe = tables(seed)
    save_file({"transformer.wte.weight": wte, "transformer.wpe.weight": wpe}, str(folder / "model.safetensors"),
              metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2", "vocab_size": 64, "n_positions": 32,
                                                    "n_embd": 8, "tie_word_embeddings": True}))
    return folder


def nanogpt_run(folder: Path, seed: int, step: int = 500) -> Path:
    """nanoGPT's train.py: out/ckpt.pt holding model, model_args and iter_num."""
    import torch
    out = folder / "out"
    out.mkdir(parents=True)
    wte, wpe = tables(seed)
    torch.save({"model": {"transformer.wte.weight": torch.from_numpy(wte), "transformer.wpe.weight": torch.from_numpy(wpe)},
                "model_args": {"vocab_size": 64, "block_size": 32, "n_embd": 8}, "iter_num": step}, out / "ckpt.pt")
    return out / "ckpt.pt"


def nlm_pickle(folder: Path, seed: int) -> Path:
    folder.mkdir(parents=True)
    wte, wpe = tables(seed)
    with open(folder / "model.pkl", "wb") as f:
        pickle.dump({"params": {"token_emb": wte, "pos_emb": wpe}, "step": 1200}, f)
    return folder / "model.pkl"


@pytest.mark.parametrize("path, label, title", [
    ("/r/run-a/model.safetensors", "run-a", "run-a/model.safetensors"),
    ("/r/nanoGPT/out/ckpt.pt", "nanoGPT-out", "nanoGPT/out/ckpt.pt"),  # out/ names no model: one folder more
    ("/r/run/ckpt_1000.pt", "run-ckpt_1000", "run/ckpt_1000.pt"),
    ("/r/run/checkpoint-500/pytorch_model.bin", "run-checkpoint-500", "run/checkpoint-500/pytorch_model.bin"),
    ("/r/llama/model-00001-of-00002.safetensors", "llama", "llama/model-00001-of-00002.safetensors"),
    ("/r/llama/ggml-model-f16.gguf", "llama-ggml-model-f16", "llama/ggml-model-f16.gguf"),
    ("/r/gpt2-124M.pt", "gpt2-124M", "gpt2-124M.pt"),  # a stem that names the model is kept alone
    ("/h/hub/models--org--tiny-gpt/snapshots/0a1b/model.safetensors", "org--tiny-gpt", "org/tiny-gpt/model.safetensors"),
    ("/h/hub/models--org--tiny-gpt/snapshots/0a1b/onnx/model.onnx", "org--tiny-gpt-onnx", "org/tiny-gpt/onnx/model.onnx"),
])
def test_labels_and_titles(path, label, title):
    assert checkpoint_label(Path(path)) == label
    assert checkpoint_title(Path(path), 300) == f"{title}, step 300"


def test_two_save_pretrained_folders_get_two_plots_and_a_rerun_replaces_its_own(tmp_path, monkeypatch):
    a, b = hf_folder(tmp_path / "run-a", 1), hf_folder(tmp_path / "run-b", 2)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert run("norms", "--plot", "-c", a).stdout.splitlines()[-1] == "plot written to run-a-position-norms.png"
    assert run("norms", "--plot", "-c", b).stdout.splitlines()[-1] == "plot written to run-b-position-norms.png"
    first = (work / "run-a-position-norms.png").read_bytes()
    again = run("norms", "--plot", "-c", a).stdout.splitlines()[-1]
    assert again == "plot written to run-a-position-norms.png (replaced this checkpoint's earlier one)"
    assert sorted(p.name for p in work.iterdir()) == ["run-a-position-norms.png", "run-b-position-norms.png"]
    # the record is a digest of the checkpoint's real path, worked out here as the docstring says
    digest = hashlib.sha256(os.path.realpath(a / "model.safetensors").encode()).hexdigest()[:32]
    assert written_for(work / "run-a-position-norms.png") == digest and first.startswith(PNG)
    assert written_for(work / "run-b-position-norms.png") == record([b / "model.safetensors"]) != digest


def test_two_nanogpt_runs_and_a_pickle(tmp_path, monkeypatch):
    ckpt_a, ckpt_b = nanogpt_run(tmp_path / "shakespeare", 3), nanogpt_run(tmp_path / "owt", 4)
    pickled = nlm_pickle(tmp_path / "scratch", 5)
    monkeypatch.chdir(tmp_path)
    for path, name in ((ckpt_a, "shakespeare-out"), (ckpt_b, "owt-out"), (pickled, "scratch")):
        assert run("norms", "--plot", "-c", path).stdout.splitlines()[-1] == f"plot written to {name}-position-norms.png"
        assert (tmp_path / f"{name}-position-norms.png").read_bytes().startswith(PNG)


def test_a_name_held_by_another_checkpoint_or_a_foreign_file_is_left_alone(tmp_path, monkeypatch):
    a, b = hf_folder(tmp_path / "x" / "run", 1), hf_folder(tmp_path / "y" / "run", 2)  # both label "run"
    monkeypatch.chdir(tmp_path)
    run("norms", "--plot", "-c", a)
    mine = (tmp_path / "run-position-norms.png").read_bytes()
    second = run("norms", "--plot", "-c", b).stdout.splitlines()[-1]
    assert second == ("plot written to run-position-norms-2.png (not run-position-norms.png: that holds another "
                      "checkpoint's output, or a file embscope did not write)")
    assert (tmp_path / "run-position-norms.png").read_bytes() == mine
    again = run("norms", "--plot", "-c", b).stdout.splitlines()[-1]
    assert again.startswith("plot written to run-position-norms-2.png (replaced this checkpoint's earlier one; not ")
    # a PNG embscope did not write (no record), and a link at the name: neither is replaced or followed
    foreign = tmp_path / "run-token-norms.png"
    foreign.write_bytes(PNG + b"\0\0\0\0IEND")
    target = tmp_path / "elsewhere.png"
    target.write_bytes(b"keep")
    (tmp_path / "run-token-norms-2.png").symlink_to(target)
    (line,) = [line for line in run("norms", "--table", "token", "--plot", "-c", a).stdout.splitlines()
               if line.startswith("plot written")]
    assert line.startswith("plot written to run-token-norms-3.png (not run-token-norms.png")
    assert foreign.read_bytes() == PNG + b"\0\0\0\0IEND" and target.read_bytes() == b"keep"


@pytest.mark.slow  # seconds of subprocesses: CI's slow step runs it; a cheaper test of the same feature stays in the suite
def test_reports_by_default_and_their_names(tmp_path, monkeypatch):
    a, b = hf_folder(tmp_path / "run-a", 1), hf_folder(tmp_path / "run-b", 2)
    monkeypatch.chdir(tmp_path)
    assert "wrote the report to run-a-report.html:" in run("report", "-c", a).stdout
    assert "wrote the report to run-b-report.html:" in run("report", "-c", b).stdout
    assert "wrote the report to run-a-report.html (replaced this checkpoint's earlier one):" in \
        run("report", "-c", a).stdout
    page = (tmp_path / "run-a-report.html").read_text()
    assert f'<meta name="embscope-checkpoint" content="{record([a])}">' in page
    assert "<title>embscope report: run-a/model.safetensors, step unknown</title>" not in page  # no step: none said
    assert "<title>embscope report: run-a/model.safetensors</title>" in page
    # a Markdown folder records its checkpoint in report.md (a table alone: four PNGs to draw, not seven)
    from safetensors.numpy import save_file
    (tmp_path / "tokens").mkdir()
    save_file({"wte.weight": tables(3)[0]}, str(tmp_path / "tokens" / "model.safetensors"))
    shown = run("report", "-c", tmp_path / "tokens", "--format", "md").stdout
    assert "wrote the report to tokens-report/report.md, with 4 figures" in shown
    assert (tmp_path / "tokens-report" / "report.md").read_text().startswith(
        f"<!-- embscope-checkpoint: {record([tmp_path / 'tokens'])} -->\n")
    assert "(replaced this checkpoint's earlier one)" in run("report", "-c", tmp_path / "tokens", "--format", "md").stdout


def test_figure_titles_name_the_checkpoint(tmp_path):
    import embscope
    from embscope.analysis.norms import norms_report
    from embscope.render import norms
    path = nanogpt_run(tmp_path / "shakespeare", 3, step=750)
    emb = embscope.open(path)
    figure = norms.figure(emb, norms_report(emb, "position", 6.0))
    assert figure.axes[0].get_title().startswith("shakespeare/out/ckpt.pt, step 750 - position table")


def test_a_report_of_two_checkpoints_is_named_and_titled_after_the_same_one(tmp_path, monkeypatch):
    """Issue 32: `report -c vh.pt -c vl.pt` wrote `v1-checkpoint_vh-report.html` titled "v1/checkpoint_vl.pt, and
    1 earlier checkpoint". The sections describe the last checkpoint: it names the file and the title."""
    folder = tmp_path / "v1"
    folder.mkdir()
    rng = np.random.default_rng(5)
    for name in ("checkpoint_vh", "checkpoint_vl"):
        save_file({"wte.weight": rng.standard_normal((40, 8)).astype(np.float32)}, folder / f"{name}.safetensors")
    monkeypatch.chdir(tmp_path)
    # the name and the title are the point: the figures (three quarters of a report's CPU) are left out as on an
    # install without matplotlib; tests/test_report.py checks pages with them
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    shown = run("report", "-c", folder / "checkpoint_vh.safetensors", "-c", folder / "checkpoint_vl.safetensors").stdout
    assert "wrote the report to v1-checkpoint_vl-report.html" in shown
    page = (tmp_path / "v1-checkpoint_vl-report.html").read_text(encoding="utf-8")
    assert "<title>embscope report: v1/checkpoint_vl.safetensors, and 1 earlier checkpoint</title>" in page
