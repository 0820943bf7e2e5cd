"""Cosine similarity between token rows, and where a pair stands among random pairs (neighbours: neighbors.py).
Words become token ids through the checkpoint's tokenizer; a word of several tokens is the mean of their rows."""

from __future__ import annotations

import math
from array import array as packed
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import combinations
from typing import TYPE_CHECKING, overload

import numpy as np

from .. import compute
from ..core.errors import Message, Option, TableError, TokenError, joined, message_of
from ..core.role import Role
from ..core.text import quote
from ..lookup import (
    FormChoice,
    WordEncoder,
    check_id,
    form_sentence,
    lookup_words,
    parse_id,
    space_sentence,
    word_list,
    word_text,
)
from ..naming import token_name, tokenizer_failure
from ..options import AS_TYPED, PLAIN_COSINES, LookupOptions, SimilarityOptions

if TYPE_CHECKING:

    from ..core.checkpoint import Table
    from ..core.tokenizer import Tokenizer
    from ..embeddings import Embeddings
    from ..lookup import WordLookup
    from .all_but_the_top import RemovedTop

BASELINE_PAIRS = 10000  # random pairs sampled for the percentile
BASELINE_SEED = 0  # fixed, so the same table gives the same percentile every run
TABLE_ROLES = (Role.token, Role.output)
PAIR_BLOCK_BYTES = 16 << 20  # rows gathered at once for the pairs of a pairs file
# A sampled cosine this close below the one asked is that pair's own (the sample can hold the pair asked), rounded
# another way: counted as below, the percentile would hang on the last bits of two summation orders.
TIE = 1e-9


@dataclass(frozen=True)
class Query:
    """A word or id as the user gave it, and the rows that stand for it."""

    text: str
    ids: tuple[int, ...]
    tokens: tuple[str, ...]
    note: str | None = None  # what is to say of this word alone (it became the unknown token); the form is the pair's
    form: str | None = None  # the text actually encoded; None for an id
    reason: str | None = None  # why its vector has no direction (a zero, NaN or Inf row); None when fine
    choice: FormChoice | None = None  # the form chosen for the words looked up with it, and why; None for an id
    space_id: int | None = None  # the space token left out before the word (a token of its own), if one was

    @property
    def merged(self) -> bool:
        return len(self.ids) > 1


@dataclass(frozen=True)
class Pair:
    """One pair asked about: its two queries, their cosine and where it stands among random pairs."""

    a: Query
    b: Query
    cosine: float | None  # None when undefined; `reason` says why
    reason: str | None
    percentile: float | None  # share (0..100) of the random-pair sample below `cosine`

    @property
    def choice(self) -> FormChoice | None:
        """The one form both words were looked up in (they are looked up together), or None for ids."""
        return self.a.choice


@dataclass(frozen=True)
class Baseline:
    """Random distinct rows of the same table: what an unremarkable cosine looks like."""

    mean_random_cosine: float | None  # exact, over every distinct pair of valid rows
    sample_size: int  # random pairs behind the percentile
    seed: int

    @property
    def every_pair(self) -> bool:
        """Whether the percentile stands among every distinct pair of valid rows, not a sample: a table with fewer
        pairs than BASELINE_PAIRS gives each once (compute.draw_pairs), and valid rows give finite cosines."""
        return self.sample_size < BASELINE_PAIRS


class Pairs(Sequence[Pair]):
    """The pairs asked for, as arrays (a pairs file of millions of lines stays a few bytes a pair);
    each Pair is made when it is read."""

    def __init__(self, queries: tuple[Query, ...], positions: np.ndarray | Sequence[Sequence[int]],
                 cosines: np.ndarray | Sequence[float], shares: np.ndarray | Sequence[float]):
        # positions: (pairs, 2) indices into `queries`; cosines and shares (percentiles): one a pair, NaN if undefined
        # (numpy arrays for a pairs file, lists for a few pairs)
        self.queries, self.positions, self.cosines, self.shares = queries, positions, cosines, shares

    def __len__(self) -> int:
        return len(self.positions)

    @overload
    def __getitem__(self, at: int) -> Pair: ...

    @overload
    def __getitem__(self, at: slice) -> list[Pair]: ...

    def __getitem__(self, at: int | slice) -> Pair | list[Pair]:
        if isinstance(at, slice):
            return [self[n] for n in range(*at.indices(len(self)))]
        a, b = (self.queries[int(i)] for i in self.positions[at])
        why = [r for r in dict.fromkeys((a.reason, b.reason)) if r]
        cosine = None if why else finite_or_none(self.cosines[at])
        reason = joined("; ", why) if why else (None if cosine is not None else "the cosine is undefined")
        return Pair(a, b, cosine, reason, None if cosine is None else finite_or_none(self.shares[at]))


@dataclass(frozen=True)
class SimilarityResult:
    """What `similarity` found: the queries, the pairs and the baseline they were measured against."""

    queries: tuple[Query, ...]  # each distinct word or id once, in the order given
    pairs: Pairs
    baseline: Baseline | None  # None when it was not asked for (baseline=False)
    centered: bool  # the table's mean row was subtracted first
    table: Role  # token or output
    table_name: str
    removed: RemovedTop | None = None  # --remove-top: the cosines are in the all-but-the-top space
    unnamed: str | None = None  # why ids asked for print as #ids: the tokenizer did not load, or is not the table's

    @property
    def space_note(self) -> str | None:
        """One sentence for the whole answer when the space before words is a token of its own and was left out."""
        return space_note(self.queries)

    @property
    def matrix(self) -> tuple[tuple[float | None, ...], ...]:
        """Cosine of every query with every other (queries x queries); None where undefined or not asked."""
        index = {q.text: i for i, q in enumerate(self.queries)}
        grid: list[list[float | None]] = [[None] * len(self.queries) for _ in self.queries]
        for i, query in enumerate(self.queries):
            grid[i][i] = 1.0 if query.reason is None else None
        for pair in self.pairs:
            i, j = index[pair.a.text], index[pair.b.text]
            grid[i][j] = grid[j][i] = pair.cosine
        return tuple(tuple(row) for row in grid)


# --- resolving words and ids into rows ---

def pick_table(emb: Embeddings, table: str) -> Table:
    if table not in TABLE_ROLES:
        raise TableError(f"expected table token or output, found {quote(table)}", option="table")
    return emb.table(table)


def table_rows(emb: Embeddings, table: str) -> tuple[np.ndarray, str]:
    chosen = pick_table(emb, table)
    return chosen.array, chosen.name


def is_padding(tokenizer: Tokenizer | None, token_id: int) -> bool:
    return tokenizer is not None and token_id >= tokenizer.vocab_size


class Resolver:
    """Turns each distinct word or id into a Query once, checking it against the table. Words asked about together
    (`keys`) are looked up in one form (lookup.py's rule); a word's Query is kept per form chosen for it."""

    def __init__(self, emb: Embeddings, table: Table, asked: LookupOptions, *, merge: bool):
        self.emb, self.table, self.rows, self.asked, self.merge = emb, table, table.rows, asked, merge
        self.ids = asked.ids
        self.cache: dict[Hashable, Query] = {}
        self.positions: dict[Hashable, int] = {}  # where each query stands in `cache`
        self._tokenizer: Tokenizer | None = None
        self._tokenizer_loaded = False
        self._encoder: WordEncoder | None = None

    @property
    def tokenizer(self) -> Tokenizer | None:
        if not self._tokenizer_loaded:
            # ids need a tokenizer only for their names; words need the table's own to exist at all
            self._tokenizer = (self.emb.tokenizer_for_names(self.table)[0] if self.ids
                               else self.emb.tokenizer_for_words(self.table))
            self._tokenizer_loaded = True
        return self._tokenizer

    def __call__(self, item: object) -> Query:
        return self.cache[self.key(item)]

    def key(self, item: object) -> Hashable:
        """Resolve `item` on its own, once, and give the key it is cached under."""
        return self.keys([item])[0]

    def keys(self, items: Sequence[object]) -> tuple[Hashable, ...]:
        """Resolve `items` together (words in one form), each once, and give the keys they are cached under."""
        if self.ids:
            texts = tuple(str(item).strip() for item in items)
            for text, item in zip(texts, items):
                if text not in self.cache:
                    self._add(text, self.resolve_id(item))
            return texts
        found: list[Hashable] = []
        for lookup in self.lookup([word_text(item) for item in items]):
            key = (lookup.word, lookup.choice)  # a word has one Query per form it was looked up in
            if key not in self.cache:
                self._add(key, self.query(lookup))
            found.append(key)
        return tuple(found)

    def _add(self, key: Hashable, query: Query) -> None:
        self.cache[key] = query
        self.positions[key] = len(self.positions)

    def resolve_id(self, item: object) -> Query:
        token_id = parse_id(item)
        check_id(token_id, self.rows)
        return Query(str(item).strip(), (token_id,), (token_name(self.tokenizer, token_id),))

    def lookup(self, words: Sequence[str]) -> tuple[WordLookup, ...]:
        tokenizer = self.tokenizer
        if tokenizer is None:
            raise TokenError(Message(f"expected a tokenizer to look up {quote(words[0])}, found none beside the "
                                     "checkpoint: pass ", Option("tokenizer", metavar="FILE"), ", or use ",
                                     Option("ids", True)), option="tokenizer")
        if self._encoder is None:
            self._encoder = WordEncoder(tokenizer)
        return lookup_words(tokenizer, words, exact=self.asked.exact, allow_unk=self.asked.allow_unk,
                            encoder=self._encoder)

    def query(self, found: WordLookup) -> Query:
        word = found.word
        for token_id in found.ids:
            check_id(int(token_id), self.rows, word)
        if len(found.ids) > 1 and not self.merge:
            pieces = " ".join(quote(t) for t in found.tokens)
            raise TokenError(Message(f"expected {quote(word)} to be one token, found {len(found.ids)} ({pieces}); "
                                     f"merging them is turned off (", Option("merge", False), ")"), option="merge")
        return Query(word, tuple(int(i) for i in found.ids), tuple(found.tokens), found.unknown, found.form,
                     choice=found.choice, space_id=found.space_id)


def lookup_note(query: Query) -> str | None:
    """Everything to say about how one word on its own was looked up (for answers about one word): the space
    left out, the form chosen, the unknown token."""
    said = (space_sentence(query.text, query.space_id) if query.space_id is not None else None,
            form_sentence(query.form, query.choice) if query.form is not None and query.choice is not None else None,
            query.note)
    return joined("; ", filter(None, said)) or None


def space_note(queries: Sequence[Query]) -> str | None:
    """One sentence for a whole answer: the space before its words is a token of its own and was left out (said
    once, not for every word); None when no word's space was."""
    words = [query for query in queries if query.form is not None and not query.text[0].isspace()]
    left_out = [query for query in words if query.space_id is not None]
    if not left_out:
        return None
    space_id = left_out[0].space_id
    if len(left_out) == len(words):
        return f"the space is a token of its own (id {space_id}); words are looked up without the space before them"
    named = ", ".join(quote(query.text) for query in left_out[:5]) + (
        f" and {len(left_out) - 5:,} more" if len(left_out) > 5 else "")
    return f"the space before {named} is a token of its own (id {space_id}), so it was left out"


def merge_note(query: Query) -> str | None:
    if not query.merged:
        return None
    pieces = ", ".join(f"{i} {quote(t)}" for i, t in zip(query.ids, query.tokens))
    return f"{quote(query.text)} is {len(query.ids)} tokens ({pieces}): its vector is the mean of their rows"


def query_vectors(table: np.ndarray, queries: Sequence[Query], center: np.ndarray | None) -> np.ndarray:
    """One float64 row per query: the mean of its token rows, less the table's mean row when centering."""
    vectors = np.empty((len(queries), table.shape[1]), dtype=np.float64)
    single = [n for n, q in enumerate(queries) if not q.merged]
    if single:  # one gather for all one-token queries, however many a pairs file holds
        vectors[single] = table[np.array([queries[n].ids[0] for n in single], dtype=np.int64)]
    for n, query in enumerate(queries):
        if query.merged:
            with np.errstate(invalid="ignore"):  # inf and -inf in a column: NaN, which with_reasons explains
                vectors[n] = np.asarray(table[list(query.ids)], dtype=np.float64).mean(axis=0)
    if center is not None:
        vectors -= center
    return vectors


def has_direction(vectors: np.ndarray) -> np.ndarray:
    has: np.ndarray = np.isfinite(vectors).all(axis=1) & (vectors != 0).any(axis=1)
    return has


def vector_reason(rows: np.ndarray, query: Query, centered: bool) -> str:
    """Why this query's vector has no direction (a zero, NaN or Inf row, or pieces that cancel)."""
    for token_id, token in zip(query.ids, query.tokens):
        if not all(math.isfinite(x) for x in rows[token_id]):
            return f"row {token_id} ({quote(token)}) holds NaN or Inf"
    after = " after subtracting the mean row" if centered else ""
    if query.merged:
        return f"the mean of rows {', '.join(map(str, query.ids))} for {quote(query.text)} has zero norm{after}"
    return f"row {query.ids[0]} ({quote(query.tokens[0])}) has zero norm{after}"


def with_reasons(table: np.ndarray, queries: Sequence[Query], vectors: np.ndarray, centered: bool) -> tuple[Query, ...]:
    fine = has_direction(vectors)
    return tuple(q if ok else replace(q, reason=vector_reason(table, q, centered)) for q, ok in zip(queries, fine))


def percentiles(sample: Sequence[float], values: np.ndarray) -> np.ndarray:
    """For each value, the share (0..100) of the sorted sample strictly below it (less TIE); NaN where the value is
    NaN."""
    if len(sample) == 0:
        return np.full(len(values), np.nan)
    below = np.searchsorted(np.asarray(sample), np.asarray(values) - TIE, side="left")
    return np.where(np.isfinite(values), 100.0 * below / len(sample), np.nan)


def finite_or_none(value: float | np.floating) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


# --- similarity ---

def similarity_pairs(emb: Embeddings, pairs: Iterable[Sequence[object]], *, ids: bool = False, exact: bool = False,
                     merge: bool = True, center: bool = False, table: str = "token", baseline: bool = True,
                     allow_unk: bool = False, on_skip: Callable[[str], None] | None = None,
                     remove_top: int | None = None) -> SimilarityResult:
    """Cosine of each (a, b) pair of words (or ids), with the random-pair baseline (one pass over the table,
    cached per file; baseline=False skips it, and the pairs get no percentile), every pair through compute in
    batched calls.
    `pairs` is read once, as it comes (a file streams through). A pair that cannot be used raises TokenError,
    or, when `on_skip` is given, is handed to it as one line saying why and left out. `remove_top` D: the cosines
    (and the baseline) are of the rows in the all-but-the-top space (analysis.all_but_the_top)."""
    return pairs_similarity(emb, pairs, LookupOptions(ids, exact, allow_unk),
                            SimilarityOptions(merge, center, table, baseline, remove_top), on_skip=on_skip)


def pairs_similarity(emb: Embeddings, pairs: Iterable[Sequence[object]], asked_as: LookupOptions = AS_TYPED,
                     how: SimilarityOptions = PLAIN_COSINES, *,
                     on_skip: Callable[[str], None] | None = None) -> SimilarityResult:
    """similarity_pairs, with its options as the two objects a command builds from its flags."""
    chosen = pick_table(emb, how.table)
    resolve = Resolver(emb, chosen, asked_as, merge=how.merge)
    asked = packed("q")  # query positions, two per pair: 16 bytes a pair however many there are
    for n, pair in enumerate(pairs):
        pair = tuple(pair)
        try:
            if len(pair) != 2:
                raise TokenError(f"expected pairs of two words or ids, found {len(pair)} items in pair {n + 1}")
            keys = resolve.keys(pair)  # the two words of a pair in one form
        except TokenError as err:
            if on_skip is None:
                raise
            on_skip(Message(f"pair {n + 1} ({' '.join(quote(item) for item in pair)}): ", message_of(err)))
            continue
        asked.extend(resolve.positions[key] for key in keys)
    return measured(emb, chosen, resolve, asked, center=how.center, baseline=how.baseline, table=how.table,
                    remove_top=how.remove_top)


def measured(emb: Embeddings, chosen: Table, resolve: Resolver, asked: packed[int], *, center: bool, baseline: bool,
             table: str, remove_top: int | None = None) -> SimilarityResult:
    """The cosines of the pairs of query positions in `asked` (two a pair), of the queries `resolve` holds."""
    found = list(resolve.cache.values())
    array, name = chosen.array, chosen.name
    removed = None
    if remove_top:  # the rows of the all-but-the-top space stand for the table from here on
        # imported only when asked: with it come compute.moments and the spectra (six dataclasses made at import)
        from .all_but_the_top import remove_top as all_but_the_top
        removed = all_but_the_top(array, remove_top)
        array, center = removed.table, False
    summed = compute.TableChecksum() if center else None  # the mean row's pass reads the whole table anyway
    center_row = compute.mean_row(array, summed) if center else None
    vectors = query_vectors(array, found, center_row)
    queries = with_reasons(array, found, vectors, center or removed is not None)
    index = np.frombuffer(asked, dtype=np.int64).reshape(-1, 2) if asked else np.empty((0, 2), dtype=np.int64)
    # a block of pairs at a time: compute.pair_cosines gathers two float64 rows per pair (2 GB for a million pairs)
    block = max(1, PAIR_BLOCK_BYTES // (16 * array.shape[1]))
    cosines = np.concatenate([np.empty(0), *(compute.pair_cosines(vectors, index[start:start + block])
                                             for start in range(0, len(index), block))])

    found_baseline = random_pair_baseline(emb, chosen, center_row, summed.value if summed else None, removed) \
        if baseline else None
    shares = percentiles(found_baseline[1], cosines) if found_baseline is not None else np.full(len(cosines), np.nan)
    return SimilarityResult(queries, Pairs(queries, index, cosines, shares),
                            found_baseline[0] if found_baseline is not None else None, center, chosen.role, name,
                            removed, tokenizer_failure(emb, chosen) if resolve.ids else None)


def random_pair_baseline(emb: Embeddings, chosen: Table, center_row: np.ndarray | None,
                         table_checksum: int | None = None,
                         removed: RemovedTop | None = None) -> tuple[Baseline, Sequence[float]]:
    """The baseline and its sorted finite sample: remembered by the session (Embeddings.remembered: from the
    user's cache when the files the table comes from are unchanged since, read without numpy; `table_checksum`,
    the table's CRC-32 where this run has read it whole anyway, must also agree), else from one pass over the
    table (centring is applied block by block inside compute: no centred copy of the table), which also takes
    the table's checksum. `removed`: of the rows in the all-but-the-top space."""
    extra = {"remove_top": removed.removed} if removed is not None else {}

    def measured() -> tuple[Sequence[float], int]:
        """The mean, then the sorted finite sample, and the table's checksum."""
        summed = compute.TableChecksum()
        rows = removed.table if removed is not None else chosen.array
        pairs = compute.random_pairs(rows, n_pairs=BASELINE_PAIRS, seed=BASELINE_SEED, center=center_row,
                                     checksum=summed)
        values = np.concatenate(([pairs.mean], np.sort(pairs.sample[np.isfinite(pairs.sample)])))
        return values, summed.value  # type: ignore[return-value]  # an ndarray is a sequence of floats

    values = emb.remembered("random-pairs", chosen, measured, table_checksum, shape=list(chosen.tensor.shape),
                            center=center_row is not None, pairs=BASELINE_PAIRS, seed=BASELINE_SEED,
                            small_tables="every pair", **extra)
    mean, sample = values[0], values[1:]
    return Baseline(finite_or_none(mean), len(sample), BASELINE_SEED), sample


def similarity(emb: Embeddings, words_or_ids: Sequence[object], *, ids: bool = False, exact: bool = False,
               merge: bool = True, center: bool = False, table: str = "token", baseline: bool = True,
               allow_unk: bool = False, remove_top: int | None = None) -> SimilarityResult:
    """Two words give one pair; more give every pair, in the order given. All the words are looked up in one
    form (lookup.py's rule), chosen for them together."""
    return words_similarity(emb, words_or_ids, LookupOptions(ids, exact, allow_unk),
                            SimilarityOptions(merge, center, table, baseline, remove_top))


def hashable_item(item: object) -> Hashable:
    """A word or id as the list gave it; a list in the list is neither (the lookup says so of other types)."""
    if not isinstance(item, Hashable):
        raise TokenError(f"expected a word (a str) or an id, found {quote(item)}, a {type(item).__name__}")
    return item


def words_similarity(emb: Embeddings, words_or_ids: Sequence[object], asked_as: LookupOptions = AS_TYPED,
                     how: SimilarityOptions = PLAIN_COSINES) -> SimilarityResult:
    """similarity, with its options as the two objects a command builds from its flags."""
    given = word_list(words_or_ids, "words_or_ids")
    items = list(dict.fromkeys(map(hashable_item, given)))  # a word given twice is compared once
    if len(items) < 2:
        raise TokenError(f"expected at least two different words or ids to compare, found {len(items)}")
    chosen = pick_table(emb, how.table)
    resolve = Resolver(emb, chosen, asked_as, merge=how.merge)
    # every word in one form: each pair then does, and the matrix compares one vector per word
    keys = resolve.keys(items)
    asked = packed("q", (resolve.positions[key] for pair in combinations(keys, 2) for key in pair))
    return measured(emb, chosen, resolve, asked, center=how.center, baseline=how.baseline, table=how.table,
                    remove_top=how.remove_top)
