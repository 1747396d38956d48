"""Search the mapping space of a problem on a target: `tune` plans, a `Strategy` searches.

`tune` plans the search from the space alone (`mapper.planning`: ``auto`` enumerates whenever the
space has at most `enumerate_limit` points; otherwise best-first branch and bound over the
structural choices with one objective, TPE with several, each structure a sub-space scored with
numpy), runs the planned strategy (`mapper.strategies`: `Enumeration`, `BestFirst` or an
`OptunaStudy`, the last two pruning structures by their admissible bounds) until it or the budget says
stop, and packages the best mapping with its cost, roofline gap, trace, trial counts, the
certificate of what was proven (`mapper.bounds`, `mapper.result.Certificate`) and the executor's
validation into a `TuneResult`.

The first search of a process tunes the C allocator to keep freed memory (`mapper.allocator`).

Optuna runs in memory with logging at WARNING: nothing is logged or persisted per trial (the
trial's constraints and point live in the in-memory study only). Only the finished result is
persisted, by `mapper.cache`.
"""

from __future__ import annotations

import time
from typing import Any

from costmodels.cancel import Cancelled, cancellable
from costmodels.protocol import SearchSpace, Target
from mapper.allocator import keep_freed_memory
from mapper.keys import cache_key, cost_model_version, problem_hash
from mapper.planning import resolve_strategy
from mapper.report import Found, package_result
from mapper.result import ParetoPoint, StrategyTie, TrialCounts, TuneResult
from mapper.settings import SearchSettings
from mapper.strategies import Searched, strategy_for
from mapper.watch import Progress, Watch, as_watch
from workload.errors import ProblemError
from workload.problem import Problem

__all__ = ["Progress", "Watch", "check_request", "tune", "tune_as_given"]


def check_request(problem: Problem, target: Target, settings: SearchSettings) -> None:
    """Reject what no search can answer, with a message saying why.

    Raises:
        ProblemError: the target cannot run the problem, or cannot price an objective.
    """
    for o in settings.objectives:
        if o not in target.objectives:
            raise ProblemError(
                f"target {target.name} has no {o} model",
                token=o,
                hint=f"objectives it prices: {', '.join(target.objectives)}",
            )
    if settings.strategy == "cmaes" and settings.multi_objective:
        raise ProblemError("CMA-ES optimises one objective", token="cmaes", hint="use nsga2 or tpe for several")
    unsupported = target.supports(problem)
    if unsupported:  # every reason: a fix for the first alone would only meet the next
        reasons = "; ".join(dict.fromkeys(v.message for v in unsupported))
        raise ProblemError(f"{target.name} cannot run this problem: {reasons}", token=unsupported[0].code)


def tune(
    problem: Problem,
    target: Target,
    settings: SearchSettings | None = None,
    *,
    overrides: dict[str, Any] | None = None,
    validate: bool = True,
    progress: Progress | Watch | None = None,
) -> TuneResult:
    """Find the best mapping of `problem` on `target` (no caching: see `mapper.cache.tune_cached`).

    `progress` hears how far the search is after every trial or enumeration chunk; a `Watch` with
    a `cancel` callable can also stop it (stop reason ``cancelled``, best so far kept).

    Raises:
        ProblemError: the target cannot run the problem or price an objective.
    """
    settings = settings or SearchSettings()
    keep_freed_memory()  # (once per process: `mapper.allocator`)
    watch = as_watch(progress)
    t0 = time.perf_counter()
    try:  # the target's per-problem preparation stops at its checkpoints on a cancel
        with cancellable(watch.cancelled if watch is not None else None):
            check_request(problem, target, settings)  # (`supports` prepares the problem)
    except Cancelled:
        found = _cancelled_before_search(settings)
        return _package(problem, target, settings, found, overrides, validate, time.perf_counter() - t0)
    from mapper.transforms import tune_with_fold  # the folded stem: priced beside the problem

    return tune_with_fold(
        problem, target, settings, as_given=tune_as_given, tune=tune, overrides=overrides, validate=validate,
        progress=progress,
    )  # fmt: skip


def tune_as_given(
    problem: Problem,
    target: Target,
    settings: SearchSettings,
    *,
    overrides: dict[str, Any] | None = None,
    validate: bool = True,
    progress: Progress | Watch | None = None,
) -> TuneResult:
    """Search `problem` itself (no rewrite offered) and package the result; `tune` checks the request first."""
    watch = as_watch(progress)
    t0 = time.perf_counter()
    deadline = t0 + settings.max_seconds
    found: Found
    try:  # the target's per-problem preparation (space, tables) stops at its checkpoints on a cancel
        with cancellable(watch.cancelled if watch is not None else None):
            space = target.space(problem)
        if watch is not None and watch.cancelled():  # between the preparation steps
            raise Cancelled
        plan = resolve_strategy(settings, space, problem, target)
        if watch is not None and watch.cancelled():
            raise Cancelled
    except Cancelled:
        found = _cancelled_before_search(settings)
    else:
        strategy = strategy_for(plan.strategy, probe=plan.probe, inner_points=plan.inner_points)
        found = strategy.run(problem, target, space, settings, deadline=deadline, watch=watch)
        # the sub-space a trial or structure scored: the certificate's (the plan's is a cap, and a target's own
        # structures have theirs); an enumeration scores the whole space in chunks, as its plan says
        cert = found.certificate if isinstance(found, Searched) else None
        found.inner_points = plan.inner_points if cert is None or plan.strategy == "exhaustive" else cert.inner_points
        found.rate = plan.probe.rate if plan.probe else None
    if found.stop_reason == "cancelled" and found.point is None:  # nothing to price or tie
        return _package(problem, target, settings, found, overrides, validate, time.perf_counter() - t0)
    ties = _break_ties(problem, target, space, settings, found)
    result = _package(problem, target, settings, found, overrides, validate, time.perf_counter() - t0)
    return result.model_copy(update={"ties": ties}) if ties else result


def _package(
    problem: Problem,
    target: Target,
    settings: SearchSettings,
    found: Found,
    overrides: dict[str, Any] | None,
    validate: bool,
    seconds: float,
) -> TuneResult:
    """The `TuneResult` of what a strategy found, with its certificate."""
    version = cost_model_version(target)
    result = package_result(
        problem,
        target,
        settings,
        found,
        key=cache_key(problem, target.name, dict(overrides or {}), version, settings),
        problem_hash=problem_hash(problem),
        version=version,
        overrides=dict(overrides or {}),
        seconds=seconds,
        validate=validate,
        pareto=[ParetoPoint(point=p, values=dict(zip(settings.objectives, v, strict=True))) for p, v in found.front],
    )
    cert = found.certificate if isinstance(found, Searched) else None
    if cert is not None and settings.multi_objective and cert.complete:  # an exact front: no gap
        cert = cert.model_copy(update={"front_gap": 0.0})
    return result.model_copy(update={"certificate": cert}) if cert is not None else result


def _cancelled_before_search(settings: SearchSettings) -> Found:
    """What a search cancelled during the target's preparation found: nothing, and it says so."""
    return Found(
        strategy=settings.strategy,
        point=None,
        values=None,
        proven_optimal=False,
        stop_reason="cancelled",
        trace=[],
        counts=TrialCounts(trials=0, complete=0, infeasible=0, points_scored=0),
        notes=["cancelled during the target's preparation for this problem, before any mapping was scored"],
    )


def _break_ties(
    problem: Problem, target: Target, space: SearchSpace, settings: SearchSettings, found: Found
) -> list[StrategyTie]:
    """Tenstorrent, latency alone, whole space enumerated: report the tie and report its winner (`mapper.ties`)."""
    if target.family != "tenstorrent" or settings.objectives != ("latency",) or found.point is None:
        return []
    if not found.proven_optimal:  # the tie is only known over a whole space
        return []
    from mapper.ties import TIE_TOLERANCE, strategy_ties

    ties = strategy_ties(problem, target, space, found.per_strategy if isinstance(found, Searched) else None)
    if len(ties) > 1:
        win = ties[0]
        fastest = min(t.latency for t in ties)
        found.notes.append(
            f"{len(ties)} strategies within {TIE_TOLERANCE:.1%} of the fastest: chose {win.layout} {win.memory} "
            f"(less data moved, then fewer cores; {win.latency / fastest - 1:.2%} above the fastest)"
        )
        if win.point != found.point:
            found.point = dict(win.point)
            found.values = (win.latency,)
    return ties
