"""Picking the top columns of float32 score blocks on the host, ties to the lower column: the selection
the numpy and cpu-bf16 engines share. -inf marks a column left out (the query itself, an excluded row)."""

from __future__ import annotations

import numpy as np

# Rows of a score block selected at a time: keeps the index temporaries small beside the block.
SELECT_ROWS = 1024


def clip_cosines(scores: np.ndarray) -> np.ndarray:
    """Clip to [-1, 1] in place, but keep -inf: it marks a column left out."""
    np.minimum(scores, 1.0, out=scores)
    np.maximum(scores, -1.0, out=scores, where=scores > -np.inf)
    return scores


def finalise(cand_ids: np.ndarray, cand_scores: np.ndarray, count: int,
             complete: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Order candidates by (score desc, id asc) and keep count of them.

    Candidates must hold the top-m columns by score (ties cut arbitrarily). Returns
    (ids, scores, unsure, order): unsure rows may have lost a tied neighbour to the cut and must be
    redone on the full row (never when the candidates are complete); order[:, :count] says which
    candidate each kept column came from.
    """
    clip_cosines(cand_scores)
    order = np.lexsort((cand_ids, -cand_scores), axis=-1)
    ids = np.take_along_axis(cand_ids, order, axis=1)
    scores = np.take_along_axis(cand_scores, order, axis=1)
    if complete or count == 0:
        unsure = np.zeros(ids.shape[0], dtype=bool)
    else:
        unsure = scores[:, -1] == scores[:, count - 1]
    return ids[:, :count], scores[:, :count], unsure, order


def exact_row(row_scores: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Top count of one full row with ties by id; the slow path for tie-heavy rows."""
    row = clip_cosines(np.array(row_scores, dtype=np.float32))
    threshold = np.partition(row, row.size - count)[row.size - count]
    cand = np.flatnonzero(row >= threshold)
    order = np.lexsort((cand, -row[cand]))[:count]
    return cand[order], row[cand[order]]


def every_column(scores: np.ndarray) -> np.ndarray:
    return np.broadcast_to(np.arange(scores.shape[1], dtype=np.int64), scores.shape).copy()


def select_top(scores: np.ndarray, count: int, threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Top count columns of each row of a float32 block, ties to the lower column: (ids, scores).

    Rows whose cut falls among tied scores are redone on the full row; when count reaches the width
    (less one) every column is ranked. threads: how many share the rows out.
    """
    if count + 1 >= scores.shape[1]:
        ids, vals, _, _ = finalise(every_column(scores), scores.copy(), count, True)
        return ids, vals
    step = min(SELECT_ROWS, -(-scores.shape[0] // threads))
    chunks = [scores[i:i + step] for i in range(0, scores.shape[0], step)]
    if threads > 1 and len(chunks) > 1:
        # numpy lets go of the GIL in these loops, so threads share the selection out over the cores
        from concurrent.futures import ThreadPoolExecutor  # 5 ms to import: only where there is work to share
        with ThreadPoolExecutor(threads) as pool:
            parts = list(pool.map(candidates, chunks, [count] * len(chunks)))
    else:
        parts = [candidates(chunk, count) for chunk in chunks]
    ids, vals, unsure = (np.concatenate(p) for p in zip(*parts))
    for row in np.flatnonzero(unsure):
        ids[row], vals[row] = exact_row(scores[row], count)
    return ids, vals


def candidates(scores: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Top count columns per row of a float32 block (count < columns), ties by id: (ids, scores, unsure).

    Wide rows use group maxima: column c belongs to group c % G; the count best groups hold every
    column above the count-th best group maximum, so only their R = V // G columns (plus the tail past
    R * G) need a partial sort. This reads the block about twice instead of argpartition's many passes.
    """
    n_rows, width = scores.shape
    # G about 4 sqrt(V (count + 1)): measured fastest (V 32k..128k, count 10..100); fewer groups mean a
    # longer gather of candidates, more mean a longer partition of the group maxima
    groups = 1 << int(np.log2(max(1.0, 4 * np.sqrt(width * (count + 1)))))
    per_group = width // groups
    if groups < 2 * (count + 1) or per_group < 4:
        part = top_columns(scores, count + 1)
        ids, vals, unsure, _ = finalise(part, np.take_along_axis(scores, part, axis=1), count, False)
        return ids, vals, unsure
    body = np.lib.stride_tricks.as_strided(
        scores, shape=(n_rows, per_group, groups),
        strides=(scores.strides[0], groups * scores.strides[1], scores.strides[1]),
        writeable=False)
    group_max = body.max(axis=1)
    best_groups = top_columns(group_max, count)
    threshold = np.take_along_axis(group_max, best_groups, axis=1).min(axis=1)
    # More groups reaching the threshold than were kept: a tie may sit outside; redo the row.
    tied_groups = (group_max >= threshold[:, None]).sum(axis=1) > count
    offsets = np.arange(per_group, dtype=np.int64) * groups
    cand = (best_groups[:, :, None] + offsets[None, None, :]).reshape(n_rows, -1)
    tail = np.arange(per_group * groups, width, dtype=np.int64)
    if tail.size:
        cand = np.concatenate([cand, np.broadcast_to(tail, (n_rows, tail.size))], axis=1)
    cand_scores = np.take_along_axis(scores, cand, axis=1)
    part = top_columns(cand_scores, count + 1)
    ids, vals, unsure, _ = finalise(np.take_along_axis(cand, part, axis=1),
                                    np.take_along_axis(cand_scores, part, axis=1), count, False)
    return ids, vals, unsure | tied_groups


def top_columns(scores: np.ndarray, count: int) -> np.ndarray:
    """Indices of the count largest values of each row, in no order (ties cut arbitrarily)."""
    width = scores.shape[1]
    return np.argpartition(scores, width - count, axis=1)[:, width - count:]


def mark_left_out(values: np.ndarray, cand: np.ndarray, lines: np.ndarray, columns: np.ndarray) -> None:
    """Set values to -inf where a line's candidate is a column that line must leave out."""
    hit_line, hit_at = np.nonzero(cand[lines] == columns[:, None])
    values[lines[hit_line], hit_at] = -np.inf
