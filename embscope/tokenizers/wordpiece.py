"""BERT's WordPiece ``vocab.txt`` (one token per line, the line number is the id), read through the
tokenizers library's WordPiece model with BERT's normalizer and pre-tokenizer, as
``BertWordPieceTokenizer`` builds it, from the library's own objects; everything after that is the
Hugging Face kind's code.

Lower-casing follows ``do_lower_case`` in ``tokenizer_config.json`` beside the vocabulary, else in
``config.json``; when neither says, it is inferred from the vocabulary (an uncased vocabulary has no
upper-case pieces), and a note says so. Accents are stripped as ``strip_accents`` says, and CJK characters
split apart as ``tokenize_chinese_chars`` says (transformers' BertTokenizer settings, which save_pretrained
writes into tokenizer_config.json); unset (or null), accents go with lower-casing and CJK is split, as
BertTokenizer does. The unknown token is ``unk_token`` from tokenizer_config.json, else ``[UNK]``.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Any

from embscope.core import files
from embscope.core.errors import TokenizerError
from embscope.tokenizers.base import MAX_TOKENIZER_BYTES, shown
from embscope.tokenizers.huggingface import HuggingFaceTokenizer, built
from embscope.tokenizers.sniffs import setting, unk_token

# BERT's special tokens: matched whole in text, as BertTokenizer does, and never split into pieces
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# [CLS], [unused0], <s>: bracketed names that are not text, one to a line
_MARKER_LINE = re.compile(r"^(?:\[.+\]|<.+>)$", re.MULTILINE)
# BERT's reserved rows, named as placeholders: bracketed like the pieces below, yet BERT's own
_PLACEHOLDER = re.compile(r"\[unused\d+\]")
# Pieces that join punctuation to other characters (rxnfp's SMILES '>>', '%10', '[C@H]'), which BERT's
# pre-tokenizer splits apart, are this share of the vocabulary or more: it was made by another splitter (a
# SMILES regex), whose pieces a round trip through BERT's cannot judge. BERT's own uncased vocabulary has
# one such piece in 30,522 ('...'), which BERT's tokenizer indeed never gives.
OTHER_SPLITTER_SHARE = 0.1


def _lower_case(path: Path, vocab: dict[str, int]) -> tuple[bool, str | None]:
    """Whether to lower-case, and a note when the files did not say."""
    found = setting(path, "do_lower_case")
    if found is not None:
        value, source = found
        if not isinstance(value, bool):
            raise TokenizerError(f"expected do_lower_case in {source} to be true or false, found {shown(value)}")
        return value, None
    unset = "no do_lower_case in tokenizer_config.json or config.json"
    if _has_upper_case(vocab):
        return False, f"words keep their case: the vocabulary has upper-case pieces ({unset})"
    return True, f"words are lower-cased: the vocabulary has no upper-case pieces ({unset})"


def _has_upper_case(vocab: dict[str, int]) -> bool:
    """Whether a piece other than the markers has upper case, asked of all the pieces at once (a token is
    one line of vocab.txt, so lower-casing the lines joined changes them exactly when it changes a token)."""
    text = _MARKER_LINE.sub("", "\n".join(vocab))
    return text != text.lower()


def _flag(path: Path, key: str, unset: bool | None) -> bool | None:
    """A true/false setting beside the vocabulary; `unset` where none says (or it is null)."""
    found = setting(path, key)
    if found is None or found[0] is None:
        return unset
    value, source = found
    if not isinstance(value, bool):
        raise TokenizerError(f"expected {key} in {source} to be true, false or null, found {shown(value)}")
    return value


def read_vocab(path: Path) -> dict[str, int]:
    try:
        text = files.read_text(path, MAX_TOKENIZER_BYTES, "a WordPiece vocabulary")
    except UnicodeDecodeError as err:
        raise TokenizerError(f"cannot read {path} as a WordPiece vocabulary: {err}") from None
    return vocab_of(text)


def vocab_of(text: str) -> dict[str, int]:
    """A token a line, the line number its id (line endings already "\n")."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline after the last token
    # as transformers' load_vocab: a repeated token keeps its last id, leaving the first unused (read_text
    # has turned every line ending into "\n")
    return dict(zip(lines, range(len(lines))))


def bert_tokenizer(library: Any, vocab: dict[str, int], unk: str, lower_case: bool, strip_accents: bool | None = None,
                   chinese_chars: bool = True, prefix: str = "##") -> Any:
    """The tokenizer BertWordPieceTokenizer builds for this vocabulary, with the ``library`` package (no
    post-processor: embscope never adds [CLS] and [SEP] to a word). Built from the library's objects, not
    through a tokenizer.json document, which would cost as much again to write and to parse. `strip_accents`
    None: as lower-casing does."""
    tokenizer = library.Tokenizer(library.models.WordPiece(vocab, unk_token=unk, continuing_subword_prefix=prefix,
                                                           max_input_chars_per_word=100))
    tokenizer.normalizer = library.normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=chinese_chars,
                                                              strip_accents=strip_accents, lowercase=lower_case)
    tokenizer.pre_tokenizer = library.pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = library.decoders.WordPiece(prefix=prefix, cleanup=True)
    tokenizer.add_special_tokens([
        library.AddedToken(token, single_word=False, lstrip=False, rstrip=False, normalized=False, special=True)
        for token in SPECIAL_TOKENS if token in vocab
    ])
    return tokenizer


def _is_punctuation(char: str) -> bool:
    """What BERT's pre-tokenizer splits off as a word of its own (transformers' _is_punctuation: every ASCII
    character that is neither a letter, a digit nor a space, and Unicode's punctuation)."""
    code = ord(char)
    return 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126 \
        or unicodedata.category(char).startswith("P")


def split_by_bert(vocab: dict[str, int], prefix: str = "##") -> dict[str, int]:
    """The pieces BERT's pre-tokenizer could never give whole: more than one character (after a word's `prefix`)
    with punctuation among them; BERT's special tokens (matched whole) and placeholders are left out."""
    found = {}
    for piece, id in vocab.items():
        text = piece.removeprefix(prefix)
        if len(text) > 1 and piece not in SPECIAL_TOKENS and not _PLACEHOLDER.fullmatch(piece) \
                and any(map(_is_punctuation, text)):
            found[piece] = id
    return found


def other_splitter(path: Path, vocab: dict[str, int], prefix: str = "##") -> tuple[frozenset[int], tuple[str, ...]]:
    """The ids a vocabulary made by another splitter holds that BERT's splits apart, and the note that says
    so; none when such pieces are fewer than OTHER_SPLITTER_SHARE of it (a stray one in BERT's own)."""
    split = split_by_bert(vocab, prefix)
    if not vocab or len(split) < OTHER_SPLITTER_SHARE * len(vocab):
        return frozenset(), ()
    shown_pieces = ", ".join(repr(piece) for piece in list(split)[:3])
    note = (f"{len(split):,} of the {len(vocab):,} pieces of {path.name} join punctuation to other characters "
            f"({shown_pieces}, ...), which BERT's pre-tokenizer splits apart: the vocabulary was made by another "
            "splitter, so words are split as BERT would, and the round trip marks none of them unreachable or special")
    return frozenset(split.values()), (note,)


def from_settings(vocab: dict[str, int], path: Path, unk: str, lower_case: bool,
                  strip_accents: bool, prefix: str = "##") -> HuggingFaceTokenizer:
    """BERT's WordPiece over a vocabulary whose settings its writer gave (keras-hub's WordPieceTokenizer config:
    lowercase, strip_accents, oov_token, suffix_indicator: `prefix`), not files beside it; `path` names it in
    messages."""
    if unk not in vocab:
        raise TokenizerError(f"expected the unknown token {shown(unk)} in {path.name}, found no such line")
    unchecked, said = other_splitter(path, vocab, prefix)
    return built(path, lambda library: bert_tokenizer(library, vocab, unk, lower_case, strip_accents, prefix=prefix),
                 kind="wordpiece", notes=said, unchecked_ids=unchecked)


def load(path: Path) -> HuggingFaceTokenizer:
    vocab = read_vocab(path)
    unk = unk_token(path)
    if unk not in vocab:
        raise TokenizerError(f"expected the unknown token {shown(unk)} in {path.name}, found no such line")
    lower_case, note = _lower_case(path, vocab)
    strip_accents = _flag(path, "strip_accents", None)
    chinese_chars = _flag(path, "tokenize_chinese_chars", True)
    unchecked, said = other_splitter(path, vocab)
    return built(path, lambda library: bert_tokenizer(library, vocab, unk, lower_case, strip_accents,
                                                      chinese_chars is not False),
                 kind="wordpiece", notes=((note,) if note else ()) + said, unchecked_ids=unchecked)
