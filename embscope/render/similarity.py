"""`similarity` results for people (a table of pairs, a matrix for three words or more) and for programs (JSON)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..analysis.similarity import Pair, Query, SimilarityResult, merge_note
from ..core.errors import Message, Option
from ..core.text import quote
from ..lookup import PLAIN, WORD_START, FormChoice
from . import console, header
from .flags import as_flags
from .jsonout import Document

if TYPE_CHECKING:
    from rich.table import Table

    from ..embeddings import Embeddings


def query_doc(query: Query) -> Document:
    return {"text": query.text, "ids": list(query.ids), "tokens": list(query.tokens), "form": query.form,
            "merged": query.merged, "note": query.note, "reason": query.reason}


def pair_doc(pair: Pair) -> Document:
    choice = pair.choice
    return {"a": pair.a.text, "b": pair.b.text, "a_ids": list(pair.a.ids), "b_ids": list(pair.b.ids),
            "a_tokens": list(pair.a.tokens), "b_tokens": list(pair.b.tokens), "cosine": pair.cosine,
            "reason": pair.reason, "a_note": pair.a.note, "b_note": pair.b.note,
            "a_merged": pair.a.merged, "b_merged": pair.b.merged, "percentile": pair.percentile,
            "form": choice.name if choice else None, "form_reason": choice.reason if choice else None}


def form_notes(pairs: Sequence[Pair]) -> list[str]:
    """The form the words were looked up in, once for each choice among `pairs` (one for a list of words), where a
    form was chosen: not for ids, --exact, or words whose two forms have the same ids."""
    counts: dict[FormChoice, int] = {}
    for pair in pairs:
        if pair.choice is not None and pair.choice.name in (WORD_START, PLAIN):
            counts[pair.choice] = counts.get(pair.choice, 0) + 1
    if len(counts) == 1 and sum(counts.values()) == len(pairs):
        return [Message(f"words looked up in the {choice.name} form: ", choice.reason) for choice in counts]
    return [Message(f"{count:,} pair{'s' * (count != 1)} looked up in the {choice.name} form: ", choice.reason)
            for choice, count in counts.items()]


LISTED_PAIRS = 50  # pairs printed in the console; --json lists all
UNBOUNDED = 1 << 20  # a width to measure the matrix in: rich clamps a table's measure to the one it is given


def document(result: SimilarityResult, notes: Sequence[str] = ()) -> Document:
    """Everything but the pairs, which are streamed (a pairs file may hold millions): see `show`."""
    base = result.baseline
    return {"queries": [query_doc(q) for q in result.queries],
            "baseline": None if base is None else {"mean_random_cosine": base.mean_random_cosine,
                                                   "sample_size": base.sample_size, "seed": base.seed,
                                                   "every_pair": base.every_pair},
            "centered": result.centered, "table": result.table, "table_name": result.table_name,
            "remove_top": result.removed.removed if result.removed is not None else None,
            "notes": [*filter(None, [result.space_note, result.unnamed]), *notes]}


def percentile_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def show(emb: Embeddings, result: SimilarityResult, *, json: bool, matrix: bool, notes: Sequence[str] = ()) -> None:
    """The answer, opened by the checkpoint line; `matrix` adds the cosine matrix of every query."""
    if json:
        header.emit(document(result, notes), emb, stream=("pairs", (pair_doc(p) for p in result.pairs)))
        return
    header.show(emb)
    out = console.out
    if result.space_note:  # said once for the answer, not for every word
        out.print(f"tokenizer: {console.safe(result.space_note)}", soft_wrap=True)
    listed = result.pairs[:LISTED_PAIRS]
    out.print(pairs_table(listed, with_shares=result.baseline is not None))
    console.more(len(result.pairs) - LISTED_PAIRS, "pairs")
    if matrix:
        show_matrix(result)
    show_space(result)
    lines = [*filter(None, [result.unnamed]), *notes, *form_notes(listed)]
    for query in result.queries:
        lines += [n for n in (query.note and Message(f"{query.text}: ", query.note), merge_note(query)) if n]
    console.notes(lines)


def pairs_table(listed: Sequence[Pair], with_shares: bool) -> Table:
    """The pairs shown: a percentile column unless --no-baseline, a reason column when some cosine is undefined."""
    reasons = any(pair.reason for pair in listed)  # a column only when some cosine is undefined
    shares = ["random pairs below"] if with_shares else []  # --no-baseline: no percentile to show
    grid = console.table("a", "a tokens", "b", "b tokens", "cosine", *shares, *(["reason"] if reasons else []))
    for pair in listed:
        grid.add_row(console.safe(pair.a.text), console.tokens_text(pair.a.ids, pair.a.tokens),
                     console.safe(pair.b.text), console.tokens_text(pair.b.ids, pair.b.tokens),
                     console.cosine_text(pair.cosine), *([percentile_text(pair.percentile)] if shares else []),
                     *([console.safe(pair.reason or "")] if reasons else []))
    return grid


def show_matrix(result: SimilarityResult) -> None:
    """The cosine matrix where its cosines fit the width (long words fold): past it rich folded each cosine over
    lines ('+0.058' above '8' for +0.0588 at 8 words, an empty grid of borders at 300), so it is left out with a
    line that says why."""
    names = [console.safe(q.text) for q in result.queries]
    folded = [name[:len("+0.0000")] for name in names]  # a word folds over lines; a cosine must not
    needed = console.out.measure(matrix_table(result, folded),
                                 options=console.out.options.update(max_width=UNBOUNDED)).maximum
    if needed <= console.out.width:
        console.out.print(matrix_table(result, names))
    else:
        console.out.print(as_flags(Message(f"cosine matrix left out: {len(names):,} words need {needed:,} columns, "
                                           f"the console has {console.out.width:,} (", Option("json", True),
                                           " lists every pair)")))


def matrix_table(result: SimilarityResult, names: Sequence[str]) -> Table:
    grid = console.table("", *names, title="cosine matrix")
    for name, row in zip(names, result.matrix):
        grid.add_row(name, *(console.cosine_text(v) for v in row))
    return grid


def show_space(result: SimilarityResult) -> None:
    """The space the cosines were taken in (directions removed), and the random-pairs baseline in it."""
    out, base = console.out, result.baseline
    centered = ", mean row subtracted" if result.centered else ""
    if result.removed is not None:
        out.print(console.safe(result.removed.describe(result.table)), soft_wrap=True)
        centered = ", in the same space"
    if base is not None:
        out.print(f"random pairs of {result.table} table {console.safe(quote(result.table_name))}{centered}: "
                  f"mean cosine {console.cosine_text(base.mean_random_cosine)} (exact); percentiles against "
                  + (f"every one of its {base.sample_size:,} pairs" if base.every_pair else
                     f"{base.sample_size:,} pairs sampled with seed {base.seed}"), soft_wrap=True)
