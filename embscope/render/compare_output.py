"""`compare CKPT --output` for people (a few lines) and for programs (one JSON document)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..analysis.compare_output import OutputComparison
from ..core.errors import Message, Option
from ..core.text import quote
from . import console, header
from .compare import chance_text, cka_notes
from .console import cosine_text as cosine
from .console import number_text as number
from .console import rows_text
from .flags import as_flags
from .jsonout import Document

if TYPE_CHECKING:
    from ..embeddings import Embeddings

Words = list[tuple[str, int | None, str | None]]  # (word, token row, why it has none)
Namer = Callable[[int], str]
TIED = "the output projection is the token table (a tied head): they are one table, so there is nothing to compare"


def notes(found: OutputComparison, words: Words) -> list[str]:
    return leading_notes(found) + trailing_notes(found, words)


def leading_notes(found: OutputComparison) -> list[str]:
    """The notes that decide how to read the rest (what the file says of its head, rows cut to the shorter
    table): printed before the figures, as compare A B prints its own."""
    listed = [found.head_note] if found.head_note else []
    if found.found is not None and found.found.pairing.note:
        listed.append(found.found.pairing.note)
    return listed


def trailing_notes(found: OutputComparison, words: Words) -> list[str]:
    """The notes about some of the rows: printed after the figures."""
    listed = []
    table = found.found
    if table is not None:
        undefined = table.summary.rows - table.summary.defined
        if undefined:
            listed.append(f"{undefined:,} rows are zero or hold NaN/Inf in one of the tables: their cosine is "
                          "undefined and left out of the means")
        listed += cka_notes(table)
    return listed + [Message(Option("words"), f" {word!r}: ", why) for word, _, why in words if why]


def document(found: OutputComparison, words: Words, names: tuple[Namer, Namer], said: Sequence[str] = ()) -> Document:
    """`names`: how the token table's rows are named, and how the output table's (its tokenizer may not be the
    token table's: another height); `said`: notes on those names."""
    name, name_b = names
    doc: dict[str, Any] = {"token": found.token_name, "output": found.output_name, "tied": found.tied}
    table = found.found
    if table is None:
        doc |= {"rows_compared": 0, "mean_row_cosine": None, "aligned_mean_row_cosine": None, "cka": None,
                "neighbour_overlap": None, "reason": TIED}
        return doc | {"notes": notes(found, words) + list(said)}
    overlap, alignment = table.neighbors, table.alignment
    doc |= {
        "rows_compared": table.summary.rows, "rows_with_cosine": table.summary.defined,
        "mean_row_cosine": table.unaligned_mean_cosine, "aligned_mean_row_cosine": table.summary.mean_cosine,
        "procrustes_residual": alignment.residual if alignment is not None else None,
        "aligned_chance": alignment.chance if alignment is not None else None,
        "cka": table.cka.value if table.cka is not None else None,
        "cka_rows": table.cka.rows if table.cka is not None else 0,
        "neighbour_overlap": overlap.mean if overlap is not None else None,
        "neighbour_k": overlap.k if overlap is not None else None,
        "neighbour_rows": len(overlap.jaccard) if overlap is not None else 0,
        "sample_seed": overlap.seed if overlap is not None else None,
    }
    if overlap is not None:
        queried = {int(row): i for i, row in enumerate(overlap.rows_a[:overlap.words])}
        doc["words"] = [{"word": word, "id": row, "jaccard": overlap.jaccard[queried[row]],
                         "token_neighbours": [name(int(j)) for j in overlap.neighbors_a[queried[row]] if j >= 0],
                         "output_neighbours": [name_b(int(j)) for j in overlap.neighbors_b[queried[row]] if j >= 0]}
                        for word, row, _ in words if row is not None and row in queried]
    return doc | {"notes": notes(found, words) + list(said)}


def show(emb: Embeddings, found: OutputComparison, words: Words, names: tuple[Namer, Namer], *, json: bool,
         said: Sequence[str] = ()) -> None:
    if json:
        header.emit(document(found, words, names, said), emb)
        return
    header.show(emb)
    out = console.out
    table = found.found
    if table is None:
        out.print(f"token table {console.safe(quote(found.token_name))}: {TIED}", soft_wrap=True)
        console.notes(notes(found, words) + list(said))
        return
    console.notes(leading_notes(found))
    out.print(f"token table {console.safe(quote(found.token_name))} against the output projection "
              f"{console.safe(quote(found.output_name or ''))}: {table.summary.rows:,} rows compared", soft_wrap=True)
    out.print(f"  row cosine as stored: mean {cosine(table.unaligned_mean_cosine)}")
    residual = number(table.alignment.residual) if table.alignment is not None else "-"
    out.print(f"  row cosine after orthogonal Procrustes (the output rows rotated onto the token rows; residual "
              f"||B R - A|| / ||A|| = {residual}): mean {cosine(table.summary.mean_cosine)}"
              f"{chance_text(table.alignment)}", soft_wrap=True)
    if table.cka is not None:
        out.print(f"  linear CKA (Kornblith et al. 2019): {number(table.cka.value)} over {rows_text(table.cka.rows)}")
    overlap = table.neighbors
    if overlap is not None:
        sampled = len(overlap.jaccard) - overlap.words
        over = rows_text(len(overlap.jaccard))
        out.print(as_flags(Message(f"  neighbour overlap (Jaccard of top-{overlap.k} sets within each table): mean "
                                   f"{number(overlap.mean)} over {over} ({overlap.words} from ",
                                   Option("words"), f", {sampled:,} drawn with seed {overlap.seed})")), soft_wrap=True)
        document_words = document(found, words, names).get("words", [])
        for entry in document_words:
            out.print(f"    {console.safe(quote(entry['word']))}: Jaccard {number(entry['jaccard'], 3)}; token: "
                      f"{console.safe(', '.join(map(quote, entry['token_neighbours'])))}; output: "
                      f"{console.safe(', '.join(map(quote, entry['output_neighbours'])))}", soft_wrap=True)
    console.notes(trailing_notes(found, words) + list(said))
