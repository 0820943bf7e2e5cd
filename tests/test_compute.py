"""embscope.compute against independent brute-force numpy (float64) on small tables."""

import importlib.util
import subprocess
import sys

import numpy as np
import pytest

from embscope import compute
from embscope.compute import (TopK, cosine_matrix, mean_random_cosine, mean_row, pair_cosines,
                              random_pair_cosines, resolve_device, topk_all, unit_rows)
from embscope.errors import EmbscopeError

HAS_TORCH = importlib.util.find_spec("torch") is not None


def _has_cuda():
    if not HAS_TORCH:
        return False
    import torch
    return torch.cuda.is_available()


# ---------------------------------------------------------------- reference and tables


def brute_topk(table, k, queries=None, exclude_self=True):
    """Independent reference: float64 cosines, full sort by (-score, id), pad with -1/NaN."""
    t = np.asarray(table, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        norms = np.sqrt((t * t).sum(axis=1))
    valid = np.isfinite(norms) & (norms > 0)
    queries = np.arange(len(t)) if queries is None else np.asarray(queries)
    ids = np.full((len(queries), k), -1, dtype=np.int64)
    scores = np.full((len(queries), k), np.nan)
    for line, q in enumerate(queries):
        if not valid[q]:
            continue
        found = []
        for j in range(len(t)):
            if valid[j] and not (exclude_self and j == q):
                found.append((-float(t[q] @ t[j] / (norms[q] * norms[j])), j))
        found.sort()
        for col, (neg, j) in enumerate(found[:k]):
            ids[line, col], scores[line, col] = j, min(1.0, -neg)
    return ids, scores


def dyadic_table(rows, seed, dim=16):
    """Rows whose unit vectors and dot products are exact in float32 (and bf16):
    1, 4 or 16 entries of +-1 (norm 1, 2, 4), times 1, 3 or 0.5. Many exact ties."""
    rng = np.random.default_rng(seed)
    table = np.zeros((rows, dim), dtype=np.float32)
    for r in range(rows):
        nonzero = rng.choice([1, 4, 16])
        cols = rng.choice(dim, size=nonzero, replace=False)
        table[r, cols] = rng.choice([-1.0, 1.0], size=nonzero) * rng.choice([1.0, 3.0, 0.5])
    return table


def with_bad_rows(table):
    table = table.copy()
    table[2] = 0.0
    table[5, 1] = np.nan
    table[8, 3] = np.inf
    return table


def assert_topk_close(got: TopK, ref_ids, ref_scores, gap=1e-5):
    """Scores match to fp32 accuracy; ids match exactly wherever the reference has no near-tie."""
    np.testing.assert_allclose(got.scores, ref_scores, atol=2e-6, equal_nan=True)
    assert np.array_equal(np.isnan(got.scores), got.ids == -1)
    edge = np.full((len(ref_scores), 1), -np.inf)
    padded = np.concatenate([-edge, np.nan_to_num(ref_scores, nan=-np.inf), edge], axis=1)
    with np.errstate(invalid="ignore"):
        gaps = np.nan_to_num(np.abs(np.diff(padded, axis=1)), nan=np.inf)
    clear = (gaps[:, :-1] > gap) & (gaps[:, 1:] > gap)  # apart from both neighbours in rank
    assert np.array_equal(got.ids[clear], ref_ids[clear])


# ---------------------------------------------------------------- unit rows


def test_unit_rows_marks_bad_rows_and_reads_a_memmap(tmp_path):
    table = with_bad_rows(np.random.default_rng(0).standard_normal((40, 8)).astype(np.float32))
    path = tmp_path / "table.npy"
    np.save(path, table)
    unit, norms, valid = unit_rows(np.load(path, mmap_mode="r"))
    assert unit.dtype == np.float32 and norms.dtype == np.float64
    assert list(np.flatnonzero(~valid)) == [2, 5, 8]
    assert not np.isnan(unit).any()
    assert (unit[~valid] == 0).all()
    good = valid.nonzero()[0]
    expected = np.linalg.norm(table[good].astype(np.float64), axis=1)
    np.testing.assert_allclose(norms[good], expected, rtol=1e-12)
    np.testing.assert_allclose(unit[good], table[good] / expected[:, None], rtol=1e-6)


def test_unit_rows_rejects_a_vector():
    with pytest.raises(EmbscopeError, match=r"expected a 2-D table \(rows, dim\); found shape \(5,\)"):
        unit_rows(np.ones(5, dtype=np.float32))


# ---------------------------------------------------------------- top-k


@pytest.mark.parametrize("rows,k", [(300, 5), (2100, 7), (60, 20)])
def test_topk_breaks_exact_ties_by_lower_id(rows, k):
    table = with_bad_rows(dyadic_table(rows, seed=rows))
    got = topk_all(table, k, block_rows=97)
    ref_ids, ref_scores = brute_topk(table, k)
    assert np.array_equal(got.ids, ref_ids)
    np.testing.assert_array_equal(got.scores, ref_scores.astype(np.float32))
    assert np.array_equal(got.query_ids, np.arange(rows))


def test_topk_random_table_matches_brute_force_with_blocks_and_progress():
    table = with_bad_rows(np.random.default_rng(1).standard_normal((700, 24)).astype(np.float32))
    calls = []
    got = topk_all(table, 6, block_rows=64, progress=lambda done, total: calls.append((done, total)))
    assert_topk_close(got, *brute_topk(table, 6))
    assert len(calls) == int(np.ceil(697 / 64))
    assert calls[-1] == (700, 700)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


def test_topk_query_subset_keeps_order_and_marks_invalid_queries():
    table = with_bad_rows(dyadic_table(400, seed=3))
    queries = np.array([17, 5, 399, 0, 17, 2])
    got = topk_all(table, 4, queries=queries, block_rows=4)
    ref_ids, ref_scores = brute_topk(table, 4, queries)
    assert np.array_equal(got.ids, ref_ids)
    np.testing.assert_array_equal(got.scores, ref_scores.astype(np.float32))
    assert np.array_equal(got.query_ids, queries)
    assert (got.ids[[1, 5]] == -1).all() and np.isnan(got.scores[[1, 5]]).all()


def test_topk_without_exclude_self_finds_the_query_itself_first():
    table = np.random.default_rng(4).standard_normal((200, 16)).astype(np.float32)
    got = topk_all(table, 3, exclude_self=False)
    assert np.array_equal(got.ids[:, 0], np.arange(200))
    assert_topk_close(got, *brute_topk(table, 3, exclude_self=False))


def test_topk_pads_when_k_exceeds_the_valid_rows():
    table = with_bad_rows(np.random.default_rng(5).standard_normal((12, 4)).astype(np.float32))
    got = topk_all(table, 15)
    ref_ids, ref_scores = brute_topk(table, 15)
    assert_topk_close(got, ref_ids, ref_scores)
    assert (got.ids[0, :8] >= 0).all() and (got.ids[0, 8:] == -1).all()  # 9 valid rows less itself
    assert np.isnan(got.scores[0, 8:]).all()
    full = topk_all(table, 15, exclude_self=False)
    assert (full.ids[0, :9] >= 0).all() and (full.ids[0, 9:] == -1).all()


def test_topk_of_a_single_valid_row_is_all_padding():
    table = np.zeros((3, 4), dtype=np.float32)
    table[1, 0] = 2.0
    got = topk_all(table, 2)
    assert (got.ids == -1).all() and np.isnan(got.scores).all()


def test_topk_never_returns_the_query_for_an_antipodal_neighbour():
    # Self is excluded with -inf; clipping must not turn it into a -1 that ties a real -1.
    table = np.array([[1.0, 0.0], [-1.0, 0.0]], dtype=np.float32)
    got = topk_all(table, 1)
    assert got.ids.tolist() == [[1], [0]]
    assert got.scores.tolist() == [[-1.0], [-1.0]]


@pytest.mark.parametrize("kwargs,message", [
    ({"k": 0}, "k must be a positive integer; got 0"),
    ({"k": 2, "device": "tpu"}, "device must be one of auto, cpu, cuda, mps; got 'tpu'"),
    ({"k": 2, "precision": "int8"}, "precision must be one of fp32, tf32, bf16, fp16, auto; got 'int8'"),
    ({"k": 2, "device": "cpu", "precision": "fp16"},
     "precision fp16 needs a GPU (cuda or mps); use fp32 or bf16 on cpu"),
    ({"k": 2, "queries": [3, 10]}, "query row ids must lie in 0..9; found 10"),
    ({"k": 2, "block_rows": 0}, "block_rows must be at least 1; got 0"),
])
def test_topk_rejects_bad_arguments_with_one_line(kwargs, message):
    table = np.ones((10, 3), dtype=np.float32)
    with pytest.raises(EmbscopeError) as err:
        topk_all(table, **kwargs)
    assert str(err.value) == message


@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")
@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16", "fp16"])
def test_topk_torch_code_path_on_cpu_matches_brute_force(precision):
    # The GPU code path, run on the CPU: dyadic rows are exact even in fp16.
    table = with_bad_rows(dyadic_table(500, seed=6))
    got = topk_all(table, 5, device="cpu", precision=precision, backend="torch", block_rows=128)
    ref_ids, ref_scores = brute_topk(table, 5)
    assert np.array_equal(got.ids, ref_ids)
    np.testing.assert_array_equal(got.scores, ref_scores.astype(np.float32))


@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")
@pytest.mark.parametrize("backend", [None, "torch"])  # numpy selection / all-torch (GPU) path
def test_topk_bf16_with_fp32_rerank_matches_brute_force(backend):
    # Dyadic unit rows are exact in bf16, so even the candidate pass has exact ties here:
    # more twins than candidates, which only the redo of rows tied at the cut gets right.
    table = with_bad_rows(dyadic_table(500, seed=7))
    got = topk_all(table, 5, device="cpu", precision="bf16", block_rows=100, backend=backend)
    ref_ids, ref_scores = brute_topk(table, 5)
    assert np.array_equal(got.ids, ref_ids)
    np.testing.assert_array_equal(got.scores, ref_scores.astype(np.float32))
    random_table = np.random.default_rng(8).standard_normal((600, 64)).astype(np.float32)
    got = topk_all(random_table, 5, device="cpu", precision="bf16", backend=backend)
    assert_topk_close(got, *brute_topk(random_table, 5))


@pytest.mark.skipif(not _has_cuda(), reason="no CUDA GPU")
@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16", "fp16"])
def test_topk_on_cuda_matches_brute_force(precision):
    table = with_bad_rows(np.random.default_rng(9).standard_normal((3000, 64)).astype(np.float32))
    got = topk_all(table, 8, device="cuda", precision=precision, block_rows=512)
    assert_topk_close(got, *brute_topk(table, 8))


# ---------------------------------------------------------------- devices


def test_auto_precision_is_fp32_on_the_cpu_and_passes_others_through():
    assert compute.resolve_precision("auto", "cpu") == "fp32"
    assert compute.resolve_precision("fp16", "cuda") == "fp16"
    assert compute.resolve_precision("auto", "mps") == "fp16"
    if _has_cuda():
        assert compute.resolve_precision("auto", "cuda") in ("bf16", "fp16")
    table = dyadic_table(300, seed=15)
    got = topk_all(table, 4, device="cpu", precision="auto")
    assert np.array_equal(got.ids, brute_topk(table, 4)[0])


def test_resolve_device_cpu_and_unknown():
    assert resolve_device("cpu") == "cpu"
    with pytest.raises(EmbscopeError, match="device must be one of auto, cpu, cuda, mps; got 'gpu'"):
        resolve_device("gpu")


def test_auto_device_does_not_import_torch_without_a_gpu():
    if compute._gpu_evidence():
        pytest.skip("this machine shows a GPU")
    code = ("import sys; from embscope.compute import resolve_device; "
            "print(resolve_device('auto'), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["cpu", "False"]


@pytest.mark.skipif(not HAS_TORCH or _has_cuda(), reason="needs torch and no CUDA GPU")
def test_asking_for_cuda_without_a_gpu_is_an_error():
    with pytest.raises(EmbscopeError) as err:
        resolve_device("cuda")
    assert str(err.value) == "device cuda was asked for, but torch sees no CUDA GPU on this machine"


# ---------------------------------------------------------------- cosines


def test_pair_cosines_match_numpy_and_give_nan_for_bad_rows():
    table = with_bad_rows(np.random.default_rng(10).standard_normal((20, 6)).astype(np.float32))
    pairs = np.array([[0, 1], [3, 3], [4, 19], [2, 7], [7, 5], [8, 0], [1, 0]])
    got = pair_cosines(table, pairs)
    t = table.astype(np.float64)
    for (i, j), value in zip(pairs, got):
        if {i, j} & {2, 5, 8}:
            assert np.isnan(value)
        else:
            assert value == pytest.approx(t[i] @ t[j] / np.linalg.norm(t[i]) / np.linalg.norm(t[j]),
                                          abs=1e-12)
    assert got[1] == pytest.approx(1.0, abs=1e-15) and got[0] == got[6]


def test_pair_cosines_with_a_center():
    table = np.random.default_rng(11).standard_normal((10, 5)).astype(np.float32) + 3.0
    center = table.astype(np.float64).mean(axis=0)
    got = pair_cosines(table, [[1, 2], [4, 9]], center=center)
    c = table.astype(np.float64) - center
    expected = [c[1] @ c[2] / np.linalg.norm(c[1]) / np.linalg.norm(c[2]),
                c[4] @ c[9] / np.linalg.norm(c[4]) / np.linalg.norm(c[9])]
    np.testing.assert_allclose(got, expected, rtol=1e-10)


def test_pair_cosines_rejects_ids_outside_the_table():
    with pytest.raises(EmbscopeError) as err:
        pair_cosines(np.ones((4, 2), dtype=np.float32), [[0, 4]])
    assert str(err.value) == "pair row ids must lie in 0..3; found 4"


def test_cosine_matrix_matches_numpy_with_nan_for_bad_rows():
    table = with_bad_rows(np.random.default_rng(12).standard_normal((30, 8)).astype(np.float32))
    got = cosine_matrix(table)
    t = table.astype(np.float64)
    with np.errstate(invalid="ignore"):
        u = t / np.linalg.norm(t, axis=1, keepdims=True)
    expected = u @ u.T
    assert got.dtype == np.float32 and got.shape == (30, 30)
    assert np.isnan(got[[2, 5, 8]]).all() and np.isnan(got[:, [2, 5, 8]]).all()
    good = np.setdiff1d(np.arange(30), [2, 5, 8])
    np.testing.assert_allclose(got[np.ix_(good, good)], expected[np.ix_(good, good)], atol=1e-6)
    assert (np.diag(got)[good] == 1.0).all()
    sub = cosine_matrix(table, rows=[9, 0, 9])
    np.testing.assert_allclose(sub, got[np.ix_([9, 0, 9], [9, 0, 9])], atol=1e-6)


def test_mean_random_cosine_equals_the_double_loop():
    table = with_bad_rows(np.random.default_rng(13).standard_normal((30, 5)).astype(np.float32) + 0.4)
    t = table.astype(np.float64)
    good = [i for i in range(30) if np.isfinite(t[i]).all() and np.any(t[i])]
    total, count = 0.0, 0
    for i in good:
        for j in good:
            if i != j:
                total += t[i] @ t[j] / (np.linalg.norm(t[i]) * np.linalg.norm(t[j]))
                count += 1
    assert mean_random_cosine(table) == pytest.approx(total / count, abs=1e-12)
    assert np.isnan(mean_random_cosine(np.zeros((3, 2), dtype=np.float32)))


def test_random_pair_cosines_are_reproducible_distinct_valid_pairs():
    table = with_bad_rows(np.random.default_rng(14).standard_normal((25, 6)).astype(np.float32))
    got = random_pair_cosines(table, n_pairs=2000, seed=3)
    assert got.shape == (2000,) and not np.isnan(got).any()
    assert np.array_equal(got, random_pair_cosines(table, n_pairs=2000, seed=3))
    assert not np.array_equal(got, random_pair_cosines(table, n_pairs=2000, seed=4))
    full = cosine_matrix(table).astype(np.float64)
    off_diagonal = full[~np.eye(25, dtype=bool)]
    off_diagonal = off_diagonal[~np.isnan(off_diagonal)]
    # Every sample is some distinct valid pair's cosine (never a row with itself).
    assert (np.abs(got[:, None] - off_diagonal[None, :]).min(axis=1) < 1e-6).all()
    assert got.max() < 0.999
    # 2000 samples of 22*21 ordered pairs: the sample mean sits near the exact mean.
    assert got.mean() == pytest.approx(mean_random_cosine(table), abs=0.03)
    assert random_pair_cosines(table[:3] * 0, n_pairs=5).shape == (0,)


def test_center_is_the_same_as_subtracting_it_from_a_copy():
    rng = np.random.default_rng(11)
    table = (rng.standard_normal((300, 6)) + 2.0).astype(np.float32)
    table[7] = np.nan
    finite = np.isfinite(table).all(axis=1)
    center = mean_row(table)
    np.testing.assert_allclose(center, table[finite].astype(np.float64).mean(axis=0), rtol=1e-12)
    copy = table.astype(np.float64) - center
    assert mean_random_cosine(table, center=center) == pytest.approx(mean_random_cosine(copy), abs=1e-12)
    np.testing.assert_allclose(random_pair_cosines(table, 500, seed=2, center=center),
                               random_pair_cosines(copy, 500, seed=2), atol=1e-12)
