"""The export writers: a folder the TensorFlow Embedding Projector loads as is, and the word2vec text format.

Token strings can hold anything, and both formats are plain text cut at separators, so labels are escaped
with one reversible scheme (undo it from left to right):

    \\\\ a backslash     \\t tab     \\n newline     \\r carriage return     \\s space (word2vec keys only)
    \\xNN, \\uNNNN, \\UNNNNNNNN   any other character Python does not count as printable (control
                                characters, lone surrogates from bytes that were not UTF-8, U+2028 ...)
    \\#ID                       appended to a word2vec key that would be empty or repeat an earlier key

Printable characters, non-ASCII included, are written as they are (UTF-8). A metadata cell that then starts with
=, +, - or @ (a spreadsheet would read it as a formula: render.cells) or with a double quote is put in double
quotes, its quotes doubled: pandas reads the quotes away, the Projector shows them. To undo, first unquote a cell
that starts with a double quote, then the escapes.

Why each rule, from the readers: the Projector splits metadata.tsv on newlines and tabs with no quoting
(vz_projector parseMetadata), treats the first line as a header when the file has more than one column,
reads an empty cell as missing, and reads any cell JavaScript's Number() accepts as a number, so a cell
of spaces only (which Number() reads as 0) has them written \\s. gensim's load_word2vec_format reads a
line as bytes up to b"\\n", strips trailing whitespace, and splits on single spaces: a key may hold no
space or newline, and a repeated key is dropped (so would its row be), hence \\#ID. Floats are written
with 9 significant digits, which give every float32 back exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from pathlib import Path

import numpy as np

from ..analysis.export import ExportRows
from ..core.role import Role
from ..registry import Entry, entries
from .cells import FORMULA_STARTS, quoted
from .files import OUT, Named, folder_built_whole, written_whole
from .progress import bar

FLOAT_FORMAT = "%.9g"  # 9 significant digits round-trip a float32
BLOCK_ROWS = 4096  # rows formatted at a time
VECTORS_FILE = "vectors.tsv"
METADATA_FILE = "metadata.tsv"
CONFIG_FILE = "projector_config.pbtxt"
ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


def escaped(text: str, space: bool = False) -> str:
    """`text` with backslash, tab, newline, carriage return and unprintable characters escaped (see the module
    docstring); `space`: spaces too, as \\s."""
    out = []
    for ch in text:
        if ch in ESCAPES:
            out.append(ESCAPES[ch])
        elif ch == " " and space:
            out.append("\\s")
        elif not ch.isprintable():
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(ch)
    return "".join(out)


def projector_cell(text: str) -> str:
    """A metadata.tsv cell: escaped; a cell of spaces only is written as \\s, which Number() does not read as 0;
    one that starts like a spreadsheet formula is quoted (render.cells: pandas reads it back, the Projector shows
    the quotes)."""
    cell = escaped(text)
    if cell.startswith((*FORMULA_STARTS, '"')):  # a leading quote too, or a quoted cell could not be told from it
        return quoted(cell)
    return cell.replace(" ", "\\s") if cell and not cell.strip(" ") else cell


def word2vec_keys(labels: Iterable[str], ids: Iterable[int]) -> list[str]:
    """One unique, non-empty key per row, without spaces or newlines: every row loads, none is dropped."""
    keys: list[str] = []
    taken: set[str] = set()
    for label, row in zip(labels, ids):
        key = escaped(label, space=True)
        if not key or key in taken:
            key = f"{key}\\#{row}"  # "\#" cannot come from escaping (a backslash is always doubled)
        taken.add(key)
        keys.append(key)
    return keys


def float_lines(array: np.ndarray, ids: np.ndarray, separator: str, prefixes: list[str] | None = None) -> Iterator[str]:
    """One text line per exported row, read BLOCK_ROWS rows at a time (a memory map is never read whole),
    with a progress bar on stderr when it is a terminal."""
    line = separator.join([FLOAT_FORMAT] * array.shape[1])
    with bar("rows") as advance:
        for start in range(0, len(ids), BLOCK_ROWS):
            block = np.asarray(array[ids[start:start + BLOCK_ROWS]], dtype=np.float32).astype(np.float64)
            for n, row in enumerate(block.tolist()):
                head = prefixes[start + n] + separator if prefixes is not None else ""
                yield head + line % tuple(row) + "\n"
            advance(start + len(block), len(ids))


def write_lines(path: Path, what: Named, lines: Iterable[str], inputs: Iterable[Path]) -> None:
    with written_whole(path, what, binary=False, inputs=inputs) as f:
        f.writelines(lines)


def metadata_lines(rows: ExportRows) -> Iterator[str]:
    """The header, then one row of cells per exported row."""
    if rows.role is Role.position:
        yield "position\trow\tnorm\tanomaly\n"
        assert rows.positions is not None
        for position, row, norm, flagged in zip(rows.positions.tolist(), rows.ids.tolist(), rows.norms.tolist(),
                                                rows.anomalous.tolist()):
            yield f"{position if position >= 0 else ''}\t{row}\t{norm!r}\t{'yes' if flagged else 'no'}\n"
        return
    yield "token\tid\tnorm\tanomaly\tundertrained\n"
    under = rows.undertrained.tolist() if rows.undertrained is not None else [None] * len(rows.ids)
    for label, row, norm, flagged, low in zip(rows.labels, rows.ids.tolist(), rows.norms.tolist(),
                                              rows.anomalous.tolist(), under):
        mark = "" if low is None else "yes" if low else "no"
        yield f"{projector_cell(label)}\t{row}\t{norm!r}\t{'yes' if flagged else 'no'}\t{mark}\n"


def pbtxt_string(text: str) -> str:
    """A protobuf text-format string literal: UTF-8 bytes, with quotes, backslashes and anything outside
    printable ASCII as octal escapes (what protobuf's own CEscape writes)."""
    out = []
    for byte in text.encode("utf-8", errors="backslashreplace"):
        ch = chr(byte)
        out.append("\\" + ch if ch in '"\\' else ch if 0x20 <= byte < 0x7F else f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def projector_config(rows: ExportRows, title: str | None = None) -> str:
    """projector_config.pbtxt: one embedding whose tensor and metadata are the two files beside it
    (TensorBoard resolves relative paths against the config's folder); `title` names the checkpoint in the
    tensor's name, which is what the Projector's list of tensors shows."""
    name = f"{rows.role} table {rows.name}"
    return ("embeddings {\n"
            f"  tensor_name: {pbtxt_string(name if title is None else f'{title}: {name}')}\n"
            f"  tensor_shape: {len(rows.ids)}\n"
            f"  tensor_shape: {rows.dim}\n"
            f"  tensor_path: {pbtxt_string(VECTORS_FILE)}\n"
            f"  metadata_path: {pbtxt_string(METADATA_FILE)}\n"
            "}\n")


def write_projector(out: Path, array: np.ndarray, rows: ExportRows, inputs: Iterable[Path],
                    title: str | None = None) -> list[Path]:
    """vectors.tsv, metadata.tsv and projector_config.pbtxt in the folder `out`; returns their paths. `title`:
    the checkpoint, as the config's tensor name says it."""
    inputs = list(inputs)
    names: dict[str, Named] = {VECTORS_FILE: "the vectors file", METADATA_FILE: "the metadata file",
                               CONFIG_FILE: "the Projector config"}
    # all or nothing: built in a temporary folder beside `out`, moved into place once the three are written
    with folder_built_whole(out, OUT, names, inputs) as building:
        write_lines(building / VECTORS_FILE, names[VECTORS_FILE], float_lines(array, rows.ids, "\t"), inputs)
        write_lines(building / METADATA_FILE, names[METADATA_FILE], metadata_lines(rows), inputs)
        write_lines(building / CONFIG_FILE, names[CONFIG_FILE], [projector_config(rows, title)], inputs)
    return [out / name for name in names]


def write_word2vec(out: Path, array: np.ndarray, rows: ExportRows, inputs: Iterable[Path],
                   title: str | None = None) -> list[Path]:
    """The word2vec text format: a `V d` header, then each key and its floats, space-separated (the format has
    no place for `title`)."""
    keys = word2vec_keys(rows.labels, rows.ids.tolist())
    header = [f"{len(rows.ids)} {rows.dim}\n"]
    write_lines(out, OUT, chain(header, float_lines(array, rows.ids, " ", keys)), inputs)
    return [out]


# (out, table, rows, inputs, checkpoint title) -> files
Writer = Callable[[Path, np.ndarray, ExportRows, Iterable[Path], str | None], list[Path]]
WRITERS: tuple[Entry[Writer], ...] = entries(
    Entry("projector", write_projector, "a folder the TensorFlow Embedding Projector loads as is"),
    Entry("word2vec", write_word2vec, "one text file gensim's load_word2vec_format reads"))
