"""Files embscope recognises but cannot read: opening one is an error that says what the file is and
what to use instead, rather than "not a checkpoint embscope knows"."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from ..core import files
from ..core.checkpoint import Checkpoint
from ..core.errors import CheckpointError
from ..core.text import quote
from ..storage.base import OpenOptions
from ..storage.constants import LEGACY_GGML_MAGICS

INSTEAD = "use the model's original checkpoint (safetensors, PyTorch, GGUF, ONNX or Keras .h5)"


def refuse_legacy_ggml(path: Path, options: OpenOptions) -> NoReturn:
    kind = LEGACY_GGML_MAGICS[(files.peek(path, 4) or b"")[:4]]  # the sniff saw these four bytes
    raise CheckpointError(f"{quote(path)} is a legacy llama.cpp {kind} file, which embscope cannot read: convert it "
                          "to GGUF with llama.cpp's convert_llama_ggml_to_gguf.py")


def refuse(description: str) -> Callable[[Path, OpenOptions], Checkpoint]:
    def opener(path: Path, options: OpenOptions) -> NoReturn:
        raise CheckpointError(f"{quote(path)} is {description}, which embscope cannot read: {INSTEAD}")
    return opener


refuse_tflite = refuse("a TensorFlow Lite flatbuffer")
refuse_coreml = refuse("a Core ML model")
