"""A GGUF ``gpt2`` vocabulary (byte-level BPE: GPT-2, Llama 3, Qwen, DeepSeek, StarCoder, Phi-2, ...) encoded as
llama.cpp encodes it (src/llama-vocab.cpp: llama_vocab::impl::tokenize for LLAMA_VOCAB_TYPE_BPE,
llm_tokenizer_bpe_session):

1. the user-defined tokens are cut out of the text (UserDefined in gguf_vocab.py); they are stored as the text
   they stand for, not in GPT-2's byte alphabet;
2. each stretch left is cut into words by the regexes tokenizer.ggml.pre names (gguf_pre.py), each word written
   in GPT-2's byte alphabet (a space is "Ġ");
3. where the pre-tokenizer sets ignore_merges (Llama 3, Tekken, ...), a word that is a token is taken whole;
4. otherwise the word starts as one symbol per character, and the adjacent pair of the lowest merge rank is
   joined first, the leftmost on a tie, until no merge applies.

The merges run in the tokenizers library (a BPE model of the same tokens and merges) where it is installed, else
in the loop below; both give the same ids. A pre-tokenizer name llama.cpp does not know makes llama.cpp refuse the
file, so embscope names it in a note and does not encode words (ids still work)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from embscope.core.errors import TokenError
from embscope.quiet import native_stderr
from embscope.tokenizers.base import is_library_failure, shown
from embscope.tokenizers.byte_alphabet import byte_level_bytes, bytes_to_unicode
from embscope.tokenizers.gguf_pre import MISSING, NAMES, NOT_RUN, SOURCE, LlamaSplit, lookup
from embscope.tokenizers.gguf_vocab import (
    BYTE,
    CONTROL,
    UNKNOWN,
    USER_DEFINED,
    GGUFVocabulary,
    UserDefined,
    byte_token,
    join_pairs,
)

# words seen before; a command that looks up many words repeats them
_CACHE_LIMIT = 65536


class ByteLevelBPEVocab(GGUFVocabulary):
    """llama.cpp's BPE tokenizer over the tokens and merges of one GGUF file."""

    def __init__(self, path: Path, tokens: list[str], types: Sequence[int] | None, special_ids: frozenset[int],
                 user_defined: UserDefined, merges: list[tuple[str, str]], split: LlamaSplit | None,
                 ignore_merges: bool, token_id: dict[str, int], reason: str | None, notes: tuple[str, ...]):
        super().__init__(path, "gpt2", tokens, types, None, special_ids, reason)
        self.notes = notes
        self._user_defined = user_defined
        self._split = split
        self._token_id = token_id
        alphabet = bytes_to_unicode()
        self._to_alphabet = {byte: alphabet[byte] for byte in range(256)}  # str.translate of latin-1 text
        self._words = None if split is None else (_library_words(token_id, merges, ignore_merges)
                                                  or _merge_loop_words(token_id, merges, ignore_merges))
        self._cache: dict[str, list[int]] = {}

    def _piece_bytes(self, id: int, token: str) -> bytes | None:
        """As llama.cpp shows a token (token_to_piece): user-defined and special tokens as written, a byte
        token as its byte, any other read through GPT-2's byte alphabet."""
        kind = self._type(id)
        if kind in (USER_DEFINED, CONTROL, UNKNOWN):
            return token.encode("utf-8")
        byte = byte_token(token) if kind == BYTE else None
        return bytes([byte]) if byte is not None else byte_level_bytes(token)

    def encode(self, text: str) -> list[int]:
        if self._split is None or self._words is None:
            return super().encode(text)
        ids: list[int] = []
        for fragment in self._user_defined.partition(text):
            if isinstance(fragment, int):
                ids.append(fragment)
                continue
            for word in self._split.words(fragment):
                ids.extend(self._word_ids(word))
        return ids

    def _word_ids(self, word: str) -> list[int]:
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        spelled = word.encode("utf-8", "surrogatepass").decode("latin-1").translate(self._to_alphabet)
        assert self._words is not None
        ids = self._words(spelled)
        if ids is None:
            raise TokenError(f"a byte of {shown(word)} has no token in the vocabulary of {self.path.name}")
        if len(self._cache) < _CACHE_LIMIT:
            self._cache[word] = ids
        return ids


def _library_words(token_id: dict[str, int], merges: list[tuple[str, str]],
                   ignore_merges: bool) -> Callable[[str], list[int] | None] | None:
    """The ids of one word spelled in the byte alphabet, by the tokenizers library's BPE model (None when
    one of its characters is no token); None without the library."""
    try:
        from tokenizers import models
    except ImportError:
        return None
    # the library keeps the last rank of a repeated merge, llama.cpp the first
    unique = merges if len(set(merges)) == len(merges) else list(dict.fromkeys(merges))
    with native_stderr():
        model = models.BPE(vocab=token_id, merges=unique, ignore_merges=ignore_merges)

    def words(word: str) -> list[int] | None:
        try:
            with native_stderr():  # a panic prints to fd 2 before it is raised
                tokens = model.tokenize(word)
        except BaseException as err:  # the library panics on some inputs instead of raising
            if not is_library_failure(err):
                raise
            raise TokenError(f"the tokenizers library failed to encode {shown(word)}: {err}") from None
        if sum(len(token.value) for token in tokens) != len(word):  # without an unknown token it drops characters
            return None
        return [token.id for token in tokens]

    return words


def _merge_loop_words(token_id: dict[str, int], merges: list[tuple[str, str]],
                      ignore_merges: bool) -> Callable[[str], list[int] | None]:
    """llm_tokenizer_bpe_session::tokenize for one word: the pair of lowest rank is joined first, the leftmost
    on a tie (join_pairs, the loop the spm session shares)."""
    ranks: dict[tuple[str, str], int] = {}
    for rank, pair in enumerate(merges):
        ranks.setdefault(pair, rank)

    def words(word: str) -> list[int] | None:
        whole = token_id.get(word) if ignore_merges else None
        if whole is not None:
            return [whole]
        symbols = join_pairs(list(word), lambda left, right: ranks.get((left, right)))
        ids = [token_id.get(symbol) for symbol in symbols]
        return None if None in ids else ids  # type: ignore[return-value]  # None is not in the list

    return words


def load_byte_level_bpe(path: Path, tokens: list[str], types: Sequence[int] | None, special_ids: frozenset[int],
                        user_defined: UserDefined, merges: list[tuple[str, str]], pre: object,
                        token_id: dict[str, int]) -> ByteLevelBPEVocab:
    """The vocabulary with the pre-tokenizer the file names: a name llama.cpp does not know, or one whose
    cutting embscope does not imitate, leaves a vocabulary that names ids but encodes no words."""
    name = pre if isinstance(pre, str) else None
    found = lookup(name)
    notes: tuple[str, ...] = ()
    reason = None
    if pre is not None and name is None:
        reason = f"{path.name} names its pre-tokenizer with {shown(pre)}, not a name"
    elif found is None:
        reason = (f"{path.name} names the pre-tokenizer {name!r}, which llama.cpp does not know (it refuses such a "
                  f"file; {SOURCE} knows {len(NAMES)} names)")
    elif found.kind in NOT_RUN:
        reason = f"{path.name} names the pre-tokenizer {name!r}, which embscope does not run: {NOT_RUN[found.kind]}"
    elif name is None:
        notes = ((f"the file names no pre-tokenizer (tokenizer.ggml.pre): text is cut as llama.cpp then cuts it "
                  f"({MISSING!r}), which may not be how the model was trained"),)
    if reason is not None:
        notes = (f"{reason}: ids are named, words cannot be looked up",)
    split = LlamaSplit(found) if found is not None and reason is None else None
    vocabulary = ByteLevelBPEVocab(path, tokens, types, special_ids, user_defined, merges, split,
                                   found.ignore_merges if found is not None else False, token_id, reason, notes)
    return vocabulary

