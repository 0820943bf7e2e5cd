"""Time and peak memory of `embscope geometry` on tables of real sizes, against a floor measured in the same run:
one float64 pass of W^T W over the same mapped table (numpy, blocks of rows), the least any exact spectrum costs.
geometry makes two passes of that size (the scatter; the projections onto d directions for the partition
function) and two d x d eigendecompositions, so about 3x the floor plus the eigendecompositions is its bar.

Each table is a real safetensors file of random rows written in chunks (float32, or bfloat16 as its bits) to a
temporary directory; each run is a fresh child process whose peak RSS (ru_maxrss) is read with resource.getrusage.

    python3 benchmarks/bench_geometry.py                         # GPT-2 size: 50,257 x 768 float32
    python3 benchmarks/bench_geometry.py --llama                 # and Llama-3 size: 128,256 x 4,096 float32
    python3 benchmarks/bench_geometry.py --llama --dtype bf16    # the same, stored as bfloat16
    python3 benchmarks/bench_geometry.py --keep DIR              # write (or reuse) the tables in DIR

The bars (issue 24): 50,257 x 768 in a few seconds; 128,256 x 4,096 in at most 3 minutes on this 2-core CPU,
with a peak RSS of at most 2x the table. On a shared machine the times scale with the load: the ratio to the
floor is the figure that travels."""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_memory import peak_rss_of

REPO = Path(__file__).resolve().parents[1]
CHUNK_ROWS = 4096

FLOOR = """
import sys, time, numpy as np, embscope
from embscope.compute.moments import block_rows
table = embscope.open(sys.argv[1]).token.array
started = time.perf_counter()
gram = np.zeros((table.shape[1], table.shape[1]))
step = block_rows(table.shape[1])
for start in range(0, table.shape[0], step):
    block = np.array(table[start:start + step], dtype=np.float64)
    gram += block.T @ block
print(time.perf_counter() - started)
"""


def write_table(path: Path, rows: int, dim: int, dtype: str) -> None:
    """A safetensors file holding one (rows, dim) table of random normal rows (plus a small offset, as real tables
    have), float32 or bfloat16 (the top half of each float32)."""
    itemsize = 4 if dtype == "f32" else 2
    nbytes = rows * dim * itemsize
    header = json.dumps({"model.embed_tokens.weight": {"dtype": "F32" if dtype == "f32" else "BF16",
                                                       "shape": [rows, dim], "data_offsets": [0, nbytes]}}).encode()
    header += b" " * (-len(header) % 8)
    rng = np.random.default_rng(0)
    offset = rng.standard_normal(dim).astype(np.float32) * 0.5
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        for start in range(0, rows, CHUNK_ROWS):
            chunk = rng.standard_normal((min(CHUNK_ROWS, rows - start), dim), dtype=np.float32) + offset
            if dtype == "bf16":
                chunk = (chunk.view(np.uint32) >> 16).astype("<u2")
            f.write(chunk.astype(chunk.dtype.newbyteorder("<")).tobytes())


def measure(path: Path, rows: int, dim: int, dtype: str) -> None:
    table_bytes = rows * dim * (4 if dtype == "f32" else 2)
    floor_peak, _, floor_out = peak_rss_of([sys.executable, "-c", FLOOR, str(path)])
    floor = float(floor_out.strip())
    peak, elapsed, out = peak_rss_of([sys.executable, "-m", "embscope", "geometry", "-c", str(path), "--json",
                                      "--device", "cpu"])
    doc = json.loads(out)
    print(f"{rows:,} x {dim:,} {dtype} ({table_bytes / 2**20:,.0f} MiB): geometry {elapsed:.1f} s, floor (one float64 "
          f"W^T W pass) {floor:.1f} s, ratio {elapsed / floor:.2f}; peak RSS {peak / 2**20:,.0f} MiB = "
          f"{peak / table_bytes:.2f}x the table (the floor's {floor_peak / 2**20:,.0f} MiB)")
    print(f"    mean cosine {doc['mean_cosine']:+.4f}, effective rank {doc['spectrum']['effective_rank']:.1f}, "
          f"partition isotropy {doc['partition_isotropy']:.4g}, IsoScore {doc['isoscore']:.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llama", action="store_true", help="also the 128,256 x 4,096 table (2 GiB in float32)")
    parser.add_argument("--dtype", choices=("f32", "bf16"), default="f32")
    parser.add_argument("--keep", type=Path, help="directory to write the tables to and keep")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (a shared machine scales every time)")
    sizes = [(50257, 768)] + ([(128256, 4096)] if args.llama else [])
    directory = args.keep or Path(tempfile.mkdtemp(prefix="embscope-bench-"))
    directory.mkdir(parents=True, exist_ok=True)
    try:
        for rows, dim in sizes:
            path = directory / f"table-{rows}x{dim}-{args.dtype}.safetensors"
            if not path.exists():
                started = time.monotonic()
                write_table(path, rows, dim, args.dtype)
                print(f"wrote {path.name} in {time.monotonic() - started:.0f} s")
            measure(path, rows, dim, args.dtype)
            if args.keep is None:
                path.unlink()
    finally:
        if args.keep is None:
            for left in directory.iterdir():
                left.unlink()
            directory.rmdir()
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
