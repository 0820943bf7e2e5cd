"""One options object per concern, built once by whoever asks (a command, from its flags) and passed down whole,
instead of the same keywords threaded through every signature (black's Mode is the model):
LookupOptions, how words become token rows; DeviceOptions, where and in what arithmetic batched work runs;
SimilarityOptions, what a similarity measures."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, eq=False)  # compared nowhere: no __eq__ and __hash__ to build at import
class LookupOptions:
    """How a query names its rows: `ids`, raw token ids instead of words; `exact`, each word encoded as typed
    (no leading space); `allow_unk`, a word the tokenizer maps to its unknown token let through with a note."""

    ids: bool = False
    exact: bool = False
    allow_unk: bool = False


@dataclass(frozen=True, eq=False)  # compared nowhere: no __eq__ and __hash__ to build at import
class DeviceOptions:
    """Where the batched products run ("auto", "cpu", "cuda", "mps") and in what arithmetic ("fp32", "auto",
    "bf16", "tf32", ...; compute.devices lists them)."""

    device: str = "auto"
    precision: str = "fp32"


@dataclass(frozen=True, eq=False)  # compared nowhere: no __eq__ and __hash__ to build at import
class SimilarityOptions:
    """What a cosine is taken between: `table` ("token" or "output"); `merge`, a word of several tokens as the
    mean of their rows (else refused); `center`, the table's mean row subtracted first; `remove_top` D, in the
    all-but-the-top space; `baseline`, where each cosine stands among random pairs."""

    merge: bool = True
    center: bool = False
    table: str = "token"
    baseline: bool = True
    remove_top: int | None = None


AS_TYPED = LookupOptions()  # the defaults: words, with a leading space where the tokenizer adds one; no unknown token
ANYWHERE = DeviceOptions()  # the defaults: a GPU when torch sees one, in fp32
PLAIN_COSINES = SimilarityOptions()  # the defaults: the token table, raw rows, words merged, with the baseline
