"""`embscope similarity`: cosine between token rows, with the ids and tokens used and where it stands among random pairs."""

from pathlib import Path
from typing import Annotated

import typer

from ..analysis.similarity import pairs_similarity, words_similarity
from ..inputs import PAIRS_FILE, Skipped, none_used, read_pairs
from ..options import LookupOptions, SimilarityOptions
from ..render import similarity as render
from .command import SourceCommand
from .options import (
    TOKEN_TABLE,
    AllowUnkFlag,
    ExactFlag,
    IdsFlag,
    JsonFlag,
    RemoveTopOption,
    StrictFlag,
    TableOption,
    check_lookup_flags,
    input_file,
    refuse,
    source_of,
)


def similarity_command(
    ctx: typer.Context,
    words: Annotated[list[str] | None, typer.Argument(
        help="Two or more words (or ids with --ids); every pair is compared.", show_default=False)] = None,
    ids: IdsFlag = False,
    exact: ExactFlag = False,
    allow_unk: AllowUnkFlag = False,
    merge: Annotated[bool, typer.Option(
        "--merge/--no-merge", help="Average the rows of a word that splits into several tokens, or refuse it.")] = True,
    center: Annotated[bool, typer.Option("--center", help="Subtract the table's mean row first.")] = False,
    remove_top: RemoveTopOption = None,
    baseline: Annotated[bool, typer.Option(
        "--baseline/--no-baseline", help="Where each cosine stands among random pairs of the same table (one pass "
                                         "over the table, cached per file), or skip it.")] = True,
    table: TableOption = TOKEN_TABLE,
    pairs_file: Annotated[Path | None, typer.Option(
        "--pairs-file", parser=input_file, metavar="<path>",
        help="Two words or ids per line; all pairs computed in one batch. A line that cannot be "
             "used is skipped with a note.")] = None,
    strict: StrictFlag = False,
    json: JsonFlag = False,
) -> None:
    """Cosine similarity between token rows: two words give one pair, more give every pair."""
    source = source_of(ctx)
    check_lookup_flags("{} not go with --ids" if ids else None, exact=exact, allow_unk=allow_unk, merge=merge)
    words = words or []
    if pairs_file is not None and words:
        raise refuse("give words or --pairs-file, not both")
    if pairs_file is None and strict:
        raise refuse("--strict goes with --pairs-file: it says what to do with a line of the file that "
                     "cannot be used")
    if pairs_file is None and len(words) < 2:
        raise refuse(f"expected at least two words (or --pairs-file), found {len(words)}")
    emb = source.open()
    asked_as = LookupOptions(ids, exact, allow_unk)
    how = SimilarityOptions(merge, center, table.value, baseline, remove_top)
    if pairs_file is None:
        result = words_similarity(emb, words, asked_as, how)
        render.show(emb, result, json=json, matrix=len(set(words)) > 2)
        return
    skipped = None if strict else Skipped()
    result = pairs_similarity(emb, read_pairs(pairs_file, skipped), asked_as, how, on_skip=skipped)
    if skipped is not None and skipped.count and not len(result.pairs):
        raise none_used(pairs_file, PAIRS_FILE, skipped)
    render.show(emb, result, json=json, matrix=False,
                notes=skipped.notes(pairs_file) if skipped else [])


def register(app: typer.Typer) -> None:
    app.command("similarity", cls=SourceCommand)(similarity_command)
