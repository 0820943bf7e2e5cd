"""`embscope similarity`: cosine between token rows, with the ids and tokens used and where it stands among random pairs."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..analysis.similarity import Query, SimilarityResult, merge_note, similarity, similarity_pairs
from ..errors import EmbscopeError
from ..render import console, jsonout
from ..text import quote
from .options import JsonFlag, Source, with_source


class TableChoice(str, Enum):
    token = "token"
    output = "output"


IdsFlag = Annotated[bool, typer.Option("--ids", help="Take raw token ids instead of words.")]
ExactFlag = Annotated[bool, typer.Option("--exact", help="Encode each word exactly as typed, without a leading space.")]
TableOption = Annotated[TableChoice, typer.Option(help="The token table, or the untied output projection.")]


def read_pairs_file(path: Path) -> list[tuple[str, str]]:
    """Two words or ids per line, tab or space separated; blank lines and # comments skipped."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeError) as err:
        raise EmbscopeError(f"expected a readable UTF-8 pairs file at {quote(path)}, found {err}") from None
    pairs = []
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 2:
            raise EmbscopeError(f"{quote(path)} line {number}: expected two words or ids, found {len(fields)} fields")
        pairs.append((fields[0], fields[1]))
    if not pairs:
        raise EmbscopeError(f"expected pairs in {quote(path)}, two words or ids a line, found none")
    return pairs


def token_text(token_id: int, token: str) -> str:
    """A token string quoted so spaces show (untrusted, so escaped); `#id` as it is when there is no string."""
    return token if token == f"#{token_id}" else f"'{console.safe(token)}'"


def tokens_text(query: Query) -> str:
    return " ".join(token_text(i, t) if t == f"#{i}" else f"{i} {token_text(i, t)}" for i, t in zip(query.ids, query.tokens))


def query_doc(query: Query) -> dict:
    return {"text": query.text, "ids": list(query.ids), "tokens": list(query.tokens), "form": query.form,
            "merged": query.merged, "note": query.note, "reason": query.reason}


def document(result: SimilarityResult) -> dict:
    def pair_doc(pair):
        return {"a": pair.a.text, "b": pair.b.text, "a_ids": list(pair.a.ids), "b_ids": list(pair.b.ids),
                "a_tokens": list(pair.a.tokens), "b_tokens": list(pair.b.tokens), "cosine": pair.cosine,
                "reason": pair.reason, "a_note": pair.a.note, "b_note": pair.b.note,
                "a_merged": pair.a.merged, "b_merged": pair.b.merged, "percentile": pair.percentile}
    return {"pairs": [pair_doc(p) for p in result.pairs],
            "queries": [query_doc(q) for q in result.queries],
            "baseline": {"mean_random_cosine": result.baseline.mean_random_cosine,
                         "sample_size": result.baseline.sample_size, "seed": result.baseline.seed},
            "centered": result.centered, "table": result.table, "table_name": result.table_name}


def percentile_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def render(result: SimilarityResult, show_matrix: bool) -> None:
    out = console.out
    reasons = any(pair.reason for pair in result.pairs)  # a column only when some cosine is undefined
    grid = console.table("a", "a tokens", "b", "b tokens", "cosine", "random pairs below", *(["reason"] if reasons else []))
    for pair in result.pairs:
        grid.add_row(console.safe(pair.a.text), tokens_text(pair.a), console.safe(pair.b.text), tokens_text(pair.b),
                     console.cosine_text(pair.cosine), percentile_text(pair.percentile),
                     *([console.safe(pair.reason or "")] if reasons else []))
    out.print(grid)
    if show_matrix:
        names = [console.safe(q.text) for q in result.queries]
        matrix = console.table("", *names, title="cosine matrix")
        for name, row in zip(names, result.matrix):
            matrix.add_row(name, *(console.cosine_text(v) for v in row))
        out.print(matrix)
    base = result.baseline
    centered = ", mean row subtracted" if result.centered else ""
    out.print(f"random pairs of {result.table} table {console.safe(quote(result.table_name))}{centered}: "
              f"mean cosine {console.cosine_text(base.mean_random_cosine)} (exact); percentiles against "
              f"{base.sample_size:,} pairs sampled with seed {base.seed}", soft_wrap=True)
    lines = []
    for query in result.queries:
        lines += [n for n in (query.note and f"{query.text}: {query.note}", merge_note(query)) if n]
    console.notes(lines)


def similarity_command(
    source: Source,
    words: Annotated[Optional[list[str]], typer.Argument(
        help="Two or more words (or ids with --ids); every pair is compared.", show_default=False)] = None,
    ids: IdsFlag = False,
    exact: ExactFlag = False,
    merge: Annotated[bool, typer.Option(
        "--merge/--no-merge", help="Average the rows of a word that splits into several tokens, or refuse it.")] = True,
    center: Annotated[bool, typer.Option("--center", help="Subtract the table's mean row first.")] = False,
    table: TableOption = TableChoice.token,
    pairs_file: Annotated[Optional[Path], typer.Option(
        "--pairs-file", help="Two words or ids per line; all pairs computed in one batch.")] = None,
    json: JsonFlag = False,
) -> None:
    """Cosine similarity between token rows: two words give one pair, more give every pair."""
    words = words or []
    if pairs_file is not None and words:
        raise typer.BadParameter("give words or --pairs-file, not both")
    if pairs_file is None and len(words) < 2:
        raise typer.BadParameter(f"expected at least two words (or --pairs-file), found {len(words)}")
    emb = source.open()
    options = dict(ids=ids, exact=exact, merge=merge, center=center, table=table.value)
    if pairs_file is not None:
        result = similarity_pairs(emb, read_pairs_file(pairs_file), **options)
    else:
        result = similarity(emb, words, **options)
    if json:
        jsonout.emit(document(result))
    else:
        render(result, show_matrix=pairs_file is None and len(result.queries) > 2)


def register(app: typer.Typer) -> None:
    app.command("similarity")(with_source(similarity_command))
