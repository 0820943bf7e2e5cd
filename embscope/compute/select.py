"""Picking the top columns of float32 score blocks on the host, ties to the lower column: the selection
the numpy and cpu-bf16 engines share. -inf marks a column left out (the query itself, an excluded row)."""

from __future__ import annotations

import numpy as np

# Scores selected at a time, in whole rows (at least MIN_SELECT_ROWS): enough that each numpy call has work, few
# enough that the rows' group maxima and index temporaries stay in the core's cache.
SELECT_SCORES = 1 << 20
MIN_SELECT_ROWS = 16


def clip_cosines(scores: np.ndarray) -> np.ndarray:
    """Clip to [-1, 1] in place, but keep -inf: it marks a column left out."""
    np.minimum(scores, 1.0, out=scores)
    np.maximum(scores, -1.0, out=scores, where=scores > -np.inf)
    return scores


def finalise(cand_ids: np.ndarray, cand_scores: np.ndarray, count: int,
             complete: bool, clip: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Order candidates by (score desc, id asc) and keep count of them.

    Candidates must hold the top-m columns by score (ties cut arbitrarily). Returns
    (ids, scores, unsure, order): unsure rows may have lost a tied neighbour to the cut and must be
    redone on the full row (never when the candidates are complete); order[:, :count] says which
    candidate each kept column came from. clip: cosines, clipped to [-1, 1] first.
    """
    if clip:
        clip_cosines(cand_scores)
    order = np.lexsort((cand_ids, -cand_scores), axis=-1)
    ids = np.take_along_axis(cand_ids, order, axis=1)
    scores = np.take_along_axis(cand_scores, order, axis=1)
    if complete or count == 0:
        unsure = np.zeros(ids.shape[0], dtype=bool)
    else:
        unsure = scores[:, -1] == scores[:, count - 1]
    return ids[:, :count], scores[:, :count], unsure, order


def exact_row(row_scores: np.ndarray, count: int, clip: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Top count of one full row with ties by id; the slow path for tie-heavy rows."""
    row = np.array(row_scores, dtype=np.float32)
    if clip:
        clip_cosines(row)
    threshold = np.partition(row, row.size - count)[row.size - count]
    cand = np.flatnonzero(row >= threshold)
    order = np.lexsort((cand, -row[cand]))[:count]
    return cand[order], row[cand[order]]


def every_column(scores: np.ndarray) -> np.ndarray:
    return np.broadcast_to(np.arange(scores.shape[1], dtype=np.int64), scores.shape).copy()


def select_top(scores: np.ndarray, count: int, threads: int = 1, clip: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Top count columns of each row of a float32 block, ties to the lower column: (ids, scores).

    Rows whose cut falls among tied scores are redone on the full row; when count reaches the width
    (less one) every column is ranked. threads: how many share the rows out, each a contiguous part.
    clip: the scores are cosines, clipped to [-1, 1] (else any scores, 3CosMul's ratios).
    """
    if count + 1 >= scores.shape[1]:
        ids, vals, _, _ = finalise(every_column(scores), scores.copy(), count, True, clip)
        return ids, vals
    n_rows = scores.shape[0]
    ids = np.empty((n_rows, count), dtype=np.int64)
    vals = np.empty((n_rows, count), dtype=np.float32)
    unsure = np.empty(n_rows, dtype=bool)

    chunk = select_rows(scores.shape[1])

    def select_part(part: tuple[int, int]) -> None:
        maxima = group_buffer(scores.shape[1], count)  # one per thread, reused by its chunks
        for start in range(part[0], part[1], chunk):
            stop = min(start + chunk, part[1])
            ids[start:stop], vals[start:stop], unsure[start:stop] = candidates(scores[start:stop], count, maxima, clip)

    chunks = -(-n_rows // chunk)
    per_thread = -(-chunks // max(1, threads)) * chunk  # contiguous parts in whole chunks, one per thread
    parts = [(start, min(start + per_thread, n_rows)) for start in range(0, n_rows, per_thread)]
    if len(parts) > 1:
        # numpy lets go of the GIL in these loops, so threads share the selection out over the cores
        from concurrent.futures import ThreadPoolExecutor  # 5 ms to import: only where there is work to share
        with ThreadPoolExecutor(len(parts)) as pool:
            list(pool.map(select_part, parts))
    elif parts:
        select_part(parts[0])
    for row in np.flatnonzero(unsure):
        ids[row], vals[row] = exact_row(scores[row], count, clip)
    return ids, vals


def group_count(width: int, count: int) -> int:
    """Column groups G for rows of `width` (0: too few to gain over a partial sort of the row): about
    4 sqrt(V (count + 1)) (measured fastest; fewer groups mean a longer gather of candidates, more a longer
    partition of the group maxima), and a whole number of columns per group, so the columns past the groups,
    always candidates, are fewer than a group's."""
    per_group = width // max(1, int(4 * np.sqrt(width * (count + 1))))
    groups = width // per_group if per_group else 0
    return groups if per_group >= 4 and groups >= 2 * (count + 1) else 0


def select_rows(width: int) -> int:
    """Rows of a score block selected at a time."""
    return max(MIN_SELECT_ROWS, SELECT_SCORES // max(1, width))


def group_buffer(width: int, count: int) -> np.ndarray | None:
    """Room for the group maxima of select_rows(width) rows (a few hundred KB: it stays in the core's cache)."""
    groups = group_count(width, count)
    return np.empty((select_rows(width), groups), dtype=np.float32) if groups else None


def candidates(scores: np.ndarray, count: int, maxima: np.ndarray | None = None,
               clip: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Top count columns per row of a float32 block (count < columns), ties by id: (ids, scores, unsure).

    Wide rows use group maxima: column c < R G belongs to group c % G (R columns each); the count best
    groups hold every column above the count-th best group maximum, so only their columns and the few past
    R G need a partial sort. The maxima take one read of the block, G columns at a time into `maxima`
    (from group_buffer; made here when not given), which a few dozen rows at a time keeps in cache.
    """
    n_rows, width = scores.shape
    groups = group_count(width, count)
    if not groups:
        part = top_columns(scores, count + 1)
        ids, vals, unsure, _ = finalise(part, np.take_along_axis(scores, part, axis=1), count, False, clip)
        return ids, vals, unsure
    per_group = width // groups
    if maxima is None or maxima.shape[0] < n_rows or maxima.shape[1] != groups:
        maxima = np.empty((n_rows, groups), dtype=np.float32)
    group_max = maxima[:n_rows]
    np.copyto(group_max, scores[:, :groups])
    for start in range(groups, per_group * groups, groups):
        np.maximum(group_max, scores[:, start:start + groups], out=group_max)
    threshold = np.partition(group_max, groups - count, axis=1)[:, groups - count]  # the count-th best maximum
    reached = group_max >= threshold[:, None]
    found = reached.sum(axis=1)
    # More groups reaching the threshold than were kept: a tie may sit outside, so the row is redone (as is
    # one with a NaN score, which leaves fewer). A threshold at or past +-1 is redone too: clipped, columns
    # that round past 1 (twins of the query) tie with it, and the lower column must win.
    tied = (found != count) | (threshold >= 1.0) | (threshold <= -1.0) if clip else found != count
    group_ids = np.nonzero(reached)[1]
    if tied.any():  # count groups of each row, whichever: the row is redone anyway
        first = np.cumsum(found) - found
        best_groups = group_ids[np.clip(first[:, None] + np.arange(count), 0, max(0, group_ids.size - 1))] \
            if group_ids.size else np.zeros((n_rows, count), dtype=np.int64)
    else:
        best_groups = group_ids.reshape(n_rows, count)
    offsets = np.arange(per_group, dtype=np.int64) * groups
    cand = (best_groups[:, :, None] + offsets).reshape(n_rows, -1)
    tail = np.arange(per_group * groups, width, dtype=np.int64)
    if tail.size:
        cand = np.concatenate([cand, np.broadcast_to(tail, (n_rows, tail.size))], axis=1)
    cand_scores = np.take_along_axis(scores, cand, axis=1)
    part = top_columns(cand_scores, count + 1)
    ids, vals, unsure, _ = finalise(np.take_along_axis(cand, part, axis=1),
                                    np.take_along_axis(cand_scores, part, axis=1), count, False, clip)
    return ids, vals, unsure | tied


def column_top(scores: np.ndarray, count: int, threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """select_top for the columns of a block: the top count rows of each column (count < rows), ties to the lower
    row: (ids, scores), one line per column. Rows are grouped by row % G and the groups' maxima taken over whole
    rows at a time (contiguous, so it costs one read of the block); only those maxima are turned over (copied
    transposed), never the block."""
    n_rows, width = scores.shape
    if count + 1 >= n_rows or not group_count(n_rows, count):
        return select_top(turned_over(scores), count, threads)
    ids = np.empty((width, count), dtype=np.int64)
    vals = np.empty((width, count), dtype=np.float32)
    unsure = np.empty(width, dtype=bool)

    def select_part(part: tuple[int, int]) -> None:
        for low in range(part[0], part[1], SELECT_COLUMNS):  # a few at a time: the maxima stay small
            high = min(low + SELECT_COLUMNS, part[1])
            ids[low:high], vals[low:high], unsure[low:high] = column_candidates(scores[:, low:high], count)

    chunks = -(-width // SELECT_COLUMNS)
    share = -(-chunks // max(1, threads)) * SELECT_COLUMNS  # whole chunks per thread
    parts = [(low, min(low + share, width)) for low in range(0, width, share)]
    if len(parts) > 1:
        from concurrent.futures import ThreadPoolExecutor  # 5 ms to import: only where there is work to share
        with ThreadPoolExecutor(len(parts)) as pool:
            list(pool.map(select_part, parts))
    else:
        select_part(parts[0])
    for column in np.flatnonzero(unsure):
        ids[column], vals[column] = exact_row(scores[:, column], count)
    return ids, vals


def column_candidates(scores: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """candidates() for each column of a block (rows as the candidates), the group maxima made row-wise."""
    n_rows, width = scores.shape
    groups = group_count(n_rows, count)
    per_group = n_rows // groups
    group_max = np.maximum(scores[:groups], scores[groups:2 * groups])
    for start in range(2 * groups, per_group * groups, groups):
        np.maximum(group_max, scores[start:start + groups], out=group_max)
    by_column = turned_over(group_max)  # (width, groups): small beside the block
    part = np.argpartition(by_column, groups - count - 1, axis=1)
    best_groups = part[:, groups - count:]
    threshold = np.take_along_axis(by_column, best_groups, axis=1).min(axis=1)  # the count-th best maximum
    runner_up = np.take_along_axis(by_column, part[:, groups - count - 1:groups - count], axis=1)[:, 0]
    # as in candidates(): a tie at the threshold, or one at or past +-1, sends the column to be redone
    tied = (runner_up == threshold) | (threshold >= 1.0) | (threshold <= -1.0)
    cand = (best_groups[:, :, None] + np.arange(per_group, dtype=np.int64) * groups).reshape(width, -1)
    tail = np.arange(per_group * groups, n_rows, dtype=np.int64)
    if tail.size:
        cand = np.concatenate([cand, np.broadcast_to(tail, (width, tail.size))], axis=1)
    cand_scores = scores[cand, np.arange(width)[:, None]]
    top = top_columns(cand_scores, count + 1)
    ids, vals, unsure, _ = finalise(np.take_along_axis(cand, top, axis=1),
                                    np.take_along_axis(cand_scores, top, axis=1), count, False)
    return ids, vals, unsure | tied


SELECT_COLUMNS = 256  # columns of a block selected at a time by column_top (its index arrays stay small)
TURN_ROWS = 16  # rows turned over at a time: their pages stay in the TLB


def turned_over(block: np.ndarray) -> np.ndarray:
    """The block transposed into a fresh C-ordered array, a few rows at a time (numpy's own strided copy walks
    a new page for every element)."""
    out = np.empty((block.shape[1], block.shape[0]), dtype=block.dtype)
    for start in range(0, block.shape[0], TURN_ROWS):
        out[:, start:start + TURN_ROWS] = block[start:start + TURN_ROWS].T
    return out


def top_columns(scores: np.ndarray, count: int) -> np.ndarray:
    """Indices of the count largest values of each row, in no order (ties cut arbitrarily)."""
    width = scores.shape[1]
    return np.argpartition(scores, width - count, axis=1)[:, width - count:]

