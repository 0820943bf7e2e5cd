"""The ANDREA engine's "Harris" segment tokenizer.

Ids 0-255 are the raw bytes, 256 is BOS, and 257 + i is segment i of
``harris_segments.json`` (a JSON list of strings, or ``{"segments": [...]}``; a dict
``{segment: id}`` gives the ids itself). Encoding walks the UTF-8 bytes and takes, at
each position, the longest segment that matches there, else the single byte.
"""

from __future__ import annotations

from pathlib import Path

from embscope.core.errors import TokenizerError
from embscope.tokenizers.base import (
    ByteVocabulary,
    check_largest_id,
    check_text,
    is_id,
    read_json,
    shown,
)
from embscope.tokenizers.sniffs import segments_in

BOS_ID = 256
BOS_TEXT = "<BOS>"
FIRST_SEGMENT_ID = 257


class HarrisTokenizer(ByteVocabulary):
    kind = "harris"
    unk_id = None  # a byte that starts no segment is its own id
    special_ids = frozenset({BOS_ID})

    def __init__(self, path: Path, segments: dict[int, str]):
        self.path = path
        self.vocab_size = max([FIRST_SEGMENT_ID - 1, *segments]) + 1
        pieces: list[bytes | None] = [bytes([byte]) for byte in range(256)]
        pieces += [None] * (self.vocab_size - len(pieces))
        self._segment_id: dict[bytes, int] = {}
        for id in sorted(segments):
            piece = segments[id].encode("utf-8")
            pieces[id] = piece
            # an empty segment matches nothing; a repeated one keeps its first id
            if piece:
                self._segment_id.setdefault(piece, id)
        self._pieces = pieces
        self._special = {BOS_ID: BOS_TEXT}
        self._lengths = sorted({len(piece) for piece in self._segment_id}, reverse=True)

    def encode(self, text: str) -> list[int]:
        data = text.encode("utf-8")
        ids: list[int] = []
        position = 0
        while position < len(data):
            id, length = data[position], 1
            for candidate in self._lengths:
                if position + candidate > len(data):
                    continue
                segment_id = self._segment_id.get(data[position : position + candidate])
                if segment_id is not None:
                    id, length = segment_id, candidate
                    break
            ids.append(id)
            position += length
        return ids


def load(path: Path) -> HarrisTokenizer:
    doc = read_json(path)
    segments = segments_in(doc)
    if segments is not None:
        for index, segment in enumerate(segments):
            if not isinstance(segment, str):
                raise TokenizerError(f"expected segment {index} in {path.name} to be a string, found {shown(segment)}")
            check_text(segment, f"segment {index} in {path.name}")
        check_largest_id(FIRST_SEGMENT_ID + len(segments) - 1, path)
        return HarrisTokenizer(path, {FIRST_SEGMENT_ID + index: segment for index, segment in enumerate(segments)})
    if isinstance(doc, dict):
        by_id: dict[int, str] = {}
        for segment, id in doc.items():
            if not is_id(id) or id < FIRST_SEGMENT_ID:
                raise TokenizerError(
                    f"expected segment {shown(segment)} in {path.name} to have an id of "
                    f"{FIRST_SEGMENT_ID} or more, found {shown(id)}"
                )
            if id in by_id:
                raise TokenizerError(f"expected one segment per id in {path.name}, found two with id {id}")
            check_text(segment, f"the segment with id {id} in {path.name}")
            by_id[id] = segment
        if by_id:
            check_largest_id(max(by_id), path)
        return HarrisTokenizer(path, by_id)
    raise TokenizerError(
        f"expected a list of segment strings in {path.name}, found {type(doc).__name__}"
    )
