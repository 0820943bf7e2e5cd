"""Output files are written whole: to a temporary name beside the target, then renamed over it,
so nobody ever reads half a file and a failed run leaves nothing behind."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from ..errors import EmbscopeError
from ..text import quote


@contextmanager
def written_whole(path: Path, what: str, binary: bool = True) -> Iterator[IO]:
    """A file object for `path`; `what` names the output in errors ("the plot file", "--out")."""
    path = Path(path)
    directory = path.parent
    if not directory.is_dir():
        raise EmbscopeError(f"expected an existing directory for {what}, found none: {quote(directory)}")
    temporary = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        with open(temporary, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8", "newline": "\n"})) as f:
            yield f
        os.replace(temporary, path)
    except OSError as err:
        raise EmbscopeError(f"expected to write {what} {quote(path)}, found {err.strerror or err}") from None
    finally:
        temporary.unlink(missing_ok=True)
