"""The bf16 pass made exact (compute.bf16_exact): its error bound, and top-k equal to numpy's fp32 top-k id for
id (a swap of two scores within 1e-6 aside) on random and on clustered tables, through the CPU bf16 engine and
the torch (GPU) engine run on the CPU, and on CUDA where there is one."""

import importlib.util
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from embscope import compute
from embscope.cli import app
from embscope.compute import bf16_bound, bf16_exact, devices, topk_rows, topk_vectors
from embscope.compute.bf16_engine import CpuBf16Engine
from embscope.compute.torch_engine import TorchEngine

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")
TIE = 1e-6


def has_cuda():
    if not HAS_TORCH:
        return False
    import torch
    return torch.cuda.is_available()


def fp32_scores(table, queries=None):
    """numpy's fp32 cosines: float32 unit rows (normalised in float64), one float32 matmul."""
    unit = (table / np.linalg.norm(table.astype(np.float64), axis=1, keepdims=True)).astype(np.float32)
    if queries is None:
        scores = unit @ unit.T
        np.fill_diagonal(scores, -np.inf)
        return scores
    q = (queries / np.linalg.norm(queries.astype(np.float64), axis=1, keepdims=True)).astype(np.float32)
    return q @ unit.T


def assert_same_as_fp32(got, scores, k):
    """ids as numpy's fp32 top-k (stable: ties to the lower id); where an id differs, the two rows' fp32 scores
    lie within TIE of each other (a near-tie that two summation orders may turn)."""
    ref = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    ref_scores = np.take_along_axis(scores, ref, axis=1)
    differ = got.ids != ref
    got_scores = np.take_along_axis(scores, got.ids, axis=1)
    assert np.all(np.abs(got_scores[differ] - ref_scores[differ]) <= TIE), np.argwhere(differ)[:5]
    assert np.allclose(got.scores, ref_scores, atol=TIE)
    assert differ.mean() < 0.5  # the comparison means something: most ids agree in place


def random_table(rows, dim, seed):
    return np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)


def clustered_table(rows, dim, seed, clusters=40, spread=0.02):
    """Tight clusters: many near-ties inside the bf16 error, the cut's hard case."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim))
    return (centres[rng.integers(0, clusters, rows)] + spread * rng.standard_normal((rows, dim))).astype(np.float32)


def test_error_bound_is_the_derivation():
    u, v, d = 2.0 ** -8, 2.0 ** -24, 512
    gamma = d * v / (1 - d * v)
    by_hand = ((2 * u + u * u) * (1 + v) ** 2 + gamma * (1 + u) ** 2 * (1 + v) ** 2
               + u * (1 + u) ** 2 * (1 + v) ** 2 * (1 + gamma) + gamma * (1 + v) ** 2)
    assert bf16_bound.score_error_bound(d) == pytest.approx(by_hand, rel=1e-12)
    assert 3 * u < bf16_bound.score_error_bound(d) < 3 * u + 1e-3


@needs_torch
@pytest.mark.parametrize("dim", [8, 300])
def test_no_bf16_score_strays_past_the_bound(dim):
    import torch
    # Rows built to make rounding errors add up: every entry positive, so the products never cancel.
    rng = np.random.default_rng(dim)
    table = np.abs(rng.standard_normal((400, dim))).astype(np.float32) + 0.01
    unit = (table / np.linalg.norm(table.astype(np.float64), axis=1, keepdims=True)).astype(np.float32)
    exact = unit.astype(np.float64) @ unit.astype(np.float64).T
    low = torch.from_numpy(unit).bfloat16()
    approx = (low @ low.T).float().numpy().astype(np.float64)
    worst = np.abs(approx - exact).max()
    assert worst <= bf16_bound.score_error_bound(dim)
    assert worst > bf16_exact.BF16_UNIT / 16  # bf16 does err here: the bound is tested, not idle


def coherent_rows(dim, seed, bases=50, copies=7, loose=150):
    """Rows built so that the bf16 bound is nearly tight: every entry lies a hair under the midpoint between
    two bf16 numbers (2^e (1 + 2^-8 - 2^-16), e random in -3..-5, random sign), so it rounds down by 2^-8 of its
    size less a hair and x - x~ points along x: Cauchy-Schwarz is then met with equality for a row against a
    copy of itself. Each base row has copies: one exact, the others with a few entries' signs or sizes changed
    (near-ties, many more than k), beside loose rows; not normalised."""
    rng = np.random.default_rng(seed)
    rows = bases * copies + loose

    def entries(shape):
        return rng.choice([-1.0, 1.0], shape) * 2.0 ** rng.integers(-5, -2, shape) * (1 + 2.0 ** -8 - 2.0 ** -16)

    table = entries((rows, dim))
    table[:bases * copies] = np.repeat(table[:bases], copies, axis=0)
    for row in range(bases * copies):
        if row % copies > 1:
            changed = rng.choice(dim, row % copies - 1, replace=False)
            table[row, changed] = entries(changed.size)
    # by a power of two, which keeps every entry where it lies between bf16 numbers: norms in (1/2, 1], so that
    # scores stay within [-1, 1] where cosines are clipped
    table /= 2.0 ** np.ceil(np.log2(np.linalg.norm(table, axis=1, keepdims=True)))
    return table.astype(np.float32)


@needs_torch
@pytest.mark.parametrize("dim", [64, 256, 4096])
def test_measured_bound_holds_and_is_nearly_tight_on_coherent_rows(dim):
    # Every pair: the bf16 score t (fp32 sums, rounded to bf16) lies within M_i / 2 + u |t| of the exact
    # x.y, and the fp32 reference within M_i / 2. The input term alone (x~.y~ in float64, exact) reaches 90% of
    # M_i / 2 on a row and its copy: the bound measured on the rows is tight, no slack to spare.
    import torch
    table = coherent_rows(dim, seed=dim, bases=30, loose=60)
    exact = table.astype(np.float64) @ table.astype(np.float64).T
    low = torch.from_numpy(table).bfloat16()
    bf16 = bf16_exact.tile_product(torch, low, low, torch.empty(low.shape[0] ** 2, dtype=torch.bfloat16))
    bf16 = bf16.float().numpy().astype(np.float64)  # as the search multiplies its tiles
    inputs = low.double().numpy() @ low.double().numpy().T
    fp32 = (table @ table.T).astype(np.float64)
    terms = bf16_bound.rounding_terms(torch, torch.from_numpy(table), low)
    half = bf16_bound.margins(terms, terms, dim)[:, None] / 2
    assert np.all(np.abs(bf16 - exact) <= half + bf16_bound.BF16_UNIT * np.abs(bf16))
    assert np.all(np.abs(fp32 - exact) <= half)
    assert np.max(np.abs(inputs - exact) / half) > 0.9
    by_hand = np.linalg.norm(table.astype(np.float64) - low.double().numpy(), axis=1)
    assert np.all(terms.error >= by_hand) and np.allclose(terms.error, by_hand, rtol=1e-3)
    assert np.all(terms.error > 2.0 ** -8 * 0.99 * np.linalg.norm(table.astype(np.float64), axis=1) / (1 + 2.0 ** -8))


def test_measured_margins_are_about_half_the_worst_case_on_random_unit_rows():
    torch = pytest.importorskip("torch")
    table = random_table(2000, 512, seed=14)
    unit = (table / np.linalg.norm(table.astype(np.float64), axis=1, keepdims=True)).astype(np.float32)
    terms = bf16_bound.rounding_terms(torch, torch.from_numpy(unit), torch.from_numpy(unit).bfloat16())
    measured = bf16_bound.margins(terms, terms, 512)
    worst = 2 * bf16_bound.score_error_bound(512)
    assert np.all(measured < worst - 2 * bf16_bound.BF16_UNIT)  # the worst case's output term is not in M_i
    assert measured.max() < 0.4 * worst


def fp32_top(table, count):
    """numpy's fp32 dot products of the rows as given (no normalising), each row itself left out."""
    scores = table @ table.T
    np.fill_diagonal(scores, -np.inf)
    return scores


@needs_torch
@pytest.mark.parametrize("dim", [32, 256])
def test_bf16_half_matrix_on_coherent_rows_equals_numpy_fp32(dim):
    # Rows given as they are (search_every_row does not normalise): exact copies, near-ties past k within
    # the bf16 error, and the largest rounding errors bf16 can make.
    import torch
    table = coherent_rows(dim, seed=15 + dim)
    found_ids, found_scores = np.empty((table.shape[0], 5), np.int64), np.empty((table.shape[0], 5), np.float32)

    def emit(start, ids, vals):
        found_ids[start:start + len(ids)], found_scores[start:start + len(ids)] = ids, vals

    exact = torch.from_numpy(table)
    bf16_exact.search_every_row(torch, exact, exact.bfloat16(), 5, 96, emit)
    assert_same_as_fp32(compute.TopK(found_ids, found_scores, np.arange(table.shape[0])), fp32_top(table, 5), 5)


@needs_torch
@pytest.mark.parametrize("engine", [CpuBf16Engine(), TorchEngine()], ids=["cpu-bf16", "torch-on-cpu"])
@pytest.mark.parametrize("block_rows", [None, 200], ids=["half-matrix", "query-blocks"])
def test_bf16_on_rows_of_very_different_norms_with_copies_equals_numpy_fp32(engine, block_rows):
    # Norms from 1e-3 to 1e3 before normalising, exact duplicates (ties broken by id) and tight clusters.
    rng = np.random.default_rng(16)
    table = clustered_table(900, 40, seed=16, clusters=60, spread=0.01)
    table[800:] = table[rng.integers(0, 800, 100)]
    table *= 10.0 ** rng.uniform(-3, 3, (900, 1))
    got = topk_rows(table.astype(np.float32), 8, device="cpu", precision="bf16", block_rows=block_rows,
                    _engine=engine)
    assert_same_as_fp32(got, fp32_scores(table.astype(np.float32)), 8)


@needs_torch
@pytest.mark.parametrize("engine", [CpuBf16Engine(), TorchEngine()], ids=["cpu-bf16", "torch-on-cpu"])
@pytest.mark.parametrize("make", [random_table, clustered_table], ids=["random", "clustered"])
@pytest.mark.parametrize("block_rows", [None, 300], ids=["half-matrix", "query-blocks"])
def test_bf16_topk_equals_numpy_fp32(engine, make, block_rows):
    table = make(1200, 48, seed=3)
    got = topk_rows(table, 10, device="cpu", precision="bf16", block_rows=block_rows, _engine=engine)
    assert_same_as_fp32(got, fp32_scores(table), 10)


@needs_torch
def test_bf16_half_matrix_with_small_tiles_equals_numpy_fp32():
    table = clustered_table(900, 32, seed=4)
    scores = fp32_scores(table)
    unit = (table / np.linalg.norm(table.astype(np.float64), axis=1, keepdims=True)).astype(np.float32)
    found_ids, found_scores = np.empty((900, 7), np.int64), np.empty((900, 7), np.float32)

    def emit(start, ids, vals):
        found_ids[start:start + len(ids)], found_scores[start:start + len(ids)] = ids, vals

    prepared = CpuBf16Engine().prepare(unit, "cpu")
    CpuBf16Engine().search_every_row(prepared, 7, emit, side=128)  # 8 tiles a side, the last one short
    assert_same_as_fp32(compute.TopK(found_ids, found_scores, np.arange(900)), scores, 7)


@needs_torch
@pytest.mark.parametrize("turned", [False, True], ids=["rows", "columns"])
@pytest.mark.parametrize("size", [70, 200])
def test_scores_at_or_above_the_cut_are_those_a_plain_compare_finds(turned, size):
    import torch
    # 70 places a line: four groups of 16 read by their max (one coarse group of four), 6 compared one by one;
    # 200: twelve groups in three coarse groups, 8 one by one; cuts low, high and -inf.
    rng = np.random.default_rng(11)
    tile = torch.from_numpy(rng.standard_normal((size, size)).astype(np.float32)).bfloat16()
    scores = tile.T if turned else tile
    cuts = torch.from_numpy(rng.uniform(0.5, 2.5, (size, 1)).astype(np.float32)).bfloat16()
    cuts[3] = -torch.inf
    whole = size - size % (bf16_exact.GROUP * bf16_exact.COARSE)
    peaks = bf16_exact.group_peaks(torch, scores, whole)
    line, place, value = bf16_exact.at_or_above(torch, scores, cuts, peaks, bf16_exact.coarse_peaks(torch, peaks))
    plain = scores.float().numpy() >= cuts.float().numpy()
    want = sorted(zip(*np.nonzero(plain)))
    assert sorted(zip(line.tolist(), place.tolist())) == [(int(a), int(b)) for a, b in want]
    assert np.array_equal(value.float().numpy(), scores.float().numpy()[line.numpy(), place.numpy()])
    assert size < len(want) < size * size / 2  # some lines keep much, some little


@needs_torch
def test_candidate_products_rank_the_best_count_as_float64_does():
    # fp32 products for the head of each row's candidates (best bf16 score first), for the rest only above the
    # line the bound draws, float64 again within the fp32 slack of the count-th best: the best count must be the
    # float64 products' best count, those near the count-th best must carry exactly the float64 product rounded
    # to fp32, every product is within half the slack of it, padding stays -inf.
    import torch
    rng = np.random.default_rng(12)
    unit = rng.standard_normal((3000, 24))
    unit = (unit / np.linalg.norm(unit, axis=1, keepdims=True)).astype(np.float32)
    cand = np.argsort(rng.random((200, 3000)), axis=1)[:, :90]  # distinct columns, as a row's candidates are
    low = torch.from_numpy(np.einsum("rwd,rd->rw", unit[cand], unit[:200])).bfloat16().float().numpy()
    by_low = np.argsort(-low, axis=1, kind="stable")
    cand, low = np.take_along_axis(cand, by_low, 1), np.take_along_axis(low, by_low, 1)
    real = np.arange(90) < rng.integers(3, 91, 200)[:, None]  # padding past each row's last real candidate
    low[~real] = -np.inf
    terms = bf16_bound.rounding_terms(torch, torch.from_numpy(unit), torch.from_numpy(unit).bfloat16())
    margin = bf16_bound.margins(terms, terms, 24)[:200]
    got = bf16_exact.candidate_products(unit, unit[:200], cand, low, 5, margin)
    precise = np.einsum("rwd,rd->rw", unit[cand].astype(np.float64), unit[:200].astype(np.float64))
    exact = precise.astype(np.float32)
    slack = bf16_exact.fp32_slack(24)
    assert np.all(got[~real] == -np.inf)
    multiplied = got > -np.inf
    assert np.all(np.abs(got[multiplied] - precise[multiplied]) <= slack / 2)
    rounded_best = best_entries = 0
    for row in range(200):
        best = np.argsort(-exact[row][real[row]], kind="stable")[:5]
        assert np.array_equal(np.sort(got[row][real[row]].argsort()[::-1][:5]), np.sort(best))
        if real[row].sum() < 5:  # every candidate is in the answer: none is near a count-th best
            continue
        best_entries += best.size
        kth = np.sort(got[row][real[row]])[::-1][4]
        # the fp32 count-th best the code drew its line from is within slack / 2 of kth (a product moved by the
        # float64 pass moved that far at most), so whatever lies within slack / 2 of kth was within its slack
        near = multiplied[row] & (np.abs(got[row] - kth) <= slack / 2)
        assert near.any() and np.array_equal(got[row][near], exact[row][near])  # the float64 pass ran here
        rounded_best += int(np.sum(got[row][real[row]][best] == exact[row][real[row]][best]))
    assert rounded_best < best_entries  # the best far above the count-th stayed fp32: no float64 product spent there
    assert np.any(got[real] == -np.inf)  # and some candidates were never multiplied: the bound's line was used


@needs_torch
def test_candidate_products_shared_over_threads_are_the_same_scores():
    import torch
    rng = np.random.default_rng(13)
    unit = rng.standard_normal((2000, 32))
    unit = (unit / np.linalg.norm(unit, axis=1, keepdims=True)).astype(np.float32)
    rows = 3 * bf16_exact.SHARED_ROWS // 2  # parts of unequal use: the rows differ in how many they multiply
    cand = np.argsort(rng.random((rows, 2000)), axis=1)[:, :40]
    low = torch.from_numpy(np.einsum("rwd,rd->rw", unit[cand], unit[:rows])).bfloat16().float().numpy()
    by_low = np.argsort(-low, axis=1, kind="stable")
    cand, low = np.take_along_axis(cand, by_low, 1), np.take_along_axis(low, by_low, 1)
    low[np.arange(40) >= rng.integers(3, 41, rows)[:, None]] = -np.inf
    terms = bf16_bound.rounding_terms(torch, torch.from_numpy(unit), torch.from_numpy(unit).bfloat16())
    margin = bf16_bound.margins(terms, terms, 32)[:rows]
    alone = bf16_exact.candidate_products(unit, unit[:rows], cand, low, 6, margin)
    precise = np.einsum("rwd,rd->rw", unit[cand].astype(np.float64), unit[:rows].astype(np.float64))
    best = np.sort(np.argsort(-np.where(low > -np.inf, precise, -np.inf), axis=1, kind="stable")[:, :6], axis=1)
    for threads in (2, 3):
        shared = bf16_exact.shared_products(unit, unit[:rows], cand, low, 6, margin, threads)
        # the same best six of each row; a product may differ in its last bits (numpy groups rows otherwise)
        assert np.array_equal(np.sort(np.argsort(-shared, axis=1, kind="stable")[:, :6], axis=1), best)
        multiplied = shared > -np.inf
        assert np.all(np.abs(shared[multiplied] - precise[multiplied]) <= bf16_exact.fp32_slack(32) / 2)
        assert np.mean(shared == alone) > 0.9
    assert np.any(alone == -np.inf) and np.any(alone > -np.inf)


@needs_torch
def test_ranked_orders_by_score_then_lower_id():
    import torch
    rng = np.random.default_rng(14)
    scores = rng.choice(np.float32([0.5, -0.25, 0.0, -0.0, 1.0000001, -1.5, 3e-39, -3e-39, -np.inf, 0.125]),
                        (300, 12))
    ids = np.argsort(rng.random((300, 5000)), axis=1)[:, :12]
    got_ids, got_scores = bf16_exact.ranked(torch, torch.from_numpy(ids), torch.from_numpy(scores), 5)
    clipped = np.where(scores > -np.inf, np.clip(scores, -1, 1), scores)
    for row in range(300):
        order = np.lexsort((ids[row], -clipped[row]))[:5]  # score desc (-0 ties +0), then id asc
        assert got_ids[row].tolist() == ids[row][order].tolist()
        assert got_scores[row].tolist() == clipped[row][order].tolist()
    assert bf16_exact.ranked(torch, torch.from_numpy(ids[:, :3]), torch.from_numpy(scores[:, :3]), 5)[0].shape == (300, 3)


@needs_torch
def test_triples_are_ordered_by_row_then_score_best_first():
    import torch
    scores = np.array([0.5, -0.25, 1.0, -0.0, 0.0, -np.inf, 0.75, -0.5, 0.5, 3e-39], dtype=np.float32)
    rows = np.array([2, 0, 2, 1, 1, 0, 1, 0, 0, 1])
    order = bf16_exact.row_then_score_order(torch, torch.from_numpy(rows), torch.from_numpy(scores)).numpy()
    assert rows[order].tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    assert scores[order].tolist() == [0.5, -0.25, -0.5, -np.inf, 0.75, scores[9], 0.0, 0.0, 1.0, 0.5]
    assert np.signbit(scores[order][7])  # +0 before -0


@needs_torch
def test_bf16_half_matrix_cut_down_as_it_goes_equals_numpy_fp32(monkeypatch):
    # Triples cut down to the rows' cuts after nearly every tile (compact), block by block, small tiles.
    monkeypatch.setattr(bf16_exact, "COMPACT_AT", 200)
    compactions = []
    real = bf16_exact.Candidates.compact
    monkeypatch.setattr(bf16_exact.Candidates, "compact", lambda self: compactions.append(1) or real(self))
    table = clustered_table(700, 24, seed=13)
    unit = (table / np.linalg.norm(table.astype(np.float64), axis=1, keepdims=True)).astype(np.float32)
    found_ids, found_scores = np.empty((700, 6), np.int64), np.empty((700, 6), np.float32)

    def emit(start, ids, vals):
        found_ids[start:start + len(ids)], found_scores[start:start + len(ids)] = ids, vals

    CpuBf16Engine().search_every_row(CpuBf16Engine().prepare(unit, "cpu"), 6, emit, side=96)
    assert len(compactions) > 10
    assert_same_as_fp32(compute.TopK(found_ids, found_scores, np.arange(700)), fp32_scores(table), 6)


@needs_torch
@pytest.mark.parametrize("engine", [CpuBf16Engine(), TorchEngine()], ids=["cpu-bf16", "torch-on-cpu"])
def test_bf16_query_vectors_equal_numpy_fp32(engine):
    table = clustered_table(1000, 40, seed=5)
    queries = table[:60] + 0.001
    got = topk_vectors(table, queries, 8, device="cpu", precision="bf16", _engine=engine)
    assert_same_as_fp32(got, fp32_scores(table, queries), 8)


@needs_torch
@pytest.mark.parametrize("engine", [CpuBf16Engine(), TorchEngine()], ids=["cpu-bf16", "torch-on-cpu"])
@pytest.mark.parametrize("block_rows", [None, 128], ids=["half-matrix", "query-blocks"])
def test_rows_with_too_many_candidates_fall_back_to_fp32(monkeypatch, engine, block_rows):
    # 600 near-copies of one row: each one's cut keeps hundreds of candidates, past even the wider second pick
    # of a block of queries, and past what a row may hold in the half-matrix search (made 64 here).
    monkeypatch.setattr(bf16_exact, "MOST_CANDIDATES", 64)
    rng = np.random.default_rng(6)
    table = np.vstack([rng.standard_normal(32) + 1e-3 * rng.standard_normal((600, 32)),
                       rng.standard_normal((300, 32))]).astype(np.float32)
    fallbacks = []
    real = bf16_exact.exact_rows
    monkeypatch.setattr(bf16_exact, "exact_rows", lambda *a: fallbacks.append(a[2].shape[0]) or real(*a))
    got = topk_rows(table, 5, device="cpu", precision="bf16", block_rows=block_rows, _engine=engine)
    assert sum(fallbacks) >= 600  # every near-copy went through fp32
    assert_same_as_fp32_ties(got, fp32_scores(table), 5)


@needs_torch
@pytest.mark.parametrize("engine", [CpuBf16Engine(), TorchEngine()], ids=["cpu-bf16", "torch-on-cpu"])
@pytest.mark.parametrize("make", [random_table, clustered_table], ids=["random", "clustered"])
def test_half_matrix_k_above_most_candidates_equals_numpy_fp32(monkeypatch, engine, make):
    # k past what a row may hold (MOST_CANDIDATES, made 16 here): every row keeps k + 1 candidates at least, so
    # its k-th best is among them (the candidates were cut to MOST_CANDIDATES + 1, and the k-th was asked of them:
    # an IndexError, `neighbors --all -k 1100 --precision bf16` with the real 1,024).
    monkeypatch.setattr(bf16_exact, "MOST_CANDIDATES", 16)
    table = make(400, 24, seed=8)
    got = topk_rows(table, 40, device="cpu", precision="bf16", _engine=engine)
    assert got.ids.shape == (400, 40)
    assert_same_as_fp32(got, fp32_scores(table), 40)


def assert_same_as_fp32_ties(got, scores, k):
    """As assert_same_as_fp32, for a table of near-copies whose ids may all be tied within TIE."""
    ref = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    ref_scores = np.take_along_axis(scores, ref, axis=1)
    assert np.all(np.abs(np.take_along_axis(scores, got.ids, axis=1) - ref_scores) <= TIE)


@needs_torch
def test_auto_precision_is_the_exact_bf16_pass_where_bf16_is_native(monkeypatch):
    monkeypatch.setattr(devices, "native_bf16", lambda: True)
    assert compute.resolve_precision("auto", "cpu") == "bf16"
    large, small = 24576 * 24576 * 512, 16384 * 16384 * 512  # bf16 repays torch's import; it does not
    assert large >= devices.BF16_LEAST_WORK > small
    assert compute.resolve_precision("auto", "cpu", large) == "bf16"
    assert compute.resolve_precision("auto", "cpu", small) == "fp32"
    assert compute.precision_run(compute.resolve_precision("auto", "cpu", small), "cpu") == "fp32"
    monkeypatch.setattr(devices, "native_bf16", lambda: False)
    assert compute.resolve_precision("auto", "cpu") == "fp32"
    monkeypatch.setattr(devices, "native_bf16", lambda: None)  # no /proc/cpuinfo to read
    assert compute.resolve_precision("auto", "cpu") == "fp32"
    assert compute.resolve_precision("bf16", "cpu") == "bf16"
    assert compute.precision_label("bf16") == "bf16, exact by re-rank"
    assert compute.precision_label("fp32") == "fp32"


@needs_torch
def test_neighbors_all_json_names_the_exact_bf16_pass(tmp_path):
    table = clustered_table(400, 16, seed=8)
    path = tmp_path / "t.npz"
    np.savez(path, embeddings=table)
    out = tmp_path / "top.npz"
    result = CliRunner().invoke(app, ["neighbors", "-c", str(path), "--all", "-k", "4", "--out", str(out),
                                      "--device", "cpu", "--precision", "bf16", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["precision"] == "bf16, exact by re-rank"
    with np.load(out) as written:
        ids = written["ids"]
    ref = np.argsort(-fp32_scores(table), axis=1, kind="stable")[:, :4]
    assert (ids == ref).mean() > 0.9


@pytest.mark.skipif(not has_cuda(), reason="no CUDA GPU")
@pytest.mark.parametrize("make", [random_table, clustered_table], ids=["random", "clustered"])
@pytest.mark.parametrize("block_rows", [None, 512], ids=["half-matrix", "query-blocks"])
def test_cuda_bf16_topk_equals_numpy_fp32(make, block_rows):
    table = make(4000, 96, seed=9)
    got = topk_rows(table, 10, device="cuda", precision="bf16", block_rows=block_rows)
    assert_same_as_fp32(got, fp32_scores(table), 10)


@pytest.mark.skipif(not has_cuda(), reason="no CUDA GPU")
def test_cuda_auto_precision_is_the_exact_bf16_pass():
    import torch
    if not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bf16")
    table = clustered_table(3000, 64, seed=10)
    got = topk_rows(table, 6, device="cuda", precision="auto")
    assert_same_as_fp32(got, fp32_scores(table), 6)
