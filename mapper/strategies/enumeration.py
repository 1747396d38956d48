"""Exact enumeration: every point of the space scored with the target's vectorised model."""

from __future__ import annotations

from collections import Counter

from costmodels.protocol import SearchSpace, Target
from mapper.bounds import StructureBounds
from mapper.certificate import certify
from mapper.enumerate import Enumeration as EnumerationState
from mapper.enumerate import chunk_codes, enumerate_space
from mapper.planning import Probe
from mapper.result import TrialCounts, ViolationCount
from mapper.settings import SearchSettings
from mapper.strategies.base import Searched, Strategy, certificate_notes
from mapper.ties import per_strategy, tie_groups
from mapper.watch import Watch
from workload.problem import Problem


class Enumeration(Strategy):
    """Score the whole space in chunks: optimal when it completes within the budget.

    On a space with strategies to tie (`mapper.ties.tie_groups`: Tenstorrent, latency alone) it
    also keeps each strategy's best in the same pass (`Searched.per_strategy`).

    `probe`: the rate probe that scored the first chunk already (its state is carried on).
    """

    name = "exhaustive"

    def __init__(self, probe: Probe | None = None) -> None:
        self.probe = probe

    def run(
        self,
        problem: Problem,
        target: Target,
        space: SearchSpace,
        settings: SearchSettings,
        *,
        deadline: float,
        watch: Watch | None = None,
    ) -> Searched:
        groups = tie_groups(target, space) if settings.objectives == ("latency",) else None
        if self.probe is None:
            state = EnumerationState(objectives=settings.objectives, groups=groups)
            e = enumerate_space(
                target, problem, space, settings.objectives, chunk=settings.chunk, deadline=deadline, watch=watch,
                state=state,
            )  # fmt: skip
        else:  # the probe scored the first chunk already (its few points are scored again for the groups)
            if groups is not None:
                codes = self.probe.plan.codes(0, self.probe.blocks)
                groups.absorb(space, codes, target.score_codes(problem, codes))
                self.probe.state.groups = groups
            e = enumerate_space(
                target, problem, space, settings.objectives, deadline=deadline,
                plan=self.probe.plan, state=self.probe.state, first_block=self.probe.blocks, watch=watch,
            )  # fmt: skip
        cancelled = not e.complete and watch is not None and watch.cancelled()
        counts = TrialCounts(
            trials=0,
            complete=0,
            infeasible=0,
            points_scored=e.scored,
            feasible_points=e.feasible,
            top_violations=_sample_violations(problem, target, space) if e.feasible == 0 else (),
        )
        bounds = StructureBounds(target, problem, settings.objectives[0])
        if e.best is not None:
            bounds.learn_clock(e.best)
        # the enumeration is one structure, the whole space: scored when complete, else bounded as a whole
        cert = certify(
            space, bounds, (), scored={()} if e.complete else set(), pruned=set(),
            best=e.best_values[0] if e.best_values else None, prune=not settings.multi_objective,
        )  # fmt: skip
        notes = (
            []
            if e.complete
            else [f"{'cancelled' if cancelled else 'time budget ran out'} after {e.scored} of {space.size} points"]
        )
        return Searched(
            strategy=self.name,
            point=e.best,
            values=e.best_values,
            proven_optimal=cert.complete,
            stop_reason="enumerated" if e.complete else ("cancelled" if cancelled else "seconds"),
            trace=e.trace,
            trace_points=e.trace_points,
            counts=counts,
            front=e.front,
            notes=notes + certificate_notes(cert, e.best is not None),
            certificate=cert,
            per_strategy=per_strategy(groups, space) if groups is not None and e.complete else None,
        )


#: points of an all-infeasible space checked one by one to count its violations by code
SAMPLE_POINTS = 64


def _sample_violations(problem: Problem, target: Target, space: SearchSpace) -> tuple[ViolationCount, ...]:
    """Why an all-infeasible space is infeasible: real violations of real points, counted by code.

    The scorers say which points are feasible, not which constraint each breaks, so the points are
    checked one by one with `Target.check`: every point of a space of at most `SAMPLE_POINTS`, else
    `SAMPLE_POINTS` points spread evenly over its numbering (and the message says it is a sample).
    """
    n = min(space.size, SAMPLE_POINTS)
    counts: Counter[str] = Counter()
    messages: dict[str, str] = {}
    for i in sorted({k * space.size // n for k in range(n)}):
        codes = chunk_codes(space, i, i + 1)
        point = {p.name: p.choices[int(codes[p.name][0])] for p in space.params}
        for v in {v.code: v for v in target.check(problem, target.mapping(problem, point))}.values():
            counts[v.code] += 1
            messages.setdefault(v.code, v.message)
    scope = (
        f"all {space.size:,} points checked" if n == space.size
        else f"a sample: {n} points spread evenly over the {space.size:,} of the space, all infeasible"
    )  # fmt: skip
    return tuple(
        ViolationCount(
            code=c, count=k, message=f"{messages[c]} ({k} of {n} points; {scope})", unit="points", examined=n
        )
        for c, k in counts.most_common(5)
    )
