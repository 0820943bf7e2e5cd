"""The tokenizer a keras-hub model saved as .keras carries in the zip's assets/ (formats.keras_assets). keras-hub
0.32's task.save writes, beside metadata.json, config.json and model.weights.h5, its tokenizer's save_assets files at
the tokenizer's attribute path: 'assets/preprocessor/tokenizer/' holding vocabulary.json and merges.txt
(BytePairTokenizer: GPT-2), vocabulary.txt (WordPieceTokenizer: BERT) or vocabulary.spm (SentencePieceTokenizer:
ALBERT), and config.json names the tokenizer under config.preprocessor.config.tokenizer with its settings
(lowercase, strip_accents, oov_token). keras-hub needs tensorflow-text to install, so the zips are laid out here
as keras-hub 0.32 writes them (member names and order and the config's nesting were taken from GPT2CausalLM,
BertTextClassifier and AlbertTextClassifier saves made with keras-hub's own classes). The ids are checked against
the libraries keras-hub's tokenizers implement: tokenizers' GPT-2 byte-level BPE and BERT WordPiece, and
sentencepiece on the same proto."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
from conftest import invoke, run_json
from reader_samples import keras_weights_h5

V, T, D = 12, 8, 4
GPT2_VOCAB = {"<|endoftext|>": 0, "a": 1, "b": 2, "c": 3, "\u0120": 4, "ab": 5, "\u0120a": 6, "abc": 7, "\u0120ab": 8,
              "ca": 9, "x": 10, "y": 11}
GPT2_MERGES = "#version: 0.2\na b\n\u0120 a\nab c\n\u0120a b\nc a\n"
BERT_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "quick", "brown", "fox", "##es", "hello", "Hello"]


def tokenizer_config(class_name: str, settings: dict) -> dict:
    return {"module": f"keras_hub.src.models.x.{class_name.lower()}", "class_name": class_name,
            "config": {"name": class_name.lower(), "trainable": True, "config_file": "tokenizer.json", **settings},
            "registered_name": f"keras_hub>{class_name}"}


def write_keras_hub(path, tokenizer: dict, assets: dict[str, bytes], vocab: int = V):
    """A keras-hub task's .keras: the task config with its backbone and preprocessor (which holds the tokenizer),
    the backbone's token and position tables, and the tokenizer's assets after model.weights.h5."""
    rng = np.random.default_rng(0)
    token, position = rng.standard_normal((vocab, D)).astype(np.float32), rng.standard_normal((T, D)).astype(np.float32)
    config = {"module": "keras_hub.src.models.x", "class_name": "XCausalLM", "registered_name": "keras_hub>XCausalLM",
              "config": {"backbone": {"module": "keras_hub.src.models.x", "class_name": "XBackbone",
                                      "config": {"name": "x_backbone", "vocabulary_size": vocab}},
                         "preprocessor": {"module": "keras_hub.src.models.x", "class_name": "XPreprocessor",
                                          "config": {"name": "x_preprocessor", "tokenizer": tokenizer,
                                                     "config_file": "preprocessor.json"}},
                         "name": "x_causal_lm"}}
    layers = [("layers/x_backbone/layers/reversible_embedding", "token_embedding", "ReversibleEmbedding", [token]),
              ("layers/x_backbone/layers/position_embedding", "position_embedding", "PositionEmbedding", [position])]
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("metadata.json", json.dumps({"keras_version": "3.15.1", "date_saved": "2026-12-08@01:00:00"}))
        zf.writestr("config.json", json.dumps(config))
        zf.writestr("model.weights.h5", keras_weights_h5(layers))
        for name, data in assets.items():
            zf.writestr(f"assets/preprocessor/tokenizer/{name}", data)
    return path


def ids_of(path, word: str) -> list[int]:
    return run_json("neighbors", "-c", path, word, "-k", "1")["ids"]


def test_a_byte_pair_tokenizers_vocabulary_and_merges_are_read_in_the_zip(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    path = write_keras_hub(tmp_path / "gpt2.keras", tokenizer_config("GPT2Tokenizer", {"add_prefix_space": False}),
                           {"vocabulary.json": json.dumps(GPT2_VOCAB).encode(), "merges.txt": GPT2_MERGES.encode()})
    merges = [tuple(line.split()) for line in GPT2_MERGES.splitlines()[1:]]
    reference = tokenizers.Tokenizer(tokenizers.models.BPE(GPT2_VOCAB, merges))
    reference.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    for word in ("abc", "cab", "xyab"):
        assert ids_of(path, word) == reference.encode(word).ids, word
    doc = run_json("info", "-c", path)
    assert doc["tokenizer"]["kind"] == "gpt2-bpe"
    assert doc["tokenizer"]["path"] == str(path / "assets/preprocessor/tokenizer/vocabulary.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpt2.keras"]  # nothing extracted


@pytest.mark.parametrize("lowercase", [True, False])
def test_a_word_piece_tokenizer_takes_its_settings_from_config_json(tmp_path, lowercase):
    tokenizers = pytest.importorskip("tokenizers")
    settings = {"lowercase": lowercase, "strip_accents": False, "oov_token": "[UNK]", "suffix_indicator": "##"}
    path = write_keras_hub(tmp_path / "bert.keras", tokenizer_config("BertTokenizer", settings),
                           {"vocabulary.txt": "\n".join(BERT_VOCAB).encode() + b"\n"})
    reference = tokenizers.BertWordPieceTokenizer({t: i for i, t in enumerate(BERT_VOCAB)}, lowercase=lowercase,
                                                  strip_accents=False)
    for word in ("Hello", "foxes", "the"):
        assert ids_of(path, word) == reference.encode(word, add_special_tokens=False).ids, word
    assert ids_of(path, "Hello") == ([10] if lowercase else [11])  # BERT_VOCAB's lines, by hand


def test_a_sentencepiece_tokenizers_proto_is_read_in_the_zip(tmp_path):
    spm = pytest.importorskip("sentencepiece")
    out = io.BytesIO()
    lines = ["the quick brown fox jumps over the lazy dog", "hello world this is a test"] * 20
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=out, vocab_size=V + 20,
                                   normalization_rule_name="identity", minloglevel=2)
    proto = out.getvalue()
    path = write_keras_hub(tmp_path / "albert.keras", tokenizer_config("AlbertTokenizer", {"proto": None}),
                           {"vocabulary.spm": proto}, vocab=V + 20)
    reference = spm.SentencePieceProcessor(model_proto=proto)
    for word in ("fox", "hello", "quick"):
        assert ids_of(path, word) == reference.encode(word), word


def test_assets_without_a_tokenizer_in_config_json_are_not_taken(tmp_path):
    path = write_keras_hub(tmp_path / "model.keras", {"class_name": "Dense", "config": {}},
                           {"vocabulary.txt": "\n".join(BERT_VOCAB).encode()})
    assert run_json("info", "-c", path)["tokenizer"] is None


def test_a_vocabulary_past_its_cap_is_one_line(tmp_path, monkeypatch):
    from embscope.formats import keras_assets
    monkeypatch.setattr(keras_assets, "MAX_TOKENIZER_BYTES", 10)
    path = write_keras_hub(tmp_path / "bert.keras", tokenizer_config("BertTokenizer", {"lowercase": True}),
                           {"vocabulary.txt": "\n".join(BERT_VOCAB).encode()})
    result = invoke("neighbors", "-c", path, "the")
    assert result.exit_code == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "expected a vocabulary of at most 10 bytes" in result.stderr


def test_the_tokenizers_own_folder_is_taken_among_several(tmp_path):
    """A zip with a second vocabulary elsewhere under assets/ (another layer's): the folder of the tokenizer
    config.json names is read; with none named, several are one line naming --tokenizer."""
    path = write_keras_hub(tmp_path / "bert.keras", tokenizer_config("BertTokenizer", {"lowercase": False}),
                           {"vocabulary.txt": "\n".join(BERT_VOCAB).encode()})
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr("assets/other_layer/vocabulary.txt", b"[UNK]\nHello\n")
    assert ids_of(path, "Hello") == [11]
    nested = {"class_name": "XTokenizer", "config": {}}  # its assets would be under preprocessor/tokenizer/t/: none
    other = write_keras_hub(tmp_path / "other.keras", {"class_name": "Dense", "config": {"t": nested}},
                            {"vocabulary.txt": "\n".join(BERT_VOCAB).encode()})
    with zipfile.ZipFile(other, "a") as zf:
        zf.writestr("assets/other_layer/vocabulary.txt", b"[UNK]\nHello\n")
    result = invoke("neighbors", "-c", other, "Hello")
    assert result.exit_code == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "expected one tokenizer's assets in the .keras zip, found several" in result.stderr
    assert "--tokenizer" in result.stderr


def test_a_config_of_long_keys_over_many_layers_is_walked_in_bounded_memory(tmp_path):
    """A hostile config.json: one 50,000-character key above 2,000 sibling objects. The tokenizer walk made each
    sibling's attribute path (the long key plus its own) at once, 100 MB for a 100 kB document; a 64 MiB
    config.json (a few kB deflated) so reached tens of GB. Only paths toward an assets folder are made now."""
    import tracemalloc
    siblings = {f"s{i}": {"class_name": "Dense", "config": {"i": i}} for i in range(2000)}
    tokenizer = tokenizer_config("BertTokenizer", {"lowercase": False})
    path = write_keras_hub(tmp_path / "bert.keras", tokenizer, {"vocabulary.txt": "\n".join(BERT_VOCAB).encode()})
    with zipfile.ZipFile(path) as zf:
        config = json.loads(zf.read("config.json"))
    config["config"]["k" * 50_000] = siblings
    hostile = tmp_path / "hostile.keras"
    with zipfile.ZipFile(path) as zf, zipfile.ZipFile(hostile, "w") as out:
        for info in zf.infolist():
            data = json.dumps(config).encode() if info.filename == "config.json" else zf.read(info)
            out.writestr(info.filename, data)
    tracemalloc.start()
    try:
        assert ids_of(hostile, "Hello") == [11]  # the tokenizer at preprocessor/tokenizer/ is still found
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40_000_000, peak


def test_a_word_piece_vocabulary_line_is_read_as_keras_hub_reads_it(tmp_path):
    """keras-hub's WordPieceTokenizer.set_vocabulary reads vocabulary.txt as `[line.rstrip() for line in file]`
    (open's universal newlines, each line's trailing whitespace dropped): 'quick \\t' is the token 'quick', id 6.
    embscope kept 'quick \\t', so the word 'quick' was [UNK] (id 1)."""
    tokenizers = pytest.importorskip("tokenizers")
    lines = [token + (" \t" if token == "quick" else "\u00a0" if token == "fox" else "") for token in BERT_VOCAB]
    text = "\r\n".join(lines) + "\r\n"
    (tmp_path / "vocabulary.txt").write_bytes(text.encode())
    with open(tmp_path / "vocabulary.txt", encoding="utf-8") as file:  # keras-hub's own statement
        reference = [line.rstrip() for line in file]
    assert reference == BERT_VOCAB
    path = write_keras_hub(tmp_path / "bert.keras", tokenizer_config("BertTokenizer", {"lowercase": False}),
                           {"vocabulary.txt": text.encode()})
    bert = tokenizers.BertWordPieceTokenizer({t: i for i, t in enumerate(reference)}, lowercase=False)
    for word in ("quick", "fox", "foxes"):
        assert ids_of(path, word) == bert.encode(word, add_special_tokens=False).ids, word
    assert ids_of(path, "quick") == [6]


def test_a_word_piece_tokenizers_suffix_indicator_is_its_configs(tmp_path):
    """keras-hub's WordPieceTokenizer(suffix_indicator='@@') marks a word's later pieces with '@@', and config.json
    says so; '##' was assumed, so 'foxes' ('fox' + '@@es') was [UNK]. The reference: tokenizers' WordPiece model
    with that prefix."""
    tokenizers = pytest.importorskip("tokenizers")
    vocab = [token.replace("##", "@@") for token in BERT_VOCAB]
    path = write_keras_hub(tmp_path / "bert.keras", tokenizer_config("BertTokenizer", {"suffix_indicator": "@@"}),
                           {"vocabulary.txt": "\n".join(vocab).encode() + b"\n"})
    bert = tokenizers.Tokenizer(tokenizers.models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]",
                                                            continuing_subword_prefix="@@"))
    bert.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
    assert bert.encode("foxes", add_special_tokens=False).ids == [8, 9]  # BERT_VOCAB's lines, by hand
    assert ids_of(path, "foxes") == [8, 9]
