"""The fronts the cell rounds keep: a round's points against the front, and each structure's own front (issue #12).

Helpers of `mapper.strategies.cell_rounds`, two objectives: `grown` grows the front by a round's points and says
which to keep for their structures' outcomes, `strictly_dominated` is the exact test it uses, and `fronts_by_owner`
finds every structure's front from its kept points in one sort.
"""

from __future__ import annotations

import numpy as np

from costmodels.dominance import finite_rows
from mapper.pareto import pareto_front


def grown(
    front: np.ndarray | None, values: np.ndarray, owner: np.ndarray, at: int, grow: bool = True
) -> tuple[np.ndarray | None, np.ndarray]:
    """The front grown by a round's `values` (infeasible: inf), and which of them to keep for their structures'
    outcomes: those no point of the grown front beats (strictly dominates: they may join the final front, or tie
    with it), each structure's first point (its violations', should none of its points be feasible) and first
    feasible point (its outcome's, should every feasible one be beaten). A point dropped here is strictly
    dominated by a point of this front, and so of every later front (each of whose points is at most as good as
    one of this front's points, the front only growing): it can be on no structure's contribution to the final
    front. `grow` False: `front` is the final front, taken as it is."""
    grown = front
    # the points the front before the round strictly beats first (most of a round's, against a short front): they
    # are strictly beaten by the grown front too, and cannot be on it, so only the others enter its sort
    old = front if front is not None and len(front) else None
    keep = finite_rows(values) if old is None else ~strictly_dominated(values, old)  # (inf: beaten)
    if grow:
        rest = values[keep]
        both = rest if front is None else np.concatenate([front, rest])
        grown = both[pareto_front(both)] if finite_rows(both).any() else front
    if grown is not None and len(grown) and grown is not front:
        sel = np.flatnonzero(keep)
        keep[sel] = ~strictly_dominated(values[sel], grown)
    keep[firsts(owner)] = True
    fin = np.flatnonzero(np.isfinite(values[:, at]))
    keep[fin[firsts(owner[fin])]] = True
    return grown, keep


def fronts_by_owner(owner: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The positions of each structure's two-objective front among rows sorted by `owner` (ascending), in owner
    order and within an owner by ascending first objective: `pareto_front` of each owner's rows, the first of equal
    rows in row order kept, non-finite rows never on it. One sort for every owner: within an owner the rows are
    taken by (first, second, row) and one is on the front when its second objective is below every earlier one's;
    a running minimum over every owner at once holds each owner's own when its keys sit below every earlier
    owner's (the second objective's rank, offset by owner, the later owners lower)."""
    fin = np.flatnonzero(finite_rows(values))
    if not fin.size:
        return fin
    own, v0, v1 = owner[fin], values[fin, 0], values[fin, 1]
    rank = np.unique(v1, return_inverse=True)[1].reshape(-1).astype(np.int64)  # equal values, equal ranks
    key = (int(own.max()) + 1 - own.astype(np.int64)) * (int(rank.max()) + 2) + rank
    order = np.lexsort((fin, v1, v0, own))
    key = key[order]
    before = np.concatenate(([np.iinfo(np.int64).max], np.minimum.accumulate(key)[:-1]))
    return fin[order[key < before]]


def firsts(owner: np.ndarray) -> np.ndarray:
    """The position of each structure's first entry in `owner` (runs of structures: a cell's points)."""
    runs = np.flatnonzero(np.diff(owner, prepend=-1) != 0)  # every first entry starts a run
    return runs[np.unique(owner[runs], return_index=True)[1]]


def strictly_dominated(values: np.ndarray, front: np.ndarray) -> np.ndarray:
    """Which rows of `values` a row of `front` is at most everywhere and below somewhere (exactly: no tolerance).
    Rows with a non-finite entry count as dominated. Two objectives: the front sorted by the first and a running
    minimum of the second, two binary searches per row; more: a comparison with every front point."""
    out = ~finite_rows(values)
    if front.shape[1] == 2:  # (column by column, every row: the non-finite ones are out already)
        v0, v1 = values[:, 0], values[:, 1]
        order = np.argsort(front[:, 0], kind="stable")
        least = np.concatenate(([np.inf], np.minimum.accumulate(front[order, 1])))  # of the first i points, at i
        out |= least[np.searchsorted(front[order, 0], v0, side="left")] <= v1  # f0 < v0, f1 <= v1
        out |= least[np.searchsorted(front[order, 0], v0, side="right")] < v1  # f0 <= v0, f1 < v1
        return out
    at = np.flatnonzero(~out)
    rows = values[at]
    for lo in range(0, len(rows), 4096):  # (bounded memory: 4,096 rows x front x objectives at a time)
        part = rows[lo : lo + 4096, None, :]
        out[at[lo : lo + 4096]] = (np.all(front[None] <= part, axis=2) & np.any(front[None] < part, axis=2)).any(axis=1)
    return out
