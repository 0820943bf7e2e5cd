"""Format readers. Each module in this package registers a `Format`; `open_checkpoint`
asks each one, in priority order, whether it recognises the file."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import pickle
import pkgutil
import struct
import tokenize
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..checkpoint import Checkpoint
from ..errors import CheckpointError, EmbscopeError
from ..text import printable, quote

HEAD_BYTES = 64


@dataclass(frozen=True)
class OpenOptions:
    trust_pickle: bool = False  # let a pickle name globals outside the allow-list
    vocab_size: int | None = None  # shapes for formats that do not record them (ANDREA)
    d_model: int | None = None
    context: int | None = None


@dataclass(frozen=True)
class Format:
    name: str
    sniff: Callable[[Path, bytes, int], bool]  # (path, first bytes, file size) -> is it mine?
    open: Callable[[Path, OpenOptions], Checkpoint]
    priority: int = 50  # lower sniffs first; formats without a magic number go last


FORMATS: list[Format] = []


def register(fmt: Format) -> Format:
    FORMATS.append(fmt)
    FORMATS.sort(key=lambda f: f.priority)
    return fmt


def _load_readers() -> None:
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")


def sniff(path: Path) -> Format | None:
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError as err:
        raise CheckpointError(f"cannot read {quote(path)}: {err.strerror}") from None
    return next((fmt for fmt in FORMATS if fmt.sniff(path, head, size)), None)


# What parsing damaged bytes raises in the standard library and numpy. Readers turn the cases they
# expect into specific messages; whatever escapes them is caught here, at the reader boundary.
MALFORMED = (ValueError, struct.error, zipfile.BadZipFile, zlib.error, EOFError, OverflowError,
             NotImplementedError, RecursionError, OSError, tokenize.TokenError, pickle.UnpicklingError)


def damaged(where: str, err: BaseException) -> CheckpointError:
    if isinstance(err, MemoryError):
        return CheckpointError(f"{where}: needs more memory than is available")
    if isinstance(err, OSError):  # the file went away or cannot be read, rather than damaged bytes
        return CheckpointError(f"{where}: cannot be read ({printable(err.strerror or str(err))})")
    detail = printable(str(err))[:200] or "no detail"
    return CheckpointError(f"{where}: expected well-formed data, found damage ({type(err).__name__}: {detail})")


class GuardedRead(functools.partial):
    """A tensor's reader, with the same func and args, whose failures on damaged data become a CheckpointError."""

    where = ""

    def __call__(self, /, *args, **kwargs):
        try:
            return super().__call__(*args, **kwargs)
        except EmbscopeError:
            raise
        except (MemoryError, *MALFORMED) as err:
            raise damaged(self.where, err) from None


def guarded(read: Callable, where: str) -> GuardedRead:
    if isinstance(read, functools.partial):
        read = GuardedRead(read.func, *read.args, **read.keywords)
    else:
        read = GuardedRead(read)
    read.where = where
    return read


def open_checkpoint(path: str | Path, options: OpenOptions = OpenOptions()) -> Checkpoint:
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"expected a checkpoint file or directory, found nothing at {quote(path)}")
    try:
        if path.is_dir():
            path = find_in_directory(path)
        fmt = sniff(path)
        if fmt is None:
            known = ", ".join(f.name for f in FORMATS)
            raise CheckpointError(f"{quote(path)} is not a checkpoint embscope knows (tried {known})")
        checkpoint = fmt.open(path, options)
    except EmbscopeError:
        raise
    except (MemoryError, *MALFORMED) as err:
        raise damaged(quote(path), err) from None
    checkpoint.tensors = {name: dataclasses.replace(t, read=guarded(t.read, f"{quote(path)}: tensor {quote(name)}"))
                          for name, t in checkpoint.tensors.items()}
    return checkpoint


# Hugging Face saves the same weights under several names; the first present wins, as in transformers.
PREFERRED_IN_DIRECTORY = (
    "model.safetensors.index.json",
    "model.safetensors",
    "pytorch_model.bin",
)
NOT_WEIGHTS = frozenset({"config.json", "tokenizer.json", "tokenizer_config.json", "vocab.json",
                         "special_tokens_map.json", "generation_config.json", "merges.txt",
                         "meta.pkl"})  # nanoGPT's character vocabulary, pickled beside ckpt.pt


def sniff_readable(path: Path) -> Format | None:
    """Like sniff, but a file that cannot be read (a lock file, say) is simply not a checkpoint."""
    try:
        return sniff(path)
    except CheckpointError:
        return None


def find_in_directory(directory: Path) -> Path:
    """The one checkpoint a directory holds; several that disagree are an error listing them."""
    for name in PREFERRED_IN_DIRECTORY:
        if (directory / name).is_file() and sniff(directory / name):
            return directory / name
    found = [p for p in sorted(directory.iterdir())
             if p.is_file() and p.name not in NOT_WEIGHTS and sniff_readable(p)]
    if not found:
        raise CheckpointError(f"expected a checkpoint in directory {quote(directory)}, found no weights file")
    if len(found) > 1:
        names = ", ".join(quote(p.name) for p in found)
        raise CheckpointError(f"directory {quote(directory)} holds several checkpoints ({names}); pass one with -c")
    return found[0]


_load_readers()
