"""`embscope compare A B [C ...]`: what training changed between checkpoints, row by row and over steps."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import TokenError
from ..naming import token_string_or_none
from ..text import quote
from .options import (
    AUTO_DEVICE,
    DeviceOption,
    JsonFlag,
    PlotOption,
    Source,
    check_plot,
    checkpoint_path,
    parse_words,
    plot_path,
    with_source,
)

if TYPE_CHECKING:  # the library and rich are imported when the command answers, not for --help
    from ..analysis.compare_series import Opener
    from ..embeddings import Embeddings

# shown in --help; the library's own defaults (analysis.compare) are checked equal by a test
LISTED, NEIGHBOR_K, NEIGHBOR_SAMPLE = 20, 10, 1000


class Align(str, Enum):
    procrustes = "procrustes"


class Match(str, Enum):
    tokens = "tokens"


def token_strings(emb: Embeddings, which: str) -> list[str | None]:
    """Every token row's string, None past the tokenizer's vocabulary, for --match tokens."""
    tokenizer, why_none = emb.tokenizer_for_names()
    if tokenizer is None:
        raise TokenError(f"--match tokens pairs rows by token string and needs a tokenizer for {which} "
                         f"({quote(emb.checkpoint.path)}): {why_none}")
    rows = emb.token.rows
    return [token_string_or_none(tokenizer, i) for i in range(rows)]


def word_rows(emb: Embeddings, words: list[str]) -> list[tuple[str, int | None, str | None]]:
    """Each --words entry with its token row in A, or why it has none (neighbour sets are per row)."""
    tokenizer, why_none = emb.tokenizer_for_names()
    if tokenizer is None:
        raise TokenError(f"--words needs a tokenizer to find the words' rows: {why_none}")
    from ..lookup import lookup_word
    found: list[tuple[str, int | None, str | None]] = []
    for word in words:
        lookup = lookup_word(tokenizer, word)
        if len(lookup.ids) == 1:
            found.append((word, lookup.ids[0], None))
        else:
            pieces = " ".join(quote(t) for t in lookup.tokens)
            why = f"is {len(lookup.ids)} tokens ({pieces}); neighbour sets are compared per row, so it is left out"
            found.append((word, None, why))
    return found


class ReadFiles:
    """The files a run of checkpoints was read from, each noted once and in linear time: a folder that many
    checkpoints share is listed for the first of them only, and only the first and the last checkpoint have a
    tokenizer looked up (they name the rows), so only theirs is noted."""

    def __init__(self, files_of: Callable[[Embeddings], list[Path]]):
        self.files_of = files_of
        self.found: dict[Path, None] = {}
        self.listed: set[Path] = set()
        self.last: Embeddings | None = None

    def note(self, emb: Embeddings) -> None:
        self.found[Path(emb.checkpoint.path)] = None
        if emb.checkpoint.directory not in self.listed:
            self.listed.add(emb.checkpoint.directory)
            self.found.update(dict.fromkeys(self.files_of(emb)))
        self.last = emb

    def note_last(self) -> None:
        """The last checkpoint's own files, its tokenizer's among them."""
        if self.last is not None:
            self.found.update(dict.fromkeys(self.files_of(self.last)))

    def paths(self) -> list[Path]:
        return list(self.found)


def checkpoint_paths(paths: list[Path], open_path: Opener) -> tuple[list[Path], Path, list[str]]:
    """The checkpoints to compare in order, what the output names as their origin, and notes."""
    if len(paths) >= 2:
        return paths, paths[0], []
    (folder,) = paths
    if not folder.is_dir():
        raise typer.BadParameter("expected two or more checkpoints, or one folder of checkpoints",
                                 param_hint="'CHECKPOINTS...'")
    from ..analysis.compare_series import run_checkpoints
    ordered, notes = run_checkpoints(folder, open_path)
    return ordered, folder, notes


def one_file_notes(given: list[Path], opened: list[Path]) -> list[str]:
    """A note for each checkpoint that is a file compared already (the same file by another name, a link, or the
    folder holding it): what it is compared with is itself. `given`: the paths as the user named them; `opened`:
    the files they opened."""
    import os
    seen: dict[tuple[int, int], int] = {}
    notes = []
    for index, path in enumerate(opened):
        try:
            info = os.stat(path)
        except OSError:
            continue
        first = seen.setdefault((info.st_dev, info.st_ino), index)
        if first != index:
            which = "A and B" if len(opened) == 2 else f"checkpoints {first + 1} and {index + 1}"
            a, b = given[first], given[index]
            named = f"{quote(a)} and {quote(b)}" if str(a) != str(b) else f"{quote(b)}, given twice"
            notes.append(f"{which} are one file ({named}): it is compared with itself, so every row is unchanged")
    return notes


def compare_command(
    source: Source,
    checkpoints: Annotated[list[Path], typer.Argument(
        parser=checkpoint_path,
        help="Two or more checkpoints (files or folders), compared in the order given; or one folder holding a "
             "run's checkpoints (ckpt*.pt, ANDREA dumps, nlm pickles, checkpoint-N/ folders), ordered by step.",
        metavar="CHECKPOINT...", show_default=False)],
    words: Annotated[list[str] | None, typer.Option(
        "--words", help="Words whose top-k neighbour sets are compared first, beside the sample (comma-separated or "
                        "repeated).")] = None,
    sample: Annotated[int, typer.Option(
        "--sample", min=0, help="How many rows are drawn (with a fixed seed) for the neighbour comparison.")] = NEIGHBOR_SAMPLE,
    k: Annotated[int, typer.Option("-k", min=1, help="How many neighbours of each row the neighbour sets hold.")] = NEIGHBOR_K,
    top: Annotated[int, typer.Option("--top", min=1, help="How many movers and stable rows are listed per table.")] = LISTED,
    align: Annotated[Align | None, typer.Option(
        "--align", help="procrustes: rotate B onto A (orthogonal Procrustes over the shared rows) before comparing; "
                        "for two different runs. Two checkpoints only.", show_default=False)] = None,
    match: Annotated[Match | None, typer.Option(
        "--match", help="tokens: pair token rows by token string, for vocabularies that differ. Two checkpoints only.",
        show_default=False)] = None,
    cka: Annotated[bool, typer.Option(
        "--cka/--no-cka", help="Linear CKA of each table pair: d x d products of both tables, about what the neighbour sample "
                               "costs; --no-cka skips it for a quicker answer on large tables.")] = True,
    output: Annotated[bool, typer.Option(
        "--output", help="One checkpoint: its token table against its own untied output projection (row cosine as "
                         "stored and after Procrustes, linear CKA, neighbour overlap).")] = False,
    plot: PlotOption = None,
    device: DeviceOption = AUTO_DEVICE,
    scheduler: Annotated[str | None, typer.Option(
        "--scheduler", help="Run each checkpoint's comparison as a task on the dask.distributed scheduler at this "
                            "address (tcp://host:port, or its scheduler file), or 'local' for worker processes here. "
                            "Every worker must read the checkpoints at the same paths.", metavar="ADDRESS",
        show_default=False)] = None,
    json: JsonFlag = False,
) -> None:
    """What changed between checkpoints: per-row cosine, norm and relative change, rows bitwise unchanged,
    neighbour-set overlap, linear CKA, position profiles; a trajectory over three or more steps. With --output,
    one checkpoint's token table against its output projection."""
    if output:
        if len(checkpoints) != 1 or align is not None or match is not None or plot is not None:
            raise typer.BadParameter("--output compares the two tables of one checkpoint: give one checkpoint, "
                                     "without --align, --match or --plot")
        return compare_output_command(replace(source, checkpoint=checkpoints[0]), probe_words=parse_words(words),
                                      sample=sample, k=k, device=device.value, json=json, cka=cka)
    if (align is not None or match is not None) and len(checkpoints) != 2:
        raise typer.BadParameter("--align and --match compare two runs: give exactly two checkpoints")
    if scheduler is not None and (align is not None or match is not None):
        raise typer.BadParameter("--scheduler runs a series of checkpoints: it takes neither --align nor --match")
    check_plot(plot)
    probe_words = parse_words(words)

    def open_path(path: Path) -> Embeddings:
        return replace(source, checkpoint=path).open()

    paths, origin, notes = checkpoint_paths(checkpoints, open_path)
    plot_file = plot_path(plot, origin, None, "compare", covers=paths)
    from ..analysis.compare import CompareOptions, Pairing, by_token
    from ..analysis.compare_series import compare_series
    from ..render import compare as render
    from ..render import progress
    from ..render.files import input_files
    options = CompareOptions(align=align is not None, k=k, sample=sample, listed=top, device=device.value, cka=cka)
    read = ReadFiles(input_files)  # every file the answer was read from: the plot may replace none of them
    ready = {0: open_path(paths[0])}  # opened before the series: words, token strings
    found_words = word_rows(ready[0], probe_words) if probe_words else []
    pairing: Pairing | None = None
    if match is not None:
        ready[1] = open_path(paths[1])
        pairing = by_token(token_strings(ready[0], "A"), token_strings(ready[1], "B"))
    rows = [row for _, row, _ in found_words if row is not None]
    with progress.stages() as stages:
        if scheduler is not None:
            from ..analysis.distributed import compare_on_scheduler
            found = compare_on_scheduler(paths, open_path, options, scheduler, word_rows=rows, stages=stages,
                                         on_open=read.note)
        else:
            found = compare_series(paths, open_path, options, ready=ready, token_pairing=pairing, word_rows=rows,
                                   stages=stages, on_open=read.note)
    read.note_last()
    comparison = found.comparison
    notes = [*one_file_notes(paths, [path for path, _ in found.checkpoints]), *notes]
    labels = render.Labels(found.checkpoints, origin, found.table_names, found.names, found.names_b, found_words,
                           notes, plot_file, run=len(checkpoints) == 1, audit=found.audit)
    if plot_file is not None:
        from ..render.compare_plot import draw
        draw(comparison, labels, plot_file, inputs=read.paths())
    if json:
        render.emit(comparison, labels)
    else:
        render.show(comparison, labels)


def compare_output_command(source: Source, *, probe_words: list[str] | None, sample: int, k: int, device: str,
                           json: bool, cka: bool) -> None:
    """`compare CKPT --output`: the token table (A) against the untied output projection (B) of one file."""
    from ..analysis.compare import CompareOptions
    from ..analysis.compare_output import compare_output
    from ..naming import token_name
    from ..render import compare_output as render
    from ..render import progress
    emb = source.open()
    found_words = word_rows(emb, probe_words) if probe_words else []
    with progress.stages() as stages:
        found = compare_output(emb, CompareOptions(k=k, sample=sample, device=device, cka=cka),
                               word_rows=[row for _, row, _ in found_words if row is not None], stages=stages)
    tokenizer = emb.tokenizer_for_names()[0]
    render.show(emb, found, found_words, lambda row: token_name(tokenizer, row), json=json)


def register(app: typer.Typer) -> None:
    app.command("compare")(with_source(compare_command, without=("checkpoint",)))
