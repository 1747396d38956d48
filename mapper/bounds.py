"""Admissible lower bounds of a space's structures, and the certificate they give a search.

A large space is searched by *structures*: Optuna fixes the structural parameters, numpy scores
the remaining sub-space exactly. `StructureBounds` gives each structure a latency bound in
seconds that no feasible point of its sub-space beats:

- the target's own `costmodels.structure_bound.StructureBounded.structure_bound` when it has one (a
  family tightens the bound with its fixed choices applied);
- otherwise the generic bound ``target.lower_bound(problem).cycles / clock_hz``: the whole
  problem's roofline. It is admissible for every structure without any family code, because
  every feasible point of the space is a point of the whole problem, and a target's cost never
  beats its roofline (``cost.cycles >= lower_bound.cycles``, held by the conformance suite for
  every preset: `tests/costmodels/test_conformance.py`); the cycles are turned into seconds at
  the clock the target prices its mappings with (`CostReport.clock_hz`, one per target), so
  ``seconds = cycles / clock_hz >= lower_bound.cycles / clock_hz``. Loose: it prunes a structure
  only once the best found reaches the roofline, which then bounds out every structure at once.

Only latency has bounds; for any other objective the bound is 0 (trivially admissible: no cost
is negative), so nothing is pruned. A structure is *bounded out* when ``bound * (1 + RTOL) >=
best``: none of its points can be better than the best by more than the relative tolerance
`RTOL` (the same tolerance the ``lower-bound`` stop uses).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable

from costmodels.protocol import Choice, Param, SearchSpace, Target
from costmodels.structure_bound import StructureBounded
from mapper.result import Certificate
from workload.problem import Problem

#: relative tolerance of a bound test (float rounding between the scorer and the roofline)
RTOL = 1e-9
#: remaining structures a target's hook bounds one by one when a search ends (the rest keep the generic bound)
SWEEP_LIMIT = 1 << 16


class StructureBounds:
    """Latency lower bounds (seconds) of structures of one problem's space on one target."""

    def __init__(self, target: Target, problem: Problem, objective: str) -> None:
        self.target, self.problem, self.objective = target, problem, objective
        hook = target.structure_bound if isinstance(target, StructureBounded) else None
        self._hook: Callable[[Problem, dict[str, Choice]], float] | None = hook if objective == "latency" else None
        self._clock: float | None = None
        self._whole: float | None = None

    @property
    def source(self) -> str:
        """Where the bounds come from, as the certificate states it."""
        if self.objective != "latency":
            return f"none for {self.objective} (0: nothing is pruned)"
        return "target.structure_bound" if self._hook else "target.lower_bound (the whole problem's roofline)"

    @property
    def per_structure(self) -> bool:
        """True when structures can have different bounds (a target hook); False: one bound for all."""
        return self._hook is not None

    def learn_clock(self, point: dict[str, Choice]) -> None:
        """Take the target's clock from a feasible point's cost report (the generic bound needs it)."""
        if self._clock is None:
            self._clock = self.target.cost(self.problem, self.target.mapping(self.problem, point)).clock_hz

    def whole(self) -> float:
        """The generic bound of any structure: the roofline in seconds (0 before a clock is known)."""
        if self.objective != "latency" or self._clock is None:
            return 0.0
        if self._whole is None:
            self._whole = self.target.lower_bound(self.problem).cycles / self._clock
        return self._whole

    def __call__(self, fixed: dict[str, Choice]) -> float:
        """The bound of the structure with these fixed choices (never below the generic bound)."""
        whole = self.whole()
        if self._hook is None:
            return whole
        return max(whole, float(self._hook(self.problem, dict(fixed))))

    @staticmethod
    def bounded_out(bound: float, best: float | None) -> bool:
        """True when no point under `bound` can beat `best` (beyond `RTOL`)."""
        return best is not None and bound * (1 + RTOL) >= best


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
) -> Certificate:
    """The certificate of a search that scored the structures `scored` and bounded out `pruned`.

    Structures are the combinations of the `structural` parameters' choices (keys: their values
    in that order; no structural parameter: one structure, the whole space). Every other structure
    is bounded now: out when its bound is not below `best` (and `prune` is set: a single
    objective), unexplored otherwise. With the generic bound (one value for every structure) this
    is arithmetic; with a target's hook the first `sweep_limit` remaining structures are bounded
    one by one (until `deadline`) and the rest count as unexplored under the generic bound.
    """
    total = math.prod(len(p.choices) for p in structural)
    n_pruned, left = len(pruned), total - len(scored) - len(pruned)
    unexplored, lowest = 0, math.inf
    if left > 0:
        if not prune or best is None:
            unexplored, lowest = left, bounds.whole()
        elif not bounds.per_structure:
            if StructureBounds.bounded_out(bounds.whole(), best):
                n_pruned += left
            else:
                unexplored, lowest = left, bounds.whole()
        else:
            seen = 0
            for key in itertools.product(*(p.choices for p in structural)):
                if key in scored or key in pruned:
                    continue
                if seen >= sweep_limit or (deadline is not None and time.perf_counter() > deadline):
                    break
                seen += 1
                b = bounds(dict(zip((p.name for p in structural), key, strict=True)))
                if StructureBounds.bounded_out(b, best):
                    n_pruned += 1
                else:
                    unexplored, lowest = unexplored + 1, min(lowest, b)
            if seen < left:  # not bounded one by one: the generic bound holds for them
                unexplored, lowest = unexplored + left - seen, min(lowest, bounds.whole())
    remaining = lowest if unexplored and lowest > 0 else None
    gap: float | None = None
    if best is not None:
        if unexplored == 0:
            gap = 0.0
        elif remaining is not None:
            gap = max(0.0, best / remaining - 1)
    return Certificate(
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
        bound_source=bounds.source,
    )
