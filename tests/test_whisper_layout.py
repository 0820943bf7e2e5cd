"""openai-whisper's checkpoint layout: torch.save({"dims": ..., "model_state_dict": ...}) (whisper/__init__.py
load_model reads it back). Its TextDecoder keeps its learned positions as a bare nn.Parameter,
'decoder.positional_embedding' (n_text_ctx x n_text_state, no '.weight'), beside 'decoder.token_embedding.weight';
its AudioEncoder registers 'encoder.positional_embedding' as a buffer, sinusoids(n_audio_ctx, n_audio_state).
The modules below reproduce whisper/model.py (openai-whisper 20250625) attribute for attribute, so the state dict
has its names and shapes; the sinusoid is its sinusoids() as the source writes it."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_json

torch = pytest.importorskip("torch")
nn = torch.nn

DIMS = {"n_mels": 8, "n_audio_ctx": 24, "n_audio_state": 16, "n_audio_head": 2, "n_audio_layer": 1,
        "n_vocab": 300, "n_text_ctx": 32, "n_text_state": 16, "n_text_head": 2, "n_text_layer": 1}


def sinusoids(length: int, channels: int, max_timescale: int = 10000) -> torch.Tensor:
    """whisper/model.py's sinusoids, as written there."""
    log_timescale_increment = np.log(max_timescale) / (channels // 2 - 1)
    inv_timescales = torch.exp(-log_timescale_increment * torch.arange(channels // 2))
    scaled_time = torch.arange(length)[:, np.newaxis] * inv_timescales[np.newaxis, :]
    return torch.cat([torch.sin(scaled_time), torch.cos(scaled_time)], dim=1)


class MultiHeadAttention(nn.Module):
    def __init__(self, n_state: int):
        super().__init__()
        self.query = nn.Linear(n_state, n_state)
        self.key = nn.Linear(n_state, n_state, bias=False)
        self.value = nn.Linear(n_state, n_state)
        self.out = nn.Linear(n_state, n_state)


class ResidualAttentionBlock(nn.Module):
    def __init__(self, n_state: int, cross_attention: bool = False):
        super().__init__()
        self.attn = MultiHeadAttention(n_state)
        self.attn_ln = nn.LayerNorm(n_state)
        self.cross_attn = MultiHeadAttention(n_state) if cross_attention else None
        self.cross_attn_ln = nn.LayerNorm(n_state) if cross_attention else None
        self.mlp = nn.Sequential(nn.Linear(n_state, 4 * n_state), nn.GELU(), nn.Linear(4 * n_state, n_state))
        self.mlp_ln = nn.LayerNorm(n_state)


class AudioEncoder(nn.Module):
    def __init__(self, n_mels: int, n_ctx: int, n_state: int, n_layer: int):
        super().__init__()
        self.conv1 = nn.Conv1d(n_mels, n_state, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(n_state, n_state, kernel_size=3, stride=2, padding=1)
        self.register_buffer("positional_embedding", sinusoids(n_ctx, n_state))
        self.blocks = nn.ModuleList([ResidualAttentionBlock(n_state) for _ in range(n_layer)])
        self.ln_post = nn.LayerNorm(n_state)


class TextDecoder(nn.Module):
    def __init__(self, n_vocab: int, n_ctx: int, n_state: int, n_layer: int):
        super().__init__()
        self.token_embedding = nn.Embedding(n_vocab, n_state)
        self.positional_embedding = nn.Parameter(torch.empty(n_ctx, n_state))
        self.blocks = nn.ModuleList([ResidualAttentionBlock(n_state, cross_attention=True) for _ in range(n_layer)])
        self.ln = nn.LayerNorm(n_state)
        mask = torch.empty(n_ctx, n_ctx).fill_(-np.inf).triu_(1)
        self.register_buffer("mask", mask, persistent=False)


class Whisper(nn.Module):
    def __init__(self, dims: dict[str, int]):
        super().__init__()
        self.encoder = AudioEncoder(dims["n_mels"], dims["n_audio_ctx"], dims["n_audio_state"], dims["n_audio_layer"])
        self.decoder = TextDecoder(dims["n_vocab"], dims["n_text_ctx"], dims["n_text_state"], dims["n_text_layer"])


@pytest.fixture(scope="module")
def whisper_file(tmp_path_factory):
    torch.manual_seed(0)
    model = Whisper(DIMS)
    with torch.no_grad():
        for parameter in model.parameters():  # a trained model's values: anything but torch.empty's
            parameter.normal_(0, 0.02)
    path = tmp_path_factory.mktemp("whisper") / "tiny.pt"
    torch.save({"dims": DIMS, "model_state_dict": model.state_dict()}, path)
    return path, model


def test_the_decoders_learned_parameter_is_the_position_table(whisper_file):
    path, model = whisper_file
    doc = run_json("info", "-c", path)
    assert doc["tables"]["token"]["name"] == "decoder.token_embedding.weight"
    assert doc["tables"]["position"]["name"] == "decoder.positional_embedding"  # never the encoder's sinusoid
    # TextDecoder.forward: logits = x @ token_embedding.weight.T, no head of its own
    assert doc["head"] == "tied" and any(note.startswith("openai-whisper checkpoint") for note in doc["notes"])
    table = model.decoder.positional_embedding.detach().numpy().astype(np.float64)
    norms = run_json("norms", "-c", path, "--table", "position")
    assert norms["name"] == "decoder.positional_embedding" and norms["rows"] == DIMS["n_text_ctx"]
    assert norms["max"] == pytest.approx(np.linalg.norm(table, axis=1).max(), rel=1e-6)
    pairs = run_json("positions", "-c", path)["pairs"]
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    for pair in pairs:
        assert pair["cosine"] == pytest.approx(unit[pair["i"]] @ unit[pair["j"]], abs=1e-6)


def test_params_counts_the_learned_table_and_leaves_the_encoders_sinusoid_out(whisper_file):
    path, model = whisper_file
    doc = run_json("params", "-c", path)
    assert doc["position"] == DIMS["n_text_ctx"] * DIMS["n_text_state"]
    assert doc["token"] == DIMS["n_vocab"] * DIMS["n_text_state"] and doc["head"] == "tied"
    assert doc["total"] == sum(p.numel() for p in model.parameters())  # torch's count: the buffer is none of them
    (note,) = [n for n in doc["notes"] if "sinusoid" in n]
    assert note.startswith("'encoder.positional_embedding' (24 x 16) is a fixed sinusoid")


def test_hugging_faces_whisper_layout_takes_the_decoders_table_from_row_0(tmp_path):
    """The layout transformers' Whisper saves (the slow test below checks it against transformers itself, whose
    model module costs seconds of CPU to import): both tables named 'embed_positions', the encoder's sinusoids()."""
    from safetensors.numpy import save_file
    rng = np.random.default_rng(0)
    decoder = (rng.standard_normal((32, 16)) * 0.02).astype(np.float32)
    save_file({"model.encoder.embed_positions.weight": sinusoids(24, 16).numpy(),
               "model.decoder.embed_positions.weight": decoder,
               "model.decoder.embed_tokens.weight": (rng.standard_normal((300, 16)) * 0.02).astype(np.float32)},
              str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text('{"model_type": "whisper", "vocab_size": 300, "d_model": 16, '
                                          '"max_source_positions": 24, "max_target_positions": 32}')
    doc = run_json("positions", "-c", tmp_path, "--pairs", "0:1")
    assert doc["table"] == "model.decoder.embed_positions.weight" and doc["first_row"] == 0
    a, b = decoder[0].astype(np.float64), decoder[1].astype(np.float64)
    assert doc["pairs"][0]["cosine"] == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b), abs=1e-6)
    doc = run_json("params", "-c", tmp_path)
    assert doc["total"] == 32 * 16 + 300 * 16
    assert any(note.startswith("'model.encoder.embed_positions.weight' (24 x 16) is a fixed sinusoid")
               for note in doc["notes"])


@pytest.mark.slow  # importing transformers' Whisper costs about 3 s of CPU; the layout above runs in the README's command
def test_hugging_faces_whisper_takes_the_decoders_table_from_row_0(tmp_path):
    """transformers' Whisper names both tables 'embed_positions' (OPT's name, offset 2): the encoder's holds
    sinusoids(), the decoder's is learned and read from row 0 (position_ids = arange + cache_length)."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.WhisperConfig(
        vocab_size=300, num_mel_bins=8, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, d_model=16, encoder_ffn_dim=32, decoder_ffn_dim=32, max_source_positions=24,
        max_target_positions=32, pad_token_id=299, bos_token_id=298, eos_token_id=297, decoder_start_token_id=296)
    model = transformers.WhisperForConditionalGeneration(config)
    model.save_pretrained(tmp_path)
    seen = []
    model.model.decoder.embed_positions.register_forward_hook(lambda _m, _a, out: seen.append(out.detach()))
    with torch.no_grad():
        model(input_features=torch.zeros(1, 8, 48), decoder_input_ids=torch.tensor([[296, 5, 6, 7]]))
    table = model.model.decoder.embed_positions.weight.detach().numpy().astype(np.float64)
    read = seen[0].numpy().reshape(-1, 16)
    assert [int(np.flatnonzero((table == row).all(axis=1))[0]) for row in read] == [0, 1, 2, 3]
    doc = run_json("positions", "-c", tmp_path, "--pairs", "0:1")
    assert doc["table"] == "model.decoder.embed_positions.weight" and doc["first_row"] == 0
    a, b = table[0], table[1]
    assert doc["pairs"][0]["cosine"] == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b), abs=1e-6)
    notes = run_json("info", "-c", tmp_path)["notes"]
    assert any(note.startswith("'model.encoder.embed_positions.weight' (24 x 16) has the same name but is a fixed "
                               "sinusoid") for note in notes)
    # transformers counts the encoder's sinusoid among its parameters (an nn.Embedding it never trains); params does
    # not, as for openai-whisper's buffer, and says so
    doc = run_json("params", "-c", tmp_path)
    assert doc["total"] == model.num_parameters() - 24 * 16
    assert any(note.startswith("'model.encoder.embed_positions.weight' (24 x 16) is a fixed sinusoid")
               for note in doc["notes"])
