"""How a word becomes token ids, the same way for every tokenizer (and how an id typed as such is checked).

A word inside a sentence usually follows a space, and many tokenizers give " dog" a
token of its own that "dog" at the start of a text does not have. So, unless asked
for the exact form:
1. if " dog" and "dog" encode alike (BERT strips spaces), "dog" is used, no note;
2. if " dog" is one token, that in-sentence form is used;
3. if the tokenizer makes the space a token of its own (" dog" = [space] + "dog", as
   nlm's byte BPE does), "dog" is used and the note says the space was left out;
4. otherwise "dog" is encoded as given.
A word of several tokens keeps all of them; callers say how they combined them.
A word that becomes the tokenizer's unknown token ([UNK], <unk>) has no row of its own: it is
refused, naming the word and the token, unless the caller allows it (then the note says so). A word the
tokenizer itself refuses (a library's ValueError) is a TokenError that says so.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from embscope.digits import whole_number
from embscope.errors import TokenError
from embscope.naming import token_name
from embscope.text import quote
from embscope.tokenizers.base import Tokenizer


@dataclass(frozen=True)
class WordLookup:
    """A word as the tokenizer took it: the ids and tokens of the form that was encoded."""

    word: str
    ids: tuple[int, ...]
    tokens: tuple[str, ...]
    form: str  # the exact string that was encoded, e.g. " dog" or "dog"
    note: str | None  # one sentence for the user on how the form was chosen; None when nothing to say


def lookup_word(tokenizer: Tokenizer, word: str, *, exact: bool = False, allow_unk: bool = False) -> WordLookup:
    """The token ids for ``word``; ``exact`` encodes it as given, with no space rules; ``allow_unk`` lets a word
    that becomes the unknown token through, with a note, instead of raising TokenError. A tokenizer's own
    complaint about the text is a TokenError too."""
    try:
        found = _lookup(tokenizer, word, exact)
    except (ValueError, KeyError, UnicodeError) as err:  # raised by the tokenizer library, not by us
        raise TokenError(f"expected a word the tokenizer can encode, found {quote(word)} ({err})") from None
    unk_id = getattr(tokenizer, "unk_id", None)  # None: the tokenizer has no unknown token
    if unk_id is None or unk_id not in found.ids:
        return found
    unk = quote(token_name(tokenizer, unk_id))
    if not allow_unk:
        raise TokenError(f"expected a word the tokenizer can represent, found {quote(word)}, which the "
                         f"{tokenizer.kind} tokenizer maps to its unknown token {unk} (id {unk_id}): "
                         "pass --allow-unk to use that row anyway")
    note = f"{quote(word)} became the unknown token {unk} (id {unk_id}), the row shared by every unknown word"
    return WordLookup(found.word, found.ids, found.tokens, found.form, "; ".join(filter(None, (found.note, note))))


def parse_id(text: object) -> int:
    """A token id as typed (or given as an integer), or a TokenError; typed ids are read by digits.whole_number."""
    if isinstance(text, numbers.Integral) and not isinstance(text, bool):  # numpy's integers are Integral too
        return int(text)
    found = whole_number(str(text).strip())
    if found is None:
        raise TokenError(f"expected a token id (a whole number), found {quote(text)}")
    return found


def check_id(token_id: int, rows: int, word: str | None = None) -> None:
    """A token id names a row of a table of `rows` rows; `word`: the word it came from, for the message."""
    if not 0 <= token_id < rows:
        where = f" for {quote(word)}" if word is not None else ""
        raise TokenError(f"expected token ids 0..{rows - 1} (the table has {rows} rows), found {token_id}{where}")


def _lookup(tokenizer: Tokenizer, word: str, exact: bool) -> WordLookup:
    if not word:
        raise TokenError("expected a word to look up, found an empty string")
    plain = tokenizer.encode(word)
    if not plain:
        raise TokenError(
            f"the word {word!r} encodes to no tokens with the {tokenizer.kind} tokenizer {tokenizer.path.name}"
        )
    if exact:
        return _result(tokenizer, word, word, plain, None)
    spaced_form = " " + word
    spaced = tokenizer.encode(spaced_form)
    if spaced == plain:
        return _result(tokenizer, word, word, plain, None)
    if len(spaced) == 1:
        note = f"used the in-sentence form {spaced_form!r} (one token)"
        return _result(tokenizer, word, spaced_form, spaced, note)
    space = tokenizer.encode(" ")
    if len(space) == 1 and spaced == space + plain:
        note = f"the space before {word!r} is a token of its own (id {space[0]}), so it was left out"
        return _result(tokenizer, word, word, plain, note)
    return _result(tokenizer, word, word, plain, None)


def _result(tokenizer: Tokenizer, word: str, form: str, ids: list[int], note: str | None) -> WordLookup:
    tokens = tuple(token_name(tokenizer, id) for id in ids)
    return WordLookup(word=word, ids=tuple(ids), tokens=tokens, form=form, note=note)
