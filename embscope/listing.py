"""Lists inside one-line messages: an error that names its candidates (tensors, tables, files) stays one short line
however many there are. A list that fits is given whole; a longer one becomes its count, the first few names and
where the rest can be seen: `40 2-D float tensors, e.g. 'a', 'b', 'c' (and 37 more; `embscope info` lists
them)`."""

from __future__ import annotations

from collections.abc import Sequence

from .core.text import printable

LIST_BUDGET = 100  # characters a list may take in a message whose own words take about 200 (errors stay ~300)
EXAMPLES = 3  # names an "e.g." shows at most
EXAMPLE_CHARS = 40  # characters the names after "e.g." take at most together (a long name is cut)
INFO_LISTS_THEM = "`embscope info` lists them"


def cut(name: str, limit: int) -> str:
    return name if len(name) <= limit else name[:limit - 3] + "..."


def clipped_list(entries: Sequence[str], noun: str, *, names: Sequence[str] | None = None,
                 where: str | None = INFO_LISTS_THEM, budget: int = LIST_BUDGET) -> str:
    """`entries` joined by commas when that fits `budget` characters; else `<count> <noun>, e.g. <names> (and N
    more; <where>)`. `names`: shorter forms of the entries for the "e.g." (the names without their shapes);
    `noun`: the plural, e.g. "2-D float tensors". The entries are already quoted as the message shows them."""
    joined = ", ".join(entries)
    if len(joined) <= budget or len(entries) <= 1:
        return joined
    short = list(names) if names is not None else list(entries)
    shown: list[str] = []
    for name in short[:EXAMPLES]:
        room = EXAMPLE_CHARS - sum(len(s) + 2 for s in shown)
        if shown and len(name) > room:
            break
        shown.append(cut(printable(name), room))
    rest = len(entries) - len(shown)
    return f"{len(entries):,} {noun}, e.g. {', '.join(shown)} (and {rest:,} more" + (f"; {where})" if where else ")")
