"""Output files are written whole: to a temporary file made beside the target (O_EXCL | O_NOFOLLOW, so a
planted link is never followed), then renamed over it, so nobody reads half a file and a failed run leaves
nothing behind. No output ever replaces a file embscope read: the checkpoint, its shards, config and tokenizer."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ..core import files
from ..core.errors import Message, Option, OutputError, message_of, replaced
from ..core.text import quote, shortened

if TYPE_CHECKING:
    from ..embeddings import Embeddings

# files beside a checkpoint that are read with it: config, tokenizer files, shards, a nanoGPT meta.pkl. No output
# format (.tsv, .jsonl, .npz, .png, .svg, .pdf) is among them, so a second run may replace its own output.
INPUT_SUFFIXES = frozenset({".json", ".txt", ".model", ".vocab", ".tiktoken", ".safetensors", ".bin", ".pkl"})
OUT = Option("out")  # the output a writer is given, as `export`, `report` and `neighbors --all` name it
Named = str | Option  # how an error names the output: "the plot file", or the option that gave it


def option_of(what: Named) -> Option | None:
    return what if isinstance(what, Option) else None


def input_files(emb: Embeddings, *given: Path | None) -> list[Path]:
    """The files this answer was read from (or may have been): never to be written over.
    `given`: input files named on the command line (a pairs or queries file)."""
    checkpoint = Path(emb.checkpoint.path)
    folders = [emb.checkpoint.directory]
    tokenizer, _ = emb.tokenizer_for_names()
    if tokenizer is not None:
        folders.append(Path(tokenizer.path).parent)
    # a tokenizer the user named is an input even when it did not load: named, it may have been opened
    found = [checkpoint, *(Path(p) for p in (*given, emb.tokenizer_given) if p is not None)]
    for folder in dict.fromkeys(folders):
        try:
            found += [entry for entry in Path(folder).iterdir() if entry.suffix.lower() in INPUT_SUFFIXES]
        except OSError:
            pass  # a folder that cannot be listed held nothing that was read
    if tokenizer is not None:
        found.append(Path(tokenizer.path))
    return found


def refuse_inputs(path: Path, what: Named, inputs: Iterable[Path]) -> None:
    """An output naming a file that was read (by any name: a link, a relative path) is refused: every file this
    run opened (embscope.core.files records them), and `inputs`, those it may have read."""
    try:
        target = os.stat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(target.st_mode):
        raise OutputError(Message("expected ", what, " to name a regular file or a new one, found something else at "
                                  f"{quote(path)}"), path=path, option=option_of(what))
    files.refuse_input(path, what)
    for source in inputs:
        try:
            read = os.stat(source)
        except OSError:
            continue
        if (read.st_dev, read.st_ino) == (target.st_dev, target.st_ino):
            raise OutputError(Message("expected ", what, f" to name a new file, found {quote(shortened(str(path)))}, "
                                      "a file this answer was read from: it is never written over"), path=path,
                              option=option_of(what))


def check_directory(path: Path, what: Named) -> None:
    """The folder an output goes to exists: checked before any work, and again when writing."""
    if not Path(path).parent.is_dir():
        raise OutputError(Message("expected an existing directory for ", what,
                                  f", found none: {quote(Path(path).parent)}"), path=path, option=option_of(what))


@contextmanager
def folder_built_whole(folder: Path, what: Named, names: dict[str, Named],
                       inputs: Iterable[Path] = ()) -> Iterator[Path]:
    """A folder of several outputs, all or nothing: the files (`names`, each with how errors name it) are written
    into a temporary folder made
    beside `folder`, which yields it, and moved into place only when every one is complete; a failure part way
    (a full disk, an error, a signal) removes the temporary folder and leaves `folder` as it was. A new `folder`
    is the temporary one renamed; an existing one gets each file renamed into it."""
    folder = Path(folder)
    inputs = list(inputs)
    for name, named in names.items():  # before any work: a name that would replace a file this run read
        refuse_inputs(folder / name, named, inputs)
    if folder.exists() and not folder.is_dir():
        raise OutputError(Message("expected ", what, f" to name a folder, found a file: {quote(folder)}"), path=folder,
                          option=option_of(what))
    check_directory(folder, what)
    building: Path | None = None
    try:
        try:
            building = temporary_name(folder.parent)  # named before it is made: a signal from here on leaves nothing
            try:
                os.mkdir(building, 0o700)
            except FileExistsError:
                building = None  # not ours: never removed
                raise
        except OSError as err:
            raise OutputError(f"expected to make the folder {quote(folder)}, found {err.strerror or err}",
                              path=folder, option=option_of(what)) from None
        try:
            yield building
        except OutputError as err:  # named by its place in the folder asked for, not the temporary one
            raise err.reworded(replaced(message_of(err), str(building), str(folder))) from None
        move_into(building, folder, what, names)
    finally:
        if building is not None:
            shutil.rmtree(building, ignore_errors=True)


def temporary_name(parent: Path) -> Path:
    """A fresh name for an output being built beside its target (48 random bits, as mkstemp's are)."""
    return parent / f".embscope-{os.urandom(6).hex()}.partial"  # secrets.token_hex(6), without importing hmac


def move_into(building: Path, folder: Path, what: Named, names: dict[str, Named]) -> None:
    """The finished files into place: the whole folder renamed when `folder` is new, else file by file."""
    try:
        if not folder.exists():
            os.chmod(building, 0o777 & ~umask())  # a folder made by mkdir(), not mkdtemp's 0700
            os.rename(building, folder)
            return
        for name, named in names.items():
            if (building / name).exists():
                files.refuse_input(folder / name, named)
                os.replace(building / name, folder / name)
    except OSError as err:
        raise OutputError(f"expected to move the finished files into {quote(folder)}, found {err.strerror or err}",
                          path=folder, option=option_of(what)) from None


def umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def written_whole(path: Path, what: Named, binary: bool = True, inputs: Iterable[Path] = ()) -> Iterator[IO[Any]]:
    """A file object for `path`; `what` names the output in errors ("the plot file", OUT);
    `inputs` are the files that were read (input_files), which the output may not replace."""
    path = Path(path)
    shown = quote(shortened(str(path)))
    temporary: Path | None = None
    try:
        try:
            check_directory(path, what)
            refuse_inputs(path, what, inputs)
            temporary = temporary_name(path.parent)  # named before it is made: a signal from here on leaves nothing
            try:
                handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            except FileExistsError:
                temporary = None  # not ours: never removed
                raise
            os.fchmod(handle, 0o666 & ~umask())  # the permissions of a file made by open(), not 0600
            # text: written as given ("\n" stays "\n"); a lone surrogate (a name that was not UTF-8) as an escape
            with (open(handle, "wb") if binary else
                  open(handle, "w", encoding="utf-8", newline="", errors="backslashreplace")) as f:
                yield f
            files.refuse_input(path, what)  # again: the answer may have read more files while it was written
            os.replace(temporary, path)
        except OSError as err:
            raise OutputError(Message("expected to write ", what, f" {shown}, found {err.strerror or err}"), path=path,
                              option=option_of(what)) from None
    finally:
        if temporary is not None:
            try:
                os.unlink(temporary)
            except OSError:
                pass  # renamed into place: nothing to remove
