"""`embscope.open`: a checkpoint, its embedding tables, and its tokenizer, each read when first needed."""

from __future__ import annotations

import numbers
import os
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from . import cache
from .core.checkpoint import Checkpoint, EmbeddingTables, Table
from .core.errors import (
    CheckpointError,
    EmbscopeError,
    Message,
    Option,
    OptionError,
    PositionError,
    TableError,
    TokenError,
    message_of,
)
from .core.role import Role
from .core.text import quote
from .formats import OpenOptions, open_checkpoint
from .formats.sniffs import tf_index_of
from .hub import resolve
from .naming import misfit_note
from .roles import KEY_OPTIONS, find_tables, role_of
from .sample import default_checkpoint
from .tokenizers import find_tokenizer, id_maps_beside, load_tokenizer

if TYPE_CHECKING:
    from .core.tokenizer import Tokenizer
    from .hub import HubSnapshot

ENV_CHECKPOINT = "EMBSCOPE_CHECKPOINT"


class Embeddings:
    """The lookup tables of one checkpoint. Where the format allows (safetensors, numpy, PyTorch zip,
    ANDREA) nothing but headers is read until a table is used; pickles are read whole at open.
    A role discovery left empty raises only when a command asks for it (`table`)."""

    def __init__(self, checkpoint: Checkpoint, tables: EmbeddingTables, tokenizer_path: Path | None = None,
                 is_sample: bool = False, snapshot: HubSnapshot | None = None):
        self.checkpoint = checkpoint
        self.tables = tables
        self.is_sample = is_sample  # the bundled sample, because neither -c nor $EMBSCOPE_CHECKPOINT named one
        self.snapshot = snapshot  # the Hugging Face cache snapshot a model id named; None for a path
        self._tokenizer_path = tokenizer_path

    @property
    def tokenizer_given(self) -> Path | None:
        """The tokenizer file --tokenizer named, whether or not it loads: an input all the same."""
        return self._tokenizer_path

    @property
    def token(self) -> Table:
        return self.table(Role.token)

    @property
    def position(self) -> Table | None:
        return self.tables.position

    @property
    def output(self) -> Table | None:
        """The untied output projection; None when the head is tied, absent, unknown or ambiguous."""
        return self.tables.output

    def require_position(self) -> Table:
        return self.table(Role.position)

    def table(self, role: Role | str) -> Table:
        """The table for a role; a role with none raises the reason discovery recorded."""
        role = role_of(role)
        found = {Role.token: self.tables.token, Role.position: self.tables.position,
                 Role.output: self.tables.output}[role]
        if found is None:
            raise (PositionError if role is Role.position else TableError)(self.tables.missing[role], role=role,
                                                                            option=KEY_OPTIONS[role])
        return found

    @cached_property
    def tokenizer(self) -> Tokenizer | None:
        """The tokenizer given, else the one the checkpoint carries (GGUF metadata, a CTranslate2
        vocabulary), else one found beside the checkpoint; None when there is none."""
        if self.checkpoint.tokenizer is not None and self._tokenizer_path is None:
            return self.checkpoint.tokenizer()
        config = self.checkpoint.config  # how the checkpoint used the file (a fairseq task adds a symbol)
        return (load_tokenizer(self._tokenizer_path, config) if self._tokenizer_path is not None else
                find_tokenizer(self.checkpoint.directory, config))

    def tokenizer_for_names(self, table: Table | None = None) -> tuple[Tokenizer | None, str | None]:
        """The tokenizer for naming ids (`table`'s rows, where given), or None and why: a broken tokenizer file costs
        only the names, and so does one that is not the table's (naming.misfit_note: it would name rows it does not
        know). A position table's rows are positions: the rule is for token ids."""
        try:
            tokenizer = self.tokenizer
        except EmbscopeError as err:
            return None, Message("tokenizer not loaded: ", message_of(err))
        if tokenizer is None:
            return None, self._no_tokenizer(table)
        misfit = misfit_note(tokenizer, table.rows, str(table.role)) if table and table.role is not Role.position else ""
        return (None, misfit) if misfit else (tokenizer, None)

    def _no_tokenizer(self, table: Table | None) -> str:
        """Why no tokenizer names the rows: none found by name, and a JSON map of ids beside the checkpoint that fits
        `table` named, where there is one, for --tokenizer."""
        said = "no tokenizer found beside the checkpoint: tokens print as #id, words cannot be looked up"
        if table is None or table.role is Role.position or self._tokenizer_path is not None:
            return said
        maps = id_maps_beside(self.checkpoint.directory, table.rows)
        if not maps:
            return said
        names = ", ".join(quote(name) for name in maps)
        return Message(f"no tokenizer found beside the checkpoint by the names looked for, but {names} "
                       f"{'map' if len(maps) > 1 else 'maps'} text to ids that fit the {table.rows:,}-row table "
                       f"({table.role}): pass it with ", Option("tokenizer"), " to name the rows; tokens print "
                       "as #id, words cannot be looked up")

    def tokenizer_for_words(self, table: Table) -> Tokenizer | None:
        """The tokenizer that looks words up as rows of `table` (None: there is none); a broken tokenizer file raises,
        and so does one that is not the table's (tokenizer_for_names): its ids would be some other table's rows."""
        tokenizer, why = self.tokenizer_for_names(table)
        if tokenizer is None and self.tokenizer is not None:
            raise TokenError(Message("expected the table's own tokenizer to look words up: ", why or ""),
                             option="tokenizer")
        return tokenizer

    def remembered(self, kind: str, table: Table, compute: Callable[[], tuple[Sequence[float], int]],
                   table_checksum: int | None = None, **parameters: object) -> Sequence[float]:
        """Numbers computed from one of this checkpoint's tables, kept between runs in the user's cache (cache.py):
        the stored values when the files the table comes from are unchanged since they were stored (and, where
        given, the table's CRC-32 `table_checksum` agrees), else compute() -> (values, the table's CRC-32),
        stored for the next run. Analysis computes; the session that opened the files owns what is kept of them."""
        entry = cache.key(kind, [self.checkpoint.path, *table.tensor.sources], table=table.name, **parameters)
        stored = cache.load(entry, table_checksum) if entry is not None else None
        if stored:  # an entry holding no values is computed again
            return stored
        values, checksum = compute()
        if entry is not None:
            cache.store(entry, values, checksum)
        return values


def resolve_path(path: str | os.PathLike[str] | None) -> tuple[Path, bool, HubSnapshot | None]:
    """An explicit path (or, when nothing is there, a model id in the local Hugging Face cache), else
    $EMBSCOPE_CHECKPOINT, else the sample model shipped with embscope; whether it is that sample; and the
    cache snapshot an id named."""
    if path is None and os.environ.get(ENV_CHECKPOINT):
        path = os.environ[ENV_CHECKPOINT]
    if path is None:
        return default_checkpoint(), True, None
    if isinstance(path, str) and not path:  # Path("") would be the current directory
        raise CheckpointError("expected a checkpoint path or model id, found an empty string")
    local = Path(path)
    if not os.path.lexists(local):  # nothing at the path: a TensorFlow checkpoint's prefix, or a model id
        index = tf_index_of(local)
        if index is not None:
            return index, False, None
        snapshot = resolve(os.fspath(path))
        if snapshot is not None:
            return snapshot.folder, False, snapshot
    return local, False, None


def open(path: str | os.PathLike[str] | None = None, *, tokenizer: str | os.PathLike[str] | None = None,
         token_key: str | None = None, pos_key: str | None = None, output_key: str | None = None,
         trust_pickle: bool = False, vocab_size: int | None = None, d_model: int | None = None,
         context: int | None = None, first_position: int | None = None) -> Embeddings:
    """The checkpoint at `path` (see resolve_path) and its tables; `first_position` overrides the row that holds
    position 0 (the offset rule of position_offsets otherwise)."""
    check_arguments({"vocab_size": vocab_size, "d_model": d_model, "context": context},
                    {"first_position": first_position},
                    {"token_key": token_key, "pos_key": pos_key, "output_key": output_key, "tokenizer": tokenizer})
    options = OpenOptions(trust_pickle=trust_pickle, vocab_size=vocab_size, d_model=d_model, context=context)
    resolved, is_sample, snapshot = resolve_path(path)
    checkpoint = open_checkpoint(resolved, options)
    tables = find_tables(checkpoint, token_key=token_key, pos_key=pos_key, output_key=output_key)
    if first_position is not None and tables.position is not None:
        set_first_position(tables.position, first_position)
    return Embeddings(checkpoint, tables, Path(tokenizer) if tokenizer is not None else None, is_sample, snapshot)


def check_arguments(sizes: dict[str, object], rows: dict[str, object], names: dict[str, object]) -> None:
    """open's arguments as the command line checks its flags: vocab_size=1.5 made a table of 1.5 rows and
    first_position=1.5 a position p at row p + 1.5, a token_key of 5 raised TypeError, and '' named nothing."""
    def whole(value: object) -> bool:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)

    for name, value in sizes.items():
        if value is not None and not (whole(value) and value > 0):  # type: ignore[operator]  # whole: Integral
            raise OptionError(Message(Option(name, value), ": expected a positive integer"), option=name)
    for name, value in rows.items():
        if value is not None and not whole(value):
            raise OptionError(Message(Option(name, value), ": expected a row number (an integer)"), option=name)
    for name, value in names.items():
        if value is not None and (not isinstance(value, (str, os.PathLike)) or os.fspath(value) == ""):
            raise OptionError(Message(Option(name, value), ": expected a name or path, found "
                                      f"{'an empty string' if value == '' else type(value).__name__}"), option=name)


def set_first_position(table: Table, first_position: int) -> None:
    """Position p is row p + first_position, as the user said, in place of the family's rule."""
    if not 0 <= first_position < table.rows:
        raise PositionError(Message("expected ", Option("first_position"), f" from 0 to {table.rows - 1} (the "
                                    f"position table {table.name!r} has {table.rows} rows), found {first_position}"),
                            option="first_position")
    table.first_row = first_position
    kept = tuple(note for note in table.notes if "position p is row p+" not in note)
    table.notes = (*kept, Message(f"position p is row p+{first_position}: ",
                                  Option("first_position", first_position)))
