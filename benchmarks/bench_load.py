"""How fast embscope gets a token table out of a big checkpoint, against reading just those bytes
with numpy and against a full torch.load; and out of a Q8_0 GGUF, against dequantizing the same
tensor with the gguf package. Ratios are measured in one run (these machines are noisy).

    python benchmarks/bench_load.py [--gb 1.0] [--gguf-mb 560] [--only safetensors|gguf]

Targets: embscope within 2x of the bare read (every format maps the table: the legacy torch format too);
at least 5x faster than the full load; on the GGUF (at least 500 MB), within 2x of gguf's own
dequantization, with no page of another tensor read (counted with mincore(2) after the file was dropped
from the page cache).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import mmap
import os
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from timing import median_time  # benchmarks/timing.py: scripts run from this folder


def interleaved(fns: dict, repeat: int) -> list[tuple[str, float]]:
    """Median seconds of each, the runs taken in turns so that a busy spell on the machine hits them all."""
    times: dict[str, list[float]] = {label: [] for label in fns}
    for _ in range(repeat):
        for label, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[label].append(time.perf_counter() - start)
    return [(label, statistics.median(t)) for label, t in times.items()]


def build_tensors(total_gb: float, dim: int = 1024) -> dict[str, tuple[int, int]]:
    """Shapes whose token table is a tenth of the total, the rest in 'layer' matrices."""
    total_floats = int(total_gb * 1e9 / 4)
    vocab = total_floats // 10 // dim
    shapes = {"transformer.wte.weight": (vocab, dim), "transformer.wpe.weight": (1024, dim)}
    rest, i = total_floats - vocab * dim - 1024 * dim, 0
    while rest > dim * dim * 4:
        shapes[f"transformer.h.{i}.mlp.c_fc.weight"] = (dim, 4 * dim)
        rest -= dim * dim * 4
        i += 1
    return shapes


def write_safetensors(path: Path, shapes: dict[str, tuple[int, int]], rng) -> tuple[int, int]:
    """Written by hand in chunks (safetensors.numpy.save_file would need all of it in memory);
    returns the byte offset and length of the token table."""
    header, offset = {}, 0
    for name, shape in shapes.items():
        n = shape[0] * shape[1] * 4
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        for shape in shapes.values():
            rng.standard_normal(shape, dtype=np.float32).tofile(f)
    start = 8 + len(raw) + header["transformer.wte.weight"]["data_offsets"][0]
    return start, header["transformer.wte.weight"]["data_offsets"][1] - header["transformer.wte.weight"]["data_offsets"][0]


# -- GGUF ---------------------------------------------------------------------------------------

GGUF_DIM = 4096
GGUF_VOCAB = 64000  # a 278 MB Q8_0 token table
GGUF_FFN = 11008  # 48 MB Q8_0 "layer" matrices around it


def q8_0_blocks(rows: int, dim: int, rng) -> np.ndarray:
    """Valid Q8_0 rows written as their bytes (quantizing 500 MB of floats with gguf.quants takes minutes):
    per 32 values a float16 scale, then 32 int8."""
    blocks = rng.integers(-127, 128, (rows, dim // 32, 34), dtype=np.int8).view(np.uint8)
    blocks[..., :2] = rng.uniform(0.001, 0.01, (rows, dim // 32, 1)).astype(np.float16).view(np.uint8)
    return blocks.reshape(rows, dim // 32 * 34)


def write_gguf(path: Path, total_mb: float, rng) -> list[tuple[str, int]]:
    """A GGUF streamed by gguf.GGUFWriter one tensor at a time: layer matrices before and after the token
    table, so that a read spilling over either edge would show. Returns (name, rows) in file order."""
    import gguf
    layer_mb = GGUF_FFN * GGUF_DIM * 34 / 32 / 1e6
    layers = max(2, round((total_mb - GGUF_VOCAB * GGUF_DIM * 34 / 32 / 1e6) / layer_mb))
    names = [f"blk.{i}.ffn_up.weight" for i in range(layers)]
    order = [(n, GGUF_FFN) for n in names[:layers // 2]] + [("token_embd.weight", GGUF_VOCAB)]
    order += [(n, GGUF_FFN) for n in names[layers // 2:]]
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(4096)
    q8_0 = gguf.GGMLQuantizationType.Q8_0
    for name, rows in order:
        writer.add_tensor_info(name, (rows, GGUF_DIM // 32 * 34), np.dtype(np.uint8), rows * GGUF_DIM // 32 * 34, q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for _, rows in order:
        writer.write_tensor_data(q8_0_blocks(rows, GGUF_DIM, rng))
    writer.close()
    return order


def resident(path: Path) -> np.ndarray | None:
    """Per page of the file, whether it is in the page cache (mincore(2)); None where it cannot be asked."""
    if not hasattr(os, "posix_fadvise"):
        return None
    with open(path, "rb") as f:
        mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)  # private and writable, never written
    pages = -(-len(mapping) // mmap.PAGESIZE)
    flags = (ctypes.c_ubyte * pages)()
    address = ctypes.c_void_p(ctypes.addressof(ctypes.c_char.from_buffer(mapping)))
    failed = ctypes.CDLL(None, use_errno=True).mincore(address, ctypes.c_size_t(len(mapping)), flags)
    out = None if failed else np.frombuffer(flags, dtype=np.uint8) & 1 == 1
    del address
    mapping.close()
    return out


def read_ahead_kb(path: Path) -> str:
    """The read-ahead window of the disk holding `path`, as Linux reports it (a partition: its disk's)."""
    dev = os.stat(path).st_dev
    for queue in ("queue", "../queue"):
        try:
            return Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}/{queue}/read_ahead_kb").read_text().strip()
        except OSError:
            continue
    return "unknown"


def drop_from_cache(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def bench_gguf(total_mb: float) -> None:
    import gguf

    import embscope
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model-q8_0.gguf"
        write_gguf(path, total_mb, np.random.default_rng(0))
        tensors = gguf.GGUFReader(str(path)).tensors
        token = next(t for t in tensors if t.name == "token_embd.weight")
        start, nbytes = token.data_offset, token.n_bytes
        print(f"GGUF: {path.stat().st_size / 1e6:.0f} MB, token table {GGUF_VOCAB} x {GGUF_DIM} Q8_0 "
              f"({nbytes / 1e6:.0f} MB, {nbytes / path.stat().st_size:.1%} of the file), "
              f"{len(tensors) - 1} other tensors around it")

        # what embscope reads: the byte ranges it maps (np.memmap recorded), and, from a cold page cache,
        # the pages the kernel brought in (its read-ahead may run past the table's end: read_ahead_kb)
        mapped, real_memmap = [], np.memmap

        def recording_memmap(*args, **kwargs):
            array = real_memmap(*args, **kwargs)
            mapped.append((kwargs.get("offset", 0), array.nbytes))
            return array

        drop_from_cache(path)
        before = resident(path)
        np.memmap = recording_memmap
        try:
            table = np.asarray(embscope.open(path).token.array)
        finally:
            np.memmap = real_memmap
        after = resident(path)
        print(f"byte ranges embscope mapped: {mapped} (the token table: {[(start, nbytes)]})")
        if before is None or after is None or before.mean() > 0.01:
            print("pages read: cannot be measured here (no mincore, or the page cache could not be dropped)")
        else:
            page = mmap.PAGESIZE
            token_pages = range(start // page, -(-(start + nbytes) // page))
            read = {"before": 0, "after": 0}
            other = 0
            for t in tensors:
                if t.name != "token_embd.weight":
                    pages = [i for i in range(t.data_offset // page, -(-(t.data_offset + t.n_bytes) // page))
                             if i not in token_pages]  # a page shared with the token table's edge is the table's
                    read["before" if t.data_offset < start else "after"] += int(after[pages].sum()) * page
                    other += t.n_bytes
            print(f"pages of other tensors in the page cache: {read['before'] / 1e6:.2f} MB before the table, "
                  f"{read['after'] / 1e6:.2f} MB after it, of {other / 1e6:.0f} MB: the kernel's read-ahead "
                  f"({read_ahead_kb(path)} KB windows) after the header and past the table's end; "
                  f"token table pages: {after[token_pages.start:token_pages.stop].mean():.0%}")
        raw = np.memmap(path, dtype=np.uint8, mode="r", offset=start, shape=(GGUF_VOCAB, nbytes // GGUF_VOCAB))
        np.testing.assert_array_equal(table, gguf.quants.dequantize(raw, gguf.GGMLQuantizationType.Q8_0))
        del table

        def bare():
            mapped = np.memmap(path, dtype=np.uint8, mode="r", offset=start, shape=(GGUF_VOCAB, nbytes // GGUF_VOCAB))
            gguf.quants.dequantize(mapped, gguf.GGMLQuantizationType.Q8_0)

        def with_gguf_reader():
            tensor = next(t for t in gguf.GGUFReader(str(path)).tensors if t.name == "token_embd.weight")
            gguf.quants.dequantize(tensor.data, tensor.tensor_type)

        rows = interleaved({"gguf.quants.dequantize of the mapped bytes": bare,
                            "gguf.GGUFReader + dequantize": with_gguf_reader,
                            "embscope, GGUF": lambda: np.asarray(embscope.open(path).token.array)}, repeat=5)
    base = rows[1][1]
    print(f"{'what':44} {'seconds':>9} {'vs gguf':>9}")
    for label, seconds in rows:
        print(f"{label:44} {seconds:9.3f} {seconds / base:8.2f}x")
    print(f"embscope on the GGUF is {rows[2][1] / base:.2f}x gguf's own read and dequantization (target: within 2x)")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.0, help="checkpoint size in GB (default 1.0)")
    parser.add_argument("--gguf-mb", type=float, default=560, help="GGUF size in MB (default 560)")
    parser.add_argument("--only", choices=("safetensors", "gguf"), help="run one half of the benchmark")
    args = parser.parse_args()
    if args.only != "safetensors":
        bench_gguf(args.gguf_mb)
    if args.only != "gguf":
        bench_tables(args.gb)


def bench_tables(gb: float) -> None:
    import embscope

    rng = np.random.default_rng(0)
    shapes = build_tensors(gb)
    vocab, dim = shapes["transformer.wte.weight"]
    with tempfile.TemporaryDirectory() as tmp:
        st = Path(tmp) / "model.safetensors"
        start, nbytes = write_safetensors(st, shapes, rng)
        print(f"checkpoint: {st.stat().st_size / 1e9:.2f} GB, token table {vocab} x {dim} "
              f"({nbytes / 1e6:.0f} MB, {nbytes / st.stat().st_size:.1%} of the file)")

        def bare_read():
            np.fromfile(st, dtype=np.float32, count=vocab * dim, offset=start).reshape(vocab, dim)

        def via_embscope(path):
            return lambda: np.array(embscope.open(path).token.array)  # np.array: the bytes are really read

        rows = [("bare numpy read of the table's bytes", median_time(bare_read))]
        rows.append(("embscope, safetensors", median_time(via_embscope(st))))
        np.testing.assert_array_equal(np.array(embscope.open(st).token.array),
                                      np.fromfile(st, np.float32, vocab * dim, offset=start).reshape(vocab, dim))

        try:
            import torch
        except ImportError:
            torch = None
            print("torch is not installed: the PyTorch half of the benchmark is skipped")
        if torch is not None:
            from safetensors.torch import load_file
            pt = Path(tmp) / "ckpt.pt"
            torch.save({"model": load_file(str(st)), "iter_num": 1}, pt)
            st.unlink()  # keep the temporary folder to one checkpoint's worth of disk
            rows.append(("embscope, PyTorch zip", median_time(via_embscope(pt))))
            rows.append(("full torch.load (weights_only=True)",
                         median_time(lambda: torch.load(pt, weights_only=True, map_location="cpu"), repeat=3)))
            legacy = Path(tmp) / "legacy.pt"
            torch.save(torch.load(pt, weights_only=True, map_location="cpu"), legacy,
                       _use_new_zipfile_serialization=False)
            pt.unlink()
            rows.append(("embscope, PyTorch legacy (pre-zip)", median_time(via_embscope(legacy))))

    base = rows[0][1]
    print(f"{'what':44} {'seconds':>9} {'vs bare read':>13}")
    for label, seconds in rows:
        print(f"{label:44} {seconds:9.3f} {seconds / base:12.2f}x")
    named = dict(rows)
    if "embscope, PyTorch zip" in named:
        speedup = named["full torch.load (weights_only=True)"] / named["embscope, PyTorch zip"]
        print(f"embscope on the PyTorch file is {speedup:.1f}x faster than the full torch.load (target: at least 5x)")
    worst = max(named["embscope, safetensors"], named.get("embscope, PyTorch zip", 0),
                named.get("embscope, PyTorch legacy (pre-zip)", 0)) / base
    print(f"embscope's slowest format is {worst:.2f}x the bare read (target: within 2x)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
