"""`compare CKPT --output` and linear CKA in `compare A B`: an untied head planted as a rotation of the token table
plus noise (raw row cosines near 0, aligned and CKA near 1), every figure against plain numpy; CKA from d x d
products against the n x n form of Kornblith et al. (2019); a tied head compares nothing and says so."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run, run_json
from safetensors.numpy import save_file

from embscope.analysis.cka import linear_cka
from embscope.analysis.compare import by_index
from embscope.compute.moments import Work

V, D, T = 300, 16, 32


def rotation(seed: int, dim: int) -> np.ndarray:
    q, r = np.linalg.qr(np.random.default_rng(seed).standard_normal((dim, dim)))
    return q * np.sign(np.diag(r))


def untied(path, noise: float = 0.05, seed: int = 0):
    """A nanoGPT-named safetensors file whose lm_head is the token table rotated, plus noise."""
    rng = np.random.default_rng(seed)
    token = rng.standard_normal((V, D)).astype(np.float32)
    head = (token @ rotation(seed + 1, D) + noise * rng.standard_normal((V, D))).astype(np.float32)
    save_file({"transformer.wte.weight": token, "transformer.wpe.weight": rng.standard_normal((T, D)).astype(np.float32),
               "lm_head.weight": head}, str(path))
    return path, token.astype(np.float64), head.astype(np.float64)


def cka_by_kernels(x: np.ndarray, y: np.ndarray) -> float:
    """Linear CKA as HSIC of the n x n linear kernels, centred by H = I - 11^T / n (Kornblith et al. 2019, eq. 4)."""
    n = len(x)
    h = np.eye(n) - np.ones((n, n)) / n
    k, l_ = h @ x @ x.T @ h, h @ y @ y.T @ h
    return float((k * l_).sum() / (np.linalg.norm(k) * np.linalg.norm(l_)))


def row_cosines(a, b):
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def top_sets(table, k):
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    cosines = unit @ unit.T
    np.fill_diagonal(cosines, -np.inf)
    return [set(np.argsort(-row, kind="stable")[:k].tolist()) for row in cosines]


def test_a_rotated_head_against_numpy(tmp_path):
    path, token, head = untied(tmp_path / "model.safetensors")
    doc = run_json("compare", path, "--output", "--sample", 10000, "-k", 5)
    raw = row_cosines(token, head)
    u, _, vt = np.linalg.svd(head.T @ token)
    aligned = row_cosines(token, head @ (u @ vt))
    assert doc["tied"] is False and doc["token"] == "transformer.wte.weight" and doc["output"] == "lm_head.weight"
    assert doc["rows_compared"] == V
    assert doc["mean_row_cosine"] == pytest.approx(raw.mean(), rel=1e-9)
    assert abs(doc["mean_row_cosine"]) < 0.3
    assert doc["aligned_mean_row_cosine"] == pytest.approx(aligned.mean(), rel=1e-9)
    assert doc["aligned_mean_row_cosine"] > 0.99
    # the d x d products are float32 (summed in float64): CKA to about 1e-6
    assert doc["cka"] == pytest.approx(cka_by_kernels(token, head), rel=1e-5)
    assert doc["cka"] > 0.99
    sets_a, sets_b = top_sets(token, 5), top_sets(head, 5)
    jaccard = [len(a & b) / len(a | b) for a, b in zip(sets_a, sets_b)]
    assert doc["neighbour_rows"] == V and doc["neighbour_overlap"] == pytest.approx(np.mean(jaccard), rel=1e-12)


def test_the_console_answer_names_both_tables(tmp_path):
    path, _, _ = untied(tmp_path / "model.safetensors", noise=0.5)
    printed = run("compare", path, "--output", "--sample", 50).stdout
    assert printed.startswith(f"checkpoint: {path} (step unknown)\n")
    assert "token table 'transformer.wte.weight' against the output projection 'lm_head.weight': 300 rows" in printed
    assert "after orthogonal Procrustes" in printed and "linear CKA (Kornblith et al. 2019)" in printed


def test_a_tied_head_compares_nothing_and_says_so():
    doc = run_json("compare", "sample_checkpoints/hf", "--output")
    assert doc["tied"] is True and doc["output"] is None and doc["cka"] is None
    assert doc["mean_row_cosine"] is None and "tied head" in doc["reason"]
    printed = run("compare", "sample_checkpoints/nanogpt/ckpt.pt", "--output").stdout
    assert "they are one table, so there is nothing to compare" in printed


def test_no_head_is_an_error_and_misuse_a_usage_error(tmp_path):
    result = run("compare", "sample_checkpoints/nlm", "--output", code=1)
    assert result.stderr.startswith("Error: expected an untied output projection, found none")
    assert result.stderr.count("\n") == 1
    result = run("compare", "sample_checkpoints/nlm", "sample_checkpoints/nlm_step1000", "--output", code=2)
    assert "--output compares the two tables of one checkpoint" in result.stderr


@pytest.mark.parametrize("option", [("--top", "3"), ("--top", "20"), ("--scheduler", "local")])
def test_output_refuses_the_options_it_has_no_use_for(option):
    # --output lists no movers and runs no series: --top 3 and --scheduler local were taken and the answer was the
    # same to the bit
    result = run("compare", "sample_checkpoints/nanogpt/ckpt.pt", "--output", *option, code=2)
    assert result.stderr.splitlines()[0] == ("Error: Invalid value: --output compares the two tables of one checkpoint: "
                                             "give one checkpoint, without --align, --match, --plot, --top or "
                                             "--scheduler")


def test_compare_two_checkpoints_reports_cka(tmp_path):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((V, D)).astype(np.float32)
    b = (a @ rotation(4, D) * 2 + 0.3 * rng.standard_normal((V, D))).astype(np.float32)
    pos_a, pos_b = rng.standard_normal((T, D)).astype(np.float32), rng.standard_normal((T, D)).astype(np.float32)
    np.savez(tmp_path / "a.npz", token_emb=a, pos_emb=pos_a)
    np.savez(tmp_path / "b.npz", token_emb=b, pos_emb=pos_b)
    doc = run_json("compare", tmp_path / "a.npz", tmp_path / "b.npz", "--sample", 20)
    assert doc["tables"]["token"]["cka"] == pytest.approx(cka_by_kernels(a.astype(float), b.astype(float)), rel=1e-5)
    assert doc["tables"]["position"]["cka"] == pytest.approx(cka_by_kernels(pos_a.astype(float), pos_b.astype(float)),
                                                             rel=1e-5)


def test_cka_leaves_out_rows_with_nan_and_runs_on_torch():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((200, 8)) + 10.0  # a large common offset costs no precision
    b = a @ rotation(6, 8) + rng.standard_normal((200, 8))
    a[17, 3] = np.nan
    keep = np.isfinite(a).all(axis=1)
    found = linear_cka(a, b, by_index(200, 200), device="cpu")
    assert found.rows == 199 and found.value == pytest.approx(cka_by_kernels(a[keep], b[keep]), rel=1e-5)
    pytest.importorskip("torch")
    on_torch = linear_cka(a, b, by_index(200, 200), _work=Work("cpu", use_torch=True))
    assert on_torch.value == pytest.approx(found.value, rel=1e-6)


def test_no_cka_skips_it_and_says_so(tmp_path):
    path, _, _ = untied(tmp_path / "model.safetensors")
    doc = run_json("compare", path, "--output", "--sample", 0, "--no-cka")
    assert doc["cka"] is None and "linear CKA was not computed (--no-cka)" in doc["notes"]
    assert doc["aligned_mean_row_cosine"] > 0.99


def test_compare_takes_c_and_the_variable_as_every_command_does(tmp_path, monkeypatch):
    """Issue 32: `compare --output -c X` was "No such option: -c", and with $EMBSCOPE_CHECKPOINT set `compare
    --output` was "Missing argument". -c and the variable give the same answer as the argument; -c repeats."""
    path, token, head = untied(tmp_path / "with space.safetensors")
    by_argument = run_json("compare", path, "--output", "--sample", 0)
    assert run_json("compare", "--output", "-c", path, "--sample", 0) == by_argument
    assert by_argument["mean_row_cosine"] == pytest.approx(row_cosines(token, head).mean(), rel=1e-9)
    monkeypatch.setenv("EMBSCOPE_CHECKPOINT", str(path))  # one path, though it holds a space
    assert run_json("compare", "--output", "--sample", 0) == by_argument
    other, _, _ = untied(tmp_path / "other.safetensors", seed=3)
    two = run_json("compare", "-c", path, "-c", other, "--sample", 0, "--no-cka")
    assert [c["path"] for c in two["checkpoints"]] == [str(path), str(other)]
    mixed = run_json("compare", path, "-c", other, "--sample", 0, "--no-cka")  # the arguments first, then each -c
    assert [c["path"] for c in mixed["checkpoints"]] == [str(path), str(other)]
    monkeypatch.delenv("EMBSCOPE_CHECKPOINT")
    result = run("compare", "--output", code=2)
    assert result.stderr.startswith("Error: Invalid value for 'CHECKPOINT...': expected checkpoints to compare")


def test_the_aligned_cosine_is_said_beside_what_unrelated_tables_reach(tmp_path):
    # g2p_id 0.0.4's tiny-pron.onnx: 29 source characters against its 29-phoneme head, 128 wide: its aligned mean
    # row cosine, +0.90, is below the +0.94 two unrelated Gaussian tables of that shape reach after their own fit
    rng = np.random.default_rng(4)
    rows, dim = 29, 128
    token, head = rng.standard_normal((rows, dim)), rng.standard_normal((rows, dim))  # unrelated
    save_file({"transformer.wte.weight": token.astype(np.float32), "lm_head.weight": head.astype(np.float32)},
              str(tmp_path / "model.safetensors"))
    doc = run_json("compare", tmp_path / "model.safetensors", "--output")
    def orthogonal_procrustes(b, a):  # Schoenemann 1966: R = U V^T for B^T A = U S V^T, as scipy.linalg states it
        u, _, vt = np.linalg.svd(b.T @ a)
        return u @ vt, None

    drawn = np.random.default_rng(0)  # the chance's draw: --seed's default
    a, b = drawn.standard_normal((rows, dim)), drawn.standard_normal((rows, dim))
    assert doc["aligned_chance"] == pytest.approx(row_cosines(a, b @ orthogonal_procrustes(b, a)[0]).mean(), rel=1e-9)
    own = row_cosines(token, head @ orthogonal_procrustes(head.astype(np.float32), token.astype(np.float32))[0])
    assert doc["aligned_mean_row_cosine"] == pytest.approx(own.mean(), abs=1e-5)
    assert doc["aligned_chance"] > 0.9 and abs(doc["aligned_mean_row_cosine"] - doc["aligned_chance"]) < 0.03
    console = run("compare", tmp_path / "model.safetensors", "--output").stdout
    assert (f"(unrelated Gaussian tables of these 29 rows reach {doc['aligned_chance']:+.4f} after their own fit)"
            in " ".join(console.split()))
    across = run_json("compare", tmp_path / "model.safetensors", tmp_path / "model.safetensors", "--align",
                      "procrustes")
    assert across["tables"]["token"]["alignment"]["chance_mean_row_cosine"] == doc["aligned_chance"]


def test_the_chance_of_one_row_is_a_cosine_of_one_at_most(tmp_path):
    # one row is turned onto its pair exactly: the chance is 1, and rounding must not say 1.0000000000000002
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((1, 8)).astype(np.float32), rng.standard_normal((1, 8)).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    doc = run_json("compare", "-c", tmp_path / "a.npy", "-c", tmp_path / "b.npy", "--align", "procrustes")
    chance = doc["tables"]["token"]["alignment"]["chance_mean_row_cosine"]
    assert chance == pytest.approx(1.0, abs=1e-12) and chance <= 1.0


def test_a_count_of_rows_is_worded_for_one_and_for_many():
    # compare printed 'over 1 rows' for an alignment, a CKA or a neighbour overlap over one row
    from embscope.render.console import rows_text
    assert (rows_text(1), rows_text(0), rows_text(2048)) == ("1 row", "0 rows", "2,048 rows")


def test_a_zero_row_is_no_stable_row_and_the_chance_leaves_it_out(tmp_path):
    # attack11: a row zero in A and non-zero in B (relative change Inf) closed the "most stable rows" list, and the
    # chance was drawn over one row more than the aligned mean row cosine covers (a zero row has no cosine)
    rng = np.random.default_rng(6)
    a = rng.standard_normal((6, 8)).astype(np.float32)
    b = (a + 0.01 * rng.standard_normal((6, 8))).astype(np.float32)
    a[2] = 0.0
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    token = run_json("compare", "-c", tmp_path / "a.npy", "-c", tmp_path / "b.npy")["tables"]["token"]
    kept = np.array([0, 1, 3, 4, 5])
    relative = np.linalg.norm(b[kept].astype(np.float64) - a[kept], axis=1) / np.linalg.norm(a[kept], axis=1)
    assert [s["id"] for s in token["stable"]] == kept[np.argsort(relative, kind="stable")].tolist()
    assert token["movers"][0]["id"] == 2
    alignment = run_json("compare", "-c", tmp_path / "a.npy", "-c", tmp_path / "b.npy", "--align",
                         "procrustes")["tables"]["token"]["alignment"]
    assert alignment["rows"] == 5
    drawn = np.random.default_rng(0)  # the chance's draw: --seed's default, over the five rows with a cosine
    x, y = drawn.standard_normal((5, 8)), drawn.standard_normal((5, 8))
    u, _, vt = np.linalg.svd(y.T @ x)
    assert alignment["chance_mean_row_cosine"] == pytest.approx(row_cosines(x, y @ (u @ vt)).mean(), rel=1e-9)
