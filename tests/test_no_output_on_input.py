"""No output lands on a file the answer was read from, whatever kind of input it is and whatever name reaches
it: a safetensors shard, ONNX external data, a tokenizer file, a config, a symbolic link to one, a hard link
to one. The names are ones no suffix list could know (a shard called out.tsv, external data called
norms.png), since an index and an ONNX model may name their files anything. Each refusal is one line, exit
1, and the input's bytes are unchanged. Underneath: embscope.core.files records every file read, by device and
inode (its own tests here)."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path

import numpy as np
import pytest
import reader_samples
from conftest import run

from embscope.core import files
from embscope.core.errors import CheckpointError, EmbscopeError

V, D = 64, 8
REFUSED = "a file this answer was read from: it is never written over\n"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def shard_named(directory: Path, shard: str) -> Path:
    """A sharded safetensors checkpoint whose token table lies in a shard the index calls `shard`."""
    data = np.random.default_rng(1).standard_normal((V, D)).astype("<f4").tobytes()
    header = json.dumps({"wte.weight": {"dtype": "F32", "shape": [V, D], "data_offsets": [0, len(data)]}}).encode()
    (directory / shard).write_bytes(struct.pack("<Q", len(header)) + header + data)
    (directory / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"wte.weight": shard}}))
    return directory / "model.safetensors.index.json"


def external_named(directory: Path, data_file: str) -> Path:
    """An ONNX model (onnx's own writer) whose tables are external data in a file called `data_file`."""
    entry, _ = reader_samples.onnx_bert_int8(directory)
    import onnx
    model = onnx.load(str(entry))
    onnx.save_model(model, str(entry), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=data_file, size_threshold=0)
    return entry


def refused(args: list[object], target: Path, what: str) -> None:
    before = digest(target)
    result = run(*args, code=1)
    assert result.stderr.startswith(f"Error: expected {what} to name a new file, found ") and \
        result.stderr.endswith(REFUSED), result.stderr
    assert digest(target) == before


@pytest.mark.parametrize("command", [["neighbors", "--all", "-k", "2", "--out"], ["norms", "--table", "token", "--plot"],
                                     ["export", "--format", "word2vec", "--out"]])
def test_a_shard_is_never_written_over(tmp_path, command):
    suffix = {"neighbors": "out.tsv", "norms": "plot.png", "export": "vectors.txt"}[command[0]]
    index = shard_named(tmp_path, suffix)
    refused([*command, tmp_path / suffix, "-c", index], tmp_path / suffix,
            "the plot file" if command[0] == "norms" else "--out")
    run("info", "-c", index)  # still the checkpoint it was


@pytest.mark.parametrize("data_file, command, what", [
    ("n.npz", ["neighbors", "--all", "-k", "2", "--out"], "--out"),
    ("norms.png", ["norms", "--table", "token", "--plot"], "the plot file"),
    ("report.html", ["report", "--out"], "the report file"),
])
def test_onnx_external_data_is_never_written_over(tmp_path, data_file, command, what):
    entry = external_named(tmp_path, data_file)
    refused([*command, tmp_path / data_file, "-c", entry], tmp_path / data_file, what)


def test_an_export_folder_holding_the_external_data_keeps_it(tmp_path):
    """export --out FOLDER writes vectors.tsv there: the model's external data may have that very name."""
    entry = external_named(tmp_path, "vectors.tsv")
    refused(["export", "--out", tmp_path, "-c", entry], tmp_path / "vectors.tsv", "the vectors file")


def test_a_tokenizer_file_is_never_written_over(tmp_path):
    """A tokenizer given by --tokenizer from elsewhere, whose name is an output's: a tiktoken file named .tsv."""
    from safetensors.numpy import save_file
    (tmp_path / "ckpt").mkdir()
    save_file({"wte.weight": np.random.default_rng(2).standard_normal((300, D)).astype(np.float32)},
              str(tmp_path / "ckpt" / "model.safetensors"))
    tokenizer = tmp_path / "tokens.tsv"
    import base64
    tokenizer.write_bytes(b"".join(base64.b64encode(bytes([b])) + b" %d\n" % b for b in range(256)))
    refused(["neighbors", "--all", "-k", "2", "--out", tokenizer, "--tokenizer", tokenizer,
             "-c", tmp_path / "ckpt" / "model.safetensors"], tokenizer, "--out")


def test_a_tokenizer_named_but_not_loaded_is_never_written_over(tmp_path):
    """--tokenizer names a file that does not load (a tokenizer.json called tok.png): the answer goes on without
    token names, and the file the user named as an input is still never the plot."""
    from safetensors.numpy import save_file
    (tmp_path / "ckpt").mkdir()
    save_file({"wte.weight": np.random.default_rng(2).standard_normal((300, D)).astype(np.float32)},
              str(tmp_path / "ckpt" / "model.safetensors"))
    tokenizer = tmp_path / "tok.png"
    tokenizer.write_text(json.dumps({"model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}}))
    refused(["norms", "--table", "token", "--plot", tokenizer, "--tokenizer", tokenizer,
             "-c", tmp_path / "ckpt" / "model.safetensors"], tokenizer, "the plot file")


@pytest.mark.parametrize("link", ["symbolic", "hard"])
@pytest.mark.parametrize("input_kind", ["config", "shard", "external data"])
def test_a_link_to_an_input_is_never_written_through(tmp_path, link, input_kind):
    """The output named by a link (symbolic or hard, in another folder) to a config, shard or external data."""
    (tmp_path / "model").mkdir()
    (tmp_path / "out").mkdir()
    if input_kind == "external data":
        entry, source = external_named(tmp_path / "model", "weights.bin"), tmp_path / "model" / "weights.bin"
    else:
        entry = shard_named(tmp_path / "model", "model-00001-of-00001.safetensors")
        source = tmp_path / "model" / "model-00001-of-00001.safetensors"
        if input_kind == "config":
            source = tmp_path / "model" / "config.json"
            source.write_text(json.dumps({"model_type": "gpt2", "n_positions": 4}))
    target = tmp_path / "out" / "rows.tsv"
    target.symlink_to(source) if link == "symbolic" else os.link(source, target)
    refused(["neighbors", "--all", "-k", "2", "--out", target, "-c", entry], source, "--out")
    assert target.is_symlink() == (link == "symbolic")  # the link itself is left as it was too


# --- the record itself --------------------------------------------------------------------------

def test_every_name_of_a_file_read_is_known_and_nothing_else(tmp_path):
    read, other = tmp_path / "read.json", tmp_path / "other.json"
    for path in (read, other):
        path.write_text("{}")
    (tmp_path / "hard").mkdir()
    os.link(read, tmp_path / "hard" / "x.tsv")
    (tmp_path / "soft.tsv").symlink_to(read)
    with files.reading(files.ReadLog()) as log:
        assert files.read_json(read, 100) == {}
        assert all(files.was_read(p) for p in (read, tmp_path / "hard" / "x.tsv", tmp_path / "soft.tsv",
                                               Path(os.path.relpath(read))))
        assert not files.was_read(other) and not files.was_read(tmp_path / "missing")
        assert files.peek(other, 2) == b"{}" and not files.was_read(other)  # a sniff's look is no read
        with pytest.raises(EmbscopeError, match="a file this answer was read from"):
            files.refuse_input(tmp_path / "soft.tsv", "--out")
        files.refuse_input(other, "--out")  # not read: may be written
        with files.reading(files.ReadLog()) as inner:  # a run inside: its reads are the outer run's too
            files.read_json(other, 100)
            assert files.was_read(other) and not files.was_read(read)
        assert files.was_read(other) and inner.paths() == [os.path.abspath(other)]
    assert not files.was_read(read) and log.was_read(read)  # the record ended with its run, and is the run's
    files.read_json(read, 100)  # outside any run (a notebook): nothing is recorded, nothing grows
    with files.reading(files.ReadLog()):
        assert not files.was_read(read)


def test_a_file_read_then_deleted_is_not_confused_with_its_inode_s_next_owner(tmp_path):
    path = tmp_path / "a.bin"
    path.write_bytes(b"x")
    log = files.ReadLog()
    with files.reading(log):
        files.read_bytes(path, 10)
    key = (path.stat().st_dev, path.stat().st_ino)
    path.unlink()
    reused = tmp_path / "b.bin"
    for n in range(200):  # a new file very often takes the inode just freed
        reused.write_bytes(b"y")
        if (reused.stat().st_dev, reused.stat().st_ino) == key:
            break
        reused.unlink()
    assert not log.was_read(reused)


@pytest.mark.parametrize("make", ["fifo", "directory", "device"])
def test_the_reading_module_refuses_what_is_not_a_regular_file_in_one_line(tmp_path, make):
    path = tmp_path / "config.json"
    if make == "fifo":
        os.mkfifo(path)
        expected = "a named pipe (FIFO)"
    elif make == "directory":
        path.mkdir()
        expected = "a directory"
    else:
        path.symlink_to("/dev/zero")
        expected = "a character device"
    for read in (lambda: files.read_bytes(path, 10, "a config"), lambda: files.read_json(path, 10, "a config"),
                 lambda: files.map_file(path, "a config"), lambda: files.read_at(path, 0, 4, "a config")):
        with pytest.raises(CheckpointError) as caught:
            read()
        assert str(caught.value).startswith(f"expected a config, found {expected} at ")
    assert files.peek(path, 4) is None and not files.was_read(path)


def test_reads_are_bounded_and_text_reads_as_path_read_text_does(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes(b"a\r\nb\rc\n")
    assert files.read_text(path, 7) == path.read_text(encoding="utf-8") == "a\nb\nc\n"
    with pytest.raises(CheckpointError) as caught:
        files.read_bytes(path, 6, "a vocabulary")
    assert str(caught.value) == f"expected a vocabulary of at most 6 bytes, found 7 bytes at '{path}'"
    assert len(files.read_bytes("/proc/self/status", 1 << 16, record=False)) > 0  # a size of 0 is read to its end


def test_a_library_that_opens_the_path_itself_opens_the_file_checked(tmp_path):
    """h5py gets /proc/self/fd/N of the descriptor checked: the path swapped for a FIFO afterwards is never opened."""
    path = tmp_path / "model.h5"
    path.write_bytes(b"weights")
    with files.opened_path(path) as name:
        path.unlink()
        os.mkfifo(path)
        with open(name, "rb") as reopened:  # as the library would
            assert reopened.read() == b"weights"
