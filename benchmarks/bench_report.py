"""How long `embscope report` takes on the bundled sample, against running the commands it covers one after
the other in the same process.

    python benchmarks/bench_report.py [--repeat 3]

Both go through the CLI in-process (typer's CliRunner), after one warm-up run of each (imports, font cache).
Baseline: `info`, `params`, `norms` (token and position tables, as the report has both, each with its --plot),
`positions --profile --plot`, `undertrained --plot`, `neighbors WORD` for each of the report's probe words,
and `map --plot` (token and position tables), the plots written as SVG, as the report draws them. Measured:
`report --out FILE.html`, which does all of that once and writes one page.

Target: the report in under 10 s; the ratio says what one page costs over the separate answers.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from timing import median_time  # benchmarks/timing.py: scripts run from this folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from typer.testing import CliRunner

    import embscope
    from embscope.analysis.probes import default_probe_words
    from embscope.cli import app

    runner = CliRunner()

    def invoke(*words: object) -> None:
        result = runner.invoke(app, [str(w) for w in words])
        if result.exit_code != 0:
            sys.exit(f"embscope {' '.join(map(str, words))} failed: {result.stderr or result.exception}")

    words = default_probe_words(embscope.open().tokenizer)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)

        def commands() -> None:
            invoke("info")
            invoke("params")
            for table in ("token", "position"):
                invoke("norms", "--table", table, "--plot", folder / f"norms-{table}.svg")
            invoke("positions", "--profile", "--plot", folder / "positions.svg")
            invoke("undertrained", "--plot", folder / "undertrained.svg")
            for word in words:
                invoke("neighbors", word)
            for table in ("token", "position"):
                invoke("map", "--table", table, "--plot", folder / f"map-{table}.svg")

        def report() -> None:
            invoke("report", "--out", folder / "report.html")

        commands()  # warm-up: imports, matplotlib's font cache
        report()
        baseline = median_time(commands, args.repeat)
        measured = median_time(report, args.repeat)
        size = (folder / "report.html").stat().st_size
    print(f"the sample (1,024 x 128 token table, 256 x 128 position table), {len(words)} probe words")
    print(f"the commands one after the other:  {baseline:6.2f} s")
    print(f"embscope report (one HTML page):   {measured:6.2f} s  = {measured / baseline:4.2f}x the commands "
          f"(target under 10 s: {'met' if measured < 10 else 'NOT met'}); the page is {size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
