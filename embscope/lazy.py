"""A module's function that imports the module when first called: the tables of readers and tokenizer kinds
name every one, and a run imports only the modules of those it calls."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_function(module: str, name: str) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args)
    call.__qualname__ = f"{module}.{name}"
    return call
