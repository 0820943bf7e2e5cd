"""`embscope positions`: cosine between position rows, and how similarity falls with distance."""

import re
from typing import Annotated

import typer

from ..analysis.positions import positions as position_report
from ..core.text import shortened
from ..render import positions as render
from ..render.files import input_files
from .base import PAIRS_DEFAULT
from .command import SourceCommand
from .options import JsonFlag, refuse, source_of
from .plot_option import PlotOption, check_plot, plot_path

PAIR = re.compile(r"\s*(-?[0-9]+)\s*:\s*(-?[0-9]+)\s*")  # ASCII digits: re's \d takes any script's
MAX_DIGITS = 9  # no learned table has a billion positions; a longer number is a typo, not a position
PAIRS_HELP = ("Position pairs I:J,I:J,... (e.g. 10:11,10:500); alone, or 'default', a set of near and far pairs that "
              "spans the table. May be repeated. Without --pairs and --profile the default set is shown.")


def parse_pairs(texts: list[str]) -> tuple[bool, list[tuple[int, int]]]:
    """(whether the default set was asked for, the pairs written out), from every --pairs given."""
    default, pairs = False, []
    for text in texts:
        if text.strip().lower() == PAIRS_DEFAULT:
            default = True
            continue
        for part in text.split(","):
            match = PAIR.fullmatch(part)
            if match is None:
                raise refuse(f"expected position pairs written I:J,I:J (e.g. 10:11,10:500), "
                             f"found {shortened(part.strip())!r}", "--pairs")
            if any(len(number.lstrip("-")) > MAX_DIGITS for number in match.groups()):
                raise refuse(f"expected positions of at most {MAX_DIGITS} digits, found {shortened(part.strip())!r}",
                             "--pairs")
            i, j = int(match[1]), int(match[2])
            if i < 0 or j < 0:
                raise refuse(f"expected positions of 0 or more, found {part.strip()!r}", "--pairs")
            pairs.append((i, j))
    return default, pairs


def positions(
    ctx: typer.Context,
    pairs: Annotated[list[str] | None, typer.Option("--pairs", metavar="[I:J,...]", help=PAIRS_HELP)] = None,
    profile: Annotated[bool, typer.Option(
        "--profile", help="Print the mean and spread of cos(p_i, p_i+k) by distance k, and how often a position's "
                          "nearest neighbour is adjacent. It does not change --plot, which always draws this "
                          "curve.")] = False,
    plot: PlotOption = None,
    json: JsonFlag = False,
) -> None:
    """Cosine between learned position rows: chosen pairs, a near-to-far default set, or a profile by distance.
    --plot draws the cosine heatmap and the similarity-by-distance curve.

    Position p is table row p + first_row: the model family's rule (RoBERTa-family padding_idx + 1, MPNet and OPT
    2), or --first-position N."""
    source = source_of(ctx)
    default, chosen = parse_pairs(pairs or [])
    default = default or not (chosen or profile)
    check_plot(plot)
    emb = source.open()
    target = plot_path(plot, emb.checkpoint.path, "position", "heatmap")
    result = position_report(emb, chosen, default=default, profile=profile, heatmap=target is not None)
    if target is not None:
        render.draw(emb, result, target, input_files(emb))
    render.show(emb, result, json=json, profile=profile, plot=target)


def register(app: typer.Typer) -> None:
    app.command(cls=SourceCommand)(positions)
