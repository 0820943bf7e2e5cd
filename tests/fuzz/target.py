"""What the fuzz tests run on each input: the library path behind `embscope info` and
`embscope norms` (open, find the tables, read them, compute row norms)."""

from __future__ import annotations

import re
from pathlib import Path

from embscope.core.errors import EmbscopeError, TokenError
from embscope.embeddings import Embeddings
from embscope.formats import OpenOptions, open_checkpoint
from embscope.lookup import lookup_word
from embscope.roles import find_tables

OPTIONS = OpenOptions()  # shapes the ANDREA format needs come from the config beside the dump, also fuzzed


def norms_of(table):
    """What `embscope norms` computes: row norms, their summary and anomalies, near-duplicate rows."""
    from embscope.analysis.norms import find_duplicates, row_norms, summarize
    norms = row_norms(table.array)
    summarize(norms)
    find_duplicates(table.array, norms)


def exercise(path: Path, options: OpenOptions = OPTIONS) -> str:
    """'ok', or raises: EmbscopeError is an allowed outcome, anything else is a bug."""
    checkpoint = open_checkpoint(path, options)
    tables = find_tables(checkpoint)
    for table in (tables.token, tables.position, tables.output):
        if table is not None:
            norms_of(table)
    tokenizer_of(Embeddings(checkpoint, tables))
    return "ok"


def tokenizer_of(embeddings: Embeddings) -> None:
    """What info, norms and similarity ask of the tokenizer found beside the checkpoint."""
    tokenizer = embeddings.tokenizer
    if tokenizer is None:
        return
    for index in range(min(tokenizer.vocab_size, 400)):
        try:
            tokenizer.token_string(index)
        except TokenError:  # an id the tokenizer does not use: norms prints it as #id
            pass
    try:
        ids = tokenizer.encode(" The dog bites. naïve 中文")
    except TokenError:  # a vocabulary list (CTranslate2's vocabulary.json) names ids but cannot split text
        ids = []
    tokenizer.decode(ids)
    lookup_word(tokenizer, "dog")


def message_class(err: BaseException) -> str:
    """An error message with names and numbers blanked, so outcomes can be counted by kind."""
    text = str(err)
    text = re.sub(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"", "Q", text)
    text = re.sub(r"\d+", "N", text)
    text = re.sub(r"\(.*\)", "(...)", text)
    return f"{type(err).__name__}: {text[:90]}"


def outcome(path: Path, options: OpenOptions = OPTIONS) -> tuple[str, BaseException | None]:
    """('ok' | 'error' | 'crash', the exception) for one input."""
    try:
        exercise(path, options)
    except EmbscopeError as err:
        return "error", err
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as err:  # noqa: BLE001 - every other exception is a bug (a Rust panic is a BaseException)
        return "crash", err
    return "ok", None
