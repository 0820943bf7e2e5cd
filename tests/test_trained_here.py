"""Verdicts on tables that stand for tiny models trained on this machine's CPU (attack20), where the truth is known:
which token ids the data held, which positions its sequences reached, how far each row moved from its draw. No
training here: each table is built in numpy the way the run left it (a draw at init, the rows training reached moved
as measured there, the rest scaled by AdamW's decay alone, (1 - lr wd)^t), and written with the real writer."""

from __future__ import annotations

import numpy as np
from conftest import run, run_json

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


def tied_token_table(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A 2,000 x 64 token table of N(0, 0.02) shared with the head (GPT-2's tie), trained with AdamW on data that
    never held 500 ids: the run (GPT2LMHeadModel, 1 layer, 300 steps, lr 3e-3, weight decay 0.1) pushed every row
    along one direction (the softmax's push on the ids it predicts too seldom): the 500 unseen rows by 0.82 each,
    their draw times the decay beside it (norms 0.81 to 0.92, mutual cosine 0.973), the 1,500 seen rows by 0 to 0.6
    with moves of their own (mutual cosine 0.49, norms 0.13 to 0.77)."""
    rng = np.random.default_rng(seed)
    table = rng.normal(0, 0.02, (2000, 64))
    unseen = np.sort(rng.choice(np.arange(4, 2000), 500, replace=False))
    seen = np.setdiff1d(np.arange(2000), unseen)
    push = rng.normal(0, 1, 64)
    push /= np.linalg.norm(push)
    table[seen] += rng.normal(0, 0.015, (len(seen), 64)) + rng.uniform(0, 0.6, (len(seen), 1)) * push
    table[unseen] = table[unseen] * ADAMW_DECAY + 0.82 * push
    return table.astype(np.float32), unseen


def test_a_tied_tables_unseen_rows_moved_together_are_found_beside_trained_rows_pushed_the_same_way(tmp_path):
    # the run's file: norms found no row never trained (undertrained's cluster found the 500); the trained rows'
    # bins, sorted by norm, reach mutual cosine 0.5 and up to 0.9 right below the unseen rows' 0.97, and the group
    # seeded from all of them together failed its own tests
    from safetensors.numpy import save_file

    table, unseen = tied_token_table(0)
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    order = np.argsort(np.linalg.norm(table, axis=1))
    below = unit[order[1480:1500]].sum(axis=0)  # the trained rows' bin of 20 just below the unseen rows' norms
    assert (below @ below - 20) / (20 * 19) > 0.8
    save_file({"transformer.wte.weight": table}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text('{"model_type": "gpt2", "n_embd": 64, "vocab_size": 2000, '
                                          '"initializer_range": 0.02, "tie_word_embeddings": true}')
    doc = run_json("norms", "--table", "token", "-c", tmp_path)
    found = [i for r in doc["untrained"]["ranges"] for i in range(r["first"], r["last"] + 1)]
    assert found == unseen.tolist()
    assert doc["untrained"]["kind"] == "moved together"


def keras_draw(seed: int):
    """A keras.layers.Embedding's draw (uniform(-0.05, 0.05), 2,000 x 64), 500 ids never seen, and the one direction
    the run's training pushed its seen rows along."""
    rng = np.random.default_rng(seed)
    table = rng.uniform(-0.05, 0.05, (2000, 64))
    unseen = np.sort(rng.choice(np.arange(4, 2000), 500, replace=False))
    seen = np.setdiff1d(np.arange(2000), unseen)
    push = rng.normal(0, 1, 64)
    return rng, table, unseen, seen, push / np.linalg.norm(push)


def keras_trend_table(seed: int) -> np.ndarray:
    """A 2,000 x 64 keras.layers.Embedding table (uniform(-0.05, 0.05)) trained with AdamW, untied: the run (Keras 3,
    Embedding -> Dense -> Dense, 300 steps) moved its seen rows along one direction by amounts that grow with how
    often they were seen (its bins of 20 rows sorted by norm: mutual cosine rising smoothly from 0.4 to 0.89), and
    left its 500 unseen rows at their draw times the decay."""
    rng, table, unseen, seen, push = keras_draw(seed)
    table[seen] += 0.6 * np.sqrt(rng.uniform(0, 1, (len(seen), 1))) * push + rng.normal(0, 0.04, (len(seen), 64))
    table[unseen] *= ADAMW_DECAY
    return table.astype(np.float32)


def test_rows_pushed_further_the_more_they_were_seen_are_no_group_moved_together(tmp_path):
    # seeding the group from the bins about the tightest one, with no drop beside them, took a cut of that trend
    # for rows moved only together: 680 trained rows on the run's file (seen up to 3,700 times), 791 on this table
    from safetensors.numpy import save_file

    table = keras_trend_table(0)
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    order = np.argsort(np.linalg.norm(table, axis=1))
    mutuals = [(s @ s - 20) / 380 for s in (unit[order[i:i + 20]].sum(axis=0) for i in range(1900, 2000, 20))]
    assert np.all(np.diff(mutuals) > -0.05) and mutuals[-1] > 0.7  # no drop: a trend up to the top bin
    save_file({"embedding.weight": table}, str(tmp_path / "model.safetensors"))
    doc = run_json("norms", "--table", "token", "-c", tmp_path / "model.safetensors", "--token-key", "embedding.weight")
    assert doc["untrained"]["rows"] == 0


def low_tail_table(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A 2,000 x 256 token table of N(0, 0.02), untied, trained with AdamW for 200 steps (lr 3e-3, weight decay 0.1):
    its 500 unseen rows are their draw times the decay, 0.94 (norms 0.27 to 0.35); its seen rows moved about their
    own norm (1.2 times the draw's median), norms from 0.36 up (1% below 0.38), crowding the draw's edge; its two most frequent rows
    shrank into the band (norms 0.31 and 0.33 here; 0.31 and 0.35 there), each alike a trained row (nearest-row cosine 0.48 and 0.52)."""
    rng = np.random.default_rng(seed)
    table = rng.normal(0, 0.02, (2000, 256))
    unseen = np.sort(rng.choice(np.arange(4, 2000), 500, replace=False))
    seen = np.setdiff1d(np.arange(2000), unseen)
    table[seen] += rng.normal(0, 1, (len(seen), 256)) * rng.uniform(0.013, 0.05, (len(seen), 1))
    table[unseen] *= (1 - 3e-3 * 0.1) ** 200
    for row, partner, norm in ((seen[0], seen[-1], 0.31), (seen[1], seen[-2], 0.325)):
        blend = table[partner] / np.linalg.norm(table[partner]) + 1.6 * rng.normal(0, 1 / 16, 256)
        table[row] = norm * blend / np.linalg.norm(blend)
    return table.astype(np.float32), unseen


def test_unseen_rows_below_a_small_step_are_found_where_trained_rows_crowd_the_draws_edge(tmp_path):
    # the run's file: norms and undertrained found no row never trained, though the 500 unseen rows are a draw
    # (coordinates' kurtosis 3.02, norms spread as a chi's) below the widest step of the lower half: its trained
    # rows within twice the band's reach of the draw's norm were too many for the others to stand apart
    import torch

    table, unseen = low_tail_table(0)
    norms = np.linalg.norm(table.astype(np.float64), axis=1)
    scale = np.median(norms[unseen])
    seen = np.setdiff1d(np.arange(2000), unseen)
    twice = np.abs(norms[seen] / scale - 1) <= 2 * 4 / np.sqrt(512)
    assert twice.sum() > 0.01 * len(seen)  # the others do not stand apart from twice the band's reach
    torch.save({"tok.weight": torch.from_numpy(table)}, tmp_path / "model.pt")
    doc = run_json("norms", "--table", "token", "-c", tmp_path / "model.pt", "--token-key", "tok.weight")
    found = [i for r in doc["untrained"]["ranges"] for i in range(r["first"], r["last"] + 1)]
    # every row found unseen; the draw's top row (0.346) may lie above the first trained rows' step, as it may there
    assert set(found) <= set(unseen.tolist()) and len(found) >= 499
    assert "2 rows of the band left out, each alike its nearest row" in doc["untrained"]["evidence"]


def shrunk_with_four_high_rows(seed: int) -> np.ndarray:
    """A 2,000 x 64 token table of N(0, 1) (torch's nn.Embedding) trained with AdamW at lr 3e-2, weight decay 0.1, for
    300 steps: every row shrank to 0.41 of its draw (the decay, (1 - 3e-3)^300) give or take its moves, and 4 rows
    seen 51 to 118 times, moved 0.84 to 0.93 of their draw's norm, stayed at 0.6 to 0.8 of it, two by two alike
    (cosine 0.65 to their nearest row)."""
    rng = np.random.default_rng(seed)
    table = 0.406 * rng.normal(0, 1, (2000, 64)) + rng.normal(0, 0.05, (2000, 64))
    for pair in ((417, 615), (520, 549)):
        shared = rng.normal(0, 1, 64)
        for row in pair:
            table[row] = 0.44 * rng.normal(0, 1, 64) + 0.6 * shared
    return table.astype(np.float32)


def test_norm_high_leaves_out_rows_alike_their_nearest_row_where_no_init_scale_is_known(tmp_path):
    # the run's file: undertrained listed 4 candidates, each 'norm-high' alone (z 6.0 to 10.4), all seen in training
    # (51 to 118 times) and moved from their draw by 0.84 to 0.93 of its norm: no row that kept its initial values
    import torch

    table = shrunk_with_four_high_rows(0)
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    high = [417, 520, 549, 615]
    scores = unit[high] @ unit.T
    scores[np.arange(4), high] = -1
    assert scores.max(axis=1).min() > 0.62  # each alike its nearest row, past a draw's line (0.60 at 64 x 2,000)
    torch.save({"tok.weight": torch.from_numpy(table)}, tmp_path / "model.pt")
    doc = run_json("undertrained", "-c", tmp_path / "model.pt", "--token-key", "tok.weight")
    assert doc["candidates"] == []
    assert any("4 rows far above the rest alike their nearest row" in note for note in doc["tables"][0]["notes"])


def wide_init_positions(seed: int) -> np.ndarray:
    """A 512 x 64 position table of N(0, 1) (torch's nn.Embedding) trained with Adam at lr 3e-2 on sequences of 128:
    the run moved positions 0-127 by a quarter of their norm, keeping it (norms 8.15 against 7.96), each unlike its
    neighbours (cosine 0.12), but all along one direction: their unit rows' projections on it, times sqrt(d), 1.3
    to 2.2 on positions 0-94 and 0.48 on 95-127; positions 128-511 are their draw."""
    rng = np.random.default_rng(seed)
    table = rng.normal(0, 1, (512, 64))
    push = rng.normal(0, 1, 64)
    push /= np.linalg.norm(push)
    table[:95] += 8 * 0.22 * push
    table[95:128] += 8 * 0.06 * push
    return table.astype(np.float32)


def test_positions_that_share_a_direction_are_left_out_of_a_table_otherwise_at_its_draw(tmp_path):
    # the run's file: norms said the whole table cannot be told from its initialisation (512 rows), though
    # d |sum of unit rows|^2 / rows is 277 on positions 0-127 and 56 on the rest, where a draw passes 115
    import torch

    table = wide_init_positions(0)
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    used, rest = unit[:128].sum(axis=0), unit[128:].sum(axis=0)
    assert 64 * (used @ used) / 128 > 200 and 64 * (rest @ rest) / 384 < 115
    torch.save({"wte.weight": torch.from_numpy(np.random.default_rng(1).normal(0, 1, (300, 64)).astype(np.float32)),
                "wpe.weight": torch.from_numpy(table)}, tmp_path / "model.pt")
    doc = run_json("norms", "--table", "position", "-c", tmp_path / "model.pt", "--token-key", "wte.weight",
                   "--pos-key", "wpe.weight")
    [found] = doc["untrained"]["ranges"]
    assert 128 <= found["first"] <= 140 and found["last"] == 511 and not doc["untrained"]["whole_table"]
    assert "share a direction" in doc["untrained"]["evidence"]


def keras_adamw_table(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A 2,000 x 64 keras.layers.Embedding table (uniform(-0.05, 0.05)) trained with AdamW (lr 3e-3, weight decay
    0.1, 300 steps), untied: its 500 unseen rows are their draw times the decay, 0.914 (every |x| within 0.0457);
    its seen rows moved past the draw's box (largest |x| 0.046 to 0.098, median 0.068), along one direction by
    amounts that grow with how often they were seen, as keras_trend_table's."""
    rng, table, unseen, seen, push = keras_draw(seed)
    table[seen] += rng.normal(0, 1, (len(seen), 64)) * rng.uniform(0.004, 0.015, (len(seen), 1))
    table[seen] += 0.3 * np.sqrt(rng.uniform(0, 1, (len(seen), 1))) * push
    table[unseen] *= ADAMW_DECAY
    return table.astype(np.float32), unseen


def test_a_keras_tables_unseen_rows_shrunk_alike_by_weight_decay_are_found_in_their_smaller_box(tmp_path):
    # the run's file: norms and undertrained found no row never trained: the unseen rows' coordinates fill
    # uniform(-0.0457, 0.0457) evenly, not Keras' (-0.05, 0.05) box (Kolmogorov-Smirnov sqrt(n) D 15 against it)
    from reader_samples import write_keras_zip

    table, unseen = keras_adamw_table(0)
    peaks = np.abs(table).max(axis=1)
    assert peaks[unseen].max() <= 0.05 * ADAMW_DECAY + 1e-7
    assert np.median(peaks[np.setdiff1d(np.arange(2000), unseen)]) > 0.055
    path = write_keras_zip(tmp_path / "k.keras", [("layers/embedding", "token_embedding", "Embedding", [table])])
    doc = run_json("norms", "-c", path, "--table", "token")
    found = [i for r in doc["untrained"]["ranges"] for i in range(r["first"], r["last"] + 1)]
    assert found == unseen.tolist() and doc["untrained"]["kind"] == "shrunk alike"
    assert f"shrunk alike by {ADAMW_DECAY:.3g}" in doc["untrained"]["evidence"]


def narrow_low_tail_table(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """low_tail_table's run at 64 columns (Adam, 300 steps): its 500 unseen rows at their draw (norms 0.12 to 0.21),
    its seen rows from 0.21 up, and its 5 most frequent rows shrunk into the band (0.135 to 0.18), each at cosine
    0.42 to 0.61 to a trained row (0.42 to 0.62 there), about the 0.60 line a draw passes at 64 columns."""
    rng = np.random.default_rng(seed)
    table = rng.normal(0, 0.02, (2000, 64))
    unseen = np.sort(rng.choice(np.arange(4, 2000), 500, replace=False))
    seen = np.setdiff1d(np.arange(2000), unseen)
    table[seen] += rng.normal(0, 1, (len(seen), 64)) * rng.uniform(0.026, 0.05, (len(seen), 1))
    for row, partner, norm in zip(seen[:5], seen[-5:], (0.135, 0.17, 0.173, 0.174, 0.18)):
        blend = table[partner] / np.linalg.norm(table[partner]) + 1.6 * rng.normal(0, 1 / 8, 64)
        table[row] = norm * blend / np.linalg.norm(blend)
    return table.astype(np.float32), unseen


def test_a_narrow_tables_low_tail_among_crowding_rows_is_said_not_judged(tmp_path):
    # the run's files (Adam and AdamW, 2,000 x 64 at N(0, 0.02)): norms said 'never-trained rows: none found' with
    # no word of the 504 rows below the step that look drawn, 499 of them never seen and 5 the most frequent rows
    import torch

    table, unseen = narrow_low_tail_table(0)
    lowest = np.argsort(np.linalg.norm(table.astype(np.float64), axis=1))[:505]
    assert set(unseen.tolist()) < set(lowest.tolist())  # the 505 lowest: every unseen row and 5 trained ones
    torch.save({"tok.weight": torch.from_numpy(table)}, tmp_path / "model.pt")
    args = ("norms", "--table", "token", "-c", tmp_path / "model.pt", "--token-key", "tok.weight")
    doc = run_json(*args)
    assert doc["untrained"]["rows"] == 0
    assert "; not judged: the 505 rows of lowest norm look like a Gaussian draw" in doc["untrained"]["rule"]
    assert "never-trained rows: none found (not judged: the 505 rows" in run(*args).stdout
