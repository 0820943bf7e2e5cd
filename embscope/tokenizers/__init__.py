"""Tokenizers: one module per kind of file, all with the same small interface
(``Tokenizer`` in base.py), each defining ``sniff`` (handed a registry.Probe) and ``load``. KINDS (kinds.py)
lists every kind, with the reason for its place; adding one is adding a module and its entry there."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from embscope.core.errors import CheckpointError, Message, Option, TokenizerError, UnsafePickleError, message_of
from embscope.core.text import detail
from embscope.core.tokenizer import Tokenizer
from embscope.listing import clipped_list
from embscope.registry import Kind, Probe
from embscope.tokenizers.base import check_id, is_id, shown, sniff_json
from embscope.tokenizers.kinds import KINDS, PREFERRED_FILE, Loader

TokenizerKind = Kind[Loader]


def registered_kinds() -> tuple[TokenizerKind, ...]:
    """The kinds in the order of KINDS (the order sniffing tries them)."""
    return KINDS


__all__ = [
    "KINDS",
    "Tokenizer",
    "TokenizerKind",
    "check_id",
    "find_tokenizer",
    "load_tokenizer",
    "registered_kinds",
]


def _expected_kinds() -> str:
    return "; ".join(kind.description() for kind in KINDS)


def _load(kind: TokenizerKind, path: Path, config: dict[str, Any] | None = None) -> Tokenizer:
    """One kind's loader, with what parsing a damaged file raises turned into a TokenizerError; as the checkpoint
    whose config is given used the file, where the kind says how (Kind.for_checkpoint)."""
    try:
        opened = kind.open(path)
        used: Tokenizer = kind.as_used(opened, config) if config is not None else opened
        return used
    except TokenizerError as err:
        err.path = err.path or path  # the file it is about, for code that handles it
        raise
    except UnsafePickleError:  # a pickled vocabulary refused as unsafe keeps its class
        raise
    except CheckpointError as err:  # embscope.core.files refused the file (too large, not regular, unreadable)
        raise TokenizerError(message_of(err), path=path) from None
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


def load_tokenizer(source: str | os.PathLike[str], config: dict[str, Any] | None = None) -> Tokenizer:
    """Open a tokenizer file (for GPT-2 BPE, vocab.json with merges.txt beside it), a directory
    (searched as ``find_tokenizer`` does), or a tokenizer known by name when no such path exists
    (tiktoken's ``gpt2``, ``cl100k_base``, ...), as the checkpoint whose `config` is given uses it. Raises
    TokenizerError, or MissingPackageError when a library the kind needs is missing."""
    path = Path(source)
    file_type = _file_type(path)
    if file_type == stat.S_IFDIR:
        # only the folder named: the checkpoint's config says how it uses the file, not where else to look
        found = _find_in(path, config)
        if found is None:
            raise TokenizerError(f"expected a tokenizer file in {path}, found none of: {_expected_kinds()}")
        return found
    if file_type is None:
        return _load_by_name(str(source), path)
    if file_type != stat.S_IFREG:  # a FIFO would block forever, a device would read without end
        raise TokenizerError(f"expected a tokenizer file at {path}, found something that is not a regular file")
    probe = Probe.peek(path)  # None only where the file is gone, or replaced, since the look above
    # a file's name settles its kind before any content is parsed (tokenizer.json can be large)
    matches = [kind for kind in KINDS if probe is not None and kind.matches_name(path) and kind.sniff(probe)]
    if not matches:
        matches = [kind for kind in KINDS if probe is not None and kind.sniff(probe)]
    if not matches:
        raise TokenizerError(f"{path} is not a tokenizer file embscope knows; expected {_expected_kinds()}")
    if len(matches) > 1:
        names = ", ".join(kind.name for kind in matches)
        raise TokenizerError(
            f"expected {path} to be one kind of tokenizer, found it could be any of: {names}"
        )
    return _load(matches[0], path, config)


def _load_by_name(name: str, path: Path) -> Tokenizer:
    """A tokenizer named rather than stored; a name is a bare word, never a path."""
    if name != path.name:
        raise TokenizerError(f"expected a tokenizer file at {path}, found nothing there")
    known: list[str] = []
    for kind in KINDS:
        if kind.names is None or kind.load_name is None:
            continue
        names = kind.names()
        if name in names:
            named: Tokenizer = kind.load_name(name)
            return named
        known.append(f"{kind.name} {', '.join(names)}")
    raise TokenizerError(
        f"expected a tokenizer file or a tokenizer name, found neither: {shown(name)} is no file here "
        f"and no name known ({'; '.join(known) or 'none'})"
    )


# JSON files looked at for the hint when no tokenizer is found by name: a model's folder holds a few
MAX_HINT_FILES = 16


def id_maps_beside(directory: Path, rows: int) -> list[str]:
    """The JSON files beside a checkpoint, under names no kind looks for, that map text to distinct ids naming at
    least half of a `rows`-row table and none past it: a tokenizer to give with --tokenizer (textgenrnn 2.0.0's
    textgenrnn_vocab.json, 464 characters with ids 1 to 464, beside its 465-row textgenrnn_weights.hdf5). A config
    of a few numbers names too few rows to be taken for one."""
    directory = Path(directory)
    if directory.is_file():
        directory = directory.parent
    named = {name for kind in KINDS for name in kind.file_names}
    found = []
    for path in sorted(directory.glob("*.json"))[:MAX_HINT_FILES]:
        doc = None if path.name in named else sniff_json(path)
        if not isinstance(doc, dict) or not all(is_id(value) for value in doc.values()):
            continue
        ids = set(doc.values())
        if len(ids) == len(doc) and 2 * len(ids) >= rows and max(ids) < rows:
            found.append(path.name)
    return found


def find_tokenizer(directory: Path, config: dict[str, Any] | None = None) -> Tokenizer | None:
    """The tokenizer stored in a checkpoint directory (or beside a checkpoint file),
    or None when there is none. When there are several, ``tokenizer.json`` wins;
    without one, TokenizerError lists them. ``config`` is the checkpoint's config:
    when nothing is beside the checkpoint, kinds look where it points (nanoGPT's
    ``data/<dataset>/meta.pkl``)."""
    directory = Path(directory)
    if directory.is_file():
        directory = directory.parent
    found = _find_in(directory, config)
    return found if found is not None else _find_related(directory, config or {})


def _find_in(directory: Path, config: dict[str, Any] | None) -> Tokenizer | None:
    """The tokenizer in `directory` itself, as find_tokenizer picks it, or None."""
    found: dict[Path, TokenizerKind] = {}
    probes: dict[Path, Probe | None] = {}  # each file is looked at once, whichever kinds its name fits
    for kind in KINDS:
        for pattern in kind.file_names:
            for path in sorted(directory.glob(pattern)):
                if path in found:
                    continue
                if path not in probes:
                    probes[path] = Probe.peek(path)
                probe = probes[path]
                if probe is not None and kind.sniff(probe):
                    found[path] = kind
    if not found:
        _check_unusable(directory, probes)
        return None
    if len(found) == 1:
        [(path, kind)] = found.items()
        return _load(kind, path, config)
    preferred = directory / PREFERRED_FILE
    if preferred in found:
        return _load(found[preferred], preferred, config)
    listed = clipped_list([f"{path.name} ({kind.name})" for path, kind in found.items()], "tokenizer files",
                          names=[path.name for path in found], where=None)
    raise TokenizerError(
        Message(f"expected one tokenizer in {directory}, found {len(found)}: {listed}; choose one with ",
                Option("tokenizer")), path=directory, option="tokenizer")


def _check_unusable(directory: Path, probes: dict[Path, Probe | None]) -> None:
    """Where no tokenizer was found: a tokenizer's name on what is no regular file (a FIFO, a link to a device, a
    link to nothing: a pruned cache's tokenizer.json) is said, not taken for no tokenizer. Looked at only then, so
    that a loop of links beside a tokenizer found costs nothing."""
    odd = [path for path, probe in probes.items() if probe is None and _file_type(path) not in (None, stat.S_IFDIR)]
    if odd:
        raise TokenizerError(f"expected a tokenizer file at {odd[0]}, found something that is not a regular file",
                             path=odd[0])
    broken = _links_to_nothing(directory, probes)
    if broken:
        raise TokenizerError(f"expected a tokenizer file at {broken[0]}, found a link that leads to no file",
                             path=broken[0])


def _links_to_nothing(directory: Path, probes: dict[Path, Probe | None]) -> list[Path]:
    """Links under a tokenizer's name that lead to no file (glob leaves out those its pattern names outright)."""
    named = {directory / name for kind in KINDS for name in kind.file_names if not any(c in name for c in "*?[")}
    return [path for path in sorted(named | set(probes)) if os.path.islink(path) and not os.path.exists(path)]


def _find_related(directory: Path, config: dict[str, Any]) -> Tokenizer | None:
    for kind in KINDS:
        if kind.related is None:
            continue
        for path in kind.related(directory, config):
            probe = Probe.peek(path)
            if probe is not None and kind.sniff(probe):
                return _load(kind, path, config)
    return None
