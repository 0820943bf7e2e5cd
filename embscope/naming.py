"""One way to name a row, everywhere: a token id by the tokenizer's string for it, or `#id` when there is none;
a position-table row by its position."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .core.tokenizer import Tokenizer


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


def tokenizer_failure(emb: Any) -> str | None:
    """Why a tokenizer that exists did not load, once an answer named its ids without it (None: it loaded, or there
    is none, which the #ids say themselves): that costs only the names, and is said, not dropped. emb.tokenizer is
    cached only when it loaded or there is none."""
    tokenizer, why = emb.tokenizer_for_names()
    return why if tokenizer is None and "tokenizer" not in vars(emb) else None
