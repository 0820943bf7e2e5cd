"""An id-to-token list with nothing else: CTranslate2's `vocabulary.json` (a JSON list of strings) or
`vocabulary.txt` (one token a line). It names ids; it cannot split text into pieces, so a word is
found only when it is one whole token of the list.

Tokens are shown as the model's own tokenizer would show them: a GPT-2 byte-level list (Whisper) maps
"Ġdog" to " dog", a SentencePiece list (OPUS-MT) maps "▁dog" to " dog". A SentencePiece word is looked
up with its leading "▁", as SentencePiece itself encodes it."""

from __future__ import annotations

from pathlib import Path

from embscope.core import files
from embscope.core.errors import CheckpointError, Message, Option, TokenError, TokenizerError
from embscope.tokenizers.base import MAX_TOKENIZER_BYTES, SPACE_MARK, ByteVocabulary, check_largest_id, check_text
from embscope.tokenizers.byte_alphabet import unicode_to_byte

MAX_CONFIG_BYTES = 16 << 20  # a config.json larger than this is not a config
SPECIAL_KEYS = ("unk_token", "bos_token", "eos_token", "decoder_start_token")  # CTranslate2's config.json


class VocabularyList(ByteVocabulary):
    kind = "vocabulary list"
    notes = ("a vocabulary list without merges: a word is found only when it is one whole token",)

    def __init__(self, path: Path, tokens: list[str], special: dict[str, str]):
        self.path = path
        self.vocab_size = len(tokens)
        first_id = {token: id for id, token in reversed(list(enumerate(tokens)))}
        self._special = {first_id[text]: text for text in special.values() if text in first_id}
        self.special_ids = frozenset(self._special)
        unk = special.get("unk_token")
        self.unk_id = first_id.get(unk) if unk is not None else None
        self.style = style_of([t for id, t in enumerate(tokens) if id not in self._special])
        self._pieces = [piece_bytes(t, self.style) for t in tokens]
        self._id_of_text: dict[str, int] = {}
        for id in range(self.vocab_size):
            self._id_of_text.setdefault(self.token_string(id), id)

    def encode(self, text: str) -> list[int]:
        if self.style == "sentencepiece":
            # SentencePiece drops spaces at the ends and adds its dummy prefix: "dog", " dog" and "dog " are all
            # "▁dog", and spaces alone are no token at all
            text = " " + text.strip(" ") if text.strip(" ") else ""
        id = self._id_of_text.get(text) if text else None
        if id is None:
            raise TokenError(Message(f"{text!r} is not one token of {self.path.name}, a vocabulary list that cannot "
                                     "split text into pieces: pass the model's tokenizer with ", Option("tokenizer"),
                                     ", or ids with ", Option("ids", True)), option="tokenizer")
        return [id]


def style_of(tokens: list[str]) -> str:
    """How the list marks spaces: GPT-2's byte alphabet ("Ġdog"), SentencePiece ("▁dog"), or not at all."""
    alphabet = unicode_to_byte().keys()
    if any("\u0120" in t for t in tokens) and all(set(t) <= alphabet for t in tokens):
        return "byte-level"
    return "sentencepiece" if any(t.startswith(SPACE_MARK) for t in tokens) else "plain"


def piece_bytes(token: str, style: str) -> bytes:
    if style == "byte-level" and set(token) <= unicode_to_byte().keys():
        to_byte = unicode_to_byte()
        return bytes(to_byte[c] for c in token)
    return (token.replace(SPACE_MARK, " ") if style == "sentencepiece" else token).encode("utf-8")


def read_tokens(path: Path) -> list[str]:
    try:
        if path.suffix == ".json":
            tokens = files.read_json(path, MAX_TOKENIZER_BYTES, "a vocabulary list")
        else:
            tokens = files.read_text(path, MAX_TOKENIZER_BYTES, "a vocabulary list").split("\n")
            tokens = tokens[:-1] if tokens and tokens[-1] == "" else tokens
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise TokenizerError(f"expected a readable vocabulary in {path}, found {type(err).__name__}") from None
    if not (isinstance(tokens, list) and tokens and all(isinstance(t, str) for t in tokens)):
        raise TokenizerError(f"expected {path.name} to list token strings, found another document")
    for id, token in enumerate(tokens):
        check_text(token, f"token {id} of {path.name}")
    check_largest_id(len(tokens) - 1, path)
    return tokens


def special_tokens(directory: Path) -> dict[str, str]:
    """unk, bos and eos as CTranslate2's config.json names them; none when it is absent or unreadable."""
    try:  # a FIFO or a directory named config.json is no config: refused on opening, never waited on
        config = files.read_json(directory / "config.json", MAX_CONFIG_BYTES, "CTranslate2's config.json")
    except (CheckpointError, UnicodeDecodeError, ValueError, RecursionError):
        return {}
    if not isinstance(config, dict):
        return {}
    return {key: config[key] for key in SPECIAL_KEYS if isinstance(config.get(key), str)}


def load_vocabulary_list(path: Path) -> VocabularyList:
    return VocabularyList(path, read_tokens(path), special_tokens(path.parent))
