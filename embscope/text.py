"""Making untrusted strings from files safe to print: names and tokens can hold anything, and so can the
message of an exception a library raised over a damaged file."""

from __future__ import annotations

from collections.abc import Sequence


def printable(text: str) -> str:
    """Control characters shown as escapes, so a name cannot move the cursor or clear the screen."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def quote(value: object) -> str:
    """A file name or tensor name as the user should read it in a message, escaped once, and cut short when
    it is very long (a 5,000-character path still makes a one-line message)."""
    return f"'{printable(shortened(str(value)))}'"


def visible(token: str) -> str:
    """A token string with its whitespace seen: spaces as the symbol for space (U+2420), newlines and tabs as escapes."""
    return printable(token.replace(" ", "\u2420"))


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
