"""How long `compare` takes on two 50,000 x 768 token tables, against reading both tables in the same run.

    python benchmarks/bench_compare.py [--rows 50000] [--dim 768] [--repeat 3]

Two safetensors checkpoints are written to a temporary folder (step 1000 and a drifted step 2000, some rows
untouched). Baseline: open both with embscope and read every byte of both tables into memory. Measured: the
library's `compare` on the same two files, opened the same way, (a) the row comparison alone (per-row cosine,
norms, relative change, unchanged rows, the per-checkpoint state: norms, anomalies) with --sample 0, and (b) with
the default neighbour sample of 1,000 rows (two batched top-k searches over the whole table).

Target: (a) at most 3x the baseline.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from timing import median_time  # benchmarks/timing.py: scripts run from this folder


def write_pair(folder: Path, rows: int, dim: int) -> tuple[Path, Path]:
    from safetensors.numpy import save_file

    rng = np.random.default_rng(0)
    a = rng.standard_normal((rows, dim), dtype=np.float32)
    b = a + np.float32(0.05) * rng.standard_normal((rows, dim), dtype=np.float32)
    b[: rows // 100] = a[: rows // 100]  # 1% of the rows untouched
    paths = folder / "a.safetensors", folder / "b.safetensors"
    save_file({"wte.weight": a}, str(paths[0]), metadata={"step": "1000"})
    save_file({"wte.weight": b}, str(paths[1]), metadata={"step": "2000"})
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    import embscope
    from embscope.analysis.compare import CompareOptions, TableInput, compare

    with tempfile.TemporaryDirectory() as tmp:
        paths = write_pair(Path(tmp), args.rows, args.dim)
        size = sum(p.stat().st_size for p in paths)
        print(f"two tables of {args.rows:,} x {args.dim} float32 ({size / 1e6:.0f} MB in all), page cache warm")

        def read_both() -> None:
            for path in paths:
                np.array(embscope.open(path).token.array)  # every byte from the file into memory

        def compare_both(sample: int) -> None:
            series = ({"token": TableInput(embscope.open(path).token.array)} for path in paths)
            compare(series, CompareOptions(sample=sample, device="cpu"), checkpoints=2)

        read_both()  # warm the page cache
        baseline = median_time(read_both, args.repeat)
        rows_only = median_time(lambda: compare_both(0), args.repeat)
        with_neighbors = median_time(lambda: compare_both(1000), args.repeat)
        print(f"read both tables:                       {baseline:7.3f} s")
        print(f"compare, rows only (--sample 0):         {rows_only:7.3f} s  = {rows_only / baseline:5.2f}x the read "
              f"(target <= 3x: {'met' if rows_only <= 3 * baseline else 'NOT met'})")
        print(f"compare with 1,000 neighbour rows:       {with_neighbors:7.3f} s  = {with_neighbors / baseline:5.2f}x "
              "the read")


if __name__ == "__main__":
    main()
