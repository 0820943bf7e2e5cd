"""SentencePiece tokenizer.model: a tiny model trained here by the sentencepiece package, in-process.
Expected ids are looked up by piece name; minbpe's text .model files must stay byte-level BPE."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from embscope.core.errors import CheckpointError, EmbscopeError
from embscope.tokenizers import Tokenizer, find_tokenizer, load_tokenizer

SENTENCES = ["the dog bites the man", "a dog and a cat", "the man bites back", "dogs bite"] * 20
SAMPLE_MINBPE = Path(__file__).resolve().parents[1] / "sample_checkpoints" / "nlm" / "tokenizer.model"


@pytest.fixture(scope="module")
def model_bytes():
    spm = pytest.importorskip("sentencepiece")
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(SENTENCES), model_writer=out, vocab_size=300,
                                   model_type="bpe", byte_fallback=True, user_defined_symbols=["<sep>"],
                                   minloglevel=2)
    return out.getvalue()


@pytest.fixture
def model_path(tmp_path, model_bytes):
    path = tmp_path / "tokenizer.model"
    path.write_bytes(model_bytes)
    return path


@pytest.fixture
def processor(model_bytes):
    import sentencepiece

    return sentencepiece.SentencePieceProcessor(model_proto=model_bytes)


def test_pieces_and_ids(model_path, processor):
    tokenizer = load_tokenizer(model_path)
    assert tokenizer.kind == "sentencepiece" and isinstance(tokenizer, Tokenizer)
    assert tokenizer.vocab_size == 300
    dog, bites = processor.piece_to_id("▁dog"), processor.piece_to_id("▁bites")
    assert tokenizer.encode("dog bites") == [dog, bites]  # no <s>, no </s>
    assert [tokenizer.token_string(id) for id in (dog, bites)] == [" dog", " bites"]
    # "é" is not a piece: byte fallback gives its two UTF-8 bytes, shown escaped
    e_acute = [processor.piece_to_id("<0xC3>"), processor.piece_to_id("<0xA9>")]
    ids = tokenizer.encode("dog bites é")
    assert ids == [dog, bites, processor.piece_to_id("▁"), *e_acute]
    assert [tokenizer.token_string(id) for id in ids[2:]] == [" ", "\\xc3", "\\xa9"]
    assert tokenizer.decode(ids) == "dog bites é"


def test_unknown_and_control_pieces(model_path, processor):
    tokenizer = load_tokenizer(model_path)
    # sentencepiece's trainer puts <unk>, <s>, </s> first; <sep> is user-defined text, not special
    assert (processor.id_to_piece(0), processor.id_to_piece(1), processor.id_to_piece(2)) == ("<unk>", "<s>", "</s>")
    assert tokenizer.unk_id == 0
    assert tokenizer.special_ids == {0, 1, 2}
    assert [tokenizer.token_string(id) for id in (0, 1, 2)] == ["<unk>", "<s>", "</s>"]
    assert tokenizer.decode([1, processor.piece_to_id("▁dog"), 2]) == "<s>dog</s>"
    assert processor.piece_to_id("<sep>") in tokenizer.encode("a<sep>b")


def test_minbpe_model_files_stay_byte_bpe(tmp_path, model_bytes):
    assert load_tokenizer(SAMPLE_MINBPE).kind == "byte-bpe"
    (tmp_path / "tokenizer.model").write_bytes(SAMPLE_MINBPE.read_bytes())
    assert find_tokenizer(tmp_path).kind == "byte-bpe"
    (tmp_path / "tokenizer.model").write_bytes(model_bytes)
    assert find_tokenizer(tmp_path).kind == "sentencepiece"


def test_without_the_package(model_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "sentencepiece", None)
    with pytest.raises(EmbscopeError) as err:
        load_tokenizer(model_path)
    assert str(err.value) == (
        "reading tokenizer.model needs the 'sentencepiece' package (pip install 'embscope[sentencepiece]')"
    )


def test_damaged_model(tmp_path, model_bytes):
    path = tmp_path / "tokenizer.model"
    path.write_bytes(model_bytes[:1000])  # cut inside the pieces
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(path)
    assert str(err.value).startswith(f"expected a SentencePiece model in {path}, found an unreadable file: ")
