"""A first visit's points priced in two steps (several objectives, issue #12).

The first structure a best-first search visits meets no front: every one of its cells is open, and all
its points would be priced (an Ascend structure: up to 162,000). Priced in two steps instead, the points
of its cells on the staircase of their rows (`FrontBounds.staircase_points`: where its best points are
likeliest) first, their front then leaves out the structure's other points whose cell rows or own floors
it dominates (`FrontBounds.live_points`), and only the rest are priced. A point left out is dominated by,
or has the values of, a priced point of the same structure, so the structure's front is the same.
"""

from __future__ import annotations

import numpy as np

from costmodels.dominance import finite_rows
from costmodels.protocol import BatchScore, Choice, Target
from mapper.bounds import FrontBounds
from mapper.enumerate import scored_values
from mapper.pareto import pareto_front
from workload.problem import Problem


def staircase_first(
    target: Target,
    problem: Problem,
    front_bounds: FrontBounds,
    fixed: dict[str, Choice],
    codes: dict[str, np.ndarray],
) -> tuple[dict[str, np.ndarray], int, BatchScore] | None:
    """The points of the structure `fixed` (`codes`) to price, how many are left out, and their scores, in the
    order of `codes`; None where the target places no points in cells or every cell is on the staircase."""
    first = front_bounds.staircase_points(fixed, codes)
    if first is None or first.all() or not first.any():
        return None
    objectives = front_bounds.objectives
    sel = np.flatnonzero(first)
    seed_score = target.score_codes(problem, {k: np.asarray(v)[sel] for k, v in codes.items()})
    values = scored_values(seed_score, objectives)
    ok = np.flatnonzero(finite_rows(values))
    live = None if not ok.size else front_bounds.live_points(fixed, values[ok][pareto_front(values[ok])], codes)
    rest = np.flatnonzero(~first if live is None else live & ~first)
    rest_score = target.score_codes(problem, {k: np.asarray(v)[rest] for k, v in codes.items()})
    both = np.concatenate([sel, rest])
    order = np.argsort(both, kind="stable")  # the points in the structure's own order (ties keep the first)
    feasible = np.concatenate([np.asarray(s.feasible, dtype=bool) for s in (seed_score, rest_score)])
    scores = {
        o: np.concatenate([np.asarray(seed_score.objectives[o]), np.asarray(rest_score.objectives[o])])[order]
        for o in seed_score.objectives
    }
    picked = both[order]
    n = len(first)
    priced = BatchScore(feasible=feasible[order], objectives=scores)
    return {k: np.asarray(v)[picked] for k, v in codes.items()}, n - picked.size, priced
