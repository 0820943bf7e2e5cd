"""Hugging Face ``tokenizer.json`` (BPE, WordPiece, Unigram, WordLevel) through the
``tokenizers`` library, which is imported only when such a file is opened.

Words are encoded with no special tokens added, with the file's padding and
truncation turned off, and without BPE dropout (a training-time regularizer that
drops merges at random). ``token_string`` undoes the model's markers on the
vocabulary entry rather than decoding the lone id, because decoding one id drops a
SentencePiece leading space and turns a partial UTF-8 byte into "\\ufffd":
- ByteLevel (GPT-2 alphabet): "Ġdog" -> " dog", "Ã" -> "\\xc3";
- Metaspace / Replace decoders (SentencePiece): "▁dog" -> " dog";
- ByteFallback: "<0xE2>" -> "\\xe2";
- WordPiece keeps its "##" continuation prefix ("##s"), which says "glued to the
  piece before"; added and special tokens are shown as written ("[CLS]").
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from embscope.core import files
from embscope.core.errors import EmbscopeError, MissingPackageError, TokenError, TokenizerError
from embscope.quiet import native_stderr
from embscope.tokenizers.base import (
    MAX_TOKENIZER_BYTES,
    SPACE_MARK,
    check_id,
    is_id,
    is_library_failure,
    library_ids,
)
from embscope.tokenizers.byte_alphabet import byte_level_bytes, bytes_to_unicode

_BYTE_FALLBACK_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
# "merges" however JSON spells it (a letter may be a \u escape): a document without it holds no BPE merge
# (the library builds a BPE from a model with merges even when its "type" is left out)
_NAMES_MERGES = re.compile('"' + "".join(f"(?:{c}|\\\\u(?i:{ord(c):04x}))" for c in "merges") + '"')
# how the library serializes a Unigram model around its vocabulary
_UNIGRAM_HEAD = re.compile(rb'\{"type":"Unigram","unk_id":(null|\d+),"vocab":\[')
_UNIGRAM_TAIL = re.compile(rb'\],"byte_fallback":(true|false)\}\Z')
_LARGEST_LIBRARY_ID = 2**32 - 1  # the library's ids are u32


def check_bpe_merges(config: Any, path: Path) -> None:
    """A BPE merge whose result is missing from the vocabulary makes the library panic (a Rust
    slice index out of range) instead of raising, with a backtrace on stderr: caught here first."""
    model = config.get("model") if isinstance(config, dict) else None
    if not (isinstance(model, dict) and model.get("type", "BPE") == "BPE" and isinstance(model.get("vocab"), dict)
            and isinstance(model.get("merges"), list)):
        return  # not a BPE model: the library's own checks apply
    vocab, prefix = model["vocab"], model.get("continuing_subword_prefix") or ""
    if _every_merge_made(vocab, model["merges"], prefix):
        return
    for rank, merge in enumerate(model["merges"]):
        pair = merge.split(" ", 1) if isinstance(merge, str) else merge
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(part, str) for part in pair)):
            continue  # malformed: the library says so
        first, second = pair
        if first not in vocab or second not in vocab:
            continue  # the library reports a merge of unknown tokens as an error of its own
        merged = first + second.removeprefix(prefix)
        if merged not in vocab:
            raise TokenizerError(f"expected merge {rank} of {path.name} ({first!r} + {second!r}) to make a token "
                                 f"of the vocabulary, found {merged!r} missing")


def _every_merge_made(vocab: dict[str, Any], merges: list[Any], prefix: str) -> bool:
    """Whether every merge is a pair of strings whose result is in the vocabulary, asked all at once (the
    vocabulary of a real file is checked in milliseconds); anything else is looked at merge by merge."""
    try:
        pairs = [merge.split(" ", 1) if type(merge) is str else merge for merge in merges]
        return all(map(vocab.__contains__, [first + second.removeprefix(prefix) for first, second in pairs]))
    except (TypeError, ValueError, AttributeError):  # a malformed merge: unpacked, joined or hashed
        return False


class HuggingFaceTokenizer:
    """A tokenizer of the tokenizers library; its settings are read from the library's own objects, so
    the document it was built from is not parsed again. ``kind`` names the files it came from:
    "huggingface" for tokenizer.json, "wordpiece" for vocab.txt."""

    def __init__(self, path: Path, library_tokenizer: Any, kind: str = "huggingface", notes: tuple[str, ...] = (),
                 unchecked_ids: frozenset[int] = frozenset()):
        self.path = path
        self.kind = kind
        # ids of a vocabulary made by another splitter, which the round trip through this one cannot judge
        self.unchecked_ids = unchecked_ids
        self._tok = library_tokenizer
        self._tok.no_padding()
        self._tok.no_truncation()
        dropout = getattr(self._tok.model, "dropout", None) if type(self._tok.model).__name__ == "BPE" else None
        if dropout:  # merges dropped at random on every encode: a word would get other ids from call to call
            self._tok.model.dropout = None
            said = (f"the file's BPE dropout ({dropout:g}), a training-time regularizer, is set aside: words get the "
                    "ids of every merge, as without it")
            notes = (*notes, said)
        self.notes = notes
        added = self._tok.get_added_tokens_decoder()
        self._added: dict[int, str] = {id: token.content for id, token in added.items()}
        self.model_type = type(self._tok.model).__name__  # BPE, WordPiece, WordLevel or Unigram
        self.unk_id, model_byte_fallback = _model_settings(self._tok)
        self.special_ids = frozenset(id for id, token in added.items() if token.special) | (
            {self.unk_id} if self.unk_id is not None else set()
        )
        steps = [*_walk(_settings(self._tok.decoder)), *_walk(_settings(self._tok.pre_tokenizer))]
        self._byte_level = any(step.get("type") == "ByteLevel" for step in steps)
        # a ByteLevel pre-tokenizer over a vocabulary of all 256 byte symbols leaves no character out
        self._complete = any(step.get("type") == "ByteLevel" for step in _walk(_settings(self._tok.pre_tokenizer))) \
            and None not in map(self._tok.token_to_id, bytes_to_unicode().values())
        self._byte_fallback = model_byte_fallback or any(step.get("type") == "ByteFallback" for step in steps)
        self._replacements = _space_markers(steps)

    @functools.cached_property
    def vocab_size(self) -> int:
        """The largest id + 1 (a vocabulary may leave holes), worked out on first use: encoding a word and
        naming the ids it gave need it not."""
        return max(_largest_model_id(self._tok), max(self._added, default=-1)) + 1

    def encode(self, text: str) -> list[int]:
        try:
            with native_stderr():  # its panic hook prints to fd 2 before the PanicException is raised
                encoding = self._tok.encode(text, add_special_tokens=False)
        except BaseException as err:  # noqa: BLE001  the library panics (PanicException) on some inputs
            raise self._failed(err, "encode") from None
        return library_ids(encoding, text, self._tok, f"the {self.kind} tokenizer {self.path.name}", self._byte_level,
                           self.unk_id, self._complete)

    def decode(self, ids: list[int]) -> str:
        ids = [self._checked(id) for id in ids]
        try:
            with native_stderr():
                text: str = self._tok.decode(ids, skip_special_tokens=False)
            return text
        except BaseException as err:  # noqa: BLE001  as in encode
            raise self._failed(err, "decode") from None

    def _failed(self, err: BaseException, what: str) -> BaseException:
        if not is_library_failure(err):
            return err
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        return TokenError(f"the tokenizers library failed to {what} with {self.path.name}: {reason}")

    def piece_id(self, text: str) -> int | None:
        """The id of the vocabulary's piece spelled `text` exactly, whatever encoding it would give; None: none."""
        found: int | None = self._tok.token_to_id(text)
        return found

    def token_string(self, id: int) -> str:
        id = self._checked(id)
        if id in self._added:
            return self._added[id]
        piece: str = self._tok.id_to_token(id)
        if self._byte_level:
            return byte_level_bytes(piece).decode("utf-8", errors="backslashreplace")
        if self._byte_fallback:
            match = _BYTE_FALLBACK_PIECE.fullmatch(piece)
            if match:
                return bytes([int(match.group(1), 16)]).decode("utf-8", errors="backslashreplace")
        for marker, text in self._replacements:
            piece = piece.replace(marker, text)
        return piece

    def _checked(self, id: int) -> int:
        if type(id) is int and 0 <= id <= _LARGEST_LIBRARY_ID and self._tok.id_to_token(id) is not None:
            return id  # a token's id is below vocab_size, which is not worked out for it
        id = check_id(id, self.vocab_size)
        if self._tok.id_to_token(id) is None:
            raise TokenError(f"token id {id} is not used by the {self.kind} tokenizer {self.path.name}")
        return id

    def __repr__(self) -> str:
        return f"<HuggingFaceTokenizer {self.kind} {self.model_type} {self.path} vocab_size={self.vocab_size}>"


def _model_settings(library_tokenizer: Any) -> tuple[int | None, bool]:
    """(the unknown token's id, whether the model falls back to bytes). BPE, WordPiece and WordLevel name
    their unknown token, and only BPE can fall back to bytes; Unigram keeps both in its serialization only."""
    model = library_tokenizer.model
    if type(model).__name__ == "Unigram":
        return _unigram_settings(model.__getstate__())
    token = model.unk_token
    return (library_tokenizer.token_to_id(token) if token is not None else None,
            bool(getattr(model, "byte_fallback", False)))


def _unigram_settings(state: bytes) -> tuple[int | None, bool]:
    """unk_id and byte_fallback from the library's serialization of a Unigram model, read around its
    vocabulary (which can hold 250,000 pieces); a layout other than the library's own is parsed whole."""
    head = _UNIGRAM_HEAD.match(state)
    tail = _UNIGRAM_TAIL.search(state, max(0, len(state) - 64))
    if head and tail:
        return (None if head.group(1) == b"null" else int(head.group(1))), tail.group(1) == b"true"
    settings = json.loads(state)
    unk = settings.get("unk_id")
    return (unk if is_id(unk) else None), bool(settings.get("byte_fallback"))


def _largest_model_id(library_tokenizer: Any) -> int:
    """A Unigram model's ids are the places in its list. The other models map tokens to ids: when each id
    below their number of tokens names one, those are all the ids (far cheaper to ask than the library's
    vocabulary dict, built only when the ids leave holes)."""
    count: int = library_tokenizer.get_vocab_size(with_added_tokens=False)
    model = library_tokenizer.model
    if type(model).__name__ == "Unigram" or None not in map(model.id_to_token, range(count)):
        return count - 1
    return max(library_tokenizer.get_vocab(with_added_tokens=False).values(), default=-1)


def _settings(component: Any) -> Any:
    """A decoder's or pre-tokenizer's settings as the library serializes them, or None when there is none."""
    return None if component is None else json.loads(component.__getstate__())


def _walk(step: Any) -> Iterator[dict[str, Any]]:
    """A decoder or pre-tokenizer config and, for a Sequence, every step inside it (only a Sequence's
    list is read by the library, so only it is followed: another step's extra keys mean nothing)."""
    if not isinstance(step, dict):
        return
    yield step
    if step.get("type") == "Sequence":
        for inner in step.get("decoders") or step.get("pretokenizers") or []:
            yield from _walk(inner)


def _space_markers(steps: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(marker, text) pairs to undo in a piece; values the library would not accept are left out."""
    markers: list[tuple[str, str]] = []
    for step in steps:
        if step.get("type") == "Metaspace":
            replacement = step.get("replacement") or SPACE_MARK
            if isinstance(replacement, str):
                markers.append((replacement, " "))
        elif step.get("type") == "Replace" and isinstance(step.get("pattern"), dict):
            old = step["pattern"].get("String")
            if isinstance(old, str) and old and isinstance(step.get("content"), str):
                markers.append((old, step["content"]))
    return markers


def load(path: Path) -> HuggingFaceTokenizer:
    try:
        # not read_text: its newline translation costs a second pass; the library is handed the text (from_str)
        text = files.read_bytes(path, MAX_TOKENIZER_BYTES, "a tokenizer.json").decode("utf-8")
    except UnicodeDecodeError as err:
        raise TokenizerError(f"cannot read {path}: {err}") from None
    return from_document(path, text)


def from_document(path: Path, text: str) -> HuggingFaceTokenizer:
    """A tokenizer from the text of the tokenizer.json document read from ``path``."""
    return built(path, lambda library: _library_tokenizer(library.Tokenizer, text, path))


def built(path: Path, build: Callable[[Any], Any], kind: str = "huggingface",
          notes: tuple[str, ...] = (), unchecked_ids: frozenset[int] = frozenset()) -> HuggingFaceTokenizer:
    """A tokenizer of what ``build`` makes with the tokenizers package, which is imported here (another kind
    builds one from its own files). Raises TokenizerError, or MissingPackageError without the library."""
    try:
        import tokenizers
    except ImportError:
        raise MissingPackageError(f"reading {path.name}", "tokenizers", "hf", path=path) from None
    try:
        with native_stderr():  # a panic while the library reads the file prints before it raises
            library_tokenizer = build(tokenizers)
    except EmbscopeError:
        raise
    except BaseException as err:  # the library raises a bare Exception for bad files, or panics
        if not is_library_failure(err):
            raise
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise TokenizerError(
            f"expected a Hugging Face tokenizer in {path}, found an unreadable file: {reason}"
        ) from None
    return HuggingFaceTokenizer(path, library_tokenizer, kind, notes, unchecked_ids)


def _library_tokenizer(library_class: Any, text: str, path: Path) -> Any:
    """The library's tokenizer of ``text``. Only a BPE model's document is parsed here first, for the merges
    the library would panic on; a document the library refuses is parsed too, so that one that is not a
    JSON object is reported in Python's words."""
    if _NAMES_MERGES.search(text):
        check_bpe_merges(_json_object(text), path)
    try:
        return library_class.from_str(text)
    except BaseException as err:
        if is_library_failure(err):
            _json_object(text)
        raise


def _json_object(text: str) -> dict[str, Any]:
    config = json.loads(text)
    if not isinstance(config, dict):
        raise TypeError(f"a JSON {type(config).__name__}, not an object")
    return config
