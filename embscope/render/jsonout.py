"""One JSON document on stdout: full float precision, and null where a number is undefined."""

from __future__ import annotations

import json
import math
import numbers
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .flags import document_as_flags

Document = dict[str, Any]  # a JSON object as a command builds it, before `clean` makes its values plain


def clean(value: Any) -> Any:
    """Plain JSON values: numpy scalars unwrapped, NaN and Inf turned into null."""
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    np = sys.modules.get("numpy")  # no numpy value can exist before numpy is imported: never imported for this
    if np is not None and isinstance(value, np.ndarray):
        return [clean(v) for v in value.tolist()]
    if isinstance(value, bool) or (np is not None and isinstance(value, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral):  # numpy's integers and floats register with numbers
        return int(value)
    if isinstance(value, numbers.Real):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, Path):
        return str(value)
    return value


# characters outside printable ASCII; the printable ones stay as they are (readable non-English tokens)
NON_ASCII = re.compile(r"[^\x20-\x7e]")


def json_escape(ch: str) -> str:
    code = ord(ch)
    if code > 0xFFFF:  # JSON spells characters past the BMP as a surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 | (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def dumps(document: Any) -> str:
    """JSON in which every string from a file is exact, and no character can act on a terminal:
    control, format and lone surrogate characters (a name that was not valid UTF-8) are \\u escapes."""
    try:  # plain values (a pair of a pairs file, a million times over) skip the walk through `clean`
        text = json.dumps(document, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError):  # numpy values, NaN, Inf, paths
        text = json.dumps(clean(document), allow_nan=False, ensure_ascii=False)
    if not (text.isascii() and text.isprintable()):  # DEL is ASCII but not printable
        text = NON_ASCII.sub(lambda m: m.group() if m.group().isprintable() else json_escape(m.group()), text)
    return text


def for_stdout(value: Any) -> str:
    text = dumps(value)
    try:
        text.encode(sys.stdout.encoding or "utf-8")
    except (UnicodeEncodeError, LookupError):  # a terminal that cannot show the characters gets \\u escapes
        text = json.dumps(clean(value), allow_nan=False)
    return text


def emit(document: Document, stream: tuple[str, Iterable[Any]] | None = None) -> None:
    """Print one JSON document. `stream` (key, items) is a last key whose list is written an item at a time,
    so that a list of millions (the pairs of a pairs file) never exists whole. The messages in it name options
    as the command line's flags; a streamed item holds numbers and words only, and is written as it is."""
    document = document_as_flags(document)
    if stream is None:
        sys.stdout.write(for_stdout(document) + "\n")
        return
    key, items = stream
    head = for_stdout({**document, key: []})  # ends in `"key": []}`
    sys.stdout.write(head[:-2])
    for n, item in enumerate(items):
        sys.stdout.write(f"{', ' if n else ''}{for_stdout(item)}")
    sys.stdout.write("]}\n")
