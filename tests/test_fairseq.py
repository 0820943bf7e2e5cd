"""fairseq checkpoints as fairseq writes them (torch.save of {"args": argparse.Namespace, "cfg", "model",
"optimizer_history", "extra_state"}): the Namespace is a record built from its state, never called; the tables are
found by fairseq's names; the padding index and the step are the checkpoint's metadata; and dict.txt is a tokenizer
whose ids equal fairseq's Dictionary (restated below) fed by GPT-2's BPE (transformers' GPT2Tokenizer)."""

from __future__ import annotations

import argparse
import collections
import decimal
import json
import pickle

import numpy as np
import pytest
import torch
from conftest import invoke, run_json
from pickle_gadgets import assert_error_line
from tokenizer_corpus import SAMPLE

import embscope
from embscope.core.errors import TokenError, UnsafePickleError
from embscope.storage.unpickle import NUMPY_GLOBALS, restricted_load

V, D, T = 60, 8, 16
rng = np.random.default_rng(3)


class FairseqDictionary:
    """fairseq/data/dictionary.py, the parts that give ids: __init__, add_symbol, add_from_file, index."""

    def __init__(self):
        self.symbols, self.count, self.indices = [], [], {}
        for special in ("<s>", "<pad>", "</s>", "<unk>"):
            self.add_symbol(special)
        self.unk_index = 3

    def add_symbol(self, word, n=1, overwrite=False):
        if word in self.indices and not overwrite:
            idx = self.indices[word]
            self.count[idx] = self.count[idx] + n
            return idx
        idx = len(self.symbols)
        self.indices[word] = idx
        self.symbols.append(word)
        self.count.append(n)
        return idx

    def add_from_file(self, path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                line, field = line.rstrip().rsplit(" ", 1)
                if field == "#fairseq:overwrite":
                    overwrite = True
                    line, field = line.rsplit(" ", 1)
                else:
                    overwrite = False
                count = int(field)
                if line in self.indices and not overwrite:
                    raise RuntimeError(f"Duplicate word found when loading Dictionary: '{line}'")
                self.add_symbol(line, n=count, overwrite=overwrite)

    def index(self, sym):
        return self.indices.get(sym, self.unk_index)


def roberta_state(pad_row: int = 1):
    """A RoBERTa encoder's state dict as model.state_dict() gives it: lm_head.weight is embed_tokens.weight."""
    tokens = torch.from_numpy(rng.standard_normal((V, D)).astype(np.float32))
    positions = torch.from_numpy(rng.standard_normal((T + pad_row + 1, D)).astype(np.float32))
    state = collections.OrderedDict()
    state["encoder.sentence_encoder.embed_tokens.weight"] = tokens
    state["encoder.sentence_encoder.embed_positions.weight"] = positions
    state["encoder.sentence_encoder.layernorm_embedding.weight"] = torch.ones(D)
    state["encoder.sentence_encoder.layers.0.fc1.weight"] = torch.zeros(2 * D, D)
    state["encoder.lm_head.dense.weight"] = torch.zeros(D, D)
    state["encoder.lm_head.weight"] = tokens  # tied: the same tensor, as RobertaLMHead(weight=embed_tokens.weight)
    state["encoder.lm_head.bias"] = torch.zeros(V)
    return state


def fairseq_checkpoint(path, args, cfg=None, state=None):
    torch.save({"args": args, "cfg": cfg, "model": state if state is not None else roberta_state(),
                "optimizer_history": [{"criterion_name": "MaskedLmLoss", "optimizer_name": "FairseqAdam",
                                       "lr_scheduler_state": {"best": None}, "num_updates": 12345}],
                "extra_state": {"epoch": 3, "train_iterator": {"epoch": 3, "iterations_in_epoch": 7}}}, path)
    return path


def test_a_checkpoint_with_a_namespace_of_arguments_opens(tmp_path):
    args = argparse.Namespace(arch="roberta_base", max_positions=T, lr=[0.0005], encoder_layers=1,
                              dropout=0.1, fp16=True, tokens_per_sample=T)
    path = fairseq_checkpoint(tmp_path / "model.pt", args)
    info = run_json("info", "-c", path)
    tables = info["tables"]
    assert tables["token"]["name"] == "encoder.sentence_encoder.embed_tokens.weight"
    assert tables["token"]["rule"] == "name 'sentence_encoder.embed_tokens.weight' (fairseq RoBERTa, XLM-R)"
    assert tables["position"]["name"] == "encoder.sentence_encoder.embed_positions.weight"
    assert tables["position"]["first_row"] == 2  # padding_idx 1, positions from padding_idx + 1
    assert info["head"] == "tied" and info["tie"] == {"config": None, "tensors": "equal"}
    assert info["step"] == 12345  # optimizer_history[-1]["num_updates"]
    config = embscope.open(path).checkpoint.config
    assert config["model_type"] == "fairseq" and config["pad_token_id"] == 1
    assert config["fairseq_arch"] == "roberta_base" and config["max_positions"] == T
    params = run_json("params", "-c", path)
    assert params["total"] == V * D + (T + 2) * D + D + 2 * D * D + D * D + V  # lm_head.weight counted once


def test_the_padding_index_comes_from_the_arguments_or_the_cfg(tmp_path):
    path = fairseq_checkpoint(tmp_path / "args.pt", argparse.Namespace(arch="roberta_base", pad=0))
    assert embscope.open(path).checkpoint.config["pad_token_id"] == 0
    cfg = {"_name": None, "model": {"_name": "roberta_large", "max_positions": T, "pad": 2}, "task": {"_name": "masked_lm"}}
    path = fairseq_checkpoint(tmp_path / "cfg.pt", None, cfg)  # fairseq >= 0.10: args None, cfg a plain dict
    config = embscope.open(path).checkpoint.config
    assert (config["pad_token_id"], config["fairseq_arch"], config["max_positions"]) == (2, "roberta_large", T)
    assert config["fairseq_task"] == "masked_lm"  # cfg.task._name
    assert run_json("info", "-c", path)["step"] == 12345


def test_a_translation_model_with_an_old_embed_out(tmp_path):
    state = {"encoder.embed_tokens.weight": torch.randn(V, D), "decoder.embed_tokens.weight": torch.randn(V, D),
             "decoder.embed_positions.weight": torch.randn(T + 2, D), "decoder.embed_out": torch.randn(V, D)}
    path = fairseq_checkpoint(tmp_path / "checkpoint_best.pt", argparse.Namespace(arch="transformer"), state=state)
    tables = run_json("info", "-c", path)["tables"]
    assert (tables["token"]["name"], tables["position"]["name"], tables["output"]["name"]) == (
        "decoder.embed_tokens.weight", "decoder.embed_positions.weight", "decoder.embed_out")


def test_a_namespace_holding_something_off_the_allow_list_is_refused(tmp_path):
    path = fairseq_checkpoint(tmp_path / "model.pt", argparse.Namespace(arch="roberta_base", lr=decimal.Decimal(1)))
    line = assert_error_line(invoke("info", "-c", path), "refused to unpickle global 'decimal.Decimal'")
    assert line.count("\n") == 0


@pytest.mark.parametrize("raw", [
    b"\x80\x02cargparse\nNamespace\nK\x01\x85\x81.",  # NEWOBJ with an argument: a record takes none
    b"\x80\x02cargparse\nNamespace\n)\x81K\x01b.",  # a state that is not a dict of attributes
    b"\x80\x02cargparse\nNamespace\n)\x81}b}b.",  # a second BUILD
    b"\x80\x02cargparse\nNamespace\n).",  # REDUCE: calling the class
])
def test_a_namespace_is_built_from_its_state_only(raw):
    with pytest.raises(UnsafePickleError):
        restricted_load(raw.replace(b").", b")R.") if raw.endswith(b").") else raw, NUMPY_GLOBALS, "test")


def test_a_namespace_reads_as_its_attributes():
    loaded = restricted_load(pickle.dumps(argparse.Namespace(a=1, b=[2, "x"]), protocol=2), NUMPY_GLOBALS, "test")
    assert dict(loaded) == {"a": 1, "b": [2, "x"]} and loaded.kind == "argparse.Namespace"


# --- dict.txt ---------------------------------------------------------------------------------------

def gpt2_files(folder):
    """A byte-level BPE trained by the tokenizers library, saved under fairseq's names for GPT-2's files."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.train_from_iterator(list(SAMPLE) * 3, trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    model = json.loads(bpe.to_str())["model"]
    (folder / "encoder.json").write_text(json.dumps(model["vocab"]))
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    (folder / "vocab.bpe").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    return model["vocab"]


def roberta_dict(folder, vocab):
    """RoBERTa's dict.txt: GPT-2 ids by falling count (here a fixed shuffle), padded with madeupwords; the last
    GPT-2 id is left out, so a word needing it has no id in the dictionary."""
    ids = sorted(vocab.values())[:-1]
    order = np.random.default_rng(0).permutation(ids).tolist()
    lines = [f"{gpt2_id} {1000 - i}" for i, gpt2_id in enumerate(order)]
    lines += ["madeupword0000 0", "madeupword0001 0", f"{order[5]} 3 #fairseq:overwrite"]
    (folder / "dict.txt").write_text("\n".join(lines) + "\n")
    return folder / "dict.txt"


def test_dict_txt_of_gpt2_ids_gives_fairseqs_ids(tmp_path):
    from transformers import GPT2Tokenizer
    vocab = gpt2_files(tmp_path)
    path = roberta_dict(tmp_path, vocab)
    fairseq = FairseqDictionary()
    fairseq.add_from_file(path)
    gpt2 = GPT2Tokenizer(str(tmp_path / "encoder.json"), str(tmp_path / "vocab.bpe"))
    ours = embscope.tokenizers.load_tokenizer(path)
    assert ours.kind == "fairseq-dict" and ours.vocab_size == len(fairseq.symbols)
    left_out = str(max(vocab.values()))
    checked = 0
    for text in SAMPLE:
        gpt2_ids = gpt2.encode(text)
        if left_out in map(str, gpt2_ids) or "<|endoftext|>" in text:
            continue
        assert ours.encode(text) == [fairseq.index(str(i)) for i in gpt2_ids], text
        checked += 1
    assert checked > len(SAMPLE) // 2
    assert ours.token_string(fairseq.index(str(vocab["Ġthe"]))) == " the"
    assert [ours.token_string(i) for i in range(4)] == ["<s>", "<pad>", "</s>", "<unk>"]
    assert ours.special_ids >= {0, 1, 2, 3} and ours.unk_id == 3


def test_a_word_the_dictionary_lacks_is_an_error_not_unk(tmp_path):
    vocab = gpt2_files(tmp_path)
    ours = embscope.tokenizers.load_tokenizer(roberta_dict(tmp_path, vocab))
    missing = max(vocab, key=vocab.get)  # the id the dictionary leaves out
    from embscope.tokenizers.byte_alphabet import byte_level_bytes
    with pytest.raises(TokenError, match="does not hold"):
        ours.encode(byte_level_bytes(missing).decode("utf-8", "replace"))


def test_dict_txt_is_found_beside_a_fairseq_checkpoint(tmp_path):
    vocab = gpt2_files(tmp_path)
    roberta_dict(tmp_path, vocab)
    path = fairseq_checkpoint(tmp_path / "model.pt", argparse.Namespace(arch="roberta_base"))
    doc = run_json("info", "-c", path)
    assert doc["tokenizer"]["kind"] == "fairseq-dict"
    found = run_json("neighbors", "-c", path, "the", "-k", 3)
    fairseq = FairseqDictionary()
    fairseq.add_from_file(tmp_path / "dict.txt")
    assert found["ids"] in ([fairseq.index(str(vocab["the"]))], [fairseq.index(str(vocab["Ġthe"]))])  # either form


def test_a_dictionary_of_plain_symbols(tmp_path):
    path = tmp_path / "dict.en.txt"
    path.write_text("▁the 100\n▁dog 50\ns 20\n▁the 1 #fairseq:overwrite\n")
    fairseq = FairseqDictionary()
    fairseq.add_from_file(path)
    ours = embscope.tokenizers.load_tokenizer(path)
    assert ours.encode("dog") == [fairseq.index("▁dog")] and ours.encode("the") == [fairseq.index("▁the")] == [7]
    assert ours.token_string(5) == " dog" and ours.vocab_size == 8


def test_a_repeated_symbol_without_the_flag_is_refused_as_fairseq_refuses_it(tmp_path):
    path = tmp_path / "dict.txt"
    path.write_text("a 3\nb 2\na 1\n")
    with pytest.raises(RuntimeError, match="Duplicate word"):
        FairseqDictionary().add_from_file(path)
    result = invoke("similarity", "--tokenizer", path, "a", "b")
    assert_error_line(result, "expected each symbol once in dict.txt", "line 3")


def masked_inputs(tokens: np.ndarray, mask_idx: int, leave_unmasked_prob: float, random_token_prob: float,
                  mask_prob: float = 0.15) -> np.ndarray:
    """fairseq/data/mask_tokens_dataset.py's choice, restated: pick mask_prob of the tokens; of those, a
    rand_or_unmask_prob share is left or swapped for a random token, and the rest are made <mask>."""
    draw = np.random.default_rng(0)
    mask = draw.random(tokens.shape) < mask_prob
    rand_or_unmask = mask & (draw.random(tokens.shape) < leave_unmasked_prob + random_token_prob)
    return np.where(mask & ~rand_or_unmask, mask_idx, tokens)


@pytest.mark.parametrize("task, probs, masked", [("masked_lm", (0.5, 0.5), True), ("masked_lm", (0.1, 0.1), True),
                                                 ("multilingual_masked_lm", (0.1, 0.1), True),
                                                 ("sentence_prediction_adapters", (0.5, 0.5), True),
                                                 ("translation", None, False)])
def test_a_masking_task_adds_mask_after_the_dictionary_and_its_row_is_no_padding(tmp_path, task, probs, masked):
    """Sapiens (sapiens 1.0.0, sapiens/models/v1/checkpoint_vh.pt, args.task 'masked_lm'): dict.txt lists 20 amino
    acids, fairseq's Dictionary gives 24 ids, and embed_tokens has 25 rows: MaskedLMTask's
    dictionary.add_symbol("<mask>") made row 24. It was said to be padding, and undertrained took it for the one row
    known unused, its reference. Its args' leave_unmasked_prob 0.5 + random_token_prob 0.5 leave no picked token
    to <mask>, which the note says (fairseq's defaults, 0.1 and 0.1, make 80% of them <mask>). A task that adds no
    <mask> (translation) leaves the extra row padding. multilingual_masked_lm (XLM-R's task) adds it in its
    __init__, sentence_prediction_adapters through SentencePredictionTask.load_dictionary: both were left padding."""
    symbols = list("ACDEFGHIKLMNPQRSTVWY")
    (tmp_path / "dict.txt").write_text("".join(f"{s} 1\n" for s in symbols))
    fairseq = FairseqDictionary()  # fairseq's task: Dictionary.load, then add_symbol("<mask>") where it masks
    fairseq.add_from_file(tmp_path / "dict.txt")
    rows = len(fairseq.symbols) + 1
    if masked:
        assert fairseq.add_symbol("<mask>") == rows - 1
    state = {"decoder.sentence_encoder.embed_tokens.weight": torch.from_numpy(rng.standard_normal((rows, D)).astype(
                 np.float32)),
             "decoder.sentence_encoder.embed_positions.weight": torch.randn(T + 2, D)}
    args = argparse.Namespace(arch="roberta_small", task=task)
    if probs:
        args.leave_unmasked_prob, args.random_token_prob = probs
    path = fairseq_checkpoint(tmp_path / "checkpoint_vh.pt", args, state=state)
    info = run_json("info", "-c", path)
    assert info["tokenizer"]["vocab_size"] == len(fairseq.symbols)
    padding = f"the token table has {rows} rows, the tokenizer {rows - 1} ids: row {rows - 1} is padding"
    assert (padding in info["notes"]) is not masked
    reference = run_json("undertrained", "-c", path)["reference"]
    assert reference["ids"] == ([] if masked else [rows - 1])
    if masked:
        tokenizer = embscope.open(path).tokenizer
        assert tokenizer.token_string(rows - 1) == "<mask>" == fairseq.symbols[rows - 1]
        assert tokenizer.encode("W") == [fairseq.index("W")] and rows - 1 in tokenizer.special_ids
        inputs = masked_inputs(np.arange(4, rows - 1).repeat(500), rows - 1, *probs)
        never = "no input held it" in " ".join(info["notes"])
        assert never is (not (inputs == rows - 1).any())
        assert never is (probs == (0.5, 0.5))
