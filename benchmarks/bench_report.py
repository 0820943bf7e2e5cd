"""How long `embscope report` takes on the bundled sample, against a bare matplotlib script that saves as many SVG
figures as the report holds, each a fresh process, measured in the same run.

    python benchmarks/bench_report.py [--repeat 5]

The baseline is what any plotting script pays: Python, numpy and matplotlib imported, and as many figures as the
report holds (counted in the warm-up's page), each of the sample's 256 position-row norms, drawn and saved as SVG.
Measured: `python -m embscope report --out FILE.html` on the sample, which reads the checkpoint, answers every
section and writes one page with its figures, drawn by the functions `--plot` uses (matplotlib). The two run
alternately, after one warm-up of each (matplotlib's font cache, the sample's baseline in the cache folder, and
embscope's modules byte-compiled as an install leaves them, since $PYTHONDONTWRITEBYTECODE is unset for both);
the medians are compared, in wall-clock seconds and in CPU seconds (user + system, the children's own), since
a busy machine stretches the first.

Target: the report at most 2x the bare script.
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
from pathlib import Path

BARE = """
import sys
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
import pickle
with open(sys.argv[2], "rb") as f:  # the sample's pickle, by the script that made it (a trusted file)
    positions = pickle.load(f)["params"]["pos_emb"]
for n in range(int(sys.argv[3])):
    figure = Figure(figsize=(11, 5))
    FigureCanvasAgg(figure)
    ax = figure.subplots()
    ax.plot(np.linalg.norm(positions, axis=1))
    ax.set_title("L2 norm by position")
    ax.set_xlabel("position")
    ax.set_ylabel("L2 norm")
    figure.savefig(f"{sys.argv[1]}-{n}.svg", format="svg")
"""
TARGET = 2.0


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one child process run to its end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        # as installed: every module byte-compiled once, embscope's as matplotlib's, not compiled again at each start
        env = {k: v for k, v in os.environ.items() if k not in ("EMBSCOPE_CHECKPOINT", "PYTHONDONTWRITEBYTECODE")}
        env["XDG_CACHE_HOME"] = str(folder / "cache")
        from embscope.sample import default_checkpoint
        report = [sys.executable, "-m", "embscope", "report", "--out", str(folder / "report.html")]
        timed(report, env)  # warm-up: the font cache, the page cache of the files, the sample's random-pair baseline
        figures = (folder / "report.html").read_text(encoding="utf-8").count("<svg")
        bare = [sys.executable, "-c", BARE, str(folder / "bare"), str(default_checkpoint()), str(figures)]
        timed(bare, env)
        runs: dict[str, list[tuple[float, float]]] = {"bare": [], "report": []}
        for _ in range(args.repeat):
            runs["bare"].append(timed(bare, env))
            runs["report"].append(timed(report, env))
        size = (folder / "report.html").stat().st_size
    wall = {name: statistics.median(w for w, _ in found) for name, found in runs.items()}
    cpu = {name: statistics.median(c for _, c in found) for name, found in runs.items()}
    ratio = wall["report"] / wall["bare"]
    print(f"the sample (1,024 x 128 token table, 256 x 128 position table), median of {args.repeat} fresh processes each")
    print(f"bare matplotlib script, {figures} SVG figures: {wall['bare']:5.2f} s wall  {cpu['bare']:5.2f} s CPU")
    print(f"embscope report ({figures} figures, one page): {wall['report']:5.2f} s wall  {cpu['report']:5.2f} s CPU  "
          f"({size / 1e6:.2f} MB)")
    print(f"report / bare script: {ratio:.2f}x wall, {cpu['report'] / cpu['bare']:.2f}x CPU "
          f"(target at most {TARGET:g}x: {'met' if ratio <= TARGET else 'NOT met'})")


if __name__ == "__main__":
    main()
