"""Byte-level BPE as in nlm and Karpathy's minbpe: ids 0-255 are the raw bytes and
merge i makes id 256 + i. Text is first cut into chunks by the split pattern stored
with the merges, so a merge never crosses two chunks (with nlm's pattern a space is a
chunk of its own, hence " dog" -> [32, 569]).

Files read:
- minbpe's ``.model`` text file: ``minbpe v1``, the split pattern (empty: no split),
  the number of special tokens, one ``special id`` line each, then one ``id1 id2``
  line per merge, in merge order.
- a JSON file of merges: ``[[id1, id2], ...]``, or ``{"merges": [...], "pattern": "...",
  "special_tokens": {"<|endoftext|>": 300}}`` with the last two optional.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from embscope.errors import CheckpointError, EmbscopeError
from embscope.tokenizers.base import ByteVocabulary, TokenizerKind, read_json, register_kind, sniff_json

MINBPE_MAGIC = "minbpe v1"

# chunks seen before; words repeat a lot when a command looks up many of them
_CHUNK_CACHE_LIMIT = 65536


class ByteBPETokenizer(ByteVocabulary):
    kind = "byte-bpe"

    def __init__(self, path: Path, merges: list[tuple[int, int]], pattern: str, special: dict[str, int]):
        self.path = path
        self.pattern = pattern
        self._split = compile_split_pattern(pattern, path)
        self._merged_id: dict[tuple[int, int], int] = {}
        pieces: list[bytes | None] = [bytes([byte]) for byte in range(256)]
        for rank, (first, second) in enumerate(merges):
            new_id = 256 + rank
            for part in (first, second):
                if not 0 <= part < new_id:
                    raise CheckpointError(
                        f"expected merge {rank} in {path.name} to join ids below {new_id}, "
                        f"found {first} {second}"
                    )
            if (first, second) in self._merged_id:
                raise CheckpointError(f"merge {rank} in {path.name} repeats the pair {first} {second}")
            self._merged_id[(first, second)] = new_id
            pieces.append(pieces[first] + pieces[second])
        self._pieces = pieces
        self._special = {}
        for text, id in special.items():
            if 0 <= id < len(pieces) or id in self._special:
                raise CheckpointError(
                    f"expected special token {text!r} in {path.name} to have an id of its own, found {id}"
                )
            self._special[id] = text
        self.vocab_size = max([len(pieces), *(id + 1 for id in self._special)])
        self._chunk_cache: dict[bytes, tuple[int, ...]] = {}

    @property
    def merges(self) -> list[tuple[int, int]]:
        return list(self._merged_id)

    def encode(self, text: str) -> list[int]:
        # like minbpe, text the pattern does not match is not encoded at all
        chunks = [text] if self._split is None else [m.group(0) for m in self._split.finditer(text)]
        ids: list[int] = []
        for chunk in chunks:
            ids.extend(self._encode_chunk(chunk.encode("utf-8")))
        return ids

    def _encode_chunk(self, chunk: bytes) -> tuple[int, ...]:
        cached = self._chunk_cache.get(chunk)
        if cached is not None:
            return cached
        ids = list(chunk)
        merged_id = self._merged_id
        while len(ids) >= 2:
            # merge ids grow with rank, so the lowest-ranked pair has the lowest new id
            best_id, best_pair = min(
                ((merged_id.get(pair, _NO_MERGE), pair) for pair in zip(ids, ids[1:])), key=lambda x: x[0]
            )
            if best_id == _NO_MERGE:
                break
            ids = _replace_pair(ids, best_pair, best_id)
        result = tuple(ids)
        if len(self._chunk_cache) < _CHUNK_CACHE_LIMIT:
            self._chunk_cache[chunk] = result
        return result


_NO_MERGE = float("inf")


def _replace_pair(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    out: list[int] = []
    i = 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


UNICODE_CLASS = re.compile(r"\\[pP]\{")  # \p{L} and friends: the regex package reads them, re does not


def compile_split_pattern(pattern: str, path: Path) -> Any:
    """Compile with ``re``; patterns that need ``\\p{L}`` and friends use ``regex``."""
    if not pattern:
        return None
    try:
        return re.compile(pattern)
    except re.error as re_err:
        if not UNICODE_CLASS.search(pattern):  # simply broken: no other engine would read it either
            raise CheckpointError(
                f"expected a regular expression as the split pattern in {path.name}, found {pattern!r}: {re_err}"
            ) from None
        try:
            import regex
        except ImportError:
            raise EmbscopeError(
                f"the split pattern in {path.name} needs the 'regex' package (pip install regex); "
                f"Python's re cannot read it: {re_err}"
            ) from None
        try:
            return regex.compile(pattern)
        except regex.error as err:
            raise CheckpointError(
                f"expected a regular expression as the split pattern in {path.name}, found {pattern!r}: {err}"
            ) from None


def _first_line(path: Path) -> str | None:
    try:
        with open(path, "rb") as file:
            head = file.read(len(MINBPE_MAGIC) + 2)
    except OSError:
        return None
    return head.split(b"\n", 1)[0].rstrip(b"\r").decode("latin-1")


def _is_merge_pair(item: Any) -> bool:
    return (
        isinstance(item, list)
        and len(item) == 2
        and all(isinstance(part, int) and not isinstance(part, bool) for part in item)
    )


def _merges_in(doc: Any) -> list[Any] | None:
    if isinstance(doc, dict) and isinstance(doc.get("merges"), list):
        return doc["merges"]
    if isinstance(doc, list) and doc:
        return doc
    return None


def sniff(path: Path) -> bool:
    if not path.is_file():
        return False
    if _first_line(path) == MINBPE_MAGIC:
        return True
    merges = _merges_in(sniff_json(path))
    return merges is not None and all(_is_merge_pair(item) for item in merges)


def load(path: Path) -> ByteBPETokenizer:
    if _first_line(path) == MINBPE_MAGIC:
        return _load_minbpe(path)
    return _load_json_merges(path)


def _load_minbpe(path: Path) -> ByteBPETokenizer:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise CheckpointError(f"cannot read {path} as a minbpe model: {err}") from None
    if len(lines) < 3:
        raise CheckpointError(
            f"expected a version line, a pattern line and a special-token count in {path.name}, "
            f"found {len(lines)} lines"
        )
    # the writer puts the pattern alone on line 2; keep its spaces exactly
    pattern = lines[1]
    try:
        special_count = int(lines[2])
    except ValueError:
        raise CheckpointError(
            f"expected the number of special tokens on line 3 of {path.name}, found {lines[2]!r}"
        ) from None
    special: dict[str, int] = {}
    for number in range(4, 4 + special_count):
        line = lines[number - 1] if number - 1 < len(lines) else ""
        text, _, id_text = line.rpartition(" ")
        if not text or not id_text.isdigit():
            raise CheckpointError(
                f"expected 'special_token id' on line {number} of {path.name}, found {line!r}"
            )
        special[text] = int(id_text)
    merges: list[tuple[int, int]] = []
    for number, line in enumerate(lines[3 + special_count :], start=4 + special_count):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not all(part.isdigit() for part in parts):
            raise CheckpointError(f"expected two token ids on line {number} of {path.name}, found {line!r}")
        merges.append((int(parts[0]), int(parts[1])))
    return ByteBPETokenizer(path, merges, pattern, special)


def _load_json_merges(path: Path) -> ByteBPETokenizer:
    doc = read_json(path)
    merges = _merges_in(doc)
    if merges is None:
        raise CheckpointError(
            f"expected a list of merges [[id1, id2], ...] in {path.name}, found {type(doc).__name__}"
        )
    for rank, item in enumerate(merges):
        if not _is_merge_pair(item):
            raise CheckpointError(f"expected merge {rank} in {path.name} to be [id1, id2], found {item!r}")
    pattern = (doc.get("pattern") or "") if isinstance(doc, dict) else ""
    special = (doc.get("special_tokens") or {}) if isinstance(doc, dict) else {}
    if not isinstance(pattern, str):
        raise CheckpointError(f"expected the pattern in {path.name} to be a string, found {pattern!r}")
    if not isinstance(special, dict) or not all(isinstance(id, int) for id in special.values()):
        raise CheckpointError(
            f"expected special_tokens in {path.name} to map strings to ids, found {special!r}"
        )
    return ByteBPETokenizer(path, [tuple(item) for item in merges], pattern, special)


KIND = register_kind(
    TokenizerKind(
        name="byte-bpe",
        file_patterns=("*.model", "merges.json"),
        sniff=sniff,
        load=load,
        expects="a minbpe *.model file or a merges.json list of id pairs",
    )
)
