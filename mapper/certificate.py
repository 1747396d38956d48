"""The certificate of a search: what it scored, bounded out and left, over which space (issue #12).

A search over structures (`mapper.bounds`) ends with some structures scored and some bounded out;
`certify` bounds every other structure now, so the result says what was proved and over which space:
proven optimal when none is left unexplored, else the best remaining bound and the gap it allows.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable

import numpy as np

from costmodels.protocol import Choice, Param, SearchSpace
from mapper.bounds import FrontBounds, StructureBounds
from mapper.pareto import row_gaps
from mapper.result import Certificate

#: remaining structures a target's hook bounds one by one when a search ends (the rest keep the generic bound)
SWEEP_LIMIT = 1 << 16


def least_front_gap(fb: FrontBounds, front: np.ndarray | None, gap: float | None = None) -> float | None:
    """The lesser of `gap` (a search's own front gap, None: none) and the gap of `front` to the whole space's
    bound vector (`FrontBounds.whole`: every feasible point is at least it on every objective, so a front within
    ``g`` of that vector is within ``g`` of every point; `mapper.pareto.row_gaps`). None when neither is finite."""
    if front is not None and len(front):
        whole = np.asarray(fb.whole(), dtype=np.float64)[None, :]
        g = float(row_gaps(np.asarray(front, dtype=np.float64), whole)[0])
        if np.isfinite(g):
            gap = g if gap is None else min(gap, g)
    return gap


def space_text(space: SearchSpace) -> str:
    """The space a certificate covers, in words."""
    dims = ", ".join(f"{p.name} ({len(p.choices)})" for p in space.params)
    return f"the target's search space for this problem: {space.size:,} points, the product of {dims}"


def certify(
    space: SearchSpace,
    bounds: StructureBounds,
    structural: tuple[Param, ...],
    *,
    scored: set[tuple[Choice, ...]],
    pruned: set[tuple[Choice, ...]],
    best: float | None,
    prune: bool = True,
    deadline: float | None = None,
    sweep_limit: int = SWEEP_LIMIT,
    front: np.ndarray | None = None,
    front_bounds: FrontBounds | None = None,
) -> Certificate:
    """The certificate of a search that scored the structures `scored` and bounded out `pruned`.

    Structures are the combinations of the `structural` parameters' choices (keys: their values
    in that order; no structural parameter: one structure, the whole space). Every other structure
    is bounded now: out when its bound is not below `best` (and `prune` is set: a single
    objective), unexplored otherwise. With the generic bound (one value for every structure) this
    is arithmetic; with a target's hook the first `sweep_limit` remaining structures are bounded
    one by one (until `deadline`) and the rest count as unexplored under the generic bound. Several
    objectives: with `front_bounds` and the `front` found (values, points x objectives), a
    structure is out when the front dominates its bound vector (`FrontBounds.dominated`).
    """
    total = math.prod(len(p.choices) for p in structural)
    n_pruned, left = len(pruned), total - len(scored) - len(pruned)
    unexplored, lowest = 0, math.inf
    if left > 0:
        is_out: Callable[[dict[str, Choice]], bool] | None = None
        whole_out, per = False, False
        if front_bounds is not None and front is not None and len(front):  # several objectives
            fb, fr = front_bounds, front
            whole_out, per = FrontBounds.dominated(fb.whole(), fr), fb.per_structure
            is_out = lambda fixed: fb.out(fixed, fr)  # noqa: E731
        elif prune and best is not None:
            b_best = best
            whole_out, per = StructureBounds.bounded_out(bounds.whole(), b_best), bounds.per_structure
            is_out = lambda fixed: StructureBounds.bounded_out(bounds(fixed), b_best)  # noqa: E731
        if whole_out:
            n_pruned += left
        elif is_out is None or not per:
            unexplored, lowest = left, bounds.whole()
        else:
            seen = 0
            for key in itertools.product(*(p.choices for p in structural)):
                if key in scored or key in pruned:
                    continue
                if seen >= sweep_limit or (deadline is not None and time.perf_counter() > deadline):
                    break
                seen += 1
                fixed = dict(zip((p.name for p in structural), key, strict=True))
                if is_out(fixed):
                    n_pruned += 1
                else:
                    unexplored, lowest = unexplored + 1, min(lowest, bounds(fixed))
            if seen < left:  # not bounded one by one: the generic bound holds for them
                unexplored, lowest = unexplored + left - seen, min(lowest, bounds.whole())
    remaining = lowest if unexplored and lowest > 0 else None
    gap: float | None = None
    if best is not None:
        if unexplored == 0:
            gap = 0.0
        elif remaining is not None:
            gap = max(0.0, best / remaining - 1)
    front_gap = None
    if front_bounds is not None and unexplored:  # several objectives, cut short: how close the front is proven
        front_gap = least_front_gap(front_bounds, front)
    return Certificate(
        front_gap=front_gap,
        space=space_text(space),
        space_points=space.size,
        objective=bounds.objective,
        structures_total=total,
        inner_points=space.size // max(total, 1),
        scored=len(scored),
        pruned_by_bound=n_pruned,
        unexplored=unexplored,
        best=best,
        best_remaining_bound=remaining,
        gap_bound=gap,
        bound_source=front_bounds.source if front_bounds is not None else bounds.source,
    )
