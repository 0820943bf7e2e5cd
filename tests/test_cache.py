"""The baseline cache answers only for the bytes it was computed from, and removes only its own entries.

Stale entries, by class: a shard changed under an untouched index; a file rewritten in place with its size
and modification time set back (the change time cannot be); an ONNX model's external data replaced under an
untouched model.onnx; and, where a file system keeps the same stamps, the table's own checksum, compared by
a run that reads the whole table anyway. The reference for each answer is plain numpy: the mean cosine over
every ordered pair of distinct rows of the table as it is now. Prune: only files with an entry's name and an
entry's first line are counted or removed; a checkpoint kept in the cache folder, another program's file
and a link are left alone."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import numpy as np
import pytest
import reader_samples
from conftest import run_json

from embscope import cache

V, D = 300, 16
STAMP_NS = 1_700_000_000_000_000_000


def mean_cosine(table: np.ndarray, center: bool = False) -> float:
    """The exact mean cosine over ordered pairs of distinct rows (plain numpy, the whole matrix)."""
    rows = table.astype(np.float64)
    if center:
        rows = rows - rows.mean(axis=0)
    unit = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    cosines = unit @ unit.T
    return float((cosines.sum() - np.trace(cosines)) / (len(rows) * (len(rows) - 1)))


def tables() -> tuple[np.ndarray, np.ndarray]:
    """Two tables of one shape whose mean cosines differ widely (about 0 and about +0.8)."""
    first = np.random.default_rng(0).standard_normal((V, D)).astype(np.float32)
    return first, np.abs(first) + 1.0


def write_safetensors(path: Path, name: str, table: np.ndarray) -> None:
    data = table.astype("<f4").tobytes()
    header = json.dumps({name: {"dtype": "F32", "shape": list(table.shape), "data_offsets": [0, len(data)]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)  # in place: the same inode


def baseline(checkpoint: Path, *extra: str) -> float:
    return run_json("similarity", "--ids", "1", "2", "-c", checkpoint, *extra)["baseline"]["mean_random_cosine"]


def test_a_changed_shard_under_an_untouched_index_is_computed_again(tmp_path):
    old, new = tables()
    write_safetensors(tmp_path / "model-00001-of-00002.safetensors", "wte.weight", old)
    write_safetensors(tmp_path / "model-00002-of-00002.safetensors", "wpe.weight", old[:8])
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "wte.weight": "model-00001-of-00002.safetensors", "wpe.weight": "model-00002-of-00002.safetensors"}}))
    assert baseline(tmp_path) == pytest.approx(mean_cosine(old), abs=1e-9)
    write_safetensors(tmp_path / "model-00001-of-00002.safetensors", "wte.weight", new)
    assert baseline(tmp_path) == pytest.approx(mean_cosine(new), abs=1e-9)


def test_a_rewrite_in_place_with_size_and_mtime_set_back_is_computed_again(tmp_path):
    """tar, cp -p and rsync -a keep modification times; a rewrite of the same size then looks the same but
    for its change time, which utime cannot set back. The rows that change lie past the file's first 64 KiB
    (which the identity once summed)."""
    old = np.random.default_rng(0).standard_normal((4096, D)).astype(np.float32)
    new = old.copy()
    new[1500:] = np.abs(new[1500:]) + 1.0
    path = tmp_path / "model.safetensors"
    write_safetensors(path, "wte.weight", old)
    os.utime(path, ns=(STAMP_NS, STAMP_NS))
    assert baseline(path) == pytest.approx(mean_cosine(old), abs=1e-9)
    before = path.stat()
    write_safetensors(path, "wte.weight", new)
    os.utime(path, ns=(STAMP_NS, STAMP_NS))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    assert baseline(path) == pytest.approx(mean_cosine(new), abs=1e-9)


def test_replaced_onnx_external_data_under_an_untouched_model_is_computed_again(tmp_path):
    old, new = tables()
    entry = reader_samples.write_onnx(tmp_path / "model.onnx", {"embeddings.word_embeddings.weight": old},
                                      external="weights.bin")
    assert baseline(entry) == pytest.approx(mean_cosine(old), abs=1e-9)
    assert (tmp_path / "weights.bin").stat().st_size == old.nbytes  # the one tensor, at offset 0
    (tmp_path / "weights.bin").write_bytes(new.astype("<f4").tobytes())  # the same layout, new weights
    assert baseline(entry) == pytest.approx(mean_cosine(new), abs=1e-9)


def test_where_the_stamps_stay_the_same_a_pass_over_the_table_still_sees_new_bytes(tmp_path, monkeypatch):
    """A file system that keeps every stamp (simulated: the identity made constant) is caught by the table's
    CRC-32, which a centred run takes in the mean row's pass and compares with the entry's."""
    monkeypatch.setattr(cache, "file_identity", lambda path: [["model.npz", 0, 0, 0, 0, 0]])
    old, new = tables()
    path = tmp_path / "model.npz"
    np.savez(path, token_emb=old)
    assert baseline(path, "--center") == pytest.approx(mean_cosine(old, center=True), abs=1e-9)
    np.savez(path, token_emb=new)
    assert baseline(path, "--center") == pytest.approx(mean_cosine(new, center=True), abs=1e-9)


def test_a_cached_run_reads_no_byte_of_the_table_for_the_baseline(tmp_path, monkeypatch):
    old, _ = tables()
    path = tmp_path / "model.npz"
    np.savez(path, token_emb=old)
    first = baseline(path)

    def no_pass(*args, **kwargs):
        raise AssertionError("the table was read whole")
    monkeypatch.setattr("embscope.compute.random_pairs", no_pass)
    monkeypatch.setattr("embscope.compute.rows.row_blocks", no_pass)
    assert baseline(path) == first


# --- prune and store: only the cache's own entries -------------------------------------------------

def entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if cache.ENTRY_NAME.fullmatch(p.name))


def test_prune_removes_only_its_oldest_entries_and_leaves_every_other_file(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(cache, "MAX_ENTRIES", 3)
    folder = tmp_path / "embscope"
    folder.mkdir()
    np.save(folder / "token_emb.npy", np.ones((4, 2), np.float32))  # a checkpoint kept there (r07)
    foreign = {"token_emb.npy": (folder / "token_emb.npy").read_bytes(), "notes.entry": b"mine",
               "0123456789abcdef.entry": b"another program's file with an entry's name",
               "fedcba9876543210.npy": b"\x93NUMPY an older layout, or anyone's array"}
    for name, data in foreign.items():
        (folder / name).write_bytes(data)
    (folder / "00000000000000aa.entry").symlink_to(folder / "token_emb.npy")  # a link with an entry's name
    descriptions = [json.dumps([cache.VERSION, "random-pairs", [], {"n": n}]) for n in range(6)]
    for n, description in enumerate(descriptions):
        cache.store(description, [float(n)], n)
        os.utime(cache.entry_path(description), ns=(STAMP_NS + n, STAMP_NS + n))  # oldest first
    kept = [cache.entry_path(d).name for d in descriptions[-3:]]
    assert entries(folder) == sorted([*kept, "0123456789abcdef.entry", "00000000000000aa.entry"])
    assert {name: (folder / name).read_bytes() for name in foreign} == foreign
    assert (folder / "00000000000000aa.entry").is_symlink()
    assert [list(cache.load(d) or []) for d in descriptions] == [[], [], [], [3.0], [4.0], [5.0]]


def test_a_checkpoint_read_from_the_cache_folder_is_never_removed(tmp_path, monkeypatch):
    """r07: prune removed every *.npy of the folder, the checkpoint this very run read included."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(cache, "MAX_ENTRIES", 0)  # prune as hard as it can after the entry is stored
    folder = tmp_path / "embscope"
    folder.mkdir()
    path = folder / "token_emb.npy"
    np.save(path, tables()[0])
    before = path.read_bytes()
    assert baseline(path) == pytest.approx(mean_cosine(tables()[0]), abs=1e-9)
    assert path.read_bytes() == before


def test_a_file_holding_an_entry_s_name_is_not_replaced(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    description = json.dumps([cache.VERSION, "random-pairs", [], {}])
    target = cache.entry_path(description)
    target.parent.mkdir()
    target.write_bytes(b"not an entry")
    cache.store(description, [1.0], 0)
    assert target.read_bytes() == b"not an entry" and cache.load(description) is None
    target.unlink()
    cache.store(description, [1.0], 0)
    cache.store(description, [2.0], 0)  # its own entry is replaced
    assert list(cache.load(description)) == [2.0]


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
