"""Keras 3's default save format, the `.keras` zip (config.json, metadata.json, model.weights.h5): files Keras
itself writes (torch backend, CPU; `slow`, since importing Keras costs seconds), the same layout written with
h5py and zipfile as Keras 3.15 writes it (in the README's command), and hostile zips, each refused in one line."""

from __future__ import annotations

import hashlib
import io
import os
import struct
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import cosine, invoke, keras_position_embedding, run_json
from reader_samples import keras_weights_h5, write_keras_zip

import embscope
from embscope.core.errors import CheckpointError

os.environ.setdefault("KERAS_BACKEND", "torch")
V, T, D = 50, 8, 16


def norms_figures(table: np.ndarray) -> dict[str, float]:
    norms = np.sqrt((table.astype(np.float64) ** 2).sum(axis=1))
    return {"mean": norms.mean(), "median": float(np.median(norms)), "min": norms.min(), "max": norms.max()}


def check_figures(path: Path, token: np.ndarray, position: np.ndarray, total: int) -> None:
    """info, norms, similarity and params through the command line, against plain numpy on the tables."""
    info = run_json("info", "-c", path)
    assert info["format"] == "Keras .keras"
    assert info["tables"]["token"]["shape"] == [V, D] and info["tables"]["position"]["shape"] == [T, D]
    for table, values in (("token", token), ("position", position)):
        doc = run_json("norms", "--table", table, "-c", path)
        assert doc["rows"] == len(values)
        for key, expected in norms_figures(values).items():
            assert doc[key] == pytest.approx(expected, rel=1e-6), (table, key)
    (pair,) = run_json("similarity", "--ids", "3", "7", "-c", path)["pairs"]
    assert pair["cosine"] == pytest.approx(cosine(token[3], token[7]), abs=1e-6)
    params = run_json("params", "-c", path)
    assert (params["total"], params["token"], params["position"]) == (total, V * D, T * D)


def deflated_copy(path: Path, target: Path) -> Path:
    """The same archive with every member deflated (a .keras someone re-zipped): read by inflating, bounded."""
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as out:
        for info in source.infolist():
            out.writestr(info.filename, source.read(info), zipfile.ZIP_DEFLATED)
    return target


def keras_writes(folder: Path) -> dict[str, tuple[Path, np.ndarray, np.ndarray, int]]:
    """name -> (the .keras Keras wrote, token table, position table, model.count_params()), the tables from the
    layers' get_weights(). Keras costs seconds to import, so one test writes them all."""
    import keras

    PositionEmbedding = keras.saving.register_keras_serializable(package="embscope_tests")(
        keras_position_embedding(keras))

    made = {}
    keras.backend.clear_session()
    ids, at = keras.Input((T,), dtype="int32", name="ids"), keras.Input((T,), dtype="int32", name="positions")
    # the position Embedding is called first: Keras files it as layers/embedding, the path that by name alone
    # is a model's first Embedding, the token table; config.json's names say which is which
    pos, tok = keras.layers.Embedding(T, D, name="pos"), keras.layers.Embedding(V, D, name="tok")
    model = keras.Model([ids, at], keras.layers.Dense(V, name="head")(pos(at) + tok(ids)))
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(0)
    inputs = [rng.integers(0, V, (16, T)).astype("int32"), np.tile(np.arange(T, dtype="int32"), (16, 1))]
    model.fit(inputs, rng.integers(0, V, (16, T)).astype("int32"), epochs=2, verbose=0)  # Adam's state is saved too
    model.save(folder / "functional.keras")
    made["functional"] = (folder / "functional.keras", tok.get_weights()[0], pos.get_weights()[0],
                          model.count_params())

    keras.backend.clear_session()
    token, position = keras.layers.ReversibleEmbedding(V, D, name="token_embedding"), PositionEmbedding(T)
    hub = keras.Model(ids := keras.Input((T,), dtype="int32"), token(position(token(ids)), reverse=True))
    hub.save(folder / "hub.keras")
    made["keras-hub layers"] = (folder / "hub.keras", token.get_weights()[0], position.get_weights()[0],
                                hub.count_params())
    return made


@pytest.mark.slow  # importing Keras costs seconds; test_the_layout_keras_writes (h5py + zipfile) runs in the README's command
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # keras's torch backend, on numpy 2's copy keyword
@pytest.mark.filterwarnings("ignore::UserWarning")  # keras: a compiled model's build of its metrics
def test_files_keras_writes(tmp_path):
    written = keras_writes(tmp_path)
    path, token, position, total = written["functional"]
    with zipfile.ZipFile(path) as zf:  # what Keras writes: three members, stored
        assert [(i.filename, i.compress_type) for i in zf.infolist()] == [
            ("metadata.json", zipfile.ZIP_STORED), ("config.json", zipfile.ZIP_STORED),
            ("model.weights.h5", zipfile.ZIP_STORED)]
    before = hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns
    emb = embscope.open(path)
    assert (emb.token.name, emb.position.name) == ("layers.embedding_1.vars.0", "layers.embedding.vars.0")
    assert emb.token.rule == "config.json: Keras layer 'tok' (Embedding), whose name says token"
    assert emb.position.rule == "config.json: Keras layer 'pos' (Embedding), whose name says position"
    np.testing.assert_array_equal(emb.token.array, token)
    np.testing.assert_array_equal(emb.position.array, position)
    assert isinstance(emb.token.array.base, np.memmap) or isinstance(emb.token.array, np.memmap)  # read in place
    check_figures(path, token, position, total)
    notes = run_json("info", "-c", path)["notes"]
    assert any("10 datasets under 'optimizer'" in note for note in notes)  # Adam's state: not parameters
    assert (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns) == before  # never written

    deflated = deflated_copy(path, tmp_path / "deflated.keras")
    check_figures(deflated, token, position, total)
    assert any("inflated into memory" in note for note in run_json("info", "-c", deflated)["notes"])

    path, token, position, total = written["keras-hub layers"]
    emb = embscope.open(path)
    assert (emb.token.name, emb.position.name) == ("layers.reversible_embedding.vars.0",
                                                   "layers.position_embedding.vars.0")
    assert emb.token.rule == "config.json: Keras layer 'token_embedding' (ReversibleEmbedding)"
    assert emb.position.rule == "config.json: Keras layer 'position_embedding' (PositionEmbedding)"
    check_figures(path, token, position, total)


def layout(rng: np.random.Generator) -> tuple[list, np.ndarray, np.ndarray, int]:
    """The functional model of the slow test above, as Keras 3.15 lays it out (its names checked there)."""
    token, position = rng.standard_normal((V, D)).astype(np.float32), rng.standard_normal((T, D)).astype(np.float32)
    kernel, bias = rng.standard_normal((D, V)).astype(np.float32), rng.standard_normal(V).astype(np.float32)
    layers = [("layers/embedding", "pos", "Embedding", [position]), ("layers/embedding_1", "tok", "Embedding", [token]),
              ("layers/dense", "head", "Dense", [kernel, bias]),
              ("optimizer", "adam", "Adam", [np.array(3, np.int64), *(np.ones_like(w) for w in (position, token))])]
    return layers, token, position, token.size + position.size + kernel.size + bias.size


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_LZMA])
def test_the_layout_keras_writes(compression, tmp_path):
    layers, token, position, total = layout(np.random.default_rng(5))
    path = write_keras_zip(tmp_path / "model.keras", layers, compression)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    emb = embscope.open(path)
    assert (emb.token.name, emb.position.name) == ("layers.embedding_1.vars.0", "layers.embedding.vars.0")
    assert emb.token.rule == "config.json: Keras layer 'tok' (Embedding), whose name says token"
    np.testing.assert_array_equal(emb.token.array, token)
    np.testing.assert_array_equal(emb.position.array, position)
    check_figures(path, token, position, total)
    notes = run_json("info", "-c", path)["notes"]
    how = "stored in the zip, read in place" if compression == zipfile.ZIP_STORED else "inflated into memory"
    assert notes[0].startswith(".keras zip saved by Keras 3.15.1: model.weights.h5 ") and how in notes[0]
    assert "3 datasets under 'optimizer' (" in notes[1]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_a_weights_h5_leaves_its_optimizer_out_of_params_too(tmp_path):
    """model.save_weights' .weights.h5 is the same HDF5 file: a compiled model's optimizer/ group is no parameter."""
    layers, _, _, total = layout(np.random.default_rng(11))
    path = tmp_path / "model.weights.h5"
    path.write_bytes(keras_weights_h5(layers))
    assert run_json("params", "-c", path)["total"] == total
    assert any(note.startswith("3 datasets under 'optimizer' (") for note in run_json("info", "-c", path)["notes"])


def test_a_stored_member_is_mapped_at_its_offset_in_the_zip(tmp_path):
    layers, token, _, _ = layout(np.random.default_rng(6))
    path = write_keras_zip(tmp_path / "model.keras", layers)
    emb = embscope.open(path)
    table = emb.token.array
    mapped = table if isinstance(table, np.memmap) else table.base
    start = path.read_bytes().index(token.tobytes())  # where the table's bytes lie in the zip itself
    assert isinstance(mapped, np.memmap) and mapped.offset == start
    assert emb.token.tensor.storage == (str(path), start)


def test_a_chunked_compressed_dataset_inside_is_read_through_h5py(tmp_path):
    """Keras writes contiguous datasets; another writer's gzip-chunked table inside a stored member is read by h5py
    in its child, through the window on the zip, and equals the table."""
    import io

    import h5py
    token = np.random.default_rng(9).standard_normal((V, D)).astype(np.float32)
    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as f:
        group = f.create_group("layers/embedding/vars")
        group.attrs["name"] = "tok"
        group.create_dataset("0", data=token, compression="gzip", chunks=(10, D))
    path = zip_of(tmp_path / "chunked.keras", {"model.weights.h5": buffer.getvalue()})
    emb = embscope.open(path)
    assert emb.token.name == "layers.embedding.vars.0"
    np.testing.assert_array_equal(emb.token.array, token)


def test_without_config_json_the_names_decide(tmp_path):
    """Without config.json, Keras' paths name the two Embeddings by order only (layers/embedding is the position
    table here): the head's D x V kernel has the token table's rows on a side, and that decides."""
    layers, token, _, _ = layout(np.random.default_rng(7))
    path = write_keras_zip(tmp_path / "model.keras", layers)
    with zipfile.ZipFile(path) as zf:
        members = {name: zf.read(name) for name in zf.namelist() if name != "config.json"}
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    emb = embscope.open(path)
    assert emb.token.name == "layers.embedding_1.vars.0"
    assert emb.token.rule == "the Keras Embedding whose rows are a side of 'layers.dense.vars.0'"
    np.testing.assert_array_equal(emb.token.array, token)
    assert "the .keras zip holds no config.json: tables are found by their names alone" in run_json(
        "info", "-c", path)["notes"]


# --- hostile zips: one line on stderr, exit 1, nothing big read first --------------------------------------------

def refused(path: Path, *expected: str) -> str:
    result = invoke("info", "-c", path)
    assert result.exit_code == 1, (result.stdout, result.stderr, result.exception)
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr
    for text in expected:
        assert text in result.stderr, result.stderr
    return result.stderr


def zip_of(path: Path, members: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> Path:
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w", compression) as zf:
        warnings.simplefilter("ignore")  # zipfile warns of a duplicate name, which one test writes on purpose
        for name, data in members.items() if isinstance(members, dict) else members:
            zf.writestr(name, data)
    return path


def weights() -> bytes:
    layers, _, _, _ = layout(np.random.default_rng(8))
    return keras_weights_h5(layers)


def set_declared_size(path: Path, name: str, size: int) -> None:
    """Rewrite the uncompressed size a member's local header and central directory entry declare."""
    data = bytearray(path.read_bytes())
    encoded = name.encode()
    # (signature, where the size is, where the name's length is, where the name starts) in each kind of header
    for signature, size_at, length_at, name_at in ((b"PK\x03\x04", 22, 26, 30), (b"PK\x01\x02", 24, 28, 46)):
        at = data.find(signature)
        while at != -1:
            (length,) = struct.unpack_from("<H", data, at + length_at)
            if data[at + name_at:at + name_at + length] == encoded:
                struct.pack_into("<I", data, at + size_at, size)
            at = data.find(signature, at + 4)
    path.write_bytes(bytes(data))


def test_a_zip_bomb_is_refused_by_its_declared_size_before_inflating(tmp_path):
    path = zip_of(tmp_path / "bomb.keras", {"model.weights.h5": weights()}, zipfile.ZIP_DEFLATED)
    set_declared_size(path, "model.weights.h5", 0xFFFF0000)  # 4 GiB declared
    refused(path, "member 'model.weights.h5': the zip member declares 4.0 GiB, more than the 1.0 GiB embscope reads of "
            "it into memory (stored uncompressed, as Keras writes it, it is read in place at any size); refused")


def test_a_member_that_inflates_past_its_declared_size_is_refused(tmp_path):
    """A member that lies small: inflating stops at the declared size, and the rest is refused."""
    path = zip_of(tmp_path / "liar.keras", {"model.weights.h5": weights()}, zipfile.ZIP_DEFLATED)
    set_declared_size(path, "model.weights.h5", 4096)
    refused(path, "member 'model.weights.h5'", "inflates past the 4096 bytes its entry declares")


def test_the_inflating_cap_holds_for_a_real_bomb(tmp_path, monkeypatch):
    from embscope.formats import keras_zip
    monkeypatch.setattr(keras_zip, "MAX_INFLATED", 1 << 20)
    bomb = b"\x89HDF\r\n\x1a\n" + bytes((4 << 20) - 8)  # 4 MiB of zeros deflate to about 4 KB
    path = zip_of(tmp_path / "bomb.keras", {"model.weights.h5": bomb}, zipfile.ZIP_DEFLATED)
    assert path.stat().st_size < 16 << 10
    with pytest.raises(CheckpointError, match="declares 4.0 MiB, more than the 1.0 MiB embscope reads of it"):
        embscope.open(path)


def test_a_stored_member_that_declares_more_than_it_holds_is_refused(tmp_path):
    path = zip_of(tmp_path / "huge.keras", {"model.weights.h5": weights()})
    set_declared_size(path, "model.weights.h5", 1 << 31)
    refused(path, "member 'model.weights.h5'", "a stored zip member of", "declares 2,147,483,648 bytes")


@pytest.mark.parametrize("name", ["../model.weights.h5", "/etc/model.weights.h5", "assets/../../x", "C:\\x"])
def test_a_member_name_that_leaves_the_archive_is_refused(name, tmp_path):
    path = zip_of(tmp_path / "tricks.keras", {"model.weights.h5": weights(), name: b"x"})
    refused(path, "which points outside the archive; refused")


def test_a_central_directory_past_its_cap_is_refused(tmp_path, monkeypatch):
    """Caps made small here (1 MiB and 10,000 entries in earnest): 601 entries, a directory of 601 x (46 + name)."""
    from embscope.formats import keras_zip
    entries = [("model.weights.h5", weights())] + [(f"assets/{i:04d}", b"") for i in range(600)]
    path = zip_of(tmp_path / "many.keras", entries)
    directory = sum(46 + len(name) for name, _ in entries)  # each entry's fixed 46 bytes and its name
    monkeypatch.setattr(keras_zip, "MAX_CENTRAL_DIRECTORY", 16 << 10)
    refused(path, f"the .keras zip's central directory declares {directory / 1024:.1f} KiB, more than the 16.0 KiB")
    monkeypatch.undo()
    monkeypatch.setattr(keras_zip, "MAX_MEMBERS", 500)
    with pytest.raises(CheckpointError, match="the .keras zip lists 601 members, more than the 500"):
        embscope.open(path)


def test_two_members_of_one_name_are_refused(tmp_path):
    path = zip_of(tmp_path / "twice.keras", [("model.weights.h5", weights()), ("model.weights.h5", b"\x89HDF")])
    refused(path, "holds 'model.weights.h5' more than once")


def test_a_zip_inside_is_refused(tmp_path):
    inner = zip_of(tmp_path / "inner.zip", {"model.weights.h5": weights()}).read_bytes()
    refused(zip_of(tmp_path / "nested.keras", {"model.weights.h5": inner}),
            "expected an HDF5 file, found another zip archive inside the .keras zip; nested archives are refused")
    deflated = zip_of(tmp_path / "nested-deflated.keras", {"model.weights.h5": inner}, zipfile.ZIP_DEFLATED)
    refused(deflated, "found another zip archive inside")


def test_a_weights_member_that_is_not_hdf5_is_refused(tmp_path):
    refused(zip_of(tmp_path / "text.keras", {"model.weights.h5": b"these are not weights"}),
            "member 'model.weights.h5': expected an HDF5 file (its signature", "found the bytes b'these ar'")


def test_damaged_hdf5_inside_is_one_line(tmp_path):
    refused(zip_of(tmp_path / "cut.keras", {"model.weights.h5": weights()[:600]}), "member 'model.weights.h5'")


def test_npz_weights_and_missing_weights_are_named(tmp_path):
    refused(zip_of(tmp_path / "npz.keras", {"config.json": b"{}", "model.weights.npz": b"PK"}),
            "expected model.weights.h5 in the .keras zip", "model.weights.npz (saved with weights_format='npz')")
    refused(zip_of(tmp_path / "empty.keras", {"config.json": b"{}"}), "found 'config.json'")


def test_config_json_that_is_too_big_or_not_json_is_refused(tmp_path):
    path = zip_of(tmp_path / "config.keras", {"config.json": b"{" * 10, "model.weights.h5": weights()})
    refused(path, "member 'config.json': expected the JSON Keras writes")
    path = zip_of(tmp_path / "big-config.keras", {"config.json": b"{}", "model.weights.h5": weights()},
                  zipfile.ZIP_DEFLATED)
    set_declared_size(path, "config.json", 1 << 30)
    refused(path, "member 'config.json': the zip member declares 1.0 GiB, more than the 64.0 MiB")


def test_an_encrypted_member_is_refused(tmp_path):
    path = zip_of(tmp_path / "locked.keras", {"model.weights.h5": weights()})
    data = bytearray(path.read_bytes())
    for signature, flags_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.find(signature)
        data[at + flags_at] |= 1
    path.write_bytes(bytes(data))
    refused(path, "encrypted")


def test_a_broken_zip_named_keras_is_one_line(tmp_path):
    path = zip_of(tmp_path / "model.keras", {"model.weights.h5": weights()})
    path.write_bytes(path.read_bytes()[:-30])  # the central directory cut short
    refused(path, "expected a readable .keras zip archive")


def test_an_output_onto_the_keras_file_is_refused(tmp_path):
    """The .keras is recorded as read (by device and inode): an output named through a link to it is refused."""
    layers, _, _, _ = layout(np.random.default_rng(10))
    path = write_keras_zip(tmp_path / "model.keras", layers)
    before = path.read_bytes()
    (tmp_path / "link.npz").symlink_to(path)
    result = invoke("export", "-c", path, "--format", "word2vec", "--out", tmp_path / "link.npz")
    assert result.exit_code == 1 and "a file this answer was read from: it is never written over" in result.stderr
    assert path.read_bytes() == before


def test_the_central_directory_size_is_read_as_zipfile_reads_it():
    """The plain end record's size, or zip64's where a locator and its record come just before it; and the size
    this reader reads equals the one zipfile uses (its start and size of the directory)."""
    from embscope.formats._zip import END_RECORD, END_RECORD_64, central_directory_size
    plain = END_RECORD.pack(b"PK\x05\x06", 0, 0, 3, 3, 1234, 99, 0)
    assert central_directory_size(b"junk" + plain) == 1234
    record = END_RECORD_64.pack(b"PK\x06\x06", 44, 45, 45, 0, 0, 3, 3, 5 << 32, 99)
    locator = b"PK\x06\x07" + bytes(16)
    wide = END_RECORD.pack(b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    assert central_directory_size(record + locator + wide) == 5 << 32
    assert central_directory_size(b"no end record here") is None
    for data, size in ((b"junk" + plain, 1234), (record + locator + wide, 5 << 32)):
        assert zipfile._EndRecData(io.BytesIO(data))[zipfile._ECD_SIZE] == size  # zipfile's own reading


@pytest.mark.slow  # importing Keras and training cost seconds; test_untrained's keras_adam_like stand-ins (the .keras and
# the .weights.h5 layouts, by h5py + zipfile) run in the README's command
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # keras's torch backend, on numpy 2's copy keyword
@pytest.mark.filterwarnings("ignore::UserWarning")  # keras: a compiled model's build of its metrics
def test_a_model_keras_trained_with_adam_has_its_unseen_rows_found_in_both_files_it_saves(tmp_path):
    """attack19's k1: Keras 3 trains a 2,000 x 64 Embedding with Adam on Zipfian ids below 1,500 and saves it with
    model.save (.keras) and save_weights (.weights.h5). The rows never seen are exactly their initial draw; norms
    found none of them in either file, and undertrained called the most frequent rows of the .weights.h5 norm-high."""
    import keras

    keras.utils.set_random_seed(1)
    rng = np.random.default_rng(1)
    vocab, dim, length = 2000, 64, 16
    p = 1 / np.arange(1, 1501) ** 1.1
    ids = rng.choice(1500, size=(300 * 32, length), p=p / p.sum()).astype("int32")
    inputs = keras.Input((length,), dtype="int32")
    table = keras.layers.Embedding(vocab, dim, name="token_embedding")
    pooled = keras.layers.GlobalAveragePooling1D()(keras.layers.Dense(dim, activation="relu")(table(inputs)))
    model = keras.Model(inputs, keras.layers.Dense(8, activation="softmax")(pooled))
    model.compile(keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy")
    initial = np.array(table.get_weights()[0])
    model.fit(ids, ids[:, -1] % 8, batch_size=32, epochs=1, verbose=0, shuffle=False)
    model.save(tmp_path / "k1.keras")
    model.save_weights(tmp_path / "k1.weights.h5")
    trained = table.get_weights()[0]
    unchanged = np.flatnonzero((trained == initial).all(axis=1))
    seen = np.unique(ids)
    assert unchanged.tolist() == sorted(set(range(vocab)) - set(seen.tolist()))  # the unseen rows, and only they
    norms = np.linalg.norm(trained.astype(np.float64), axis=1)
    grown = np.flatnonzero(norms > 0.05 / np.sqrt(3) * 8 * (1 + 4 / np.sqrt(128)))
    for path in (tmp_path / "k1.keras", tmp_path / "k1.weights.h5"):
        doc = run_json("norms", "-c", path, "--table", "token")
        found = [i for r in doc["untrained"]["ranges"] for i in range(r["first"], r["last"] + 1)]
        assert found == unchanged.tolist(), path.name
        report = run_json("undertrained", "-c", path)
        assert len(grown) and not any("norm-high" in c["signals"] for c in report["candidates"]), path.name
