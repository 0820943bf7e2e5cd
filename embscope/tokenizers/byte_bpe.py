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

from embscope.core import files
from embscope.core.errors import TokenizerError
from embscope.tokenizers.base import (
    MAX_TOKENIZER_BYTES,
    ByteVocabulary,
    check_largest_id,
    check_text,
    is_id,
    read_json,
    shown,
)
from embscope.tokenizers.bpe_merge import MergeTable, PieceBudget
from embscope.tokenizers.sniffs import MINBPE_MAGIC, is_merge_pair, line_of, merges_in
from embscope.tokenizers.split import compile_split_pattern

_BYTES = range(256)


class ByteBPETokenizer(ByteVocabulary):
    kind = "byte-bpe"
    unk_id = None  # every text is bytes, and every byte has an id

    def __init__(self, path: Path, merges: list[tuple[int, int]], pattern: str, special: dict[str, int]):
        self.path = path
        self.pattern = pattern
        self._split = compile_split_pattern(pattern, path.name) if pattern else None
        check_largest_id(255 + len(merges), path)
        budget = PieceBudget(path.name)
        pieces = [bytes([byte]) for byte in _BYTES]
        seen: set[tuple[int, int]] = set()
        for rank, (first, second) in enumerate(merges):
            new_id = 256 + rank
            for part in (first, second):
                if not 0 <= part < new_id:
                    raise TokenizerError(
                        f"expected merge {rank} in {path.name} to join ids below {new_id}, "
                        f"found {first} {second}"
                    )
            if (first, second) in seen:
                raise TokenizerError(f"merge {rank} in {path.name} repeats the pair {first} {second}")
            seen.add((first, second))
            pieces.append(budget.join(pieces[first], pieces[second], f"merge {rank} ({first} {second})"))
        self._pieces = [*pieces]
        self._merges = MergeTable(list(merges), range(256, 256 + len(merges)), _BYTES)
        self._special = {}
        for text, id in special.items():
            check_text(text, f"the special token with id {id} in {path.name}")
            if id < len(pieces) or id in self._special:
                raise TokenizerError(
                    f"expected special token {text!r} in {path.name} to have an id of its own, found {id}"
                )
            check_largest_id(id, path)
            self._special[id] = text
        self.special_ids = frozenset(self._special)
        self.vocab_size = max([len(pieces), *(id + 1 for id in self._special)])
        self._special_id = {text: id for id, text in self._special.items() if text}  # "" matches nothing
        self._whole = re.compile("|".join(map(re.escape, self._special_id))) if self._special_id else None

    @property
    def merges(self) -> list[tuple[int, int]]:
        return self._merges.pairs

    def encode(self, text: str) -> list[int]:
        """As minbpe's encode(text, allowed_special="all"): a special token in the text is that token (the first
        listed where two match at one place), the rest is ordinary text."""
        if self._whole is None:
            return self._encode_ordinary(text)
        ids: list[int] = []
        start = 0
        for match in self._whole.finditer(text):
            ids.extend(self._encode_ordinary(text[start:match.start()]))
            ids.append(self._special_id[match.group(0)])
            start = match.end()
        ids.extend(self._encode_ordinary(text[start:]))
        return ids

    def _encode_ordinary(self, text: str) -> list[int]:
        # like minbpe, text the pattern does not match is not encoded at all
        chunks = [text] if self._split is None else self._split.chunks(text)
        ids: list[int] = []
        for chunk in chunks:
            ids.extend(self._merges.encode(chunk.encode("utf-8")))
        return ids


def _first_line(path: Path) -> str | None:
    head = files.peek(path, len(MINBPE_MAGIC) + 2)
    return None if head is None else line_of(head)


def load(path: Path) -> ByteBPETokenizer:
    if _first_line(path) == MINBPE_MAGIC:
        return _load_minbpe(path)
    return _load_json_merges(path)


def _load_minbpe(path: Path) -> ByteBPETokenizer:
    try:
        lines = files.read_text(path, MAX_TOKENIZER_BYTES, "a minbpe model").splitlines()
    except UnicodeDecodeError as err:
        raise TokenizerError(f"cannot read {path} as a minbpe model: {err}") from None
    if len(lines) < 3:
        raise TokenizerError(
            f"expected a version line, a pattern line and a special-token count in {path.name}, "
            f"found {len(lines)} lines"
        )
    # the writer puts the pattern alone on line 2; keep its spaces exactly
    pattern = lines[1]
    special_count = int(lines[2]) if lines[2].isdecimal() and len(lines[2]) < 10 else -1
    if not 0 <= special_count <= len(lines) - 3:
        raise TokenizerError(
            f"expected the number of special tokens on line 3 of {path.name}, found {shown(lines[2])}"
        )
    special: dict[str, int] = {}
    for number in range(4, 4 + special_count):
        line = lines[number - 1] if number - 1 < len(lines) else ""
        text, _, id_text = line.rpartition(" ")
        if not text or not id_text.isdecimal():
            raise TokenizerError(
                f"expected 'special_token id' on line {number} of {path.name}, found {shown(line)}"
            )
        special[text] = int(id_text)
    merges: list[tuple[int, int]] = []
    for number, line in enumerate(lines[3 + special_count :], start=4 + special_count):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not all(part.isdecimal() for part in parts):
            raise TokenizerError(f"expected two token ids on line {number} of {path.name}, found {shown(line)}")
        merges.append((int(parts[0]), int(parts[1])))
    return ByteBPETokenizer(path, merges, pattern, special)


def _load_json_merges(path: Path) -> ByteBPETokenizer:
    doc = read_json(path)
    merges = merges_in(doc)
    if merges is None:
        raise TokenizerError(
            f"expected a list of merges [[id1, id2], ...] in {path.name}, found {type(doc).__name__}"
        )
    for rank, item in enumerate(merges):
        if not is_merge_pair(item):
            raise TokenizerError(f"expected merge {rank} in {path.name} to be [id1, id2], found {shown(item)}")
    pattern = (doc.get("pattern") or "") if isinstance(doc, dict) else ""
    special = (doc.get("special_tokens") or {}) if isinstance(doc, dict) else {}
    if not isinstance(pattern, str):
        raise TokenizerError(f"expected the pattern in {path.name} to be a string, found {shown(pattern)}")
    if not isinstance(special, dict) or not all(is_id(id) for id in special.values()):
        raise TokenizerError(f"expected special_tokens in {path.name} to map strings to ids, found {shown(special)}")
    return ByteBPETokenizer(path, [(first, second) for first, second in merges], pattern, special)
