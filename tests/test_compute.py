"""embscope.compute against independent brute-force numpy (float64) on small tables."""

import importlib.util
import subprocess
import sys

import numpy as np
import pytest

from embscope import compute
from embscope.compute import (
    TopK,
    cosine_blocks,
    cosines_to,
    mean_row,
    pair_cosines,
    random_pairs,
    resolve_device,
    row_blocks,
    topk_rows,
    topk_vectors,
    unit_rows,
)
from embscope.compute.devices import gpu_evidence
from embscope.compute.numpy_engine import NumpyEngine
from embscope.compute.rows import TableChecksum, valid_unit_rows
from embscope.compute.torch_engine import TorchEngine
from embscope.core.errors import EmbscopeError

HAS_TORCH = importlib.util.find_spec("torch") is not None


def _has_cuda():
    if not HAS_TORCH:
        return False
    import torch
    return torch.cuda.is_available()


# ---------------------------------------------------------------- reference and tables


def brute_force_vectors(table, vectors, k, exclude=None):
    """Independent reference: float64 cosines of every row with each vector, sorted by (-score, id),
    invalid rows and excluded ids left out, padded with -1 / NaN; scores clipped at 1 after sorting."""
    t = np.asarray(table, dtype=np.float64)
    v = np.asarray(vectors, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        norms = np.sqrt((t * t).sum(axis=1))
        vnorms = np.sqrt((v * v).sum(axis=1))
        sims = (np.where(np.isfinite(t), t, 0) @ np.where(np.isfinite(v), v, 0).T).T / np.outer(vnorms, norms)
    allowed = np.broadcast_to(np.isfinite(norms) & (norms > 0), sims.shape).copy()
    allowed &= (np.isfinite(vnorms) & (vnorms > 0))[:, None]
    for line, ids in enumerate(exclude or ()):
        allowed[line, list(ids)] = False
    key = np.where(allowed, -sims, np.inf)
    order = np.argsort(key, axis=1, kind="stable")[:, :k]  # stable: equal scores keep the lower id first
    keep = np.take_along_axis(allowed, order, axis=1)
    ids = np.where(keep, order, -1)
    scores = np.where(keep, np.minimum(1.0, np.take_along_axis(sims, order, axis=1)), np.nan)
    return ids, scores


def brute_topk(table, k, queries=None, exclude_self=True):
    """The reference for rows: each query row as a vector, leaving itself out when exclude_self."""
    queries = np.arange(len(table)) if queries is None else np.asarray(queries)
    exclude = [[q] for q in queries] if exclude_self else None
    return brute_force_vectors(table, np.asarray(table, dtype=np.float64)[queries], min(k, len(table)), exclude)


def dyadic_table(rows, seed, dim=16):
    """Rows whose unit vectors and dot products are exact in float32 (and bf16):
    1, 4 or 16 entries of +-1 (norm 1, 2, 4), times 1, 3 or 0.5. Many exact ties."""
    rng = np.random.default_rng(seed)
    nonzero = rng.choice([1, 4, 16], size=rows)
    chosen = np.argsort(rng.random((rows, dim)), axis=1) < nonzero[:, None]
    values = rng.choice([-1.0, 1.0], size=(rows, dim)) * rng.choice([1.0, 3.0, 0.5], size=(rows, 1))
    return np.where(chosen, values, 0.0).astype(np.float32)


def with_bad_rows(table):
    table = table.copy()
    table[2] = 0.0
    table[5, 1] = np.nan
    table[8, 3] = np.inf
    return table


def assert_topk_close(got: TopK, ref_ids, ref_scores, gap=1e-5):
    """Scores match to fp32 accuracy; ids match exactly wherever the reference has no near-tie.
    A reference one column wider than the result also tells whether the last kept one was tied."""
    k = got.ids.shape[1]
    np.testing.assert_allclose(got.scores, ref_scores[:, :k], atol=2e-6, equal_nan=True)
    assert np.array_equal(np.isnan(got.scores), got.ids == -1)
    edge = np.full((len(ref_scores), 1), -np.inf)
    padded = np.concatenate([-edge, np.nan_to_num(ref_scores, nan=-np.inf), edge], axis=1)
    with np.errstate(invalid="ignore"):
        gaps = np.nan_to_num(np.abs(np.diff(padded, axis=1)), nan=np.inf)
    clear = ((gaps[:, :-1] > gap) & (gaps[:, 1:] > gap))[:, :k]  # apart from both neighbours in rank
    assert np.array_equal(got.ids[clear], ref_ids[:, :k][clear])


def assert_topk_exact(got: TopK, ref_ids, ref_scores):
    assert np.array_equal(got.ids, ref_ids)
    np.testing.assert_array_equal(got.scores, ref_scores.astype(np.float32))


# ---------------------------------------------------------------- rows


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
    some, _, some_valid = unit_rows(table, rows=[9, 2, 9])
    np.testing.assert_array_equal(some, unit[[9, 2, 9]])
    assert some_valid.tolist() == [True, False, True]


@pytest.mark.parametrize("bad", [[], [0], [70_000, 70_001, 131_000], [139_999]])
def test_valid_unit_rows_packs_the_valid_rows_to_the_front(bad):
    # past 2^16 rows, so that the packing runs in more than one piece, from wherever the first bad row is
    table = np.random.default_rng(1).standard_normal((140_000, 3)).astype(np.float32)
    table[bad] = np.nan
    unit, valid = valid_unit_rows(table)
    keep = np.ones(table.shape[0], dtype=bool)
    keep[bad] = False
    assert valid.tolist() == keep.tolist()
    by_hand = table[keep] / np.linalg.norm(table[keep].astype(np.float64), axis=1, keepdims=True)
    np.testing.assert_array_equal(unit, by_hand.astype(np.float32))


def test_unit_rows_rejects_a_vector():
    with pytest.raises(EmbscopeError, match=r"expected a 2-D table \(rows, dim\); found shape \(5,\)"):
        unit_rows(np.ones(5, dtype=np.float32))


def test_row_blocks_read_every_row_once_in_float64_less_the_center():
    table = np.random.default_rng(1).standard_normal((1000, 3)).astype(np.float32)
    center = np.array([1.0, 2.0, 3.0])
    blocks = [(start, block.copy()) for start, block in row_blocks(table, center=center, block_rows=300)]
    assert [start for start, _ in blocks] == [0, 300, 600, 900]
    assert all(block.dtype == np.float64 for _, block in blocks)
    np.testing.assert_array_equal(np.concatenate([b for _, b in blocks]), table.astype(np.float64) - center)
    with pytest.raises(EmbscopeError, match=r"^block_rows must be at least 1; got 0$"):
        list(row_blocks(table, block_rows=0))


# ---------------------------------------------------------------- top-k of rows


@pytest.mark.parametrize("rows,k", [(300, 5), (2100, 7), (60, 20)])
def test_topk_breaks_exact_ties_by_lower_id(rows, k):
    table = with_bad_rows(dyadic_table(rows, seed=rows))
    got = topk_rows(table, k, block_rows=97)
    assert_topk_exact(got, *brute_topk(table, k))
    assert np.array_equal(got.query_ids, np.arange(rows))


def test_topk_random_table_matches_brute_force_with_blocks_and_progress():
    table = with_bad_rows(np.random.default_rng(1).standard_normal((700, 24)).astype(np.float32))
    calls = []
    got = topk_rows(table, 6, block_rows=64, progress=lambda done, total: calls.append((done, total)))
    assert_topk_close(got, *brute_topk(table, 6))
    assert len(calls) == int(np.ceil(697 / 64))
    assert calls[-1] == (700, 700)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


def test_topk_streamed_and_blocked_searches_agree():
    # Without block_rows a table this small is streamed once (no normalised copy); with it, blocked.
    table = with_bad_rows(dyadic_table(400, seed=3))
    calls = []
    streamed = topk_rows(table, 4, rows=[17, 5, 399], progress=lambda done, total: calls.append((done, total)))
    blocked = topk_rows(table, 4, rows=[17, 5, 399], block_rows=2)
    assert_topk_exact(streamed, blocked.ids, blocked.scores)
    assert calls == [(3, 3)]


@pytest.mark.parametrize("rows, pools", [(1024, False), (9000, True)])
def test_a_streamed_search_shares_its_work_only_past_the_shared_minimum(monkeypatch, rows, pools):
    # 1,024 x 128 (the sample's token table's size): one thread, no pool started; 9,000 x 128 is past
    # SHARED_MIN_VALUES. Dyadic rows: every score exact, so any order of the work gives the same bits
    import concurrent.futures

    from embscope.compute import devices
    started = []
    real = concurrent.futures.ThreadPoolExecutor
    monkeypatch.setattr(concurrent.futures, "ThreadPoolExecutor", lambda *a, **k: started.append(a) or real(*a, **k))
    monkeypatch.setattr(devices, "cpu_threads", lambda: 2)
    table = dyadic_table(rows, seed=9, dim=128)
    assert (rows * (128 + 3) >= devices.SHARED_MIN_VALUES) == pools
    got = topk_rows(table, 5, rows=[7, 0, rows - 1])
    assert bool(started) == pools
    assert_topk_exact(got, *brute_topk(table, 5, np.array([7, 0, rows - 1])))


def test_topk_query_subset_keeps_order_and_marks_invalid_queries():
    table = with_bad_rows(dyadic_table(400, seed=3))
    queries = np.array([17, 5, 399, 0, 17, 2])
    for block_rows in (4, None):
        got = topk_rows(table, 4, rows=queries, block_rows=block_rows)
        assert_topk_exact(got, *brute_topk(table, 4, queries))
        assert np.array_equal(got.query_ids, queries)
        assert (got.ids[[1, 5]] == -1).all() and np.isnan(got.scores[[1, 5]]).all()


def test_topk_without_exclude_self_finds_the_query_itself_first():
    table = np.random.default_rng(4).standard_normal((200, 16)).astype(np.float32)
    got = topk_rows(table, 3, exclude_self=False)
    assert np.array_equal(got.ids[:, 0], np.arange(200))
    assert_topk_close(got, *brute_topk(table, 3, exclude_self=False))


def test_topk_pads_when_k_exceeds_the_valid_rows():
    table = with_bad_rows(np.random.default_rng(5).standard_normal((12, 4)).astype(np.float32))
    got = topk_rows(table, 15)
    assert got.ids.shape == (12, 12)  # never wider than the table
    assert_topk_close(got, *brute_topk(table, 15))
    assert (got.ids[0, :8] >= 0).all() and (got.ids[0, 8:] == -1).all()  # 9 valid rows less itself
    assert np.isnan(got.scores[0, 8:]).all()
    full = topk_rows(table, 15, exclude_self=False)
    assert (full.ids[0, :9] >= 0).all() and (full.ids[0, 9:] == -1).all()


def test_a_huge_k_is_clamped_to_the_rows():
    table = with_bad_rows(np.random.default_rng(6).standard_normal((10, 4)).astype(np.float32))
    for engine in (None, NumpyEngine()):
        got = topk_rows(table, 10**12, block_rows=3, _engine=engine)
        assert got.ids.shape == got.scores.shape == (10, 10)
        assert_topk_close(got, *brute_topk(table, 10))
    got = topk_vectors(table, table[:2].astype(np.float64), 10**12)
    assert got.ids.shape == (2, 10) and (got.ids[:, :7] >= 0).all() and (got.ids[:, 7:] == -1).all()


def test_topk_of_a_single_valid_row_is_all_padding():
    table = np.zeros((3, 4), dtype=np.float32)
    table[1, 0] = 2.0
    for block_rows in (None, 1):
        got = topk_rows(table, 2, block_rows=block_rows)
        assert (got.ids == -1).all() and np.isnan(got.scores).all()


def test_topk_never_returns_the_query_for_an_antipodal_neighbour():
    # Self is excluded with -inf; clipping must not turn it into a -1 that ties a real -1.
    table = np.array([[1.0, 0.0], [-1.0, 0.0]], dtype=np.float32)
    for block_rows in (None, 1):
        got = topk_rows(table, 1, block_rows=block_rows)
        assert got.ids.tolist() == [[1], [0]]
        assert got.scores.tolist() == [[-1.0], [-1.0]]


@pytest.mark.parametrize("kwargs,message", [
    ({"k": 0}, "k must be a positive integer; got 0"),
    ({"k": 2.0}, "k must be a positive integer; got 2.0"),
    ({"k": 2, "device": "tpu"}, "device must be one of auto, cpu, cuda, mps; got 'tpu'"),
    ({"k": 2, "precision": "int8"}, "precision must be one of fp32, tf32, bf16, fp16, auto; got 'int8'"),
    ({"k": 2, "device": "cpu", "precision": "fp16"},
     "precision fp16 needs a GPU (cuda or mps); use fp32 or bf16 on cpu"),
    ({"k": 2, "rows": [3, 10]}, "query row ids must lie in 0..9; found 10"),
    ({"k": 2, "block_rows": 0}, "block_rows must be at least 1; got 0"),
    ({"k": 2, "precision": "bf16", "_engine": NumpyEngine()}, "the numpy engine does not run bf16 on cpu"),
])
def test_topk_rejects_bad_arguments_with_one_line(kwargs, message):
    table = np.ones((10, 3), dtype=np.float32)
    with pytest.raises(EmbscopeError) as err:
        topk_rows(table, **kwargs)
    assert str(err.value) == message


# ---------------------------------------------------------------- top-k of vectors


def test_topk_vectors_match_brute_force_and_leave_out_what_each_query_excludes():
    table = with_bad_rows(dyadic_table(300, seed=11))
    vectors = np.stack([table[10] + table[11], table[40], np.zeros(16), table[7] * 3]).astype(np.float64)
    exclude = [[10, 11], [40, 2], [], [7, 7, 299]]
    ref_ids, ref_scores = brute_force_vectors(table, vectors, 7, exclude)  # one more: ties at the cut
    for engine in (None, NumpyEngine()):  # streamed, and through the prepared table
        got = topk_vectors(table, vectors, 6, exclude=exclude, _engine=engine)
        assert_topk_close(got, ref_ids, ref_scores)
        assert got.query_ids.tolist() == [-1, -1, -1, -1]
        assert (got.ids[2] == -1).all()  # a zero vector has no direction, so no neighbours
        assert not {10, 11} & set(got.ids[0].tolist()) and 40 not in got.ids[1]


def test_topk_vectors_excluding_every_row_gives_padding():
    table = np.random.default_rng(12).standard_normal((5, 3)).astype(np.float32)
    got = topk_vectors(table, table[:1].astype(np.float64), 3, exclude=[[0, 1, 2, 3]])
    assert got.ids.tolist() == [[4, -1, -1]] and np.isnan(got.scores[0, 1:]).all()


@pytest.mark.parametrize("vectors,exclude,message", [
    (np.ones((2, 4)), None, "expected query vectors of shape (n, 3); found shape (2, 4)"),
    (np.ones(3), None, "expected query vectors of shape (n, 3); found shape (3,)"),
    (np.ones((2, 3)), [[1]], "expected one list of excluded rows per query vector (2); found 1"),
    (np.ones((1, 3)), [[5]], "excluded row ids must lie in 0..4; found 5"),
])
def test_topk_vectors_reject_bad_arguments_with_one_line(vectors, exclude, message):
    with pytest.raises(EmbscopeError) as err:
        topk_vectors(np.ones((5, 3), dtype=np.float32), vectors, 2, exclude=exclude)
    assert str(err.value) == message


# ---------------------------------------------------------------- the torch engine on the CPU


@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")
@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16", "fp16"])
def test_topk_torch_engine_on_cpu_matches_brute_force(precision):
    # The GPU code path, run on the CPU: dyadic rows are exact even in fp16.
    table = with_bad_rows(dyadic_table(500, seed=6))
    got = topk_rows(table, 5, device="cpu", precision=precision, block_rows=128, _engine=TorchEngine())
    assert_topk_exact(got, *brute_topk(table, 5))
    vectors = np.stack([table[20] + table[21], table[30]]).astype(np.float64)
    exclude = [[20, 21], [30]]
    got = topk_vectors(table, vectors, 5, exclude=exclude, device="cpu", precision=precision, _engine=TorchEngine())
    assert_topk_exact(got, *brute_force_vectors(table, vectors, 5, exclude))


@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")
@pytest.mark.parametrize("engine", [None, TorchEngine()])  # numpy selection / all-torch (GPU) path
def test_topk_bf16_with_fp32_rerank_matches_brute_force(engine):
    # Dyadic unit rows are exact in bf16, so even the candidate pass has exact ties here:
    # more twins than candidates, which only the redo of rows tied at the cut gets right.
    table = with_bad_rows(dyadic_table(500, seed=7))
    got = topk_rows(table, 5, device="cpu", precision="bf16", block_rows=100, _engine=engine)
    assert_topk_exact(got, *brute_topk(table, 5))
    random_table = np.random.default_rng(8).standard_normal((600, 64)).astype(np.float32)
    got = topk_rows(random_table, 5, device="cpu", precision="bf16", _engine=engine)
    assert_topk_close(got, *brute_topk(random_table, 5))


@pytest.mark.skipif(not _has_cuda(), reason="no CUDA GPU")
@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16", "fp16"])
def test_topk_on_cuda_matches_brute_force(precision):
    table = with_bad_rows(np.random.default_rng(9).standard_normal((3000, 64)).astype(np.float32))
    got = topk_rows(table, 8, device="cuda", precision=precision, block_rows=512)
    assert_topk_close(got, *brute_topk(table, 8))


# ---------------------------------------------------------------- devices


def test_auto_precision_is_fp32_on_the_cpu_and_passes_others_through(monkeypatch):
    monkeypatch.setattr(compute.devices, "native_bf16", lambda: False)  # bf16 emulated: fp32 (native: test_bf16_exact)
    assert compute.resolve_precision("auto", "cpu") == "fp32"
    assert compute.resolve_precision("fp16", "cuda") == "fp16"
    assert compute.resolve_precision("auto", "mps") == "fp16"
    if _has_cuda():
        assert compute.resolve_precision("auto", "cuda") in ("bf16", "fp16")
    table = dyadic_table(300, seed=15)
    got = topk_rows(table, 4, device="cpu", precision="auto")
    assert np.array_equal(got.ids, brute_topk(table, 4)[0])


def test_resolve_device_cpu_and_unknown():
    assert resolve_device("cpu") == "cpu"
    with pytest.raises(EmbscopeError, match="device must be one of auto, cpu, cuda, mps; got 'gpu'"):
        resolve_device("gpu")


def test_auto_device_does_not_import_torch_without_a_gpu():
    if gpu_evidence():
        pytest.skip("this machine shows a GPU")
    code = ("import sys; from embscope.compute import resolve_device, topk_rows; import numpy as np; "
            "topk_rows(np.ones((4, 2), np.float32), 2); print(resolve_device('auto'), 'torch' in sys.modules)")
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


def test_cosines_to_a_vector_in_float64():
    table = with_bad_rows(np.random.default_rng(16).standard_normal((12, 5)).astype(np.float32))
    vector = np.arange(1.0, 6.0)
    got = cosines_to(table, [0, 2, 11], vector)
    t = table.astype(np.float64)
    assert got[0] == pytest.approx(t[0] @ vector / np.linalg.norm(t[0]) / np.linalg.norm(vector), abs=1e-15)
    assert np.isnan(got[1])
    assert got[2] == pytest.approx(t[11] @ vector / np.linalg.norm(t[11]) / np.linalg.norm(vector), abs=1e-15)


def test_cosine_blocks_match_numpy_with_nan_for_bad_rows():
    table = with_bad_rows(np.random.default_rng(12).standard_normal((30, 8)).astype(np.float32))
    blocks = [(start, block.copy()) for start, block in cosine_blocks(table, block_rows=7)]
    assert [start for start, _ in blocks] == [0, 7, 14, 21, 28]
    got = np.concatenate([block for _, block in blocks])
    t = table.astype(np.float64)
    with np.errstate(invalid="ignore"):
        u = t / np.linalg.norm(t, axis=1, keepdims=True)
    expected = u @ u.T
    assert got.dtype == np.float32 and got.shape == (30, 30)
    assert np.isnan(got[[2, 5, 8]]).all() and np.isnan(got[:, [2, 5, 8]]).all()
    good = np.setdiff1d(np.arange(30), [2, 5, 8])
    np.testing.assert_allclose(got[np.ix_(good, good)], expected[np.ix_(good, good)], atol=1e-6)
    assert (np.diag(got)[good] == 1.0).all()
    sub = np.concatenate([b.copy() for _, b in cosine_blocks(table, rows=[9, 0, 9])])
    np.testing.assert_allclose(sub, got[np.ix_([9, 0, 9], [9, 0, 9])], atol=1e-6)


def brute_mean_random_cosine(table):
    """Mean cosine over every ordered pair of distinct valid rows, from the full float64 matrix."""
    t = np.asarray(table, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        norms = np.linalg.norm(t, axis=1)
    t = t[np.isfinite(norms) & (norms > 0)]
    unit = t / np.linalg.norm(t, axis=1, keepdims=True)
    sims = unit @ unit.T
    return (sims.sum() - np.trace(sims)) / (len(t) * (len(t) - 1))


def numpy_sample(table, n_pairs, seed, center=None):
    """The sampling rule written out again: pairs of distinct valid rows drawn with the seed, float64 cosines."""
    t = np.asarray(table, dtype=np.float64) - (0 if center is None else center)
    with np.errstate(invalid="ignore", over="ignore"):
        norms = np.linalg.norm(t, axis=1)
    valid_ids = np.flatnonzero(np.isfinite(norms) & (norms > 0))
    rng = np.random.default_rng(seed)
    first = rng.integers(0, valid_ids.size, size=n_pairs)
    second = rng.integers(0, valid_ids.size - 1, size=n_pairs)
    second += second >= first
    a, b = valid_ids[first], valid_ids[second]
    return np.einsum("ij,ij->i", t[a], t[b]) / (norms[a] * norms[b])


@pytest.mark.parametrize("bad_rows", [False, True])  # every row valid: kept in the pass; else drawn again
def test_random_pairs_give_the_exact_mean_and_reproducible_distinct_pairs(bad_rows):
    table = (np.random.default_rng(13).standard_normal((300, 5)) + 0.4).astype(np.float32)
    table = with_bad_rows(table) if bad_rows else table
    found = random_pairs(table, n_pairs=2000, seed=3)
    assert found.mean == pytest.approx(brute_mean_random_cosine(table), abs=1e-12)
    assert found.sample.shape == (2000,) and found.seed == 3
    np.testing.assert_allclose(found.sample, numpy_sample(table, 2000, 3), atol=1e-12)
    assert not np.array_equal(found.sample, random_pairs(table, n_pairs=2000, seed=4).sample)
    assert found.sample.max() < 0.999  # never a row with itself


def test_random_pairs_of_too_few_valid_rows():
    empty = random_pairs(np.zeros((3, 2), dtype=np.float32), n_pairs=5)
    assert np.isnan(empty.mean) and empty.sample.shape == (0,)
    one = np.zeros((3, 2), dtype=np.float32)
    one[1] = 1.0
    assert random_pairs(one, n_pairs=5).sample.shape == (0,)


def test_center_is_the_same_as_subtracting_it_from_a_copy():
    rng = np.random.default_rng(11)
    table = (rng.standard_normal((300, 6)) + 2.0).astype(np.float32)
    table[7] = np.nan
    finite = np.isfinite(table).all(axis=1)
    center = mean_row(table)
    np.testing.assert_allclose(center, table[finite].astype(np.float64).mean(axis=0), rtol=1e-12)
    copy = table.astype(np.float64) - center
    centered = random_pairs(table, 500, seed=2, center=center)
    assert centered.mean == pytest.approx(brute_mean_random_cosine(copy), abs=1e-12)
    np.testing.assert_allclose(centered.sample, numpy_sample(table, 500, 2, center), atol=1e-12)


def test_cosine_blocks_of_the_upper_triangle():
    table = with_bad_rows(np.random.default_rng(12).standard_normal((30, 8)).astype(np.float32))
    full = np.concatenate([block.copy() for _, block in cosine_blocks(table, block_rows=30)])
    for start, block in cosine_blocks(table, block_rows=7, upper=True):
        assert block.shape == (min(7, 30 - start), 30 - start)
        np.testing.assert_allclose(block, full[start:start + 7, start:], atol=1e-6)


# ---------------------------------------------------------------- the selection and the streamed search


def plain_top(scores, count):
    """Plain numpy: scores clipped to [-1, 1] as cosines are (-inf kept: a column left out), then every column
    ranked by (score desc, column asc) with a stable sort."""
    clipped = np.where(np.isfinite(scores), np.clip(scores, -1.0, 1.0), scores)
    order = np.argsort(-clipped, axis=1, kind="stable")[:, :count]
    return order, np.take_along_axis(clipped, order, axis=1)


@pytest.mark.parametrize("width", [7, 1000, 4093, 10007])  # tiny; group widths that leave columns past the groups
@pytest.mark.parametrize("count", [1, 10, 100, "width-1"])
def test_selection_matches_a_full_sort_on_ties_and_left_out_columns(width, count):
    from embscope.compute.select import select_top
    count = width - 1 if count == "width-1" else min(count, width - 1)
    rng = np.random.default_rng(width + count)
    scores = rng.uniform(-1.01, 1.01, (131, width)).astype(np.float32)  # 131: no whole number of row chunks
    scores[:40] = np.round(scores[:40] * 8) / 8  # exact ties everywhere, at the cut too
    scores[40:60][rng.random((20, width)) < 0.4] = -np.inf  # left out
    scores[60] = -np.inf  # nothing left to choose
    scores[61, 1:] = -np.inf
    ref_ids, ref_scores = plain_top(scores, count)
    for threads in (1, 2, 3):
        ids, found = select_top(scores.copy(), count, threads)
        np.testing.assert_array_equal(found, ref_scores)
        left = ref_scores == -np.inf  # which left-out column fills a row that has too few is no answer
        assert np.array_equal(np.where(left, -1, ids), np.where(left, -1, ref_ids))


def test_streamed_search_matches_the_blocked_one_in_any_block_order():
    # Dyadic rows: every product and sum is exact in float32, so any matmul gives the same bits.
    from embscope.compute.rows import unit_blocks
    from embscope.compute.streamed import StreamedTopK
    table = with_bad_rows(dyadic_table(2100, seed=11))
    queries = np.array([0, 2, 17, 17, 2099, 5, 640])
    for k in (1, 7, 2100):
        blocked = topk_rows(table, k, rows=queries, block_rows=3)
        unit, _, valid = unit_rows(table)
        query_valid = valid[queries]
        search = StreamedTopK(unit[queries[query_valid]], min(k, 2100),
                              (np.arange(query_valid.sum()), queries[query_valid]), threads=2)
        starts = list(range(0, 2100, 333))
        for start in starts[::-1]:  # any order, odd sizes
            search.add(start, unit[start:start + 333], valid[start:start + 333])
        ids, scores = search.result()
        assert np.array_equal(ids, blocked.ids[query_valid])
        np.testing.assert_array_equal(np.where(ids < 0, np.nan, scores), blocked.scores[query_valid])
        streamed = topk_rows(table, k, rows=queries)  # few queries: the table goes past once
        assert_topk_exact(streamed, blocked.ids, blocked.scores)
    blocks = [(start, unit.copy(), ok.copy()) for start, unit, ok in unit_blocks(table, 333, threads=2)]
    whole, _, whole_valid = unit_rows(table)
    assert [start for start, _, _ in blocks] == starts
    np.testing.assert_array_equal(np.concatenate([u for _, u, _ in blocks]), whole)
    assert np.array_equal(np.concatenate([v for _, _, v in blocks]), whole_valid)


def test_unit_blocks_normalise_a_memmap_as_unit_rows_do(tmp_path):
    from embscope.compute.rows import unit_blocks
    table = with_bad_rows(np.random.default_rng(12).standard_normal((1000, 33)).astype(np.float32))
    np.save(tmp_path / "t.npy", table)
    mapped = np.load(tmp_path / "t.npy", mmap_mode="r")
    whole, _, valid = unit_rows(table)
    for threads in (1, 2):
        blocks = [(unit.copy(), ok.copy()) for _, unit, ok in unit_blocks(mapped, 97, threads)]
        np.testing.assert_array_equal(np.concatenate([u for u, _ in blocks]), whole)  # bit for bit
        assert np.array_equal(np.concatenate([v for _, v in blocks]), valid)


@pytest.mark.parametrize("k", [1, 7, 696, 800])  # 696: every other valid row; 800: more than the table has
def test_every_row_from_half_the_cosine_matrix_matches_brute_force(monkeypatch, k):
    # Small score blocks make square tiles of 97 x 97 (and short ones at the edges); dyadic rows make every
    # cosine exact, so the symmetric search must agree bit for bit, ties to the lower id included.
    from embscope.compute import engine, numpy_engine
    monkeypatch.setattr(engine, "cpu_block_bytes", lambda n, d: 97 * 97 * 4)
    monkeypatch.setattr(numpy_engine, "cpu_block_bytes", lambda n, d: 97 * 97 * 4)
    calls = []
    monkeypatch.setattr(numpy_engine.NumpyEngine, "search",
                        lambda *args: calls.append(args))  # the blocked search must not be the one that ran
    table = with_bad_rows(dyadic_table(700, seed=13))
    table[600] = table[4] * 3  # twins: exact ties at the top
    got = topk_rows(table, k, device="cpu")
    assert not calls
    assert_topk_exact(got, *brute_topk(table, k))


def test_every_row_of_a_random_table_from_half_the_cosine_matrix(monkeypatch):
    from embscope.compute import engine, numpy_engine
    monkeypatch.setattr(engine, "cpu_block_bytes", lambda n, d: 131 * 131 * 4)
    monkeypatch.setattr(numpy_engine, "cpu_block_bytes", lambda n, d: 131 * 131 * 4)
    table = with_bad_rows(np.random.default_rng(14).standard_normal((900, 24)).astype(np.float32))
    got = topk_rows(table, 6, device="cpu")
    assert_topk_close(got, *brute_topk(table, 6))
    # each cosine is worked out once, for both of its rows: j among i's neighbours has i's score in j's list
    for row in range(0, 900, 37):
        for other, score in zip(got.ids[row], got.scores[row]):
            if other >= 0 and row in got.ids[other]:
                assert got.scores[other][list(got.ids[other]).index(row)] == score


def test_the_baseline_pass_feeds_every_byte_of_the_table_once(tmp_path):
    import zlib
    table = with_bad_rows(np.random.default_rng(15).standard_normal((5000, 40)).astype(np.float32))
    np.save(tmp_path / "t.npy", table)
    for array in (np.load(tmp_path / "t.npy", mmap_mode="r"), np.asfortranarray(table)):
        crc = TableChecksum()
        found = random_pairs(array, n_pairs=300, seed=1, checksum=crc)
        assert crc.value == zlib.crc32(table.tobytes())  # in row order, as a cache would hash the file's table
        plain = random_pairs(table, n_pairs=300, seed=1)
        assert found.mean == plain.mean and np.array_equal(found.sample, plain.sample)


def test_streamed_search_takes_only_the_scores_above_each_kth_best(monkeypatch):
    # Past the first block a query's candidates are its scores at or above its k-th best so far; a block with many
    # of them (most rows one point: all ties at 1) is selected whole instead. Both paths against the brute force.
    from embscope.compute import numpy_engine, streamed
    paths = {"above": 0, "whole": 0}
    original = streamed.StreamedTopK.above_kth

    def counted(self, start, scores, kth):
        found = original(self, start, scores, kth)
        paths["whole" if len(found[0]) == scores.shape[0] * min(self.k, scores.shape[1]) else "above"] += 1
        return found

    monkeypatch.setattr(streamed.StreamedTopK, "above_kth", counted)
    # blocks of 1,000 rows for 300 queries (at the real 32 MiB, 1,500 queries read 5,592 rows a block: a table of
    # 6,000 rows, its brute force 25 times this one's work for the same two blocks)
    monkeypatch.setattr(numpy_engine, "STREAM_BLOCK_BYTES", 4 * 300 * 1000)
    rng = np.random.default_rng(7)
    rows = dyadic_table(1200, seed=7)  # exact in float32: the brute force's scores are the search's to the bit
    one_point = rows.copy()
    one_point[200:] = one_point[3]
    one_point[200:210] *= -1
    queries = np.concatenate([[3, 205, 1199, 10], rng.choice(1200, 296, replace=False)])
    for table in (rows, one_point):
        ref_ids, ref_scores = brute_topk(table, 9, queries)  # one stable sort: k = 1's answer is its first column
        for k in (1, 9):
            got = topk_rows(table, k, rows=queries)  # 300 queries: the table streamed, read in two blocks
            assert_topk_exact(got, ref_ids[:, :k], ref_scores[:, :k])
    assert paths["above"] and paths["whole"]
