"""`embscope norms` (and undertrained, geometry, map, report) on a GloVe-shaped table, 400,000 x 50 float32, each
against its floor measured in the same run: a bare numpy script that does the least work the answer needs.

    python3 benchmarks/bench_norms.py [--rows 400000] [--dim 50] [--repeat 5] [--only norms,undertrained]

Sections: (1) in process: the near-duplicate search (analysis/duplicates.py: identical rows by hashing, near ones on
a grid of projections) and the whole norms report against numpy's norms of the same array; (2) fresh processes on
a .npy file: each command against its floor (target for norms: at most 3x the bare numpy norms script).

The floors, all bare numpy on the same file in a fresh process:
- norms: read the table, np.linalg.norm of every row.
- undertrained: norms, one float64 W^T W pass and its top eigenvector (the first principal component magikarp
  removes), and one pass projecting every row.
- geometry: one float64 W^T W pass (as bench_geometry.py), and its eigendecomposition.
- map: one float64 W^T W pass, its eigendecomposition, every row projected on the top two directions.
- report: the floors of its table sections one after another (norms, undertrained, geometry, map) in one process.
Every ratio compares figures measured in this same run (the floor and the command run in turn, `--repeat` times,
and the medians are compared): shared machines are noisy.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")  # as the command line sets it (compute/blas.py), before numpy
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from timing import median_time  # benchmarks/timing.py: scripts run from this folder

from embscope.analysis.duplicates import find_duplicates
from embscope.analysis.norms import row_norms, summarize

READ = "import sys, numpy as np\ntable = np.load(sys.argv[1], mmap_mode='r')\n"
NORMS = READ + "norms = np.linalg.norm(table, axis=1)\nprint(float(np.median(norms)))\n"
GRAM = (READ + "gram = np.zeros((table.shape[1],) * 2)\n"
        "for start in range(0, len(table), 65536):\n"
        "    block = np.asarray(table[start:start + 65536], dtype=np.float64)\n"
        "    gram += block.T @ block\n"
        "values, vectors = np.linalg.eigh(gram)\n")
UNDERTRAINED = (GRAM + "norms = np.linalg.norm(table, axis=1)\n"
                "first = vectors[:, -1]\n"
                "print(float((table @ first.astype(np.float32)).mean()), float(np.median(norms)))\n")
GEOMETRY = GRAM + "print(float(values[-1]))\n"
MAP = GRAM + "xy = table @ vectors[:, -2:].astype(np.float32)\nprint(float(xy.mean()))\n"
REPORT = NORMS + "".join(part[len(READ):] for part in (UNDERTRAINED, GEOMETRY, MAP))  # its sections' floors, one by one

COMMANDS = {  # command line after the file, and its floor
    "norms": (["norms", "--json"], NORMS),
    "undertrained": (["undertrained", "--json"], UNDERTRAINED),
    "geometry": (["geometry", "--json"], GEOMETRY),
    "map": (["map", "--json"], MAP),
    "report": (["report", "--json"], REPORT),
}


def glove_like(rows: int, dim: int) -> np.ndarray:
    """Random rows with a few exact and near duplicates, as a real vocabulary holds."""
    rng = np.random.default_rng(0)
    table = rng.standard_normal((rows, dim), dtype=np.float32)
    table[rows // 2:rows // 2 + 50] = table[:50]  # exact copies
    table[rows - 50:] = table[100:150] * 1.5 + 1e-4 * rng.standard_normal((50, dim), dtype=np.float32)  # near ones
    return table


def median_cpu_time(fn: Callable[[], object], repeat: int) -> float:
    return median_time(fn, repeat, clock=time.process_time)  # CPU time: a shared machine's neighbours move wall time


def section_in_process(table: np.ndarray, repeat: int) -> None:
    print("\n(1) in process, the array in memory (CPU time)")
    t_numpy = median_cpu_time(lambda: np.linalg.norm(table, axis=1), repeat + 1)
    norms = row_norms(table)
    found = find_duplicates(table, norms)
    t_dups = median_cpu_time(lambda: find_duplicates(table, norms), repeat)
    t_report = median_cpu_time(lambda: (summarize(row_norms(table)), find_duplicates(table, row_norms(table))), repeat)
    print(f"    numpy norms: {t_numpy:.3f} s")
    print(f"    near-duplicate search: {t_dups:.3f} s = {t_dups / t_numpy:.1f}x numpy's norms "
          f"({found.total} pairs, complete: {found.complete})")
    print(f"    norms + summary + duplicates: {t_report:.3f} s = {t_report / t_numpy:.1f}x numpy's norms")


def timed_process(args: list[str], repeat: int, cwd: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of a fresh process run in `cwd`, the median of `repeat` runs each: CPU time (user +
    system, children included) moves less than wall time on a shared machine."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: embscope's modules byte-compiled once, not at each start
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run([sys.executable, *args], check=True, capture_output=True, env=env, cwd=cwd)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def section_commands(path: Path, only: list[str], repeat: int) -> None:
    print("\n(2) fresh processes on a .npy file: each command against its bare numpy floor")
    for name in only:
        argv, floor = COMMANDS[name]
        # in the table's temporary folder: report writes its page into the working directory
        ours_argv, here = ["-m", "embscope", argv[0], "-c", str(path), *argv[1:]], path.parent
        timed_process(ours_argv, 1, here)  # a first run compiles the modules
        floors, ours = [], []
        for _ in range(repeat):  # the floor and the command in turn: both meet the same load
            floors.append(timed_process(["-c", floor, str(path)], 1, here))
            ours.append(timed_process(ours_argv, 1, here))
        (w_floor, c_floor), (w_ours, c_ours) = medians(floors), medians(ours)
        target = " (target <= 3x)" if name == "norms" else ""
        print(f"    {name:12s}: wall {w_ours:6.2f} s / floor {w_floor:5.2f} s = {w_ours / w_floor:4.1f}x; "
              f"CPU {c_ours:6.2f} s / {c_floor:5.2f} s = {c_ours / c_floor:4.1f}x{target}")


def medians(runs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(wall for wall, _ in runs), statistics.median(cpu for _, cpu in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--dim", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", default=",".join(COMMANDS), help="commands of section (2), comma-separated")
    parser.add_argument("--skip-in-process", action="store_true")
    args = parser.parse_args()
    flags = cpu_flags()
    print(f"table {args.rows:,} x {args.dim} float32, numpy {np.__version__}, {os.cpu_count()} cpus, "
          f"cpu flags: {', '.join(flags) or 'none of avx512f, avx512_bf16, amx_bf16'}, "
          f"load average {os.getloadavg()[0]:.1f}")
    table = glove_like(args.rows, args.dim)
    if not args.skip_in_process:
        section_in_process(table, args.repeat)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "glove.npy"
        np.save(path, table)
        started = time.perf_counter()
        section_commands(path, [name for name in args.only.split(",") if name], args.repeat)
        print(f"\n({time.perf_counter() - started:.0f} s for section 2)")


def cpu_flags() -> list[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    line = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return [flag for flag in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if flag in line.split()]


if __name__ == "__main__":
    main()
