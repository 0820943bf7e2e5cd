"""Tokenizers: one module per kind of file, all with the same small interface
(``Tokenizer`` in base.py). Each kind module registers a ``TokenizerKind``; this
package only asks the registry, so adding a kind is adding a module below."""

from __future__ import annotations

from pathlib import Path

from embscope.errors import CheckpointError
from embscope.tokenizers.base import (
    Tokenizer,
    TokenizerKind,
    check_id,
    register_kind,
    registered_kinds,
)

# importing a kind registers it; the order here is the order files are sniffed
from embscope.tokenizers import huggingface, gpt2_bpe, byte_bpe, harris  # noqa: E402,F401  isort: skip

__all__ = [
    "Tokenizer",
    "TokenizerKind",
    "check_id",
    "find_tokenizer",
    "load_tokenizer",
    "register_kind",
    "registered_kinds",
]

# when one directory holds tokenizers of several kinds, this file is the one models load
PREFERRED_FILE = "tokenizer.json"


def _expected_kinds() -> str:
    return "; ".join(kind.description() for kind in registered_kinds())


def _load(kind: TokenizerKind, path: Path) -> Tokenizer:
    """One kind's loader, with what parsing a damaged file raises turned into a CheckpointError."""
    try:
        return kind.load(path)
    except (ValueError, KeyError, IndexError, TypeError, RecursionError, MemoryError, OSError) as err:
        detail = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
        raise CheckpointError(f"expected a readable {kind.name} tokenizer in {path}, found damage "
                              f"({type(err).__name__}: {detail})") from None


def load_tokenizer(path: Path) -> Tokenizer:
    """Open a tokenizer file (for GPT-2 BPE, vocab.json with merges.txt beside it).
    A directory is searched as ``find_tokenizer`` does. Raises CheckpointError."""
    path = Path(path)
    if path.is_dir():
        found = find_tokenizer(path)
        if found is None:
            raise CheckpointError(f"expected a tokenizer file in {path}, found none of: {_expected_kinds()}")
        return found
    if not path.is_file():
        raise CheckpointError(f"expected a tokenizer file at {path}, found nothing there")
    kinds = registered_kinds()
    # a file's name settles its kind before any content is parsed (tokenizer.json can be large)
    matches = [kind for kind in kinds if kind.matches_name(path) and kind.sniff(path)]
    if not matches:
        matches = [kind for kind in kinds if kind.sniff(path)]
    if not matches:
        raise CheckpointError(f"{path} is not a tokenizer file embscope knows; expected {_expected_kinds()}")
    if len(matches) > 1:
        names = ", ".join(kind.name for kind in matches)
        raise CheckpointError(
            f"expected {path} to be one kind of tokenizer, found it could be any of: {names}"
        )
    return _load(matches[0], path)


def find_tokenizer(directory: Path) -> Tokenizer | None:
    """The tokenizer stored in a checkpoint directory (or beside a checkpoint file),
    or None when there is none. When there are several, ``tokenizer.json`` wins;
    without one, CheckpointError lists them."""
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
        return None
    if len(found) == 1:
        [(path, kind)] = found.items()
        return _load(kind, path)
    preferred = directory / PREFERRED_FILE
    if preferred in found:
        return _load(found[preferred], preferred)
    listed = ", ".join(f"{path.name} ({kind.name})" for path, kind in found.items())
    raise CheckpointError(
        f"expected one tokenizer in {directory}, found {len(found)}: {listed}; choose one with --tokenizer"
    )
