"""`embscope analogy`: king - man + woman = ?, by 3CosAdd or 3CosMul, for one question or a file of them."""

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from ..analysis.analogy import analogy, evaluate, read_question_file
from ..render import analogy as render
from .command import SourceCommand
from .options import (
    ExactFlag,
    IdsFlag,
    JsonFlag,
    ListedAnswers,
    check_lookup_flags,
    input_file,
    refuse,
    source_of,
)


class Method(str, Enum):
    add = "3cosadd"
    mul = "3cosmul"


def analogy_command(
    ctx: typer.Context,
    words: Annotated[list[str] | None, typer.Argument(
        metavar="A B C", help="A B C: the rows nearest A - B + C (king man woman: king - man + woman).", show_default=False)] = None,
    k: ListedAnswers = 10,
    method: Annotated[Method, typer.Option(
        "--method", help="3cosadd: cos(x, a - b + c) on unit rows; 3cosmul: Levy & Goldberg's multiplicative "
                         "objective (epsilon 0.001).")] = Method.add,
    file: Annotated[Path | None, typer.Option(
        "--file", parser=input_file, metavar="<path>",
        help="Questions in the Google analogy test format (`: section`, then `a b c d` lines, asking "
             "b - a + c = d): accuracy per section and overall.", show_default=False)] = None,
    ids: IdsFlag = False,
    exact: ExactFlag = False,
    json: JsonFlag = False,
) -> None:
    """Word analogies in the token table: the rows nearest A - B + C, the three inputs left out,
    or with --file the accuracy on a file of analogy questions."""
    source = source_of(ctx)
    check_lookup_flags("{} not go with --ids" if ids else None, exact=exact)
    given = words or []
    if file is not None:
        if given:
            raise refuse("--file takes its questions from the file, not from words", "WORDS")
        if ids:
            raise refuse("--file holds words; --ids is for a question typed as three ids", "--ids")
        questions = read_question_file(file)
        emb = source.open()
        render.show_evaluation(emb, evaluate(emb, questions, method=method.value, exact=exact), file, json)
        return
    if len(given) != 3:
        raise refuse(f"expected three words A B C (A - B + C), found {len(given)}", "WORDS")
    emb = source.open()
    result = analogy(emb, *given, k=k, method=method.value, ids=ids, exact=exact)
    render.show_result(emb, result, json)


def register(app: typer.Typer) -> None:
    app.command("analogy", cls=SourceCommand)(analogy_command)
