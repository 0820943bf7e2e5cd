"""Large inputs stay bounded: norms are computed block by block from the memory map, and data that
cannot be mapped is refused, with the memory it needs, before it is loaded."""

from __future__ import annotations

import numpy as np
import pytest

import embscope
from embscope.analysis.norms import row_norms
from embscope.core import memory
from embscope.core.errors import CheckpointError
from embscope.core.text import quote

rng = np.random.default_rng(7)


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_blockwise_norms_match_numpy_across_block_edges(dtype, tmp_path):
    from safetensors.numpy import save_file
    table = (rng.standard_normal((1000, 24)) * 3).astype(dtype)
    save_file({"wte": table}, str(tmp_path / "m.safetensors"))
    array = embscope.open(tmp_path / "m.safetensors").token.array
    rows = table.astype(np.float32).astype(np.float64)  # analysis works on float32 rows (float64 is rounded)
    expected = np.sqrt((rows ** 2).sum(axis=1))
    for block_rows in (1, 7, None):  # one row, 7 rows (not a divisor of 1000), the default bytes budget
        np.testing.assert_allclose(row_norms(array, block_rows=block_rows), expected, rtol=1e-12)


def test_half_precision_is_upcast_before_summing(tmp_path):
    from safetensors.numpy import save_file
    save_file({"wte": np.full((2, 4096), 8.0, dtype=np.float16)}, str(tmp_path / "m.safetensors"))
    emb = embscope.open(tmp_path / "m.safetensors")
    # the squares sum to 262144, past float16's largest value 65504
    np.testing.assert_array_equal(row_norms(emb.token.array), [8.0 * 64, 8.0 * 64])


def test_mapped_pages_are_released_after_each_block(tmp_path):
    path = tmp_path / "t.npy"
    table = rng.standard_normal((256, 1024)).astype(np.float32)
    np.save(path, table)
    mapped = np.load(path, mmap_mode="r")
    block = mapped[48:64]
    memory.release(block)
    # a released block is still readable: the kernel maps the pages again from the file
    np.testing.assert_array_equal(block, table[48:64])
    np.testing.assert_allclose(row_norms(mapped, block_rows=16), np.linalg.norm(table.astype(np.float64), axis=1), rtol=1e-12)


def test_table_copy_larger_than_memory_is_refused_before_it_is_made(tmp_path, monkeypatch):
    from safetensors.numpy import save_file
    path = tmp_path / "m.safetensors"
    save_file({"wte": np.ones((256, 64), dtype=np.float16)}, str(path))  # 32 KiB stored, 64 KiB as float32
    emb = embscope.open(path)
    monkeypatch.setattr(memory, "available_memory", lambda: 40 * 1024)
    with pytest.raises(CheckpointError) as caught:
        _ = emb.token.array
    assert str(caught.value) == ("the token table 'wte' as float32 needs 64.0 KiB of memory to load "
                                 "(it cannot be memory-mapped), only 40.0 KiB is available")


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
        _ = emb.token.array
    # the member: 512 KiB of floats after a 128-byte .npy header
    assert str(caught.value) == (f"{quote(path)}: array 'token_emb' needs 512.1 KiB of memory to load "
                                 "(it cannot be memory-mapped), only 100.0 KiB is available")


def test_available_memory_is_a_positive_number_here():
    available = memory.available_memory()
    assert available is None or available > 0


def test_pickle_larger_than_memory_is_refused_before_it_is_read(tmp_path, monkeypatch):
    import pickle
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps({"params": {"token_emb": np.ones((256, 64), np.float32)}}, protocol=4))
    size = path.stat().st_size
    monkeypatch.setattr(memory, "available_memory", lambda: size - 1)  # the arrays' bytes are read once: all of it
    with pytest.raises(CheckpointError) as caught:
        embscope.open(path)
    assert str(caught.value) == (f"{quote(path)} needs {memory.size_text(size)} of memory to load "
                                 f"(it cannot be memory-mapped), only {memory.size_text(size - 1)} is available")
    monkeypatch.setattr(memory, "available_memory", lambda: size)
    assert embscope.open(path).token.array.shape == (256, 64)


def test_legacy_torch_file_is_memory_mapped_not_loaded(tmp_path, monkeypatch):
    """A legacy torch file's storages lie uncompressed in the file: mapped, so no memory check stops them."""
    import torch
    path = tmp_path / "old.pt"
    torch.save({"wte.weight": torch.ones(256, 64)}, path, _use_new_zipfile_serialization=False)
    monkeypatch.setattr(memory, "available_memory", lambda: 1024)
    table = embscope.open(path).token.array
    assert isinstance(table, np.memmap) and table.shape == (256, 64) and float(table.sum()) == 256 * 64


def test_compressed_torch_storage_larger_than_memory_is_refused(tmp_path, monkeypatch):
    import zipfile

    import torch
    real = tmp_path / "real.pt"
    torch.save({"wte.weight": torch.zeros(256, 64)}, real)
    path = tmp_path / "deflated.pt"
    with zipfile.ZipFile(real) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
    emb = embscope.open(path)
    monkeypatch.setattr(memory, "available_memory", lambda: 1024)
    with pytest.raises(CheckpointError) as caught:
        _ = emb.token.array
    assert str(caught.value) == (f"{quote(path)}: compressed storage '0' needs 64.0 KiB of memory to load "
                                 "(it cannot be memory-mapped), only 1.0 KiB is available")


# --- memory that grows with rows or arguments, not with what the file or the user can make it ---

def test_a_million_flagged_rows_stay_arrays_until_read():
    import math
    import tracemalloc

    from embscope.analysis.norms import summarize
    tracemalloc.start()
    try:
        summary = summarize(np.zeros(1_000_000))  # every row a zero row: every row flagged
        first = summary.anomalies[:20]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20  # one object per row would take some 300 MB
    assert len(summary.anomalies) == 1_000_000
    assert [a.index for a in first] == list(range(20)) and first[3].reason == "zero row"
    assert first[0].norm == 0.0 and math.isnan(first[0].ratio_to_mean)
    assert summary.anomalies[-1].index == 999_999 and list(summary.anomalies.indices[:3]) == [0, 1, 2]


def test_norms_json_lists_the_first_thousand_and_counts_all(tmp_path):
    from conftest import run_json
    path = tmp_path / "params.npz"
    np.savez_compressed(path, token_emb=np.zeros((5000, 2), np.float32))  # a few KB for 5000 zero rows
    doc = run_json("norms", "-c", str(path))
    assert doc["anomalies_found"] == 5000 and len(doc["anomalies"]) == 1000
    assert doc["anomalies"][999] == {"index": 999, "label": "#999", "norm": 0.0, "ratio_to_mean": None,
                                     "reason": "zero row", "z": 0.0}


def test_topk_output_is_sized_by_the_rows_not_by_k(tmp_path):
    path = tmp_path / "tiny.npz"
    table = np.random.default_rng(3).standard_normal((5, 4)).astype(np.float32)
    np.savez(path, token_emb=table)
    found = embscope.topk_all(embscope.open(path), 10**12)  # 10**12 columns would be 8 TB of ids
    assert found.ids.shape == found.scores.shape == (5, 5)
    assert (found.ids[:, :4] >= 0).all() and (found.ids[:, 4] == -1).all()  # every other row, then padding


def test_position_profile_of_a_long_table_never_holds_the_square(tmp_path):
    # r23: a 200k-position table of 2 columns (1.6 MB) asked for a 149 GiB cosine matrix; the profile is
    # now gathered block by block (checked on 3000 positions here), and the heatmap pooled as it goes
    import tracemalloc

    from embscope.analysis.positions import position_profile
    table = np.random.default_rng(5).standard_normal((3000, 2)).astype(np.float32)
    tracemalloc.start()
    try:
        profile, _ = position_profile(table, heatmap=False, block_rows=100)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3000 * 3000 * 4 / 4  # a quarter of the float32 matrix
    assert profile.count.tolist()[:2] == [2999, 2998]
    assert position_profile(table[:2100], block_rows=700)[1].cells.shape == (700, 700)  # cells of 3 x 3
def test_a_file_cut_short_while_mapped_ends_in_one_line_not_a_silent_sigbus(tmp_path):
    """np.save over a checkpoint truncates it first: the pages of our map past the new end raise SIGBUS.
    With the command line's handler (cli.main installs it), the process says which file changed, in one line,
    and exits 1 (run in a child: it really exits). The library alone installs none: a notebook decides."""
    import signal
    import subprocess
    import sys
    path = tmp_path / "token_emb.npy"
    np.save(path, np.ones((4096, 256), np.float32))  # 4 MiB
    code = ("import os, sys, embscope\n"
            "from embscope.analysis.norms import row_norms\n"
            "if sys.argv[2] == 'cli':\n"
            "    from embscope import sigbus\n"
            "    sigbus.install()\n"
            "table = embscope.open(sys.argv[1]).token.array\n"
            "os.truncate(sys.argv[1], 4096)\n"
            "row_norms(table)\n"
            "print('read past the end without a fault')\n")

    def child(handler: str) -> subprocess.CompletedProcess[str]:
        np.save(path, np.ones((4096, 256), np.float32))
        return subprocess.run([sys.executable, "-c", code, str(path), handler], capture_output=True, text=True,
                              timeout=60, check=False)

    assert child("library").returncode == -signal.SIGBUS  # no handler of ours: the signal's own default
    done = child("cli")
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert done.stderr == (f"Error: {quote(str(path))} changed while it was being read: it now holds 4096 bytes, "
                           f"the data read needs {128 + 4096 * 256 * 4}; nothing was written (run again once the "
                           "file is complete)\n")


def test_the_command_line_installs_the_sigbus_handler_before_it_reads(monkeypatch):
    import sys

    from embscope import cli, sigbus, stopping
    installed = []
    monkeypatch.setattr(sigbus, "install", lambda: installed.append(True))
    # main's SIGTERM and SIGHUP handlers would stay in this worker and turn its end into a KeyboardInterrupt
    monkeypatch.setattr(stopping, "install", lambda: None)
    monkeypatch.setattr(sys, "argv", ["embscope", "--version"])
    with pytest.raises(SystemExit):
        cli.main()
    assert installed == [True]


def test_release_lets_go_of_every_page_of_a_fortran_order_block(tmp_path):
    """A block of rows of a column-major table has a piece in every column; all of them are released and
    read again correctly from the file (r17: such tables stayed resident)."""
    path = tmp_path / "token_emb.npy"
    table = np.asfortranarray(rng.standard_normal((512, 64)).astype(np.float32))
    np.save(path, table)
    mapped = embscope.open(path).token.array
    assert mapped.flags.f_contiguous
    block = mapped[100:164]
    low, high = memory.byte_bounds(block)
    assert high - low > block.nbytes  # the block's elements span most of the map
    memory.release(block)
    np.testing.assert_array_equal(block, table[100:164])
    np.testing.assert_allclose(row_norms(mapped, block_rows=64), np.linalg.norm(table.astype(np.float64), axis=1), rtol=1e-12)
