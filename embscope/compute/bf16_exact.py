"""Exact top-k from a bf16 pass, on any torch device (the CPU's AMX / avx512_bf16, a GPU): every score is
multiplied in bf16, every column that could still be in the fp32 top-k is kept by a proven error bound measured
on the table's own rows (bf16_bound), and the kept columns are re-ranked in fp32. The answer equals the fp32
answer id for id (ties within the fp32 rounding of two summation orders aside).

The cut (docs/speed.md derives it at length). Row i against every column j: s_j the exact cosines, s'_j the fp32
sums of bf16 products, t_j = bf16(s'_j) the scores the tiles hold, r_j the fp32 reference's; |s' - s| <= E_i,
|r - s| <= G_i, |t - s'| <= u |t| (bf16_bound). Rounding is monotone, so the k-th best t is t_k = bf16(S'_k),
S'_k the k-th best s', and S'_k >= t_k - u |t_k|. k columns have s >= S'_k - E_i, so the fp32 answer's k-th
best r is >= S'_k - E_i - G_i and a column j it keeps has s_j >= S'_k - E_i - 2 G_i, s'_j >= S'_k - M_i with
M_i = 2 (E_i + G_i); then t_j >= bf16(c) >= c - u |c|, c = t_k - u |t_k| - M_i (bf16_bound.lowest). No column
of the fp32 top-k, ties at the k-th included, falls below that cut; it rises with t_k, so a lower t_k gives a
lower, still valid, cut.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .bf16_bound import BF16_UNIT, FP32_UNIT, RoundingTerms, lowest, margins, on_device, rounding_terms
from .select import exact_row

CANDIDATES_EXTRA = 32  # columns kept per row beyond 2k by the first topk of a block
WIDER = 8  # rows whose cut falls past the first topk's columns are selected again this many times wider
GATHER_ROWS = 256  # queries re-ranked at a time: a bounded gather of their candidates' rows
CPU_GATHER_ROWS = 16  # the same on the CPU, where a smaller gather stays in cache (64: 12% slower re-rank)
# the same where the re-rank is shared over threads: fewer, larger numpy calls, so the threads wait less on the GIL
# between them (32,768 x 512 on 2 threads: 0.16 s instead of 0.23 s; one thread keeps 16)
SHARED_GATHER_ROWS = 128
HEAD_CANDIDATES = 2  # a CPU re-rank's first fp32 products: count + this many of a row's best candidates (10: 5% slower)
SHARED_ROWS = 512  # fewer rows than this are re-ranked on one thread
CPU_GATHER_PAIRS = 256  # (query, candidate) pairs whose rows are gathered at a time for a float64 product
# emit(start, ids, scores): the top count columns of rows start.. best first, as numpy arrays.
Emit = Callable[[int, np.ndarray, np.ndarray], None]


def first_width(count: int, n_columns: int) -> int:
    return min(n_columns, 2 * count + CANDIDATES_EXTRA)


def cut_complete(torch: Any, top_low: Any, count: int, n_columns: int, margin: Any) -> Any:
    """Rows whose candidates hold every column at or above the cut (lowest: from the k-th best bf16 score and
    the row's margin): their last candidate is below it, or every column is a candidate. top_low: (rows, width)
    bf16 scores, best first; margin: (rows,)."""
    if top_low.shape[1] >= n_columns:
        return torch.ones(top_low.shape[0], dtype=torch.bool, device=top_low.device)
    return top_low[:, -1] < lowest(torch, top_low[:, count - 1], margin)


def rerank(torch: Any, exact: Any, vectors: Any, cand_ids: Any, cand_low: Any, count: int, margin: Any) -> Any:
    """fp32 cosines of each query with its candidates, -inf where the bf16 pass had a left-out column (-inf).
    Never a torch matmul, which a tensor-core or oneDNN mode may run below fp32: on the CPU numpy's products
    (candidate_products: fp32, and the correctly rounded fp32 cosine near the count-th best, so that the best
    count are the exact cosines' best count), elsewhere a multiply-and-sum."""
    if exact.device.type == "cpu":
        scores = torch.from_numpy(shared_products(exact.numpy(), vectors.numpy(), cand_ids.numpy(),
                                                  cand_low.float().numpy(), count, margin.numpy(),
                                                  torch.get_num_threads()))
    else:
        scores = torch.cat([(exact[cand_ids[i:i + GATHER_ROWS]] * vectors[i:i + GATHER_ROWS, None, :]).sum(dim=2)
                            for i in range(0, cand_ids.shape[0], GATHER_ROWS)])
    return scores.masked_fill_(cand_low == -torch.inf, -torch.inf)


def shared_products(exact: np.ndarray, vectors: np.ndarray, cand_ids: np.ndarray, low: np.ndarray, count: int,
                    margin: np.ndarray, threads: int) -> np.ndarray:
    """candidate_products, the rows shared out in contiguous parts over threads (numpy lets go of the GIL in
    its gathers and products; torch's own threads are idle while the re-rank runs), SHARED_GATHER_ROWS vectors
    at a time: the same scores."""
    n_rows = vectors.shape[0]
    share = max(1, -(-n_rows // max(1, threads)))
    parts = [(start, min(start + share, n_rows)) for start in range(0, n_rows, share)]
    if len(parts) < 2 or n_rows < SHARED_ROWS:
        return candidate_products(exact, vectors, cand_ids, low, count, margin, CPU_GATHER_ROWS)
    scores = np.empty(cand_ids.shape, dtype=np.float32)

    def part_products(part: tuple[int, int]) -> None:
        rows = slice(*part)
        scores[rows] = candidate_products(exact, vectors[rows], cand_ids[rows], low[rows], count, margin[rows],
                                          SHARED_GATHER_ROWS)

    from concurrent.futures import ThreadPoolExecutor  # 5 ms to import: only where there is work to share
    with ThreadPoolExecutor(len(parts)) as pool:
        list(pool.map(part_products, parts))
    return scores


def candidate_products(exact: np.ndarray, vectors: np.ndarray, cand_ids: np.ndarray, low: np.ndarray,
                       count: int, margin: np.ndarray, at_once: int = CPU_GATHER_ROWS) -> np.ndarray:
    """Dot products of each vector with the rows of its candidates (low: their bf16 scores, best first, -inf
    for padding), good for ranking the best count; -inf for padding and for a candidate that cannot reach them.
    First in fp32 (fp32_products) for the first HEAD_CANDIDATES: their count-th best K is at most the final one,
    and a candidate whose bf16 score t has t + u |t| + margin / 2 < K - fp32_slack (margin: the row's M_i,
    bf16_bound; its half is at least |s' - s|) is below every exact cosine of the count best, so only the
    candidates above that line (a prefix, being best first) are multiplied next. Then those
    within fp32_slack of a vector's count-th best K (either side) again in float64, rounded to fp32; the others
    are off their exact cosine by at most half the slack: those above K + slack are in the best count for sure
    (fewer than count products exceed K), those below K - slack out of it (count have an exact cosine of at
    least K - slack / 2), so only the order among the best count is fp32's own, as numpy's is."""
    real = low > -np.inf
    slack = fp32_slack(exact.shape[1])
    scores = np.full(cand_ids.shape, -np.inf, dtype=np.float32)
    head = min(low.shape[1], count + HEAD_CANDIDATES)
    fp32_products(exact, vectors, cand_ids, scores, 0, np.minimum(last_true(real), head), at_once)
    reach = np.where(low > 0, low * (1 + BF16_UNIT), low * (1 - BF16_UNIT)) + margin[:, None] / 2  # t + u |t|
    fp32_products(exact, vectors, cand_ids, scores, head, last_true(real & (reach >= count_th(scores, count) - slack)),
                  at_once)
    kth = count_th(scores, count)
    line, place = np.nonzero(real & (scores >= kth - slack) & (scores <= kth + slack))
    for i in range(0, line.size, CPU_GATHER_PAIRS):
        near = slice(i, i + CPU_GATHER_PAIRS)
        scores[line[near], place[near]] = np.einsum("pd,pd->p", exact[cand_ids[line[near], place[near]]],
                                                    vectors[line[near]], dtype=np.float64)
    return scores


def fp32_products(exact: np.ndarray, vectors: np.ndarray, cand_ids: np.ndarray, scores: np.ndarray, begin: int,
                  ends: np.ndarray, at_once: int = CPU_GATHER_ROWS) -> None:
    """scores[r, begin:ends[r]] = fp32 products of vector r with those candidates' rows (numpy's batched
    product), at_once vectors at a time in order of their end, so that a group gathers about as many rows
    as its vectors need, not as many as the most crowded one's; what a group gathers past a vector's end is
    put back to -inf."""
    order = np.argsort(ends, kind="stable")
    for i in range(0, order.size, at_once):
        part = order[i:i + at_once]
        width = int(ends[part[-1]])
        if width > begin:
            got = np.matmul(exact[cand_ids[part, begin:width]], vectors[part, :, None])[..., 0]
            got[np.arange(begin, width) >= ends[part, None]] = -np.inf
            scores[part, begin:width] = got


def last_true(mask: np.ndarray) -> np.ndarray:
    """Per row, one past the last True (0 where none)."""
    return np.where(mask.any(axis=1), mask.shape[1] - np.argmax(mask[:, ::-1], axis=1), 0)


def count_th(scores: np.ndarray, count: int) -> np.ndarray:
    """(rows, 1): each row's count-th best score, -inf where it has fewer than count."""
    if count > scores.shape[1]:
        return np.full((scores.shape[0], 1), -np.inf, dtype=scores.dtype)
    return -np.partition(-scores, count - 1, axis=1)[:, count - 1:count]


def fp32_slack(dim: int) -> float:
    """Twice the most an fp32 dot product of two float32 unit rows (|x|, |y| <= 1 + v), products and sums
    rounded in any order, or the fp32 rounding of the exact one, can differ from the exact one."""
    v = FP32_UNIT
    gamma = dim * v / (1 - dim * v)
    return 2 * (gamma + v) * (1 + v) ** 2


def ranked(torch: Any, cand_ids: Any, cand_scores: Any, count: int) -> tuple[Any, Any]:
    """The best count of candidates by (score desc, id asc), cosines clipped to [-1, 1] (-0 made +0, so that
    the two tie): one topk of 64-bit keys, the score's bits made to order as the scores do above the id's
    complement (ids are below 2^32)."""
    cand_scores = torch.where(cand_scores > -torch.inf, cand_scores.clamp(-1.0, 1.0) + 0.0, cand_scores)
    bits = cand_scores.view(torch.int32)
    rising = torch.where(bits < 0, bits ^ 0x7FFFFFFF, bits).to(torch.int64)  # a negative float's other bits fall
    best = torch.topk((rising << 32) | ((1 << 32) - 1 - cand_ids), min(count, cand_ids.shape[1]), dim=1).indices
    return cand_ids.gather(1, best), cand_scores.gather(1, best)


def exact_rows(torch: Any, exact: Any, vectors: Any, count: int, left: Any) -> tuple[np.ndarray, np.ndarray]:
    """The fp32 top count of a few queries against every column: the fallback for rows whose bf16 cut keeps
    too many candidates (near-ties by the hundred). left: bool (rows, columns) of left-out columns, or None."""
    scores = vectors @ exact.T
    if left is not None:
        scores.masked_fill_(left, -torch.inf)
    host = scores.float().cpu().numpy()
    ids = np.empty((host.shape[0], count), dtype=np.int64)
    vals = np.empty((host.shape[0], count), dtype=np.float32)
    for row in range(host.shape[0]):  # only the degenerate rows come here
        ids[row], vals[row] = exact_row(host[row], count)
    return ids, vals


def block_answer(torch: Any, exact: Any, vectors: Any, cand_ids: Any, cand_low: Any, count: int,
                 n_columns: int, margin: Any, full_low: Any | None,
                 left: Callable[[Any], Any]) -> tuple[np.ndarray, np.ndarray]:
    """The exact top count of a block of queries from their bf16 candidates (best first): rows whose cut is
    complete are re-ranked; the others are selected again wider from full_low (their whole bf16 rows) when it
    is given, and what is still incomplete is worked out in fp32. margin: (rows,) M_i (bf16_bound); left(rows)
    gives the left-out mask of rows."""
    complete = cut_complete(torch, cand_low, count, n_columns, margin)
    ids, vals = ranked(torch, cand_ids, rerank(torch, exact, vectors, cand_ids, cand_low, count, margin), count)
    ids, vals = ids.cpu().numpy().astype(np.int64), vals.float().cpu().numpy()
    missing = torch.nonzero(~complete).flatten()
    if missing.numel() == 0:
        return ids, vals
    rows = missing
    if full_low is not None and cand_low.shape[1] < n_columns:
        wide_low, wide_ids = torch.topk(full_low[rows], min(n_columns, WIDER * cand_low.shape[1]), dim=1)
        wide_ok = cut_complete(torch, wide_low, count, n_columns, margin[rows])
        done = rows[wide_ok]
        if done.numel():
            got_ids, got_vals = ranked(torch, wide_ids[wide_ok],
                                       rerank(torch, exact, vectors[done], wide_ids[wide_ok], wide_low[wide_ok], count,
                                              margin[done]), count)
            at = done.cpu().numpy()
            ids[at], vals[at] = got_ids.cpu().numpy(), got_vals.float().cpu().numpy()
        rows = rows[~wide_ok]
    if rows.numel():
        at = rows.cpu().numpy()
        ids[at], vals[at] = exact_rows(torch, exact, vectors[rows], count, left(rows))
    return ids, vals


def search_queries(torch: Any, exact: Any, low: Any, columns: RoundingTerms, vectors: Any, count: int,
                   left_lines: Any, left_columns: Any) -> tuple[np.ndarray, np.ndarray]:
    """One block of query vectors (fp32 unit rows on the device) against every column (columns: the table's
    rounding_terms): exact top count."""
    n_columns = exact.shape[0]
    vectors_low = vectors.to(low.dtype)
    query_terms = rounding_terms(torch, vectors, vectors_low)
    margin = on_device(torch, margins(query_terms, columns, exact.shape[1]), exact.device)
    scores = (vectors_low @ low.T).float()
    scores[left_lines, left_columns] = -torch.inf
    cand_low, cand_ids = torch.topk(scores, first_width(count, n_columns), dim=1)

    def left(rows: Any) -> Any:
        return scores[rows] == -torch.inf

    return block_answer(torch, exact, vectors, cand_ids, cand_low, count, n_columns, margin, scores, left)


def search_every_row(torch: Any, exact: Any, low: Any, count: int, side: int, emit: Emit) -> None:
    """Every row's exact top count, itself left out, from the upper triangle of the bf16 cosine matrix: each
    square tile is multiplied once and read once more, for its rows and (turned over) for its columns, against
    each row's running cut (Candidates): no sort of the tile. Once a block of rows has met every tile of its
    row and column, its candidates are re-ranked in fp32; a row holding more than MOST_CANDIDATES (near-ties by
    the hundred) is worked out in fp32 against every column."""
    n = exact.shape[0]
    dev = exact.device
    terms = rounding_terms(torch, exact, low)
    margin = on_device(torch, margins(terms, terms, exact.shape[1]), dev)
    found = Candidates(torch, torch.full((n,), -torch.inf, device=dev), count, margin)
    buffer = tile_buffer(torch, side * side, low.dtype, dev)
    for first in range(0, n, side):
        rows = slice(first, min(first + side, n))
        for column in range(first, n, side):
            columns = slice(column, min(column + side, n))
            scores = tile_product(torch, low[rows], low[columns], buffer)
            if column == first:
                scores.fill_diagonal_(-torch.inf)  # the row itself
            found.add(scores, rows, columns, both=column != first)
        line = torch.arange(rows.start, rows.stop, device=dev)

        def left(at: Any, line: Any = line) -> Any:  # the row itself
            mask = torch.zeros((at.numel(), n), dtype=torch.bool, device=dev)
            mask[torch.arange(at.numel(), device=dev), line[at]] = True
            return mask

        cand_ids, cand_low = found.take(rows)
        emit(first, *block_answer(torch, exact, exact[rows], cand_ids, cand_low, count, n - 1, margin[rows], None,
                                  left))


def tile_buffer(torch: Any, size: int, dtype: Any, device: Any) -> Any:
    """A flat buffer for size scores. On the CPU numpy's memory: numpy asks the kernel for huge pages for a large
    array (madvise), torch's allocator does not, and the readings' gathers, 16 places of a tile apart, then miss
    the TLB far less (the turned reading's gather 6 ms instead of 12 on a 4,682-wide tile)."""
    if device.type != "cpu":
        return torch.empty(size, dtype=dtype, device=device)
    item = torch.empty(0, dtype=dtype).element_size()
    return torch.from_numpy(np.empty(size * item, dtype=np.uint8)).view(dtype)


def tile_product(torch: Any, rows: Any, columns: Any, buffer: Any) -> Any:
    """rows @ columns.T written into the front of buffer, which every tile reuses: a fresh tile of tens of MB
    is memory the OS maps anew, page by page, on its first write (about half the multiply's time on the CPU)."""
    out = buffer[:rows.shape[0] * columns.shape[0]].view(rows.shape[0], columns.shape[0])
    return torch.matmul(rows, columns.T, out=out)


MOST_CANDIDATES = 1024  # candidates a row may hold before it is worked out in fp32 instead
COMPACT_AT = 1 << 22  # candidates gathered before they are cut down to each row's cut again
COARSE = 4  # group peaks merged into a line's running count best as the max of this many: a quarter the topk's input
GROUP = 16  # scores of a tile line whose max is compared with its cut before any one of them (8-64 tried: 16 fastest)


class Candidates:
    """Per row, every column whose bf16 score reached the row's cut when it went past: lowest() of the count-th
    best score seen so far and the row's margin (bf16_bound), which only rises. Held as flat (row, column,
    score) triples, by the block of rows they belong to (a tile side's lines all lie in one), cut down again
    (compact) whenever many have gathered. A row's final cut is at most lowest() of its true count-th best,
    so every column the bound needs is among its candidates."""

    def __init__(self, torch: Any, cuts: Any, count: int, margin: Any):
        self.torch, self.count, self.margin, self.cut = torch, count, margin, cuts
        self.held: dict[int, list[tuple[Any, Any, Any]]] = {}  # first row of a block: its triples, in parts
        self.gathered = 0
        # per row, the count highest group peaks met so far (16-bit integers, bits of bf16 scores)
        self.peaks = torch.full((cuts.numel(), count), torch.iinfo(torch.int16).min, dtype=torch.int16,
                                device=cuts.device)

    def add(self, scores: Any, rows: slice, columns: slice, both: bool) -> None:
        """A tile of bf16 scores of rows against columns; both: its columns take its rows as candidates too."""
        self.side(scores, rows, columns)
        if both:
            self.side(scores.T, columns, rows)
        if self.gathered > COMPACT_AT:
            self.compact()

    def side(self, scores: Any, lines: slice, places: slice) -> None:
        """One reading of a tile: (lines, places) scores, the tile or the tile turned over. Its group peaks
        first raise the lines' cuts (count groups whose peak reaches p hold count columns that reach it, so
        the count-th best peak is at most the count-th best score), then pick the groups to compare."""
        whole = scores.shape[1] - scores.shape[1] % (GROUP * COARSE)
        peaks = group_peaks(self.torch, scores, whole)
        coarse = coarse_peaks(self.torch, peaks)
        self.raise_cuts(raising_peaks(self.torch, peaks, coarse, self.count), lines)
        line, place, value = at_or_above(self.torch, scores, self.below(self.cut[lines, None], scores.dtype), peaks,
                                         coarse)
        self.keep(lines.start, (line + lines.start, place + places.start, value.float()))

    def raise_cuts(self, peaks: Any, lines: slice) -> None:
        """Merge a tile's group peaks (or maxima of disjoint groups, raising_peaks: such a max is a group's peak
        too) into each line's count best, and raise the line's cut to lowest() of the count-th best where that
        is a positive bf16 number (its bits order as the numbers do)."""
        torch = self.torch
        if peaks.shape[1] == 0:
            return
        best = torch.topk(torch.cat([self.peaks[lines], peaks], dim=1), self.count, dim=1).values
        self.peaks[lines] = best
        kth = best[:, -1]
        rise = torch.where(kth > 0, lowest(torch, kth.view(torch.bfloat16).float(), self.margin[lines]), -torch.inf)
        self.cut[lines] = torch.maximum(self.cut[lines], rise)

    @staticmethod
    def below(cuts: Any, dtype: Any) -> Any:
        """The cuts in the tile's dtype, never above them: lowered by 2^-7 of their size first, more than bf16's
        rounding (2^-8) can raise them, so a column at its cut is never lost to the rounding."""
        return (cuts - cuts.abs() * 2.0 ** -7).to(dtype)

    def keep(self, block: int, triples: tuple[Any, Any, Any]) -> None:
        self.held.setdefault(block, []).append(triples)
        self.gathered += triples[0].numel()

    def joined(self, block: int) -> tuple[Any, Any, Any]:
        """A block's triples in one (rows, columns, scores), taken out of held."""
        parts = self.held.pop(block, [])
        self.gathered -= sum(part[0].numel() for part in parts)
        if not parts:
            empty = self.torch.empty(0, dtype=self.torch.int64, device=self.cut.device)
            return empty, empty, self.torch.empty(0, device=self.cut.device)
        rows, columns, scores = (self.torch.cat(part) for part in zip(*parts))
        return rows, columns, scores

    def compact(self) -> None:
        """Cut every row's triples down to its cut (cut_down)."""
        for block in list(self.held):
            self.keep(block, self.cut_down(*self.joined(block)))

    def cut_down(self, rows: Any, columns: Any, scores: Any) -> tuple[Any, Any, Any]:
        """The triples sorted by (row, score desc), each row's cut raised to lowest() of its count-th best,
        and what falls below it dropped."""
        torch = self.torch
        risen = scores >= self.cut[rows]  # most cuts rose after their triples were kept: fewer to sort
        rows, columns, scores = rows[risen], columns[risen], scores[risen]
        order = row_then_score_order(torch, rows, scores)
        rows, columns, scores = rows[order], columns[order], scores[order]
        held = torch.bincount(rows, minlength=self.cut.numel())
        starts = torch.cumsum(held, 0) - held
        full = torch.nonzero(held >= self.count).flatten()
        self.cut[full] = torch.maximum(self.cut[full], lowest(torch, scores[starts[full] + self.count - 1],
                                                              self.margin[full]))
        kept = scores >= self.cut[rows]
        return rows[kept], columns[kept], scores[kept]

    def take(self, rows: slice) -> tuple[Any, Any]:
        """(ids, bf16 scores) of the candidates of rows, best first, padded with -inf; a row holding more than
        MOST_CANDIDATES (or count, if more) gets that many, its last one level with its first, so that block_answer
        finds its cut incomplete and works it out in fp32. Only these rows' triples are sorted (the running cuts are the
        group peaks' and compact's)."""
        torch = self.torch
        line, columns, scores = self.cut_down(*self.joined(rows.start))
        line = line - rows.start
        held = torch.bincount(line, minlength=rows.stop - rows.start)
        # one column more than any row holds: a row's last is -inf, below its cut, so block_answer finds it complete;
        # never fewer than count + 1, whose count-th best block_answer reads (count may exceed MOST_CANDIDATES)
        width = max(self.count, min(int(held.max()) if held.numel() else 0, MOST_CANDIDATES)) + 1
        rank = torch.arange(line.numel(), device=line.device) - (torch.cumsum(held, 0) - held)[line]
        placed = rank < width
        ids = torch.zeros((rows.stop - rows.start, width), dtype=torch.int64, device=line.device)
        low = torch.full((rows.stop - rows.start, width), -torch.inf, device=line.device)
        ids[line[placed], rank[placed]] = columns[placed]
        low[line[placed], rank[placed]] = scores[placed]
        crowded = held >= width
        low[crowded, -1] = low[crowded, 0]  # block_answer: incomplete, so redone in fp32
        return ids, low


def at_or_above(torch: Any, scores: Any, cuts: Any, peaks: Any, coarse: Any) -> tuple[Any, Any, Any]:
    """(line, place, score) of each bf16 score at or above its line's cut (cuts: (lines, 1) bf16); scores are
    (lines, places), a tile or a tile turned over; peaks: its group_peaks over the first whole places (a multiple
    of GROUP * COARSE), coarse: their coarse_peaks. Only the coarse groups whose peak reaches the cut have their
    groups' peaks compared, and only the groups whose peak reaches it are compared score by score; the places
    past whole (fewer than GROUP * COARSE) are compared directly."""
    width = peaks.shape[1]
    whole = width * GROUP
    bits = cut_bits(torch, cuts)
    if scores.stride(1) == 1:
        line, group = reaching_groups(torch, peaks, coarse, bits)
    else:  # turned: by group, then line, so that neighbouring lines of a group share the tile's cache lines (3x faster)
        group, line = reaching_groups(torch, peaks.T, coarse.T, bits.T)
    values = scores[:, :whole].unflatten(1, (GROUP, width))[line, :, group]
    at, offset = torch.nonzero(values >= cuts[line], as_tuple=True)
    line, place, value = line[at], offset * width + group[at], values[at, offset]
    if whole == scores.shape[1]:
        return line, place, value
    rest_line, rest_place = torch.nonzero(scores[:, whole:] >= cuts, as_tuple=True)
    return (torch.cat([line, rest_line]), torch.cat([place, rest_place + whole]),
            torch.cat([value, scores[rest_line, rest_place + whole]]))


def reaching_groups(torch: Any, peaks: Any, coarse: Any, bits: Any) -> tuple[Any, Any]:
    """(i, j) of each peaks[i, j] >= bits (broadcast), found from the coarse peaks: along dim 1 each coarse
    peak is the max of COARSE neighbouring peaks, along dim 0 each holds COARSE neighbouring rows of peaks.
    Turned readings pass (groups, lines) views: the answer then runs by group, then line."""
    if peaks.shape[1] == coarse.shape[1] * COARSE:  # coarse along dim 1
        first, part = torch.nonzero(coarse >= bits, as_tuple=True)
        under = peaks.unflatten(1, (-1, COARSE))[first, part] >= bits[first]  # (found, COARSE)
        at, shift = torch.nonzero(under, as_tuple=True)
        return first[at], part[at] * COARSE + shift
    part, second = torch.nonzero(coarse >= bits, as_tuple=True)  # coarse along dim 0
    under = peaks.unflatten(0, (-1, COARSE))[part, :, second] >= bits[0, second, None]  # (found, COARSE)
    shift, at = torch.nonzero(under.T, as_tuple=True)  # by shift first: runs of one group over neighbouring lines
    return part[at] * COARSE + shift, second[at]


def group_peaks(torch: Any, scores: Any, whole: int) -> Any:
    """(lines, whole / GROUP): the largest bit pattern, as a 16-bit integer, of each group of GROUP places of a
    line, group g being places g, g + w, g + 2 w, ... (w = whole / GROUP): a max across GROUP stretches of w
    places, which runs along memory either way the tile is read (8x faster than a max of 16 neighbours); on the
    bits, several times faster than a bf16 max."""
    bits = scores.view(torch.int16)
    if scores.stride(1) == 1:
        return bits[:, :whole].unflatten(1, (GROUP, whole // GROUP)).amax(1)
    return bits.T[:whole].unflatten(0, (GROUP, whole // GROUP)).amax(0).T


def coarse_peaks(torch: Any, peaks: Any) -> Any:
    """(lines, groups // COARSE): the max of each COARSE neighbouring group peaks, as elementwise maxima of strided
    slices (faster than an amax over a last dim of COARSE, most of all on a turned reading's peaks)."""
    whole = peaks.shape[1] - peaks.shape[1] % COARSE
    coarse = peaks[:, 0:whole:COARSE]
    for first in range(1, COARSE):
        coarse = torch.maximum(coarse, peaks[:, first:whole:COARSE])
    return coarse


def raising_peaks(torch: Any, peaks: Any, coarse: Any, count: int) -> Any:
    """The coarsest peaks that still give each line count of them: the max of COARSE coarse peaks (COARSE ** 2
    groups: the raise's topk then sorts a quarter as many), else the coarse peaks, else the group peaks."""
    if coarse.shape[1] < count:
        return peaks
    coarser = coarse_peaks(torch, coarse)
    return coarser if coarser.shape[1] >= count else coarse


def cut_bits(torch: Any, cuts: Any) -> Any:
    """bf16 cuts as 16-bit integers that a group's peak bits reach whenever one of its scores reaches the cut:
    a positive bf16 number's bits rise with it and a negative one's are negative, so a positive cut keeps its
    bits; a cut at or below zero takes the lowest integer (every group is then compared score by score)."""
    return torch.where(cuts > 0, cuts.view(torch.int16), torch.iinfo(torch.int16).min)


def row_then_score_order(torch: Any, rows: Any, scores: Any) -> Any:
    """The order of (row, fp32 score) pairs by row, then score best first: one sort of 64-bit keys, the row
    above the score's bits made to fall as the score rises."""
    bits = scores.view(torch.int32).to(torch.int64)
    rising = torch.where(bits < 0, ~bits, bits + (1 << 31))  # float order as unsigned 32-bit order
    keys = (rows << 32) | ((1 << 32) - 1 - rising)
    return torch.argsort(keys)
