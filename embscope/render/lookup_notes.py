"""The lookup notes of several words (lookup_word's leading-space rule) as few lines: words whose notes differ only
by the word share one line that names them, so eight probe words alike make one note, not eight."""

from __future__ import annotations

from collections.abc import Iterable

from ..core.errors import Message, replaced


def grouped_notes(noted: Iterable[tuple[str, str | None]]) -> list[str]:
    """`noted`: (word, its note or None) pairs, in order; each group of words with the same note becomes one line."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for word, note in noted:
        if note:
            groups.setdefault(replaced(note, repr(word), "the word"), []).append((word, note))
    return [Message(f"{', '.join(w for w, _ in members)}: ", template) if len(members) > 1
            else Message(f"{members[0][0]}: ", members[0][1]) for template, members in groups.items()]
