"""numpy .npy and .npz: headers parsed without unpickling, stored members memory-mapped."""

from __future__ import annotations

import numpy as np
import pytest

import embscope
from embscope.core.errors import CheckpointError

rng = np.random.default_rng(1)


def test_npz_arrays_are_mapped_and_step_is_metadata(tmp_path):
    token, pos = rng.standard_normal((40, 6)).astype(np.float32), rng.standard_normal((12, 6)).astype(np.float32)
    np.savez(tmp_path / "m.npz", token_emb=token, pos_emb=pos, step=np.array(1234))
    emb = embscope.open(tmp_path / "m.npz")
    assert emb.checkpoint.step == 1234 and "step" not in emb.checkpoint.tensors
    assert isinstance(emb.token.array, np.memmap)
    np.testing.assert_array_equal(emb.token.array, token)
    np.testing.assert_array_equal(emb.position.array, pos)


def test_compressed_npz_reads_the_member_it_needs(tmp_path):
    token = rng.standard_normal((40, 6)).astype(np.float64)
    np.savez_compressed(tmp_path / "m.npz", wte=token)
    emb = embscope.open(tmp_path / "m.npz")
    assert emb.token.tensor.dtype == "float64"
    np.testing.assert_array_equal(emb.token.array, token.astype(np.float32))


def test_npy_is_one_table_named_after_the_file(tmp_path):
    table = rng.standard_normal((10, 3)).astype(">f4")  # big-endian on disk
    np.save(tmp_path / "token_emb.npy", table)
    emb = embscope.open(tmp_path / "token_emb.npy")
    assert emb.token.name == "token_emb" and emb.token.rule.startswith("name 'token_emb'")
    np.testing.assert_array_equal(emb.token.array, table.astype(np.float32))


def test_npy_header_declaring_more_data_than_the_file_holds(tmp_path):
    path = tmp_path / "big.npy"
    np.save(path, np.zeros((4, 4), np.float32))
    path.write_bytes(path.read_bytes()[:-8])
    with pytest.raises(CheckpointError) as err:
        embscope.open_checkpoint(path)
    assert str(err.value) == f"'{path}': header declares 64 bytes of data, the file holds 56"
