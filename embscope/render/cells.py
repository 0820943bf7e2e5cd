"""A text cell of a TSV file, as csv readers and pandas read it back and as spreadsheets are least able to run it.

A spreadsheet reads a cell that starts with =, +, - or @ (or a tab or a carriage return: OWASP's list) as a
formula, so a token such as `=cmd|' /C calc'!A0` could run something when the file is opened. Such a cell is
written in double quotes, its own double quotes doubled, which is the quoting CSV (RFC 4180) defines and
`csv.reader(f, delimiter="\\t")` and `pandas.read_csv(path, sep="\\t")` undo: they read back the token exactly.

The choice, and its limit: OWASP's other advice, an apostrophe before the cell, is not taken, because pandas
would read the apostrophe as part of the token and every program reading the file would get a different
token than the tokenizer's. Quoting marks the cell as one text field to an importer that keeps quoted fields
as text (LibreOffice's "Format quoted field as text"); Excel evaluates a formula even in a quoted field when
a file is opened by double-clicking it, so open such files in Excel through Data > From Text/CSV with the
column typed as Text."""

from __future__ import annotations

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
NEEDS_QUOTES = frozenset('\t\n\r"')  # a separator, a line break or the quote itself, anywhere in the cell


def quoted(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def tsv_cell(text: str) -> str:
    """`text` as one TSV field: quoted when it starts like a formula or holds a tab, a line break or a quote."""
    return quoted(text) if text.startswith(FORMULA_STARTS) or NEEDS_QUOTES.intersection(text) else text
