"""The tokenizer a GGUF file carries, built from the metadata arrays the GGUF reader hands over: the token list,
types, scores, merges and special ids, read and checked, then the kind the file names (gguf_vocab.py for what
every kind shares; gguf_bpe.py, gguf_spm.py and WordPiece for the kinds). Above the kinds, so the kinds import
the shared vocabulary and never this loader."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from embscope.core.errors import TokenizerError
from embscope.tokenizers.base import check_largest_id, shown
from embscope.tokenizers.gguf_bpe import load_byte_level_bpe
from embscope.tokenizers.gguf_spm import SentencePieceVocab
from embscope.tokenizers.gguf_vocab import (
    ALWAYS_USER_DEFINED,
    BYTE,
    CONTROL,
    PREFIX,
    SPECIAL_ID_KEYS,
    UNDEFINED,
    UNKNOWN,
    USER_DEFINED,
    GGUFVocabulary,
    UserDefined,
    WordPiece,
)


class MetadataArrays(Protocol):
    """The tokenizer's arrays in one GGUF file, read and checked on request, as the GGUF reader
    (formats/gguf_file.TokenizerArrays) hands them over: the tokenizer reads no GGUF itself."""

    path: Path
    metadata: dict[str, Any]
    where: str

    def raw_strings(self, key: str) -> list[bytes] | None: ...

    def strings(self, key: str, raw: list[bytes] | None = None) -> list[str] | None: ...

    def numbers(self, key: str, what: str, item_types: tuple[str, ...], count: int) -> np.ndarray | None: ...


def read_tokens(arrays: MetadataArrays) -> tuple[list[str], list[bytes], dict[str, int]]:
    """The token list as llama.cpp holds it, the UTF-8 of each, and each token's id: an empty token is
    "[EMPTY_<id>]", and a token that appears twice is refused."""
    raw = arrays.raw_strings("tokens")
    if not raw:
        raise TokenizerError(f"{arrays.where}: expected a list of tokens in {PREFIX}tokens, found none")
    check_largest_id(len(raw) - 1, arrays.path)
    if not all(raw):
        raw = [item or f"[EMPTY_{id}]".encode() for id, item in enumerate(raw)]
    tokens = arrays.strings("tokens", raw)
    assert tokens is not None
    token_id = dict(zip(tokens, range(len(tokens))))
    if len(token_id) != len(tokens):
        first: dict[str, int] = {}
        for id, token in enumerate(tokens):
            if token in first:
                raise TokenizerError(f"{arrays.where}: expected each token once in {PREFIX}tokens, found "
                                     f"{shown(token)} as ids {first[token]} and {id}")
            first[token] = id
    return tokens, raw, token_id


def read_types(arrays: MetadataArrays, token_id: dict[str, int]) -> np.ndarray | None:
    """tokenizer.ggml.token_type, one INT32 per token (values llama.cpp does not know are UNDEFINED)."""
    types = arrays.numbers("token_type", "token type", ("INT32",), len(token_id))
    if types is None:
        return None
    types[(types < UNDEFINED) | (types > BYTE)] = UNDEFINED
    for token in ALWAYS_USER_DEFINED.intersection(token_id):
        types[token_id[token]] = USER_DEFINED
    return types


def read_scores(arrays: MetadataArrays, tokens: list[str]) -> np.ndarray | None:
    """tokenizer.ggml.scores as float32 (INT32 scores are cast, as llama.cpp casts them); NaN is refused,
    since no order of merges follows from it."""
    scores = arrays.numbers("scores", "score", ("FLOAT32", "INT32"), len(tokens))
    if scores is None:
        return None
    scores = scores.astype(np.float32)
    bad = np.flatnonzero(np.isnan(scores))
    if bad.size:
        raise TokenizerError(f"{arrays.where}: expected a number as the score of every token in {PREFIX}scores, "
                             f"found NaN for token {int(bad[0])} ({shown(tokens[bad[0]])})")
    return scores


def read_merges(arrays: MetadataArrays, token_id: dict[str, int]) -> list[tuple[str, str]]:
    """tokenizer.ggml.merges, each "left right" cut at its first space past the first character (as llama.cpp
    cuts it); every merge must join two tokens into a third."""
    raw = arrays.raw_strings("merges")
    if not raw:
        raise TokenizerError(f"{arrays.where}: a gpt2 (byte-level BPE) tokenizer needs {PREFIX}merges, found none")
    # byte-level tokens hold no space or newline ("Ġ" and "Ċ" stand for them), so each merge is its only space:
    # all are cut and checked at once (Llama 3's 280k merges in a few hundredths of a second); any doubt, and
    # they are read one by one below, which names the first bad one
    joined = b"\n".join(raw)
    if joined.count(b" ") == len(raw) and joined.count(b"\n") == len(raw) - 1 and not joined.startswith(b" "):
        try:
            parts = joined.decode("utf-8").replace(" ", "\n").split("\n")
        except UnicodeDecodeError:
            parts = []
        lefts, rights = parts[0::2], parts[1::2]
        known = token_id.keys()
        if parts and "" not in parts and known >= set(parts) and known >= set(map(str.__add__, lefts, rights)):
            return list(zip(lefts, rights))
    merges = arrays.strings("merges", raw)
    assert merges is not None
    pairs = []
    for rank, merge in enumerate(merges):
        cut = merge.find(" ", 1)
        left, right = (merge[:cut], merge[cut + 1:]) if cut >= 0 else ("", "")
        if not (left in token_id and right in token_id and left + right in token_id):
            missing = next(part for part in (left, right, left + right) if part not in token_id)
            raise TokenizerError(
                f"{arrays.where}: expected merge {rank} of {PREFIX}merges ({shown(merge)}) to join two tokens into a "
                f"third, found {shown(missing)}, which is not a token" if cut >= 0 else
                f"{arrays.where}: expected merge {rank} of {PREFIX}merges to be two tokens and a space, found "
                f"{shown(merge)}")
        pairs.append((left, right))
    return pairs


def special_ids_of(arrays: MetadataArrays, count: int, types: np.ndarray | None) -> tuple[int | None, frozenset[int]]:
    """The unknown token's id and every special id: those the metadata names, control and unknown tokens."""
    ids = {key: arrays.metadata.get(PREFIX + key) for key in SPECIAL_ID_KEYS}
    for key, value in ids.items():
        if value is not None and not (type(value) is int and 0 <= value < count):
            raise TokenizerError(f"{arrays.where}: {PREFIX + key} is {shown(value)}, expected an id below {count}")
    unk_id = ids["unknown_token_id"]
    special = {v for v in ids.values() if v is not None}
    if types is not None:
        unknown = np.flatnonzero(types == UNKNOWN)
        if unk_id is None and unknown.size:
            unk_id = int(unknown[0])
        special.update(np.flatnonzero((types == CONTROL) | (types == UNKNOWN)).tolist())
    return unk_id, frozenset(special)


def load_gguf_tokenizer(path: Path, read_arrays: Callable[[], MetadataArrays]) -> GGUFVocabulary:
    """The tokenizer described by a GGUF header's metadata; its arrays are read from the file now (read_arrays:
    what the GGUF reader hands over)."""
    arrays = read_arrays()
    metadata = arrays.metadata
    model = metadata.get(PREFIX + "model")
    tokens, raw, token_id = read_tokens(arrays)
    type_array = read_types(arrays, token_id)
    unk_id, special_ids = special_ids_of(arrays, len(tokens), type_array)
    user_defined = UserDefined(tokens, [] if type_array is None else np.flatnonzero(type_array == USER_DEFINED).tolist())
    types = None if type_array is None else type_array.tolist()
    if model is None:
        vocabulary = GGUFVocabulary(path, "unnamed", tokens, types, unk_id, special_ids,
                                    f"{path.name} names no tokenizer ({PREFIX}model)")
        vocabulary.notes = (f"the file names no tokenizer ({PREFIX}model): ids are named, words cannot be looked up",)
        return vocabulary
    if not isinstance(model, str):
        raise TokenizerError(f"{arrays.where}: expected {PREFIX}model to be a name, found {shown(model)}")
    if model == "gpt2":
        return load_byte_level_bpe(path, tokens, types, special_ids, user_defined, read_merges(arrays, token_id),
                                   metadata.get(PREFIX + "pre"), token_id)
    if model == "llama":
        scores = read_scores(arrays, tokens)
        add_prefix = metadata.get(PREFIX + "add_space_prefix", True)  # llama.cpp's default for llama vocabularies
        if not isinstance(add_prefix, bool):
            raise TokenizerError(f"{arrays.where}: expected {PREFIX}add_space_prefix to be true or false, found "
                                 f"{shown(add_prefix)}")
        return SentencePieceVocab(path, tokens, raw, token_id, types, unk_id, special_ids, user_defined, scores,
                                  add_prefix)
    if model == "bert":
        return WordPiece(path, model, tokens, types, unk_id, special_ids)
    vocabulary = GGUFVocabulary(path, model, tokens, types, unk_id, special_ids)
    vocabulary.notes = f"the file's {model!r} tokenizer is not run by embscope: ids are named, words cannot be looked up",
    return vocabulary
