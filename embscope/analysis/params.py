"""How many parameters the lookup tables hold, and their share of the whole checkpoint."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..core.checkpoint import Checkpoint, TensorInfo
from ..core.role import Head
from ..core.text import quote, shape_text
from ..roles import is_parameter
from .sinusoid import MOST_VALUES, fixed_sinusoids

if TYPE_CHECKING:
    from ..embeddings import Embeddings


# One rule for every format that quantizes (ONNX, GGUF, CTranslate2): what the model has is weights; how the file
# stores them is not. A GGUF block's scales live inside the block and are never counted either.
QUANTIZATION_RULE = ("a quantized weight counts as its element count; scales, zero points and activation-"
                     "quantization constants are not parameters")


@dataclass(frozen=True)
class ParamsReport:
    total: int
    token: int
    position: int | None  # None: no learned position table
    output: int | None  # None: no untied head (`head` says what there is instead)
    head: Head
    head_note: str | None  # why the head is what it is, when that needs saying
    source: str  # where `total` comes from
    token_name: str
    position_name: str | None
    output_name: str | None
    # role -> how the file stores a table that is dequantized to be read ("Q8_0", "int8, per-row scale");
    # its stored elements are what is counted
    quantization: dict[str, str] = field(default_factory=dict)
    quantization_rule: str | None = None  # QUANTIZATION_RULE, when the file holds quantized weights
    quantization_values: int = 0  # scale and zero-point values the rule leaves out
    computed: tuple[str, ...] = ()  # tensors left out of the total as fixed sinusoids, each said in a note
    unread: tuple[str, ...] = ()  # tensors named like positions too large to check for a sinusoid: counted, and said

    @property
    def notes(self) -> list[str]:
        """What the table and the total need said: the head, the fixed sinusoids left out, those not checked."""
        return [*filter(None, [self.head_note]), *self.computed, *self.unread]

    @property
    def tied(self) -> bool | None:
        return self.head.is_tied

    @property
    def embeddings(self) -> int:
        return self.token + (self.position or 0)

    @property
    def total_without_position(self) -> int:
        """nanoGPT's convention: get_num_params() leaves the position table out."""
        return self.total - (self.position or 0)

    @property
    def shares(self) -> dict[str, float | None]:
        def share(n: int | None) -> float | None:
            return None if n is None or not self.total else n / self.total
        return {"token": share(self.token), "position": share(self.position),
                "output": share(self.output), "embeddings": share(self.embeddings)}


def count_parameters(checkpoint: Checkpoint, skip: frozenset[str] = frozenset()) -> int:
    """Float tensors, each storage counted once (a tied head is stored once), and the FP8 weights a reader
    skipped; buffers left out."""
    seen, total = set(), checkpoint.skipped_parameters
    for tensor in checkpoint.tensors.values():
        if tensor.name in skip or tensor.name in checkpoint.buffers or not is_parameter(tensor):
            continue
        # the elements from one start, whatever the shape: a head saved as the token table's transpose (e.weight.t())
        key = (tensor.storage, tensor.numel) if tensor.storage is not None else tensor.name
        if key not in seen:
            seen.add(key)
            total += tensor.numel
    return total


def params_report(emb: Embeddings) -> ParamsReport:
    """Parameters per table and in the whole checkpoint; the token table must have been found."""
    checkpoint, tables, token = emb.checkpoint, emb.tables, emb.token
    if checkpoint.declared_params is not None:
        total, source = checkpoint.declared_params, "the parameter count in the file's header"
        computed: list[tuple[TensorInfo, str]] = []
        unread: list[TensorInfo] = []
    else:
        taken = frozenset(t.name for t in (token, tables.position, tables.output) if t is not None)
        computed, unread = fixed_sinusoids(checkpoint.tensors.values(), taken | {tables.tied_copy or ""})
        skip = frozenset({tables.tied_copy} if tables.tied_copy else ()) | {tensor.name for tensor, _ in computed}
        total, source = count_parameters(checkpoint, skip), "float tensors in the file, shared storage counted once"
        if checkpoint.buffers:
            source += ", the pickled model's buffers left out"
    position, output = tables.position, tables.output
    quantization = {t.role.value: t.tensor.quantization for t in (token, position, output) if t and t.tensor.quantization}
    quantized = checkpoint.quantization_values > 0 or any(t.quantization for t in checkpoint.tensors.values())
    return ParamsReport(total, token.tensor.numel, position.tensor.numel if position else None,
                        output.tensor.numel if output else None, tables.head, tables.head_note, source, token.name,
                        position.name if position else None, output.name if output else None, quantization,
                        QUANTIZATION_RULE if quantized else None, checkpoint.quantization_values,
                        tuple(sinusoid_note(tensor, said) for tensor, said in computed),
                        tuple(unread_note(tensor) for tensor in unread))


def sinusoid_note(tensor: TensorInfo, said: str) -> str:
    return (f"{quote(tensor.name)} ({shape_text(tensor.shape)}) is a fixed sinusoid ({said}): computed by the model, not learned, so "
            f"not a parameter: left out of the total")


def unread_note(tensor: TensorInfo) -> str:
    return (f"{quote(tensor.name)} ({shape_text(tensor.shape)}) is named like a position table and may be a fixed sinusoid, not a "
            f"parameter, but holds {tensor.numel:,} values, more than the {MOST_VALUES:,} read to tell: counted in "
            "the total")
