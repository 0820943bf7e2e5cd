"""GPT-2 style byte-level BPE read from ``vocab.json`` + ``merges.txt``.

Bytes are shown as printable characters through GPT-2's bytes_to_unicode table
(a space is "Ġ"), text is cut into words by GPT-2's split pattern, and each word is
merged by merge rank, as OpenAI's encoder.py does. So " dog" is one token "Ġdog"
when the vocabulary has it. A ``<prefix>-vocab.json`` beside ``<prefix>-merges.txt``
(what the tokenizers library's save_model writes with a prefix) is read too.

Encoding runs in the tokenizers library (a BPE model with the ByteLevel pre-tokenizer)
where it is installed, else in embscope's merge loop (bpe_merge.py) after GPT-2's split
pattern, which needs the regex package. Both give the same ids. Decoding and token
strings come from the vocabulary itself, either way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from embscope.errors import CheckpointError, TokenError
from embscope.tokenizers.base import (
    ByteVocabulary,
    TokenizerKind,
    check_largest_id,
    check_text,
    is_id,
    is_library_failure,
    missing_package,
    read_json,
    register_kind,
    shown,
    sniff_json,
)
from embscope.tokenizers.bpe_merge import MergeTable
from embscope.tokenizers.byte_alphabet import bytes_to_unicode, unicode_to_byte
from embscope.tokenizers.split import compile_split_pattern

# OpenAI's pattern (encoder.py in the GPT-2 release); \p{L} and \p{N} need the regex package
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


class GPT2BPETokenizer(ByteVocabulary):
    kind = "gpt2-bpe"
    unk_id = None  # byte-level: every text is bytes, and the 256 byte symbols are in the vocabulary

    def __init__(self, path: Path, merges_path: Path, vocab: dict[str, int], merges: list[tuple[str, str]]):
        self.path = path
        self.merges_path = merges_path
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
        pairs, results = _merges_as_ids(vocab, merges, merges_path)
        byte_char = bytes_to_unicode()
        byte_ids = [vocab.get(byte_char[byte], -1) for byte in range(256)]
        # a token that is neither a byte nor made by a merge was added whole: <|endoftext|>
        self.special_ids = frozenset(vocab.values()) - set(results) - set(byte_ids)
        self._encode = _library_encoder(vocab, merges) or _merge_loop_encoder(pairs, results, byte_ids, path)

    def encode(self, text: str) -> list[int]:
        return self._encode(text)


def _merges_as_ids(
    vocab: dict[str, int], merges: list[tuple[str, str]], merges_path: Path
) -> tuple[list[tuple[int, int]], list[int]]:
    """Each merge as (id pair, id made); a merge outside the vocabulary is refused here, because the
    tokenizers library panics on it instead of raising."""
    pairs: list[tuple[int, int]] = []
    results: list[int] = []
    for rank, (first, second) in enumerate(merges):
        first_id, second_id, made_id = vocab.get(first), vocab.get(second), vocab.get(first + second)
        if first_id is None or second_id is None or made_id is None:
            missing = first if first_id is None else second if second_id is None else first + second
            raise CheckpointError(
                f"expected merge {rank} of {merges_path.name} ({shown(first)} + {shown(second)}) to join and make "
                f"tokens of the vocabulary, found {shown(missing)} missing"
            )
        pairs.append((first_id, second_id))
        results.append(made_id)
    return pairs, results


def _library_encoder(vocab: dict[str, int], merges: list[tuple[str, str]]) -> Callable[[str], list[int]] | None:
    """Encoding by the tokenizers library, or None when it is not installed."""
    try:
        from tokenizers import Tokenizer, models, pre_tokenizers
    except ImportError:
        return None
    library = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    library.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)

    def encode(text: str) -> list[int]:
        try:
            return list(library.encode(text, add_special_tokens=False).ids)
        except BaseException as err:  # the library panics on some inputs instead of raising
            if not is_library_failure(err):
                raise
            raise TokenError(f"the tokenizers library failed to encode {shown(text)}: {err}") from None

    return encode


def _merge_loop_encoder(
    pairs: list[tuple[int, int]], results: list[int], byte_ids: list[int], path: Path
) -> Callable[[str], list[int]]:
    try:
        import regex  # noqa: F401  GPT-2's pattern needs it; without it, ask for the library, which is simpler
    except ImportError:
        raise missing_package(f"reading {path.name}", "tokenizers", "hf") from None
    split = compile_split_pattern(GPT2_PATTERN, "GPT-2's split pattern")
    table = MergeTable(pairs, results, byte_ids)

    def encode(text: str) -> list[int]:
        ids: list[int] = []
        for word in split.chunks(text):
            word_ids = table.encode(word.encode("utf-8"))
            if -1 in word_ids:
                raise TokenError(f"a byte of {shown(word)} in {shown(text)} is not in the vocabulary {path.name}")
            ids.extend(word_ids)
        return ids

    return encode


def _vocab_and_merges_paths(path: Path) -> tuple[Path, Path] | None:
    """The (vocab.json, merges.txt) pair that ``path`` is one half of, if any."""
    name = path.name
    if name.endswith("merges.txt"):
        return path.with_name(name[: -len("merges.txt")] + "vocab.json"), path
    if name.endswith("vocab.json"):
        return path, path.with_name(name[: -len("vocab.json")] + "merges.txt")
    return None


def _is_vocab(doc: object) -> bool:
    return isinstance(doc, dict) and bool(doc) and all(is_id(id) for id in doc.values())


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
    vocab: Any = read_json(vocab_path)
    if not _is_vocab(vocab):
        raise CheckpointError(
            f"expected {vocab_path.name} to map token strings to ids, found another JSON document"
        )
    for token, id in vocab.items():
        check_text(token, f"the token with id {id} in {vocab_path.name}")
    check_largest_id(max(vocab.values()), vocab_path)
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
                f"expected two tokens on line {number} of {merges_path.name}, found {shown(line)}"
            )
        merges.append((parts[0], parts[1]))
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
