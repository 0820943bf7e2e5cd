"""Longer fuzz run: N mutated inputs per format, with counts of outcomes.

    python3 tests/fuzz/run_fuzz.py -n 500            # every format
    python3 tests/fuzz/run_fuzz.py -n 2000 -f npz    # one format
    python3 tests/fuzz/run_fuzz.py --seconds 60      # as many as fit in a time budget per format

Outcomes: ok, an EmbscopeError (counted by message class), or a crash: any other exception (its
traceback is printed once per kind), or the process dying (a segfault, an out-of-memory kill).
Each format runs in a child process so that a dying input is recorded with its seed, kept under
fuzz-crashes/ for replay, and the run goes on from the next seed. Exit status 1 when anything crashed."""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import corpus  # noqa: E402
import target  # noqa: E402

MEMORY_LIMIT = 4 << 30  # a child that wants more is killed: an unbounded allocation is a crash too


def run_inputs(name: str, count: int | None, seconds: float | None, seed0: int, show: int,
               progress: Path) -> collections.Counter:
    """In the child: inputs seed0, seed0+1, ... until `count` or `seconds` run out."""
    counts: collections.Counter = collections.Counter()
    crashes_shown: set[str] = set()
    started = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix=f"fuzz-{name}-"))
    seed = seed0
    try:
        while (count is None or counts["tried"] < count) and (seconds is None or time.monotonic() - started < seconds):
            directory = base / str(seed)
            directory.mkdir()
            progress.write_text(f"{seed} {directory}")  # read by the parent if this process dies
            path = corpus.build_mutant(corpus.SAMPLES[name], directory, seed, 1 + seed % 4)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                kind, err = target.outcome(path)
            counts["tried"] += 1
            if kind == "ok":
                counts["ok"] += 1
            elif kind == "error":
                counts["EmbscopeError"] += 1
                counts["  " + target.message_class(err)] += 1
            else:
                counts["CRASH"] += 1
                key = f"{type(err).__name__}: {str(err)[:80]}"
                counts["  CRASH " + key] += 1
                if key not in crashes_shown and len(crashes_shown) < show:
                    crashes_shown.add(key)
                    print(f"--- crash in {name}, seed {seed}:", file=sys.stderr)
                    traceback.print_exception(err, file=sys.stderr)
            shutil.rmtree(directory, ignore_errors=True)
            seed += 1
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return counts


def limit_memory() -> None:
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_format(name: str, count: int | None, seconds: float | None, seed0: int, show: int) -> collections.Counter:
    """In the parent: children run the inputs; one that dies is a crash at the seed it was on."""
    total: collections.Counter = collections.Counter()
    started, seed = time.monotonic(), seed0
    kept = Path("fuzz-crashes")
    with tempfile.TemporaryDirectory() as scratch:
        progress = Path(scratch) / "progress"
        while True:
            left_count = None if count is None else count - total["tried"]
            left_time = None if seconds is None else seconds - (time.monotonic() - started)
            if (left_count is not None and left_count <= 0) or (left_time is not None and left_time <= 0):
                break
            argv = [sys.executable, __file__, "--child", "-f", name, "--seed", str(seed), "--show", str(show),
                    "--progress", str(progress)]
            argv += ["-n", str(left_count)] if left_count is not None else ["--seconds", str(left_time)]
            done = subprocess.run(argv, stdout=subprocess.PIPE, text=True, preexec_fn=limit_memory)
            if done.returncode == 0:
                total.update(json.loads(done.stdout))
                break
            dead_seed, directory = progress.read_text().split(" ", 1)
            kept.mkdir(exist_ok=True)
            if Path(directory).is_dir():  # gone when the child unwound through its clean-up
                shutil.copytree(directory, kept / f"{name}-{dead_seed}", dirs_exist_ok=True)
            print(f"--- {name}, seed {dead_seed}: the process died (exit status {done.returncode}); "
                  f"input kept in {kept / f'{name}-{dead_seed}'}", file=sys.stderr)
            finished = int(dead_seed) - seed  # inputs before the fatal one ran; their counts died too
            total["tried"] += finished + 1
            total["unknown (in a dead process)"] += finished
            total["CRASH"] += 1
            total[f"  CRASH process died with status {done.returncode}"] += 1
            seed = int(dead_seed) + 1
    total["seconds"] = round(time.monotonic() - started)
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=None, help="inputs per format (default 300 without --seconds)")
    parser.add_argument("--seconds", type=float, default=None, help="time per format instead of a count")
    parser.add_argument("-f", "--format", action="append", help="sample name (repeatable); default all")
    parser.add_argument("--seed", type=int, default=1, help="first seed")
    parser.add_argument("--show", type=int, default=3, help="tracebacks shown per format")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--progress", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.n is None and args.seconds is None:
        args.n = 300
    if args.child:
        counts = run_inputs(args.format[0], args.n, args.seconds, args.seed, args.show, args.progress)
        print(json.dumps(counts))
        return 0
    names = args.format or list(corpus.SAMPLES)
    total: collections.Counter = collections.Counter()
    for name in names:
        counts = run_format(name, args.n, args.seconds, args.seed, args.show)
        unknown = counts["unknown (in a dead process)"]
        print(f"{name}: tried {counts['tried']}, ok {counts['ok']}, EmbscopeError {counts['EmbscopeError']}, "
              f"crash {counts['CRASH']}{f', unknown {unknown}' if unknown else ''} ({counts['seconds']} s)", flush=True)
        for key, value in sorted(counts.items(), key=lambda kv: -kv[1]):
            if key.startswith("  "):
                print(f"  {value:6d} {key.strip()}", flush=True)
        total.update({k: counts[k] for k in ("tried", "ok", "EmbscopeError", "CRASH")})
    print(f"ALL: {len(names)} formats, tried {total['tried']}, ok {total['ok']}, "
          f"EmbscopeError {total['EmbscopeError']}, crash {total['CRASH']}")
    return 1 if total["CRASH"] else 0


if __name__ == "__main__":
    sys.exit(main())
