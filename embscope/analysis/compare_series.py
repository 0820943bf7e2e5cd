"""The checkpoints of a run compared as `compare` and `report` do: each opened in turn and handed to
analysis.compare (which keeps only the tables it still needs), with what to call each table's rows kept
beside the numbers."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.errors import CheckpointError
from ..core.text import quote
from ..naming import row_name, tokenizer_failure
from ..series import Step, checkpoint_step, folder_checkpoints, in_step_order, path_list
from .audit import Audit, audit
from .compare import CompareOptions, Comparison, TableInput, compare
from .pairing import Pairing
from .stages import Stages, quiet

if TYPE_CHECKING:
    from ..core.checkpoint import Table
    from ..embeddings import Embeddings

Namer = Callable[[int], str]  # a row id -> what the reader calls it: a token string, "#id", "position p"
Opener = Callable[[Path], "Embeddings"]  # a checkpoint path -> its tables, opened with the options the user gave


@dataclass(frozen=True, eq=False)
class SeriesComparison:
    """A comparison, and what its numbers are about."""

    comparison: Comparison
    checkpoints: list[tuple[Path, Step]]  # each checkpoint as opened, in order, with its step
    table_names: dict[str, tuple[str, str]]  # role -> the table's name in the first and the last checkpoint
    names: dict[str, Namer]  # role -> how to name a row of the first checkpoint's table
    names_b: dict[str, Namer]  # role -> how to name a row of the last checkpoint's table
    audit: Audit  # duplicate and out-of-order checkpoints
    unnamed_b: dict[str, str] = field(default_factory=dict)  # role -> why the last checkpoint's rows print as #id


def namer(emb: Embeddings, role: str, first_row: int) -> Namer:
    tokenizer = emb.tokenizer_for_names(emb.table(role))[0] if role != "position" else None
    return functools.partial(row_name, tokenizer, role, first_row=first_row)


def unnamed(emb: Embeddings, roles: Iterable[str]) -> dict[str, str]:
    """role -> why namer names that table's rows `#id` (a tokenizer that did not load, or is not that table's);
    a position table's rows are named by position."""
    found = {}
    for role in roles:
        why = tokenizer_failure(emb, emb.table(role)) if role != "position" else None
        if why:
            found[role] = why
    return found


def stored_type(table: Table) -> str:
    """How the file stores a table ("bfloat16", "float32 Q8_0", "float32 transposed"): the same values in other
    bytes, or in another order, are no copy."""
    return " ".join(filter(None, (table.tensor.dtype, table.tensor.quantization,
                                  "transposed" if table.tensor.transposed else None)))


def tables_of(emb: Embeddings) -> dict[str, TableInput]:
    found = {"token": TableInput(emb.token.array, stored=stored_type(emb.token))}
    if emb.position is not None:
        found["position"] = TableInput(emb.position.array, emb.position.first_row, stored_type(emb.position))
    if emb.output is not None:
        found["output"] = TableInput(emb.output.array, stored=stored_type(emb.output))
    return found


def run_checkpoints(folder: Path, open_path: Opener) -> tuple[list[Path], list[str]]:
    """The checkpoints a folder of a run holds, in step order, and notes on the order."""
    found = folder_checkpoints(folder)
    if len(found) < 2:
        names = ", ".join(quote(p.name) for p in found) or "none"
        raise CheckpointError(f"expected two or more checkpoints in the folder {quote(folder)}, found {len(found)} "
                              f"({names})", path=folder)
    # pickles are read whole to learn their step, then let go: at most one is held while ordering
    stepped = [(path, checkpoint_step(open_path(path).checkpoint)) for path in found]
    ordered, notes = in_step_order(stepped)
    return [path for path, _ in ordered], notes


def compare_series(paths: Sequence[Path], open_path: Opener, options: CompareOptions | None = None, *,
                   ready: dict[int, Embeddings] | None = None, token_pairing: Pairing | None = None,
                   word_rows: Sequence[int] = (), stages: Stages = quiet,
                   on_open: Callable[[Embeddings], None] | None = None) -> SeriesComparison:
    """Compare the checkpoints at `paths`, in order. `ready`: checkpoints already opened, by their index in
    `paths` (opened before the series for words or token strings); the rest are opened as the series reaches them.
    `on_open` sees each checkpoint as it is opened (the command notes the files read, which a plot may not replace)."""
    paths = path_list(paths, "paths")
    opened: list[tuple[Path, Step]] = []
    names: dict[str, Namer] = {}
    names_b: dict[str, Namer] = {}
    first_names: dict[str, str] = {}
    last_names: dict[str, str] = {}
    waiting = dict(ready or {})

    latest: list[tuple[Embeddings, dict[str, TableInput]]] = []  # the last checkpoint opened, named at the end

    def series() -> Iterator[dict[str, TableInput]]:
        """Each checkpoint opened in turn; the analysis keeps only the tables it still needs. Only the first and
        the last are named (a tokenizer found for each of a folder's checkpoints would list the folder each time)."""
        for index, path in enumerate(paths):
            emb = waiting.pop(index, None) or open_path(path)
            opened.append((emb.checkpoint.path, checkpoint_step(emb.checkpoint)))
            if on_open is not None:
                on_open(emb)
            tables = tables_of(emb)
            for role, table in tables.items():
                last_names[role] = emb.table(role).name
                if index == 0:
                    names[role], first_names[role] = namer(emb, role, table.first_row), last_names[role]
            latest[:] = [(emb, tables)]
            yield tables

    comparison = compare(series(), options or CompareOptions(), token_pairing=token_pairing, word_rows=word_rows,
                         stages=stages, checkpoints=len(paths))
    (last, last_tables), = latest
    names_b.update((role, namer(last, role, table.first_row)) for role, table in last_tables.items())
    table_names = {role: (first_names[role], last_names[role]) for role in comparison.tables}
    return finished(comparison, opened, table_names, names, names_b, unnamed(last, last_tables))


def finished(comparison: Comparison, opened: list[tuple[Path, Step]], table_names: dict[str, tuple[str, str]],
             names: dict[str, Namer], names_b: dict[str, Namer], unnamed_b: dict[str, str]) -> SeriesComparison:
    """The comparison with what it is about, and the run's audit."""
    labels = [f"step {step.value:,}" if step.value is not None else f"checkpoint {i + 1}"
              for i, (_, step) in enumerate(opened)]
    return SeriesComparison(comparison, opened, table_names, names, names_b, audit(comparison, labels), unnamed_b)
