"""One way to name a row, everywhere: a token id by the tokenizer's string for it, or `#id` when there is none;
a position-table row by its position. And the one rule that says whether a tokenizer may name a table's rows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .core.errors import Message, Option

if TYPE_CHECKING:
    from .core.tokenizer import Tokenizer

MISFIT_SHARE = 0.25  # a tokenizer naming fewer of a table's rows than this share is not that table's


def misfit_note(tokenizer: Tokenizer | None, rows: int, role: str) -> str:
    """Why the tokenizer is not this table's, or "": one that names under a quarter of its rows (padding rounds a
    vocabulary up by a few percent at most: GPT-2's 50,257 to 50,304, Phi-2's 50,295 to 51,200) would name rows it
    does not know, and mark the rest 'padding' (attacut-sc's 139 characters beside its 6,227 syllables)."""
    if tokenizer is None or MISFIT_SHARE * rows <= int(tokenizer.vocab_size):
        return ""
    return Message(f"the tokenizer names {int(tokenizer.vocab_size):,} ids, under a quarter of the {role} table's "
                   f"{rows:,} rows: it is not that table's, so no row there is named, looked up by word, verified or "
                   "taken for padding (name the table's own with ", Option("tokenizer"), ")")


def token_string_or_none(tokenizer: Tokenizer | None, token_id: int) -> str | None:
    """The token's text; None when there is no tokenizer, the id lies past its vocabulary, or the tokenizer
    does not use the id (a gap below a special token). Never raises: a name is never worth a failure."""
    if tokenizer is None:
        return None
    try:
        return str(tokenizer.token_string(int(token_id)))
    except Exception:  # noqa: BLE001  any tokenizer's complaint about one id costs only that name
        return None


def token_name(tokenizer: Tokenizer | None, token_id: int) -> str:
    """The token's text, or `#id` when it has none (see token_string_or_none)."""
    found = token_string_or_none(tokenizer, token_id)
    return f"#{token_id}" if found is None else found


def position_name(row: int, first_row: int = 0) -> str:
    """A position-table row: `position p` for row p + first_row, or `reserved row r` before position 0 (OPT and
    RoBERTa keep two rows there)."""
    return f"position {row - first_row}" if row >= first_row else f"reserved row {row}"


def row_name(tokenizer: Tokenizer | None, role: str, row: int, first_row: int = 0) -> str:
    """A row of the table playing `role`: a position (position_name), or a token (token_name)."""
    return position_name(row, first_row) if role == "position" else token_name(tokenizer, row)


def tokenizer_failure(emb: Any, table: Any) -> str | None:
    """Why the tokenizer did not name `table`'s ids, once an answer named them without it (None: it did, or there is
    none, which the #ids say themselves): one that did not load, or is not the table's, costs only the names, and is
    said, not dropped. emb.tokenizer is cached only when it loaded or there is none."""
    tokenizer, why = emb.tokenizer_for_names(table)
    return why if tokenizer is None and not ("tokenizer" in vars(emb) and emb.tokenizer is None) else None
