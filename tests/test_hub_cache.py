"""Model ids from the local Hugging Face hub cache, offline. The cache is laid out with huggingface_hub's own
helpers (file_download._create_symlink and _cache_commit_hash_for_specific_revision, the functions hf_hub_download
ends with), and huggingface_hub's try_to_load_from_cache, scan_cache_dir and constants are the reference for
where a model's files are and which folder is the cache. Nothing is downloaded."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import cosine, run, run_json
from huggingface_hub import constants as hf_constants
from huggingface_hub import scan_cache_dir, try_to_load_from_cache
from huggingface_hub.file_download import _cache_commit_hash_for_specific_revision, _create_symlink
from safetensors.numpy import save_file

import embscope
from embscope.core.errors import CheckpointError
from embscope.hub import cache_folder

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
COMMIT = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf"
OTHER_COMMIT = "0" * 39 + "1"
V, D = 40, 16
RNG = np.random.default_rng(7)
WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "dog", "cat", "car", *(f"w{i}" for i in range(V - 8))]


def bert_files(folder: Path, table: np.ndarray) -> dict[str, Path]:
    """A BERT-like model as the hub holds it: weights, config, a WordPiece tokenizer.json."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    folder.mkdir(parents=True, exist_ok=True)
    save_file({"embeddings.word_embeddings.weight": table,
               "embeddings.position_embeddings.weight": RNG.standard_normal((8, D)).astype(np.float32)},
              folder / "model.safetensors")
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", "architectures": ["BertModel"]}))
    hf = Tokenizer(models.WordPiece({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    hf.normalizer = normalizers.BertNormalizer(lowercase=True)
    hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    hf.save(str(folder / "tokenizer.json"))
    return {p.name: p for p in folder.iterdir()}


def lay_out(cache: Path, repo_id: str, files: dict[str, Path], revision: str = "main", commit: str = COMMIT,
            shared: bool = False) -> Path:
    """What hf_hub_download leaves for each file: the bytes in blobs/<etag>, a relative link from
    snapshots/<commit>/<name>, and refs/<revision> naming the commit. `shared`: the blob is itself a link into
    the cache-wide store blobs/<xx>/<hash> (utils/_shared_blobs.py)."""
    storage = cache / ("models--" + repo_id.replace("/", "--"))
    for name, source in files.items():
        data = source.read_bytes()
        etag = hashlib.sha256(data).hexdigest()
        blob = storage / "blobs" / etag
        blob.parent.mkdir(parents=True, exist_ok=True)
        if shared:
            store = cache / "blobs" / etag[:2] / etag
            store.parent.mkdir(parents=True, exist_ok=True)
            store.write_bytes(data)
            if not blob.exists():
                blob.symlink_to(os.path.relpath(store, blob.parent))
        else:
            blob.write_bytes(data)
        pointer = storage / "snapshots" / commit / name
        pointer.parent.mkdir(parents=True, exist_ok=True)
        _create_symlink(str(blob), str(pointer))
    _cache_commit_hash_for_specific_revision(str(storage), revision, commit)
    return storage / "snapshots" / commit


@pytest.fixture
def minilm(tmp_path):
    table = RNG.standard_normal((V, D)).astype(np.float32)
    return table, bert_files(tmp_path / "source", table)


@pytest.mark.parametrize("variable", ["HF_HOME", "HF_HUB_CACHE"])
def test_similarity_answers_from_the_cache_offline(variable, minilm, tmp_path, monkeypatch):
    table, files = minilm
    home = tmp_path / "home"
    cache = home / "hub" if variable == "HF_HOME" else tmp_path / "elsewhere"
    monkeypatch.setenv(variable, str(home if variable == "HF_HOME" else cache))
    snapshot = lay_out(cache, MINILM, files)
    assert try_to_load_from_cache(MINILM, "model.safetensors", cache_dir=str(cache)) == \
        str(snapshot / "model.safetensors")  # huggingface_hub finds the file where embscope will
    doc = run_json("similarity", "dog", "cat", "-c", MINILM)
    assert doc["model_id"] == MINILM and doc["snapshot"] == COMMIT and doc["revision"] == "main"
    assert doc["checkpoint"] == str(snapshot / "model.safetensors")
    assert doc["pairs"][0]["cosine"] == pytest.approx(cosine(table[5], table[6]))
    first = run("similarity", "dog", "cat", "-c", MINILM).stdout.splitlines()[0]
    assert first == (f"checkpoint: {MINILM} from the Hugging Face cache, snapshot {COMMIT} (main): "
                     f"{snapshot / 'model.safetensors'} (step unknown)")


def test_the_cache_folder_is_the_one_huggingface_hub_uses(tmp_path, monkeypatch):
    cases = [{"HF_HUB_CACHE": "a", "HF_HOME": "b"}, {"HUGGINGFACE_HUB_CACHE": "c", "HF_HOME": "b"}, {"HF_HOME": "b"},
             {"XDG_CACHE_HOME": "x"}, {"HF_HOME": "~/hf"}, {}]
    variables = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME")
    try:
        for case in cases:
            for name in variables:
                monkeypatch.delenv(name, raising=False)
            for name, value in case.items():
                monkeypatch.setenv(name, value if value.startswith("~") else str(tmp_path / value))
            importlib.reload(hf_constants)
            assert cache_folder()[0] == Path(hf_constants.HF_HUB_CACHE), case
    finally:
        monkeypatch.undo()
        importlib.reload(hf_constants)


def test_revisions_commits_and_bare_ids(minilm, tmp_path, monkeypatch):
    table, files = minilm
    cache = tmp_path / "cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    lay_out(cache, MINILM, files)
    changed = bert_files(tmp_path / "v2", table[::-1].copy())
    lay_out(cache, MINILM, changed, revision="v2", commit=OTHER_COMMIT)
    lay_out(cache, "gpt2", files)  # a canonical id has no organisation: models--gpt2
    for given, commit, dog in ((f"{MINILM}@v2", OTHER_COMMIT, V - 1 - 5), (f"{MINILM}@{COMMIT}", COMMIT, 5),
                               ("gpt2", COMMIT, 5)):
        doc = run_json("similarity", "dog", "cat", "-c", given)
        assert doc["snapshot"] == commit, given
        rows = table[::-1] if commit == OTHER_COMMIT else table
        assert doc["pairs"][0]["cosine"] == pytest.approx(cosine(rows[5], rows[6])), given
    info = scan_cache_dir(cache)
    repo = next(r for r in info.repos if r.repo_id == MINILM)
    assert {rev.commit_hash for rev in repo.revisions} == {COMMIT, OTHER_COMMIT}
    assert repo.refs["v2"].commit_hash == OTHER_COMMIT


def test_sharded_safetensors_and_a_bin_file(tmp_path, monkeypatch):
    import torch
    cache = tmp_path / "cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    table = RNG.standard_normal((V, D)).astype(np.float32)
    source = tmp_path / "sharded"
    source.mkdir()
    save_file({"model.embed_tokens.weight": table}, source / "model-00001-of-00002.safetensors")
    save_file({"lm_head.weight": table[::-1].copy()}, source / "model-00002-of-00002.safetensors")
    (source / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
        "lm_head.weight": "model-00002-of-00002.safetensors"}}))
    lay_out(cache, "org/sharded", {p.name: p for p in source.iterdir()}, shared=True)
    doc = run_json("info", "-c", "org/sharded")
    assert doc["format"] == "safetensors (sharded)" and doc["tables"]["output"]["name"] == "lm_head.weight"
    binary = tmp_path / "bin"
    binary.mkdir()
    torch.save({"transformer.wte.weight": torch.from_numpy(table)}, binary / "pytorch_model.bin")
    lay_out(cache, "org/binary", {"pytorch_model.bin": binary / "pytorch_model.bin"})
    doc = run_json("similarity", "--ids", "3", "4", "-c", "org/binary")
    assert doc["pairs"][0]["cosine"] == pytest.approx(cosine(table[3], table[4]))


def test_sharded_bin_files_as_transformers_saves_them(tmp_path, monkeypatch):
    """pytorch_model.bin.index.json over pytorch_model-0000N-of-0000M.bin shards (save_pretrained with
    safe_serialization=False: torch.save of each shard's state dict, and the index's weight_map), in a folder and
    in the cache: the tables come from the shard that holds them, and each shard is a source of its tables (a
    cached answer checks it)."""
    import torch
    cache = tmp_path / "cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    table, head = RNG.standard_normal((V, D)).astype(np.float32), RNG.standard_normal((V, D)).astype(np.float32)
    source = tmp_path / "sharded-bin"
    source.mkdir()
    shards = {"model.embed_tokens.weight": "pytorch_model-00001-of-00002.bin",
              "model.norm.weight": "pytorch_model-00001-of-00002.bin", "lm_head.weight": "pytorch_model-00002-of-00002.bin"}
    values = {"model.embed_tokens.weight": table, "model.norm.weight": np.ones(D, np.float32), "lm_head.weight": head}
    for shard in sorted(set(shards.values())):
        torch.save({name: torch.from_numpy(values[name]) for name, held in shards.items() if held == shard},
                   source / shard)
    (source / "pytorch_model.bin.index.json").write_text(json.dumps({"metadata": {"total_size": 0},
                                                                     "weight_map": shards}))
    (source / "config.json").write_text(json.dumps({"model_type": "llama", "tie_word_embeddings": False}))
    for checkpoint in (str(source), str(source / "pytorch_model.bin.index.json")):
        doc = run_json("info", "-c", checkpoint)
        assert doc["format"] == "pytorch (sharded)" and doc["tables"]["output"]["name"] == "lm_head.weight"
    lay_out(cache, "org/sharded-bin", {p.name: p for p in source.iterdir()})
    doc = run_json("params", "-c", "org/sharded-bin")
    assert doc["total"] == 2 * V * D + D and doc["output"] == V * D
    doc = run_json("similarity", "--ids", "3", "4", "-c", "org/sharded-bin")
    assert doc["pairs"][0]["cosine"] == pytest.approx(cosine(table[3], table[4]))
    emb = embscope.open(source)
    assert [path.name for path in emb.token.tensor.sources] == ["pytorch_model-00001-of-00002.bin"]
    assert [path.name for path in emb.output.tensor.sources] == ["pytorch_model-00002-of-00002.bin"]
    (source / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": {"lm_head.weight": "../x.bin"}}))
    result = run("info", "-c", source / "pytorch_model.bin.index.json", code=1)
    assert "names shard '../x.bin', which is not in" in result.stderr


def cached_with_a_second_revision(tmp_path, monkeypatch, table, files) -> None:
    """MiniLM in a hub cache of its own ($HF_HUB_CACHE), with a revision v2 whose token table is doubled."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    lay_out(cache, MINILM, files)
    lay_out(cache, MINILM, bert_files(tmp_path / "v2", (table * 2).astype(np.float32)), revision="v2",
            commit=OTHER_COMMIT)


def test_compare_and_report_take_ids(minilm, tmp_path, monkeypatch):
    table, files = minilm
    cached_with_a_second_revision(tmp_path, monkeypatch, table, files)
    doc = run_json("compare", MINILM, f"{MINILM}@v2")
    assert doc["checkpoint"] == MINILM
    assert [Path(c["path"]).parent.name for c in doc["checkpoints"]] == [COMMIT, OTHER_COMMIT]
    assert doc["tables"]["token"]["mean_row_cosine"] == pytest.approx(1.0)  # doubled rows point the same way
    out = tmp_path / "report.html"
    # the page's naming of the id is the point: its figures (three quarters of a report's CPU) are left out as on
    # an install without matplotlib; tests/test_report.py checks pages with them
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    doc = json.loads(run("report", "-c", MINILM, "--out", out, "--json").stdout)
    assert (doc["model_id"], doc["snapshot"]) == (MINILM, COMMIT)
    assert f"{MINILM} from the Hugging Face cache, snapshot {COMMIT}" in out.read_text()


def test_an_id_not_in_the_cache_says_where_it_looked_and_how_to_fetch_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.json").write_text("{}")
    result = run("info", "-c", "org/absent", code=1)
    assert result.stderr == (f"Error: expected a checkpoint file or directory at 'org/absent', or the model "
                             f"'org/absent' in the Hugging Face cache '{tmp_path / 'home' / 'hub'}' ($HF_HOME/hub), "
                             "found neither; to fetch it: hf download org/absent (or huggingface-cli download "
                             "org/absent)\n")
    config = {"config.json": tmp_path / "home" / "config.json"}
    lay_out(tmp_path / "home" / "hub", "org/pinned", config, revision=COMMIT)
    result = run("info", "-c", "org/pinned", code=1)  # fetched by commit only: no refs/main
    assert f"found none; the cache holds snapshot {COMMIT} (name one as org/pinned@<commit>); to fetch it" \
        in result.stderr
    result = run("info", "-c", "org/absent@v1.0", code=1)
    assert "hf download org/absent --revision v1.0 (or huggingface-cli download org/absent --revision v1.0)" \
        in result.stderr
    # a path that cannot be an id, or names a file, keeps the plain message
    result = run("info", "-c", tmp_path / "missing.pt", code=1)
    missing = tmp_path / "missing.pt"
    assert result.stderr == f"Error: expected a checkpoint file or directory, found nothing at '{missing}'\n"
    monkeypatch.chdir(tmp_path)
    result = run("info", "-c", "ckpt.pt", code=1)
    assert result.stderr == "Error: expected a checkpoint file or directory, found nothing at 'ckpt.pt'\n"


def hostile(cache: Path, files: dict[str, Path], case: str, tmp_path: Path) -> None:
    storage = cache / "models--org--bad"
    snapshot = lay_out(cache, "org/bad", files)
    if case == "a link out of the cache":
        (tmp_path / "secret.safetensors").write_bytes((snapshot / "model.safetensors").read_bytes())
        (snapshot / "model.safetensors").unlink()
        (snapshot / "model.safetensors").symlink_to(tmp_path / "secret.safetensors")
    elif case == "a link loop":
        (snapshot / "vocab.txt").symlink_to("vocab.txt")
    elif case == "a dangling link":
        (snapshot / "model.safetensors").resolve().unlink()
    elif case == "refs/main a FIFO":
        (storage / "refs" / "main").unlink()
        os.mkfifo(storage / "refs" / "main")
    elif case == "refs/main huge":
        (storage / "refs" / "main").write_bytes(b"a" * 10**6)
    elif case == "refs/main not a hash":
        (storage / "refs" / "main").write_text("../../../etc")
    elif case == "snapshots a link out of the cache":  # round four's r11: the folder above the snapshot
        outside = tmp_path / "elsewhere"
        shutil.copytree(storage / "snapshots", outside, symlinks=False)
        shutil.rmtree(storage / "snapshots")
        (storage / "snapshots").symlink_to(outside)
    elif case == "a link through 200 folders":  # round four's r04: one lstat a folder, and a stated depth
        deep = storage.joinpath("blobs", *["d"] * 200)
        deep.mkdir(parents=True)
        (deep / "f").write_text("x")
        (snapshot / "extra.txt").symlink_to(os.path.join("..", "..", "blobs", *["d"] * 200, "f"))


HOSTILE = {
    "a link out of the cache": (rf"^'model.safetensors' in org/bad from the Hugging Face cache, snapshot {COMMIT} "
                                r"\(main\) is a link to '.*secret.safetensors', outside the Hugging Face cache "
                                r"'.*cache'; refused$"),
    "a link loop": r"^'vocab.txt' in org/bad .* is a link that loops back on itself; refused$",
    "a dangling link": r"^'model.safetensors' in org/bad .* is a link to '\.\./\.\./blobs/[0-9a-f]+', which is not "
                       r"there",
    "refs/main a FIFO": r"expected a file holding a commit hash, found a named pipe \(FIFO\) at '.*refs/main'",
    "refs/main huge": r"expected a file holding a commit hash of at most 256 bytes, found 1,000,000 bytes at "
                      r"'.*refs/main'",
    "refs/main not a hash": r"expected a 40-character commit hash in '.*refs/main', found '\.\./\.\./\.\./etc'",
    "snapshots a link out of the cache": r"^'.*models--org--bad/snapshots' for org/bad .* is a link to "
                                         r"'.*elsewhere', outside the Hugging Face cache '.*cache'; refused$",
    "a link through 200 folders": r"^'extra.txt' in org/bad .* is a link through more than 64 folders; refused$",
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_broken_or_hostile_cache_entry_is_one_line(case, minilm, tmp_path, monkeypatch):
    _, files = minilm
    cache = tmp_path / "cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    hostile(cache, files, case, tmp_path)
    with pytest.raises(CheckpointError, match=HOSTILE[case]):
        embscope.open("org/bad")
    result = run("info", "-c", "org/bad", code=1)
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1


def test_an_onnx_export_in_the_cache_reads_its_external_data_through_the_blobs(tmp_path, monkeypatch):
    import onnx
    from onnx import helper, numpy_helper
    cache = tmp_path / "cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    table = RNG.standard_normal((V, D)).astype(np.float32)
    source = tmp_path / "export"
    source.mkdir()
    graph = helper.make_graph([], "g", [], [], [numpy_helper.from_array(table, "embeddings.word_embeddings.weight")])
    onnx.save_model(helper.make_model(graph), str(source / "model.onnx"), save_as_external_data=True,
                    location="model.onnx_data", size_threshold=0)
    snapshot = lay_out(cache, "org/exported", {f"onnx/{p.name}": p for p in source.iterdir()})
    emb = embscope.open(snapshot / "onnx")
    np.testing.assert_array_equal(emb.token.array, table)


def test_a_model_whose_weights_are_only_an_onnx_export_answers_by_its_id(minilm, tmp_path, monkeypatch):
    """transformers.js and optimum repositories (Xenova/...) hold config.json and tokenizer.json at the top and
    the weights only in onnx/ (model.onnx beside model_quantized.onnx, model_fp16.onnx, ...): the id opens
    onnx/model.onnx, with the tokenizer above it; a folder of several exports and no model.onnx names them."""
    import onnx
    from onnx import helper, numpy_helper
    table, files = minilm
    cache = tmp_path / "cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    export = tmp_path / "export"
    export.mkdir()
    for name, values in (("model.onnx", table), ("model_fp16.onnx", table.astype(np.float16))):
        graph = helper.make_graph([], "g", [], [], [numpy_helper.from_array(values, "embeddings.word_embeddings.weight")])
        onnx.save_model(helper.make_model(graph), str(export / name))
    laid = {"config.json": files["config.json"], "tokenizer.json": files["tokenizer.json"],
            **{f"onnx/{p.name}": p for p in export.iterdir()}}
    snapshot = lay_out(cache, "Xenova/tiny-minilm", laid)
    doc = run_json("similarity", "dog", "cat", "-c", "Xenova/tiny-minilm")
    assert doc["checkpoint"].endswith("onnx/model.onnx")
    assert doc["pairs"][0]["cosine"] == pytest.approx(cosine(table[WORDS.index("dog")], table[WORDS.index("cat")]))
    (snapshot / "onnx" / "model.onnx").unlink()
    (snapshot / "onnx" / "model_quantized.onnx").symlink_to(os.readlink(snapshot / "onnx" / "model_fp16.onnx"))
    result = run("info", "-c", "Xenova/tiny-minilm", code=1)
    assert "holds several ONNX exports in onnx/ ('model_fp16.onnx', 'model_quantized.onnx'); pass one with -c" in \
        " ".join(result.stderr.split())


def test_no_huggingface_hub_and_no_network_at_run_time(tmp_path, minilm):
    _, files = minilm
    cache = tmp_path / "cache"
    lay_out(cache, MINILM, files)
    code = ("import sys, socket\n"
            "def refuse(*a, **k): raise AssertionError('network')\n"
            "socket.socket.connect = refuse\n"
            "import embscope\n"
            f"emb = embscope.open({MINILM!r})\n"
            "print(emb.token.rows, 'huggingface_hub' in sys.modules)")
    env = {**os.environ, "HF_HUB_CACHE": str(cache)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                          check=False)
    assert done.stdout.split() == [str(V), "False"], done.stderr


@pytest.mark.slow  # seconds of subprocesses: CI's slow step runs it; a cheaper test of the same feature stays in the suite
def test_one_label_for_a_model_id_in_every_output_name(minilm, tmp_path, monkeypatch):
    """Issue 32: for a model id the report was `all-MiniLM-L6-v2-report.html` while its plots were
    `sentence-transformers--all-MiniLM-L6-v2-*.png`: the report, the plots and compare's plot share one label."""
    table, files = minilm
    cached_with_a_second_revision(tmp_path, monkeypatch, table, files)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    run("report", "-c", MINILM)
    run("norms", "-c", MINILM, "--table", "token", "--plot")
    run("compare", MINILM, f"{MINILM}@v2", "--sample", "0", "--plot")
    label = MINILM.replace("/", "--")
    assert sorted(p.name for p in work.iterdir()) == [f"{label}-compare.png", f"{label}-report.html",
                                                      f"{label}-token-norms.png"]
