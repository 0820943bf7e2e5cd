"""How this command line names an option a message names: as its flag (`--no-merge`, `--token-key NAME`, `-k 50`).
The library's messages keep their options as parts (core.errors.Message); whatever the command line shows, an
error, a note or a JSON document, it spells with `flag`."""

from __future__ import annotations

from typing import Any

from ..core.errors import Message, Option, spelled

# the library's names whose flag is not `--` and the name with "-" for "_"
FLAG_NAMES = {"path": "-c", "checkpoints": "-c", "k": "-k", "fmt": "--format"}


def flag(option: Option) -> str:
    """An option as this command line writes it: `--no-merge` for merge=False, `--token-key NAME`, `-k 50`."""
    name = FLAG_NAMES.get(option.name, "--" + option.name.replace("_", "-"))
    if option.value is False:
        name = "--no-" + name.removeprefix("--")
    value = option.metavar or option.text or ("" if option.value is None or isinstance(option.value, bool)
                                              else str(option.value))
    return f"{option.lead}{name} {value}" if value else f"{option.lead}{name}"


def as_flags(text: str) -> str:
    """A message as this command line says it."""
    return spelled(text, flag)


def document_as_flags(value: Any) -> Any:
    """A JSON document with every message in it as this command line says it."""
    if isinstance(value, Message):
        return value.spelled(flag)
    if isinstance(value, dict):
        return {key: document_as_flags(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [document_as_flags(item) for item in value]
    return value
