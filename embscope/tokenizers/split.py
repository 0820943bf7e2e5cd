"""Split patterns read from tokenizer files (minbpe's pattern line, GPT-2's pattern), compiled so
that a hostile one costs one line of error instead of a hang.

Python's ``re`` backtracks without bound and cannot be interrupted: a pattern such as
``(?:(?:.*)*)*X`` takes forever on a six-letter word and Ctrl-C does nothing. So:
- a pattern whose shape bounds re's work runs in ``re`` (no repeat inside another repeat, no
  alternation inside a repeat, no back-reference, at most one repeat in any sequence: each match
  attempt is then linear in the text). nlm's and the sample's patterns are of this shape, and
  ``re`` costs no import;
- any other pattern (GPT-2's and GPT-4's ``\\p{L}``, hostile ones) runs in the ``regex`` package
  (the ``regex`` extra), under its ``timeout``;
- without ``regex``, such a pattern is refused in one line that names the package.

The two engines read some of a pattern's words differently: ``\\w``, ``\\s``, ``\\d`` and ``\\b`` stand
for other characters (re's ``\\w`` takes "²" and "½", regex's the combining accents and the ZWJ; re's ``\\s``
takes U+001C..U+001F), and case-insensitive matching folds otherwise. minbpe splits with regex, nlm's trainer
(sample_checkpoints/training/train.py) writes the same file with re, and the file does not say which: where such a
pattern cuts a text differently in the two, the text is refused rather than cut either way (and without
``regex``, where the text holds a character they may read differently).
"""

from __future__ import annotations

import importlib
import re
import time
from typing import Any

from embscope.core.errors import MissingPackageError, TokenError, TokenizerError, needs_package

# a real split pattern cuts a word in microseconds and 100,000 characters in well under a second; a
# hostile one is stopped before a user gives up
MATCH_TIMEOUT_S = 1.0
SLOW_MATCH_S = 0.01  # CPU time of a match that counts against the timeout (a real one takes microseconds)
CHARS_PER_EXTRA_SECOND = 100_000
# the longest real split pattern (tiktoken's o200k) is about 400 characters
MAX_PATTERN_CHARS = 10_000
# \p{L} and friends: the regex package reads them, re does not
UNICODE_CLASS = re.compile(r"\\[pP]\{")
# what compiling a hostile pattern raises besides the engine's own error: a{4294967296} overflows re,
# thousands of nested groups exhaust the parser's recursion
COMPILE_FAILURES = (OverflowError, RecursionError, MemoryError, ValueError)
# regex unrolls counted repeats when it compiles: (?:(?:a{1000}){1000}){1000} would take gigabytes. The
# counts of all {m,n} in a pattern multiply to at most this (real patterns: \p{N}{1,3}, so 3)
MAX_REPEAT_PRODUCT = 100_000
_COUNTED_REPEAT = re.compile(r"\{(\d*)(?:,(\d*))?\}")
# what re and regex read differently: class escapes (an escaped backslash before a letter is caught too: that
# costs a second match, never a wrong cut), and the case-insensitive flag
_ENGINE_WORDS = re.compile(r"\\[wWsSdDbB]|\(\?[a-zA-Z]*i")
# text both engines read alike under any pattern's words: ASCII but the four separators re's \s takes
_SAME_IN_BOTH = re.compile(r"[\x00-\x1b\x20-\x7f]*")


class SplitPattern:
    """A compiled split pattern: ``chunks(text)`` is every match of the pattern in ``text``, in order
    (like minbpe, text the pattern does not match is dropped); ``pieces(text)`` keeps that text too, each
    stretch between matches a piece of its own (llama.cpp's unicode_regex_split, the tokenizers library's
    Split "isolated"). ``engine`` is "re" or "regex"."""

    def __init__(self, pattern: str, compiled: Any, where: str, timeout: float | None, twin: Any = None,
                 unchecked: bool = False):
        """`twin`: the pattern in regex, where re runs it and the two engines may read it differently;
        `unchecked`: they may, and regex is not there to say whether they do for a text."""
        self.pattern = pattern
        self.engine = "re" if timeout is None else "regex"
        self._compiled = compiled
        self._where = where
        self._timeout = timeout
        self._twin = twin
        self._unchecked = unchecked
        self._stopped: str | None = None  # why the pattern was stopped, once it was
        self._slow_seconds = 0.0  # CPU time spent in slow matches so far

    def chunks(self, text: str) -> list[str]:
        if self._timeout is not None:
            return [match.group(0) for match in self._regex_matches(self._compiled, text)]
        if self._unchecked and not _SAME_IN_BOTH.fullmatch(text):
            raise TokenError(
                f"the split pattern in {self._where} reads \\w, \\s, \\d or case differently in Python's re and in "
                f"the regex package (minbpe's), and {text[:40]!r} holds characters where they differ: telling "
                + needs_package("which cut the tokenizer was trained with", "regex", "regex"))
        found = [match.group(0) for match in self._compiled.finditer(text)]
        if self._twin is not None and [match.group(0) for match in self._regex_matches(self._twin, text)] != found:
            raise TokenError(
                f"the split pattern in {self._where} cuts {text[:40]!r} one way in Python's re and another in the "
                "regex package (minbpe's), and the file does not say which its tokenizer was trained with: its ids "
                "for this text cannot be told")
        return found

    def pieces(self, text: str) -> list[str]:
        """Every match and every stretch between matches, in order (no twin check: the callers name one engine)."""
        out, end = [], 0
        matches = self._compiled.finditer(text) if self._timeout is None else self._regex_matches(self._compiled, text)
        for match in matches:
            start = match.start()
            if start > end:
                out.append(text[end:start])
            if match.end() > start:  # an empty match cuts the text without making a piece
                out.append(match.group(0))
            end = match.end()
        if end < len(text):
            out.append(text[end:])
        return out

    def _regex_matches(self, compiled: Any, text: str) -> list[Any]:
        """The matches in regex, under the timeout. Raises TokenizerError once the pattern has run into it, on
        this text or an earlier one: a pattern that backtracks without end on one text does so on the next alike,
        so the timeout is paid once and the tokenizer is refused from then on (undertrained encodes every token,
        one second each). Slow matches short of the timeout count against it too, in CPU time (a busy machine's
        waits are not the pattern's): 'aa', 'aaa', ... each a little under it would add up to minutes."""
        if self._stopped is not None:
            raise TokenizerError(self._stopped)
        budget = self._timeout or MATCH_TIMEOUT_S
        timeout = budget + len(text) / CHARS_PER_EXTRA_SECOND  # regex times the whole iteration
        started = time.thread_time()
        try:
            found = list(compiled.finditer(text, timeout=timeout))
        except TimeoutError:
            self._stopped = (f"the split pattern in {self._where} took over {timeout:.3g} s on {text[:40]!r} and "
                             "was stopped: it backtracks without end, so this tokenizer cannot encode text")
            raise TokenizerError(self._stopped) from None
        spent = time.thread_time() - started
        if spent > SLOW_MATCH_S + len(text) / CHARS_PER_EXTRA_SECOND:
            self._slow_seconds += spent
            if self._slow_seconds > budget:
                self._stopped = (f"the split pattern in {self._where} took {self._slow_seconds:.3g} s over texts such "
                                 f"as {text[:40]!r} and was stopped: it backtracks without end, so this tokenizer "
                                 "cannot encode text")
        return found


def compile_split_pattern(pattern: str, where: str, ascii_classes: bool = False) -> SplitPattern:
    """Compile a split pattern from the file named ``where``; ``ascii_classes``: \\d, \\w, \\s and \\b match
    ASCII only, as in C++'s std::regex. Raises TokenizerError for a pattern that is broken or too long,
    MissingPackageError when it needs the regex package and that is missing."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise TokenizerError(
            f"expected a split pattern of at most {MAX_PATTERN_CHARS:,} characters in {where}, "
            f"found {len(pattern):,}"
        )
    if counted_repeat_product(pattern) > MAX_REPEAT_PRODUCT:
        raise TokenizerError(
            f"expected the counted repeats ({{m,n}}) of the split pattern in {where} to multiply to at most "
            f"{MAX_REPEAT_PRODUCT:,}, found more"
        )
    flags = re.ASCII if ascii_classes else 0
    try:
        compiled = re.compile(pattern, flags)
        re_error: BaseException | None = None
    except (re.error, *COMPILE_FAILURES) as err:
        compiled, re_error = None, err
    risk = backtracking_risk(pattern) if compiled is not None else None
    if compiled is not None and risk is None:
        if ascii_classes or not _ENGINE_WORDS.search(pattern):  # std::regex's ASCII classes are no guess
            return SplitPattern(pattern, compiled, where, None)
        try:
            import regex
        except ImportError:
            return SplitPattern(pattern, compiled, where, None, unchecked=True)
        try:
            return SplitPattern(pattern, compiled, where, None, twin=regex.compile(pattern))
        except (regex.error, *COMPILE_FAILURES):  # regex cannot read it: minbpe could not have been trained so
            return SplitPattern(pattern, compiled, where, None)
    try:
        import regex
    except ImportError:
        if re_error is None:
            raise MissingPackageError(f"the split pattern in {where} {risk}, which Python's re could take forever to "
                                      "match; matching it safely", "regex", "regex") from None
        if isinstance(re_error, re.error) and UNICODE_CLASS.search(pattern):
            raise MissingPackageError(f"the split pattern in {where}", "regex", "regex",
                                      detail=f"Python's re cannot read it: {re_error}") from None
        raise _broken(pattern, where, re_error) from None
    try:
        return SplitPattern(pattern, regex.compile(pattern, regex.ASCII if ascii_classes else 0), where, MATCH_TIMEOUT_S)
    except (regex.error, *COMPILE_FAILURES) as err:
        raise _broken(pattern, where, err) from None


def counted_repeat_product(pattern: str) -> int:
    """What regex would unroll: the largest product of the counts of {m,n} repeats nested in one another,
    read with re's parser (alternatives side by side, llama.cpp's \\s{512}(?!\\S)|\\s{256}(?!\\S)|..., do
    not multiply). A pattern re cannot read (\\p{L}) counts every {m,n} in it as nested."""
    try:
        sre = importlib.import_module("re._constants")
        tree = importlib.import_module("re._parser").parse(pattern)
    except (ImportError, AttributeError, re.error, *COMPILE_FAILURES):
        product = 1
        for match in _COUNTED_REPEAT.finditer(pattern):
            for number in match.groups():
                if number:
                    product = min(product * max(int(number[:9]), 1), MAX_REPEAT_PRODUCT + 1)
        return product
    return _nested_product(sre, list(tree))


def _nested_product(sre: Any, items: list[Any]) -> int:
    repeats = {sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", sre.MAX_REPEAT)}
    largest = 1
    for op, arg in items:
        if op in repeats:
            low, high, body = arg
            count = max(low if high == sre.MAXREPEAT else high, 1)
            largest = max(largest, min(count * _nested_product(sre, list(body)), MAX_REPEAT_PRODUCT + 1))
        elif op == sre.BRANCH:
            largest = max([largest] + [_nested_product(sre, list(branch)) for branch in arg[1]])
        elif op == sre.SUBPATTERN:
            largest = max(largest, _nested_product(sre, list(arg[-1])))
        elif op in (sre.ASSERT, sre.ASSERT_NOT):
            largest = max(largest, _nested_product(sre, list(arg[1])))
        elif op == sre.ATOMIC_GROUP:
            largest = max(largest, _nested_product(sre, list(arg)))
    return largest


def _broken(pattern: str, where: str, err: BaseException) -> TokenizerError:
    shown = pattern if len(pattern) <= 80 else pattern[:80] + "..."
    detail = str(err).splitlines()[0] if str(err) else type(err).__name__
    return TokenizerError(f"expected a regular expression as the split pattern in {where}, found {shown!r}: {detail}")


# ------------------------------------------------------------------ shape check for re

# with one repeat per sequence, each match attempt is linear in the text; with k, it can grow as its k-th power
MAX_REPEATS_IN_SEQUENCE = 1


def backtracking_risk(pattern: str) -> str | None:
    """Why ``re`` might backtrack without bound on this pattern (a phrase), or None when its shape
    bounds the work. Reads the pattern with re's own parser, so it sees what re will run."""
    try:
        sre = importlib.import_module("re._constants")
        tree = importlib.import_module("re._parser").parse(pattern)
    except (ImportError, AttributeError, re.error, *COMPILE_FAILURES):  # moved in another Python: not provably safe
        return "cannot be checked"
    try:
        repeats = _Shape(sre).repeats_in_sequence(list(tree), inside_repeat=False)
    except _Risky as risk:
        return str(risk)
    if repeats > MAX_REPEATS_IN_SEQUENCE:
        return f"has {repeats} repeats in one sequence"
    return None


class _Risky(Exception):
    pass


class _Shape:
    """Walks re's parse tree: raises _Risky for nested repeats, repeated alternations and
    back-references, else counts the repeats (of more than one) a match may try in one sequence."""

    def __init__(self, sre: Any):
        self.sre = sre
        self.repeats = {sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", sre.MAX_REPEAT)}

    def repeats_in_sequence(self, items: list[Any], inside_repeat: bool) -> int:
        sre, total = self.sre, 0
        for op, arg in items:
            if op in self.repeats:
                _, high, body = arg
                if high > 1 and inside_repeat:
                    raise _Risky("nests one repeat inside another")
                total += (high > 1) + self.repeats_in_sequence(list(body), inside_repeat or high > 1)
            elif op == sre.BRANCH:
                if inside_repeat:
                    raise _Risky("repeats an alternation")
                total += max(self.repeats_in_sequence(list(branch), inside_repeat) for branch in arg[1])
            elif op in (sre.GROUPREF, sre.GROUPREF_EXISTS):
                raise _Risky("uses a back-reference")
            elif op == sre.SUBPATTERN:
                total += self.repeats_in_sequence(list(arg[-1]), inside_repeat)
            elif op in (sre.ASSERT, sre.ASSERT_NOT):
                total += self.repeats_in_sequence(list(arg[1]), inside_repeat)
            elif op == sre.ATOMIC_GROUP:
                total += self.repeats_in_sequence(list(arg), inside_repeat)
        return total
