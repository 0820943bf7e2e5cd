"""The options every analysis command takes (DESIGN.md, command-line contract), declared once."""

from __future__ import annotations

import functools
import inspect
import typing
from dataclasses import dataclass, fields
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..render import console


class Device(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"
    mps = "mps"


@dataclass(frozen=True)
class Source:
    """Where the tables come from, as the user gave it."""

    checkpoint: Annotated[Optional[Path], typer.Option(
        "--checkpoint", "-c", envvar="EMBSCOPE_CHECKPOINT", show_envvar=True,
        help="Checkpoint file or directory (default: the bundled sample model).")] = None
    tokenizer: Annotated[Optional[Path], typer.Option(
        help="Tokenizer file (default: found beside or inside the checkpoint).")] = None
    token_key: Annotated[Optional[str], typer.Option(help="Tensor to use as the token table.")] = None
    pos_key: Annotated[Optional[str], typer.Option(help="Tensor to use as the position table.")] = None
    device: Annotated[Device, typer.Option(help="Where batched work runs; auto = a GPU when torch sees one.")] = Device.auto
    trust_pickle: Annotated[bool, typer.Option(
        "--trust-pickle", help="Let a pickle name any global. It can then run code: only for files you made.")] = False
    vocab_size: Annotated[Optional[int], typer.Option(help="Token table rows, for formats that do not record it.")] = None
    d_model: Annotated[Optional[int], typer.Option(help="Table width, for formats that do not record it.")] = None
    context: Annotated[Optional[int], typer.Option(help="Position table rows, for formats that do not record it.")] = None

    def open(self):
        from ..embeddings import open as open_embeddings
        if self.device is not Device.auto:
            from ..compute import resolve_device
            resolve_device(self.device.value)  # asking for a GPU that is not there is an error everywhere
        if self.trust_pickle:
            console.err.print("warning: --trust-pickle lets the checkpoint run code while it loads")
        return open_embeddings(self.checkpoint, tokenizer=self.tokenizer, token_key=self.token_key,
                               pos_key=self.pos_key, trust_pickle=self.trust_pickle, vocab_size=self.vocab_size,
                               d_model=self.d_model, context=self.context)


SOURCE_FIELDS = tuple(f.name for f in fields(Source))
JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document and nothing else.")]


def with_source(command):
    """Give a command every Source option; it receives them as one `source` argument."""
    signature = inspect.signature(command)
    hints = typing.get_type_hints(command, include_extras=True)  # real types, not the strings of __future__
    source_hints = typing.get_type_hints(Source, include_extras=True)
    own = [p.replace(annotation=hints[p.name]) for p in signature.parameters.values() if p.name != "source"]
    shared = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=source_hints[f.name])
              for f in fields(Source)]

    @functools.wraps(command)
    def wrapper(**kwargs):
        source = Source(**{name: kwargs.pop(name) for name in SOURCE_FIELDS})
        return command(source=source, **kwargs)

    wrapper.__signature__ = signature.replace(parameters=own + shared)
    wrapper.__annotations__ = {p.name: p.annotation for p in own + shared}
    return wrapper
