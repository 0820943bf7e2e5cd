"""What `compare` costs, against reading the tables in the same run: two checkpoints, and a run of many.

    python benchmarks/bench_compare.py [--rows 50000] [--dim 768] [--repeat 3] [--run 10,25,50] [--only 1,2]
    python benchmarks/bench_compare.py --rows 20000 --dim 256 --run 10,25,50      # less disk and time

(1) Two safetensors checkpoints (step 1000 and a drifted step 2000, 1% of the rows untouched). Baseline: open both
    with embscope and read every byte of both tables into memory. Measured through the library: `compare` with
    --sample 0 (the rows only) and with the default neighbour sample (1,000 rows, k=10), in one read of the last
    checkpoint; and, for the same answers, the neighbour sets found the old way (a search of their own per table),
    checked equal. The floor beside them: a bare numpy matmul of the neighbour search's FLOPs (2 x Q x V x d x 2)
    in the same run, what an exact fp32 search cannot go under. Target: <= 3x the read.
(2) `embscope compare RUN_FOLDER --json` in a fresh process over a folder of N checkpoints of the same table
    (hard links into one set of files, so 50 checkpoints take 50 tables of disk, not 85): wall time, CPU time
    (user + sys: over the wall, how many cores it kept busy) and peak RSS (ru_maxrss), for each N. Targets: time
    per checkpoint flat in N (linear), peak memory flat in N and at most three tables, CPU/wall near the cores.
Every ratio compares figures measured in this same run; shared machines are noisy. The files are removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from timing import median_time  # benchmarks/timing.py: scripts run from this folder

REPO = Path(__file__).resolve().parents[1]


def write_checkpoint(path: Path, table: np.ndarray, step: int) -> None:
    from safetensors.numpy import save_file
    save_file({"wte.weight": table}, str(path), metadata={"step": str(step)})


def drifted(table: np.ndarray, rng: np.random.Generator, scale: float = 0.05) -> np.ndarray:
    later = table + np.float32(scale) * rng.standard_normal(table.shape, dtype=np.float32)
    later[: len(table) // 100] = table[: len(table) // 100]  # 1% of the rows untouched
    return later


def two_checkpoints(folder: Path, rows: int, dim: int, repeat: int) -> None:
    import embscope
    from embscope.analysis.compare import NEIGHBOR_K, NEIGHBOR_SAMPLE, CompareOptions, TableInput, compare

    rng = np.random.default_rng(0)
    a = rng.standard_normal((rows, dim), dtype=np.float32)
    paths = folder / "a.safetensors", folder / "b.safetensors"
    write_checkpoint(paths[0], a, 1000)
    write_checkpoint(paths[1], drifted(a, rng), 2000)
    del a
    size = sum(p.stat().st_size for p in paths)
    print(f"(1) two tables of {rows:,} x {dim} float32 ({size / 1e6:.0f} MB in all), page cache warm")

    def read_both() -> None:
        for path in paths:
            np.array(embscope.open(path).token.array)  # every byte from the file into memory

    def compare_both(sample: int, checkpoints: int | None = 2, cka: bool = False):
        series = ({"token": TableInput(embscope.open(path).token.array)} for path in paths)
        return compare(series, CompareOptions(sample=sample, device="cpu", cka=cka), checkpoints=checkpoints)

    queries = min(NEIGHBOR_SAMPLE, rows)
    unit = rng.standard_normal((rows, dim), dtype=np.float32)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    scores = np.empty((queries, min(rows, 8192)), dtype=np.float32)

    def floor() -> None:
        """The neighbour search's arithmetic alone: Q x V x d products per table, twice."""
        for _ in range(2):
            for start in range(0, rows, scores.shape[1]):
                block = unit[start:start + scores.shape[1]]
                np.matmul(unit[:queries], block.T, out=scores[:, :len(block)])

    read_both()  # warm the page cache
    fused, alone = compare_both(NEIGHBOR_SAMPLE), compare_both(NEIGHBOR_SAMPLE, None)
    found, before = fused.tables["token"].neighbors, alone.tables["token"].neighbors
    same = (np.array_equal(found.neighbors_a, before.neighbors_a) and np.array_equal(found.neighbors_b, before.neighbors_b)
            and np.array_equal(found.jaccard, before.jaccard, equal_nan=True))
    baseline = median_time(read_both, repeat)
    rows_only = median_time(lambda: compare_both(0), repeat)
    with_neighbors = median_time(lambda: compare_both(NEIGHBOR_SAMPLE), repeat)
    their_own = median_time(lambda: compare_both(NEIGHBOR_SAMPLE, None), repeat)
    with_cka = median_time(lambda: compare_both(NEIGHBOR_SAMPLE, cka=True), repeat)
    bare = median_time(floor, repeat)
    flops = 2 * 2.0 * queries * rows * dim
    print(f"    read both tables:                                {baseline:7.3f} s")
    print(f"    compare, rows only (--sample 0):                 {rows_only:7.3f} s = {rows_only / baseline:5.2f}x the read")
    print(f"    compare with {NEIGHBOR_SAMPLE:,} neighbour rows (one read):       {with_neighbors:7.3f} s = "
          f"{with_neighbors / baseline:5.2f}x the read (target <= 3x: {'met' if with_neighbors <= 3 * baseline else 'NOT met'})")
    print(f"    the same with linear CKA (compare A B's default): {with_cka:7.3f} s = {with_cka / baseline:5.2f}x the read")
    print(f"    the same, each search reading its table again:   {their_own:7.3f} s = {their_own / baseline:5.2f}x the read")
    print(f"    floor: a bare matmul of the searches' {flops / 1e9:.0f} GFLOP: {bare:7.3f} s = {bare / baseline:5.2f}x the read "
          f"({flops / bare / 1e9:.0f} GFLOP/s); compare with neighbours = {with_neighbors / bare:4.2f}x the floor")
    print(f"    neighbour sets (k={NEIGHBOR_K}) and Jaccard the same both ways: {'yes' if same else 'NO'}; "
          f"mean Jaccard {found.mean:.4f}")


def peak_of(argv: list[str]) -> tuple[float, float, int, str]:
    """(wall s, CPU s, peak RSS bytes, stdout) of a child process, measured by a wrapper that runs only it."""
    code = ("import resource, subprocess, sys, time\n"
            "start = time.perf_counter()\n"
            "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
            "wall = time.perf_counter() - start\n"
            "sys.stderr.write(r.stderr[-2000:])\n"
            "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "print(wall, u.ru_utime + u.ru_stime, u.ru_maxrss, r.returncode)\n"
            "print(r.stdout, end='')\n")
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, check=True)
    first, _, rest = done.stdout.partition("\n")
    wall, cpu, maxrss, returncode = first.split()
    if int(returncode) != 0:
        raise SystemExit(f"{' '.join(argv)} exited {returncode}: {done.stderr.strip()[-500:]}")
    return float(wall), float(cpu), int(maxrss) * 1024, rest


def run_folder(folder: Path, rows: int, dim: int, counts: list[int]) -> None:
    table_bytes = rows * dim * 4
    most = max(counts)
    need = most * (table_bytes + 4096)
    free = shutil.disk_usage(folder).free
    print(f"\n(2) `embscope compare RUN_FOLDER` over runs of {', '.join(map(str, counts))} checkpoints of {rows:,} x {dim} "
          f"float32 ({table_bytes / 2**20:.0f} MiB a table; {need / 1e9:.1f} GB of disk, {free / 1e9:.0f} GB free)")
    if need > free * 0.8:
        print("    not enough disk: give smaller --rows / --dim or fewer --run")
        return
    started = time.perf_counter()
    rng = np.random.default_rng(1)
    table = rng.standard_normal((rows, dim), dtype=np.float32)
    files = folder / "all"
    files.mkdir()
    for step in range(most):
        write_checkpoint(files / f"ckpt_{step:03d}.safetensors", table, 1000 * (step + 1))
        table = drifted(table, rng, 0.01)
    del table
    print(f"    wrote {most} checkpoints in {time.perf_counter() - started:.0f} s")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"    {'checkpoints':>11s} {'wall':>8s} {'per ckpt':>9s} {'CPU/wall':>9s} {'peak RSS':>10s} {'/ table':>8s}")
    per_checkpoint = []
    for count in counts:
        run = folder / f"run{count}"
        run.mkdir()
        for step in range(count):  # the first `count` steps, as hard links: no more disk
            name = f"ckpt_{step:03d}.safetensors"
            os.link(files / name, run / name)
        argv = [sys.executable, "-m", "embscope", "compare", str(run), "--json"]
        subprocess.run([sys.executable, "-c", "import sys; [open(p, 'rb').read() for p in sys.argv[1:]]",
                        *map(str, sorted(run.iterdir()))], check=True)  # the page cache holds them, as for the read
        wall, cpu, peak, out = peak_of(argv)
        assert len(json.loads(out)["checkpoints"]) == count
        per_checkpoint.append(wall / count)
        print(f"    {count:11d} {wall:7.1f}s {wall / count:8.2f}s {cpu / wall:8.2f}x {peak / 2**20:8.0f} MiB "
              f"{peak / table_bytes:7.2f}x")
    spread = max(per_checkpoint) / min(per_checkpoint)
    print(f"    time per checkpoint varies {spread:.2f}x over the runs (linear: near 1); {cores} cores here")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--run", default="10,25,50", help="checkpoint counts of the runs in (2)")
    parser.add_argument("--only", help="comma-separated section numbers to run (default: all)")
    parser.add_argument("--keep", type=Path, help="folder to write in (default: a temporary one, removed)")
    args = parser.parse_args()
    only = {int(n) for n in args.only.split(",")} if args.only else {1, 2}
    folder = Path(tempfile.mkdtemp(prefix="embscope-bench-", dir=args.keep))
    try:
        if 1 in only:
            two_checkpoints(folder, args.rows, args.dim, args.repeat)
        if 2 in only:
            run_folder(folder, args.rows, args.dim, [int(n) for n in args.run.split(",")])
    finally:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
