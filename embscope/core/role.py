"""The part a table plays (Role) and what a file says of its language-model head (Head): the words every layer
uses, so they live at the bottom, apart from the discovery logic in roles.py."""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    """The part a table plays. A StrEnum, the (str, Enum) whose f-string is the value ("token", not "Role.token")."""

    token = "token"
    position = "position"
    output = "output"


class Head(StrEnum):
    """What the file says about the output projection (the language-model head)."""

    untied = "untied"  # a head of its own
    tied = "tied"  # the token table: shared storage, an exact copy, or the config or the reader says so
    absent = "absent"  # config.json names a model without a language-model head
    unknown = "unknown"  # no head in the file, and nothing says whether it is tied or absent
    ambiguous = "ambiguous"  # several equally good candidates: the output_key option chooses
    unnamed = "unnamed"  # none by name, but a tensor of the token table's shape (or its transpose) may be it

    @property
    def is_tied(self) -> bool | None:
        """True or False where the file says; None where it does not (unknown, ambiguous)."""
        return {Head.tied: True, Head.untied: False, Head.absent: False}.get(self)
