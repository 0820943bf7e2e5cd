"""One way to name a token id, everywhere: the tokenizer's string for it, or `#id` when there is none."""

from __future__ import annotations

from typing import Any


def token_string_or_none(tokenizer: Any, token_id: int) -> str | None:
    """The token's text; None when there is no tokenizer, the id lies past its vocabulary, or the tokenizer
    does not use the id (a gap below a special token). Never raises: a name is never worth a failure."""
    if tokenizer is None:
        return None
    try:
        return str(tokenizer.token_string(int(token_id)))
    except Exception:  # noqa: BLE001  any tokenizer's complaint about one id costs only that name
        return None


def token_name(tokenizer: Any, token_id: int) -> str:
    """The token's text, or `#id` when it has none (see token_string_or_none)."""
    found = token_string_or_none(tokenizer, token_id)
    return f"#{token_id}" if found is None else found
