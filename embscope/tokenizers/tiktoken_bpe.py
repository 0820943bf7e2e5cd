"""OpenAI's tiktoken encodings, through the ``tiktoken`` package (the ``tiktoken`` extra):

- by name (``--tokenizer gpt2``, ``cl100k_base``, ...), when tiktoken can load the encoding from its
  cache. embscope never downloads: where the files are not cached, one line says so and names
  ``TIKTOKEN_CACHE_DIR``. A nanoGPT GPT-2 run has no tokenizer file; this is its tokenizer.
- from a ``.tiktoken`` file (one ``base64-token rank`` line per token; Llama 3 ships one as
  ``tokenizer.model``). The file holds no split pattern: the pattern of the encoding its name names
  is used (``cl100k_base.tiktoken``), else cl100k_base's, and a note says so.

Encoding adds no special tokens; a special token of a named encoding written in the text ("<|endoftext|>") is
that token, as nanoGPT's sample.py encodes (allowed_special={"<|endoftext|>"}) and the tokenizers library
matches added tokens (tiktoken's own default refuses such text rather than read it as ordinary text). Special
tokens decode to their text.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from embscope.core import files
from embscope.core.errors import MissingPackageError, TokenError, TokenizerError
from embscope.tokenizers.base import MAX_TOKEN_ID, MAX_TOKENIZER_BYTES, check_id, shown
from embscope.tokenizers.sniffs import RANK_LINE

EXTRA = "tiktoken"
# the encodings tiktoken ships (tiktoken_ext/openai_public.py), named in messages when tiktoken is missing
OPENAI_ENCODINGS = ("gpt2", "r50k_base", "p50k_base", "p50k_edit", "cl100k_base", "o200k_base", "o200k_harmony")

# split patterns copied from tiktoken_ext/openai_public.py (tiktoken 0.14), which builds them inside the
# functions that also load the ranks, so they cannot be read without loading an encoding
R50K_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|"""
    r"""\s+(?!\S)|\s"""
)
O200K_PATTERN = (
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"""
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"""
    r"""\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
PATTERN_BY_ENCODING = {
    "gpt2": R50K_PATTERN, "r50k_base": R50K_PATTERN, "p50k_base": R50K_PATTERN, "p50k_edit": R50K_PATTERN,
    "cl100k_base": CL100K_PATTERN, "o200k_base": O200K_PATTERN, "o200k_harmony": O200K_PATTERN,
}
# most .tiktoken files outside OpenAI's (Llama 3, Qwen, Kimi) cut text as cl100k_base does
DEFAULT_ENCODING = "cl100k_base"



class TiktokenTokenizer:
    kind = "tiktoken"
    unk_id = None  # byte-level: every text is bytes, and all 256 bytes are tokens

    def __init__(self, path: Path, encoding: Any, notes: tuple[str, ...] = ()):
        self.path = path
        self.notes = notes
        self._enc = encoding
        self.vocab_size = encoding.max_token_value + 1
        self.special_ids = frozenset(encoding.encode_single_token(text) for text in encoding.special_tokens_set)

    def encode(self, text: str) -> list[int]:
        return list(self._enc.encode(text, allowed_special="all", disallowed_special=()))

    def decode(self, ids: list[int]) -> str:
        return b"".join(self._bytes(id) for id in ids).decode("utf-8", errors="replace")

    def token_string(self, id: int) -> str:
        return self._bytes(id).decode("utf-8", errors="backslashreplace")

    def _bytes(self, id: int) -> bytes:
        id = check_id(id, self.vocab_size)
        try:
            found: bytes = self._enc.decode_single_token_bytes(id)
            return found
        except KeyError:
            raise TokenError(f"token id {id} is not used by the {self.kind} tokenizer {self.path.name}") from None

    def __repr__(self) -> str:
        return f"<TiktokenTokenizer {self.path} vocab_size={self.vocab_size}>"


def _tiktoken(what: str) -> Any:
    try:
        import tiktoken
    except ImportError:
        raise MissingPackageError(what, "tiktoken", EXTRA) from None
    return tiktoken


# ------------------------------------------------------------------ by name


def names() -> tuple[str, ...]:
    try:
        import tiktoken
    except ImportError:
        return OPENAI_ENCODINGS
    return tuple(tiktoken.list_encoding_names())


def load_name(name: str) -> TiktokenTokenizer:
    tiktoken = _tiktoken(f"the tokenizer {name!r}")
    with _cache_only(tiktoken) as not_cached:
        try:
            encoding = tiktoken.get_encoding(name)
        except Exception as err:  # noqa: BLE001  tiktoken's loaders raise anything (ValueError, AssertionError)
            if not_cached:
                raise TokenizerError(
                    f"cannot load the tiktoken encoding {name!r} without downloading it, and embscope never "
                    f"downloads: its files are not in tiktoken's cache {_cache_dir()} (set TIKTOKEN_CACHE_DIR "
                    "to a folder that holds them)"
                ) from None
            detail = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
            raise TokenizerError(f"tiktoken could not load the encoding {name!r}: {detail}") from None
    return TiktokenTokenizer(Path(name), encoding)


class _NotCached(Exception):
    pass


@contextlib.contextmanager
def _cache_only(tiktoken: Any) -> Iterator[list[str]]:
    """While loading, tiktoken may read its cache and local files but not fetch a URL; the list yielded
    holds the URLs it asked for. Its two readers are replaced for the while: they open files themselves
    (a FIFO in the cache folder would hang them) and delete a cached file whose hash disagrees; these read
    through embscope.core.files and delete nothing."""
    load_module = tiktoken.load
    originals = load_module.read_file, load_module.read_file_cached
    asked: list[str] = []

    def read_local_file(blobpath: str) -> bytes:
        if "://" in blobpath:
            asked.append(blobpath)
            raise _NotCached(blobpath)
        return files.read_bytes(blobpath, MAX_TOKENIZER_BYTES, "a tiktoken file")

    def read_cached_file(blobpath: str, expected_hash: str | None = None) -> bytes:
        import hashlib
        folder = _cache_dir()
        if folder:  # tiktoken/load.py read_file_cached: the cache file is named by the SHA-1 of its URL
            cached = os.path.join(folder, hashlib.sha1(blobpath.encode()).hexdigest())
            if files.status(cached) is not None:
                data = files.read_bytes(cached, MAX_TOKENIZER_BYTES, "a tiktoken cache file")
                if expected_hash is None or hashlib.sha256(data).hexdigest() == expected_hash:
                    return data
        return read_local_file(blobpath)

    load_module.read_file, load_module.read_file_cached = read_local_file, read_cached_file
    try:
        yield asked
    finally:
        load_module.read_file, load_module.read_file_cached = originals


def _cache_dir() -> str:
    """Where tiktoken looks (tiktoken/load.py: read_file_cached)."""
    import tempfile

    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if variable in os.environ:
            return os.environ[variable]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


# ------------------------------------------------------------------ from a file


def read_ranks(path: Path) -> dict[bytes, int]:
    """The ``token rank`` lines, checked: tiktoken's own reader takes any rank, and its encoder panics
    on a vocabulary that lacks a byte."""
    lines = files.read_bytes(path, MAX_TOKENIZER_BYTES, "a tiktoken file").splitlines()
    ranks: dict[bytes, int] = {}
    used: set[int] = set()
    for number, line in enumerate(lines, start=1):
        if not line:
            continue
        if not RANK_LINE.fullmatch(line):
            raise TokenizerError(f"expected 'base64-token rank' on line {number} of {path.name}, found {shown(line)}")
        encoded, rank_text = line.split(b" ")
        try:
            token = base64.b64decode(encoded, validate=True)
        except binascii.Error:
            raise TokenizerError(f"expected base64 on line {number} of {path.name}, found {shown(encoded)}") from None
        rank = int(rank_text)
        if rank > MAX_TOKEN_ID or rank in used or token in ranks or not token:
            raise TokenizerError(
                f"expected a new token and a new rank up to {MAX_TOKEN_ID:,} on line {number} of {path.name}, "
                f"found {shown(token)} {rank}"
            )
        ranks[token] = rank
        used.add(rank)
    missing = [byte for byte in range(256) if bytes([byte]) not in ranks]
    if missing:
        raise TokenizerError(
            f"expected all 256 single bytes among the tokens of {path.name}, found {len(missing)} missing "
            f"(the first is 0x{missing[0]:02x})"
        )
    return ranks


def load(path: Path) -> TiktokenTokenizer:
    tiktoken = _tiktoken(f"reading {path.name}")
    ranks = read_ranks(path)
    name = path.stem if path.stem in PATTERN_BY_ENCODING else DEFAULT_ENCODING
    default_note = (f"split pattern: {DEFAULT_ENCODING}'s, the default for a .tiktoken file whose name is not an "
                    f"encoding's ({', '.join(PATTERN_BY_ENCODING)})")
    notes = () if name == path.stem else (default_note,)
    encoding = tiktoken.Encoding(name=path.stem, pat_str=PATTERN_BY_ENCODING[name], mergeable_ranks=ranks,
                                 special_tokens={})
    return TiktokenTokenizer(path, encoding, notes)
