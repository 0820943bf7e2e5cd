"""GGUF files written by gguf.GGUFWriter: quantized tables dequantized right (checked against a numpy
reading of the block layout), every figure against numpy, the tokenizer from the metadata, and lies."""

from __future__ import annotations

import io
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="the gguf extra is not installed (pip install 'embscope[gguf]')")


import reader_samples as samples
from conftest import cosine, run, run_json

import embscope
from embscope.core.errors import CheckpointError, MissingPackageError, TokenError
from embscope.formats import open_checkpoint

D, T = samples.D, samples.T


def q8_0_by_hand(blocks: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """ggml's block_q8_0: a float16 scale d, then 32 int8 values; x = d * q."""
    blocks = blocks.reshape(-1, 34)
    d = blocks[:, :2].copy().view(np.float16).astype(np.float32)
    q = blocks[:, 2:].view(np.int8).astype(np.float32)
    return (d * q).reshape(shape)


def q4_k_scale_min(scales: np.ndarray, j: int) -> tuple[int, int]:
    """ggml's get_scale_min_k4: the j-th 6-bit scale and min of a Q4_K block."""
    if j < 4:
        return scales[j] & 63, scales[j + 4] & 63
    return (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4), (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4)


def q4_k_by_hand(raw: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """ggml's dequantize_row_q4_K, written out: per 256 values, float16 d and dmin, 12 bytes packing
    eight 6-bit scales and mins, then 128 bytes of 4-bit values (low nibbles first, 32 at a time)."""
    out = []
    for block in raw.reshape(-1, 144):
        d, dmin = block[:4].copy().view(np.float16).astype(np.float32)
        scales, qs = block[4:16], block[16:]
        for chunk in range(4):
            q = qs[32 * chunk:32 * chunk + 32]
            for nibbles, j in ((q & 0xF, 2 * chunk), (q >> 4, 2 * chunk + 1)):
                sc, m = q4_k_scale_min(scales, j)
                out.append(np.float32(d * np.float32(sc)) * nibbles.astype(np.float32) - np.float32(dmin * np.float32(m)))
    return np.concatenate(out).reshape(shape)


def q4_k_blocks(rows: int, seed: int) -> np.ndarray:
    """Random Q4_K blocks with finite, modest scales (random bytes there could be NaN)."""
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, (rows, 144), dtype=np.uint8)
    blocks[:, :4] = rng.uniform(0.001, 0.02, (rows, 2)).astype(np.float16).view(np.uint8)
    return blocks


@pytest.fixture
def gpt2_gguf(tmp_path):
    path, _ = samples.gguf_gpt2(tmp_path)
    tokens, _ = samples.byte_level_vocabulary()
    table = gguf.quants.quantize(samples.rows((len(tokens), D), 1), gguf.GGMLQuantizationType.Q8_0)
    return path, q8_0_by_hand(table, (len(tokens), D))


def test_q8_0_token_table_is_dequantized_as_the_block_layout_says(gpt2_gguf):
    path, expected = gpt2_gguf
    emb = embscope.open(path)
    assert emb.checkpoint.format == "GGUF"
    assert emb.token.name == "token_embd.weight" and emb.token.tensor.quantization == "Q8_0"
    np.testing.assert_array_equal(emb.token.array, expected)
    np.testing.assert_allclose(emb.token.array, samples.rows(expected.shape, 1), atol=0.02)  # close to what was written
    assert emb.position.name == "position_embd.weight" and emb.position.tensor.dtype == "float16"
    np.testing.assert_array_equal(emb.position.array, samples.rows((T, D), 2).astype(np.float16).astype(np.float32))
    assert emb.tables.tied and emb.output is None


def test_q4_k_token_table_matches_ggml_reference_arithmetic(tmp_path):
    raw = q4_k_blocks(5, seed=3)
    path = samples.write_gguf(tmp_path / "k.gguf", {"token_embd.weight": (raw, "Q4_K"),
                                                    "output.weight": (samples.rows((5, 256), 4), "Q8_0")}, arch="llama")
    emb = embscope.open(path)
    assert emb.token.tensor.quantization == "Q4_K" and emb.token.tensor.shape == (5, 256)
    np.testing.assert_allclose(emb.token.array, q4_k_by_hand(raw, (5, 256)), rtol=1e-6, atol=1e-6)
    assert emb.output.name == "output.weight" and not emb.tables.tied


@pytest.mark.parametrize("kind, atol", [("F16", 1e-3), ("BF16", 1e-2), ("Q4_0", 0.6), ("Q4_1", 0.6), ("Q5_0", 0.3),
                                        ("Q5_1", 0.3), ("Q8_0", 0.02)])
def test_every_stored_type_reads_back_close_to_what_was_written(kind, atol, tmp_path):
    table = samples.rows((6, 64), 9)
    stored = table.astype(np.float16) if kind == "F16" else (table, kind)
    emb = embscope.open(samples.write_gguf(tmp_path / "t.gguf", {"token_embd.weight": stored}))
    assert emb.token.array.dtype == np.float32 and emb.token.array.shape == (6, 64)
    np.testing.assert_allclose(emb.token.array, table, atol=atol)


def test_cli_figures_match_numpy_on_the_dequantized_table(gpt2_gguf):
    path, table = gpt2_gguf
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    tokens, merges = samples.byte_level_vocabulary()
    reference = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, [tuple(m.split(" ")) for m in merges]))
    reference.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    reference.decoder = decoders.ByteLevel()
    dog, cat = reference.encode(" dog").ids, reference.encode(" cat").ids
    assert len(dog) == len(cat) == 1

    doc = run_json("similarity", "dog", "cat", "-c", path)  # no tokenizer file: the one inside the GGUF
    pair = doc["pairs"][0]
    assert (pair["a_ids"], pair["b_ids"]) == (dog, cat)
    assert pair["cosine"] == pytest.approx(cosine(table[dog[0]], table[cat[0]]), abs=1e-6)

    norms = run_json("norms", "--table", "token", "-c", path)
    by_row = np.linalg.norm(table.astype(np.float64), axis=1)
    assert norms["mean"] == pytest.approx(by_row.mean(), rel=1e-6)
    assert norms["median"] == pytest.approx(np.median(by_row), rel=1e-6)
    assert (norms["min"], norms["max"]) == pytest.approx((by_row.min(), by_row.max()), rel=1e-6)

    params = run_json("params", "-c", path)
    assert params["token"] == len(tokens) * D and params["position"] == T * D
    assert params["total"] == len(tokens) * D + T * D + D  # + the F32 output_norm
    assert params["quantization"] == {"token": "Q8_0"}
    text = " ".join(run("params", "-c", path).stdout.split())
    assert "the token table is stored as Q8_0: its stored elements are counted, and it is dequantized" in text


def test_info_shows_architecture_quantization_context_and_the_embedded_tokenizer(gpt2_gguf):
    path, _ = gpt2_gguf
    doc = run_json("info", "-c", path)
    assert doc["format"] == "GGUF"
    assert doc["tables"]["token"]["quantization"] == "Q8_0" and doc["tables"]["position"]["quantization"] is None
    assert doc["tokenizer"]["kind"] == "gguf (gpt2)" and doc["tokenizer"]["path"] == str(path)
    assert f"GGUF v3: architecture gpt2, context length {T}" in doc["notes"]
    assert any(note.startswith("tensor types: 1 Q8_0, 1 F16, 1 F32") for note in doc["notes"])
    assert "float32 (stored as Q8_0)" in " ".join(run("info", "-c", path).stdout.split())


def test_only_the_table_in_use_is_mapped(gpt2_gguf, monkeypatch):
    path, _ = gpt2_gguf
    mapped = []
    real = np.memmap

    def recording(*args, **kwargs):
        mapped.append(kwargs["offset"])
        return real(*args, **kwargs)

    monkeypatch.setattr(np, "memmap", recording)  # numpy.memmap, which the reader calls
    emb = embscope.open(path)
    assert mapped == []  # the catalogue comes from the header alone
    _ = emb.token.array
    assert mapped == [emb.token.tensor.storage[1]]


# -- the tokenizer in the metadata ------------------------------------------------------------

def test_byte_level_tokenizer_agrees_with_the_tokenizers_library(gpt2_gguf):
    from tokenizers import Tokenizer, models, pre_tokenizers
    tokens, merges = samples.byte_level_vocabulary()
    reference = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, [tuple(m.split(" ")) for m in merges]))
    reference.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer = embscope.open(gpt2_gguf[0]).tokenizer
    for text in ["dog", " dog", " bites", "naïve café", "中文 😀", "A cat and a dog; dogs."]:
        assert tokenizer.encode(text) == reference.encode(text).ids, text
    eot = tokens.index("<|endoftext|>")
    assert tokenizer.special_ids == frozenset({eot}) and tokenizer.unk_id is None
    assert tokenizer.token_string(eot) == "<|endoftext|>" and tokenizer.token_string(tokens.index("Ġdog")) == " dog"


def test_the_pre_tokenizer_the_file_names_is_run(tmp_path):
    # Llama 3's regex cuts digit runs in threes (\p{N}{1,3}); GPT-2's would keep " 12345" whole
    tokens, merges = samples.byte_level_vocabulary()
    path = samples.write_gguf(tmp_path / "l3.gguf", {"token_embd.weight": samples.rows((len(tokens), D), 1)},
                              arch="llama", tokenizer={"add_tokenizer_model": "gpt2", "add_tokenizer_pre": "llama-bpe",
                                                       "add_token_list": tokens, "add_token_merges": merges})
    tokenizer = embscope.open(path).tokenizer
    assert tokenizer.notes == ()
    assert tokenizer.encode("12345") == tokenizer.encode("123") + tokenizer.encode("45")
    assert tokenizer.encode("dogs 12345") == tokenizer.encode("dogs") + tokenizer.encode(" ") + tokenizer.encode("123") \
        + tokenizer.encode("45")


def sentencepiece_model():
    spm = pytest.importorskip("sentencepiece", reason="sentencepiece is not installed (in the test extra)")
    sentences = ["The dog bites the man.", "A cat and a dog; dogs and cats bite.", "naïve café 中文 😀 x²",
                 "the doghouse of the cat is dogged by dogs"] * 20
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences), model_writer=buf, vocab_size=300,
                                   model_type="bpe", byte_fallback=True, normalization_rule_name="identity",
                                   remove_extra_whitespaces=False, character_coverage=1.0, minloglevel=2)
    return spm.SentencePieceProcessor(model_proto=buf.getvalue())


def write_sentencepiece_gguf(path: Path, sp) -> Path:
    """The metadata llama.cpp's convert_hf_to_gguf.py writes for a SentencePiece (llama) vocabulary."""
    n = sp.get_piece_size()
    types = [3 if sp.is_control(i) else 2 if sp.is_unknown(i) else 6 if sp.is_byte(i) else 5 if sp.is_unused(i) else 1
             for i in range(n)]
    return samples.write_gguf(path, {"token_embd.weight": samples.rows((n, D), 1)}, arch="llama", tokenizer={
        "add_tokenizer_model": "llama", "add_token_list": [sp.id_to_piece(i) for i in range(n)],
        "add_token_scores": [sp.get_score(i) for i in range(n)], "add_token_types": types,
        "add_unk_token_id": sp.unk_id(), "add_bos_token_id": sp.bos_id(), "add_add_space_prefix": True})


def test_sentencepiece_tokenizer_agrees_with_sentencepiece(tmp_path):
    sp = sentencepiece_model()
    tokenizer = embscope.open(write_sentencepiece_gguf(tmp_path / "llama.gguf", sp)).tokenizer
    assert tokenizer.kind == "gguf (llama)"
    for word in ["dog", "dogs", "doghouse", "cat", "zebra", "中文", "😀", "naïve"]:  # zebra: byte fallback
        assert tokenizer.encode(word) == sp.encode(word), word
    assert tokenizer.unk_id == sp.unk_id() and {sp.bos_id(), sp.eos_id(), sp.unk_id()} <= tokenizer.special_ids
    assert tokenizer.token_string(sp.piece_to_id("▁dog")) == " dog"
    assert tokenizer.token_string(sp.piece_to_id("<0x7A>")) == "z"
    assert tokenizer.decode(sp.encode("zebra dogs")) == " zebra dogs"


def test_wordpiece_tokenizer_as_llama_cpp_stores_bert(tmp_path):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "▁dog", "▁cat", "s", "▁bit", "es", "▁the", "▁."]
    types = [3, 2, 3, 3] + [1] * 7
    path = samples.write_gguf(tmp_path / "bert.gguf", {"token_embd.weight": samples.rows((len(tokens), D), 1)},
                              arch="bert", tokenizer={"add_tokenizer_model": "bert", "add_token_list": tokens,
                                                      "add_token_types": types, "add_unk_token_id": 1})
    tokenizer = embscope.open(path).tokenizer
    assert tokenizer.encode("The Dogs bites.") == [9, 4, 6, 7, 8, 10]  # worked out by hand, longest match first
    assert tokenizer.encode("zebra") == [1] and tokenizer.unk_id == 1
    assert [tokenizer.token_string(i) for i in (4, 6, 2)] == ["dog", "##s", "[CLS]"]


def test_a_tokenizer_embscope_cannot_run_still_names_ids(tmp_path):
    path = samples.write_gguf(tmp_path / "t5.gguf", {"token_embd.weight": samples.rows((3, D), 1)}, arch="t5",
                              tokenizer={"add_tokenizer_model": "t5", "add_token_list": ["<pad>", "▁dog", "s"]})
    emb = embscope.open(path)
    assert emb.tokenizer.token_string(1) == "▁dog"
    assert emb.tokenizer.notes == (("the file's 't5' tokenizer is not run by embscope: ids are named, words cannot "
                                   "be looked up"),)
    with pytest.raises(TokenError, match=r"^the 't5' tokenizer stored in t5.gguf cannot be run by embscope \(it runs "
                                         r"gpt2, llama and bert\): give token ids with ids=True, or the model's "
                                         r"tokenizer file with the tokenizer argument$"):
        emb.tokenizer.encode("dog")
    assert run_json("similarity", "--ids", "1", "2", "-c", path)["pairs"][0]["a_tokens"] == ["▁dog"]


# -- broken and lying files -------------------------------------------------------------------

def field_offset(data: bytes, name: bytes, after: int) -> int:
    """Where a field sits, `after` bytes past the end of the (first) string `name` in the header."""
    return data.index(name) + len(name) + after


def patched(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


TENSOR = b"token_embd.weight"  # after its name: uint32 n_dims, 2 x uint64 dims, uint32 type, uint64 offset
LIES = {
    "cut in the header": (lambda d: d[:20], r"expected 8 bytes for the metadata count at offset 16, the file holds 20 bytes"),
    "cut in the data": (lambda d: d[:-64], (r"tensor 'output_norm.weight': expected 128 bytes of data at offset \d+, "
                                           r"the file holds \d+ bytes")),
    "offset past the end": (lambda d: patched(d, field_offset(d, TENSOR, 24), "<Q", 2**40),
                            r"tensor 'token_embd.weight': expected \d+ bytes of data at offset 10995116\d+, the file"),
    "rows that are not whole blocks": (lambda d: patched(d, field_offset(d, TENSOR, 4), "<Q", 33),
                                       r"tensor 'token_embd.weight': Q8_0 stores blocks of 32 elements, the rows hold 33"),
    "absurd dimensions": (lambda d: patched(d, field_offset(d, TENSOR, 12), "<Q", 2**62),
                          r"shape \[4611686018427387904, 32\] declares \d+ elements, an absurd size"),
    "too many dimensions": (lambda d: patched(d, field_offset(d, TENSOR, 0), "<I", 9),
                            r"tensor 'token_embd.weight': expected at most 4 dimensions, found 9"),
    "unknown type": (lambda d: patched(d, field_offset(d, TENSOR, 20), "<I", 99),
                     r"tensor 'token_embd.weight': unknown ggml type 99"),
    "metadata count": (lambda d: patched(d, 16, "<Q", 2**60),
                       r"header declares 1152921504606846976 metadata keys and 3 tensors, more than the \d+ bytes"),
    "array length": (lambda d: patched(d, field_offset(d, b"tokenizer.ggml.tokens", 8), "<Q", 2**40),
                     r"key 'tokenizer.ggml.tokens' declares 1099511627776 elements, more than the \d+ bytes left"),
    "version 1": (lambda d: patched(d, 4, "<I", 1), r"GGUF version 1, expected one of 2, 3"),
    "big-endian": (lambda d: patched(d, 4, ">I", 3), r"a big-endian GGUF file; embscope reads little-endian GGUF only"),
}


@pytest.mark.parametrize("case", list(LIES))
def test_broken_or_lying_gguf_is_one_clear_error(case, gpt2_gguf):
    path, _ = gpt2_gguf
    change, message = LIES[case]
    path.write_bytes(change(path.read_bytes()))
    with pytest.raises(CheckpointError, match=message) as err:
        open_checkpoint(path)
    assert "\n" not in str(err.value)


def test_lie_on_the_command_line_is_exit_1_and_one_line(gpt2_gguf):
    path, _ = gpt2_gguf
    path.write_bytes(path.read_bytes()[:20])
    result = run("info", "-c", path, code=1)
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert result.stderr.startswith("Error: ") and "Traceback" not in result.stderr


def test_missing_gguf_package_names_the_extra(gpt2_gguf, monkeypatch):
    monkeypatch.setitem(sys.modules, "gguf", None)
    with pytest.raises(MissingPackageError, match=r"is a GGUF file; reading it needs the 'gguf' package "
                                                  r"\(pip install 'embscope\[gguf\]'\)$") as err:
        open_checkpoint(gpt2_gguf[0])
    assert (err.value.package, err.value.extra) == ('gguf', 'gguf')


def test_byte_token_names_need_two_hex_digits():
    """Found by the fuzzer: int("-1", 16) is -1, which is no byte."""
    from embscope.tokenizers.gguf_vocab import byte_token
    assert [byte_token(t) for t in ("<0xE2>", "<0x0a>", "<0x-1>", "<0x+F>", "<0xE2")] == [0xE2, 0x0A, None, None, None]


# -- malformed and inconsistent vocabularies: one line naming the first bad entry -------------------------

def vocabulary_gguf(path: Path, model: str | None = "llama", tokens=("<unk>", "a", "b", "ab"), pre: str | None = None,
                    **arrays) -> Path:
    """A GGUF whose tokenizer arrays are written as given: name -> (values, gguf value type of the elements)."""
    writer = gguf.GGUFWriter(str(path), "llama")
    if model is not None:
        writer.add_tokenizer_model(model)
    if pre is not None:
        writer.add_tokenizer_pre(pre)
    writer.add_token_list(list(tokens))
    for key, (values, item_type) in arrays.items():
        writer.add_key_value(f"tokenizer.ggml.{key}", list(values), gguf.GGUFValueType.ARRAY, item_type)
    writer.add_tensor("token_embd.weight", samples.rows((len(tokens), D), 1))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


VT = gguf.GGUFValueType
MALFORMED = {
    "token types of floats": ({"token_type": ([float("nan")] * 4, VT.FLOAT64)},
                              ("expected tokenizer.ggml.token_type to be an array of token types (INT32), found an "
                               "array of FLOAT64")),
    "too few token types": ({"token_type": ([1, 1], VT.INT32)},
                            "expected tokenizer.ggml.token_type to hold a token type for each of the 4 tokens, found 2"),
    "scores of strings": ({"scores": (["x"] * 4, VT.STRING)},
                          ("expected tokenizer.ggml.scores to be an array of scores (FLOAT32 or INT32), found an array "
                           "of STRING")),
    "a NaN score": ({"scores": ([0.0, -1.0, float("nan"), -2.0], VT.FLOAT32)},
                    "expected a number as the score of every token in tokenizer.ggml.scores, found NaN for token 2 ('b')"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_tokenizer_array_is_one_line(tmp_path, case):
    arrays, message = MALFORMED[case]
    path = vocabulary_gguf(tmp_path / "bad.gguf", **arrays)
    with pytest.raises(CheckpointError) as err:
        _ = embscope.open(path).tokenizer
    assert str(err.value) == f"bad.gguf: tokenizer: {message}"


def test_float_token_types_cost_the_names_not_the_command(tmp_path):
    # FLOAT64 NaN token types gave a traceback on every command, info included
    path = vocabulary_gguf(tmp_path / "r14.gguf", tokens=[f"t{i}" for i in range(8)],
                           scores=([0.0] * 8, VT.FLOAT32), token_type=([float("nan")] * 8, VT.FLOAT64))
    info = run("info", "-c", path)
    assert "Traceback" not in info.stdout + info.stderr
    doc = run_json("similarity", "--ids", "0", "1", "-c", path)
    assert doc["pairs"][0]["a_ids"] == [0]
    failed = run("similarity", "t1", "t2", "-c", path, code=1)
    assert failed.stderr.count("\n") == 1 and "FLOAT64" in failed.stderr and "Traceback" not in failed.stderr


INCONSISTENT = {
    "a merge of a token not in the vocabulary": (["a c"], ("expected merge 0 of tokenizer.ggml.merges ('a c') to join "
                                                           "two tokens into a third, found 'c', which is not a token")),
    "a merge whose result is missing": (["a b", "b a"], ("expected merge 1 of tokenizer.ggml.merges ('b a') to join "
                                                         "two tokens into a third, found 'ba', which is not a token")),
    "a merge without a space": (["ab"], ("expected merge 0 of tokenizer.ggml.merges to be two tokens and a space, "
                                         "found 'ab'")),
}


@pytest.mark.parametrize("case", list(INCONSISTENT))
def test_inconsistent_merges_are_one_line_naming_the_first_bad_one(tmp_path, case):
    merges, message = INCONSISTENT[case]
    path = vocabulary_gguf(tmp_path / "bad.gguf", model="gpt2", tokens=["a", "b", "ab"], merges=(merges, VT.STRING))
    with pytest.raises(CheckpointError) as err:
        _ = embscope.open(path).tokenizer
    assert str(err.value) == f"bad.gguf: tokenizer: {message}"


def test_a_token_listed_twice_is_refused_as_llama_cpp_refuses_it(tmp_path):
    path = vocabulary_gguf(tmp_path / "twice.gguf", tokens=["<unk>", "a", "b", "a"])
    with pytest.raises(CheckpointError) as err:
        _ = embscope.open(path).tokenizer
    assert str(err.value) == "twice.gguf: tokenizer: expected each token once in tokenizer.ggml.tokens, found 'a' as ids 1 and 3"


def test_an_empty_token_is_named_as_llama_cpp_names_it(tmp_path):
    path = vocabulary_gguf(tmp_path / "empty.gguf", tokens=["<unk>", "", "a"], scores=([0.0, 0.0, -1.0], VT.FLOAT32))
    assert embscope.open(path).tokenizer.token_string(1) == "[EMPTY_1]"


def test_a_pre_tokenizer_embscope_does_not_imitate_is_named(tmp_path):
    path = vocabulary_gguf(tmp_path / "kimi.gguf", model="gpt2", pre="kimi-k2", tokens=["a", "b", "ab"],
                           merges=(["a b"], VT.STRING))
    tokenizer = embscope.open(path).tokenizer
    assert tokenizer.notes == (("kimi.gguf names the pre-tokenizer 'kimi-k2', which embscope does not run: llama.cpp cuts "
                                "it with hand-written code (unicode_regex_split_custom_kimi_k2): ids are named, words "
                                "cannot be looked up"),)
    with pytest.raises(TokenError, match="which embscope does not run"):
        tokenizer.encode("ab")


def test_a_file_naming_no_tokenizer_names_ids_only(tmp_path):
    tokenizer = embscope.open(vocabulary_gguf(tmp_path / "bare.gguf", model=None, tokens=["a", "b"])).tokenizer
    assert tokenizer.token_string(1) == "b"
    assert tokenizer.notes == (("the file names no tokenizer (tokenizer.ggml.model): ids are named, words cannot be "
                                "looked up"),)
