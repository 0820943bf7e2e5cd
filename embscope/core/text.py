"""Making untrusted strings from files safe to print: names and tokens can hold anything, and so can the
message of an exception a library raised over a damaged file."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def printable(text: str) -> str:
    """Control characters shown as escapes, so a name cannot move the cursor or clear the screen."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def quote(value: object) -> str:
    """A file name or tensor name as the user should read it in a message, escaped once, and cut short when
    it is very long (a 5,000-character path still makes a one-line message)."""
    return f"'{printable(shortened(str(value)))}'"


# characters of a token a table, a report or a plot shows; a longer one (a hostile file's 2,000,000-character
# token made tables and plot layouts take minutes and gigabytes) shows its start and says how long it is
TOKEN_SHOWN = 80
PLOT_TOKEN_SHOWN = 24  # a plot's labels share a column with the axes: a longer one squeezes them to nothing


def clipped(token: str, limit: int = TOKEN_SHOWN) -> tuple[str, str]:
    """(the part of `token` shown, what is said of the rest: "" or "… (2,000,000 characters)")."""
    if len(token) <= limit:
        return token, ""
    return token[:limit], f"\u2026 ({len(token):,} characters)"


def visible(token: str, limit: int = TOKEN_SHOWN) -> str:
    """A token string with its whitespace seen: spaces as the symbol for space (U+2420), newlines and tabs as
    escapes; cut to `limit` characters, with the cut said."""
    shown, rest = clipped(token, limit)
    return printable(shown.replace(" ", "\u2420")) + rest


# characters of any one string a console line, a report cell or a report paragraph shows: a name or metadata
# string from a file can be megabytes (round four's r06: a 6 MB tensor name took rich 31 s to wrap, and made a
# 48 MB report); a longer one shows its start and end and says how long it is. JSON keeps strings whole.
TEXT_SHOWN = 2_000


def bounded(text: str, limit: int = TEXT_SHOWN) -> str:
    """`text` when it is at most `limit` characters, else its start and its end with the length said between."""
    if len(text) <= limit:
        return text
    tail = min(60, limit // 4)
    return f"{text[:limit - tail]}\u2026({len(text):,} characters)\u2026{text[-tail:]}"


def shape_text(shape: Sequence[int]) -> str:
    """A tensor's shape as people write it: `1024 x 128`, or `scalar`."""
    return " x ".join(str(d) for d in shape) or "scalar"


def shortened(text: str, limit: int = 120) -> str:
    """A name cut to `limit` characters for a one-line message (a 5,000-character path is still one line)."""
    return text if len(text) <= limit else f"{text[:limit - 30]}...{text[-27:]} ({len(text):,} characters)"


def detail(err: BaseException) -> str:
    """An exception as one short line: its type and the first line of its message."""
    lines = printable(str(err)).splitlines() if str(err) else []
    first = lines[0][:200] if lines else "no detail"
    return f"{type(err).__name__}: {first}"


def shown(value: Any, limit: int = 60) -> str:
    """A value from a file, as repr, cut short: a message quotes it, never a whole hostile document."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
