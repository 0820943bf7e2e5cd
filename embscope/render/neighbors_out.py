"""Writing a batched top-k result to a file, the format chosen by extension: .tsv, .jsonl or .npz.
Written under a temporary name beside the target, then renamed, so a reader never sees half a file."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import EmbscopeError
from ..text import printable, quote
from .files import written_whole

TSV_HEADER = ("query_id", "query_token", "rank", "id", "token", "cosine")


def out_format(path: Path) -> str:
    """The format a path asks for; anything but .tsv, .jsonl or .npz is refused before work starts."""
    suffix = Path(path).suffix.lower()
    if suffix not in WRITERS:
        raise EmbscopeError(f"expected --out to end in .tsv, .jsonl or .npz, found {quote(path)}")
    if not Path(path).parent.is_dir():
        raise EmbscopeError(f"expected an existing directory for --out, found none: {quote(Path(path).parent)}")
    return suffix[1:]


def ranked(topk, row: int):
    """(rank from 1, id, score) for one query, leaving out the padding of a short list."""
    for rank, (token_id, score) in enumerate(zip(topk.ids[row], topk.scores[row]), start=1):
        if token_id >= 0:
            yield rank, int(token_id), float(score)


def cosine_field(score: float) -> str | None:
    return f"{score:.9g}" if math.isfinite(score) else None  # 9 digits: a float32 round-trips


def write_tsv(fp, topk, token_of: Callable[[int], str]) -> None:
    # tokens may hold tabs or newlines: printable() escapes them so each row stays one line of six fields
    text = printable
    fp.write("\t".join(TSV_HEADER) + "\n")
    for row, query_id in enumerate(topk.query_ids):
        query_token = text(token_of(int(query_id)))
        for rank, token_id, score in ranked(topk, row):
            fields = (str(int(query_id)), query_token, str(rank), str(token_id), text(token_of(token_id)),
                      cosine_field(score) or "")
            fp.write("\t".join(fields) + "\n")


def write_jsonl(fp, topk, token_of: Callable[[int], str]) -> None:
    for row, query_id in enumerate(topk.query_ids):
        neighbours = [{"rank": rank, "id": token_id, "token": token_of(token_id),
                       "cosine": score if math.isfinite(score) else None}
                      for rank, token_id, score in ranked(topk, row)]
        doc = {"query_id": int(query_id), "query_token": token_of(int(query_id)), "neighbors": neighbours}
        fp.write(json.dumps(doc, ensure_ascii=False, allow_nan=False) + "\n")


def write_npz(fp, topk, token_of: Callable[[int], str]) -> None:
    np.savez(fp, ids=np.asarray(topk.ids, dtype=np.int64), scores=np.asarray(topk.scores, dtype=np.float32),
             query_ids=np.asarray(topk.query_ids, dtype=np.int64))


WRITERS = {".tsv": (write_tsv, "w"), ".jsonl": (write_jsonl, "w"), ".npz": (write_npz, "wb")}


def write_neighbors(path: Path, topk, token_of: Callable[[int], str]) -> str:
    """Write `topk` to `path` in the format its extension names; returns that format's name."""
    path = Path(path)
    kind = out_format(path)
    writer, mode = WRITERS[path.suffix.lower()]
    with written_whole(path, "--out", binary=mode == "wb") as fp:
        writer(fp, topk, token_of)
    return kind
