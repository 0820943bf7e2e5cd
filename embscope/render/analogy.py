"""`embscope analogy` for people (rich) and for programs (one JSON document)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..analysis.analogy import AnalogyResult, Evaluation, SectionScore, Term
from . import console, header
from .jsonout import Document
from .lookup_notes import grouped_notes

if TYPE_CHECKING:
    from ..embeddings import Embeddings

METHOD_NAMES = {"3cosadd": "3CosAdd", "3cosmul": "3CosMul"}
SKIP_REASONS = {"out_of_vocabulary": "a word the tokenizer or the table cannot represent",
                "multi_token": "a word of several tokens", "zero_or_nonfinite_row": "a word whose row is zero or not finite"}


def method_text(method: str, epsilon: float | None) -> str:
    return METHOD_NAMES[method] + (f", epsilon {epsilon:g}" if epsilon is not None else "")


def term_doc(term: Term) -> Document:
    return {"text": term.text, "id": term.id, "token": term.token, "note": term.note}


def term_text(term: Term) -> str:
    token = console.token_text(term.id, term.token)
    return f"{console.safe(term.text)} = {term.id} {token}" if term.text != str(term.id) else f"{term.id} {token}"


def result_doc(result: AnalogyResult) -> Document:
    return {"query": {"a": term_doc(result.a), "b": term_doc(result.b), "c": term_doc(result.c)},
            "expression": f"{result.a.text} - {result.b.text} + {result.c.text}",
            "method": result.method, "epsilon": result.epsilon, "table": "token", "table_name": result.table_name,
            "results": [{"id": a.id, "token": a.token, "score": a.score} for a in result.answers],
            "reason": result.reason,
            "notes": [note for note in (result.a.note, result.b.note, result.c.note, result.note) if note]}


def show_result(emb: Embeddings, result: AnalogyResult, json: bool) -> None:
    if json:
        header.emit(result_doc(result), emb)
        return
    out = console.out
    header.show(emb)
    a, b, c = result.a, result.b, result.c
    out.print(f"{console.safe(a.text)} - {console.safe(b.text)} + {console.safe(c.text)}  "
              f"({method_text(result.method, result.epsilon)}, token table '{console.safe(result.table_name)}'; "
              "the three inputs are left out)", soft_wrap=True)
    out.print("using " + ", ".join(term_text(t) for t in (a, b, c)), soft_wrap=True)
    if result.reason is not None:
        out.print(f"no answer: {console.safe(result.reason)}")
    else:
        score = "cosine" if result.method == "3cosadd" else "score"
        grid = console.table("rank", "id", "token", score)
        for rank, answer in enumerate(result.answers, start=1):
            token = console.token_text(answer.id, answer.token)
            grid.add_row(str(rank), str(answer.id), token, f"{answer.score:+.4f}")
        out.print(grid)
    console.notes(grouped_notes((t.text, t.note) for t in (a, b, c)))
    console.notes([result.note] if result.note else [])


def score_doc(score: SectionScore) -> Document:
    return {"section": score.section, "correct": score.correct, "asked": score.asked, "accuracy": score.accuracy,
            "skipped": score.skipped}


def evaluation_doc(evaluation: Evaluation, path: Path) -> Document:
    return {"file": str(path), "method": evaluation.method, "epsilon": evaluation.epsilon, "table": "token",
            "table_name": evaluation.table_name, "sections": [score_doc(s) for s in evaluation.sections],
            "overall": score_doc(evaluation.overall), "skipped": evaluation.skipped,
            "malformed_lines": list(evaluation.malformed), "notes": list(evaluation.notes)}


def accuracy_text(score: SectionScore) -> str:
    return "-" if score.accuracy is None else f"{score.accuracy:.1%}"


def show_evaluation(emb: Embeddings, evaluation: Evaluation, path: Path, json: bool) -> None:
    if json:
        header.emit(evaluation_doc(evaluation, path), emb)
        return
    out = console.out
    header.show(emb)
    out.print(f"analogies in {console.safe(path)} ({method_text(evaluation.method, evaluation.epsilon)}, token table "
              f"'{console.safe(evaluation.table_name)}'): for a b c d, right when b - a + c answers d first",
              soft_wrap=True)
    grid = console.table("section", "correct", "asked", "accuracy", "skipped")
    for score in (*evaluation.sections, evaluation.overall):
        grid.add_row(console.safe(score.section), f"{score.correct:,}", f"{score.asked:,}", accuracy_text(score),
                     f"{score.skipped:,}")
    out.print(grid)
    if evaluation.skipped:
        parts = [f"{count:,} with {SKIP_REASONS[reason]}" for reason, count in evaluation.skipped.items()]
        skipped = evaluation.overall.skipped
        out.print(f"skipped {skipped:,} question{'s' * (skipped != 1)}: " + "; ".join(parts), soft_wrap=True)
    if evaluation.malformed:
        count = len(evaluation.malformed)
        lines = ", ".join(str(n) for n in evaluation.malformed[:10]) + (" ..." if count > 10 else "")
        out.print(f"ignored {count:,} line{'s that are' if count != 1 else ' that is'} neither `: section` nor four "
                  f"words: line {lines}", soft_wrap=True)
    console.notes(evaluation.notes)
