"""Minimal stand-in for the lead's errors module, so compute.py imports in this worktree."""


class EmbscopeError(Exception):
    """Any problem with the user's input; the message is the one line the user reads."""
