"""BERT WordPiece vocab.txt: written here line by line; ids worked out by hand from the line numbers,
and checked against the tokenizers library's own BertWordPieceTokenizer reading the same file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import run, run_json
from safetensors.numpy import save_file

from embscope.core.errors import CheckpointError
from embscope.tokenizers import Tokenizer, find_tokenizer, load_tokenizer

pytest.importorskip("tokenizers")

# line number = id: [PAD] 0, [unused0] 1, [UNK] 2, [CLS] 3, [SEP] 4, [MASK] 5, the 6, dog 7, bite 8, ##s 9,
# man 10, naive 11, cafe 12, 中 13, ##og 14, d 15
UNCASED = ["[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "dog", "bite", "##s", "man",
           "naive", "cafe", "中", "##og", "d"]
CASED = [*UNCASED, "The", "Dog"]  # The 16, Dog 17


def write_vocab(directory: Path, lines: list[str], name: str = "vocab.txt") -> Path:
    path = directory / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_uncased_vocabulary_by_hand(tmp_path):
    tokenizer = load_tokenizer(write_vocab(tmp_path, UNCASED))
    assert tokenizer.kind == "wordpiece" and isinstance(tokenizer, Tokenizer)
    assert tokenizer.vocab_size == 16
    assert tokenizer.encode("The dog bites") == [6, 7, 8, 9]  # lower-cased, no [CLS] ... [SEP]
    assert tokenizer.encode("Naïve café") == [11, 12]  # accents stripped with lower-casing, as BERT does
    assert tokenizer.encode("dog中") == [7, 13]  # Chinese characters are words of their own
    assert tokenizer.encode("dogog") == [7, 14]
    assert tokenizer.encode("[CLS] dog") == [3, 7]  # special tokens in text are matched whole
    assert [tokenizer.token_string(id) for id in (7, 9, 3)] == ["dog", "##s", "[CLS]"]
    assert tokenizer.decode([6, 7, 8, 9]) == "the dog bites"
    assert tokenizer.notes == (("words are lower-cased: the vocabulary has no upper-case pieces "
                                "(no do_lower_case in tokenizer_config.json or config.json)"),)


def test_unknown_and_special_ids(tmp_path):
    tokenizer = load_tokenizer(write_vocab(tmp_path, UNCASED))
    assert tokenizer.unk_id == 2
    assert tokenizer.encode("🐶") == [2]
    assert tokenizer.special_ids == {0, 2, 3, 4, 5}  # [unused0] is a placeholder, not a special token


def test_matches_the_librarys_bert_tokenizer(tmp_path):
    from tokenizers import BertWordPieceTokenizer

    path = write_vocab(tmp_path, CASED)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    reference = BertWordPieceTokenizer(str(path), lowercase=False)
    tokenizer = load_tokenizer(path)
    assert tokenizer.notes == ()
    for text in ["The Dog bites the dog", "THE dog", "naive café 中 dogs", "x", "dog,dog.dog"]:
        assert tokenizer.encode(text) == reference.encode(text, add_special_tokens=False).ids, text
    assert tokenizer.encode("The Dog") == [16, 17]


def test_case_follows_the_settings_files(tmp_path):
    path = write_vocab(tmp_path, CASED)
    # no setting: the vocabulary has "The" and "Dog", so it is cased
    cased = load_tokenizer(path)
    assert cased.encode("The Dog") == [16, 17]
    assert cased.notes == (("words keep their case: the vocabulary has upper-case pieces "
                            "(no do_lower_case in tokenizer_config.json or config.json)"),)
    (tmp_path / "config.json").write_text(json.dumps({"do_lower_case": True}))
    assert load_tokenizer(path).encode("The Dog") == [6, 7]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))  # wins over config.json
    assert load_tokenizer(path).encode("The Dog") == [16, 17]


def test_unk_token_from_tokenizer_config(tmp_path):
    path = write_vocab(tmp_path, ["<unk>", "dog"])
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"unk_token": {"content": "<unk>"}}))
    tokenizer = load_tokenizer(path)
    assert tokenizer.unk_id == 0 and tokenizer.encode("cat dog") == [0, 1]


def test_bad_settings(tmp_path):
    path = write_vocab(tmp_path, UNCASED)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": "yes"}))
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(path)
    assert str(err.value) == "expected do_lower_case in tokenizer_config.json to be true or false, found 'yes'"
    for key in ("strip_accents", "tokenize_chinese_chars"):
        (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True, key: 1}))
        with pytest.raises(CheckpointError) as err:
            load_tokenizer(path)
        assert str(err.value) == f"expected {key} in tokenizer_config.json to be true, false or null, found 1"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True, "strip_accents": None}))
    assert load_tokenizer(path).encode("Dög") == load_tokenizer(path).encode("dog")  # null: with lower-casing


def test_vocabulary_without_unknown_token_is_not_wordpiece(tmp_path):
    write_vocab(tmp_path, ["the", "dog"])
    assert find_tokenizer(tmp_path) is None


def test_repeated_token_keeps_its_last_id(tmp_path):
    tokenizer = load_tokenizer(write_vocab(tmp_path, ["[UNK]", "dog", "dog"]))
    assert tokenizer.encode("dog") == [2]  # as transformers' load_vocab: the last line wins
    assert tokenizer.vocab_size == 3


def test_found_beside_the_weights_unless_there_is_a_tokenizer_json(tmp_path):
    from safetensors.numpy import save_file

    save_file({"embeddings.word_embeddings.weight": np.eye(16, 4, dtype=np.float32)}, tmp_path / "model.safetensors")
    write_vocab(tmp_path, UNCASED)
    assert find_tokenizer(tmp_path / "model.safetensors").kind == "wordpiece"
    doc = run_json("info", "-c", tmp_path)
    assert doc["tokenizer"] == {"kind": "wordpiece", "path": str(tmp_path / "vocab.txt"), "vocab_size": 16}
    from tokenizers import BertWordPieceTokenizer

    BertWordPieceTokenizer(str(tmp_path / "vocab.txt")).save(str(tmp_path / "tokenizer.json"))
    assert find_tokenizer(tmp_path).kind == "huggingface"


# rxnfp 0.1.0's models/transformers/bert_pretrained/vocab.txt, its first 51 lines: [PAD], [unused1..10], BERT's
# other specials, then the SMILES pieces of its regex splitter (SmilesTokenizer), '>>' the reaction arrow in
# every input, '[C@H]' an atom
SMILES_VOCAB = ["[PAD]", *(f"[unused{i}]" for i in range(1, 11)), "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                "c", "C", "(", ")", "O", "1", "2", "=", "N", ".", "n", "3", "F", "Cl", ">>", "~", "-", "4",
                "[C@H]", "S", "[C@@H]", "[O-]", "Br", "#", "/", "[nH]", "[N+]", "s", "5", "o", "P", "[Na+]",
                "[Si]", "I", "[Na]", "%10", "%11"]


def test_a_vocabulary_made_by_another_splitter_is_not_judged_by_berts(tmp_path):
    """rxnfp 0.1.0's bert_pretrained (a BERT MLM over reaction SMILES, torch.save's legacy format, tied head): its
    vocab.txt was made by a SMILES regex, so BERT's pre-tokenizer splits 541 of its 591 pieces apart. undertrained
    said '26 rows known unused (10 placeholder, 16 unreachable)', the 16 being '>>', in every reaction rxnfp reads,
    and the ring closures '%10'..'%24', and counted 540 rows special, 525 of them atoms such as '[C@H]'."""
    torch = pytest.importorskip("torch")
    from embscope.analysis.token_kinds import token_kinds

    write_vocab(tmp_path, SMILES_VOCAB)
    rng = np.random.default_rng(0)
    token = torch.tensor(rng.standard_normal((len(SMILES_VOCAB), 16)) * 0.5, dtype=torch.float32)
    torch.save({"bert.embeddings.word_embeddings.weight": token, "cls.predictions.decoder.weight": token,
                "bert.embeddings.position_embeddings.weight": torch.randn(32, 16)},
               tmp_path / "pytorch_model.bin", _use_new_zipfile_serialization=False)
    placeholders = [id for id, line in enumerate(SMILES_VOCAB) if line.startswith("[unused")]
    berts = [id for id, line in enumerate(SMILES_VOCAB) if line in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")]
    kinds = token_kinds(load_tokenizer(tmp_path / "vocab.txt"), len(SMILES_VOCAB))
    assert np.flatnonzero(kinds["unreachable"]).tolist() == placeholders  # BERT's pre-tokenizer splits [unused1]
    assert np.flatnonzero(kinds["special"]).tolist() == sorted(berts + placeholders)
    doc = run_json("undertrained", "-c", tmp_path)
    assert doc["reference"]["ids"] == placeholders
    split_apart = [line for line in SMILES_VOCAB if len(line) > 1 and not line.isalnum()
                   and line not in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]") and not line.startswith("[unused")]
    assert len(split_apart) == 11 and any(f"{len(split_apart)} of the {len(SMILES_VOCAB)} pieces of vocab.txt join "
                                          "punctuation" in note for note in run_json("info", "-c", tmp_path)["notes"])


def test_berts_own_stray_piece_that_it_splits_apart_stays_unreachable(tmp_path):
    # bert-base-uncased's vocab.txt holds '...' (one piece in 30,522), which BERT's pre-tokenizer splits into three
    # '.': the vocabulary is BERT's own, and the round trip is right that no text gives that row
    from embscope.analysis.token_kinds import token_kinds

    lines = [*UNCASED, ".", "..."]
    kinds = token_kinds(load_tokenizer(write_vocab(tmp_path, lines)), len(lines))
    assert kinds["unreachable"][lines.index("...")] and not kinds["unreachable"][lines.index(".")]


def test_a_piece_the_splitting_never_gives_whole_is_named_by_its_id_when_refused(tmp_path):
    """rxnfp 0.1.0's bert_pretrained: `similarity '[C@H]' C` said only that the word maps to '[UNK]', though
    '[C@H]' is a line of vocab.txt (its SMILES splitter's atom) that BERT's splitting cuts apart; the refusal now
    names its id for --ids. A word that is no piece keeps the plain refusal."""
    write_vocab(tmp_path, SMILES_VOCAB)
    token = np.random.default_rng(1).standard_normal((len(SMILES_VOCAB), 8)).astype(np.float32)
    save_file({"embeddings.word_embeddings.weight": token}, tmp_path / "model.safetensors")
    atom, unk = SMILES_VOCAB.index("[C@H]"), SMILES_VOCAB.index("[UNK]")
    said = run("similarity", "[C@H]", "C", "-c", tmp_path, code=1).stderr
    assert f"maps to its unknown token '[UNK]' (id {unk}): it is token {atom} of the vocabulary itself" in said
    assert f"--ids and the id {atom}" in said and "--allow-unk" in said
    said = run("similarity", "Xq", "C", "-c", tmp_path, code=1).stderr
    assert "of the vocabulary itself" not in said and "--allow-unk" in said
    carbon = SMILES_VOCAB.index("C")
    [pair] = run_json("similarity", "--ids", atom, carbon, "--no-baseline", "-c", tmp_path)["pairs"]
    a, b = token[atom].astype(np.float64), token[carbon].astype(np.float64)
    assert pair["a_tokens"] == ["[C@H]"]
    assert pair["cosine"] == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b), abs=1e-6)
