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
"""

from __future__ import annotations

import importlib
import re
import time
from typing import Any

from embscope.errors import CheckpointError, EmbscopeError

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
REGEX_EXTRA = "pip install 'embscope[regex]'"
# regex unrolls counted repeats when it compiles: (?:(?:a{1000}){1000}){1000} would take gigabytes. The
# counts of all {m,n} in a pattern multiply to at most this (real patterns: \p{N}{1,3}, so 3)
MAX_REPEAT_PRODUCT = 100_000
_COUNTED_REPEAT = re.compile(r"\{(\d*)(?:,(\d*))?\}")


class SplitPattern:
    """A compiled split pattern: ``chunks(text)`` is every match of the pattern in ``text``, in order
    (like minbpe, text the pattern does not match is dropped). ``engine`` is "re" or "regex"."""

    def __init__(self, pattern: str, compiled: Any, where: str, timeout: float | None):
        self.pattern = pattern
        self.engine = "re" if timeout is None else "regex"
        self._compiled = compiled
        self._where = where
        self._timeout = timeout
        self._stopped: str | None = None  # why the pattern was stopped, once it was
        self._slow_seconds = 0.0  # CPU time spent in slow matches so far

    def chunks(self, text: str) -> list[str]:
        """Raises CheckpointError once the pattern has run into its timeout, on this text or an earlier one: a
        pattern that backtracks without end on one text does so on the next alike, so the timeout is paid
        once and the tokenizer is refused from then on (undertrained encodes every token, one second each).
        Slow matches short of the timeout count against it too, in CPU time (a busy machine's waits are not
        the pattern's): 'aa', 'aaa', ... each a little under it would add up to minutes."""
        if self._stopped is not None:
            raise CheckpointError(self._stopped)
        if self._timeout is None:
            return [match.group(0) for match in self._compiled.finditer(text)]
        timeout = self._timeout + len(text) / CHARS_PER_EXTRA_SECOND  # regex times the whole iteration
        started = time.thread_time()
        try:
            found = [match.group(0) for match in self._compiled.finditer(text, timeout=timeout)]
        except TimeoutError:
            self._stopped = (f"the split pattern in {self._where} took over {timeout:.3g} s on {text[:40]!r} and "
                             "was stopped: it backtracks without end, so this tokenizer cannot encode text")
            raise CheckpointError(self._stopped) from None
        spent = time.thread_time() - started
        if spent > SLOW_MATCH_S + len(text) / CHARS_PER_EXTRA_SECOND:
            self._slow_seconds += spent
            if self._slow_seconds > self._timeout:
                self._stopped = (f"the split pattern in {self._where} took {self._slow_seconds:.3g} s over texts such "
                                 f"as {text[:40]!r} and was stopped: it backtracks without end, so this tokenizer "
                                 "cannot encode text")
        return found


def compile_split_pattern(pattern: str, where: str) -> SplitPattern:
    """Compile a split pattern from the file named ``where``. Raises CheckpointError for a pattern
    that is broken or too long, EmbscopeError when it needs the regex package and that is missing."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise CheckpointError(
            f"expected a split pattern of at most {MAX_PATTERN_CHARS:,} characters in {where}, "
            f"found {len(pattern):,}"
        )
    counts = [int(number[:9]) for match in _COUNTED_REPEAT.finditer(pattern) for number in match.groups() if number]
    product = 1
    for count in counts:
        product *= max(count, 1)
        if product > MAX_REPEAT_PRODUCT:
            raise CheckpointError(
                f"expected the counted repeats ({{m,n}}) of the split pattern in {where} to multiply to at most "
                f"{MAX_REPEAT_PRODUCT:,}, found more"
            )
    try:
        compiled = re.compile(pattern)
        re_error: BaseException | None = None
    except (re.error, *COMPILE_FAILURES) as err:
        compiled, re_error = None, err
    risk = backtracking_risk(pattern) if compiled is not None else None
    if compiled is not None and risk is None:
        return SplitPattern(pattern, compiled, where, None)
    try:
        import regex
    except ImportError:
        if re_error is None:
            raise EmbscopeError(
                f"the split pattern in {where} {risk}, which Python's re could take forever to match; "
                f"matching it safely needs the 'regex' package ({REGEX_EXTRA})"
            ) from None
        if isinstance(re_error, re.error) and UNICODE_CLASS.search(pattern):
            raise EmbscopeError(
                f"the split pattern in {where} needs the 'regex' package ({REGEX_EXTRA}); "
                f"Python's re cannot read it: {re_error}"
            ) from None
        raise _broken(pattern, where, re_error) from None
    try:
        return SplitPattern(pattern, regex.compile(pattern), where, MATCH_TIMEOUT_S)
    except (regex.error, *COMPILE_FAILURES) as err:
        raise _broken(pattern, where, err) from None


def _broken(pattern: str, where: str, err: BaseException) -> CheckpointError:
    shown = pattern if len(pattern) <= 80 else pattern[:80] + "..."
    detail = str(err).splitlines()[0] if str(err) else type(err).__name__
    return CheckpointError(f"expected a regular expression as the split pattern in {where}, found {shown!r}: {detail}")


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
