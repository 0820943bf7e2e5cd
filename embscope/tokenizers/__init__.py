"""Tokenizers: one module per kind of file, all with the same small interface
(``Tokenizer`` in base.py), each defining ``sniff`` and ``load``. The ``register`` lines below
list every kind; adding one is adding a module and its line there."""

from __future__ import annotations

import functools
import os
import stat
from pathlib import Path
from typing import Any

from embscope.errors import Option, TokenizerError
from embscope.lazy import lazy_function
from embscope.text import detail
from embscope.tokenizers.base import (
    Tokenizer,
    TokenizerKind,
    check_id,
    register_kind,
    registered_kinds,
    shown,
)

# when one directory holds tokenizers of several kinds, this file is the one models load
PREFERRED_FILE = "tokenizer.json"


def register(name: str, module: str, file_patterns: tuple[str, ...], expects: str = "", *, by_name: bool = False,
             related: bool = False) -> None:
    """Register a kind whose functions (sniff, load, and names and load_name or related_paths where it has
    them) are those of the same names in `module`."""
    function = functools.partial(lazy_function, f"{__name__}.{module}")
    register_kind(TokenizerKind(name, file_patterns, function("sniff"), function("load"), expects,
                                names=function("names") if by_name else None,
                                load_name=function("load_name") if by_name else None,
                                related_paths=function("related_paths") if related else None))


# The kinds, in the order they are listed in messages and tried on a file. The sniffs look at content and do
# not overlap (minbpe's text "*.model" starts "minbpe v1", SentencePiece's is a protobuf, tiktoken's has
# "base64 rank" lines), so the order only sets the listing: the Hugging Face files first, as the commonest.
# A kind's module is imported when one of its functions is first called: a directory is searched by the
# kinds' file patterns, so a run imports only the kinds whose files are there.
register("huggingface", "huggingface", (PREFERRED_FILE,))
register("gpt2-bpe", "gpt2_bpe", ("*vocab.json",), "vocab.json with merges.txt beside it")
register("wordpiece", "wordpiece", ("*vocab.txt",), "a BERT vocab.txt, one token per line")
register("sentencepiece", "sentencepiece_model", ("*.model",), "a SentencePiece *.model protobuf")
register("tiktoken", "tiktoken_bpe", ("*.tiktoken", "*.model"),
         "a .tiktoken file, or an encoding name such as gpt2 or cl100k_base", by_name=True)
register("byte-bpe", "byte_bpe", ("*.model", "merges.json"), "a minbpe *.model file or a merges.json list of id pairs")
register("harris", "harris", ("harris_segments.json",))
register("nanogpt-chars", "nanogpt_meta", ("meta.pkl",), "nanoGPT's character-level meta.pkl", related=True)
register("char-map", "char_map", ("characters.json", "char_to_id.json", "char2idx.json", "word_index.json"),
         "a JSON object mapping each character or token to its id")

__all__ = [
    "Tokenizer",
    "TokenizerKind",
    "check_id",
    "find_tokenizer",
    "load_tokenizer",
    "register_kind",
    "registered_kinds",
]



def _expected_kinds() -> str:
    return "; ".join(kind.description() for kind in registered_kinds())


def _load(kind: TokenizerKind, path: Path) -> Tokenizer:
    """One kind's loader, with what parsing a damaged file raises turned into a TokenizerError."""
    try:
        return kind.load(path)
    except TokenizerError as err:
        err.path = err.path or path  # the file it is about, for code that handles it
        raise
    except (ValueError, KeyError, IndexError, TypeError, RecursionError, MemoryError, OSError) as err:
        raise TokenizerError(f"expected a readable {kind.name} tokenizer in {path}, found damage "
                             f"({detail(err)})", path=path) from None


def _file_type(path: Path) -> int | None:
    """The stat file type of ``path`` (stat.S_IFDIR, S_IFREG, ...), or None when nothing is there."""
    try:
        return stat.S_IFMT(path.stat().st_mode)
    except FileNotFoundError:
        return None
    except OSError as err:  # a name too long, a loop of links, no permission
        raise TokenizerError(f"cannot look at the tokenizer path {shown(str(path), 100)}: "
                             f"{err.strerror or err}") from None


def load_tokenizer(source: str | os.PathLike[str]) -> Tokenizer:
    """Open a tokenizer file (for GPT-2 BPE, vocab.json with merges.txt beside it), a directory
    (searched as ``find_tokenizer`` does), or a tokenizer known by name when no such path exists
    (tiktoken's ``gpt2``, ``cl100k_base``, ...). Raises TokenizerError, or MissingPackageError when a
    library the kind needs is missing."""
    path = Path(source)
    file_type = _file_type(path)
    if file_type == stat.S_IFDIR:
        found = find_tokenizer(path)
        if found is None:
            raise TokenizerError(f"expected a tokenizer file in {path}, found none of: {_expected_kinds()}")
        return found
    if file_type is None:
        return _load_by_name(str(source), path)
    if file_type != stat.S_IFREG:  # a FIFO would block forever, a device would read without end
        raise TokenizerError(f"expected a tokenizer file at {path}, found something that is not a regular file")
    kinds = registered_kinds()
    # a file's name settles its kind before any content is parsed (tokenizer.json can be large)
    matches = [kind for kind in kinds if kind.matches_name(path) and kind.sniff(path)]
    if not matches:
        matches = [kind for kind in kinds if kind.sniff(path)]
    if not matches:
        raise TokenizerError(f"{path} is not a tokenizer file embscope knows; expected {_expected_kinds()}")
    if len(matches) > 1:
        names = ", ".join(kind.name for kind in matches)
        raise TokenizerError(
            f"expected {path} to be one kind of tokenizer, found it could be any of: {names}"
        )
    return _load(matches[0], path)


def _load_by_name(name: str, path: Path) -> Tokenizer:
    """A tokenizer named rather than stored; a name is a bare word, never a path."""
    if name != path.name:
        raise TokenizerError(f"expected a tokenizer file at {path}, found nothing there")
    known: list[str] = []
    for kind in registered_kinds():
        if kind.names is None or kind.load_name is None:
            continue
        names = kind.names()
        if name in names:
            return kind.load_name(name)
        known.append(f"{kind.name} {', '.join(names)}")
    raise TokenizerError(
        f"expected a tokenizer file or a tokenizer name, found neither: {shown(name)} is no file here "
        f"and no name known ({'; '.join(known) or 'none'})"
    )


def find_tokenizer(directory: Path, config: dict[str, Any] | None = None) -> Tokenizer | None:
    """The tokenizer stored in a checkpoint directory (or beside a checkpoint file),
    or None when there is none. When there are several, ``tokenizer.json`` wins;
    without one, TokenizerError lists them. ``config`` is the checkpoint's config:
    when nothing is beside the checkpoint, kinds look where it points (nanoGPT's
    ``data/<dataset>/meta.pkl``)."""
    directory = Path(directory)
    if directory.is_file():
        directory = directory.parent
    found: dict[Path, TokenizerKind] = {}
    for kind in registered_kinds():
        for pattern in kind.file_patterns:
            for path in sorted(directory.glob(pattern)):
                if path not in found and path.is_file() and kind.sniff(path):
                    found[path] = kind
    if not found:
        return _find_related(directory, config or {})
    if len(found) == 1:
        [(path, kind)] = found.items()
        return _load(kind, path)
    preferred = directory / PREFERRED_FILE
    if preferred in found:
        return _load(found[preferred], preferred)
    listed = ", ".join(f"{path.name} ({kind.name})" for path, kind in found.items())
    raise TokenizerError(
        f"expected one tokenizer in {directory}, found {len(found)}: {listed}; choose one with {Option('tokenizer')}",
        path=directory, option="tokenizer")


def _find_related(directory: Path, config: dict[str, Any]) -> Tokenizer | None:
    for kind in registered_kinds():
        if kind.related_paths is None:
            continue
        for path in kind.related_paths(directory, config):
            if path.is_file() and kind.sniff(path):
                return _load(kind, path)
    return None
