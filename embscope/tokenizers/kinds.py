"""KINDS: every tokenizer kind, in the order they are listed in messages and tried on a file, each with the reason
for its place. A file is put to every kind (two that say yes are an error naming both), so the order decides only
the listing, which kind a folder's search credits with a file first, and where the search beside a checkpoint
looks first. Each loader is named by where it is and imported when a file is of its kind (tiktoken_bpe, which also
knows tokenizers by name, when one is named); the sniffs live together in sniffs.py, so that finding a tokenizer
imports no loader but the one it uses. A new kind is a module here with a load function, a sniff in sniffs.py, and
one entry below."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from ..core.tokenizer import Tokenizer
from ..registry import Kind, listed
from . import sniffs


class Loader(Protocol):
    """A tokenizer kind's load function: the tokenizer a file of that kind holds."""

    def __call__(self, path: Path, /) -> Tokenizer: ...


def loader(module: str) -> str:
    """Where a kind's loader is: `load` in embscope.tokenizers.`module`, imported when a file is of that kind."""
    return f"embscope.tokenizers.{module}:load"

# when one directory holds tokenizers of several kinds, this file is the one models load
PREFERRED_FILE = "tokenizer.json"

KINDS: tuple[Kind[Loader], ...] = listed(
    Kind("huggingface", sniffs.huggingface, loader("huggingface"),
         "first: the commonest, and tokenizer.json is the file models load when a folder holds several",
         file_names=(PREFERRED_FILE,)),
    Kind("gpt2-bpe", sniffs.gpt2_bpe, loader("gpt2_bpe"),
         "a vocab.json with merges.txt beside it: the only kind that reads a pair of files",
         file_names=("*vocab.json",), expects="vocab.json with merges.txt beside it"),
    Kind("wordpiece", sniffs.wordpiece, loader("wordpiece"),
         "*vocab.txt holding its unknown token: the only kind that reads a .txt",
         file_names=("*vocab.txt",), expects="a BERT vocab.txt, one token per line"),
    Kind("fairseq-dict", sniffs.fairseq_dict, loader("fairseq_dict"),
         "dict.txt or dict.<lang>.txt of 'symbol count' lines: fairseq's Dictionary, the only kind by those names",
         file_names=("dict.txt", "dict.*.txt"), expects="a fairseq dict.txt of 'symbol count' lines",
         for_checkpoint="embscope.tokenizers.fairseq_dict:with_task"),
    Kind("sentencepiece", sniffs.sentencepiece, loader("sentencepiece_model"),
         "a *.model protobuf (its first byte 0x0A): the tiktoken and minbpe files that share the name are text "
         "that never starts so", file_names=("*.model",), expects="a SentencePiece *.model protobuf"),
    Kind("tiktoken", sniffs.tiktoken, loader("tiktoken_bpe"),
         "*.tiktoken, or a *.model of 'base64 rank' lines, which minbpe's 'minbpe v1' is not; also known by name",
         file_names=("*.tiktoken", "*.model"),
         expects="a .tiktoken file, or an encoding name such as gpt2 or cl100k_base",
         lister="embscope.tokenizers.tiktoken_bpe:names", name_opener="embscope.tokenizers.tiktoken_bpe:load_name"),
    Kind("byte-bpe", sniffs.byte_bpe, loader("byte_bpe"),
         "a *.model starting 'minbpe v1', or JSON merges (a list, or under 'merges') that are all id pairs",
         file_names=("*.model", "merges.json"), expects="a minbpe *.model file or a merges.json list of id pairs"),
    Kind("harris", sniffs.harris, loader("harris"),
         "harris_segments.json, or JSON segments (a list, or under 'segments') that are all strings, never pairs",
         file_names=("harris_segments.json",)),
    Kind("nanogpt-chars", sniffs.nanogpt_meta, loader("nanogpt_meta"),
         "the only pickle (meta.pkl), and the only kind also looked for away from the checkpoint (data/<dataset>/)",
         file_names=("meta.pkl",), expects="nanoGPT's character-level meta.pkl", related=sniffs.related_paths),
    Kind("char-map", sniffs.char_map, loader("char_map"),
         "last: it takes a JSON object of ids whatever its name, refusing only the keys of the kinds above",
         file_names=("characters.json", "char_to_id.json", "char2idx.json", "word_index.json", "token2id.json"),
         expects="a JSON object mapping each character or token to its id"),
)
