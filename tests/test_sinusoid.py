"""A fixed sinusoid a model keeps in its state_dict is no parameter (analysis.sinusoid): `params` leaves it out of the
total and says so. The references are the writers' own code: the PyTorch tutorial's PositionalEncoding module
(torch.save of its state_dict), fairseq's SinusoidalPositionalEmbedding.get_embedding and Whisper's sinusoids, each
stated in plain numpy as their sources give them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import run, run_json

from embscope.analysis.sinusoid import formula_of

torch = pytest.importorskip("torch")


class PositionalEncoding(torch.nn.Module):
    """The PyTorch tutorial's module (Language Modeling with nn.Transformer), as the tutorial writes it."""

    def __init__(self, d_model: int, max_len: int):
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)


class TutorialModel(torch.nn.Module):
    """The tutorial's TransformerModel, small: an embedding, the positional encoding, a decoder."""

    def __init__(self, ntoken: int, d_model: int, max_len: int):
        super().__init__()
        self.pos_encoder = PositionalEncoding(d_model, max_len)
        self.embedding = torch.nn.Embedding(ntoken, d_model)
        self.linear = torch.nn.Linear(d_model, 7)


def fairseq_embedding(positions: int, dim: int, padding_idx: int) -> np.ndarray:
    """fairseq/modules/sinusoidal_positional_embedding.py get_embedding, in numpy: sin then cos, 10000^(-i/(h-1)),
    the padding row zeroed."""
    half = dim // 2
    emb = np.exp(np.arange(half) * -(math.log(10000) / (half - 1)))
    emb = np.arange(positions)[:, None] * emb[None, :]
    table = np.concatenate([np.sin(emb), np.cos(emb)], axis=1)
    table[padding_idx] = 0
    return table


def test_the_tutorials_positional_encoding_is_left_out_of_the_total(tmp_path):
    model = TutorialModel(300, 32, 120)
    path = tmp_path / "model.pt"
    torch.save(model.state_dict(), path)
    doc = run_json("params", "-c", path)
    parameters = sum(p.numel() for p in model.parameters())  # torch's own count: the buffer is none of them
    assert doc["total"] == parameters == 300 * 32 + 7 * 32 + 7
    assert doc["token"] == 300 * 32 and doc["position"] is None
    (note,) = [n for n in doc["notes"] if "sinusoid" in n]
    assert note.startswith("'pos_encoder.pe' (120 x 1 x 32) is a fixed sinusoid (sin and cos interleaved")
    assert "left out of the total" in " ".join(run("params", "-c", path).stdout.split())


def test_a_learned_table_named_like_positions_is_counted(tmp_path):
    """A tensor named pe that training moved off the formula is a parameter as any other."""
    model = TutorialModel(300, 32, 120)
    state = model.state_dict()
    state["pos_encoder.pe"] = state["pos_encoder.pe"] + 0.01 * torch.randn(state["pos_encoder.pe"].shape)
    torch.save(state, tmp_path / "model.pt")
    doc = run_json("params", "-c", tmp_path / "model.pt")
    assert doc["total"] == 300 * 32 + 7 * 32 + 7 + 120 * 32
    assert not any("sinusoid" in note for note in doc["notes"])


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_fairseqs_and_whispers_layouts_are_known(dtype):
    table = fairseq_embedding(66, 16, padding_idx=1)  # row 1 zeroed, row p position p
    assert formula_of(table.astype(dtype).astype(np.float64)) is not None
    # Whisper's sinusoids(length, channels): log_timescale_increment = log(10000) / (channels // 2 - 1)
    scaled = np.arange(50)[:, None] * np.exp(-math.log(10000) / 7 * np.arange(8))[None, :]
    whisper = np.concatenate([np.sin(scaled), np.cos(scaled)], axis=1)
    assert formula_of(whisper.astype(dtype).astype(np.float64)) is not None
    assert formula_of(whisper[::-1].copy()) is None  # the rows of another order are no such table


def test_the_tutorials_default_table_saved_in_bfloat16_is_left_out(tmp_path):
    """The tutorial's max_len 5000, the model cast to bf16 before its save: bf16's rounding (up to 2^-9) and the
    float32 angle torch computed (position x div_term, about 5000 x 2^-23 at position 5000) add up past 2e-3."""
    model = TutorialModel(300, 32, 5000).to(torch.bfloat16)
    torch.save(model.state_dict(), tmp_path / "model.pt")
    doc = run_json("params", "-c", tmp_path / "model.pt")
    assert doc["total"] == sum(p.numel() for p in model.parameters()) == 300 * 32 + 7 * 32 + 7
    assert any(note.startswith("'pos_encoder.pe' (5000 x 1 x 32) is a fixed sinusoid") for note in doc["notes"])


def test_a_long_float32_table_is_left_out_though_its_angles_were_rounded(tmp_path):
    """70,000 positions: torch's float32 angle at position 70,000 is off by up to a few 2^-8, so sin and cos are."""
    model = TutorialModel(300, 32, 70000)
    torch.save(model.state_dict(), tmp_path / "model.pt")
    expected = np.asarray(model.pos_encoder.pe[:, 0], dtype=np.float64)
    position = np.arange(70000)[:, None] * np.exp(np.arange(0, 32, 2) * (-math.log(10000.0) / 32))[None, :]
    assert np.abs(expected[:, 0::2] - np.sin(position)).max() > 2e-3  # the writer's own rounding, past TOLERANCE
    doc = run_json("params", "-c", tmp_path / "model.pt")
    assert doc["total"] == 300 * 32 + 7 * 32 + 7
    assert any(note.startswith("'pos_encoder.pe' (70000 x 1 x 32) is a fixed sinusoid") for note in doc["notes"])


def test_the_reports_parameters_section_says_what_it_left_out(tmp_path):
    """The report's total is params' total: its Parameters section gives the same note, or a reader sees a total
    short of the file's tensors with no word why."""
    model = TutorialModel(300, 32, 120)
    torch.save(model.state_dict(), tmp_path / "model.pt")
    run("report", "-c", tmp_path / "model.pt", "--format", "md", "--out", tmp_path / "report")
    text = (tmp_path / "report" / "report.md").read_text()
    section = text.split("\n## Parameters\n", 1)[1].split("\n## ", 1)[0]
    assert "| whole checkpoint | 9,831 |" in section and 9831 == run_json("params", "-c", tmp_path / "model.pt")["total"]
    assert r"'pos\_encoder.pe' (120 x 1 x 32) is a fixed sinusoid" in section  # Markdown escapes the _


def test_a_table_too_large_to_read_is_counted_and_said(tmp_path):
    """32,769 positions x 512 in float16 (the tutorial's module, model.half()): 16,777,728 values, past the 2^24 that
    are read to tell a sinusoid; it stays in the total, as torch's count of the file's tensors has it, and is said."""
    model = TutorialModel(300, 512, 32769).half()
    torch.save(model.state_dict(), tmp_path / "model.pt")
    doc = run_json("params", "-c", tmp_path / "model.pt")
    assert doc["total"] == sum(t.numel() for t in model.state_dict().values()) == 300 * 512 + 7 * 512 + 7 + 32769 * 512
    (note,) = [n for n in doc["notes"] if "pos_encoder.pe" in n]
    assert note.startswith("'pos_encoder.pe' (32769 x 1 x 512) is named like a position table and may be a fixed "
                           "sinusoid") and "16,777,728 values, more than the 16,777,216" in note


def test_a_keras_layers_sinusoid_weight_is_left_out(tmp_path):
    """A Keras 3 layer class PositionalEncoding that keeps the sinusoid as a non-trainable weight: save_weights files
    it as 'layers/positional_encoding/vars/0' (the class's snake-case name, then vars/<i>; checked against Keras
    3.15 itself), a name whose last part, 'vars.0', says nothing."""
    import h5py
    rows, dim = 12, 8
    angle = np.arange(rows)[:, None] / np.power(10000, (2 * (np.arange(dim)[None, :] // 2)) / dim)
    pe = np.zeros((rows, dim), np.float32)
    pe[:, 0::2], pe[:, 1::2] = np.sin(angle[:, 0::2]), np.cos(angle[:, 1::2])  # the keras.io tutorials' formula
    path = tmp_path / "model.weights.h5"
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        for group, name, values in (("layers/embedding", "tok", [rng.standard_normal((50, dim))]),
                                    ("layers/positional_encoding", "positional_encoding", [pe]),
                                    ("layers/dense", "dense", [rng.standard_normal((dim, 50)), np.zeros(50)])):
            for i, value in enumerate(values):
                f.create_dataset(f"{group}/vars/{i}", data=np.asarray(value, np.float32))
            f[f"{group}/vars"].attrs["name"] = name
        f.create_group("vars").attrs["name"] = "functional"
    doc = run_json("params", "-c", path)
    assert doc["total"] == 50 * dim + dim * 50 + 50  # Keras' own count of the trainable weights
    assert any(note.startswith(f"'layers.positional_encoding.vars.0' ({rows} x {dim}) is a fixed sinusoid (sin and "
                               "cos interleaved") for note in doc["notes"])
