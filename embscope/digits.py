"""Numbers as a person types them: ASCII digits only, a bounded length, finite. Python's int() and float()
take more ('²' passes str.isdigit, '٣' is 3, 'nan', 'inf', '1_000', and int() of 5,000 digits raises), so
every number read from the command line or a list of ids goes through here."""

from __future__ import annotations

import math
import re

MAX_DIGITS = 19  # 10**18 is past any row count, id or size, and still an int64 (below 2**63), as numpy needs
LARGEST = 2**63 - 1
WHOLE = re.compile(rf"[+-]?[0-9]{{1,{MAX_DIGITS}}}")
DECIMAL = re.compile(rf"[+-]?(?:[0-9]{{1,{MAX_DIGITS}}}(?:\.[0-9]{{0,{MAX_DIGITS}}})?|\.[0-9]{{1,{MAX_DIGITS}}})"
                     r"(?:[eE][+-]?[0-9]{1,3})?")


def whole_number(text: str) -> int | None:
    """The integer `text` spells in ASCII digits (an optional sign, at most MAX_DIGITS digits), when it lies
    within +-LARGEST; else None."""
    value = int(text) if WHOLE.fullmatch(text) else None
    return value if value is not None and abs(value) <= LARGEST else None


def decimal_number(text: str) -> float | None:
    """The finite number `text` spells in ASCII digits (a point and an exponent allowed), else None."""
    if not DECIMAL.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None
