"""Search the mapping space of a problem on a target: one in-memory Optuna study per request.

`tune` plans the search from the scorer's measured speed (`mapper.planning`: ``auto`` enumerates
whenever the space has at most `enumerate_limit` points and proves the answer optimal; otherwise TPE over
the structural choices, each trial scoring a sub-space with numpy), runs it until a `StopRule`
or the budget says stop, and packages the best mapping with its cost, roofline gap, trace, trial
counts and the executor's validation into a `TuneResult`.

Optuna runs in memory with logging at WARNING: nothing is logged or persisted per trial (the
trial's constraints and point live in the in-memory study only). Only the finished result is
persisted, by `mapper.cache`.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import Any

import optuna

from costmodels.protocol import Choice, SearchSpace, Target
from mapper.enumerate import enumerate_space
from mapper.keys import cache_key, cost_model_version, problem_hash
from mapper.objective import Evaluator
from mapper.planning import DEFAULT_INNER, Probe, resolve_strategy
from mapper.report import Found, package_result
from mapper.result import ParetoPoint, TrialCounts, TuneResult, ViolationCount
from mapper.settings import SearchSettings, StopReason
from mapper.strategies import Encoding, make_sampler, split_params
from mapper.watch import Progress, Watch, as_watch
from workload.errors import ProblemError
from workload.problem import Problem

__all__ = ["Progress", "Watch", "check_request", "run_enumeration", "run_study", "tune"]


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
    if unsupported:
        v = unsupported[0]
        raise ProblemError(f"{target.name} cannot run this problem: {v.message}", token=v.code)


def run_enumeration(
    problem: Problem,
    target: Target,
    space: SearchSpace,
    settings: SearchSettings,
    deadline: float,
    measured: Probe | None = None,
    watch: Watch | None = None,
) -> Found:
    """Exact enumeration with the vectorised scorer: optimal when it completes within the budget."""
    if measured is None:
        e = enumerate_space(
            target, problem, space, settings.objectives, chunk=settings.chunk, deadline=deadline, watch=watch
        )
    else:  # the probe scored the first chunk already
        e = enumerate_space(
            target, problem, space, settings.objectives, deadline=deadline,
            plan=measured.plan, state=measured.state, first_block=measured.blocks, watch=watch,
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
    return Found(
        strategy="exhaustive",
        point=e.best,
        values=e.best_values,
        proven_optimal=e.complete,
        stop_reason="enumerated" if e.complete else ("cancelled" if cancelled else "seconds"),
        trace=e.trace,
        trace_points=e.trace_points,
        counts=counts,
        front=e.front,
        notes=[]
        if e.complete
        else [f"{'cancelled' if cancelled else 'time budget ran out'} after {e.scored} of {space.size} points"],
    )


def _sample_violations(problem: Problem, target: Target, space: SearchSpace) -> tuple[ViolationCount, ...]:
    """Why an all-infeasible space is infeasible: the violations of its first point."""
    first = {p.name: p.choices[0] for p in space.params}
    found = target.check(problem, target.mapping(problem, first))
    return tuple(ViolationCount(code=v.code, count=space.size, message=v.message) for v in found)


@dataclass
class StopRule:
    """Why a study should stop now, checked after every trial (None: go on).

    In order: every structural choice scored (``space-exhausted``: each came with its whole
    sub-space, so the best is optimal); the best single-objective latency at the roofline bound
    (``lower-bound``: nothing can be faster); `patience` trials or `patience_seconds` without any
    improvement of the best (``converged``: a heuristic stop, never reported as optimal). The
    trial and time budgets are Optuna's own limits.
    """

    problem: Problem
    target: Target
    settings: SearchSettings
    bound_seconds: float | None = None

    def __call__(self, ev: Evaluator) -> StopReason | None:
        s = self.settings
        if ev.structural_exhausted:
            return "space-exhausted"
        if ev.best_point is None or ev.best_values is None or s.multi_objective:
            return None
        if s.objectives == ("latency",):
            if self.bound_seconds is None:
                clock = self.target.cost(self.problem, self.target.mapping(self.problem, ev.best_point)).clock_hz
                self.bound_seconds = self.target.lower_bound(self.problem).cycles / clock
            if ev.best_values[0] <= self.bound_seconds * (1 + 1e-9):
                return "lower-bound"
        if s.patience and len(ev.trace) - ev.improved_at >= s.patience:
            return "converged"
        if s.patience_seconds and time.perf_counter() - ev.improved_time >= s.patience_seconds:
            return "converged"
        return None


def run_study(
    problem: Problem,
    target: Target,
    space: SearchSpace,
    settings: SearchSettings,
    strategy: str,
    deadline: float,
    watch: Watch | None = None,
    inner_points: int | None = None,
) -> Found:
    """One Optuna study in memory: Optuna picks the structure, numpy scores each sub-space.

    Stops at the first of: every structural choice scored (``space-exhausted``, optimal), a
    mapping at the roofline bound (``lower-bound``, optimal), `patience` trials or
    `patience_seconds` without improvement (``converged``), the trial or time budget.
    """
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    n_obj = len(settings.objectives)
    if inner_points is None:
        inner_points = settings.inner_points if settings.inner_points is not None else DEFAULT_INNER
    structural, inner = split_params(space, 0 if settings.multi_objective else inner_points)
    encoding = Encoding.of(structural, all_index=strategy == "cmaes")
    study = optuna.create_study(
        storage=optuna.storages.InMemoryStorage(),
        sampler=make_sampler(strategy, settings.seed, n_obj),
        directions=["minimize"] * n_obj,
    )
    notes: list[str] = []
    if settings.warm_start:
        for i, warm in enumerate(target.warm_starts(problem)):
            params = encoding.encode(warm) if _in_space(space, warm) else None
            if params is None:
                notes.append(f"warm start {i} is not a point of the space: skipped")
                continue
            study.enqueue_trial(params, user_attrs={"warm_start": i}, skip_if_exists=True)
    ev = Evaluator(target, problem, space, settings.objectives, encoding, tuple(p.name for p in inner))
    rule = StopRule(problem, target, settings)
    stopped: list[StopReason] = []

    def callback(study: optuna.Study, _trial: optuna.trial.FrozenTrial) -> None:
        if watch is not None:
            watch.report(len(ev.trace), settings.max_trials, ev.trace[-1] if ev.trace else None)
        reason: StopReason | None = "cancelled" if watch is not None and watch.cancelled() else rule(ev)
        if reason is not None:
            stopped.append(reason)
            study.stop()

    timeout = max(0.0, deadline - time.perf_counter())
    with warnings.catch_warnings():
        # CMA-ES ignores constraints; they are still recorded so the history explains what was ruled out
        warnings.filterwarnings("ignore", message="Constraints have been set, but CmaEsSampler")
        study.optimize(ev, n_trials=settings.max_trials, timeout=timeout, callbacks=[callback])
    n_trials = len(study.trials)
    reason: StopReason = stopped[0] if stopped else ("trials" if n_trials >= settings.max_trials else "seconds")
    front: list[tuple[dict[str, Choice], tuple[float, ...]]] = []
    point, values = ev.best_point, ev.best_values
    if settings.multi_objective:
        seen: set[str] = set()
        for t in study.best_trials:
            p = t.user_attrs.get("point")
            if p is not None and repr(sorted(p.items())) not in seen:
                seen.add(repr(sorted(p.items())))
                front.append((p, tuple(float(v) for v in t.values)))
        front.sort(key=lambda c: c[1])
        if front:
            point, values = front[0]
    top = tuple(
        ViolationCount(code=c, count=n, message=ev.messages.get(c, "")) for c, n in ev.violations.most_common(5)
    )
    counts = TrialCounts(
        trials=n_trials,
        complete=n_trials - ev.infeasible,
        infeasible=ev.infeasible,
        duplicates=ev.duplicates,
        points_scored=ev.scored,
        top_violations=top,
    )
    proven = reason in ("space-exhausted", "lower-bound") and not settings.multi_objective
    if reason == "space-exhausted" and settings.multi_objective:
        notes.append("every point was scored: the front is the exact Pareto front")
        proven = True
    if reason == "converged":
        notes.append(f"no improvement over the last {len(ev.trace) - ev.improved_at} trials: stopped (not a proof)")
    return Found(strategy, point, values, proven, reason, ev.trace, counts, front, notes, ev.trace_points)


def _in_space(space: SearchSpace, point: dict[str, Choice]) -> bool:
    return all(p.name in point and point[p.name] in p.choices for p in space.params)


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
    check_request(problem, target, settings)
    watch = as_watch(progress)
    t0 = time.perf_counter()
    deadline = t0 + settings.max_seconds
    space = target.space(problem)
    plan = resolve_strategy(settings, space, problem, target)
    if plan.strategy == "exhaustive":
        found = run_enumeration(problem, target, space, settings, deadline, plan.probe, watch)
    else:
        found = run_study(problem, target, space, settings, plan.strategy, deadline, watch, plan.inner_points)
        found.counts = found.counts.model_copy(
            update={"points_scored": found.counts.points_scored + (plan.probe.state.scored + 1 if plan.probe else 0)}
        )
    found.inner_points = plan.inner_points
    found.rate = plan.probe.rate if plan.probe else None
    seconds = time.perf_counter() - t0
    version = cost_model_version(target)
    key = cache_key(problem, target.name, dict(overrides or {}), version, settings)
    return package_result(
        problem,
        target,
        settings,
        found,
        key=key,
        problem_hash=problem_hash(problem),
        version=version,
        overrides=dict(overrides or {}),
        seconds=seconds,
        validate=validate,
        pareto=[ParetoPoint(point=p, values=dict(zip(settings.objectives, v, strict=True))) for p, v in found.front],
    )
