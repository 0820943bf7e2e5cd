"""`compare RUN_FOLDER` on a Dask cluster against the same command on one machine, in the same run.

    python benchmarks/bench_dask.py [--rows 50000] [--dim 256] [--checkpoints 16] [--workers 2,4] [--sample 1000]

A run of N safetensors checkpoints (a table drifting step by step) is compared three ways, each in a fresh
process, each answer checked equal to the one-machine answer byte for byte:
  (1) `embscope compare RUN --json`: the baseline, one machine;
  (2) `--scheduler local`: a LocalCluster of worker processes started by embscope itself;
  (3) `--scheduler FILE`: a running cluster (`dask scheduler` and W `dask worker --nthreads 1` processes started
      here, on 127.0.0.1), for each W given.
Printed: wall time, and the speed-up over (1). Each task reads three tables (its own, the previous, the first) where
one machine reads each once, so the speed-up stays below the workers; the cores of this machine bound it too.
The files are removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def write_run(folder: Path, rows: int, dim: int, count: int) -> None:
    from safetensors.numpy import save_file
    rng = np.random.default_rng(0)
    table = rng.standard_normal((rows, dim), dtype=np.float32)
    for step in range(1, count + 1):
        table = table * np.float32(1.01) + np.float32(0.05) * rng.standard_normal(table.shape, dtype=np.float32)
        save_file({"wte.weight": table}, str(folder / f"ckpt_{step * 1000}.safetensors"), metadata={"step": str(step)})


def timed(argv: list[str]) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "embscope", *argv], check=False, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.strip()}")
    return wall, done.stdout


def start_cluster(folder: Path, workers: int) -> list[subprocess.Popen[bytes]]:
    scheduler_file = folder / "scheduler.json"
    scheduler_file.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env}
    processes = [subprocess.Popen([sys.executable, "-m", "dask", "scheduler", "--scheduler-file", str(scheduler_file),
                                   "--host", "127.0.0.1", "--port", "0", "--no-dashboard"], **quiet)]
    while not (scheduler_file.exists() and scheduler_file.stat().st_size):
        time.sleep(0.1)
    processes += [subprocess.Popen([sys.executable, "-m", "dask", "worker", "--scheduler-file", str(scheduler_file),
                                    "--nthreads", "1", "--host", "127.0.0.1", "--no-dashboard"], **quiet)
                  for _ in range(workers)]
    from distributed import Client
    with Client(scheduler_file=str(scheduler_file), timeout="30s") as client:
        client.wait_for_workers(workers, timeout=120)
    return processes


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        process.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--checkpoints", type=int, default=16)
    parser.add_argument("--workers", default="2,4")
    parser.add_argument("--sample", type=int, default=1000)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="embscope-dask-"))
    try:
        run = folder / "run"
        run.mkdir()
        write_run(run, args.rows, args.dim, args.checkpoints)
        size = sum(p.stat().st_size for p in run.iterdir()) / 2**20
        print(f"run: {args.checkpoints} checkpoints of {args.rows:,} x {args.dim} float32 ({size:,.0f} MiB), "
              f"{os.cpu_count()} cores")
        command = ["compare", str(run), "--json", "--sample", str(args.sample)]
        base, answer = timed(command)
        print(f"one machine:                      {base:7.2f} s")
        wall, found = timed([*command, "--scheduler", "local"])
        assert found == answer, "--scheduler local differs from the one-machine answer"
        print(f"--scheduler local:                {wall:7.2f} s  ({base / wall:.2f}x, the same answer)")
        for workers in (int(w) for w in args.workers.split(",")):
            processes = start_cluster(folder, workers)
            try:
                wall, found = timed([*command, "--scheduler", str(folder / "scheduler.json")])
            finally:
                stop(processes)
            assert found == answer, f"{workers} workers differ from the one-machine answer"
            print(f"running cluster, {workers:2d} workers x 1 thread: {wall:7.2f} s  ({base / wall:.2f}x, the same answer)")
        print(json.dumps({"checkpoints": args.checkpoints, "rows": args.rows, "dim": args.dim, "one_machine_s": base}))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
