"""Dominance of bound vectors by a Pareto front, within a rounding tolerance (several objectives, issue #12).

Shared by the mapper's branch and bound (`mapper.bounds`) and the targets that leave out runs of
structures a front dominates (`costmodels.trainium.front_cells`).
"""

from __future__ import annotations

import numpy as np

#: relative tolerance of a bound test (float rounding between the scorer and the roofline)
RTOL = 1e-9


def dominated_rows(rows: np.ndarray, front: np.ndarray) -> np.ndarray:
    """Which `rows` (n x objectives) a row of `front` is no worse than everywhere (beyond `RTOL`).

    A row with a non-finite first entry has no feasible point (an infeasible cell): counted as
    dominated. Two objectives: the front sorted by the first, a running minimum of the second, one
    binary search per row; more: a comparison with every front point.
    """
    out = ~np.isfinite(rows[:, 0])
    lim = rows * (1 + RTOL)
    if front.shape[1] == 2:
        order = np.argsort(front[:, 0], kind="stable")
        first, least_second = front[order, 0], np.minimum.accumulate(front[order, 1])
        at = np.searchsorted(first, lim[:, 0], side="right")  # front points no worse on the first objective
        ok = at > 0
        out[ok] |= least_second[at[ok] - 1] <= lim[ok, 1]
        return out
    return out | np.all(front[None, :, :] <= lim[:, None, :], axis=2).any(axis=1)
