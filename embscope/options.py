"""One options object per concern, built once by whoever asks (a command, from its flags) and passed down whole,
instead of the same keywords threaded through every signature (black's Mode is the model):
LookupOptions, how words become token rows; DeviceOptions, where and in what arithmetic batched work runs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LookupOptions:
    """How a query names its rows: `ids`, raw token ids instead of words; `exact`, each word encoded as typed
    (no leading space); `allow_unk`, a word the tokenizer maps to its unknown token let through with a note."""

    ids: bool = False
    exact: bool = False
    allow_unk: bool = False


@dataclass(frozen=True)
class DeviceOptions:
    """Where the batched products run ("auto", "cpu", "cuda", "mps") and in what arithmetic ("fp32", "auto",
    "bf16", "tf32", ...; compute.devices lists them)."""

    device: str = "auto"
    precision: str = "fp32"


AS_TYPED = LookupOptions()  # the defaults: words, with a leading space where the tokenizer adds one; no unknown token
ANYWHERE = DeviceOptions()  # the defaults: a GPU when torch sees one, in fp32
