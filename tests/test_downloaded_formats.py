"""Recognising the formats people download: by magic bytes from the header alone, by name where there
are none; formats embscope cannot read are named; a folder holding one is never called empty."""

from __future__ import annotations

import pytest
import reader_samples as samples
from conftest import run

from embscope.core.errors import CheckpointError
from embscope.formats import FORMATS, open_checkpoint
from embscope.registry import HEAD_BYTES, Probe

WRITERS = {
    "GGUF": ("gguf", samples.gguf_gpt2),
    "ONNX": ("onnx", samples.onnx_bert_int8),
    "Keras HDF5": ("h5py", samples.keras_bert),
    "Keras .keras": ("h5py", samples.keras_zip_model),
    "CTranslate2": (None, samples.ctranslate2_whisper),
}


@pytest.mark.parametrize("name", list(WRITERS))
def test_sniffed_from_the_header_alone(name, tmp_path):
    """Each sniffer is given the first bytes and the size: it never opens the file (here: moved away)."""
    library, write = WRITERS[name]
    if library:
        pytest.importorskip(library)
    entry, _ = write(tmp_path)
    head, size = entry.read_bytes()[:HEAD_BYTES], entry.stat().st_size
    gone = tmp_path / "elsewhere" / entry.name
    matches = [fmt.name for fmt in FORMATS if fmt.sniff(Probe(gone, head, size))]
    assert matches[0] == name


@pytest.mark.parametrize("name", list(WRITERS))
def test_a_folder_holding_the_weights_is_not_empty(name, tmp_path):
    library, write = WRITERS[name]
    if library:
        pytest.importorskip(library)
    entry, _ = write(tmp_path)
    assert open_checkpoint(tmp_path).path == entry


UNREADABLE = {
    "legacy GGJT": ("model.bin", b"tjgg\x03\x00\x00\x00" + bytes(64),
                    ("'{}' is a legacy llama.cpp GGJT file, which embscope cannot read: convert it to GGUF with "
                    "llama.cpp's convert_llama_ggml_to_gguf.py")),
    "legacy GGML": ("ggml-model-q4_0.bin", b"lmgg" + bytes(64), "is a legacy llama.cpp GGML file"),
    "TensorFlow Lite": ("model.tflite", b"\x1c\x00\x00\x00TFL3" + bytes(64),
                        ("'{}' is a TensorFlow Lite flatbuffer, which embscope cannot read: use the model's original "
                        "checkpoint (safetensors, PyTorch, GGUF, ONNX or Keras .h5)")),
    "Core ML": ("Model.mlmodel", b"\x08\x04\x12" + bytes(64), "'{}' is a Core ML model, which embscope cannot read"),
}


@pytest.mark.parametrize("case", list(UNREADABLE))
def test_known_formats_embscope_cannot_read_are_named(case, tmp_path):
    name, data, message = UNREADABLE[case]
    (tmp_path / name).write_bytes(data)
    with pytest.raises(CheckpointError) as err:
        open_checkpoint(tmp_path)  # the folder: found, then named
    assert message.format(tmp_path / name) in str(err.value)
    result = run("info", "-c", tmp_path / name, code=1)
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
