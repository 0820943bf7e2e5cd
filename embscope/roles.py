"""Which tensor plays which role. Knowledge of real checkpoints lives in the tables below,
one line per name, with the architectures it comes from; supporting a model is a line of data."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from .checkpoint import Checkpoint, EmbeddingTables, Table, TensorInfo
from .errors import TableError
from .text import quote


@dataclass(frozen=True)
class Known:
    name: str  # matches the whole tensor name, or its end after a "." (a model prefix such as "bert.")
    source: str  # the architectures that use this name
    first_row: int = 0  # rows that come before position 0
    note: str | None = None
    whole_name_only: bool = False  # too generic to match as a suffix

    def matches(self, tensor_name: str) -> bool:
        if self.whole_name_only:
            return tensor_name == self.name
        return tensor_name == self.name or tensor_name.endswith("." + self.name)


KNOWN: dict[str, tuple[Known, ...]] = {
    "token": (
        Known("transformer.wte.weight", "nanoGPT, GPT-2, GPT-Neo, GPT-J"),
        Known("wte.weight", "GPT-2 saved without the transformer. prefix"),
        Known("embeddings.word_embeddings.weight", "BERT, RoBERTa, ELECTRA"),
        Known("model.embed_tokens.weight", "Llama, Mistral, Qwen, Gemma"),
        Known("decoder.embed_tokens.weight", "OPT"),
        Known("embed_tokens.weight", "Llama-family and OPT models saved without a prefix"),
        Known("embed_in.weight", "GPT-NeoX, Pythia"),
        Known("tok_embeddings.weight", "Meta's original Llama release"),
        Known("word_embeddings.weight", "BLOOM"),
        Known("tok_emb.weight", "minGPT-style from-scratch models"),
        Known("token_embedding.weight", "from-scratch torch models"),
        Known("token_emb.weight", "from-scratch torch models"),
        Known("token_emb", "nlm and other from-scratch numpy models", whole_name_only=True),
        Known("wte", "microgpt and other from-scratch numpy models", whole_name_only=True),
        Known("token_embd.weight", "llama.cpp GGUF, every architecture", whole_name_only=True),
        Known("decoder/embeddings/weight", "CTranslate2 decoders (Whisper, GPT-2, Llama)", whole_name_only=True),
        Known("wte.embeddings", "Keras/TF GPT-2 .h5 (names from HDF5 paths, '/' as '.')"),
    ),
    "position": (
        Known("transformer.wpe.weight", "nanoGPT, GPT-2, GPT-Neo"),
        Known("wpe.weight", "GPT-2 saved without the transformer. prefix"),
        Known("roberta.embeddings.position_embeddings.weight", "RoBERTa", first_row=2,
              note="RoBERTa position rows 0-1 are padding: position p is row p+2"),
        Known("embeddings.position_embeddings.weight", "BERT, ELECTRA"),
        Known("embed_positions.weight", "OPT", first_row=2,
              note="OPT position rows carry an offset of 2: position p is row p+2"),
        Known("pos_emb.weight", "from-scratch torch models"),
        Known("position_embedding.weight", "from-scratch torch models"),
        Known("pos_emb", "nlm and other from-scratch numpy models", whole_name_only=True),
        Known("wpe", "microgpt and other from-scratch numpy models", whole_name_only=True),
        Known("position_embd.weight", "llama.cpp GGUF of GPT-2, StarCoder, BERT", whole_name_only=True),
        Known("decoder/position_encodings/encodings", "CTranslate2 decoders (Whisper, GPT-2); the encoder's "
              "table in Whisper is a fixed sinusoid", whole_name_only=True),
        Known("position_embeddings.embeddings", "Keras/TF BERT-family .h5 (names from HDF5 paths, '/' as '.')"),
        Known("wpe.embeddings", "Keras/TF GPT-2 .h5 (names from HDF5 paths, '/' as '.')"),
    ),
    "output": (
        Known("lm_head.weight", "nanoGPT, GPT-2, Llama, Mistral, Qwen, OPT"),
        Known("embed_out.weight", "GPT-NeoX, Pythia"),
        Known("cls.predictions.decoder.weight", "BERT masked-LM head"),
        Known("output.weight", "Meta's original Llama release, llama.cpp GGUF", whole_name_only=True),
        Known("decoder/projection/weight", "CTranslate2 decoders", whole_name_only=True),
        Known("lm_head", "from-scratch numpy models", whole_name_only=True),
        Known("head.weight", "minGPT-style from-scratch models", whole_name_only=True),
    ),
}

# Hugging Face configs whose learned positions start after two reserved rows
POSITION_OFFSET_MODEL_TYPES = {"roberta": 2, "xlm-roberta": 2, "camembert": 2, "opt": 2}

# config keys that give a table's row count, for the shape rule
VOCAB_KEYS = ("vocab_size", "n_vocab", "padded_vocab_size")
CONTEXT_KEYS = ("n_positions", "max_position_embeddings", "block_size", "n_ctx", "context",
                "context_length", "max_seq_len", "seq_len")

# float tensors that are buffers, not parameters
NON_PARAMETER_SUFFIXES = (
    "attn.bias",  # GPT-2 / nanoGPT causal mask, (1, 1, T, T)
    "attn.masked_bias",  # GPT-2 in older transformers
    "rotary_emb.inv_freq",  # Llama saved by older transformers
    "position_ids",  # BERT, RoBERTa (int64, excluded anyway)
)


def key_option(role: str) -> str:
    """The command-line option that names a role's tensor."""
    return "--pos-key" if role == "position" else f"--{role}-key"


def is_parameter(tensor: TensorInfo) -> bool:
    if not tensor.is_float:
        return False
    if tensor.name.endswith("attn.bias") and len(tensor.shape) != 4:
        return True  # a real attention bias vector, not GPT-2's 4-D mask
    return not tensor.name.endswith(NON_PARAMETER_SUFFIXES)


def config_value(config: dict, keys: tuple[str, ...]) -> tuple[str, int] | None:
    for key in keys:
        value = config.get(key)
        if type(value) is int and value > 0:
            return key, value
    return None


def is_table(tensor: TensorInfo) -> bool:
    # rows and columns both: a (2**32, 0) "table" holds no bytes, yet its norms would take 32 GiB
    return len(tensor.shape) == 2 and tensor.is_float and tensor.shape[0] > 0 and tensor.shape[1] > 0


def distinct(tensors: list[TensorInfo]) -> list[TensorInfo]:
    """Tensors that share storage (a tied encoder and decoder table) count as one."""
    seen, out = set(), []
    for t in tensors:
        key = t.storage if t.storage is not None else t.name
        if key not in seen:
            seen.add(key)
            out.append(t)
    return out


def by_key(checkpoint: Checkpoint, role: str, key: str) -> Table:
    tensor = checkpoint.tensors.get(key)
    if tensor is None:
        close = difflib.get_close_matches(key, checkpoint.tensors, n=3, cutoff=0.4)
        hint = f"; close names: {', '.join(quote(c) for c in close)}" if close else ""
        raise TableError(f"expected a tensor named {quote(key)} for the {role} table, found none{hint}")
    if not is_table(tensor):
        raise TableError(f"expected a 2-D float table for the {role} table, found {quote(key)} of shape "
                         f"{list(tensor.shape)} and dtype {tensor.dtype}")
    return Table(role, tensor, f"{key_option(role)} {key}")


def by_name(checkpoint: Checkpoint, role: str, taken: set[str]) -> Table | None:
    tables = [t for t in checkpoint.tensors.values() if is_table(t) and t.name not in taken]
    for known in KNOWN[role]:
        found = distinct([t for t in tables if known.matches(t.name)])
        if len(found) > 1:
            names = ", ".join(quote(t.name) for t in found)
            raise TableError(f"expected one {role} table, found several equally good ones ({names}); "
                             f"choose with {key_option(role)}")
        if found:
            first_row = known.first_row
            if role == "position" and not first_row:
                model_type = checkpoint.config.get("model_type")
                first_row = POSITION_OFFSET_MODEL_TYPES.get(model_type, 0) if isinstance(model_type, str) else 0
            note = known.note or (f"position rows carry an offset of {first_row}: position p is row p+{first_row}"
                                  if first_row else None)
            return Table(role, found[0], f"name {known.name!r} ({known.source})", first_row,
                         (note,) if note else ())
    return None


def by_shape(checkpoint: Checkpoint, role: str, taken: set[str], width: int | None = None) -> Table | None:
    """Fallback: the one 2-D float table whose row count is the config's vocabulary or context size
    (and, for positions, whose width is the token table's)."""
    found = config_value(checkpoint.config, VOCAB_KEYS if role == "token" else CONTEXT_KEYS)
    if found is None:
        return None
    key, rows = found
    candidates = distinct([t for t in checkpoint.tensors.values()
                           if is_table(t) and t.name not in taken and t.shape[0] == rows
                           and (width is None or t.shape[1] == width)])
    if len(candidates) > 1 and role == "position":
        return None  # a rotary model whose width equals its context has many d x d matrices of that shape
    if len(candidates) > 1:
        names = ", ".join(quote(t.name) for t in candidates)
        raise TableError(f"expected one {role} table with {rows} rows ({key} in the config), found several "
                         f"({names}); choose with {key_option(role)}")
    if candidates:
        return Table(role, candidates[0], f"shape: {rows} rows = {key} in the config")
    return None


def find_tables(checkpoint: Checkpoint, token_key: str | None = None, pos_key: str | None = None) -> EmbeddingTables:
    token = by_key(checkpoint, "token", token_key) if token_key else (
        by_name(checkpoint, "token", set()) or by_shape(checkpoint, "token", set()))
    if token is None:
        raise TableError(f"expected a token-embedding table, found none among {len(checkpoint.tensors)} tensors "
                         "(names tried: see embscope.roles.KNOWN); choose one with --token-key")
    taken = {token.name}
    position = by_key(checkpoint, "position", pos_key) if pos_key else (
        by_name(checkpoint, "position", taken) or by_shape(checkpoint, "position", taken, token.dim))
    if position is not None:
        taken.add(position.name)
    output = by_name(checkpoint, "output", taken)
    shares_storage = output is not None and output.tensor.storage is not None \
        and output.tensor.storage == token.tensor.storage
    declared_tied = output is not None and checkpoint.config.get("tie_word_embeddings") is True \
        and output.tensor.shape == token.tensor.shape
    tied = output is None or shares_storage or declared_tied
    tied_copy = output.name if declared_tied and not shares_storage else None
    notes = []
    if position is None:
        notes.append("no learned position table found by name or shape: a model with rotary or other computed "
                     "positions has none; name one with --pos-key if it exists")
    if output is None:
        notes.append("no output projection in the file: the head is tied to the token table")
    elif tied:
        why = "shares storage with" if shares_storage else "is declared tied (tie_word_embeddings) to"
        notes.append(f"{output.name} {why} {token.name}: the head is tied, counted once")
        output = None
    return EmbeddingTables(token, position, output, tied, tuple(notes), tied_copy)
