"""Writing a batched top-k result to a file, the format chosen by extension: .tsv, .jsonl or .npz; `-` is TSV on
standard output. A file is written under a temporary name beside the target, then renamed (render.files).

TSV: a header, then one line per neighbour. A field holding a tab, a line break or a double quote, or starting
like a spreadsheet formula (=, +, -, @), is put in double quotes with its quotes doubled, as CSV does
(render.cells), so `csv.reader(f, delimiter="\\t")` and `pandas.read_csv(path, sep="\\t")` read every row
back exactly. JSONL: one JSON document per query, the token
strings exact (JSON escapes what it must)."""

from __future__ import annotations

import io
import math
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from ..core.errors import OutputError
from ..core.text import quote, shortened
from ..registry import Entry, entries, find, named
from . import jsonout
from .cells import tsv_cell
from .files import OUT, written_whole

if TYPE_CHECKING:
    from ..compute.topk import TopK

TSV_HEADER = ("query_id", "query_token", "rank", "id", "token", "cosine")
STDOUT = "-"


def out_format(path: Path) -> str:
    """The format a path asks for; anything but .tsv, .jsonl, .npz or `-` is refused (before work starts)."""
    if str(path) == STDOUT:
        return "tsv"
    suffix = Path(path).suffix.lower()
    if find(WRITERS, suffix) is None:
        raise OutputError(f"expected a file ending in .tsv, .jsonl or .npz, or - for TSV on standard output, "
                          f"found {quote(shortened(str(path)))}", path=path, option=OUT)
    return suffix[1:]


def ranked(topk: TopK, row: int) -> Iterable[tuple[int, int, float]]:
    """(rank from 1, id, score) for one query, leaving out the padding of a short list."""
    for rank, (token_id, score) in enumerate(zip(topk.ids[row], topk.scores[row]), start=1):
        if token_id >= 0:
            yield rank, int(token_id), float(score)


def cosine_field(score: float) -> str:
    return f"{score:.9g}" if math.isfinite(score) else ""  # 9 digits: a float32 round-trips


def write_tsv(fp: IO[str], topk: TopK, token_of: Callable[[int], str]) -> None:
    fp.write("\t".join(TSV_HEADER) + "\n")
    for row, query_id in enumerate(topk.query_ids):
        query_token = tsv_cell(token_of(int(query_id)))
        for rank, token_id, score in ranked(topk, row):
            fields = (str(int(query_id)), query_token, str(rank), str(token_id), tsv_cell(token_of(token_id)),
                      cosine_field(score))
            fp.write("\t".join(fields) + "\n")


def write_jsonl(fp: IO[str], topk: TopK, token_of: Callable[[int], str]) -> None:
    for row, query_id in enumerate(topk.query_ids):
        neighbours = [{"rank": rank, "id": token_id, "token": token_of(token_id), "cosine": score}
                      for rank, token_id, score in ranked(topk, row)]
        fp.write(jsonout.dumps({"query_id": int(query_id), "query_token": token_of(int(query_id)),
                                "neighbors": neighbours}) + "\n")


def write_npz(fp: IO[bytes], topk: TopK, token_of: Callable[[int], str]) -> None:
    np.savez(fp, ids=np.asarray(topk.ids, dtype=np.int64), scores=np.asarray(topk.scores, dtype=np.float32),
             query_ids=np.asarray(topk.query_ids, dtype=np.int64))


Writer = Callable[[IO[Any], "TopK", Callable[[int], str]], None]  # (file, result, the name of a row)
# each by the suffix that asks for it; the item is the writer and the mode its file is opened in
WRITERS: tuple[Entry[tuple[Writer, str]], ...] = entries(
    Entry(".tsv", (write_tsv, "w"), "a row a neighbour, for a spreadsheet or awk; also what `-` writes"),
    Entry(".jsonl", (write_jsonl, "w"), "a JSON object a query, for a program"),
    Entry(".npz", (write_npz, "wb"), "ids, scores and query ids as arrays, for numpy"))


class BorrowedText(io.TextIOWrapper):
    """A text layer over sys.stdout's buffer, which it does not own: closing it, or collecting it, leaves the buffer
    open. A second Ctrl-C or SIGTERM during detach's flush (a stopped reader holds it) left the layer attached, and
    its collection closed sys.stdout: the exit's flush printed a ValueError traceback."""

    def close(self) -> None:
        pass


def write_neighbors(path: Path, topk: TopK, token_of: Callable[[int], str], inputs: Iterable[Path] = ()) -> str:
    """Write `topk` to `path` in the format its extension names (`-`: TSV on stdout); returns the format's name.
    `inputs`: the files the answer was read from, which the output may not replace."""
    kind = out_format(path)
    if str(path) == STDOUT:
        # the rows are data: UTF-8 whatever the terminal's encoding (PYTHONIOENCODING=ascii would escape them)
        sys.stdout.flush()
        stream = BorrowedText(sys.stdout.buffer, encoding="utf-8", errors="backslashreplace", newline="\n")
        try:
            write_tsv(stream, topk, token_of)
            stream.flush()
        finally:
            stream.detach()  # sys.stdout keeps its buffer
        return kind
    writer, mode = named(WRITERS, Path(path).suffix.lower())
    with written_whole(Path(path), OUT, binary=mode == "wb", inputs=inputs) as fp:
        writer(fp, topk, token_of)
    return kind
