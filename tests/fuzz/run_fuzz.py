"""Longer fuzz run: N mutated inputs per format, with counts of outcomes.

    python3 tests/fuzz/run_fuzz.py -n 500            # every format
    python3 tests/fuzz/run_fuzz.py -n 2000 -f npz    # one format
    python3 tests/fuzz/run_fuzz.py --seconds 60      # as many as fit in a time budget per format

Outcomes: ok, an EmbscopeError (counted by message class), or a crash (any other exception:
a bug; its traceback is printed once per kind). Exit status 1 when anything crashed."""

from __future__ import annotations

import argparse
import collections
import shutil
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


def run_format(name: str, count: int, seconds: float | None, seed0: int, show: int) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    crashes_shown: set[str] = set()
    started = time.monotonic()
    i = 0
    base = Path(tempfile.mkdtemp(prefix=f"fuzz-{name}-"))
    try:
        while (seconds is None and i < count) or (seconds is not None and time.monotonic() - started < seconds):
            seed = seed0 + i
            directory = base / str(i)
            directory.mkdir()
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
            i += 1
    finally:
        shutil.rmtree(base, ignore_errors=True)
    counts["seconds"] = round(time.monotonic() - started)
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=300, help="inputs per format")
    parser.add_argument("--seconds", type=float, default=None, help="time per format instead of a count")
    parser.add_argument("-f", "--format", action="append", help="sample name (repeatable); default all")
    parser.add_argument("--seed", type=int, default=1, help="first seed")
    parser.add_argument("--show", type=int, default=3, help="tracebacks shown per format")
    args = parser.parse_args()
    names = args.format or list(corpus.SAMPLES)
    total: collections.Counter = collections.Counter()
    for name in names:
        counts = run_format(name, args.n, args.seconds, args.seed, args.show)
        print(f"{name}: tried {counts['tried']}, ok {counts['ok']}, EmbscopeError {counts['EmbscopeError']}, "
              f"crash {counts['CRASH']} ({counts['seconds']} s)")
        for key, value in sorted(counts.items(), key=lambda kv: -kv[1]):
            if key.startswith("  "):
                print(f"  {value:6d} {key.strip()}")
        total.update({k: counts[k] for k in ("tried", "ok", "EmbscopeError", "CRASH")})
    print(f"ALL: tried {total['tried']}, ok {total['ok']}, EmbscopeError {total['EmbscopeError']}, crash {total['CRASH']}")
    return 1 if total["CRASH"] else 0


if __name__ == "__main__":
    sys.exit(main())
