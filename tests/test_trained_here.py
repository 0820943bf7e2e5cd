"""Verdicts on tables that stand for tiny models trained on this machine's CPU (attack20), where the truth is known:
which token ids the data held, which positions its sequences reached, how far each row moved from its draw. No
training here: each table is built in numpy the way the run left it (a draw at init, the rows training reached moved
as measured there, the rest scaled by AdamW's decay alone, (1 - lr wd)^t), and written with the real writer."""

from __future__ import annotations

import numpy as np
from conftest import run_json

# AdamW's decoupled decay on a row no gradient reaches: lr 3e-3, weight decay 0.1, 300 steps
ADAMW_DECAY = (1 - 3e-3 * 0.1) ** 300


def short_sequence_positions(seed: int) -> np.ndarray:
    """A 512 x 64 position table of N(0, 0.02) (GPT-2's init) trained on sequences of 128 with AdamW: the run (a
    tied torch model, 2,000 x 64 tokens, 300 steps) left positions 0-127 grown 1.0 to 1.4 times their draw's norm
    into new directions (moved about their own norm, norms 0.20 to 0.26, mean |cos| among them 0.21: a shared
    direction) and positions 128-511 at their draw times the decay (norm 0.147)."""
    rng = np.random.default_rng(seed)
    init = rng.normal(0, 0.02, (512, 64))
    shared = rng.normal(0, 1, 64)
    shared *= 0.06 / np.linalg.norm(shared)
    grown = rng.uniform(1.15, 1.5, (128, 1))
    used = grown * (0.6 * init[:128] + 0.8 * rng.normal(0, 0.02, (128, 64))) + shared
    return np.concatenate([used, init[128:] * ADAMW_DECAY]).astype(np.float32)


def test_trained_positions_of_a_narrow_table_are_not_taken_for_the_unused_positions_draw(tmp_path):
    # the run's file: norms said positions 34-50, 84-91, 104-117 and 124-511 never trained (43 trained positions
    # among them): at 64 columns the band (+-35% of the norm) and the neighbour bound (|cos| 0.5) let runs of trained
    # positions in; their mean norms (0.20 to 0.23) lie 12 to 17 standard errors above the unused positions' 0.147
    import torch

    table = short_sequence_positions(0)
    norms = np.linalg.norm(table.astype(np.float64), axis=1)
    unused = np.median(norms[128:])
    assert norms[5:19].mean() > 1.3 * unused and norms[41:52].mean() > 1.3 * unused  # the runs once let in
    torch.save({"wte.weight": torch.from_numpy(np.random.default_rng(1).normal(0, 0.3, (300, 64)).astype(np.float32)),
                "wpe.weight": torch.from_numpy(table)}, tmp_path / "model.pt")
    doc = run_json("norms", "--table", "position", "-c", tmp_path / "model.pt", "--token-key", "wte.weight",
                   "--pos-key", "wpe.weight")
    assert doc["untrained"]["ranges"] == [{"first": 128, "last": 511}]
    assert "sequences of at most about 128 tokens" in doc["untrained"]["evidence"]
