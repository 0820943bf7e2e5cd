"""GPT-2 style byte-level BPE read from ``vocab.json`` + ``merges.txt``, by hand.

Bytes are shown as printable characters through GPT-2's bytes_to_unicode table
(a space is "Ġ"), text is cut into words by GPT-2's split pattern, and each word is
merged by merge rank, as OpenAI's encoder.py does. So " dog" is one token "Ġdog"
when the vocabulary has it. A ``<prefix>-vocab.json`` beside ``<prefix>-merges.txt``
(what the tokenizers library's save_model writes with a prefix) is read too.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
from pathlib import Path

from embscope.errors import CheckpointError, TokenError
from embscope.tokenizers.byte_alphabet import bytes_to_unicode, unicode_to_byte
from embscope.tokenizers.base import (ByteVocabulary, TokenizerKind, check_largest_id, read_json, register_kind,
                                      sniff_json)

# OpenAI's pattern, which needs the `regex` package; gpt2_split_pattern() is the same for `re`
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

_WORD_CACHE_LIMIT = 65536


def _char_class(chars: list[str]) -> str:
    """The chars as the inside of a re character class, consecutive code points as ranges."""
    points = sorted(ord(char) for char in chars)
    parts: list[str] = []
    start = prev = None
    for point in [*points, None]:
        if point is not None and prev is not None and point == prev + 1:
            prev = point
            continue
        if start is not None:
            parts.append(f"\\U{start:08x}" if start == prev else f"\\U{start:08x}-\\U{prev:08x}")
        start = prev = point
    return "".join(parts)


@functools.cache
def gpt2_split_pattern() -> re.Pattern[str]:
    """GPT-2's split pattern for Python's ``re``, which has no ``\\p{..}``.

    ``re``'s ``\\w`` is exactly the letters (L), the numbers (Nd, Nl, No) and "_", so
    - ``\\p{N}`` (numbers) becomes ``[\\d<Nl No>]``: decimal digits plus the other
      number characters (², ½, Ⅻ), listed from the unicodedata module;
    - ``\\p{L}`` (letters) becomes ``[^\\W\\d_<Nl No>]``: word characters that are not numbers or "_";
    - ``\\s`` becomes the Unicode White_Space set, which is what ``\\s`` means in
      ``regex`` and Oniguruma (``re``'s ``\\s`` also takes U+001C-U+001F);
    - ``[^\\s\\p{L}\\p{N}]`` (anything else) becomes ``(?:[^\\w<space>]|_)``.
    Characters the running Python's Unicode tables do not know may still differ.
    """
    every_char = "".join(map(chr, range(sys.maxunicode + 1)))
    other_numbers = _char_class(
        [c for c in re.findall(r"\w", every_char) if unicodedata.category(c) in ("Nl", "No")]
    )
    spaces = _char_class(
        [
            c
            for c in re.findall(r"\s", every_char)
            if c in "\t\n\x0b\x0c\r\x85" or unicodedata.category(c) in ("Zs", "Zl", "Zp")
        ]
    )
    letter = rf"[^\W\d_{other_numbers}]"
    number = rf"[\d{other_numbers}]"
    other = rf"(?:[^\w{spaces}]|_)"
    return re.compile(
        rf"'s|'t|'re|'ve|'m|'ll|'d| ?{letter}+| ?{number}+| ?{other}+|[{spaces}]+(?![^{spaces}])|[{spaces}]+"
    )


class GPT2BPETokenizer(ByteVocabulary):
    kind = "gpt2-bpe"

    def __init__(self, path: Path, merges_path: Path, vocab: dict[str, int], merges: list[tuple[str, str]]):
        self.path = path
        self.merges_path = merges_path
        self._token_id = vocab
        self._rank = {pair: rank for rank, pair in reversed(list(enumerate(merges)))}
        self.vocab_size = max(vocab.values()) + 1
        to_byte = unicode_to_byte()
        pieces: list[bytes | None] = [None] * self.vocab_size
        for token, id in vocab.items():
            # a char outside the byte alphabet (not a byte-level vocabulary) stands for its UTF-8
            pieces[id] = b"".join(
                bytes([to_byte[char]]) if char in to_byte else char.encode("utf-8") for char in token
            )
        self._pieces = pieces
        self._special = {}
        self._split = gpt2_split_pattern()
        self._word_cache: dict[str, tuple[str, ...]] = {}

    def encode(self, text: str) -> list[int]:
        byte_char = bytes_to_unicode()
        ids: list[int] = []
        for match in self._split.finditer(text):
            word = "".join(byte_char[byte] for byte in match.group(0).encode("utf-8"))
            for token in self._bpe(word):
                id = self._token_id.get(token)
                if id is None:
                    raise TokenError(
                        f"the piece {token!r} of {text!r} is not in the vocabulary {self.path.name}"
                    )
                ids.append(id)
        return ids

    def _bpe(self, word: str) -> tuple[str, ...]:
        cached = self._word_cache.get(word)
        if cached is not None:
            return cached
        symbols = list(word)
        rank = self._rank
        while len(symbols) >= 2:
            pairs = set(zip(symbols, symbols[1:]))
            best = min(pairs, key=lambda pair: rank.get(pair, _NO_MERGE))
            if best not in rank:
                break
            merged: list[str] = []
            i = 0
            while i < len(symbols):
                if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == best:
                    merged.append(symbols[i] + symbols[i + 1])
                    i += 2
                else:
                    merged.append(symbols[i])
                    i += 1
            symbols = merged
        result = tuple(symbols)
        if len(self._word_cache) < _WORD_CACHE_LIMIT:
            self._word_cache[word] = result
        return result


_NO_MERGE = float("inf")


def _vocab_and_merges_paths(path: Path) -> tuple[Path, Path] | None:
    """The (vocab.json, merges.txt) pair that ``path`` is one half of, if any."""
    name = path.name
    if name.endswith("merges.txt"):
        return path.with_name(name[: -len("merges.txt")] + "vocab.json"), path
    if name.endswith("vocab.json"):
        return path, path.with_name(name[: -len("vocab.json")] + "merges.txt")
    return None


def _is_vocab(doc: object) -> bool:
    return (
        isinstance(doc, dict)
        and bool(doc)
        and all(isinstance(id, int) and not isinstance(id, bool) and id >= 0 for id in doc.values())
    )


def sniff(path: Path) -> bool:
    paths = _vocab_and_merges_paths(path)
    if paths is None or not (paths[0].is_file() and paths[1].is_file()):
        return False
    return _is_vocab(sniff_json(paths[0]))


def load(path: Path) -> GPT2BPETokenizer:
    paths = _vocab_and_merges_paths(path)
    if paths is None:
        raise CheckpointError(f"expected a file named vocab.json or merges.txt, found {path.name}")
    vocab_path, merges_path = paths
    if not merges_path.is_file():
        raise CheckpointError(f"expected {merges_path.name} beside {vocab_path}, found none")
    vocab = read_json(vocab_path)
    if not _is_vocab(vocab):
        raise CheckpointError(
            f"expected {vocab_path.name} to map token strings to ids, found another JSON document"
        )
    try:
        lines = merges_path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise CheckpointError(f"cannot read {merges_path}: {err}") from None
    merges: list[tuple[str, str]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip() or (number == 1 and line.startswith("#version")):
            continue
        parts = line.split()
        if len(parts) != 2:
            raise CheckpointError(
                f"expected two tokens on line {number} of {merges_path.name}, found {line!r}"
            )
        merges.append((parts[0], parts[1]))
    check_largest_id(max(vocab.values()), vocab_path)
    return GPT2BPETokenizer(vocab_path, merges_path, vocab, merges)


KIND = register_kind(
    TokenizerKind(
        name="gpt2-bpe",
        file_patterns=("*vocab.json",),
        sniff=sniff,
        load=load,
        expects="vocab.json with merges.txt beside it",
    )
)
