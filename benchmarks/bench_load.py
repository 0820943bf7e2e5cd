"""How fast embscope gets a token table out of a big checkpoint, against reading just those bytes
with numpy and against a full torch.load. Ratios are measured in one run (these machines are noisy).

    python benchmarks/bench_load.py [--gb 1.0]

Targets: embscope within 2x of the bare read (every format maps the table: the legacy torch format too);
at least 5x faster than the full load.
"""

from __future__ import annotations

import argparse
import json
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def best_of(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.0, help="checkpoint size in GB (default 1.0)")
    args = parser.parse_args()
    import embscope

    rng = np.random.default_rng(0)
    shapes = build_tensors(args.gb)
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

        rows = [("bare numpy read of the table's bytes", best_of(bare_read))]
        rows.append(("embscope, safetensors", best_of(via_embscope(st))))
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
            rows.append(("embscope, PyTorch zip", best_of(via_embscope(pt))))
            rows.append(("full torch.load (weights_only=True)",
                         best_of(lambda: torch.load(pt, weights_only=True, map_location="cpu"), repeat=3)))
            legacy = Path(tmp) / "legacy.pt"
            torch.save(torch.load(pt, weights_only=True, map_location="cpu"), legacy,
                       _use_new_zipfile_serialization=False)
            pt.unlink()
            rows.append(("embscope, PyTorch legacy (pre-zip)", best_of(via_embscope(legacy))))

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
