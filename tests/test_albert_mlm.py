"""An ALBERT masked-LM checkpoint as rxnmapper ships it (rxnmapper 0.4.3, models/transformers/
albert_heads_8_uspto_all_1310k/pytorch_model.bin): a 591 x 128 token table, 512 learned positions of which the last
two were never trained (coordinate std 0.0199 and 0.0195 against the config's initializer_range 0.02: the model saw
sequences of at most 510 tokens), and the masked-LM head `predictions.decoder.weight`, with no `cls.` before it,
sharing the token table's storage. The stand-in is written by torch.save; every figure is worked out here in numpy."""

import json

import numpy as np
import pytest
from conftest import run, run_json

torch = pytest.importorskip("torch")

ROWS, DIM, VOCAB, TRAINED = 512, 128, 591, 510


def albert_like(tmp_path, trained: int = TRAINED):
    """rxnmapper's ALBERT as torch.save writes it: trained positions that drift (neighbour cosine about 0.8, norm
    about 1.4), the rest still at N(0, 0.02); the head the same tensor as the token table."""
    rng = np.random.default_rng(16)
    walk = np.cumsum(rng.standard_normal((ROWS, DIM)), axis=0) + 3 * rng.standard_normal((ROWS, DIM))
    position = walk / np.linalg.norm(walk, axis=1, keepdims=True) * 1.4
    position[trained:] = rng.normal(0, 0.02, (ROWS - trained, DIM))
    token = torch.from_numpy(rng.normal(0, 0.07, (VOCAB, DIM)).astype(np.float32))
    state = {"albert.embeddings.word_embeddings.weight": token,
             "albert.embeddings.position_embeddings.weight": torch.from_numpy(position.astype(np.float32)),
             "albert.embeddings.token_type_embeddings.weight": torch.from_numpy(
                 rng.normal(0, 0.02, (2, DIM)).astype(np.float32)),
             "albert.encoder.embedding_hidden_mapping_in.weight": torch.zeros(256, DIM),
             "predictions.dense.weight": torch.zeros(DIM, 256),
             "predictions.decoder.weight": token,  # tied, as transformers saves it: one storage
             "predictions.decoder.bias": torch.zeros(VOCAB)}
    torch.save(state, tmp_path / "pytorch_model.bin")
    (tmp_path / "config.json").write_text(json.dumps({
        "architectures": ["AlbertForMaskedLM"], "model_type": "albert", "embedding_size": DIM, "hidden_size": 256,
        "initializer_range": 0.02, "max_position_embeddings": ROWS, "vocab_size": VOCAB}))
    return position.astype(np.float32)


def test_the_last_two_positions_at_the_stated_init_are_never_trained(tmp_path):
    position = albert_like(tmp_path)
    norms = np.linalg.norm(position.astype(np.float64), axis=1)
    unit = position / norms[:, None]
    following = (unit[1:] * unit[:-1]).sum(axis=1)
    # the truth, in the weights: rows 510-511 at 0.02 x sqrt(128), unlike each other; trained neighbours alike
    assert np.abs(norms[TRAINED:] / (0.02 * np.sqrt(DIM)) - 1).max() < 4 / np.sqrt(2 * DIM)
    assert abs(following[TRAINED]) < 4 / np.sqrt(DIM) and following[:TRAINED - 1].mean() > 0.5
    doc = run_json("norms", "--table", "position", "-c", str(tmp_path))
    assert doc["untrained"]["ranges"] == [{"first": TRAINED, "last": ROWS - 1}] and doc["untrained"]["rows"] == 2
    evidence = doc["untrained"]["evidence"]
    assert evidence.startswith(f"positions 510-511 (2 rows) never trained: norm {norms[TRAINED:].mean():.4g} +- "
                               f"{norms[TRAINED:].std():.2g}, the 0.02 x sqrt(128) of the initialisation "
                               "(initializer_range 0.02 in config.json)")
    assert evidence.endswith("the model saw sequences of at most about 510 tokens")
    assert all(a["index"] < TRAINED for a in doc["anomalies"])  # no longer anomalies at z -12: judged apart


def test_a_fully_trained_albert_has_no_never_trained_position(tmp_path):
    albert_like(tmp_path, trained=ROWS)
    assert run_json("norms", "--table", "position", "-c", str(tmp_path))["untrained"]["rows"] == 0


def test_albert_predictions_decoder_is_the_head_and_tied_by_storage(tmp_path):
    albert_like(tmp_path)
    console = " ".join(run("info", "-c", str(tmp_path)).stdout.split())
    assert "predictions.decoder.weight shares storage with albert.embeddings.word_embeddings.weight" in console
    assert "no output projection in the file" not in console
