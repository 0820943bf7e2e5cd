"""The BPE merge loop, shared by minbpe files (byte_bpe.py) and GPT-2 files read without the
tokenizers library (gpt2_bpe.py): start from one id per byte, then, while some adjacent pair has a
merge, join every occurrence of the pair of lowest rank, left to right (as minbpe and OpenAI's
encoder.py do)."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Sequence

from embscope.core.errors import TokenizerError

# merged pieces are concatenations, so a file of a few hundred bytes can describe pieces that double in
# length with every merge (259 bytes -> 4.2 GB): a piece longer than this is refused before it is built.
# Real vocabularies' longest tokens are a few hundred bytes (runs of spaces or "=" in code vocabularies).
MAX_PIECE_BYTES = 1024
# and all pieces together: o200k's 200k pieces take about 1.4 MB, so this is many times any real vocabulary
MAX_TOTAL_PIECE_BYTES = 64 * 2**20

_NO_RANK = sys.maxsize
# chunks seen before; words repeat a lot when a command looks up many of them
_CACHE_LIMIT = 65536


class MergeTable:
    """Merge ``rank`` joins the id pair ``pairs[rank]`` into ``results[rank]``; lower ranks merge first.
    ``byte_ids[b]`` is the id a chunk's byte b starts as (-1 when the vocabulary lacks it)."""

    def __init__(self, pairs: list[tuple[int, int]], results: Sequence[int], byte_ids: Sequence[int]):
        self.pairs = pairs
        self.results = results
        self.byte_ids = byte_ids
        self._rank: dict[tuple[int, int], int] = {}
        for rank, pair in enumerate(pairs):
            self._rank.setdefault(pair, rank)  # a repeated pair keeps its first, lowest rank
        self._cache: dict[bytes, tuple[int, ...]] = {}

    def encode(self, chunk: bytes) -> tuple[int, ...]:
        cached = self._cache.get(chunk)
        if cached is not None:
            return cached
        byte_ids = self.byte_ids
        ids = [byte_ids[byte] for byte in chunk]
        rank_of = self._rank
        while len(ids) >= 2:
            best = min([rank_of.get(pair, _NO_RANK) for pair in itertools.pairwise(ids)])
            if best == _NO_RANK:
                break
            ids = _replace_pair(ids, self.pairs[best], self.results[best])
        result = tuple(ids)
        if len(self._cache) < _CACHE_LIMIT:
            self._cache[chunk] = result
        return result


def _replace_pair(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    first, second = pair
    out: list[int] = []
    i, last = 0, len(ids) - 1
    while i <= last:
        if i < last and ids[i] == first and ids[i + 1] == second:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


class PieceBudget:
    """Counts the bytes of pieces built by concatenation, refusing a piece or a total past the bounds
    before the bytes are allocated."""

    def __init__(self, where: str):
        self.where = where
        self.total = 0

    def join(self, first: bytes, second: bytes, what: str) -> bytes:
        size = len(first) + len(second)
        if size > MAX_PIECE_BYTES:
            raise TokenizerError(
                f"expected tokens of at most {MAX_PIECE_BYTES} bytes in {self.where}, found {what} "
                f"making one of {size:,} bytes"
            )
        self.total += size
        if self.total > MAX_TOTAL_PIECE_BYTES:
            raise TokenizerError(
                f"expected at most {MAX_TOTAL_PIECE_BYTES // 2**20} MiB of token bytes in {self.where}, "
                f"found more by {what}"
            )
        return first + second
