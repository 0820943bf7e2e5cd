"""CTranslate2 model.bin files built byte by byte from the layout of ctranslate2/specs/model_spec.py."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
import reader_samples as samples
from conftest import run, run_json

import embscope
from embscope.core.errors import CheckpointError, TokenError
from embscope.formats import open_checkpoint

V, D, T = samples.V, samples.D, samples.T


def test_byte_exact_minimal_file_opens(tmp_path):
    """Version 6, spec "S", one 1 x 2 float32 variable "w", no aliases: short enough to check by eye."""
    literal = (b"\x06\x00\x00\x00" b"\x02\x00S\x00" b"\x01\x00\x00\x00" b"\x01\x00\x00\x00"
               b"\x02\x00w\x00" b"\x02" b"\x01\x00\x00\x00" b"\x02\x00\x00\x00" b"\x00" b"\x08\x00\x00\x00"
               + struct.pack("<2f", 1.5, -2.0) + b"\x00\x00\x00\x00")
    (tmp_path / "model.bin").write_bytes(literal)
    checkpoint = open_checkpoint(tmp_path / "model.bin")
    assert checkpoint.format == "CTranslate2" and list(checkpoint.tensors) == ["w"]
    np.testing.assert_array_equal(checkpoint.tensors["w"].read(), [[1.5, -2.0]])
    assert checkpoint.notes[0] == "CTranslate2 binary version 6, spec S"


def test_whisper_decoder_tables_not_the_encoder_sinusoid(tmp_path):
    samples.ctranslate2_whisper(tmp_path)
    variables = samples.whisper_variables()
    emb = embscope.open(tmp_path)
    assert emb.token.name == "decoder/embeddings/weight"
    assert emb.position.name == "decoder/position_encodings/encodings"  # the learned one, 7 rows
    np.testing.assert_array_equal(emb.token.array, variables["decoder/embeddings/weight"].astype(np.float32))
    np.testing.assert_array_equal(emb.position.array,
                                  variables["decoder/position_encodings/encodings"].astype(np.float32))
    assert emb.tables.tied and emb.output is None  # decoder/projection/weight is an alias of the token table
    params = run_json("params", "-c", tmp_path)
    # float variables, the alias counted once: decoder table, decoder positions, gamma; the encoder's 12 x D
    # sinusoid (Whisper's sinusoids(), which CTranslate2 stores) is computed, not learned: left out, and said
    assert params["total"] == V * D + T * D + D and params["tied"] is True
    assert any(note.startswith(f"'encoder/position_encodings/encodings' (12 x {D}) is a fixed sinusoid")
               for note in params["notes"])


def test_int8_weights_are_divided_by_their_per_row_scale(tmp_path):
    table = samples.rows((V, D), 11)
    scale = 127 / np.abs(table).max(axis=1)  # model_spec.py's int8 quantization
    q = np.rint(table * scale[:, None]).astype(np.int8)
    samples.write_ctranslate2(tmp_path / "model.bin", {"decoder/embeddings/weight": q,
                                                       "decoder/embeddings/weight_scale": scale.astype(np.float32)},
                              aliases={"decoder/projection/weight": "decoder/embeddings/weight"},
                              spec="TransformerDecoderModelSpec")
    emb = embscope.open(tmp_path / "model.bin")
    assert emb.token.tensor.quantization == "int8 / per-row scale"
    np.testing.assert_allclose(emb.token.array, q / scale.astype(np.float32)[:, None], rtol=1e-6)
    np.testing.assert_allclose(emb.token.array, table, atol=0.02)
    assert "decoder/embeddings/weight_scale" not in emb.checkpoint.tensors and emb.tables.tied
    assert run_json("params", "-c", tmp_path / "model.bin")["total"] == V * D


@pytest.mark.parametrize("version", [1, 2, 3, 5])
def test_older_binary_versions(version, tmp_path):
    table = samples.rows((V, D), 12)
    samples.write_ctranslate2(tmp_path / "model.bin", {"decoder/embeddings/weight": table}, version=version)
    emb = embscope.open(tmp_path / "model.bin")
    np.testing.assert_array_equal(emb.token.array, table)


def test_vocabulary_json_names_ids_and_finds_whole_tokens(tmp_path):
    samples.ctranslate2_whisper(tmp_path)
    table = samples.whisper_variables()["decoder/embeddings/weight"].astype(np.float64)
    doc = run_json("similarity", "dog", "cat", "-c", tmp_path)
    pair = doc["pairs"][0]
    assert (pair["a_ids"], pair["b_ids"], pair["a_tokens"]) == ([2], [4], [" dog"])  # "Ġdog", "Ġcat"
    assert pair["cosine"] == pytest.approx(table[2] @ table[4] / np.linalg.norm(table[2]) / np.linalg.norm(table[4]))
    tokenizer = embscope.open(tmp_path).tokenizer
    with pytest.raises(TokenError, match=r"^'zebra' is not one token of vocabulary.json, a vocabulary list that "
                                         r"cannot split text into pieces: pass the model's tokenizer with the tokenizer argument, "
                                         r"or ids with ids=True$"):
        tokenizer.encode("zebra")


def test_sentencepiece_vocabulary_txt_and_special_tokens_from_config(tmp_path):
    samples.write_ctranslate2(tmp_path / "model.bin", {"decoder/embeddings/weight": samples.rows((5, D), 1)},
                              spec="TransformerSpec")
    (tmp_path / "shared_vocabulary.txt").write_text("<unk>\n<s>\n</s>\n▁dog\ns\n", encoding="utf-8")
    (tmp_path / "config.json").write_text(json.dumps({"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>"}))
    tokenizer = embscope.open(tmp_path).tokenizer
    assert tokenizer.encode("dog") == tokenizer.encode(" dog") == [3]
    assert tokenizer.token_string(3) == " dog" and tokenizer.unk_id == 0
    assert tokenizer.special_ids == frozenset({0, 1, 2})


def test_a_tokenizer_json_beside_model_bin_wins_over_the_vocabulary(tmp_path):
    from tokenizers import Tokenizer, models
    samples.ctranslate2_whisper(tmp_path)
    Tokenizer(models.WordLevel({"dog": 0, "cat": 1, "[UNK]": 2}, unk_token="[UNK]")).save(str(tmp_path / "tokenizer.json"))
    assert embscope.open(tmp_path).tokenizer.kind == "huggingface"


def variable_field(data: bytes, name: bytes, after: int) -> int:
    return data.index(name + b"\0") + len(name) + 1 + after


NAME = b"decoder/embeddings/weight"  # after it: uint8 rank, 2 x uint32 dims, uint8 dtype, uint32 size
LIES = {
    "truncated": (lambda d: d[:200], (r"expected 704 bytes for the data of 'decoder/embeddings/weight' at offset \d+, "
                                     r"the file holds 200 bytes")),
    "dims that disagree": (lambda d: d[:variable_field(d, NAME, 1)] + struct.pack("<I", 12)
                           + d[variable_field(d, NAME, 5):],
                           (r"variable 'decoder/embeddings/weight': shape \[12, 32\] of float16 needs 768 bytes, "
                           r"the file says 704")),
    "variable count": (lambda d: d[:22] + struct.pack("<I", 2**30) + d[26:],  # after version, spec, revision
                       r"header declares 1073741824 variables, more than the \d+ bytes left can hold"),
    "dtype": (lambda d: d[:variable_field(d, NAME, 9)] + b"\x09" + d[variable_field(d, NAME, 10):],
              r"variable 'decoder/embeddings/weight': dtype id 9, expected 0 to 5"),
    "newer version": (lambda d: struct.pack("<I", 7) + d[4:], r"CTranslate2 binary version 7, expected 1 to 6"),
}


@pytest.mark.parametrize("case", list(LIES))
def test_broken_or_lying_model_bin_is_one_clear_error(case, tmp_path):
    path, _ = samples.ctranslate2_whisper(tmp_path)
    change, message = LIES[case]
    path.write_bytes(change(path.read_bytes()))
    with pytest.raises(CheckpointError, match=message):
        open_checkpoint(path)
    result = run("info", "-c", path, code=1)
    assert result.exit_code == 1 and result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1


def test_andrea_dump_named_model_bin_is_still_andrea(tmp_path):
    """Both write model.bin; CTranslate2 is sniffed first, by the NUL-terminated name after its version."""
    import corpus
    entry, _ = corpus.andrea(tmp_path, False)
    assert open_checkpoint(entry).format == "ANDREA flat float32"
