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
        lines = files.read_text(path, MAX_TOKENIZER_BYTES, "a WordPiece vocabulary").split("\n")
    except UnicodeDecodeError as err:
        raise TokenizerError(f"cannot read {path} as a WordPiece vocabulary: {err}") from None
    if lines and lines[-1] == "":
        lines.pop()  # the newline after the last token
    # as transformers' load_vocab: a repeated token keeps its last id, leaving the first unused (read_text
    # has turned every line ending into "\n")
    return dict(zip(lines, range(len(lines))))


def bert_tokenizer(library: Any, vocab: dict[str, int], unk: str, lower_case: bool, strip_accents: bool | None = None,
                   chinese_chars: bool = True) -> Any:
    """The tokenizer BertWordPieceTokenizer builds for this vocabulary, with the ``library`` package (no
    post-processor: embscope never adds [CLS] and [SEP] to a word). Built from the library's objects, not
    through a tokenizer.json document, which would cost as much again to write and to parse. `strip_accents`
    None: as lower-casing does."""
    tokenizer = library.Tokenizer(library.models.WordPiece(vocab, unk_token=unk, continuing_subword_prefix="##",
                                                           max_input_chars_per_word=100))
    tokenizer.normalizer = library.normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=chinese_chars,
                                                              strip_accents=strip_accents, lowercase=lower_case)
    tokenizer.pre_tokenizer = library.pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = library.decoders.WordPiece(prefix="##", cleanup=True)
    tokenizer.add_special_tokens([
        library.AddedToken(token, single_word=False, lstrip=False, rstrip=False, normalized=False, special=True)
        for token in SPECIAL_TOKENS if token in vocab
    ])
    return tokenizer


def load(path: Path) -> HuggingFaceTokenizer:
    vocab = read_vocab(path)
    unk = unk_token(path)
    if unk not in vocab:
        raise TokenizerError(f"expected the unknown token {shown(unk)} in {path.name}, found no such line")
    lower_case, note = _lower_case(path, vocab)
    strip_accents = _flag(path, "strip_accents", None)
    chinese_chars = _flag(path, "tokenize_chinese_chars", True)
    return built(path, lambda library: bert_tokenizer(library, vocab, unk, lower_case, strip_accents,
                                                      chinese_chars is not False),
                 kind="wordpiece", notes=(note,) if note else ())
