"""Large inputs stay bounded: norms are computed block by block from the memory map, and data that
cannot be mapped is refused, with the memory it needs, before it is loaded."""

from __future__ import annotations

import numpy as np
import pytest

import embscope
from embscope import memory
from embscope.errors import CheckpointError
from embscope.text import quote

rng = np.random.default_rng(7)


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_blockwise_norms_match_numpy_across_block_edges(dtype, tmp_path):
    from safetensors.numpy import save_file
    table = (rng.standard_normal((1000, 24)) * 3).astype(dtype)
    save_file({"wte": table}, str(tmp_path / "m.safetensors"))
    raw = embscope.open(tmp_path / "m.safetensors").token.tensor.read()
    rows = table.astype(np.float32).astype(np.float64)  # analysis works on float32 rows (float64 is rounded)
    expected = np.sqrt((rows ** 2).sum(axis=1))
    for block_bytes in (1, 4 * 24 * 7, 1 << 20):  # one row, 7 rows (not a divisor of 1000), all rows
        np.testing.assert_allclose(memory.row_norms(raw, dtype, block_bytes), expected, rtol=1e-12)


def test_half_precision_is_upcast_before_summing():
    row = np.full((1, 4096), 8.0, dtype=np.float16)  # sum of squares 262144 > float16 max 65504
    assert memory.row_norms(row, "float16")[0] == pytest.approx(8.0 * 64)


def test_bfloat16_rows_are_read_as_their_float32_values():
    values = np.array([[3.0, 4.0], [0.0, 0.0]], dtype=np.float32)
    stored = (values.view(np.uint32) >> 16).astype(np.uint16)  # bf16 keeps the top half of each float32
    np.testing.assert_array_equal(memory.row_norms(stored, "bfloat16"), [5.0, 0.0])


def test_nan_and_inf_rows_come_back_as_nan_and_inf_for_the_caller_to_report():
    table = np.array([[1.0, np.nan], [np.inf, 0.0], [0.0, 0.0], [3.0, 4.0]], dtype=np.float32)
    norms = memory.row_norms(table, "float32")
    assert np.isnan(norms[0]) and np.isinf(norms[1]) and norms[2] == 0.0 and norms[3] == 5.0


def test_mapped_pages_are_released_after_each_block(tmp_path):
    path = tmp_path / "t.npy"
    np.save(path, rng.standard_normal((256, 1024)).astype(np.float32))
    raw = np.load(path, mmap_mode="r")
    blocks = list(memory.row_blocks(raw, "float32", block_bytes=64 * 1024))
    assert len(blocks) == 16
    # a released block is still readable: the kernel maps the pages again from the file
    np.testing.assert_array_equal(blocks[3][1], np.load(path)[48:64])


def test_require_memory_states_what_is_needed(monkeypatch):
    monkeypatch.setattr(memory, "available_memory", lambda: 1 << 30)
    memory.require_memory(1 << 29, "x")
    with pytest.raises(CheckpointError) as caught:
        memory.require_memory(3 * (1 << 30), "table 'wte'")
    assert str(caught.value) == ("table 'wte' needs 3.0 GiB of memory to load (it cannot be memory-mapped), "
                                 "only 1.0 GiB is available")


def test_compressed_npz_member_larger_than_memory_is_refused_before_loading(tmp_path, monkeypatch):
    path = tmp_path / "params.npz"
    np.savez_compressed(path, token_emb=np.zeros((512, 256), np.float32))  # 512 KiB, compresses to almost nothing
    emb = embscope.open(path)
    monkeypatch.setattr(memory, "available_memory", lambda: 100 * 1024)
    with pytest.raises(CheckpointError) as caught:
        emb.token.array
    assert str(caught.value) == (f"{quote(path)}: array 'token_emb' needs 512.0 KiB of memory to load "
                                 "(it cannot be memory-mapped), only 100.0 KiB is available")


def test_available_memory_is_a_positive_number_here():
    available = memory.available_memory()
    assert available is None or available > 0
