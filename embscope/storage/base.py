"""What every reader shares: the options it is opened with, and how damaged bytes become one line for the user
(text.detail: an exception as one line)."""

from __future__ import annotations

import importlib
import lzma
import pickle
import struct
import tokenize
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import CheckpointError, MissingPackageError
from ..core.text import detail, printable, quote

SHAPES_GIVEN = "ANDREA flat float32"  # the format (formats.kinds) whose shapes OpenOptions' sizes may give


@dataclass(frozen=True)
class OpenOptions:
    """What the user said about opening a file, beyond its path."""

    trust_pickle: bool = False  # let a pickle name globals outside the allow-list
    vocab_size: int | None = None  # shapes for formats that do not record them (ANDREA)
    d_model: int | None = None
    context: int | None = None


# What parsing damaged bytes raises in the standard library and numpy: a broken zip, deflate, LZMA or bzip2
# stream, a bad .npy header, a short read, a number too big for its field. Readers turn the cases they
# expect into specific messages; whatever escapes them is caught at the reader boundary with this tuple.
DAMAGE = (ValueError, struct.error, zipfile.BadZipFile, zlib.error, lzma.LZMAError, EOFError, OverflowError,
          NotImplementedError, RecursionError, OSError, SyntaxError, tokenize.TokenError, pickle.UnpicklingError,
          MemoryError)


def require_package(package: str, path: Path, kind: str, extra: str) -> Any:
    """The optional package that reads this kind of file, or one line naming the extra that installs it."""
    try:
        return importlib.import_module(package)
    except ImportError:
        raise MissingPackageError(f"{quote(path)} is {kind}; reading it", package, extra, path=path) from None


def damaged(where: str, err: BaseException, path: Path | None = None) -> CheckpointError:
    if isinstance(err, MemoryError):
        return CheckpointError(f"{where}: needs more memory than is available", path=path)
    if isinstance(err, OSError) and err.strerror:  # the file went away or cannot be read, not damaged bytes
        return CheckpointError(f"{where}: cannot be read ({printable(err.strerror)})", path=path)
    return CheckpointError(f"{where}: expected well-formed data, found damage ({detail(err)})", path=path)
