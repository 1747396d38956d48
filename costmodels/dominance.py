"""Dominance of bound vectors by a Pareto front, within a rounding tolerance (several objectives, issue #12).

Shared by the mapper's branch and bound (`mapper.bounds`) and the targets that leave out runs of
structures a front dominates (`costmodels.trainium.front_cells`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

#: relative tolerance of a bound test (float rounding between the scorer and the roofline)
RTOL = 1e-9


def dominated_rows(rows: np.ndarray, front: np.ndarray) -> np.ndarray:
    """Which `rows` (n x objectives) a row of `front` is no worse than everywhere (beyond `RTOL`).

    A row with a non-finite first entry has no feasible point (an infeasible cell): counted as
    dominated. Two objectives: the front sorted by the first, a running minimum of the second, one
    binary search per row (`dominated_columns`); more: a comparison with every front point.
    """
    if front.shape[1] == 2:
        return dominated_columns(rows[:, 0], rows[:, 1], front)
    lim = rows * (1 + RTOL)
    return ~np.isfinite(rows[:, 0]) | np.all(front[None, :, :] <= lim[:, None, :], axis=2).any(axis=1)


def dominated_columns(first: np.ndarray, second: np.ndarray, front: np.ndarray) -> np.ndarray:
    """`dominated_rows` of two objectives given as two columns (numpy's operations along rows of two entries are
    slow: a caller that keeps its rows' columns apart saves gathering rows)."""
    order = np.argsort(front[:, 0], kind="stable")
    # the least second objective of the front's first i points (by the first objective) at i; at 0 (no point no
    # worse on the first objective) nan, which no comparison passes
    least_second = np.concatenate(([np.nan], np.minimum.accumulate(front[order, 1])))
    at = np.searchsorted(front[order, 0], first * (1 + RTOL), side="right")  # front points no worse on the first
    out = least_second[at] <= second * (1 + RTOL)
    out |= ~np.isfinite(first)
    return out


def finite_rows(rows: np.ndarray) -> np.ndarray:
    """Which rows (n x objectives) have every entry finite: ``np.isfinite(rows).all(axis=1)``, column by column
    (a reduction along rows of two or three entries is slow in numpy: 3.4 ms against 0.12 ms for 270,000 rows of
    two, measured once by hand outside `bench/`)."""
    out = np.isfinite(rows[:, 0])
    for j in range(1, rows.shape[1]):
        out &= np.isfinite(rows[:, j])
    return out


class ScreenedCells(NamedTuple):
    """A structure's cells screened against a front (`mapper.bound_hooks.FrontCellScreened`): the rows (cells x
    objectives) and which of them are the cells' own vectors (the others stand for cells the front dominates)."""

    cells: np.ndarray
    own: np.ndarray
