"""Peak memory of `embscope norms --table token` on a 2 GiB float32 token table, against the
table's size; then memory that must not grow with rows (issue 10): `norms --json` on a table whose every
row is flagged (a compressed npz of a few KB), and `positions --profile --plot` on a long position table
(the T x T cosine matrix it must never build). The table is a real safetensors file of random rows, written in chunks to a
temporary directory; each measurement runs in a fresh child process and reads its peak RSS
(ru_maxrss) from resource.getrusage, so nothing from the writer is counted.

    python3 benchmarks/bench_memory.py                 # 2 GiB table, the CLI and the naive baseline
    python3 benchmarks/bench_memory.py --gib 0.25      # smaller, quicker
    python3 benchmarks/bench_memory.py --keep DIR      # write (or reuse) the table in DIR
    python3 benchmarks/bench_memory.py --gib 0 --flagged-rows 4194304 --positions 16384   # issue 10 only

Measured: the CLI (`python -m embscope norms --table token -c FILE --json`), the library's
blockwise norms (embscope.analysis.norms.row_norms on the mapped table), and for comparison the naive
`np.linalg.norm(table.array, axis=1)`, which materialises a temporary as large as the table."""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DIM = 2048
CHUNK_ROWS = 4096  # 32 MiB of float32 per write

LIBRARY_BLOCKWISE = """
import sys, embscope
from embscope.analysis.norms import row_norms
emb = embscope.open(sys.argv[1])
norms = row_norms(emb.token.array)
print(float(norms.mean()))
"""
NAIVE = """
import sys, numpy as np, embscope
emb = embscope.open(sys.argv[1])
print(float(np.linalg.norm(emb.token.array, axis=1).mean()))
"""
BASELINE = "import embscope, numpy\n"


def write_table(path: Path, rows: int) -> None:
    """A safetensors file holding one (rows, DIM) float32 table of random normal rows."""
    nbytes = rows * DIM * 4
    header = json.dumps({"model.embed_tokens.weight": {"dtype": "F32", "shape": [rows, DIM],
                                                       "data_offsets": [0, nbytes]}}).encode()
    header += b" " * (-len(header) % 8)
    rng = np.random.default_rng(0)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        for start in range(0, rows, CHUNK_ROWS):
            count = min(CHUNK_ROWS, rows - start)
            f.write(rng.standard_normal((count, DIM), dtype=np.float32).astype("<f4").tobytes())


def peak_rss_of(argv: list[str]) -> tuple[int, float, str]:
    """Peak RSS in bytes of a child process, its wall time, and its stdout."""
    code = ("import resource, subprocess, sys\n"
            "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
            "sys.stderr.write(r.stderr)\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.returncode)\n"
            "print(r.stdout, end='')\n")
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, check=True)
    elapsed = time.monotonic() - started
    first, _, rest = done.stdout.partition("\n")
    maxrss_kib, returncode = (int(x) for x in first.split())
    if returncode != 0:
        raise SystemExit(f"{argv} exited {returncode}: {done.stderr.strip()}")
    return maxrss_kib * 1024, elapsed, rest


def has_norms_command() -> bool:
    sys.path.insert(0, str(REPO))
    import typer

    from embscope.cli import app
    return "norms" in typer.main.get_command(app).commands


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=2.0, help="table size in GiB (default 2)")
    parser.add_argument("--keep", type=Path, help="directory to write the table to and keep")
    parser.add_argument("--no-naive", action="store_true", help="skip the naive baseline (needs 2x the table in RAM)")
    parser.add_argument("--flagged-rows", type=int, default=1 << 22, help="rows of the every-row-flagged tables")
    parser.add_argument("--positions", type=int, default=16384, help="rows of the long position table")
    args = parser.parse_args()
    if args.gib <= 0:
        rows_that_must_stay_arrays(args.flagged_rows, args.positions)
        return
    rows = int(args.gib * (1 << 30)) // (DIM * 4)
    directory = args.keep or Path(tempfile.mkdtemp(prefix="embscope-bench-"))
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "model.safetensors"
    table_bytes = rows * DIM * 4
    if not (path.exists() and path.stat().st_size >= table_bytes):
        started = time.monotonic()
        write_table(path, rows)
        print(f"wrote {rows} x {DIM} float32 ({table_bytes / 2**30:.2f} GiB) in {time.monotonic() - started:.0f} s: {path}")
    try:
        print(f"table: {rows} x {DIM} float32 = {table_bytes / 2**20:,.0f} MiB")
        runs = [("python + embscope imported (baseline)", [sys.executable, "-c", BASELINE])]
        if has_norms_command():
            runs.append(("embscope norms --table token --json (CLI)",
                         [sys.executable, "-m", "embscope", "norms", "--table", "token", "-c", str(path), "--json"]))
        else:
            print("(no norms command registered yet: measuring the library's blockwise norms only)")
        runs.append(("library blockwise row_norms", [sys.executable, "-c", LIBRARY_BLOCKWISE, str(path)]))
        if not args.no_naive:
            runs.append(("naive np.linalg.norm(table.array, axis=1)", [sys.executable, "-c", NAIVE, str(path)]))
        print(f"{'what':45s} {'peak RSS':>10s} {'/ table':>8s} {'time':>7s}")
        for label, argv in runs:
            peak, elapsed, _ = peak_rss_of(argv)
            print(f"{label:45s} {peak / 2**20:8,.0f} MiB {peak / table_bytes:8.3f} {elapsed:6.1f}s")
    finally:
        if args.keep is None:
            path.unlink(missing_ok=True)
            directory.rmdir()
    rows_that_must_stay_arrays(args.flagged_rows, args.positions)


def rows_that_must_stay_arrays(flagged_rows: int, positions: int) -> None:
    """Peak RSS of commands whose memory once grew with rows: one object per flagged row (norms), a T x T
    matrix (positions --profile --plot); each measured against what that growth would have taken."""
    with tempfile.TemporaryDirectory(prefix="embscope-bench-") as folder:
        folder = Path(folder)
        print(f"\nevery row flagged: {flagged_rows:,} x 1 rows (zeros: all zero rows; ones: all equal norms)")
        print(f"{'what':45s} {'file':>9s} {'peak RSS':>10s} {'time':>7s}")
        for name, value in (("zeros", 0.0), ("ones", 1.0)):
            path = folder / f"{name}.npz"
            np.savez_compressed(path, token_emb=np.full((flagged_rows, 1), value, dtype=np.float32))
            peak, elapsed, out = peak_rss_of([sys.executable, "-m", "embscope", "norms", "-c", str(path), "--json"])
            doc = json.loads(out)
            print(f"{'norms --json, ' + name:45s} {path.stat().st_size / 1024:7.0f} KB {peak / 2**20:8,.0f} MiB "
                  f"{elapsed:6.1f}s  ({doc['anomalies_found']:,} anomalies)")
        from safetensors.numpy import save_file
        path = folder / "long.safetensors"
        rng = np.random.default_rng(0)
        save_file({"wte.weight": rng.standard_normal((64, 2)).astype(np.float32),
                   "wpe.weight": rng.standard_normal((positions, 2)).astype(np.float32)}, str(path))
        peak, elapsed, _ = peak_rss_of([sys.executable, "-m", "embscope", "positions", "-c", str(path), "--profile",
                                        "--plot", str(folder / "heat.png"), "--json"])
        print(f"\npositions --profile --plot on {positions:,} positions x 2: peak RSS {peak / 2**20:,.0f} MiB in "
              f"{elapsed:.1f} s; the T x T float32 matrix alone would take {positions ** 2 * 4 / 2**20:,.0f} MiB "
              f"(ratio {peak / (positions ** 2 * 4):.3f})")


if __name__ == "__main__":
    main()
