"""Positions in the model's own numbering: for each family whose position ids are offset, the row embscope calls
position p is the row transformers' own model reads for the p-th token, on folders written by save_pretrained."""

import numpy as np
import pytest
import torch
from conftest import run_json
from safetensors.numpy import load_file, save_file


@pytest.fixture(scope="module")
def transformers():
    """Imported by the first test that needs it (seconds of CPU): only the worker that runs these pays."""
    return pytest.importorskip("transformers")

SMALL = {"vocab_size": 40, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
         "intermediate_size": 16, "max_position_embeddings": 24}


def bert_like(config_class, model_class, pad: int):
    return model_class(config_class(**SMALL, pad_token_id=pad, bos_token_id=0, eos_token_id=2))


def opt(transformers):
    config = transformers.OPTConfig(vocab_size=40, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                    ffn_dim=16, max_position_embeddings=24, word_embed_proj_dim=8, pad_token_id=1)
    return transformers.OPTModel(config)


FAMILIES = {
    "roberta": lambda transformers: bert_like(transformers.RobertaConfig, transformers.RobertaModel, pad=1),
    "roberta-pad-5": lambda transformers: bert_like(transformers.RobertaConfig, transformers.RobertaModel, pad=5),
    "xlm-roberta": lambda transformers: bert_like(transformers.XLMRobertaConfig, transformers.XLMRobertaModel, pad=3),
    "camembert": lambda transformers: bert_like(transformers.CamembertConfig, transformers.CamembertModel, pad=1),
    "longformer": lambda transformers: transformers.LongformerModel(transformers.LongformerConfig(
        **SMALL, pad_token_id=4, attention_window=4)),
    "mpnet": lambda transformers: bert_like(transformers.MPNetConfig, transformers.MPNetModel, pad=6),  # MPNet ignores it: 1
    "opt": opt,
    "bert": lambda transformers: bert_like(transformers.BertConfig, transformers.BertModel, pad=0),
    # RoBERTa's kin, padding_idx + 1 from the config's pad_token_id (5 here: a fixed 2 would be wrong); embscope
    # read them from row 0 until these were added
    "data2vec-text": lambda transformers: bert_like(transformers.Data2VecTextConfig, transformers.Data2VecTextModel,
                                                    pad=5),
    "ibert": lambda transformers: bert_like(transformers.IBertConfig, transformers.IBertModel, pad=5),
    "xmod": lambda transformers: transformers.XmodModel(transformers.XmodConfig(
        **SMALL, pad_token_id=5, languages=["en_XX"], default_language="en_XX")),
    "roberta-prelayernorm": lambda transformers: bert_like(transformers.RobertaPreLayerNormConfig,
                                                           transformers.RobertaPreLayerNormModel, pad=5),
    "xlm-roberta-xl": lambda transformers: bert_like(transformers.XLMRobertaXLConfig, transformers.XLMRobertaXLModel,
                                                     pad=5),
    "esm": lambda transformers: transformers.EsmModel(transformers.EsmConfig(
        **SMALL, pad_token_id=5, mask_token_id=3, position_embedding_type="absolute")),
    "markuplm": lambda transformers: bert_like(transformers.MarkupLMConfig, transformers.MarkupLMModel, pad=5),
    "luke": lambda transformers: transformers.LukeModel(transformers.LukeConfig(
        **SMALL, entity_vocab_size=10, entity_emb_size=8, pad_token_id=5)),
    "biogpt": lambda transformers: transformers.BioGptModel(transformers.BioGptConfig(**SMALL, pad_token_id=5)),
    # the layout models' 2-D tables fit the hidden size: LiLT's are a sixth of it, LayoutLMv3's 4 x 1 + 2 x 2
    "lilt": lambda transformers: transformers.LiltModel(transformers.LiltConfig(
        **(SMALL | {"hidden_size": 24}), pad_token_id=5)),
    "layoutlmv3": lambda transformers: transformers.LayoutLMv3Model(transformers.LayoutLMv3Config(
        **SMALL, pad_token_id=5, coordinate_size=1, shape_size=2, visual_embed=False)),
    # position ids arange + 2 whatever the padding id
    "mra": lambda transformers: bert_like(transformers.MraConfig, transformers.MraModel, pad=5),
    "nystromformer": lambda transformers: transformers.NystromformerModel(transformers.NystromformerConfig(
        **SMALL, pad_token_id=5, segment_means_seq_len=8, num_landmarks=8)),
    "yoso": lambda transformers: bert_like(transformers.YosoConfig, transformers.YosoModel, pad=5),
}
# decoders alone: a single 'model.decoder.embed_positions' table, named as OPT's (offset 2), found by its name
DECODERS = {"blenderbot": "BlenderbotForCausalLM", "blenderbot-small": "BlenderbotSmallForCausalLM",
            "bigbird_pegasus": "BigBirdPegasusForCausalLM", "marian": "MarianForCausalLM",
            "pegasus": "PegasusForCausalLM", "trocr": "TrOCRForCausalLM"}
SEQ2SEQ = {"bart": "BartModel", "mbart": "MBartModel", "plbart": "PLBartModel", "mvp": "MvpModel",
           "led": "LEDModel", "blenderbot": "BlenderbotModel", "blenderbot-small": "BlenderbotSmallModel"}


def rows_read(model) -> tuple[str, list[int]]:
    """The position table's name and the rows the model reads for tokens 0.. of an unpadded input (found by
    matching the position module's output against the table's rows)."""
    module_name, module = next((n, m) for n, m in model.named_modules()
                               if n.endswith(("position_embeddings", "embed_positions")))
    seen = []
    # I-BERT's quantized module gives (output, scale)
    module.register_forward_hook(lambda _m, _args, out: seen.append((out[0] if isinstance(out, tuple) else out).detach()))
    ids = torch.tensor([[0, 10, 11, 12, 13, 14, 15, 2]])  # no padding id among them
    with torch.no_grad():
        decoder = {"decoder_input_ids": ids} if model.config.is_encoder_decoder else {}  # Blenderbot makes none
        model(input_ids=ids, attention_mask=torch.ones_like(ids), **decoder)
    weight = module.weight.detach().numpy()
    out = seen[0].numpy().reshape(-1, ids.shape[1], weight.shape[1])[0]
    rows = [int(np.flatnonzero((weight == vector).all(axis=1))[0]) for vector in out]
    return f"{module_name}.weight", rows


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_position_p_is_the_row_transformers_reads(family, tmp_path, transformers):
    torch.manual_seed(0)
    model = FAMILIES[family](transformers)
    model.save_pretrained(tmp_path)
    name, rows = rows_read(model)
    assert rows == list(range(rows[0], rows[0] + len(rows)))  # consecutive rows from the first
    doc = run_json("positions", "-c", str(tmp_path), "--pairs", "0:1,2:5")
    assert doc["first_row"] == rows[0], family
    table = load_file(tmp_path / "model.safetensors")
    short = name.split(".", 1)[-1]  # the name under a prefix the saved keys may lack, whole: not LayoutLMv3's x_...
    stored = next(v for k, v in table.items() if k in (name, short) or k.endswith(f".{short}")).astype(np.float64)
    for pair, (i, j) in zip(doc["pairs"], [(0, 1), (2, 5)]):
        a, b = stored[rows[i]], stored[rows[j]]
        assert pair["cosine"] == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b), abs=1e-6)


def seq2seq(transformers, family: str):
    """An encoder-decoder of the family: two position tables (encoder, decoder), so one is named with --pos-key."""
    config_class = getattr(transformers, SEQ2SEQ[family].replace("Model", "Config"))
    sizes = {"vocab_size": 40, "d_model": 8, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
             "decoder_attention_heads": 2, "encoder_ffn_dim": 16, "decoder_ffn_dim": 16, "pad_token_id": 1,
             "decoder_start_token_id": 2}
    sizes |= ({"max_encoder_position_embeddings": 24, "max_decoder_position_embeddings": 24, "attention_window": 4}
              if family == "led" else {"max_position_embeddings": 24})
    return getattr(transformers, SEQ2SEQ[family])(config_class(**sizes))


@pytest.mark.parametrize("family", sorted(SEQ2SEQ))
def test_a_table_named_by_key_keeps_its_family_s_numbering(family, tmp_path, transformers):
    # BART and its kin add 2 to every position id; LED and Blenderbot none, though their tables share the
    # 'embed_positions' name with OPT's and fairseq's. --pos-key gave row 0 whatever the family
    torch.manual_seed(0)
    model = seq2seq(transformers, family)
    model.save_pretrained(tmp_path)
    name, rows = rows_read(model)
    assert name == "encoder.embed_positions.weight" and rows == list(range(rows[0], rows[0] + len(rows)))
    doc = run_json("positions", "-c", str(tmp_path), "--pos-key", name, "--pairs", "0:1")
    assert doc["first_row"] == rows[0] == (0 if family in ("led", "blenderbot", "blenderbot-small") else 2), family
    stored = load_file(tmp_path / "model.safetensors")[name].astype(np.float64)
    a, b = stored[rows[0]], stored[rows[1]]
    assert doc["pairs"][0]["cosine"] == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b), abs=1e-6)


@pytest.mark.parametrize("family", sorted(DECODERS))
def test_a_decoder_s_table_named_as_opt_s_keeps_its_family_s_numbering(family, tmp_path, transformers):
    # Blenderbot, BigBirdPegasus, Marian and Pegasus number from row 0, TrOCR from 2: OPT's 2 was taken for all
    torch.manual_seed(0)
    config_class = getattr(transformers, DECODERS[family].replace("ForCausalLM", "Config"))
    sizes = {"vocab_size": 40, "d_model": 8, "decoder_layers": 1, "decoder_attention_heads": 2, "decoder_ffn_dim": 16,
             "max_position_embeddings": 24, "pad_token_id": 1}
    sizes |= {"attention_type": "original_full"} if family == "bigbird_pegasus" else {}
    model = getattr(transformers, DECODERS[family])(config_class(**sizes))
    model.save_pretrained(tmp_path)
    name, rows = rows_read(model)
    assert name == "model.decoder.embed_positions.weight" and rows == list(range(rows[0], rows[0] + len(rows)))
    doc = run_json("positions", "-c", str(tmp_path), "--pairs", "0:1")
    assert doc["first_row"] == rows[0] == (2 if family == "trocr" else 0), family
    stored = load_file(tmp_path / "model.safetensors")[name].astype(np.float64)
    a, b = stored[rows[0]], stored[rows[1]]
    assert doc["pairs"][0]["cosine"] == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b), abs=1e-6)


def test_a_roberta_kin_table_named_by_key_keeps_padding_idx_plus_one(tmp_path, transformers):
    torch.manual_seed(0)
    FAMILIES["camembert"](transformers).save_pretrained(tmp_path)
    doc = run_json("positions", "-c", str(tmp_path), "--pos-key", "embeddings.position_embeddings.weight")
    assert doc["first_row"] == 2


def test_first_position_overrides_the_rule(tmp_path, transformers):
    torch.manual_seed(0)
    FAMILIES["roberta"](transformers).save_pretrained(tmp_path)
    assert run_json("positions", "-c", str(tmp_path), "--pairs", "0:1")["first_row"] == 2
    doc = run_json("positions", "-c", str(tmp_path), "--pairs", "0:1", "--first-position", "0")
    assert doc["first_row"] == 0 and any("--first-position 0" in note for note in doc["notes"])
    assert run_json("norms", "-c", str(tmp_path), "--first-position", "3")["first_row"] == 3


def test_fairseq_takes_padding_idx_from_the_metadata():
    from embscope.position_offsets import position_offset
    assert position_offset({"model_type": "fairseq", "padding_idx": 4})[0] == 5
    assert position_offset({"model_type": "fairseq"})[0] == 2  # fairseq's Dictionary puts <pad> at 1
    assert position_offset({"model_type": "gpt2"}) is None


TEXT = SMALL | {"pad_token_id": 5}
VISION = {"hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16,
          "image_size": 16, "patch_size": 8}
# composite models: the text tower's family in config.json's text_config, its tensors under 'text_model.'
COMPOSITES = {
    "clap": lambda transformers: transformers.ClapModel(transformers.ClapConfig(
        text_config=TEXT, projection_dim=8, audio_config={
            "hidden_size": 16, "depths": [1, 1], "num_attention_heads": [2, 2], "window_size": 4, "spec_size": 64,
            "patch_embeds_hidden_size": 8, "num_mel_bins": 16})),
    "altclip": lambda transformers: transformers.AltCLIPModel(transformers.AltCLIPConfig(
        text_config=TEXT | {"project_dim": 8}, vision_config=VISION, projection_dim=8)),
    "bridgetower": lambda transformers: transformers.BridgeTowerModel(transformers.BridgeTowerConfig(
        text_config=TEXT, vision_config={"hidden_size": 64, "num_hidden_layers": 1, "image_size": 16,
                                         "patch_size": 8}, hidden_size=8, num_hidden_layers=1,
        num_attention_heads=2)),
}


@pytest.mark.parametrize("family", sorted(COMPOSITES))
def test_a_composite_model_s_text_tower_keeps_its_numbering(family, tmp_path, transformers):
    # CLAP's and BridgeTower's text towers count positions from padding_idx + 1 (text_config's pad_token_id): the
    # top-level model_type names no family, so they were read from row 0 (AltCLIP's took RoBERTa's name quirk, 2,
    # whatever the padding id); a vision tower's table, named by key, counts from row 0
    torch.manual_seed(0)
    model = COMPOSITES[family](transformers)
    model.save_pretrained(tmp_path)
    name, rows = rows_read(model.text_model)
    assert rows == list(range(6, 6 + len(rows)))  # pad_token_id 5
    doc = run_json("positions", "-c", str(tmp_path), "--pairs", "0:1")
    assert doc["first_row"] == 6 and doc["table"] == f"text_model.{name}", family
    stored = load_file(tmp_path / "model.safetensors")[f"text_model.{name}"].astype(np.float64)
    a, b = stored[rows[0]], stored[rows[1]]
    assert doc["pairs"][0]["cosine"] == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b), abs=1e-6)
    vision = [k for k in load_file(tmp_path / "model.safetensors") if "vision_model" in k and "position" in k
              and k.endswith("weight")]
    for key in vision:
        assert run_json("positions", "-c", str(tmp_path), "--pos-key", key)["first_row"] == 0


def test_a_family_s_other_tables_named_by_key_count_from_row_0(tmp_path, transformers):
    # LUKE's entity positions (entity_position_ids, -1 masked, clamped at 0) and LayoutLMv3's x coordinates (bbox
    # values) index their tables from row 0; naming them with --pos-key gave the family's padding_idx + 1
    torch.manual_seed(0)
    FAMILIES["luke"](transformers).save_pretrained(tmp_path / "luke")
    doc = run_json("positions", "-c", str(tmp_path / "luke"), "--pos-key", "entity_embeddings.position_embeddings.weight")
    assert doc["first_row"] == 0
    assert run_json("positions", "-c", str(tmp_path / "luke"), "--pos-key",
                    "embeddings.position_embeddings.weight")["first_row"] == 6
    FAMILIES["layoutlmv3"](transformers).save_pretrained(tmp_path / "layoutlmv3")
    assert run_json("positions", "-c", str(tmp_path / "layoutlmv3"), "--pos-key",
                    "embeddings.x_position_embeddings.weight")["first_row"] == 0


def test_lilt_s_box_positions_named_by_key_keep_padding_idx_plus_one(tmp_path, transformers):
    # LiLT indexes its box position table with the word positions' ids (padding_idx + 1 on): rows read checked
    torch.manual_seed(0)
    model = FAMILIES["lilt"](transformers)
    model.save_pretrained(tmp_path)
    seen = []
    model.layout_embeddings.box_position_embeddings.register_forward_hook(lambda _m, args, _out: seen.append(args[0]))
    with torch.no_grad():
        model(input_ids=torch.tensor([[0, 10, 11, 2]]), bbox=torch.zeros(1, 4, 4, dtype=torch.long))
    assert seen[0].tolist() == [[6, 7, 8, 9]]  # pad_token_id 5
    doc = run_json("positions", "-c", str(tmp_path), "--pos-key", "layout_embeddings.box_position_embeddings.weight")
    assert doc["first_row"] == 6


@pytest.mark.parametrize("pad", [39, 10**9])
def test_a_rule_that_puts_position_0_past_the_table_is_not_its_rule(tmp_path, pad):
    # RoBERTa's padding_idx + 1 from a config's pad_token_id of 39 (a 40-row table) or 10**9 left no position:
    # norms raised IndexError, positions --plot and report ValueError from the heatmap (tracebacks)
    rng = np.random.default_rng(0)
    save_file({"roberta.embeddings.word_embeddings.weight": rng.standard_normal((50, 16)).astype(np.float32),
               "roberta.embeddings.position_embeddings.weight": rng.standard_normal((40, 16)).astype(np.float32)},
              str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(f'{{"model_type": "roberta", "pad_token_id": {pad}, "vocab_size": 50}}')
    assert run_json("norms", "-c", tmp_path)["count"] == 40
    notes = run_json("positions", "-c", tmp_path)["notes"]
    assert any(note.startswith(f"the rule puts position 0 at row {pad + 1:,}, past the table's 40 rows (") and
               note.endswith("so position p is row p (say otherwise with --first-position N)") for note in notes)
    assert run_json("positions", "--profile", "-c", tmp_path)["profile"]["offsets"][0]["pairs"] == 39
