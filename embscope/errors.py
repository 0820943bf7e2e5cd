"""The few errors embscope raises. A message is the one line the user reads:
what was expected, and what was found."""


class EmbscopeError(Exception):
    """Any problem with the user's input; the CLI prints it and exits with code 1."""


class CheckpointError(EmbscopeError):
    """The file or directory is missing, unreadable, truncated or of an unknown kind."""


class UnsafePickleError(CheckpointError):
    """A pickle names a global outside the allow-list; nothing in it was run."""


class TableError(EmbscopeError):
    """An embedding table is missing, ambiguous, or not what a command needs."""


class TokenError(EmbscopeError):
    """A word cannot be encoded, or a token id lies outside the table."""


class PositionError(EmbscopeError):
    """A position lies outside the position table, or there is no such table."""
