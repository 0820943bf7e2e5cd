"""Rich output for people. Strings from files are untrusted: `safe` escapes them before printing."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..core.errors import Message, Option
from ..core.text import bounded, clipped, printable
from . import jsonout
from .flags import as_flags

# emoji off: a tensor named ":thumbs_up:" must print as its name, not as a picture
out = Console(highlight=False, soft_wrap=False, emoji=False)
err = Console(stderr=True, highlight=False, emoji=False)


def safe(text: object) -> str:
    """No control characters and no rich markup survive from a name or token string, and a very long one is
    cut (text.bounded): rich's wrapping of megabytes takes minutes. A message names options as the command
    line's flags."""
    return escape(printable(bounded(as_flags(text) if isinstance(text, Message) else str(text))))


def count_text(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def rows_text(n: int) -> str:
    """'1 row', '2,048 rows'."""
    return f"{n:,} row{'s' * (n != 1)}"


def percent(share: float | None) -> str:
    return "-" if share is None else f"{share * 100:.2f}%"


def cosine_text(value: float | None) -> str:
    """A cosine, signed, to 4 decimals; "null" where it is undefined (None or NaN)."""
    cleaned = jsonout.clean(value)
    return "null" if cleaned is None else f"{cleaned:+.4f}"


def number_text(value: float | None, digits: int = 4) -> str:
    """A measured number to `digits` significant digits; "null" where it is undefined (None, NaN or Inf)."""
    cleaned = jsonout.clean(value)
    return "null" if cleaned is None else f"{cleaned:.{digits}g}"


def table(*columns: str, title: str | None = None, **kwargs: Any) -> Table:
    grid = Table(title=title, title_justify="left", **kwargs)
    for column in columns:
        grid.add_column(column, overflow="fold")  # long tensor names wrap rather than lose their end
    return grid


def notes(lines: Iterable[str]) -> None:
    """Each note on its own line, naming options as the command line's flags."""
    for line in lines:
        out.print(f"note: {safe(line)}")


def more(left_out: int, what: str = "", json_lists: int | None = None) -> None:
    """The line under a list cut short: how many more there are, and that --json lists all of them (or the first
    json_lists)."""
    if left_out > 0:
        listed = "all" if json_lists is None else f"the first {json_lists:,}"
        out.print(as_flags(Message(f"... and {left_out:,} more{' ' + what if what else ''} (", Option("json", True),
                                   f" lists {listed})")))


def token_text(token_id: int, token: str) -> str:
    """A token string quoted so spaces show (untrusted, so escaped; a long one cut, with the cut said); `#id` as
    it is when there is no string."""
    if token == f"#{token_id}":
        return token
    shown, rest = clipped(token)
    return f"'{safe(shown)}'{rest}"


def tokens_text(ids: Sequence[int], tokens: Sequence[str]) -> str:
    """Each id with its token: `603 'father'`, or `#5000` where the id has no string."""
    return " ".join(token_text(i, t) if t == f"#{i}" else f"{i} {token_text(i, t)}" for i, t in zip(ids, tokens))
