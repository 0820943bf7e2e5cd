"""The run audit of `compare RUN_FOLDER`: planted runs written with torch.save (nanoGPT's ckpt.pt layout) and with
safetensors (Trainer's checkpoint-N/ folders). A drifting run has nothing to report; a copied step is a duplicate
(the tables byte-identical, found by hashes taken in the comparing read); a swapped pair of steps and a later model
served at an earlier step are out of order, with evidence whose numbers are checked against plain numpy."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from conftest import run, run_json
from safetensors.numpy import save_file

V, D, T = 120, 12, 20
STEPS = [100, 200, 300, 400, 500, 600, 700, 800]


def drifting_run(seed: int = 0) -> dict[int, dict[str, np.ndarray]]:
    """Tables that drift away from their start and grow, step by step, with a little noise of each step's own."""
    rng = np.random.default_rng(seed)
    start = {"token": rng.standard_normal((V, D)), "position": rng.standard_normal((T, D))}
    away = {role: rng.standard_normal(table.shape) for role, table in start.items()}
    run = {}
    for step in STEPS:
        t = step / 100
        run[step] = {role: (start[role] * (1 + 0.08 * t) + 0.25 * t * away[role]
                            + 0.01 * rng.standard_normal(start[role].shape)).astype(np.float32) for role in start}
    return run


def write_torch(folder, run: dict[int, dict[str, np.ndarray]], served: dict[int, int] | None = None):
    """nanoGPT's out/ckpt_<step>.pt; `served`: file step -> the step whose tables it holds."""
    folder.mkdir()
    for step in STEPS:
        tables = run[(served or {}).get(step, step)]
        torch.save({"model": {"transformer.wte.weight": torch.from_numpy(tables["token"]),
                              "transformer.wpe.weight": torch.from_numpy(tables["position"])},
                    "model_args": {"vocab_size": V, "block_size": T, "n_embd": D}, "iter_num": step},
                   folder / f"ckpt_{step}.pt")
    return folder


def write_safetensors(folder, run, served: dict[int, int] | None = None):
    """Trainer's checkpoint-<step>/model.safetensors."""
    for step in STEPS:
        tables = run[(served or {}).get(step, step)]
        (folder / f"checkpoint-{step}").mkdir(parents=True)
        save_file({"transformer.wte.weight": tables["token"], "transformer.wpe.weight": tables["position"]},
                  str(folder / f"checkpoint-{step}" / "model.safetensors"))
    return folder


def audit_of(folder) -> dict:
    return run_json("compare", folder, "--sample", 40, "-k", 3, "--no-cka")["audit"]


def cos_to_first(run, served, step, role="token"):
    first, table = (run[served.get(s, s)][role].astype(np.float64) for s in (STEPS[0], step))
    return float(np.mean((first * table).sum(1) / (np.linalg.norm(first, axis=1) * np.linalg.norm(table, axis=1))))


def mean_norm(run, served, step, role="token"):
    return float(np.linalg.norm(run[served.get(step, step)][role].astype(np.float64), axis=1).mean())


@pytest.mark.parametrize("writer", [write_torch, write_safetensors])
def test_a_drifting_run_has_nothing_to_report(tmp_path, writer):
    assert audit_of(writer(tmp_path / "run", drifting_run())) == {"duplicates": [], "out_of_order": []}


@pytest.mark.parametrize("writer", [write_torch, write_safetensors])
def test_a_copied_step_is_a_duplicate_and_not_out_of_order(tmp_path, writer):
    run = drifting_run()
    served = {400: 300}  # step 400's file holds step 300's tables
    found = audit_of(writer(tmp_path / "run", run, served))
    assert [(d["steps"], d["tables"]) for d in found["duplicates"]] == [([300, 400], ["token", "position"])]
    assert found["out_of_order"] == []


@pytest.mark.parametrize("writer", [write_torch, write_safetensors])
def test_a_swapped_pair_of_steps_is_out_of_order_with_its_evidence(tmp_path, writer):
    run = drifting_run()
    served = {500: 600, 600: 500}
    found = audit_of(writer(tmp_path / "run", run, served))
    assert found["duplicates"] == []
    assert [entry["step"] for entry in found["out_of_order"]] == [500, 600]
    first, second = (entry["evidence"] for entry in found["out_of_order"])
    assert "by its cosine to the first it fits between step 600 and step 700" in first
    assert "by its cosine to the first it fits between step 400 and step 500" in second
    # the figures named are the run's own, worked out here in numpy
    numbers = re.match(r"token table: cosine to the first checkpoint ([+-][\d.]+) lies outside step 400's ([+-][\d.]+) "
                       r"and step 600's ([+-][\d.]+), and mean row norm ([\d.]+) outside ([\d.]+) and ([\d.]+)", first)
    assert numbers is not None, first
    expected = [cos_to_first(run, served, s) for s in (500, 400, 600)] + [mean_norm(run, served, s) for s in (500, 400, 600)]
    assert [float(x) for x in numbers.groups()] == pytest.approx(expected, abs=1e-3, rel=1e-3)
    assert "position table:" in first  # the position table breaks the trend too


def test_a_later_model_served_at_an_earlier_step(tmp_path):
    """EleutherAI/pythia #206: steps that serve the final model: a duplicate of the last, and a jump."""
    run = drifting_run()
    found = audit_of(write_torch(tmp_path / "run", run, {300: 800}))
    assert [(d["steps"], d["tables"]) for d in found["duplicates"]] == [([300, 800], ["token", "position"])]
    assert [entry["step"] for entry in found["out_of_order"]] == [300]


def test_the_audit_comes_first_in_the_console_answer(tmp_path):
    folder = write_torch(tmp_path / "run", drifting_run(), {400: 300, 600: 700, 700: 600})
    lines = run("compare", folder, "--sample", 40, "-k", 3, "--no-cka").stdout.splitlines()
    assert lines[1].startswith("audit: duplicate: ckpt_400.pt (step 400) holds byte for byte the token and position "
                               "tables of ckpt_300.pt (step 300)")
    assert lines[2].startswith("audit: out of order: ckpt_600.pt (step 600): token table:")
    assert lines[3].startswith("audit: out of order: ckpt_700.pt (step 700): token table:")
    assert lines.index(next(line for line in lines if line.startswith("audit"))) == 1
    first_table = next(i for i, line in enumerate(lines) if "trajectory" in line)
    assert first_table > 3


def test_two_checkpoints_that_are_one_table_apart_in_bytes(tmp_path):
    run = drifting_run()
    folder = write_torch(tmp_path / "run", run)
    doc = run_json("compare", folder / "ckpt_100.pt", folder / "ckpt_200.pt", "--sample", 10, "--no-cka")
    assert doc["audit"] == {"duplicates": [], "out_of_order": []}
    one = run[100]
    flipped = {"token": one["token"].copy(), "position": one["position"]}
    flipped["token"][7, 3] = np.nextafter(flipped["token"][7, 3], np.float32(np.inf))  # one bit of one value
    torch.save({"model": {"transformer.wte.weight": torch.from_numpy(flipped["token"]),
                          "transformer.wpe.weight": torch.from_numpy(flipped["position"])}, "iter_num": 150},
               tmp_path / "flipped.pt")
    doc = run_json("compare", folder / "ckpt_100.pt", tmp_path / "flipped.pt", "--sample", 10, "--no-cka")
    assert [(d["steps"], d["tables"]) for d in doc["audit"]["duplicates"]] == [([100, 150], ["position"])]


def slowing_run(folder, served: dict[int, int]):
    """A run that slows down as training does: each step a random walk with a steady drift and a falling learning
    rate, so its early steps change the table far more than its late ones (the run's global median change would
    hide a late swap)."""
    rng = np.random.default_rng(3)
    steps = list(range(0, 10_000, 1000))
    tables = {"token": rng.normal(0, 0.02, (300, 32)), "position": rng.normal(0, 0.02, (64, 32))}
    drift = {role: rng.standard_normal(table.shape) for role, table in tables.items()}
    states = {}
    for step in steps:
        states[step] = {role: table.astype(np.float32) for role, table in tables.items()}
        rate = 0.004 * (1 - step / 12_000)
        for _ in range(10):
            tables = {role: table + rate * (0.5 * drift[role] + rng.standard_normal(table.shape))
                      for role, table in tables.items()}
    folder.mkdir()
    for step in steps:
        held = states[served.get(step, step)]
        torch.save({"model": {"transformer.wte.weight": torch.from_numpy(held["token"]),
                              "transformer.wpe.weight": torch.from_numpy(held["position"])},
                    "model_args": {"vocab_size": 300, "block_size": 64, "n_embd": 32}, "iter_num": step},
                   folder / f"ckpt_{step}.pt")
    return folder


def test_a_slowing_run_with_a_copied_step_and_a_late_swapped_pair(tmp_path):
    found = run_json("compare", slowing_run(tmp_path / "run", {4000: 3000, 6000: 7000, 7000: 6000}), "--no-cka")["audit"]
    assert [(d["steps"], d["tables"]) for d in found["duplicates"]] == [([3000, 4000], ["token", "position"])]
    assert [entry["step"] for entry in found["out_of_order"]] == [6000, 7000]
    assert "fits between step 7,000 and step 8,000" in found["out_of_order"][0]["evidence"]


def test_a_slowing_run_in_order_has_nothing_to_report(tmp_path):
    found = run_json("compare", slowing_run(tmp_path / "run", {}), "--no-cka")["audit"]
    assert found == {"duplicates": [], "out_of_order": []}


def test_the_same_values_stored_in_another_type_are_no_byte_copy(tmp_path):
    """A token table saved again as bfloat16, whose float32 values bfloat16 holds exactly: the same values, other
    bytes. The audit said it held the earlier table 'byte for byte' (its digest was of the rows as read, in float32)."""
    one = drifting_run()[100]
    token = torch.from_numpy(one["token"]).to(torch.bfloat16)  # values bfloat16 holds: float32 keeps them exactly
    torch.save({"model": {"transformer.wte.weight": token.float(), "transformer.wpe.weight": torch.from_numpy(
        one["position"])}, "iter_num": 100}, tmp_path / "a.pt")
    torch.save({"model": {"transformer.wte.weight": token, "transformer.wpe.weight": torch.from_numpy(
        one["position"])}, "iter_num": 200}, tmp_path / "b.pt")
    doc = run_json("compare", tmp_path / "a.pt", tmp_path / "b.pt", "--sample", 10, "--no-cka")
    assert doc["tables"]["token"]["unchanged_rows"] == V  # the same values, row for row
    assert [(d["steps"], d["tables"]) for d in doc["audit"]["duplicates"]] == [([100, 200], ["position"])]


@pytest.mark.slow  # a whole report: CI's slow step; the suite keeps test_the_audit_comes_first_in_the_console_answer
def test_the_report_over_a_run_carries_its_audit(tmp_path):
    """report -c RUN compares the run as `compare` does; its compare section left the audit out, so a page over a
    run whose step 400 is step 300 again said nothing of it."""
    folder = write_torch(tmp_path / "run", drifting_run(), {400: 300, 600: 700, 700: 600})
    run("report", "-c", folder, "--format", "md", "--out", tmp_path / "md")
    text = (tmp_path / "md" / "report.md").read_text()
    duplicate = (f"audit: duplicate: {folder / 'ckpt_400.pt'} (step 400) holds byte for byte the token and position "
                 f"tables of {folder / 'ckpt_300.pt'} (step 300)").replace("_", "\\_")
    assert duplicate in text, text
    assert text.count(f"audit: out of order: {folder / 'ckpt_600.pt'} (step 600): ".replace("_", "\\_")) == 1


def test_a_head_stored_transposed_is_no_byte_copy(tmp_path):
    """A head saved d x V (x @ W), read a row per token, beside the same head saved V x d: the same values in
    another order of bytes. The audit said it held the earlier head 'byte for byte' (its digest was of the rows as
    read); the token table, saved alike, is still a byte copy."""
    rng = np.random.default_rng(4)
    token, head = rng.standard_normal((96, 16)).astype(np.float32), rng.standard_normal((96, 16)).astype(np.float32)
    save_file({"wte": token, "lm_head": head}, str(tmp_path / "ckpt_100.safetensors"))
    save_file({"wte": token, "lm_head": np.ascontiguousarray(head.T)}, str(tmp_path / "ckpt_200.safetensors"))
    doc = run_json("compare", tmp_path / "ckpt_100.safetensors", tmp_path / "ckpt_200.safetensors", "--sample", 10,
                   "--no-cka")
    assert doc["tables"]["output"]["unchanged_rows"] == 96  # the same values, row for row
    assert [(d["steps"], d["tables"]) for d in doc["audit"]["duplicates"]] == [([100, 200], ["token"])]
