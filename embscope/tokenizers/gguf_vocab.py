"""The tokenizer a GGUF file carries in its metadata (tokenizer.ggml.*), run as llama.cpp runs it:

- ``gpt2``: byte-level BPE over ``tokens`` and ``merges`` (GPT-2, Llama 3, Qwen, StarCoder, Phi). Text is
  split with GPT-2's pattern whatever ``tokenizer.ggml.pre`` names: single words split alike under every
  pattern llama.cpp knows, longer digit runs may not.
- ``llama``: SentencePiece BPE (Llama 1-2, Mistral, Gemma): spaces become "▁" (one is put in front), the
  adjacent pair whose union has the highest score is merged first, and characters left outside the
  vocabulary fall back to byte tokens ``<0xE2>``.
- ``bert``: WordPiece as llama.cpp stores it: word-initial pieces carry "▁", continuations carry nothing;
  text is lower-cased and split at spaces and punctuation, and each word matched longest-first.
- any other model (``t5``, ``rwkv``, ...): ids are named, but words cannot be encoded.

A word the vocabulary cannot hold becomes the unknown token, and ``unk_id`` names it, so that callers can
refuse it rather than compare "<unk>" with itself."""

from __future__ import annotations

import heapq
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from embscope.errors import CheckpointError, TokenError
from embscope.tokenizers.base import SPACE_MARK, ByteVocabulary, check_id, check_largest_id
from embscope.tokenizers.gpt2_bpe import GPT2BPETokenizer

if TYPE_CHECKING:
    import numpy as np

# tokenizer.ggml.token_type values (gguf.TokenType)
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
SPECIAL_ID_KEYS = ("bos_token_id", "eos_token_id", "unknown_token_id", "separator_token_id",
                   "padding_token_id", "cls_token_id", "mask_token_id")
PREFIX = "tokenizer.ggml."
HEX_DIGITS = frozenset("0123456789abcdefABCDEF")  # int(x, 16) alone would take "-1" and "+f"


class GGUFVocabulary(ByteVocabulary):
    """What every GGUF tokenizer shares: ids named from the token list, the unknown and special ids."""

    kind = "gguf"
    unk_id: int | None
    special_ids: frozenset[int]

    def __init__(self, path: Path, model: str, tokens: list[str], types: np.ndarray | None,
                 unk_id: int | None, special_ids: frozenset[int]):
        self.path = path
        self.model = model
        self.kind = f"gguf ({model})"
        self.vocab_size = len(tokens)
        self._tokens = tokens
        self._types = types
        self.unk_id = unk_id
        self.special_ids = special_ids
        self._special = {id: tokens[id] for id in special_ids}
        self._pieces = [self._piece_bytes(id, token) for id, token in enumerate(tokens)]

    def _type(self, id: int) -> int:
        return NORMAL if self._types is None else int(self._types[id])

    def _piece_bytes(self, id: int, token: str) -> bytes | None:
        return token.encode("utf-8")

    def encode(self, text: str) -> list[int]:
        raise TokenError(f"the {self.model!r} tokenizer stored in {self.path.name} cannot be run by embscope "
                         "(it runs gpt2, llama and bert): give token ids with --ids, or the model's tokenizer "
                         "file with --tokenizer")


class SentencePieceBPE(GGUFVocabulary):
    def __init__(self, path: Path, model: str, tokens: list[str], types: np.ndarray | None,
                 unk_id: int | None, special_ids: frozenset[int], scores: np.ndarray, add_space_prefix: bool):
        super().__init__(path, model, tokens, types, unk_id, special_ids)
        self._scores = [float(score) for score in scores]
        self._add_space_prefix = add_space_prefix
        # pieces a merge may make (control, byte and unused tokens are never made from text)
        self._mergeable = {token: id for id, token in reversed(list(enumerate(tokens)))
                           if self._type(id) in (NORMAL, USER_DEFINED)}
        self._byte_id: dict[int, int] = {}
        for id, token in enumerate(tokens):
            byte = byte_token(token) if self._type(id) == BYTE else None
            if byte is not None:
                self._byte_id.setdefault(byte, id)

    def _piece_bytes(self, id: int, token: str) -> bytes | None:
        byte = byte_token(token) if self._type(id) == BYTE else None
        return bytes([byte]) if byte is not None else token.replace(SPACE_MARK, " ").encode("utf-8")

    def encode(self, text: str) -> list[int]:
        text = text.replace(" ", SPACE_MARK)
        if self._add_space_prefix and text:
            text = SPACE_MARK + text
        symbols = self._merge(text)
        ids: list[int] = []
        for symbol in symbols:
            id = self._mergeable.get(symbol)
            if id is not None:
                ids.append(id)
                continue
            for byte in symbol.encode("utf-8", "surrogatepass"):
                ids.append(self._byte_id[byte] if byte in self._byte_id else self._unknown(symbol))
        return ids

    def _merge(self, text: str) -> list[str]:
        """llama.cpp's SentencePiece merge loop: always the adjacent pair whose union scores highest (the
        leftmost on a tie), kept in a heap so that a long text costs n log n, not n squared."""
        pieces = list(text)
        before = list(range(-1, len(pieces) - 1))
        after = [*range(1, len(pieces)), -1]
        heap: list[tuple[float, int, int, int]] = []

        def push(left: int, right: int) -> None:
            if left >= 0 and right >= 0:
                id = self._mergeable.get(pieces[left] + pieces[right])
                if id is not None:
                    heapq.heappush(heap, (-self._scores[id], left, right, len(pieces[left]) + len(pieces[right])))

        for i in range(len(pieces) - 1):
            push(i, i + 1)
        while heap:
            _, left, right, size = heapq.heappop(heap)
            if after[left] != right or not pieces[right] or len(pieces[left]) + len(pieces[right]) != size:
                continue  # one side was merged since this pair was pushed
            pieces[left] += pieces[right]
            pieces[right] = ""
            after[left] = after[right]
            if after[right] >= 0:
                before[after[right]] = left
            push(before[left], left)
            push(left, after[left])
        return [piece for piece in pieces if piece]

    def _unknown(self, symbol: str) -> int:
        if self.unk_id is None:
            raise TokenError(f"{symbol!r} is not in the vocabulary of {self.path.name}, which has no byte "
                             "tokens and no unknown token")
        return self.unk_id


class WordPiece(GGUFVocabulary):
    MAX_CHARS_PER_WORD = 100  # longer words are one unknown token, as in BERT

    def __init__(self, path: Path, model: str, tokens: list[str], types: np.ndarray | None,
                 unk_id: int | None, special_ids: frozenset[int]):
        super().__init__(path, model, tokens, types, unk_id, special_ids)
        self._token_id = {token: id for id, token in reversed(list(enumerate(tokens)))
                          if self._type(id) in (NORMAL, USER_DEFINED)}
        self._longest = max((len(token) for token in self._token_id), default=1)

    def _piece_bytes(self, id: int, token: str) -> bytes | None:
        return token.replace(SPACE_MARK, " ").encode("utf-8")

    def token_string(self, id: int) -> str:
        """As BERT shows it: "dog" for a word-initial piece, "##s" for a continuation."""
        id = check_id(id, self.vocab_size)
        token = self._tokens[id]
        if id in self._special:
            return token
        return token[1:] if token.startswith(SPACE_MARK) else "##" + token

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for word in split_words(text):
            ids.extend(self._encode_word(SPACE_MARK + word))
        return ids

    def _encode_word(self, word: str) -> list[int]:
        if len(word) <= self.MAX_CHARS_PER_WORD:
            ids, start = [], 0
            while start < len(word):
                for end in range(min(len(word), start + self._longest), start, -1):
                    id = self._token_id.get(word[start:end])
                    if id is not None:
                        ids.append(id)
                        start = end
                        break
                else:
                    break
            else:
                return ids
        if self.unk_id is None:
            raise TokenError(f"{word[1:]!r} cannot be made from the vocabulary of {self.path.name}, "
                             "which has no unknown token")
        return [self.unk_id]


def split_words(text: str) -> list[str]:
    """llama.cpp's WordPiece preprocessing: NFD, lower case, control characters dropped, and a word break
    at every space, punctuation mark, ASCII symbol and CJK character (which are words of their own)."""
    words, current = [], ""
    for char in unicodedata.normalize("NFD", text):
        category = unicodedata.category(char)
        if char.isspace():
            words.append(current)
            current = ""
        elif char in "\0\ufffd" or category.startswith("C"):
            continue
        elif category.startswith("P") or (ord(char) < 0x7F and category.startswith("S")) or is_cjk(char):
            words += [current, char.lower()]
            current = ""
        else:
            current += char.lower()
    return [word for word in words + [current] if word]


def is_cjk(char: str) -> bool:
    point = ord(char)
    return any(lo <= point <= hi for lo, hi in ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF),
                                                (0x2A700, 0x2B73F), (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF),
                                                (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)))


def byte_token(token: str) -> int | None:
    """The byte a "<0xE2>" token stands for."""
    digits = token[3:5]
    if len(token) == 6 and token.startswith("<0x") and token.endswith(">") and all(c in HEX_DIGITS for c in digits):
        return int(digits, 16)
    return None


class GGUFByteLevelBPE(GPT2BPETokenizer):
    """GPT-2's byte-level BPE over the file's tokens and merges; control tokens keep their text. Every
    text is bytes, so nothing becomes the unknown token (unk_id stays None) whatever the file names."""

    def __init__(self, path: Path, model: str, tokens: list[str], merges: list[tuple[str, str]],
                 special_ids: frozenset[int], pre_tokenizer: str | None):
        vocab: dict[str, int] = {}
        for id, token in enumerate(tokens):
            vocab.setdefault(token, id)
        super().__init__(path, path, vocab, merges)
        self.kind = f"gguf ({model})"
        self.vocab_size = len(tokens)  # a repeated token leaves its later ids unused, not out of range
        self.special_ids = special_ids
        self._special = {id: tokens[id] for id in special_ids}
        if pre_tokenizer not in (None, "gpt2", "default"):
            self.notes = (f"the file's pre-tokenizer {pre_tokenizer!r} is not run: text is split with GPT-2's pattern, "
                          "which cuts single words alike but may cut digit runs and punctuation otherwise"),


def load_gguf_tokenizer(path: Path, metadata: dict[str, Any]) -> GGUFVocabulary | GGUFByteLevelBPE:
    """The tokenizer described by a GGUF header's metadata; its arrays are read from the file now."""
    import numpy as np

    from embscope.formats._binary import map_file
    from embscope.formats.gguf_file import ArrayRef, array_numbers, array_strings, require_gguf
    gguf = require_gguf(path)
    where = f"{path.name}: tokenizer"
    buf = map_file(path)

    def strings(key: str) -> list[str] | None:
        ref = metadata.get(PREFIX + key)
        if ref is None:
            return None
        if not (isinstance(ref, ArrayRef) and ref.item_type == gguf.GGUFValueType.STRING):
            raise CheckpointError(f"{where}: expected {PREFIX + key} to be an array of strings")
        out = []
        for index, raw in enumerate(array_strings(buf, ref, PREFIX + key, where)):
            try:
                out.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise CheckpointError(f"{where}: element {index} of {PREFIX + key} is not UTF-8 text") from None
        return out

    def numbers(key: str, count: int) -> np.ndarray | None:
        ref = metadata.get(PREFIX + key)
        if ref is None:
            return None
        if not isinstance(ref, ArrayRef) or ref.count != count:
            raise CheckpointError(f"{where}: expected {PREFIX + key} to hold {count} numbers, one per token")
        return array_numbers(buf, ref, PREFIX + key, where, gguf)

    model = metadata.get(PREFIX + "model", "llama")  # llama.cpp's default when the key is absent
    tokens = strings("tokens") or []
    if not tokens:
        raise CheckpointError(f"{where}: expected a list of tokens in {PREFIX}tokens, found none")
    check_largest_id(len(tokens) - 1, path)
    types = numbers("token_type", len(tokens))
    ids = {key: metadata.get(PREFIX + key) for key in SPECIAL_ID_KEYS}
    for key, value in ids.items():
        if value is not None and not (type(value) is int and 0 <= value < len(tokens)):
            raise CheckpointError(f"{where}: {PREFIX + key} is {value!r}, expected an id below {len(tokens)}")
    unk_id = ids["unknown_token_id"]
    if unk_id is None and types is not None:
        unknown = np.flatnonzero(types == UNKNOWN)
        unk_id = int(unknown[0]) if unknown.size else None
    special = {v for v in ids.values() if v is not None}
    if types is not None:
        special |= {int(i) for i in np.flatnonzero((types == CONTROL) | (types == UNKNOWN))}
    special_ids = frozenset(special)
    if not isinstance(model, str):
        raise CheckpointError(f"{where}: expected {PREFIX}model to be a name, found {model!r}")
    if model == "gpt2":
        merges = []
        for rank, merge in enumerate(strings("merges") or []):
            parts = merge.split(" ")
            if len(parts) != 2:
                raise CheckpointError(f"{where}: expected merge {rank} to be two tokens, found {merge!r}")
            merges.append((parts[0], parts[1]))
        if not merges:
            raise CheckpointError(f"{where}: a gpt2 (byte-level BPE) tokenizer needs {PREFIX}merges, found none")
        pre = metadata.get(PREFIX + "pre")
        return GGUFByteLevelBPE(path, model, tokens, merges, special_ids, pre if isinstance(pre, str) else None)
    if model == "llama":
        scores = numbers("scores", len(tokens))
        if scores is None:
            raise CheckpointError(f"{where}: a llama (SentencePiece) tokenizer needs {PREFIX}scores, found none")
        add_prefix = metadata.get(PREFIX + "add_space_prefix", True)
        return SentencePieceBPE(path, model, tokens, types, unk_id, special_ids, scores.astype(np.float64),
                                add_prefix is True)
    if model == "bert":
        return WordPiece(path, model, tokens, types, unk_id, special_ids)
    vocabulary = GGUFVocabulary(path, model, tokens, types, unk_id, special_ids)
    vocabulary.notes = f"the file's {model!r} tokenizer is not run by embscope: ids are named, words cannot be looked up",
    return vocabulary
