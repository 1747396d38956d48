"""The exact Pareto front of values (points x objectives, minimised): one point per distinct value.

Two objectives take one sort and a running minimum (`_front2`); more drop the rows that anchors dominate
(`_weighted_anchors`) and compare the distinct rows left a block at a time (`_front_sorted`). Shared by the
enumeration (`mapper.enumerate`), the search strategies and the bounds.
"""

from __future__ import annotations

import numpy as np

from costmodels.dominance import finite_rows


def pareto_front(values: np.ndarray, order: np.ndarray | None = None) -> np.ndarray:
    """Indices of the exact Pareto front of `values` (points x objectives, minimised), one per distinct value.

    Rows with a non-finite entry are never on the front. Of several rows with the same value
    vector one represents them all: the one first in `order` (a permutation of the row indices,
    e.g. by point number; default: the row order), so the front has no duplicate entries and its
    representatives do not depend on how the rows arrived. Two objectives take one sort and a
    running minimum; more drop the rows anchors dominate (`_weighted_anchors`) and compare the distinct rows left
    a block at a time (`_front_sorted`).
    """
    k = values.shape[1]
    if k == 2 and order is None:  # the common case, column by column (a reduction along rows of 2 is slow)
        a, b = values[:, 0], values[:, 1]
        fin = np.isfinite(a) & np.isfinite(b)
        if fin.all():
            return _front2(a, b)
        if not fin.any():
            return np.flatnonzero(fin)
        return _front2(np.where(fin, a, np.inf), np.where(fin, b, np.inf))  # never on the front: no finite bound
    if order is None:
        rows = np.flatnonzero(finite_rows(values))
    else:
        rows = np.asarray(order)
        rows = rows[finite_rows(values[rows])]
    if rows.size == 0 or k == 1:
        return rows[np.argmin(values[rows, 0])][None] if rows.size else rows
    if k == 2:
        return rows[_front2(values[rows, 0], values[rows, 1])]
    v = values[rows]
    keep = np.ones(len(rows), dtype=bool)  # O(n) prefilter: drop rows an anchor dominates (anchor j: the
    for j in range(k):  # lexicographic minimum with objective j first, itself on the front)
        cand = np.flatnonzero(v[:, j] == v[:, j].min())
        a = v[cand[np.lexsort(v[cand].T[::-1])[0]]]
        keep &= ~(np.all(v >= a, axis=1) & np.any(v > a, axis=1))
    rows, v = rows[keep], v[keep]
    if len(rows) > FRONT_BLOCK:  # more anchors: each row least in a positive weighting of the objectives
        rows, v = _weighted_anchors(rows, v)
    uniq, first = np.unique(v, axis=0, return_index=True)  # sorted by objective 1, then 2, ...
    return rows[first[_front_sorted(uniq)]]


#: positive weightings of the objectives whose least rows `_weighted_anchors` takes as anchors
ANCHOR_WEIGHTS = np.random.default_rng(0).dirichlet(np.ones(8), size=32) + 1e-3


def _weighted_anchors(rows: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop the rows dominated by an anchor: a row least in a weighted sum of the objectives (each scaled to
    its range) with every weight positive. Such a row is on the front (a row that dominated it would have a
    lower sum), so every row it dominates is off it. The weightings are fixed: the result does not depend on
    them, only the work."""
    k = v.shape[1]
    low, high = v.min(axis=0), v.max(axis=0)
    z = (v - low) / np.where(high > low, high - low, 1.0)
    w = ANCHOR_WEIGHTS[:, :k] if k <= ANCHOR_WEIGHTS.shape[1] else np.ones((1, k))
    for a in v[np.unique(np.argmin(z @ w.T, axis=0))]:  # (the rows left shrink with each anchor)
        keep = ~(np.all(v >= a, axis=1) & np.any(v > a, axis=1))
        rows, v = rows[keep], v[keep]
    return rows, v


#: rows of `_front_sorted` compared at once (a block against the front so far, and within itself)
FRONT_BLOCK = 256


def _front_sorted(uniq: np.ndarray) -> np.ndarray:
    """Positions of the rows of `uniq` (distinct, in lexicographic order) that no other row dominates.

    Distinct rows: one at most another everywhere dominates it, and comes before it in lexicographic
    order. A `FRONT_BLOCK` of rows is compared in numpy with the front of the rows before it, and the rows
    it leaves with each other: a row is dominated when a row of either is at most it everywhere (a row of
    the block dominated only through a row the front dominates is dominated by that front row too).
    Replaces a Python pass over the rows, which took 17 of 19 s of a best-first search with three
    objectives (ascend-910b, a 3x13x31x31 conv, profiled once outside `bench/`).
    """
    front = uniq[:0]
    out: list[np.ndarray] = []
    for lo in range(0, len(uniq), FRONT_BLOCK):
        block = uniq[lo : lo + FRONT_BLOCK]
        keep = np.arange(len(block))
        if len(front):  # the front before the block first: the rows it leaves are compared with each other
            keep = np.flatnonzero(~np.all(front[None, :, :] <= block[:, None, :], axis=2).any(axis=1))
        rest = block[keep]
        le = np.all(rest[:, None, :] <= rest[None, :, :], axis=2)  # le[u, v]: row u at most row v everywhere
        np.fill_diagonal(le, False)
        keep = keep[~le.any(axis=0)]
        out.append(lo + keep)
        front = np.concatenate([front, block[keep]])
    return np.concatenate(out) if out else np.zeros(0, dtype=np.intp)


def _front2(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Positions of the two-objective front of columns `a`, `b`: the first of each distinct pair.

    Not-finite entries must be +inf (a row with one is then never on the front, some row being finite).

    Every front point has ``a <= a[B]`` (B: the least ``a``, then least ``b``) and ``b <= b[A]`` (A: the
    least ``b``, then least ``a``): two comparisons leave a few candidates, sorted stably by (a, b);
    a candidate is on the front when its ``b`` is below every ``b`` sorted before it.
    """
    a_min, b_min = a.min(), b.min()
    b_of_best_a = b[a == a_min].min()
    a_of_best_b = a[b == b_min].min()
    cand = np.flatnonzero((a <= a_of_best_b) & (b <= b_of_best_a))
    ca, cb = a[cand], b[cand]
    s = np.lexsort((cb, ca))  # stable: equal pairs keep their order
    second = cb[s]
    before = np.minimum.accumulate(np.concatenate(([np.inf], second[:-1])))
    return cand[s[second < before]]


def pareto_mask(values: np.ndarray) -> np.ndarray:
    """Rows of `values` (points x objectives, minimised) that no other row dominates.

    Duplicated rows are all kept (see `pareto_front` for one row per distinct value). Rows with a
    non-finite entry are never on the front.
    """
    mask = np.zeros(values.shape[0], dtype=bool)
    front = pareto_front(values)
    if front.size:
        on = values[front]
        mask = (
            np.any(np.all(values[:, None, :] == on[None, :, :], axis=2), axis=1)
            if len(on) < 256
            else _rows_in(values, on)
        )
    return mask


def _rows_in(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    keys = {tuple(r) for r in rows.tolist()}
    return np.fromiter((tuple(r) in keys for r in values.tolist()), dtype=bool, count=values.shape[0])


def row_gaps(front: np.ndarray, rows: np.ndarray, block: int = 4096) -> np.ndarray:
    """Each row's gap to `front` (both points x objectives, minimised, values >= 0): the least ``g >= 0`` such that
    some front row is at most ``(1 + g)`` times it on every objective (the front's multiplicative epsilon-indicator
    against the row). When a row bounds some points from below (a cell's floors), the front is within ``g`` of each
    of them. ``inf`` where a row is 0 and every front row is positive there, or `front` is empty.

    Two objectives with positive values take a search along the front's staircase: sorted by the first objective,
    ``f1 / r1`` rises and ``f2 / r2`` falls, so the least of their larger is where they cross (``f1 / f2`` against
    ``r1 / r2``, rising along the staircase). Others compare each row with every front row, a block at a time."""
    out = np.full(len(rows), np.inf)
    if not len(front) or not len(rows):
        return out
    positive = (front > 0).all() and np.isfinite(front).all() and front.shape[1] == 2
    easy = (rows > 0).all(axis=1) & np.isfinite(rows).all(axis=1) if positive else np.zeros(len(rows), dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # (a ratio beyond float range: inf)
        stairs = front[pareto_front(front)] if easy.any() else front[:0]
        stairs = stairs[np.argsort(stairs[:, 0], kind="stable")]
        keys = stairs[:, 0] / stairs[:, 1]
        # the search needs every slope f1 / f2 (and r1 / r2) a finite positive number, rising strictly along the
        # staircase: values near the float limits (a subnormal under a large one) round them to 0, inf or ties,
        # and those rows take the comparison with every front row
        if not (np.isfinite(keys).all() and (keys > 0).all() and (np.diff(keys) > 0).all()):
            easy[:] = False
        with_keys = rows[:, 0] / np.where(easy, rows[:, 1], 1.0)
        easy &= np.isfinite(with_keys) & (with_keys > 0)
        if easy.any():
            r = rows[easy]
            k = np.searchsorted(keys, r[:, 0] / r[:, 1])
            n = len(stairs)
            both = [np.maximum(stairs[np.clip(i, 0, n - 1)] / r, 1.0).max(axis=1) for i in (k, k - 1)]
            out[easy] = np.minimum(both[0], both[1]) - 1.0
        hard = np.flatnonzero(~easy)
        for lo in range(0, len(hard), block):
            at = hard[lo : lo + block]
            ratio = np.where(front[None, :, :] <= rows[at, None, :], 1.0, front[None, :, :] / rows[at, None, :])
            out[at] = ratio.max(axis=2).min(axis=1) - 1.0
    return out
