"""What the formats embscope reads say about themselves, in one place (as gguf-py keeps its constants.py):
magic numbers, the keys checkpoints use for a step or a config, and each format's names for element
types, mapped onto embscope.core.arrays.ELEMENT_TYPES (which holds item sizes and the rest)."""

from __future__ import annotations

import sys

from ..core.arrays import ELEMENT_TYPES, ITEMSIZE, ElementType

__all__ = ["ELEMENT_TYPES", "ITEMSIZE", "ElementType"]  # the element-type table, for readers of this module

NATIVE = "<" if sys.byteorder == "little" else ">"  # this machine's byte order, as numpy spells it

# --- magic numbers and file names ---------------------------------------------------------------

ZIP_MAGIC = b"PK\x03\x04"  # torch.save's zip format and .npz
NPY_MAGIC = b"\x93NUMPY"
PICKLE_PROTO = 0x80  # the PROTO opcode that starts every pickle of protocol 2 or later
TORCH_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C  # the first pickle of a legacy (pre-zip) torch.save file
TORCH_LEGACY_PROTOCOL = 1001  # the second
# the magic as torch pickles it: protocol 2, LONG1 of 10 bytes
TORCH_LEGACY_HEAD = b"\x80\x02\x8a\x0a" + TORCH_LEGACY_MAGIC.to_bytes(10, "little")

GGUF_MAGIC = b"GGUF"
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"  # Keras / TensorFlow .h5
# llama.cpp's formats before GGUF (August 2023): a uint32 magic, little-endian; named, not read
LEGACY_GGML_MAGICS = {b"lmgg": "GGML", b"fmgg": "GGMF", b"tjgg": "GGJT", b"algg": "GGLA (LoRA adapter)"}
TFLITE_IDENTIFIER = b"TFL3"  # the flatbuffer file identifier, bytes 4-8; named, not read
ONNX_SUFFIX = ".onnx"  # a protobuf has no magic
COREML_SUFFIX = ".mlmodel"  # named, not read

PICKLE_SUFFIXES = (".pkl", ".pickle", ".p")
KERAS_HDF5 = "Keras HDF5"  # the reader of Keras .h5 files (formats.kinds), by the name roles looks for
KERAS_ZIP = "Keras .keras"  # the reader of Keras 3's .keras zip (model.weights.h5 inside), likewise
KERAS_SUFFIX = ".keras"
TORCH_SUFFIXES = (".pt", ".pth", ".ckpt")  # .bin is left out: an ANDREA dump may start with PK by chance
HF_CONFIG = "config.json"  # Hugging Face's model config, read beside the weights of every format
SAFETENSORS_INDEX_SUFFIX = ".safetensors.index.json"
TORCH_INDEX_SUFFIX = ".bin.index.json"  # transformers' pytorch_model.bin.index.json over .bin shards
# sentence-transformers, optimum and transformers.js put model.onnx (and its variants) here, config and tokenizer above
EXPORT_FOLDER, EXPORT_MODEL = "onnx", "model.onnx"
SAFETENSORS_MAX_HEADER = 100 * 1024 * 1024  # the limit the safetensors library itself enforces
# tensors one file may list, in every format: a whole mixture-of-experts model of 671B parameters has under
# 100,000; a header listing more is a lie, and each entry costs time and memory before any table is read
MAX_TENSORS = 200_000

# Hugging Face saves the same weights under several names; the first present wins, as in transformers.
PREFERRED_IN_DIRECTORY = ("model.safetensors.index.json", "model.safetensors", "pytorch_model.bin",
                          "pytorch_model.bin.index.json")
NOT_WEIGHTS = frozenset({HF_CONFIG, "tokenizer.json", "tokenizer_config.json", "vocab.json",
                         "special_tokens_map.json", "generation_config.json", "merges.txt",
                         "meta.pkl"})  # nanoGPT's character vocabulary, pickled beside ckpt.pt

# --- keys inside checkpoints ----------------------------------------------------------------------

STEP_KEYS = ("step", "iter_num", "global_step", "iteration")  # epoch counts passes, not steps
CONFIG_KEYS = ("config", "model_args")  # later ones win: nanoGPT's model_args holds the shapes
STATE_DICT_KEYS = ("model", "state_dict", "model_state_dict", "module")  # where a state dict sits in a dict
IGNORED_KEYS = frozenset({"optimizer", "opt_state", "optimizer_state", "optim", "adam", "rng", "rng_state"})
# prefixes every tensor name gets from a wrapper, and the wrapper that adds it
WRAPPER_PREFIXES = (("_orig_mod.", "torch.compile"), ("module.", "DistributedDataParallel"))

# Keys of a model config that give its shapes, earlier keys first: a training config's data "seq_len"
# must not override the model's "block_size". The one-letter keys are the ANDREA engine's own.
VOCAB_KEYS = ("vocab_size", "n_vocab", "padded_vocab_size", "V")
WIDTH_KEYS = ("n_embd", "d_model", "dim", "hidden_size", "d")
CONTEXT_KEYS = ("n_positions", "max_position_embeddings", "block_size", "n_ctx", "context", "context_length",
                "max_seq_len", "seq_len", "T")
LAYER_KEYS = ("n_layers", "n_layer", "num_layers", "num_hidden_layers", "L")
HEAD_KEYS = ("n_heads", "n_head", "num_heads", "num_attention_heads", "H")
TIED_KEYS = ("tie_embeddings", "tied", "tie_word_embeddings")

# --- element types, by each format's name ---------------------------------------------------------

SAFETENSORS_DTYPES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64", "I32": "int32",
    "I16": "int16", "I8": "int8", "U8": "uint8", "U16": "uint16", "U32": "uint32", "U64": "uint64", "BOOL": "bool",
}
# catalogued, never read as numbers (no numpy number holds them): an FP8 model's linear layers, beside its BF16
# embeddings, refused the whole file
SAFETENSORS_CATALOGUED = {"F8_E4M3": "float8_e4m3fn", "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2": "float8_e5m2",
                          "F8_E5M2FNUZ": "float8_e5m2fnuz", "F8_E8M0": "float8_e8m0fnu", "C64": "complex64"}
# ggml types whose data is already numbers numpy holds: mapped as they are, not dequantized
GGUF_PLAIN_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "F64": "float64", "I8": "int8",
                     "I16": "int16", "I32": "int32", "I64": "int64"}
# CTranslate2's dtype ids: the DataType enum of include/ctranslate2/types.h, in order
CTRANSLATE2_DTYPES = ("float32", "int8", "int16", "int32", "float16", "bfloat16")
# ONNX TensorProto data types embscope reads (the sub-byte ones are unpacked from their bytes)
ONNX_DTYPES = {"FLOAT": "float32", "FLOAT16": "float16", "BFLOAT16": "bfloat16", "DOUBLE": "float64", "INT8": "int8",
               "UINT8": "uint8", "INT16": "int16", "UINT16": "uint16", "INT32": "int32", "UINT32": "uint32",
               "INT64": "int64", "UINT64": "uint64", "BOOL": "bool", "INT4": "int4", "UINT4": "uint4", "INT2": "int2",
               "UINT2": "uint2"}
# torch.<name> for a dtype; torch names them as we do
TORCH_DTYPES = tuple(ELEMENT_TYPES)
TORCH_DTYPE_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "long": "int64", "int": "int32",
                       "short": "int16", "cfloat": "complex64", "cdouble": "complex128", "chalf": "complex32",
                       "bit": "uint1"}
# the legacy typed-storage classes torch.save names for each element type (torch 2.x still writes them)
TORCH_STORAGE_CLASSES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16", "BFloat16Storage": "bfloat16",
    "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16", "CharStorage": "int8",
    "ByteStorage": "uint8", "BoolStorage": "bool", "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128", "QInt8Storage": "qint8", "QUInt8Storage": "quint8", "QInt32Storage": "qint32",
    "QUInt4x2Storage": "quint4x2", "QUInt2x4Storage": "quint2x4",
}
TORCH_UNTYPED_STORAGE = "uint8"  # torch.storage.UntypedStorage counts bytes
# numpy's one-letter kinds of the element types a pickled numpy array may hold and be read as numbers
NUMPY_NUMERIC_KINDS = "biuf"

# --- TensorFlow checkpoints (formats/tf_checkpoint.py) ------------------------------------------------------------

TF_INDEX_SUFFIX = ".index"  # <prefix>.index beside <prefix>.data-NNNNN-of-NNNNN
TF_TABLE_MAGIC = bytes.fromhex("57fb808b247547db")  # lib/io/table: kTableMagicNumber, the index's last 8 bytes
TF_TABLE_FOOTER = 48  # two block handles padded to 40 bytes, then the magic
TF_STATE_FILE = "checkpoint"  # the text proto a Saver writes beside its checkpoints, naming the latest
TF_DATA_SHARD = r"(.+)\.data-(\d{5})-of-(\d{5})"
