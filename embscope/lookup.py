"""How words become token ids, the same way for every tokenizer (and how an id typed as such is checked).

A word has two forms: word-start, " dog", as it follows a space inside a sentence (GPT-2 stores it as "Ġdog",
SentencePiece as "▁dog"), and plain, "dog", as at the start of a text. Many tokenizers give the two different
ids, so the words compared together (the two of a pair, every word of one `similarity A B C`) are looked up
in ONE form, chosen for them by this rule, first difference wins:
1. a form the tokenizer can encode every word in;
2. a form in which no word becomes the unknown token ([UNK], <unk>);
3. a form in which every word is one token;
4. the form with fewer tokens in all;
5. word-start, the form a word takes inside a sentence.
When every word has the same ids in both forms the choice is "either" (BERT strips spaces; a SentencePiece
model adds the "▁" itself). Where the tokenizer makes the space a token of its own (" dog" = [space] + "dog",
as nlm's byte BPE does), that token is left out of the word-start form: it stands for the space, not the word.
Where " dog" and "dog" give the same ids, the word-start form is taken from inside a sentence ("a dog" less the
ids of "a"): a SentencePiece model without its dummy prefix that removes extra whitespace strips the space of
" dog", yet gives "▁dog" after another word. A word typed with leading whitespace (" dog", " ") is already in the
form it was given and is encoded as it is, and so is every word with ``exact``.

A word of several tokens keeps all of them; callers say how they combined them. A word that becomes the
unknown token has no row of its own: it is refused, naming the word and the token, unless the caller allows
it (then the note says so). A word the tokenizer itself refuses (a library's ValueError) is a TokenError.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from embscope.core.errors import Message, Option, OptionError, TokenError, joined, message_of
from embscope.core.text import quote
from embscope.core.tokenizer import Tokenizer
from embscope.digits import whole_number
from embscope.naming import token_name

WORD_START, PLAIN, EITHER, AS_GIVEN = "word-start", "plain", "either", "as given"
I = TypeVar("I", bound=Iterable[object])
SENTENCE_START = "a"  # the word a word-start form is taken after, where a leading space alone is stripped


@dataclass(frozen=True)
class FormChoice:
    """The form the words looked up together were encoded in (WORD_START, PLAIN, EITHER or AS_GIVEN), and
    the rule that chose it, as a phrase for the user."""

    name: str
    reason: str


EXACT = FormChoice(AS_GIVEN, "each word is encoded exactly as given")


@dataclass(frozen=True)
class WordLookup:
    """A word as the tokenizer took it: the ids and tokens of the form that was encoded."""

    word: str
    ids: tuple[int, ...]
    tokens: tuple[str, ...]
    form: str  # the exact string that was encoded, e.g. " dog" or "dog"
    note: str | None  # everything to say about this word's lookup, in one sentence; None when nothing
    choice: FormChoice = EXACT  # the form chosen for the words looked up together, and why
    space_id: int | None = None  # the space token left out before the word (a token of its own), if one was
    unknown: str | None = None  # the sentence saying the word became the unknown token (allow_unk), if it did


@dataclass(frozen=True, eq=False)  # compared nowhere: no __eq__ and __hash__ to build at import
class WordForms:
    """A word encoded in both forms, before one is chosen: the ids of each, or why the tokenizer could not."""

    word: str
    plain: tuple[int, ...] | None
    word_start: tuple[int, ...] | None  # the space token, when it is a token of its own, left out
    plain_error: TokenError | None = None
    word_start_error: TokenError | None = None
    space_id: int | None = None  # the space token left out of `word_start`

    @property
    def same(self) -> bool:
        return self.plain == self.word_start


class WordEncoder:
    """Encodes words for one tokenizer in both forms, remembering each word (a pairs file repeats them)."""

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer
        self._space: tuple[int, ...] | None = None
        self._before: tuple[int, ...] | None = None  # the ids of SENTENCE_START, () when it cannot be encoded
        self._forms: dict[str, WordForms] = {}

    def encode(self, text: str, word: str) -> tuple[int, ...]:
        """The ids of `text` (a form of `word`); a tokenizer's own complaint is a TokenError, and so is no ids."""
        try:
            ids = tuple(self.tokenizer.encode(text))
        except (ValueError, KeyError, UnicodeError) as err:  # raised by the tokenizer library, not by us
            raise TokenError(f"expected a word the tokenizer can encode, found {quote(text)} ({err})") from None
        if not ids:
            raise TokenError(f"the word {word!r} encodes to no tokens with the {self.tokenizer.kind} tokenizer "
                             f"{self.tokenizer.path.name}")
        return ids

    def space(self) -> tuple[int, ...]:
        if self._space is None:
            try:
                self._space = tuple(self.tokenizer.encode(" "))
            except (TokenError, ValueError, KeyError, UnicodeError):  # a vocabulary without the space
                self._space = ()
            if self._space == (getattr(self.tokenizer, "unk_id", None),):  # no token for it: the unknown one
                self._space = ()
        return self._space

    def forms(self, word: str) -> WordForms:
        found = self._forms.get(word)
        if found is None:
            found = self._forms[word] = self._both_forms(word)
        return found

    def _both_forms(self, word: str) -> WordForms:
        if not word:
            raise TokenError("expected a word to look up, found an empty string")
        plain, plain_error = self._attempt(word, word)
        if word[0].isspace():  # typed with its space, or the space itself: already in the form it was given
            if plain_error is not None:
                raise plain_error
            return WordForms(word, plain, plain)
        spaced, spaced_error = self._attempt(" " + word, word)
        if spaced is not None and spaced == plain:
            spaced = self._in_a_sentence(word) or spaced
        space, space_id = self.space(), None
        if spaced is not None and len(space) == 1 and len(spaced) > 1 and spaced[0] == space[0]:
            spaced, space_id = spaced[1:], space[0]  # the space is a token of its own: it is not the word
        if plain is None and spaced is None:
            assert plain_error is not None
            raise plain_error
        return WordForms(word, plain, spaced, plain_error, spaced_error, space_id)

    def _in_a_sentence(self, word: str) -> tuple[int, ...] | None:
        """The ids of " word" after another word (SENTENCE_START), when that word's own ids begin them; None where
        they do not (a merge across the two) or the tokenizer cannot encode them."""
        if self._before is None:
            self._before = self._attempt(SENTENCE_START, SENTENCE_START)[0] or ()
        before = self._before or None
        found, _ = self._attempt(f"{SENTENCE_START} {word}", word)
        if before is None or found is None or len(found) <= len(before) or found[:len(before)] != before:
            return None
        return found[len(before):]

    def _attempt(self, text: str, word: str) -> tuple[tuple[int, ...] | None, TokenError | None]:
        try:
            return self.encode(text, word), None
        except TokenError as err:
            return None, err


Encoded = dict[str, list[tuple[int, ...]]]  # form name -> the ids of each word in that form
OTHER_FORM = {WORD_START: PLAIN, PLAIN: WORD_START}


def choose_form(forms: Sequence[WordForms], unk_id: int | None) -> FormChoice:
    """The one form for these words, by the module's rule."""
    if all(found.same for found in forms):
        return FormChoice(EITHER, f"{_subject(forms)} the same ids with or without a space before")
    candidates = {WORD_START: [found.word_start for found in forms], PLAIN: [found.plain for found in forms]}
    encoded: Encoded = {name: [word_ids for word_ids in ids if word_ids is not None]
                        for name, ids in candidates.items()}
    return (_encodable_rule(forms, candidates) or _known_rule(forms, encoded, unk_id)
            or _single_rule(forms, encoded) or _fewer_rule(encoded))


def _encodable_rule(forms: Sequence[WordForms],
                    candidates: dict[str, list[tuple[int, ...] | None]]) -> FormChoice | None:
    """1. a form some word cannot be encoded in is out; when no form holds every word, the plain form's complaint."""
    failed = {name: [found for found, word_ids in zip(forms, ids) if word_ids is None]
              for name, ids in candidates.items()}
    if failed[PLAIN] and failed[WORD_START]:  # 1. no form holds every word: the plain form's complaint
        raise failed[PLAIN][0].plain_error or TokenError(f"cannot encode {failed[PLAIN][0].word!r}")
    for name, lacking in failed.items():  # 1. a form some word cannot be encoded in is out
        if lacking:
            error = lacking[0].word_start_error if name == WORD_START else lacking[0].plain_error
            said = message_of(error) if error is not None else "None"
            return FormChoice(OTHER_FORM[name], Message(f"the tokenizer cannot encode the {name} form of "
                                                        f"{lacking[0].word!r} (", said, ")"))
    return None


def _known_rule(forms: Sequence[WordForms], encoded: Encoded, unk_id: int | None) -> FormChoice | None:
    """2. no unknown token."""
    def unknown(name: str) -> list[str]:
        return [found.word for found, ids in zip(forms, encoded[name]) if unk_id is not None and unk_id in ids]

    for name in (WORD_START, PLAIN):  # 2. no unknown token
        other = OTHER_FORM[name]
        if unknown(other) and not unknown(name):
            return FormChoice(name, f"in the {other} form {unknown(other)[0]!r} becomes the unknown token")
    return None


def _single_rule(forms: Sequence[WordForms], encoded: Encoded) -> FormChoice | None:
    """3. one token a word."""
    def single(name: str) -> bool:
        return all(len(ids) == 1 for ids in encoded[name])

    ones = _one_token(forms)
    if single(WORD_START) and single(PLAIN):  # 3. one token each, in either form: 5. decides
        return FormChoice(WORD_START, f"{ones} in either form; word-start is the form a word takes inside a sentence")
    for name in (WORD_START, PLAIN):
        if single(name):
            return FormChoice(name, f"{ones} in it, not in the {OTHER_FORM[name]} form")
    return None


def _fewer_rule(encoded: Encoded) -> FormChoice:
    """4. fewer tokens; 5. else the word-start form."""
    def total(name: str) -> int:
        return sum(len(ids) for ids in encoded[name])

    for name in (WORD_START, PLAIN):  # 4. fewer tokens
        if total(name) < total(OTHER_FORM[name]):
            return FormChoice(name, f"fewer tokens in all than in the {OTHER_FORM[name]} form")
    return FormChoice(WORD_START, "as many tokens in all as in the plain form; word-start is the form a word takes "
                                  "inside a sentence")


def _subject(forms: Sequence[WordForms]) -> str:
    return {1: "the word has", 2: "both words have"}.get(len(forms), "every word has")


def _one_token(forms: Sequence[WordForms]) -> str:
    return {1: "the word is one token", 2: "both words are one token each"}.get(len(forms), "every word is one token")


def lookup_words(tokenizer: Tokenizer, words: Sequence[str], *, exact: bool = False, allow_unk: bool = False,
                 encoder: WordEncoder | None = None) -> tuple[WordLookup, ...]:
    """The token ids of ``words``, looked up together in one form (see the module); ``exact`` encodes each as
    given; ``allow_unk`` lets a word that becomes the unknown token through, with a note, instead of raising
    TokenError. ``encoder`` remembers words between calls (it must be for the same tokenizer)."""
    encoder = encoder or WordEncoder(tokenizer)
    words = [typed_word(word) for word in words]
    if exact:
        return tuple(_checked(tokenizer, word, word, encoder.encode(word, word) if word else _empty(), EXACT, None,
                              allow_unk) for word in words)
    forms = [encoder.forms(word) for word in words]
    choice = choose_form(forms, getattr(tokenizer, "unk_id", None))
    found = []
    for word_forms in forms:
        if choice.name == PLAIN or (choice.name == EITHER and word_forms.space_id is None):
            form, ids, space_id = word_forms.word, word_forms.plain, None
        else:  # word-start, or either where that form's ids are the plain ones with the space left out
            start = word_forms.space_id is None and not word_forms.word[0].isspace()
            form, ids, space_id = (" " + word_forms.word if start else word_forms.word), word_forms.word_start, \
                word_forms.space_id
        assert ids is not None  # choose_form picked a form every word could be encoded in
        found.append(_checked(tokenizer, word_forms.word, form, ids, choice, space_id, allow_unk))
    return tuple(found)


def word_text(item: object) -> str:
    """A word given to a function that also takes ids: an integer is the word its digits spell; anything else
    that is no str is refused, as typed_word refuses it."""
    if isinstance(item, numbers.Integral) and not isinstance(item, bool):
        return str(item)
    return typed_word(item)  # type: ignore[arg-type]  # checked there


def typed_word(word: str) -> str:
    """A word as the user typed it: under a locale that is not UTF-8 (LC_ALL=POSIX), Python hands the command
    line's UTF-8 bytes over as lone surrogates ('caf\\udcc3\\udca9'), which no tokenizer can encode; their bytes are
    the word's. Bytes that are not UTF-8 are refused as such, and so is a word that is no str."""
    if not isinstance(word, str):  # a list or None would be looked up as its repr
        raise TokenError(f"expected a word (a str), found {quote(word)}, a {type(word).__name__}")
    try:
        word.encode("utf-8")
        return word
    except UnicodeEncodeError:
        pass
    try:
        return os.fsencode(word).decode("utf-8")
    except (UnicodeError, ValueError):
        raise TokenError(f"expected a word in UTF-8, found {quote(word)}, whose bytes are not UTF-8") from None


def lookup_word(tokenizer: Tokenizer, word: str, *, exact: bool = False, allow_unk: bool = False) -> WordLookup:
    """The token ids for ``word`` on its own (lookup_words for one word)."""
    return lookup_words(tokenizer, [word], exact=exact, allow_unk=allow_unk)[0]


def _empty() -> tuple[int, ...]:
    raise TokenError("expected a word to look up, found an empty string")


def space_sentence(word: str, space_id: int) -> str:
    """What a word's lookup says when the space before it is a token of its own and was left out."""
    return f"the space before {word!r} is a token of its own (id {space_id}), so it was left out"


def form_sentence(form: str, choice: FormChoice) -> str | None:
    """What a word's lookup says about the form it was encoded in, when a form was chosen."""
    if choice.name not in (WORD_START, PLAIN):
        return None
    return Message(f"used the {choice.name} form {form!r} (", choice.reason, ")")


def _checked(tokenizer: Tokenizer, word: str, form: str, ids: tuple[int, ...], choice: FormChoice,
             space_id: int | None, allow_unk: bool) -> WordLookup:
    unk_id = getattr(tokenizer, "unk_id", None)  # None: the tokenizer has no unknown token
    unknown = None
    if unk_id is not None and unk_id in ids:
        unk = quote(token_name(tokenizer, unk_id))
        if not allow_unk:
            raise TokenError(Message(f"expected a word the tokenizer can represent, found {quote(word)}, which the "
                                     f"{tokenizer.kind} tokenizer maps to its unknown token {unk} (id {unk_id}): ",
                                     *_piece_hint(tokenizer, word, unk_id),
                                     "pass ", Option("allow_unk", True), " to use that row anyway"),
                             option="allow_unk")
        unknown = f"{quote(word)} became the unknown token {unk} (id {unk_id}), the row shared by every unknown word"
    said = (space_sentence(word, space_id) if space_id is not None else None, form_sentence(form, choice), unknown)
    tokens = tuple(token_name(tokenizer, id) for id in ids)
    return WordLookup(word, ids, tokens, form, joined("; ", filter(None, said)) or None, choice, space_id, unknown)


def _piece_hint(tokenizer: Tokenizer, word: str, unk_id: int) -> tuple[str | Option, ...]:
    """Where the word is a piece of the vocabulary that the tokenizer's splitting never gives whole (rxnfp's SMILES
    atom '[C@H]' in a vocab.txt read with BERT's splitting): its id, to ask of that row with --ids."""
    piece_id = getattr(tokenizer, "piece_id", None)
    found = piece_id(word) if piece_id is not None else None
    if found is None or found == unk_id:
        return ()
    return (f"it is token {found} of the vocabulary itself, which the tokenizer's splitting never gives whole: pass ",
            Option("ids", True), f" and the id {found} to ask of that row, or ")


def word_list(items: I, option: str) -> I:
    """`items`, the words (or ids) of an argument that takes several, as given (a stream stays one); one string
    given whole is refused, since going through it would ask about each of its characters."""
    if isinstance(items, (str, bytes)):
        raise OptionError(Message("expected a list of words or ids for ", Option(option), f", found the string "
                                  f"{quote(items)}: it would be read one character at a time"), option=option)
    return items


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
