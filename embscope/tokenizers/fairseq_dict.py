"""fairseq's `dict.txt`: the ids of a fairseq model's Dictionary (fairseq/data/dictionary.py). The Dictionary puts
`<s> <pad> </s> <unk>` at ids 0-3, then adds one symbol per line in file order (`symbol count`, optionally followed
by the `#fairseq:overwrite` flag, which gives a symbol already there a new id); a symbol repeated without the flag
is an error there, and here.

RoBERTa's dictionaries (and others built on GPT-2's BPE) hold GPT-2 token ids as their symbols ("464 1016"): with
GPT-2's encoder files beside the dictionary (encoder.json and vocab.bpe, as fairseq names them), a word is encoded by
GPT-2's BPE and each GPT-2 id is mapped to its line, as fairseq's GPT2BPE + Dictionary.encode_line do. A symbol the
dictionary lacks is an error, never fairseq's silent <unk>. Other dictionaries name ids only: a word is found when
it is one whole symbol (with SentencePiece's "▁" where the symbols carry it).

The tasks that mask tokens add `<mask>` after the file's symbols (fairseq/tasks/masked_lm.py,
multilingual_masked_lm.py, denoising.py, sentence_prediction.py and the tasks built on it:
`dictionary.add_symbol("<mask>")`), so a model trained for one has a row past dict.txt that
is a token, not padding: with_task adds it where the checkpoint names such a task. It is an input only where the
task's leave_unmasked_prob + random_token_prob leave some picked tokens to it (fairseq/data/mask_tokens_dataset.py:
a picked token is left as it is, swapped for a random one, or else made <mask>), and a note says when none is."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from embscope.core import files
from embscope.core.errors import Message, Option, TokenError, TokenizerError
from embscope.tokenizers.base import (
    MAX_TOKENIZER_BYTES,
    SPACE_MARK,
    ByteVocabulary,
    check_largest_id,
    check_text,
    shown,
)
from embscope.tokenizers.gpt2_bpe import GPT2BPETokenizer, load_files
from embscope.tokenizers.sniffs import OVERWRITE, parse_line

SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")  # fairseq's Dictionary: bos, pad, eos, unk at 0-3
UNK_ID = 3
FILLER = "madeupword"  # symbols fairseq adds to pad the dictionary to a multiple of 8 (padding_factor)
GPT2_FILES = ("encoder.json", "vocab.bpe")  # fairseq's names for GPT-2's vocab.json and merges.txt
MASK = "<mask>"
MASK_TASKS = frozenset({"masked_lm", "multilingual_masked_lm", "denoising", "sentence_prediction",
                        "sentence_prediction_adapters", "sentence_ranking"})  # add MASK on load


def read_symbols(path: Path) -> tuple[list[str], dict[str, int]]:
    """The Dictionary's symbols by id, and the id each symbol encodes to (the last one an overwrite gave it)."""
    try:
        text = files.read_text(path, MAX_TOKENIZER_BYTES, "a fairseq dict.txt")
    except UnicodeDecodeError as err:
        raise TokenizerError(f"cannot read {path}: {err}") from None
    symbols, index = list(SPECIALS), {symbol: id for id, symbol in enumerate(SPECIALS)}
    lines = text.split("\n")  # as readlines() splits: a symbol may hold any other line break
    for number, line in enumerate(lines[:-1] if lines[-1] == "" else lines, start=1):
        symbol, overwrite = parse_line(line, number, path)
        if symbol in index and not overwrite:
            raise TokenizerError(f"expected each symbol once in {path.name} (or flagged {OVERWRITE}), found "
                                 f"{shown(symbol)} again on line {number}")
        index[check_text(symbol, f"the symbol on line {number} of {path.name}")] = len(symbols)
        symbols.append(symbol)
    check_largest_id(len(symbols) - 1, path)
    return symbols, index


def is_gpt2_symbol(symbol: str) -> bool:
    return symbol.isascii() and symbol.isdigit() or symbol.startswith(FILLER)


class FairseqDictionary(ByteVocabulary):
    kind = "fairseq-dict"
    unk_id = UNK_ID

    def __init__(self, path: Path, symbols: list[str], index: dict[str, int], task: str | None = None,
                 unmasked: tuple[float, float] | None = None):
        self.path = path
        self.vocab_size = len(symbols)
        self._symbols, self._index = symbols, index
        self._special = {id: symbol for id, symbol in enumerate(symbols) if id < len(SPECIALS) or
                         symbol.startswith(FILLER) or task is not None and id == len(symbols) - 1}
        self.special_ids = frozenset(self._special)
        ordinary = symbols[len(SPECIALS):]
        self.gpt2_ids = bool(ordinary) and all(is_gpt2_symbol(symbol) for symbol in ordinary)
        self._gpt2 = gpt2_beside(path) if self.gpt2_ids else None
        notes = []
        if self.gpt2_ids and self._gpt2 is None:
            notes.append(f"{path.name} lists GPT-2 token ids, and GPT-2's encoder.json and vocab.bpe are not beside "
                         "it: tokens show as GPT-2 ids, and words cannot be looked up")
        elif self._gpt2 is None:
            notes.append(f"{path.name} lists symbols without merges: a word is found only when it is one whole symbol")
        if task is not None:
            notes.append(f"id {len(symbols) - 1} is {MASK}: fairseq's {task} task adds it after {path.name}'s symbols"
                         + never_input(unmasked))
        self.notes = tuple(notes)

    def with_task(self, config: Mapping[str, Any]) -> FairseqDictionary:
        """The Dictionary as the checkpoint's task built it (config: fairseq_task, fairseq_unmasked_probs, as
        formats/_fairseq.py gives them): with MASK after the symbols where the task adds it."""
        task = config.get("fairseq_task")
        if task not in MASK_TASKS or MASK in self._index:
            return self
        return FairseqDictionary(self.path, [*self._symbols, MASK], {**self._index, MASK: len(self._symbols)},
                                 str(task), config.get("fairseq_unmasked_probs"))

    @functools.cached_property
    def _pieces(self) -> list[bytes | None]:  # type: ignore[override]  # built on first use
        return [self.symbol_bytes(symbol) for symbol in self._symbols]

    def symbol_bytes(self, symbol: str) -> bytes:
        if self._gpt2 is not None and symbol.isascii() and symbol.isdigit() and int(symbol) < self._gpt2.vocab_size:
            return self._gpt2._piece(int(symbol))
        if not self.gpt2_ids and symbol.startswith(SPACE_MARK):
            return symbol.replace(SPACE_MARK, " ").encode("utf-8")
        return symbol.encode("utf-8")

    def encode(self, text: str) -> list[int]:
        if self._gpt2 is not None:
            return [self.id_of(str(gpt2_id), text) for gpt2_id in self._gpt2.encode(text)]
        if self.gpt2_ids:
            raise TokenError(Message(f"{self.path.name} lists GPT-2 ids, and GPT-2's {' and '.join(GPT2_FILES)} are "
                                     f"not beside it to encode {shown(text)}: put them there, or pass ids with ",
                                     Option("ids", True)), option="tokenizer")
        marked = SPACE_MARK + text.strip(" ")
        if any(symbol.startswith(SPACE_MARK) for symbol in self._symbols) and marked in self._index:
            return [self._index[marked]]
        return [self.id_of(text, text)]

    def id_of(self, symbol: str, text: str) -> int:
        id = self._index.get(symbol)
        if id is None or id < len(SPECIALS) and symbol not in SPECIALS:
            raise TokenError(f"{shown(text)} needs the symbol {shown(symbol)}, which {self.path.name} does not hold "
                             f"(fairseq would read it as <unk>)", option="tokenizer")
        return id


def never_input(unmasked: tuple[float, float] | None) -> str:
    """Where the training left no picked token to MASK, what says so."""
    if unmasked is None or sum(unmasked) < 1:
        return ""
    kept, swapped = unmasked
    return (f", and no input held it: leave_unmasked_prob {kept:g} + random_token_prob {swapped:g} leave none of "
            "the picked tokens to it")


def gpt2_beside(path: Path) -> GPT2BPETokenizer | None:
    encoder, merges = (path.with_name(name) for name in GPT2_FILES)
    if not (files.is_regular(encoder) and files.is_regular(merges)):
        return None
    return load_files(encoder, merges)




def load(path: Path) -> FairseqDictionary:
    symbols, index = read_symbols(path)
    return FairseqDictionary(path, symbols, index)


def with_task(dictionary: FairseqDictionary, config: Mapping[str, Any]) -> FairseqDictionary:
    """The kind's for_checkpoint (registry.Kind): the Dictionary as the checkpoint's task built it."""
    return dictionary.with_task(config)
