"""Longer fuzz run: N inputs per format family, with counts of outcomes and caps on each input.

    python3 tests/fuzz/run_fuzz.py -n 500                  # every family, 500 inputs each
    python3 tests/fuzz/run_fuzz.py -n 100000 -f pickle     # one family (repeatable)
    python3 tests/fuzz/run_fuzz.py --seconds 60            # as many as fit in a time budget per family
    python3 tests/fuzz/run_fuzz.py --list                  # the families and the inputs in each
    python3 tests/fuzz/run_fuzz.py -n 100000 -j 2          # every family, two at a time (CI's step, .ci/run)

Inputs: mutants of small valid files written by the real writers (corpus.py), and, for the pickle
family, random pickle programs over the allow-list in all five pickle containers (pickles.py).
Outcomes: ok, an EmbscopeError (counted by message class), or a crash: any other exception (its
traceback is printed once per kind), or the process dying (a segfault, an out-of-memory kill). Each input runs
with fd 2 pointed at a file: anything printed there (a Rust panic, absl's log, a warning), or a refusal whose
message is more than one line, is a fault ("stderr"), as the CLI must answer with an empty stderr or one line.
Caps per input: the inputs run in child processes whose address space is limited to what the child
had after its setup plus 1 GiB (an input that asks for more fails, and is counted as over the memory
cap); each input is timed (over 10 s is counted as slow), and a child that makes no progress for 60 s
is killed and its input counted as a hang. A dead or killed child's input is kept under fuzz-crashes/
for replay, and the run goes on from the next seed. Exit status 1 on any crash, hang, slow input or
input over the memory cap, or any output on stderr."""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import corpus
import pickles
import target

MEMORY_CAP = 1 << 30  # bytes an input may take beyond the child's own setup
SLOW = 10.0  # seconds an input may take
HANG = 60.0  # seconds without progress before a child is killed

# the pickle generator's inputs, one name per container
GENERATED = {f"pickle-program-{name}": name for name in pickles.CONTAINERS}
FAMILIES = {
    "safetensors": ["safetensors", "safetensors-f16", "safetensors-index", "safetensors-shard", "safetensors-config"],
    "numpy": ["npy", "npz", "npz-compressed", "npz-member"],
    "andrea": ["andrea", "andrea-config"],
    "tensorflow": ["tf-checkpoint", "tf-checkpoint-partitioned"],
    "pytorch": ["pytorch", "pytorch-legacy", "pytorch-data.pkl", "pytorch-whole-data.pkl"],
    "pickle": ["nlm-pickle", "npy-object", *GENERATED],
    "tokenizers": ["tokenizer-huggingface", "tokenizer-gpt2-vocab", "tokenizer-gpt2-merges", "tokenizer-minbpe",
                   "tokenizer-harris"],
}
# the downloaded formats, each one family (CI runs these three with 10,000 inputs each: .ci/run)
FAMILIES.update({
    "h5": ["keras-h5", "keras-h5-compressed", "keras-zip", "keras-zip-weights", "keras-zip-wordpiece", "keras-zip-bpe",
           "keras-zip-vocabulary.txt", "keras-zip-vocabulary.json", "keras-zip-merges.txt"],
    "gguf": ["gguf", "gguf-llama"],
    "onnx": ["onnx-int8", "onnx-external-data", "onnx-external-model"],
    # the tokenizer kinds read through native libraries (sentencepiece, tokenizers' Unigram with a Precompiled
    # charsmap, tiktoken) and the plain ones beside them (tests/fuzz/tokenizer_samples.py)
    "tokenizer-kinds": ["tokenizer-sentencepiece-unigram", "tokenizer-sentencepiece-bpe", "tokenizer-sentencepiece-char",
                        "tokenizer-unigram-precompiled", "tokenizer-tiktoken", "tokenizer-vocab.txt",
                        "tokenizer-meta.pkl"],
})
FAMILIES = {family: kept for family, names in FAMILIES.items()  # a sample whose library is missing is left out
            if (kept := [name for name in names if name in corpus.SAMPLES or name in GENERATED])}
# samples registered by later readers join a family of their own name
FAMILIES.update({name: [name] for name in corpus.SAMPLES if not any(name in names for names in FAMILIES.values())})


class Inputs:
    """Input number `seed` of one name: a mutant of a sample (built once, copied per input) or a program."""

    def __init__(self, name: str, base: Path):
        self.name, self.base = name, base
        self.template: Path | None = None
        if name not in GENERATED:
            self.template = base / "template"
            self.template.mkdir()
            self.entry, self.victim = corpus.SAMPLES[name].build(self.template)

    def warm(self) -> None:
        """One valid input run before the memory cap, so that imports and caches count as setup."""
        if self.template is not None:
            target.exercise(self.entry)
        else:  # an .npz object member is refused even when valid: only the imports matter here
            (self.base / "warm").mkdir()
            target.outcome(pickles.write(GENERATED[self.name], self.base / "warm"))

    def build(self, directory: Path, seed: int) -> Path:
        if self.template is None:
            return pickles.generated_case(GENERATED[self.name], directory, seed)
        shutil.copytree(self.template, directory, dirs_exist_ok=True)
        entry, victim = (directory / p.relative_to(self.template) for p in (self.entry, self.victim))
        sample = corpus.SAMPLES[self.name]
        victim.write_bytes(corpus.mutate(victim.read_bytes(), random.Random(seed), 1 + seed % 4))
        if sample.after is not None:
            sample.after(entry, victim)
        return entry


def address_space() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def cap_memory() -> None:
    """From here on an input may take at most MEMORY_CAP more address space than the setup did."""
    try:
        limit = address_space() + MEMORY_CAP
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (OSError, ValueError):
        pass


def over_memory_cap(err: BaseException | None) -> bool:
    return isinstance(err, MemoryError) or "needs more memory than is available" in str(err)


def run_inputs(name: str, count: int | None, seconds: float | None, seed0: int, show: int,
               progress: Path) -> collections.Counter:
    """In the child: inputs seed0, seed0+1, ... until `count` or `seconds` run out."""
    counts: collections.Counter = collections.Counter()
    crashes_shown: set[str] = set()
    base = Path(tempfile.mkdtemp(prefix=f"fuzz-{name}-"))
    seed = seed0
    try:
        inputs = Inputs(name, base)
        inputs.warm()
        cap_memory()
        started = time.monotonic()
        while (count is None or counts["tried"] < count) and (seconds is None or time.monotonic() - started < seconds):
            directory = base / str(seed)
            directory.mkdir()
            progress.write_text(f"{seed} {directory}")  # read by the parent if this process dies or hangs
            path = inputs.build(directory, seed)
            began = time.monotonic()
            with warnings.catch_warnings(), fd2.capture() as printed:
                warnings.simplefilter("ignore")
                kind, err = target.outcome(path)
            took = time.monotonic() - began
            fault = stderr_fault(printed.text, err if kind == "error" else None)
            if fault:  # a library spoke on fd 2, or a refusal would take more than one line
                counts["STDERR"] += 1
                counts[f"  STDERR {fault[:80]}"] += 1
                if counts["STDERR"] <= show:
                    print(f"--- stderr in {name}, seed {seed}: {fault[:300]!r}", file=sys.stderr)
            counts["tried"] += 1
            counts["max_ms"] = max(counts["max_ms"], round(took * 1000))
            counts["slow"] += took > SLOW
            counts["over memory cap"] += over_memory_cap(err)
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
    counts["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return counts


class FD2:
    """fd 2 pointed at one temporary file for each input (as embscope.quiet does for a library call), so what
    anything prints past sys.stderr (a Rust panic, absl's log) is seen, counted and never lost."""

    def __init__(self) -> None:
        self.sink = tempfile.TemporaryFile()  # noqa: SIM115  kept for the whole run

    @contextlib.contextmanager
    def capture(self) -> Iterator[Printed]:
        printed = Printed()
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(self.sink.fileno(), 2)
        try:
            yield printed
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            size = os.fstat(self.sink.fileno()).st_size
            if size:
                os.lseek(self.sink.fileno(), 0, os.SEEK_SET)
                printed.text = os.read(self.sink.fileno(), min(size, 4096)).decode("utf-8", "replace")
                os.ftruncate(self.sink.fileno(), 0)
                os.lseek(self.sink.fileno(), 0, os.SEEK_SET)


class Printed:
    text = ""


def stderr_fault(printed: str, refusal: BaseException | None) -> str:
    """What the CLI would have shown beyond its one line: anything on fd 2 (an answer's stderr must be empty), or
    a refusal's message of more than one line. "" when there is nothing wrong."""
    if printed.strip():
        return printed.strip()
    if refusal is not None and (not str(refusal) or "\n" in str(refusal)):
        return f"a refusal of {len(str(refusal).splitlines())} lines: {str(refusal)[:200]}"
    return ""


fd2 = FD2()


def run_name(name: str, count: int | None, seconds: float | None, seed0: int, show: int) -> collections.Counter:
    """In the parent: children run the inputs; one that dies or stalls is a crash or a hang at its seed."""
    total: collections.Counter = collections.Counter()
    started, seed = time.monotonic(), seed0
    kept = Path("fuzz-crashes")
    with tempfile.TemporaryDirectory() as scratch:
        progress, out = Path(scratch) / "progress", Path(scratch) / "out"
        while True:
            left_count = None if count is None else count - total["tried"]
            left_time = None if seconds is None else seconds - (time.monotonic() - started)
            if (left_count is not None and left_count <= 0) or (left_time is not None and left_time <= 0):
                break
            argv = [sys.executable, __file__, "--child", "-f", name, "--seed", str(seed), "--show", str(show),
                    "--progress", str(progress)]
            argv += ["-n", str(left_count)] if left_count is not None else ["--seconds", str(left_time)]
            progress.unlink(missing_ok=True)
            with open(out, "w") as stdout:
                child = subprocess.Popen(argv, stdout=stdout)
                hung = watch(child, progress)
            if child.returncode == 0 and not hung:
                counts = collections.Counter(json.loads(out.read_text()))
                for key in ("max_ms", "peak_rss_mb"):
                    total[key] = max(total[key], counts.pop(key))
                total.update(counts)
                break
            if not progress.exists():
                raise SystemExit(f"{name}: the child failed before its first input (exit status {child.returncode})")
            dead_seed, directory = progress.read_text().split(" ", 1)
            kept.mkdir(exist_ok=True)
            if Path(directory).is_dir():  # gone when the child unwound through its clean-up
                shutil.copytree(directory, kept / f"{name}-{dead_seed}", dirs_exist_ok=True)
            what = "hung (killed after 60 s without progress)" if hung else f"died (exit status {child.returncode})"
            print(f"--- {name}, seed {dead_seed}: the process {what}; input kept in {kept / f'{name}-{dead_seed}'}",
                  file=sys.stderr)
            finished = int(dead_seed) - seed  # inputs before the fatal one ran; their counts died too
            total["tried"] += finished + 1
            total["unknown (in a dead process)"] += finished
            total["HANG" if hung else "CRASH"] += 1
            seed = int(dead_seed) + 1
    total["seconds"] = round(time.monotonic() - started)
    return total


def watch(child: subprocess.Popen, progress: Path) -> bool:
    """Wait for the child; kill it when its progress file has not changed for HANG seconds. True if killed."""
    last, since = None, time.monotonic()
    while True:
        try:
            child.wait(timeout=1)
            return False
        except subprocess.TimeoutExpired:
            pass
        try:
            now = progress.read_text()
        except OSError:
            now = None
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since > HANG:
            child.kill()
            child.wait()
            return True


def run_family(family: str, args: argparse.Namespace) -> tuple[list[str], collections.Counter]:
    """Every input name of one family, one after another: the lines to print, and the family's counts."""
    names = FAMILIES[family]
    share = None if args.n is None else -(-args.n // len(names))  # the family's count, spread over its inputs
    seconds = None if args.seconds is None else args.seconds / len(names)
    family_total: collections.Counter = collections.Counter()
    lines = []
    for name in names:
        counts = run_name(name, share, seconds, args.seed, args.show)
        lines.append(f"  {name}: tried {counts['tried']}, ok {counts['ok']}, EmbscopeError {counts['EmbscopeError']}, "
                     f"crash {counts['CRASH']}, hang {counts['HANG']}, slowest {counts['max_ms']} ms, "
                     f"peak RSS {counts['peak_rss_mb']} MB ({counts['seconds']} s)")
        for key, value in sorted(counts.items(), key=lambda kv: -kv[1]):
            if key.startswith(("  CRASH", "  STDERR")):
                lines.append(f"    {value:6d} {key.strip()}")
        for key in ("max_ms", "peak_rss_mb"):
            family_total[key] = max(family_total[key], counts[key])
        family_total.update({k: counts[k] for k in ("tried", "ok", "EmbscopeError", "CRASH", "HANG", "slow",
                                                    "over memory cap", "STDERR", "seconds")})
    lines.append(f"{family}: tried {family_total['tried']}, ok {family_total['ok']}, EmbscopeError "
                 f"{family_total['EmbscopeError']}, crash {family_total['CRASH']}, hang {family_total['HANG']}, "
                 f"over {SLOW:.0f} s {family_total['slow']}, over the 1 GiB memory cap {family_total['over memory cap']}, "
                 f"output on stderr {family_total['STDERR']}, slowest input {family_total['max_ms']} ms, "
                 f"largest child {family_total['peak_rss_mb']} MB ({family_total['seconds']} s)")
    return lines, family_total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=None, help="inputs per family (default 300 without --seconds)")
    parser.add_argument("--seconds", type=float, default=None, help="time per family instead of a count")
    parser.add_argument("-f", "--family", action="append", help="family (repeatable); default all")
    parser.add_argument("--seed", type=int, default=1, help="first seed")
    parser.add_argument("--show", type=int, default=3, help="tracebacks shown per input name")
    parser.add_argument("--list", action="store_true", help="list the families and their inputs")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="families run at once (one core each)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--progress", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.list:
        for family, names in FAMILIES.items():
            print(f"{family}: {', '.join(names)}")
        return 0
    if args.n is None and args.seconds is None:
        args.n = 300
    if args.child:
        print(json.dumps(run_inputs(args.family[0], args.n, args.seconds, args.seed, args.show, args.progress)))
        return 0
    families = args.family or list(FAMILIES)
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        parser.error(f"unknown family {unknown[0]!r}; --list shows them")
    grand: collections.Counter = collections.Counter()
    # families run side by side on `--jobs` cores (each in child processes of its own); each one's lines are
    # printed together when it ends
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        runs = [pool.submit(run_family, family, args) for family in families]
        for done in concurrent.futures.as_completed(runs):
            lines, family_total = done.result()
            print("\n".join(lines), flush=True)
            grand.update({k: family_total[k] for k in ("tried", "CRASH", "HANG", "slow", "over memory cap", "STDERR")})
    print(f"ALL: {len(families)} families, tried {grand['tried']}, crash {grand['CRASH']}, hang {grand['HANG']}, "
          f"slow {grand['slow']}, over memory cap {grand['over memory cap']}, stderr {grand['STDERR']}")
    return 1 if grand["CRASH"] or grand["HANG"] or grand["slow"] or grand["over memory cap"] or grand["STDERR"] else 0


if __name__ == "__main__":
    sys.exit(main())
