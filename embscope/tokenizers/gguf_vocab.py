"""The tokenizer a GGUF file carries in its metadata (tokenizer.ggml.*), run as llama.cpp runs it
(src/llama-vocab.cpp): the ids embscope gives for a text are those `llama_tokenize(..., add_special=false,
parse_special=false)` gives.

- ``llama``: llama.cpp's SentencePiece tokenizer (gguf_spm.py): Llama 1-2, Mistral, Gemma 1-3.
- ``gpt2``: byte-level BPE (gguf_bpe.py), text cut first as the file's tokenizer.ggml.pre names (gguf_pre.py):
  GPT-2, Llama 3, Qwen, DeepSeek, StarCoder, Phi-2 and the rest.
- ``bert``: WordPiece as llama.cpp stores it: word-initial pieces carry "▁", continuations carry nothing;
  text is lower-cased and split at spaces and punctuation, and each word matched longest-first.
- any other model (``t5``, ``rwkv``, ...): ids are named, but words cannot be encoded.

What every kind shares is here; gguf_metadata.py reads the arrays: the token list (an empty token is named "[EMPTY_<id>]" and a repeated one
refused, as llama.cpp does), the token types, and the user-defined tokens, which llama.cpp cuts out of the text
before anything else (tokenizer_st_partition). A malformed array, or merges and scores that do not fit the
tokens, is one TokenizerError naming the first bad entry. A word the vocabulary cannot hold becomes the unknown
token, and ``unk_id`` names it, so that callers can refuse it rather than compare "<unk>" with itself."""

from __future__ import annotations

import functools
import heapq
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path

from embscope.core.errors import Message, Option, TokenError
from embscope.tokenizers.base import SPACE_MARK, ByteVocabulary, check_id
from embscope.tokenizers.substrings import Substrings

# tokenizer.ggml.token_type values (llama.cpp's LLAMA_TOKEN_TYPE_*, gguf.TokenType); any other value is UNDEFINED
UNDEFINED, NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 0, 1, 2, 3, 4, 5, 6
SPECIAL_ID_KEYS = ("bos_token_id", "eos_token_id", "unknown_token_id", "separator_token_id",
                   "padding_token_id", "cls_token_id", "mask_token_id")
PREFIX = "tokenizer.ggml."
HEX_DIGITS = frozenset("0123456789abcdefABCDEF")  # int(x, 16) alone would take "-1" and "+f"
# llama.cpp makes these user-defined whatever the file says (gpt-oss), so they are cut out of text
ALWAYS_USER_DEFINED = frozenset({"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})


class GGUFVocabulary(ByteVocabulary):
    """What every GGUF tokenizer shares: ids named from the token list, the unknown and special ids."""

    kind = "gguf"
    unk_id: int | None
    special_ids: frozenset[int]

    def __init__(self, path: Path, model: str, tokens: list[str], types: Sequence[int] | None,
                 unk_id: int | None, special_ids: frozenset[int], reason: str | None = None):
        self.path = path
        self.model = model
        self.kind = f"gguf ({model})"
        self.vocab_size = len(tokens)
        self._tokens = tokens
        self._types = types
        self.unk_id = unk_id
        self.special_ids = special_ids
        self._special = {id: tokens[id] for id in special_ids}
        self._reason = reason or (f"the {model!r} tokenizer stored in {path.name} cannot be run by embscope "
                                  "(it runs gpt2, llama and bert)")

    def _type(self, id: int) -> int:
        return NORMAL if self._types is None else self._types[id]

    @functools.cached_property
    def _pieces(self) -> list[bytes | None]:  # type: ignore[override]  # built on first use: encoding needs none
        return [self._piece_bytes(id, token) for id, token in enumerate(self._tokens)]

    def _piece_bytes(self, id: int, token: str) -> bytes | None:
        return token.encode("utf-8")

    def encode(self, text: str) -> list[int]:
        raise TokenError(Message(f"{self._reason}: give token ids with ", Option("ids", True), ", or the model's "
                                 "tokenizer file with ", Option("tokenizer")), option="tokenizer")


class UserDefined:
    """The user-defined tokens, cut out of a text before it is tokenized, longest first, each across every
    stretch of text the longer ones left (llama.cpp's tokenizer_st_partition with parse_special=false:
    control tokens are left in the text as characters)."""

    def __init__(self, tokens: list[str], ids: list[int]):
        order = sorted(ids, key=lambda id: (-len(tokens[id].encode("utf-8")), id))
        self._tokens = [(id, tokens[id]) for id in order if tokens[id]]
        # one automaton of them all: a text is only cut by the tokens it holds, found in one pass over it
        # (checking each token against each text was quadratic: 24,000 tokens, each encoded once, took 21 s)
        self._automaton = Substrings([token for _, token in self._tokens]) if self._tokens else None

    def __bool__(self) -> bool:
        return bool(self._tokens)

    def partition(self, text: str) -> list[str | int]:
        """The text as stretches of text and ids of the user-defined tokens found in it, in order."""
        fragments: list[str | int] = [text] if text else []
        if self._automaton is None or not text:
            return fragments
        # the text only shrinks, so a token absent from it is absent from every stretch; in their order
        for place in sorted(self._automaton.found(text)):
            id, token = self._tokens[place]
            cut: list[str | int] = []
            for fragment in fragments:
                if isinstance(fragment, int):
                    cut.append(fragment)
                    continue
                start = 0
                while (found := fragment.find(token, start)) >= 0:
                    if found > start:
                        cut.append(fragment[start:found])
                    cut.append(id)
                    start = found + len(token)
                if start < len(fragment):
                    cut.append(fragment[start:])
            fragments = cut
            if all(isinstance(fragment, int) for fragment in fragments):
                break  # no text left to cut
        return fragments


class WordPiece(GGUFVocabulary):
    MAX_CHARS_PER_WORD = 100  # longer words are one unknown token, as in BERT

    def __init__(self, path: Path, model: str, tokens: list[str], types: Sequence[int] | None,
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


# -- reading tokenizer.ggml.* -------------------------------------------------------------------------

def join_pairs(symbols: list[str], priority: Callable[[str, str], float | None]) -> list[str]:
    """The merge loop llama.cpp's spm and bpe sessions share: the symbols as a linked list, the queued pair of
    lowest ``priority`` (None: never joined) joined first, the leftmost on a tie, and a queued pair dropped when
    either side has changed since (one is empty, or their sizes changed)."""
    after = [*range(1, len(symbols)), -1]
    before = list(range(-1, len(symbols) - 1))
    queue: list[tuple[float, int, int, int]] = []

    def push(left: int, right: int) -> None:
        if left >= 0 and right >= 0:
            key = priority(symbols[left], symbols[right])
            if key is not None:
                heapq.heappush(queue, (key, left, right, len(symbols[left]) + len(symbols[right])))

    for i in range(len(symbols) - 1):
        push(i, i + 1)
    while queue:
        _, left, right, size = heapq.heappop(queue)
        if not symbols[left] or not symbols[right] or len(symbols[left]) + len(symbols[right]) != size:
            continue
        symbols[left] += symbols[right]
        symbols[right] = ""
        after[left] = after[right]
        if after[right] >= 0:
            before[after[right]] = left
        push(before[left], left)
        push(left, after[left])
    return [symbol for symbol in symbols if symbol]
