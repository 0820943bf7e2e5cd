"""A GGUF ``llama`` vocabulary (Llama 1-2, Mistral, Gemma 1-3) encoded as llama.cpp's SentencePiece tokenizer
encodes it (src/llama-vocab.cpp: llama_vocab::impl::tokenize for LLAMA_VOCAB_TYPE_SPM, llm_tokenizer_spm_session):

1. the user-defined tokens are cut out of the text (UserDefined in gguf_vocab.py);
2. each stretch of text left gets a space in front when tokenizer.ggml.add_space_prefix is true (the default)
   and it is the first stretch or follows a user-defined token; spaces become "▁";
3. the stretch starts as one symbol per character; the adjacent pair whose join is a token (any token: llama.cpp
   looks the text up in the whole vocabulary) of the highest score is joined first, the leftmost on a tie,
   until no pair joins;
4. a symbol that is no token becomes the tokens of its UTF-8 bytes ("<0xE2>"); where the vocabulary has no
   such byte tokens, a run of them becomes one unknown token, as sentencepiece gives (llama.cpp would stop
   with an error).

No normalization: llama.cpp applies none for these vocabularies (and real ones are trained with none). A
SentencePiece model trained as Unigram and stored as ``llama`` is still merged this way, which is what llama.cpp
runs; sentencepiece itself would run Viterbi over the scores and may cut words otherwise.

The merging runs in the sentencepiece library where it is installed, on a ModelProto built from the file's
tokens and scores in which every token may be joined (as in llama.cpp) except the byte tokens, which stay
byte-fallback pieces; sentencepiece's BPE encoder is the code llama.cpp's was ported from. Without the library
(or where it cannot hold the vocabulary: some but not all 256 byte tokens), embscope's own merge loop below
gives the same ids."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from embscope.core.errors import TokenError
from embscope.quiet import native_stderr
from embscope.tokenizers.base import SPACE_MARK, shown
from embscope.tokenizers.gguf_vocab import BYTE, USER_DEFINED, GGUFVocabulary, UserDefined, byte_token, join_pairs

if TYPE_CHECKING:
    from collections.abc import Sequence


# ModelProto.SentencePiece.Type (sentencepiece_model.proto)
PIECE_NORMAL, PIECE_UNKNOWN, PIECE_BYTE = 1, 2, 6
MODEL_TYPE_BPE = 2


class SentencePieceVocab(GGUFVocabulary):
    """llama.cpp's SentencePiece tokenizer over the tokens and scores of one GGUF file."""

    def __init__(self, path: Path, tokens: list[str], raw: list[bytes], token_id: dict[str, int],
                 types: Sequence[int] | None,
                 unk_id: int | None, special_ids: frozenset[int], user_defined: UserDefined,
                 scores: np.ndarray | None, add_space_prefix: bool):
        super().__init__(path, "llama", tokens, types, unk_id, special_ids)
        self._scores = np.zeros(len(tokens), np.float32) if scores is None else scores  # llama.cpp: 0 when absent
        self._add_space_prefix = add_space_prefix
        self._user_defined = user_defined
        self._token_id = token_id
        get = self._token_id.get
        # llama.cpp's byte_to_token: the token "<0xE2>" by its text, else a one-byte token of the byte itself
        self._byte_ids: list[int | None] = [get(f"<0x{byte:02X}>", get(chr(byte)) if byte < 0x80 else None)
                                            for byte in range(256)]
        self._library = _library_encoder(tokens, raw, self._scores, self._byte_ids, self._token_id)
        self._score_list: list[float] | None = None

    def _piece_bytes(self, id: int, token: str) -> bytes | None:
        """As llama.cpp shows a token (token_to_piece): a byte token as its byte, a user-defined one as it is
        written, any other with "▁" read as a space."""
        kind = self._type(id)
        byte = byte_token(token) if kind == BYTE else None
        if byte is not None:
            return bytes([byte])
        return token.encode("utf-8") if kind == USER_DEFINED else token.replace(SPACE_MARK, " ").encode("utf-8")

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        after_special = True  # the first stretch is prefixed as if it followed a special token
        for fragment in self._user_defined.partition(text):
            if isinstance(fragment, int):
                ids.append(fragment)
                after_special = True
                continue
            if self._add_space_prefix and after_special:
                fragment = " " + fragment
            ids.extend(self._encode_stretch(fragment.replace(" ", SPACE_MARK), text))
            after_special = False
        return ids

    def _encode_stretch(self, stretch: str, text: str) -> list[int]:
        if self._library is not None:
            library_ids, unknown = self._library
            ids = library_ids(stretch)
            if unknown in ids:
                return [self._unknown(text) if id == unknown else id for id in ids]
            return ids
        out: list[int] = []
        unknown_run = False
        for symbol in self._merge(stretch):
            id = self._token_id.get(symbol)
            if id is not None:
                out.append(id)
                unknown_run = False
                continue
            bytes_ids = [self._byte_ids[byte] for byte in symbol.encode("utf-8", "surrogatepass")]
            if None not in bytes_ids:
                out.extend(bytes_ids)  # type: ignore[arg-type]  # None is not in the list
                unknown_run = False
            elif not unknown_run:  # sentencepiece gives a run of unknown characters one unknown token
                out.append(self._unknown(text))
                unknown_run = True
        return out

    def _merge(self, stretch: str) -> list[str]:
        """llm_tokenizer_spm_session::tokenize (join_pairs): symbols joined pair by pair, highest score first and the
        leftmost on a tie; a pair is dropped from the queue when either symbol has been joined into another
        since it was queued (one is empty, or their sizes changed)."""
        if self._score_list is None:
            self._score_list = self._scores.tolist()
        scores, token_id = self._score_list, self._token_id

        def priority(left: str, right: str) -> float | None:
            id = token_id.get(left + right)
            return None if id is None else -scores[id]

        return join_pairs(list(stretch), priority)

    def _unknown(self, text: str) -> int:
        if self.unk_id is None:
            raise TokenError(f"{shown(text)} holds a character that is not in the vocabulary of {self.path.name}, "
                             "which has no byte token for it and no unknown token")
        return self.unk_id


def _library_encoder(tokens: list[str], raw: list[bytes], scores: np.ndarray, byte_ids: list[int | None],
                     token_id: dict[str, int]) -> tuple[Callable[[str], list[int]], int] | None:
    """sentencepiece's BPE encoder over this vocabulary, and the id it gives an unknown character; None
    without the library, or where sentencepiece cannot hold the vocabulary."""
    try:
        import sentencepiece
    except ImportError:
        return None
    byte_pieces = {id for id in byte_ids if id is not None and byte_token(tokens[id]) is not None}
    if byte_pieces and len(byte_pieces) != 256:
        return None  # sentencepiece needs all 256 byte pieces or none
    unknown_piece = "<embscope:unknown>"
    while unknown_piece in token_id:
        unknown_piece += "#"
    proto = model_proto(raw + [unknown_piece.encode()], scores, byte_pieces, len(tokens), bool(byte_pieces))
    processor = sentencepiece.SentencePieceProcessor()
    try:
        with native_stderr():  # absl's log lines go to fd 2
            processor.LoadFromSerializedProto(proto)
    except (RuntimeError, OSError, ValueError):
        return None

    def encode(stretch: str) -> list[int]:
        with native_stderr():
            ids: list[int] = processor.encode(stretch, out_type=int)
        return ids

    return encode, len(tokens)


def _varint_size(values: np.ndarray) -> np.ndarray:
    return 1 + (values >= 1 << 7) + (values >= 1 << 14) + (values >= 1 << 21) + (values >= 1 << 28)


def _put_varints(out: np.ndarray, at: np.ndarray, values: np.ndarray) -> None:
    sizes = _varint_size(values)
    for k in range(int(sizes.max())):
        has = sizes > k
        byte = (values[has] >> (7 * k)) & 0x7F
        out[at[has] + k] = byte | ((sizes[has] > k + 1) * 0x80)


def model_proto(pieces: list[bytes], scores: np.ndarray, byte_pieces: set[int], unknown: int,
                byte_fallback: bool) -> bytes:
    """A serialized sentencepiece ModelProto (BPE, no normalization, spaces as "▁", no dummy prefix) of
    ``pieces`` with ``scores``: NORMAL pieces, but BYTE for ``byte_pieces`` and UNKNOWN for ``unknown``.
    Built with numpy, a few milliseconds for Gemma's 262k pieces (the protobuf field by field in Python
    took a third of a second)."""
    count = len(pieces)
    lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=count)
    kinds = np.full(count, PIECE_NORMAL, dtype=np.int64)
    kinds[sorted(byte_pieces)] = PIECE_BYTE
    kinds[unknown] = PIECE_UNKNOWN
    typed = kinds != PIECE_NORMAL
    # piece: 0x0A len(message) message; message: 0x0A len(text) text 0x15 float32 score [0x18 type]
    message = 1 + _varint_size(lengths) + lengths + 5 + 2 * typed
    size = 1 + _varint_size(message) + message
    starts = np.concatenate([[0], np.cumsum(size)[:-1]])
    out = np.zeros(int(size.sum()), dtype=np.uint8)
    out[starts] = 0x0A
    _put_varints(out, starts + 1, message)
    text_tag = starts + 1 + _varint_size(message)
    out[text_tag] = 0x0A
    _put_varints(out, text_tag + 1, lengths)
    text = text_tag + 1 + _varint_size(lengths)
    joined = np.frombuffer(b"".join(pieces), dtype=np.uint8)
    sources = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    out[np.repeat(text - sources, lengths) + np.arange(joined.size)] = joined
    score_tag = text + lengths
    out[score_tag] = 0x15
    all_scores = np.concatenate([scores.astype("<f4"), np.zeros(count - scores.size, "<f4")])
    out[score_tag[:, None] + 1 + np.arange(4)] = all_scores.view(np.uint8).reshape(count, 4)
    type_tag = score_tag[typed] + 5
    out[type_tag] = 0x18
    out[type_tag + 1] = kinds[typed]
    trainer = _field(3, 0, MODEL_TYPE_BPE) + (_field(35, 0, 1) if byte_fallback else b"")
    normalizer = (_field(1, 2, b"identity") + _field(3, 0, 0)  # no dummy prefix: the caller adds the space
                  + _field(4, 0, 0) + _field(5, 0, 1))  # extra spaces kept, spaces escaped as "▁"
    return out.tobytes() + _field(2, 2, trainer) + _field(3, 2, normalizer)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, wire: int, value: int | bytes) -> bytes:
    """One protobuf field: a varint (wire type 0) or length-delimited bytes (wire type 2)."""
    if isinstance(value, bytes):
        return _varint(number << 3 | wire) + _varint(len(value)) + value
    return _varint(number << 3 | wire) + _varint(value)

