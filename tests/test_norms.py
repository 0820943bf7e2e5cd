"""`embscope norms`: statistics, the robust anomaly rule, zero/NaN/Inf rows and near-duplicates, on real
files, against plain numpy. Under-trained tokens are `embscope undertrained`'s (tests/test_undertrained.py)."""

import math

import numpy as np
import pytest
from conftest import drifting, run, run_json
from safetensors.numpy import save_file

from embscope.analysis.norms import find_duplicates, row_norms, summarize
from embscope.core.errors import OptionError


def numpy_norms(table) -> np.ndarray:
    return np.linalg.norm(np.asarray(table, dtype=np.float64), axis=1)


def trend_z(norms: np.ndarray) -> np.ndarray:
    """The position rule in plain numpy: each norm's residual from the median of itself and its `half` neighbours on
    each side (fewer at the ends; zero rows left out), as a robust z over all residuals."""
    half = int(min(10, max(2, round(0.02 * len(norms)))))
    kept = np.flatnonzero(norms > 0)
    values = norms[kept]
    trend = np.array([np.median(values[max(0, k - half):k + half + 1]) for k in range(len(values))])
    residual = np.full(len(norms), np.nan)
    residual[kept] = values - trend
    center = np.nanmedian(residual)
    spread = max(np.nanmedian(np.abs(residual - center)), 0.01 * np.median(values) / 1.4826)
    return (residual - center) / (1.4826 * spread)


def save(tmp_path, name="model.npz", **arrays):
    path = tmp_path / name
    np.savez(path, **arrays)
    return path


def test_planted_row_is_the_only_anomaly(tmp_path):
    pos = drifting(512, 32, seed=1)
    planted = 37
    pos[planted] *= 5.7 * 0.43 / np.linalg.norm(pos[planted])  # 5.7x the typical norm
    path = save(tmp_path, token_emb=np.ones((8, 32), dtype=np.float32), pos_emb=pos)
    doc = run_json("norms", "-c", str(path))
    norms = numpy_norms(pos)
    assert doc["table"] == "position" and doc["name"] == "pos_emb" and doc["rows"] == 512 and doc["count"] == 512
    assert doc["mean"] == pytest.approx(norms.mean(), rel=1e-12)
    assert doc["median"] == pytest.approx(np.median(norms), rel=1e-12)
    assert doc["min"] == pytest.approx(norms.min(), rel=1e-12)
    assert doc["max"] == pytest.approx(norms.max(), rel=1e-12)
    assert doc["threshold"] == 6.0
    assert [a["index"] for a in doc["anomalies"]] == [planted]
    anomaly = doc["anomalies"][0]
    assert anomaly["norm"] == pytest.approx(norms[planted], rel=1e-12)
    assert anomaly["ratio_to_mean"] == pytest.approx(norms[planted] / norms.mean(), rel=1e-12)
    z = trend_z(norms)[planted]  # against its neighbours' running median
    assert anomaly["z"] == pytest.approx(z, rel=1e-12) and anomaly["reason"] == f"z {z:.3g}"
    assert anomaly["label"] == "position 37"
    assert doc["duplicates"] == [] and "undertrained" not in doc
    console = " ".join(run("norms", "-c", str(path)).stdout.split())
    assert f"{anomaly['ratio_to_mean']:.2f}x" in console and "position 37" in console
    assert ("a position is flagged when the robust z of its residual from the running median of its trained neighbours "
            "(10 on each side)") in console and "never-trained rows: none found" in console


def test_threshold_moves_the_line(tmp_path):
    pos = drifting(256, 16, seed=2)
    pos[100] *= 1.5
    path = save(tmp_path, token_emb=np.ones((8, 16), dtype=np.float32), pos_emb=pos)
    norms = numpy_norms(pos)
    z = abs(trend_z(norms)[100])
    assert z > 6
    above = run_json("norms", "-c", str(path), "--threshold", f"{z + 0.5}")
    below = run_json("norms", "-c", str(path), "--threshold", f"{z - 0.5}")
    assert above["anomalies"] == []
    assert 100 in [a["index"] for a in below["anomalies"]]
    [found] = [a for a in below["anomalies"] if a["index"] == 100]
    assert found["reason"] == f"z {z:.3g}" and found["z"] == pytest.approx(z, rel=1e-12)


@pytest.mark.parametrize("threshold", [math.nan, -1.0, math.inf, "6"])
def test_library_refuses_a_threshold_the_command_line_refuses(threshold):
    # summarize(norms, nan) flagged no row and -1 every row, where --threshold nan and -1 are usage errors
    norms = np.array([1.0, 1.1, 0.9, 50.0])
    assert summarize(norms, 6.0).anomalies[0].index == 3
    with pytest.raises(OptionError, match="expected a threshold of 0 or more and finite") as err:
        summarize(norms, threshold)
    assert err.value.option == "threshold"


def test_anomalies_come_most_extreme_first_with_the_rule_once(tmp_path):
    pos = drifting(300, 16, seed=12)
    for row, scale in ((20, 3.0), (40, 6.0), (60, 0.2), (80, 4.5)):
        pos[row] *= scale
    pos[90] = 0
    path = save(tmp_path, token_emb=np.ones((8, 16), dtype=np.float32), pos_emb=pos)
    doc = run_json("norms", "-c", str(path))
    norms = numpy_norms(pos)
    z = trend_z(norms)
    z[90] = np.inf  # the zero row: flagged whatever its z
    expected = sorted(np.flatnonzero(np.abs(z) > 6), key=lambda row: -abs(z[row]))
    assert [a["index"] for a in doc["anomalies"]] == expected and {40, 60, 80, 90} <= set(expected)
    console = run("norms", "-c", str(path)).stdout
    assert console.count("1.4826 x MAD") == 1  # the rule, in the header only
    assert f"z {z[40]:.3g}" in console and "zero row" in console


@pytest.mark.parametrize("rows, seed", [(64, 0), (64, 1), (1000, 2), (5000, 3), (50000, 4), (50000, 5)])
def test_gaussian_noise_flags_nothing(rows, seed):
    table = np.random.default_rng(seed).standard_normal((rows, 64)).astype(np.float32)
    assert len(summarize(row_norms(table)).anomalies) == 0


def test_noise_token_table_has_no_anomalies_and_points_to_undertrained(tmp_path):
    tok = np.random.default_rng(9).standard_normal((20000, 64)).astype(np.float32)
    path = save(tmp_path, token_emb=tok)
    doc = run_json("norms", "-c", str(path))
    assert doc["table"] == "token"  # no position table: the token table is the default
    assert doc["anomalies"] == [] and doc["duplicates"] == [] and doc["duplicates_complete"] is True
    assert "`embscope undertrained` finds them" in " ".join(run("norms", "-c", str(path)).stdout.split())


def test_whitespace_tokens_are_visible(tmp_path):
    tok = drifting(300, 16, seed=13)
    tok[32] *= 8  # " "
    tok[10] *= 8  # "\n"
    path = save(tmp_path, token_emb=tok)
    (tmp_path / "tokenizer.model").write_text("minbpe v1\n\n0\n", encoding="utf-8")  # bytes only
    console = run("norms", "-c", str(path)).stdout
    assert "\u2420" in console and "\\n" in console
    doc = run_json("norms", "-c", str(path))
    assert sorted(a["label"] for a in doc["anomalies"]) == ["\n", " "]  # JSON keeps the token itself


def test_zero_nan_inf_rows_are_always_flagged_and_json_has_no_nan(tmp_path):
    pos = drifting(300, 16, seed=3)
    pos[4] = 0
    pos[50, 2] = np.nan
    pos[51, 7] = -np.inf
    path = save(tmp_path, token_emb=np.ones((8, 16), dtype=np.float32), pos_emb=pos)
    doc = run_json("norms", "-c", str(path), "--threshold", "1000")
    flagged = {a["index"]: a for a in doc["anomalies"]}
    assert sorted(flagged) == [4, 50, 51]
    assert flagged[4]["norm"] == 0.0 and flagged[4]["reason"] == "zero row"
    assert flagged[50]["norm"] is None and flagged[50]["ratio_to_mean"] is None
    assert flagged[50]["reason"] == "NaN values" and flagged[50]["z"] is None
    assert flagged[51]["norm"] is None and flagged[51]["reason"] == "Inf values"
    assert [a["index"] for a in doc["anomalies"]][:2] == [50, 51]  # rows with no norm at all come first
    finite = numpy_norms(np.delete(pos, [50, 51], axis=0))
    assert doc["count"] == 298 and doc["mean"] == pytest.approx(finite.mean(), rel=1e-12)
    assert doc["min"] == 0.0
    assert "null" in run("norms", "-c", str(path)).stdout


def test_equal_norms_flag_any_difference(tmp_path):
    base = np.random.default_rng(4).standard_normal(8).astype(np.float32)
    signs = np.where(np.random.default_rng(5).random((40, 8)) < 0.5, -1, 1).astype(np.float32)
    pos = signs * base  # every row has exactly the same norm
    pos[12] *= np.float32(1.001)
    path = save(tmp_path, token_emb=np.ones((8, 8), dtype=np.float32), pos_emb=pos)
    doc = run_json("norms", "-c", str(path))
    assert doc["mad"] == 0.0
    assert [a["index"] for a in doc["anomalies"]] == [12]
    assert doc["anomalies"][0]["reason"] == "off the shared median" and doc["anomalies"][0]["z"] is None
    assert "MAD is 0" in doc["rule"] and "1e-6" in doc["rule"]


def test_norms_are_blockwise_and_upcast_before_squaring():
    table = np.random.default_rng(6).standard_normal((1000, 7)).astype(np.float32)
    table[3] = 1e20  # its squares overflow float32, not float64
    np.testing.assert_allclose(row_norms(table, block_rows=64), numpy_norms(table), rtol=1e-12)
    assert math.isfinite(row_norms(table)[3])


@pytest.mark.parametrize("rows", [0, 1, 80, 81, 82, 1000])
def test_the_stacked_one_thread_product_is_the_product(rows):
    from embscope.analysis.products import thin_product
    rng = np.random.default_rng(rows)
    left, right = rng.standard_normal((rows, 50)).astype(np.float32), rng.standard_normal((50, 64)).astype(np.float32)
    out = np.full((rows, 64), np.nan, dtype=np.float32)
    thin_product(left, right, out)  # pieces of 81 rows (2^18 / (50 x 64)) and the rest
    np.testing.assert_allclose(out, left.astype(np.float64) @ right.astype(np.float64), rtol=1e-4, atol=1e-4)
    if rows:  # pieces of a strided array would be copies, their products lost: refused
        with pytest.raises(ValueError, match="C-ordered"):
            thin_product(left, right, np.empty((rows, 128), dtype=np.float32)[:, ::2])


@pytest.mark.parametrize("size", [1, 2, 3, 10, 11, 1001, 40_000])
def test_the_median_is_numpy_s_to_the_bit(size):
    from embscope.analysis.median import median_of
    rng = np.random.default_rng(size)
    for values in (np.abs(rng.standard_normal(size)) * 1e3, rng.integers(0, 3, size).astype(np.float64),
                   np.abs(rng.standard_normal(size)).astype(np.float32), np.full(size, 1e308),
                   np.abs(rng.standard_normal(size)) * 1e-310):
        with np.errstate(over="ignore"):  # ties, float32, a sum of the middle two that overflows, subnormals
            expected = np.float64(np.median(values)).tobytes()
            assert np.float64(median_of(values)).tobytes() == expected
            assert np.float64(median_of(values.copy(), overwrite=True)).tobytes() == expected
    with_nan = rng.standard_normal(size)
    with_nan[size // 2] = np.nan
    assert math.isnan(median_of(with_nan)) and math.isnan(median_of(np.zeros(0)))


def test_near_duplicates_are_found(tmp_path):
    rng = np.random.default_rng(7)
    tok = rng.standard_normal((400, 16)).astype(np.float32)
    tok[200] = tok[10]  # identical
    tok[77] = tok[5] + 1e-4 * rng.standard_normal(16).astype(np.float32)  # cosine just under 1
    tok[4] = tok[3] + 0.05 * rng.standard_normal(16).astype(np.float32)  # close, not a duplicate
    tok[300] = 2 * tok[301]  # same direction, other length
    path = save(tmp_path, token_emb=tok)
    doc = run_json("norms", "-c", str(path))
    unit = tok.astype(np.float64) / numpy_norms(tok)[:, None]
    sims = unit @ unit.T
    expected = [(int(a), int(b)) for a, b in zip(*np.nonzero(np.triu(sims > 0.9999, 1)))]
    assert expected == [(5, 77), (10, 200), (300, 301)]
    assert [(d["a"], d["b"]) for d in doc["duplicates"]] == expected
    assert [d["identical"] for d in doc["duplicates"]] == [False, True, False]
    assert [d["cosine"] for d in doc["duplicates"]] == pytest.approx([sims[a, b] for a, b in expected], abs=1e-12)
    assert doc["duplicates_found"] == 3


@pytest.mark.parametrize("seed", [0, 1])
def test_duplicate_search_equals_brute_force_on_crowded_rows(seed):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((120, 24))
    table = np.repeat(centres, 3, axis=0) + 0.01 * rng.random((360, 1)) * rng.standard_normal((360, 24))
    table = table.astype(np.float32)
    norms = numpy_norms(table)
    unit = table.astype(np.float64) / norms[:, None]
    expected = {(int(a), int(b)) for a, b in zip(*np.nonzero(np.triu(unit @ unit.T > 0.9999, 1)))}
    found = find_duplicates(table, norms)
    assert 50 < len(expected) < 360
    assert found.complete and found.total == len(expected)
    assert {(d.a, d.b) for d in found.pairs} == expected


def test_identical_rows_are_counted_by_hashing_without_checking_their_pairs():
    table = np.ones((1500, 4), dtype=np.float32)
    table[700] = [1, 2, 3, 4]  # the one row unlike the others
    found = find_duplicates(table, row_norms(table), max_checks=0)  # no pair may be checked on the grid
    assert found.complete and found.total == 1499 * 1498 // 2
    assert len(found.pairs) == 1000 and all(d.identical for d in found.pairs)
    assert [(d.a, d.b) for d in found.pairs[:3]] == [(0, 1), (0, 2), (0, 3)]  # the lowest rows first


def test_the_listed_pairs_are_the_lowest_by_row_index_among_many():
    rng = np.random.default_rng(9)
    table = rng.standard_normal((3000, 8)).astype(np.float32)
    table[2000:2200] = table[0]  # a group of 201 identical rows: 20,100 pairs, most of them of high rows
    table[[5, 7]] = table[1]  # a small group whose pairs (1, 5), (1, 7), (5, 7) come before most of those
    table[2500:2600] = table[10]
    table[2700:2800] = 2 * table[10]  # near (cosine 1), not identical: 101 x 101 pairs across the two groups
    table[11] = 2 * table[10]
    unit = table.astype(np.float64) / numpy_norms(table)[:, None]
    expected = sorted((int(a), int(b)) for a, b in zip(*np.nonzero(np.triu(unit @ unit.T > 0.9999, 1))))
    assert len(expected) > 4 * 1000 and (1, 5) in expected[:1000]
    found = find_duplicates(table, row_norms(table))
    assert found.complete and found.total == len(expected)
    assert [(d.a, d.b) for d in found.pairs] == expected[:1000]


def test_duplicate_search_stays_bounded_when_every_row_is_nearly_the_same():
    rng = np.random.default_rng(2)
    table = (1 + 1e-4 * rng.standard_normal((1500, 4))).astype(np.float32)  # one crowded cell, no two rows equal
    found = find_duplicates(table, row_norms(table), max_checks=300)
    assert not found.complete and "cut short" in found.note and "300 candidate pairs" in found.note
    assert found.total == 300 and not any(d.identical for d in found.pairs)


def test_near_duplicates_of_identical_groups_count_every_pair():
    rng = np.random.default_rng(4)
    table = rng.standard_normal((500, 12)).astype(np.float32)
    table[[10, 20, 30]] = table[5]  # a group of four identical rows
    table[[40, 50]] = table[5] * 1.5  # near (cosine 1), not identical: a group of two
    unit = table.astype(np.float64) / numpy_norms(table)[:, None]
    expected = {(int(a), int(b)) for a, b in zip(*np.nonzero(np.triu(unit @ unit.T > 0.9999, 1)))}
    assert len(expected) == 15  # 6 inside the four, 1 inside the two, 8 across
    found = find_duplicates(table, row_norms(table))
    assert found.complete and found.total == 15 and {(d.a, d.b) for d in found.pairs} == expected
    assert sum(d.identical for d in found.pairs) == 7


def test_untied_output_head_is_a_table_of_its_own(tmp_path):
    rng = np.random.default_rng(8)
    tok = rng.standard_normal((300, 16)).astype(np.float32)
    head = rng.standard_normal((300, 16)).astype(np.float32)
    head[123] *= 0.01  # a head row that never moved
    path = tmp_path / "untied.safetensors"
    save_file({"transformer.wte.weight": tok, "lm_head.weight": head}, str(path))
    assert run_json("norms", "-c", str(path), "--table", "token")["anomalies"] == []
    out = run_json("norms", "-c", str(path), "--table", "output")
    assert out["table"] == "output" and out["name"] == "lm_head.weight"
    assert [a["index"] for a in out["anomalies"]] == [123]


def test_output_table_of_a_tied_model_is_an_error(tmp_path):
    path = save(tmp_path, token_emb=np.ones((8, 4), dtype=np.float32))
    result = run("norms", "-c", str(path), "--table", "output", code=1)
    assert "tied" in result.stderr
    result = run("norms", "-c", str(path), "--table", "position", code=1)
    assert "expected a learned position table, found none" in result.stderr


def test_the_command_shows_the_library_default_threshold():
    from embscope.analysis.norms import DEFAULT_THRESHOLD
    from embscope.commands.norms import DEFAULT_THRESHOLD as SHOWN
    assert SHOWN == DEFAULT_THRESHOLD  # the command keeps a copy so that --help does not import numpy's analysis


def test_duplicate_search_holds_the_unit_rows_once(monkeypatch):
    import tracemalloc

    from embscope.compute import rows as rows_module
    monkeypatch.setattr(rows_module, "READ_BLOCK_BYTES", 1 << 18)  # reads in small blocks: the unit rows dominate
    table = np.random.default_rng(3).standard_normal((20000, 256)).astype(np.float32)
    table[7] = table[19000] * 2  # one duplicate pair, far apart in row order
    norms = row_norms(table)
    tracemalloc.start()
    try:
        found = find_duplicates(table, norms, max_window=64)  # small windows: the unit rows dominate
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [(d.a, d.b) for d in found.pairs] == [(7, 19000)]  # the scaled copy: near in the projection
    assert peak < 1.5 * table.nbytes  # the search's bound (DUPLICATE_MAX_BYTES) counts one copy, not a sorted second


@pytest.mark.parametrize("dim", [6, 64])
@pytest.mark.parametrize("path", ["grid", "windows"])
def test_duplicate_search_equals_brute_force_on_either_path(monkeypatch, dim, path):
    # The grid serves rows spread over many cells; windows along one direction serve crowded cells. Which one
    # runs is forced here (GRID_MOST_CROWDED), so that both are held to brute force on the same tables.
    from embscope.analysis import duplicates
    monkeypatch.setattr(duplicates, "GRID_MOST_CROWDED", 10**9 if path == "grid" else -1)
    rng = np.random.default_rng(dim)
    table = rng.standard_normal((3000, dim)).astype(np.float32)
    table[2000:2040] = table[:40] * rng.uniform(0.5, 2, (40, 1)).astype(np.float32)  # same direction
    table[2040:2080] = table[40:80] + 3e-3 * rng.standard_normal((40, dim)).astype(np.float32)  # near it, or not
    table[2080:2090] = table[90]  # ten identical copies
    taken = []
    monkeypatch.setattr(duplicates, "window_candidates",
                        lambda *a, real=duplicates.window_candidates: taken.append("windows") or real(*a))
    monkeypatch.setattr(duplicates.Grid, "candidates",
                        lambda self, real=duplicates.Grid.candidates: taken.append("grid") or real(self))
    norms = numpy_norms(table)
    unit = table.astype(np.float64) / norms[:, None]
    expected = {(int(a), int(b)) for a, b in zip(*np.nonzero(np.triu(unit @ unit.T > 0.9999, 1)))}
    found = find_duplicates(table, norms)
    assert taken == [path]
    assert 40 + 55 <= len(expected) < 200
    assert found.complete and found.total == len(expected)
    assert {(d.a, d.b) for d in found.pairs} == expected


@pytest.mark.parametrize("dim", [12, 300])  # 300: directions by power iteration (past SPREAD_EIGH_MOST)
def test_duplicate_search_equals_brute_force_on_rows_of_extreme_norms(dim):
    # Rows far from norm 1 are projected in float64 (float32 would lose or overflow them); near copies of them,
    # and pairs near a cell's edge in many dimensions, are held to brute force.
    rng = np.random.default_rng(dim)
    table = rng.standard_normal((2000, dim)).astype(np.float32)
    table[1000:1060] = table[:60] + 4e-3 * rng.standard_normal((60, dim)).astype(np.float32) / np.sqrt(dim / 12)
    table[1060:1070] = table[60:70] * np.float32(3e-25)  # same direction, tiny rows
    table[1070:1080] = table[70:80] * np.float32(2e25)  # same direction, huge rows
    table[80:90] *= np.float32(1e-30)
    table[1080:1090] = table[80:90] * np.float32(1 + 1e-6)
    table[1090:1100] = table[90:100] * np.float32(1e-40)  # subnormal values
    norms = numpy_norms(table)
    unit = table.astype(np.float64) / norms[:, None]
    expected = {(int(a), int(b)) for a, b in zip(*np.nonzero(np.triu(unit @ unit.T > 0.9999, 1)))}
    found = find_duplicates(table, norms)
    assert len(expected) >= 90  # the near copies, the scaled and the subnormal ones
    assert found.complete and found.total == len(expected)
    assert {(d.a, d.b) for d in found.pairs} == expected


def test_duplicate_search_equals_brute_force_on_float64_rows_beyond_float32s_range():
    # A float64 table (a .npy file) may hold rows float32 cannot: below its smallest subnormal or past its
    # largest number. They are projected in float64 from the rows as stored, not from a float32 copy of zeros
    # and infinities (which lost every near pair among them, and made them all one key).
    rng = np.random.default_rng(11)
    table = rng.standard_normal((600, 16))
    table[300:350] = table[:50] * 10.0 ** rng.uniform(40, 140, (50, 1))  # same direction: 50 near pairs
    table[:50] *= 10.0 ** rng.uniform(-140, -60, (50, 1))  # tiny rows, whose copies are huge
    table[350:353] = table[300]  # identical to a huge row: 6 pairs among the four, 3 more with row 0
    norms = numpy_norms(table)
    unit = table / norms[:, None]
    expected = sorted((int(a), int(b)) for a, b in zip(*np.nonzero(np.triu(unit @ unit.T > 0.9999, 1))))
    assert len(expected) == 59
    found = find_duplicates(table, norms)
    assert found.complete and found.total == len(expected)
    assert [(d.a, d.b) for d in found.pairs] == expected
    assert sum(d.identical for d in found.pairs) == 6


def test_rows_of_one_key_are_told_apart_by_their_values(monkeypatch):
    # Every row gets the same key here, so the groups rest on the check of values against the key's first row
    # (row 0): its copies form its group, members ascending; every other row keeps a group of its own, and
    # the grid pairs the copies of another row (100) instead. The answer is the same either way.
    from embscope.analysis import duplicates
    real = duplicates.projections

    def one_key(*args):
        projected, keys = real(*args)
        return projected, np.zeros_like(keys)

    monkeypatch.setattr(duplicates, "projections", one_key)
    rng = np.random.default_rng(5)
    table = rng.standard_normal((400, 10)).astype(np.float32)
    table[[50, 7, 300]] = table[0]  # a group of four: 0, 7, 50, 300
    table[[399, 200]] = table[100]
    table[250] = table[0] * 2  # near the first group, not identical
    unit = table.astype(np.float64) / numpy_norms(table)[:, None]
    expected = {(int(a), int(b)) for a, b in zip(*np.nonzero(np.triu(unit @ unit.T > 0.9999, 1)))}
    assert len(expected) == 6 + 3 + 4
    found = find_duplicates(table, numpy_norms(table))
    assert found.complete and found.total == 13 and {(d.a, d.b) for d in found.pairs} == expected
    assert {(d.a, d.b) for d in found.pairs if d.identical} == {(0, 7), (0, 50), (0, 300), (7, 50), (7, 300),
                                                                (50, 300), (100, 200), (100, 399), (200, 399)}
    groups = duplicates.identical_groups(table, np.arange(400), np.zeros(400, dtype=np.uint32))
    assert groups.rows(0).tolist() == [0, 7, 50, 300] and len(groups.sizes) == 400 - 3


@pytest.mark.parametrize("valid_rows", ["all", "some"])
def test_identical_groups_are_numpy_s_groups_of_equal_rows(valid_rows):
    # groups of 2-6 copies scattered over the table (and rows left out, when some are not searched): each group's
    # rows, its representative (its lowest row), its size and its second row, against np.unique over the rows
    from embscope.analysis import duplicates
    rng = np.random.default_rng(11)
    table = rng.standard_normal((3000, 12)).astype(np.float32)
    for size in [2, 3, 4, 5, 6] * 8:
        chosen = rng.choice(3000, size, replace=False)
        table[chosen] = table[chosen[0]]
    rows = np.arange(3000) if valid_rows == "all" else np.sort(rng.choice(3000, 2500, replace=False))
    norms = numpy_norms(table)
    basis = duplicates.spread_subspace(table, rows, norms)
    _, keys = duplicates.projections(table, rows, norms, basis)
    groups = duplicates.identical_groups(table, rows, keys)
    _, inverse = np.unique(table[rows], axis=0, return_inverse=True)
    expected = sorted(rows[inverse == g].tolist() for g in range(inverse.max() + 1))  # by lowest row
    assert groups.representatives.tolist() == [members[0] for members in expected]
    assert groups.sizes.tolist() == [len(members) for members in expected]
    assert [groups.rows(g).tolist() for g in range(len(expected))] == expected
    shared = np.flatnonzero(groups.sizes > 1)
    assert len(shared) > 30 and groups.seconds(shared).tolist() == [expected[g][1] for g in shared]


@pytest.mark.parametrize("rows", [1, 15, 16, 17, 255, 256, 257, 1000, 5000])
def test_the_grid_s_column_extremes_are_numpy_s(rows):
    from embscope.analysis.duplicates import column_extremes
    projected = np.random.default_rng(rows).standard_normal((rows, 5)).astype(np.float32)
    low, high = column_extremes(projected)
    assert np.array_equal(low, projected.min(axis=0)) and np.array_equal(high, projected.max(axis=0))


@pytest.mark.parametrize("rows", [1, 255, 256, 257, 3000])
@pytest.mark.parametrize("width", [16, 64])  # the grid's projections; the untrained verdict's sample scores
def test_columns_reduced_as_wide_rows_are_numpy_s(rows, width):
    from embscope.analysis.columns import column_reduced
    values = np.random.default_rng(rows + width).standard_normal((rows, width)).astype(np.float32)
    values[rows // 2, 3] = -np.inf
    values[rows - 1, 5] = np.nan  # numpy's max and min carry a NaN through: so do the wide rows
    for reduce, plain in ((np.maximum, values.max(axis=0)), (np.minimum, values.min(axis=0))):
        found = column_reduced(reduce, values)
        assert found.shape == (width,) and np.array_equal(found, plain, equal_nan=True)
        assert np.isnan(found[5]) and np.isnan(plain[5])


def test_a_table_mostly_of_zero_rows_judges_the_others_among_themselves(tmp_path):
    """A pruned vocabulary, written by safetensors: 240 of 400 rows zeroed, 160 trained (8 directions, norms spread
    by half either way). Measured over every row, the median and MAD were 0 ('every finite norm equals the
    median'), untrue, and all 400 rows were anomalies. The zero rows stay flagged; the rest are judged by the
    median and MAD of their own norms (numpy here), which flag none of them."""
    rng = np.random.default_rng(1)
    base = rng.normal(0, 1, (8, 32))
    table = (base[rng.integers(0, 8, 400)] + 0.5 * rng.normal(0, 1, (400, 32))) * rng.uniform(0.5, 1.5, (400, 1))
    table[:240] = 0
    table = table.astype(np.float32)
    path = tmp_path / "model.safetensors"
    save_file({"model.embed_tokens.weight": table}, str(path))
    norms = np.linalg.norm(table.astype(np.float64), axis=1)[240:]
    median = np.median(norms)
    z = (norms - median) / (1.4826 * np.median(np.abs(norms - median)))
    assert not (np.abs(z) > 6).any()  # the case at hand: no trained row stands out among its own
    doc = run_json("norms", "-c", path)
    assert doc["anomalies_found"] == 240
    assert doc["anomalies"] and all(a["index"] < 240 and a["reason"] == "zero row" for a in doc["anomalies"])
    assert "MAD is 0" not in doc["rule"]


def test_undertrained_measures_norm_z_among_the_rows_not_zero_of_a_mostly_zero_table(tmp_path):
    """The same pruned table: undertrained's norm signals measured z from a median and MAD of 0, so all 160 trained
    rows were 'norm-high' candidates; now only the zero rows are (norm-low), as norms flags them."""
    rng = np.random.default_rng(1)
    base = rng.normal(0, 1, (8, 32))
    table = (base[rng.integers(0, 8, 400)] + 0.5 * rng.normal(0, 1, (400, 32))) * rng.uniform(0.5, 1.5, (400, 1))
    table[:240] = 0
    path = tmp_path / "model.safetensors"
    save_file({"model.embed_tokens.weight": table.astype(np.float32)}, str(path))
    doc = run_json("undertrained", "-c", path)
    assert all(c["id"] < 240 for c in doc["candidates"]), [c for c in doc["candidates"] if c["id"] >= 240][:3]
    assert any("measured among the 160 rows not zero" in note for note in doc["tables"][0]["notes"])
