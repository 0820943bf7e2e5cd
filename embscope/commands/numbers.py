"""Every number option of every command reads its value through `digits`: click's own int and float types
let NaN, inf, '٣' (3) and 1e999 through, and a range check cannot see a NaN (every comparison is false).
Every command is built as commands.command.EmbscopeCommand, which gives each number parameter its strict twin,
so a new option is covered without a word.

typer 0.27 carries its own copy of click, so its number types are found by their documented `name`
("int", "float range", ...; "integer" in click itself) rather than imported; each gets a strict twin, made by
its own constructor with the same range."""

from __future__ import annotations

from typing import Any

from ..core.text import shortened
from ..digits import MAX_DIGITS, decimal_number, whole_number

WHOLE_TYPES = ("int", "int range", "integer", "integer range")
DECIMAL_TYPES = ("float", "float range")


class StrictNumber:
    """Mixed in before a click number type: checks the text before click's own conversion and range check."""

    whole = True

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, str):
            found = whole_number(value) if self.whole else decimal_number(value)
            if found is None:
                what = ("a whole number written in the digits 0-9, below 2**63" if self.whole else
                        f"a finite number written in the digits 0-9 (at most {MAX_DIGITS} before the point)")
                self.fail(f"expected {what}, found {shortened(value)!r}", param, ctx)  # type: ignore[attr-defined]
        return super().convert(value, param, ctx)  # type: ignore[misc]


_TWINS: dict[type, type] = {}


def strict(kind: Any) -> Any:
    """The strict twin of a click number type (same class otherwise, same range); any other type as it is."""
    name = getattr(kind, "name", None)
    if isinstance(kind, StrictNumber) or name not in WHOLE_TYPES + DECIMAL_TYPES:
        return kind
    cls = type(kind)
    if cls not in _TWINS:
        _TWINS[cls] = type(f"Strict{cls.__name__}", (StrictNumber, cls), {"whole": name in WHOLE_TYPES})
    if not name.endswith("range"):
        return _TWINS[cls]()
    return _TWINS[cls](min=kind.min, max=kind.max, min_open=kind.min_open, max_open=kind.max_open, clamp=kind.clamp)
