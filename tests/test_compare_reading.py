"""How `compare` is read: the notes that decide it (one file twice, rows cut to the shorter table, two different
runs) come before any table, the console never prints a literal null, and two checkpoints plot how each row moved.
Tables are written with np.savez and save_file; expected numbers are worked out with numpy here."""

from __future__ import annotations

import os
import re
import sys

import numpy as np
import pytest
from conftest import run, run_json, write_npz

D = 16


def first_table(stdout: str) -> int:
    """Where the first table of the console output starts (its heading or its box)."""
    return min(stdout.find(start) for start in ("\ntoken table", "\nposition table", "┏", "\ncheckpoints in order")
               if start in stdout)


def notes(stdout: str) -> dict[str, int]:
    """Each note (its wrapped lines joined) and where it starts."""
    found = {}
    for match in re.finditer(r"^note: (.*)$", stdout, flags=re.MULTILINE):  # one line each: the console is wide (below)
        found[match.group(1)] = match.start()
    return found


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    from embscope.render import console
    monkeypatch.setattr(console.out, "_width", 2000)  # no note is wrapped (the console is made at import)


def test_two_different_runs_of_different_sizes_say_so_before_any_table(tmp_path):
    rng = np.random.default_rng(0)
    a = write_npz(tmp_path / "a.npz", rng.standard_normal((600, D)).astype(np.float32),
                  rng.standard_normal((64, D)).astype(np.float32))
    b = write_npz(tmp_path / "b.npz", rng.standard_normal((86, D)).astype(np.float32),
                  rng.standard_normal((64, D)).astype(np.float32))
    result = run("compare", a, b, "--sample", "20")
    found = notes(result.stdout)
    assert "token table: A has 600 rows and B has 86: the first 86 are compared" in found
    assert any(note.startswith("token table: the mean row cosine is") and "these look like two different runs" in note
               for note in found)
    assert all(at < first_table(result.stdout) for at in found.values())  # every note of this comparison leads
    assert not re.search(r"\bnull\b", result.stdout)
    doc = run_json("compare", a, b, "--sample", "20")
    assert doc["notes"][0] == "token table: A has 600 rows and B has 86: the first 86 are compared"


@pytest.mark.parametrize("how", ["same path", "symlink", "folder and file"])
def test_one_file_twice_says_so(tmp_path, how):
    from safetensors.numpy import save_file
    rng = np.random.default_rng(1)
    folder = tmp_path / "m"
    folder.mkdir()
    save_file({"wte.weight": rng.standard_normal((50, D)).astype(np.float32)}, str(folder / "model.safetensors"))
    first = folder / "model.safetensors"
    if how == "symlink":
        second = tmp_path / "other.safetensors"
        second.symlink_to(first)
    elif how == "folder and file":
        first, second = folder, folder / "model.safetensors"
    else:
        second = first
    result = run("compare", first, second, "--sample", "0")
    found = notes(result.stdout)
    (line,) = [note for note in found if "are one file" in note]
    assert found[line] < first_table(result.stdout)
    assert os.path.samefile(first if how != "folder and file" else first / "model.safetensors", second)
    named = f"'{second}', given twice" if how == "same path" else f"'{first}' and '{second}'"
    assert line == f"A and B are one file ({named}): it is compared with itself, so every row is unchanged"


def test_a_run_prints_no_null_and_the_first_step_has_no_cosine(tmp_path):
    rng = np.random.default_rng(2)
    run_folder = tmp_path / "run"
    run_folder.mkdir()
    token = rng.standard_normal((80, D)).astype(np.float32)
    for step in (100, 200, 300):
        token = token + np.float32(0.1) * rng.standard_normal(token.shape).astype(np.float32)
        write_npz(run_folder / f"step{step}.npz", token)
    result = run("compare", run_folder, "--sample", "0")
    assert not re.search(r"\bnull\b", result.stdout)
    first_row = next(line for line in result.stdout.splitlines() if line.startswith("│ 100 "))
    assert [cell.strip() for cell in first_row.split("│")[2:4]] == ["-", "-"]  # no previous, and it is the first
    doc = run_json("compare", run_folder, "--sample", "0")
    assert doc["trajectory"][0]["tables"]["token"]["mean_row_cosine_to_previous"] is None  # JSON keeps null


def test_two_checkpoints_plot_every_row(tmp_path):
    pytest.importorskip("matplotlib")
    from embscope.analysis.compare import CompareOptions, TableInput, compare
    from embscope.render.compare import Labels
    from embscope.render.compare_plot import figure
    from embscope.series import Step
    rng = np.random.default_rng(3)
    a = rng.standard_normal((300, D)).astype(np.float32)
    b = a + np.float32(0.2) * rng.standard_normal(a.shape).astype(np.float32)
    pa, pb = rng.standard_normal((40, D)).astype(np.float32), rng.standard_normal((40, D)).astype(np.float32)
    comparison = compare([{"token": TableInput(a), "position": TableInput(pa)},
                          {"token": TableInput(b), "position": TableInput(pb)}], CompareOptions(sample=0))
    labels = Labels([(tmp_path / "run-a" / "model.safetensors", Step(10, "file")),
                     (tmp_path / "run-b" / "model.safetensors", Step(20, "file"))], tmp_path, {}, {}, {})
    fig = figure(comparison, labels)
    assert fig._suptitle.get_text() == "A = run-a/model.safetensors (step 10)  vs  B = run-b/model.safetensors (step 20)"
    cos_ax, norm_ax, change_ax, profile_ax = fig.axes
    assert [ax.get_title() for ax in fig.axes] == ["row cosine A vs B", "row norm in B against A",
                                                  "relative change ||b - a|| / ||a|| by row",
                                                  "position similarity by distance (A, B)"]
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    cos = np.sum(a64 * b64, axis=1) / (np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1))
    assert sum(p.get_height() for p in cos_ax.containers[0]) == 300  # every token row in the histogram
    assert f"token: mean {cos.mean():+.3f} over 300 rows" in cos_ax.get_legend_handles_labels()[1]
    dots = norm_ax.collections[0].get_offsets()
    assert len(dots) == 300 and np.allclose(dots[:, 0], np.linalg.norm(a64, axis=1))
    assert np.allclose(dots[:, 1], np.linalg.norm(b64, axis=1))
    relative = change_ax.collections[0].get_offsets()
    assert np.allclose(relative[:, 1], np.linalg.norm(b64 - a64, axis=1) / np.linalg.norm(a64, axis=1))
    assert [line.get_label() for line in profile_ax.get_lines() if not line.get_label().startswith("_")] == \
        ["A: step 10", "B: step 20"]


def test_the_reports_trajectory_prints_no_null(tmp_path, monkeypatch):
    # the page's tables are the point: its figures (three quarters of a report's CPU) are left out as on an install
    # without matplotlib; tests/test_report.py checks a run folder's page with them
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    rng = np.random.default_rng(4)
    run_folder = tmp_path / "run"
    run_folder.mkdir()
    token = rng.standard_normal((60, D)).astype(np.float32)
    for step in (10, 20, 30):
        token = token + np.float32(0.1) * rng.standard_normal(token.shape).astype(np.float32)
        write_npz(run_folder / f"step{step}.npz", token)
    run("report", "-c", run_folder, "--out", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    across = page[page.index("<h2>Across checkpoints</h2>"):]  # the trajectory (geometry lists a dimension 10 too)
    first = re.search(r'<tr><td class="number" data-value="10">10</td>(.*?)</tr>', across).group(1)
    assert re.findall(r">([^<]*)</td>", first)[:2] == ["-", "-"] and ">null<" not in page
