"""Word analogies: king - man + woman = ?, by 3CosAdd and 3CosMul (Levy & Goldberg 2014, "Linguistic
Regularities in Sparse and Explicit Word Representations"), one question or a whole file of them.

For the question a - b + c (a is to b as ? is to c: king - man + woman):
- 3CosAdd ranks each row x by cos(x, a^ - b^ + c^), the ^ marking unit rows; gensim's
  most_similar(positive=[a, c], negative=[b]) gives the same scores.
- 3CosMul ranks by cos'(x, a) cos'(x, c) / (cos'(x, b) + epsilon), with cosines shifted to [0, 1] by
  cos' = (cos + 1) / 2, as gensim's most_similar_cosmul does. The paper's epsilon is 0.001 (our default);
  gensim's is 1e-6 (pass epsilon=1e-6 to reproduce its scores).
The three inputs are never answers, and neither are zero rows or rows holding NaN or Inf.

A file in the Google analogy test format (`: section` lines, then `a b c d` lines, where a is to b as c
is to d) asks b - a + c and counts the question right when the best answer is d. Words are looked up as
written (case-sensitive); a question with a word of several tokens, or one the tokenizer or the table
cannot represent, is skipped and counted. All questions go through one batched top-k, in blocks of
queries: never a V x V matrix.
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .. import compute, inputs
from ..compute.rows import SCORE_BLOCK_BYTES, normalise
from ..core.errors import EmbscopeError, InputError, Message, Option, OptionError, TokenError, joined
from ..core.role import Role
from ..core.text import quote
from ..lookup import check_id, lookup_word, parse_id
from ..naming import token_name, tokenizer_failure
from ..options import LookupOptions

if TYPE_CHECKING:
    from ..core.checkpoint import Table
    from ..core.tokenizer import Tokenizer
    from ..embeddings import Embeddings

METHODS = ("3cosadd", "3cosmul")
QUESTION_FILE = Option("file", noun="the question file")  # the option `analogy --file` reads it as
COSMUL_EPSILON = 0.001  # Levy & Goldberg 2014; keeps the 3CosMul ratio finite when cos'(x, b) is 0
NO_SECTION = "(no section)"  # questions before the first `: section` line


@dataclass(frozen=True)
class Term:
    """One input of a question: the word (or id) as given and the row that stands for it."""

    text: str
    id: int
    token: str
    note: str | None = None  # how the tokenizer was asked (lookup_word's note)


@dataclass(frozen=True)
class Answer:
    id: int
    token: str
    score: float  # the cosine (3CosAdd) or the 3CosMul ratio


@dataclass(frozen=True)
class AnalogyResult:
    a: Term
    b: Term
    c: Term
    method: str
    epsilon: float | None  # 3CosMul only
    answers: tuple[Answer, ...]
    table_name: str
    reason: str | None = None  # why there are no answers
    note: str | None = None  # why there are fewer answers than asked for; why ids asked for print as #ids


@dataclass(frozen=True)
class Question:
    section: str
    words: tuple[str, str, str, str]  # a b c d: a is to b as c is to d


@dataclass(frozen=True)
class QuestionFile:
    questions: tuple[Question, ...]
    sections: tuple[str, ...]  # in file order, each once
    malformed: tuple[int, ...]  # line numbers of lines that are neither a section nor four words


@dataclass(frozen=True)
class SectionScore:
    section: str
    correct: int
    asked: int  # questions answered (skipped ones are not asked)
    skipped: int

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.asked if self.asked else None


@dataclass(frozen=True)
class Evaluation:
    sections: tuple[SectionScore, ...]
    overall: SectionScore
    skipped: dict[str, int]  # reason -> questions skipped for it
    malformed: tuple[int, ...]
    method: str
    epsilon: float | None
    table_name: str
    notes: tuple[str, ...]


# --- looking words up ---

class SeveralTokens(TokenError):
    """A word the tokenizer splits into several tokens: an analogy needs one row per word."""


class Lookup:
    """Turns each distinct word (or id) into a Term once; `skip_reason` says why a word cannot be used."""

    def __init__(self, emb: Embeddings, table: Table, asked: LookupOptions):
        self.array, self.ids, self.exact = table.array, asked.ids, asked.exact
        self.tokenizer: Tokenizer | None = emb.tokenizer_for_names(table)[0] if self.ids else emb.tokenizer_for_words(table)
        if not self.ids and self.tokenizer is None:
            raise TokenError(Message("expected a tokenizer to look words up, found none beside the checkpoint: "
                                     "pass ", Option("tokenizer", metavar="FILE"), ", or use ", Option("ids", True)),
                             option="tokenizer")

    def term(self, text: str) -> Term:
        """The one row for `text`; TokenError when it has none or several."""
        rows = self.array.shape[0]
        if self.ids:
            token_id = parse_id(text)
            check_id(token_id, rows)
            return Term(text, token_id, token_name(self.tokenizer, token_id))
        assert self.tokenizer is not None  # the constructor refuses words without one
        found = lookup_word(self.tokenizer, text, exact=self.exact)
        if len(found.ids) != 1:
            pieces = " ".join(quote(t) for t in found.tokens)
            raise SeveralTokens(f"expected {quote(text)} to be one token, found {len(found.ids)} ({pieces}): "
                                "an analogy uses one row per word")
        token_id = int(found.ids[0])
        check_id(token_id, rows, text)
        return Term(text, token_id, found.tokens[0], found.note)

    def skip_reason(self, text: str) -> tuple[Term | None, str | None]:
        """(term, None), or (None, why a question with this word is skipped: multi_token or out_of_vocabulary)."""
        try:
            return self.term(text), None
        except SeveralTokens:
            return None, "multi_token"
        except EmbscopeError:
            return None, "out_of_vocabulary"


def unit_inputs(array: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 unit rows for `ids`, and whether each has a direction (finite, non-zero): compute's rule."""
    unit, _, valid = normalise(np.asarray(array[ids], dtype=np.float64))
    return unit, valid


# --- the batched top-k ---

def query_block_rows(rows: int, per_query: int = 1) -> int:
    """Queries per block, so that the block's score matrices stay near compute's SCORE_BLOCK_BYTES."""
    return max(1, SCORE_BLOCK_BYTES // (4 * per_query * max(1, rows)))


def _cosmul_topk(table: np.ndarray, inputs: np.ndarray, k: int, exclude: np.ndarray,
                 epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """3CosMul's k best rows for each question; `inputs` (Q, 3, d) holds the unit rows of a, b, c."""
    unit, _, valid = compute.unit_rows(table)
    ids = np.full((len(inputs), k), -1, dtype=np.int64)
    scores = np.full((len(inputs), k), np.nan)
    block = query_block_rows(unit.shape[0], per_query=4)
    for start in range(0, len(inputs), block):
        stop = min(start + block, len(inputs))
        flat = inputs[start:stop].reshape(-1, inputs.shape[2]).astype(np.float32)  # one matmul, not one a question
        shifted = ((flat @ unit.T + 1) / 2).reshape(stop - start, 3, -1)  # (B, 3, V)
        ratio = shifted[:, 0] * shifted[:, 2] / (shifted[:, 1] + np.float32(epsilon))
        ratio[:, ~valid] = -np.inf
        ratio[np.arange(stop - start)[:, None], exclude[start:stop]] = -np.inf
        found, values = compute.topk_scores(ratio, k)
        ids[start:stop, :found.shape[1]], scores[start:stop, :found.shape[1]] = found, values
    return ids, scores


def exact_scores(array: np.ndarray, ids: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray, method: str,
                 epsilon: float) -> np.ndarray:
    """The scores of the chosen rows again, in float64 (the top-k ran in float32)."""
    rows, _ = unit_inputs(array, ids)
    scores: np.ndarray
    if method == "3cosadd":
        direction = a - b + c
        scores = rows @ direction / np.linalg.norm(direction)
        return scores
    cos_a, cos_b, cos_c = ((rows @ v + 1) / 2 for v in (a, b, c))
    scores = cos_a * cos_c / (cos_b + epsilon)
    return scores


def check_method(method: str, epsilon: float) -> None:
    if method not in METHODS:
        raise OptionError(f"expected a method {' or '.join(METHODS)}, found {quote(method)}", option="method")
    # 3CosMul divides by cos'(x, b) + epsilon, cos' in [0, 1]: NaN raised from the top-k, a negative one divided by 0
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real) or not 0 < epsilon < math.inf:
        raise OptionError(f"expected an epsilon above 0 and finite, found {quote(epsilon)}", option="epsilon")


# --- one question ---

def analogy(emb: Embeddings, a: str, b: str, c: str, *, k: int = 10, method: str = "3cosadd", ids: bool = False,
            exact: bool = False, epsilon: float = COSMUL_EPSILON) -> AnalogyResult:
    """The k rows that best answer a - b + c (king - man + woman) in the token table, the inputs left out."""
    check_method(method, epsilon)
    if k < 1:
        raise OptionError(f"expected k of at least 1, found {k}", option="k")
    table = emb.table(Role.token)
    array = table.array
    lookup = Lookup(emb, table, LookupOptions(ids, exact))
    first, second, third = terms = (lookup.term(a), lookup.term(b), lookup.term(c))
    unit, valid = unit_inputs(array, np.array([t.id for t in terms], dtype=np.int64))
    unnamed = tokenizer_failure(emb, table) if ids else None  # the tokens are #ids, answered or not: say why
    result = AnalogyResult(first, second, third, method, epsilon if method == "3cosmul" else None, (), table.name,
                           note=unnamed)
    for term, ok in zip(terms, valid):
        if not ok:
            return replace(result, reason=f"row {term.id} ({quote(term.token)}) for {quote(term.text)} is zero or "
                                          "holds NaN or Inf: it has no direction")
    exclude = np.array([[t.id for t in terms]], dtype=np.int64)
    if method == "3cosadd":
        direction = unit[0] - unit[1] + unit[2]
        if not np.linalg.norm(direction) > 0:
            return replace(result, reason="a - b + c is the zero vector: it has no direction")
        found = compute.topk_vectors(array, direction[None, :], k, exclude=exclude).ids[0]
    else:
        found = _cosmul_topk(array, unit[None, :, :], k, exclude, epsilon)[0][0]
    found = found[found >= 0]
    scores = exact_scores(array, found, unit[0], unit[1], unit[2], method, epsilon)
    answers = tuple(Answer(int(i), token_name(lookup.tokenizer, int(i)), float(s)) for i, s in zip(found, scores))
    if not answers:
        return replace(result, reason=f"no row is left to answer: the table has {array.shape[0]} rows, the inputs "
                                      "are left out, and zero rows or rows holding NaN or Inf never answer")
    short = None if len(answers) == k else Message(Option("k", k, text=f"{k:,}"), " asks for more rows than there "
                                                   f"are: all {len(answers):,} rows that can answer are listed")
    return replace(result, answers=answers, note=joined("; ", filter(None, (short, unnamed))) or None)


# --- a file of questions ---

def read_questions(lines: Iterable[str]) -> QuestionFile:
    """The Google analogy test format: `: section` lines, then `a b c d` lines; blank lines are ignored."""
    return numbered_questions(enumerate(lines, start=1))


def numbered_questions(lines: Iterable[tuple[int, str]]) -> QuestionFile:
    """read_questions over (line number, text) pairs."""
    questions: list[Question] = []
    sections: dict[str, None] = {}
    malformed: list[int] = []
    section = NO_SECTION
    for number, line in lines:
        if line.startswith(":"):
            section = line[1:].strip() or NO_SECTION
            continue
        words = line.split()
        if not words:
            continue
        if len(words) != 4:
            malformed.append(number)
            continue
        sections.setdefault(section)
        questions.append(Question(section, (words[0], words[1], words[2], words[3])))
    return QuestionFile(tuple(questions), tuple(sections), tuple(malformed))


def read_question_file(path: Path) -> QuestionFile:
    """A question file, read as every input file is (inputs.lines: a regular file, a bounded line at a time)."""
    found = numbered_questions(inputs.lines(path, QUESTION_FILE, None))
    if not found.questions:
        raise InputError(f"expected analogy questions in {quote(path)} (`: section` lines, then four words a "
                         f"line), found none", path=path, option=QUESTION_FILE)
    return found


Terms = dict[str, tuple[Term | None, str | None]]  # word -> (its term, or why it is skipped)


def evaluate(emb: Embeddings, asked: QuestionFile, *, method: str = "3cosadd", exact: bool = False,
             epsilon: float = COSMUL_EPSILON) -> Evaluation:
    """Accuracy per section and overall: a question `a b c d` is right when b - a + c answers d first."""
    check_method(method, epsilon)
    table = emb.table(Role.token)
    array = table.array
    terms = _terms(Lookup(emb, table, LookupOptions(exact=exact)), asked)
    found = {w: term for w, (term, _) in terms.items() if term is not None}
    index = {w: n for n, w in enumerate(found)}
    row_ids = np.array([term.id for term in found.values()], dtype=np.int64)
    unit, valid = unit_inputs(array, row_ids)
    usable, skipped = _usable(asked, terms, index, valid)
    # a b c d: a is to b as c is to d, so d should answer b - a + c
    a, b, c, d = (np.array([index[q.words[n]] for q in usable], dtype=np.int64) for n in range(4))
    exclude = np.stack([row_ids[b], row_ids[a], row_ids[c]], axis=1) if usable else np.empty((0, 3), np.int64)
    if not usable:
        best = np.empty(0, dtype=np.int64)
    elif method == "3cosadd":
        best = compute.topk_vectors(array, unit[b] - unit[a] + unit[c], 1, exclude=exclude).ids[:, 0]
    else:
        best = _cosmul_topk(array, np.stack([unit[b], unit[a], unit[c]], axis=1), 1, exclude, epsilon)[0][:, 0]
    right = best == row_ids[d]
    overall = SectionScore("overall", int(right.sum()), len(usable), len(asked.questions) - len(usable))
    notes = list(_lookup_notes(terms))
    return Evaluation(_section_scores(asked, usable, right), overall, dict(skipped), asked.malformed, method,
                      epsilon if method == "3cosmul" else None, table.name, tuple(notes))


evaluate_analogies = evaluate  # the name the package face exports (embscope.evaluate_analogies)


def _terms(lookup: Lookup, asked: QuestionFile) -> Terms:
    """Each word of the questions looked up once, in the order they first appear."""
    terms: Terms = {}
    for question in asked.questions:
        for word in question.words:
            if word not in terms:
                terms[word] = lookup.skip_reason(word)
    return terms


def _usable(asked: QuestionFile, terms: Terms, index: dict[str, int],
            valid: np.ndarray) -> tuple[list[Question], Counter[str]]:
    """The questions every word of which has a row with a direction, and how many were skipped for what."""
    skipped: Counter[str] = Counter()
    usable: list[Question] = []
    for question in asked.questions:
        reasons = [terms[w][1] for w in question.words if terms[w][1] is not None]
        if reasons:
            skipped["multi_token" if "multi_token" in reasons else "out_of_vocabulary"] += 1
        elif not all(valid[index[w]] for w in question.words):
            skipped["zero_or_nonfinite_row"] += 1
        else:
            usable.append(question)
    return usable, skipped


def _section_scores(asked: QuestionFile, usable: Sequence[Question], right: np.ndarray) -> tuple[SectionScore, ...]:
    sections = []
    for name in asked.sections:
        mine = np.array([q.section == name for q in usable], dtype=bool)
        total = sum(q.section == name for q in asked.questions)
        sections.append(SectionScore(name, int(right[mine].sum()), int(mine.sum()), total - int(mine.sum())))
    return tuple(sections)


def _lookup_notes(terms: Terms) -> Sequence[str]:
    """One note for the words whose lookup needed one (the leading-space rule), with the first as an example."""
    noted = [term for term, _ in terms.values() if term is not None and term.note]
    if not noted:
        return []
    return [Message(f"{len(noted):,} of the {len(terms):,} words needed a lookup rule, e.g. {noted[0].text}: ",
                    noted[0].note or "")]
