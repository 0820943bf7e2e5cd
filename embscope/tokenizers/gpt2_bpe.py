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

A token of the vocabulary that is neither a byte nor made by a merge was added whole (``<|endoftext|>``,
RoBERTa's ``<s>``, ``<mask>``): written in the text, it is that token, as transformers' GPT2Tokenizer and the
tokenizers library match added tokens before the split.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from embscope.core import files
from embscope.core.errors import MissingPackageError, TokenError, TokenizerError
from embscope.quiet import native_stderr
from embscope.tokenizers.base import (
    MAX_TOKENIZER_BYTES,
    ByteVocabulary,
    check_largest_id,
    check_text,
    is_library_failure,
    library_ids,
    read_json,
    shown,
)
from embscope.tokenizers.bpe_merge import MergeTable
from embscope.tokenizers.byte_alphabet import byte_level_bytes, bytes_to_unicode
from embscope.tokenizers.sniffs import is_vocab, vocab_and_merges_paths
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
        self._vocab = vocab
        self._special = {}
        results = _merge_results(vocab, merges, merges_path)
        byte_char = bytes_to_unicode()
        byte_ids = [vocab.get(byte_char[byte], -1) for byte in range(256)]
        # a token that is neither a byte nor made by a merge was added whole: <|endoftext|>
        self.special_ids = frozenset(vocab.values()) - set(results) - set(byte_ids)
        added = sorted(token for token, id in vocab.items() if id in self.special_ids and token)
        self._encode = (_library_encoder(vocab, merges, added, path, -1 not in byte_ids)
                        or _merge_loop_encoder(vocab, merges, results, byte_ids, added, path))

    def encode(self, text: str) -> list[int]:
        return self._encode(text)

    @functools.cached_property
    def _pieces(self) -> list[bytes | None]:  # type: ignore[override]  # built on first use: encoding needs none
        pieces: list[bytes | None] = [None] * self.vocab_size
        for token, id in self._vocab.items():
            pieces[id] = byte_level_bytes(token)
        return pieces


def _merge_results(vocab: dict[str, int], merges: list[tuple[str, str]], merges_path: Path) -> list[int]:
    """The id each merge makes; a merge outside the vocabulary is refused here, because the tokenizers
    library panics on it (with a backtrace on stderr) instead of raising."""
    get = vocab.get
    results = [get(first + second, -1) for first, second in merges]
    if -1 in results or not all(first in vocab and second in vocab for first, second in merges):
        for rank, (first, second) in enumerate(merges):
            missing = [token for token in (first, second, first + second) if token not in vocab]
            if missing:
                raise TokenizerError(
                    f"expected merge {rank} of {merges_path.name} ({shown(first)} + {shown(second)}) to join and "
                    f"make tokens of the vocabulary, found {shown(missing[0])} missing"
                )
    return results


def _library_encoder(vocab: dict[str, int], merges: list[tuple[str, str]], added: list[str], path: Path,
                     complete: bool) -> Callable[[str], list[int]] | None:
    """Encoding by the tokenizers library, or None when it is not installed; `added`: the tokens added whole;
    `complete`: every byte is a token, so no text loses a character."""
    try:
        from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers
    except ImportError:
        return None
    with native_stderr():
        library = Tokenizer(models.BPE(vocab=vocab, merges=merges))
        library.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        library.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in added])

    def encode(text: str) -> list[int]:
        try:
            with native_stderr():  # a panic prints to fd 2 before it is raised
                encoding = library.encode(text, add_special_tokens=False)
        except BaseException as err:  # the library panics on some inputs instead of raising
            if not is_library_failure(err):
                raise
            raise TokenError(f"the tokenizers library failed to encode {shown(text)}: {err}") from None
        return library_ids(encoding, text, library, f"the {GPT2BPETokenizer.kind} tokenizer {path.name}", True,
                           complete=complete)

    return encode


def _merge_loop_encoder(vocab: dict[str, int], merges: list[tuple[str, str]], results: list[int],
                        byte_ids: list[int], added: list[str], path: Path) -> Callable[[str], list[int]]:
    try:
        import regex  # noqa: F401  GPT-2's pattern needs it; without it, ask for the library, which is simpler
    except ImportError:
        raise MissingPackageError(f"reading {path.name}", "tokenizers", "hf", path=path) from None
    split = compile_split_pattern(GPT2_PATTERN, "GPT-2's split pattern")
    table = MergeTable([(vocab[first], vocab[second]) for first, second in merges], results, byte_ids)
    # the added tokens, longest first: the leftmost match, and the longest there, as the library matches them
    whole = re.compile("|".join(map(re.escape, sorted(added, key=len, reverse=True)))) if added else None

    def encode(text: str) -> list[int]:
        ids: list[int] = []
        start = 0
        for match in whole.finditer(text) if whole is not None else ():
            ids.extend(encode_ordinary(text[start:match.start()]))
            ids.append(vocab[match.group(0)])
            start = match.end()
        ids.extend(encode_ordinary(text[start:]))
        return ids

    def encode_ordinary(text: str) -> list[int]:
        ids: list[int] = []
        for word in split.chunks(text):
            word_ids = table.encode(word.encode("utf-8"))
            if -1 in word_ids:
                raise TokenError(f"a byte of {shown(word)} in {shown(text)} is not in the vocabulary {path.name}")
            ids.extend(word_ids)
        return ids

    return encode


def load(path: Path) -> GPT2BPETokenizer:
    paths = vocab_and_merges_paths(path)
    if paths is None:
        raise TokenizerError(f"expected a file named vocab.json or merges.txt, found {path.name}")
    vocab_path, merges_path = paths
    if not merges_path.is_file():
        raise TokenizerError(f"expected {merges_path.name} beside {vocab_path}, found none")
    return load_files(vocab_path, merges_path)


def load_files(vocab_path: Path, merges_path: Path) -> GPT2BPETokenizer:
    """GPT-2's encoder from its two files, whatever their names (fairseq keeps them as encoder.json and vocab.bpe)."""
    vocab: Any = read_json(vocab_path)
    if not is_vocab(vocab):  # said before the merges are read
        raise TokenizerError(
            f"expected {vocab_path.name} to map token strings to ids, found another JSON document"
        )
    try:
        text = files.read_text(merges_path, MAX_TOKENIZER_BYTES, "a merges.txt")
    except UnicodeDecodeError as err:
        raise TokenizerError(f"cannot read {merges_path}: {err}") from None
    return from_contents(vocab, text, vocab_path, merges_path)


def from_contents(vocab: Any, text: str, vocab_path: Path, merges_path: Path) -> GPT2BPETokenizer:
    """GPT-2's encoder from the parsed vocabulary and the merges' text, however they were read (a .keras zip's
    assets are members of it); the paths name them in messages."""
    if not is_vocab(vocab):
        raise TokenizerError(
            f"expected {vocab_path.name} to map token strings to ids, found another JSON document"
        )
    try:
        "".join(vocab).encode("utf-8")  # all at once; JSON can spell lone surrogates, which no writer can print
    except UnicodeEncodeError:
        for token, id in vocab.items():
            check_text(token, f"the token with id {id} in {vocab_path.name}")
    check_largest_id(max(vocab.values()), vocab_path)
    lines = text.splitlines()
    merges: list[tuple[str, str]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip() or (number == 1 and line.startswith("#version")):
            continue
        parts = line.split()
        if len(parts) != 2:
            raise TokenizerError(
                f"expected two tokens on line {number} of {merges_path.name}, found {shown(line)}"
            )
        merges.append((parts[0], parts[1]))
    return GPT2BPETokenizer(vocab_path, merges_path, vocab, merges)
