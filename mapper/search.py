"""Search the mapping space of a problem on a target: one in-memory Optuna study per request.

`tune` picks a strategy (``auto`` enumerates spaces small enough for the budget and proves the
answer optimal; otherwise TPE), runs it, and packages the best mapping with its cost, roofline
gap, trace, trial counts and the executor's validation into a `TuneResult`.

Optuna runs in memory with logging at WARNING: no storage write happens per trial. Only the
finished result is persisted, by `mapper.cache`.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import optuna

from costmodels.protocol import Choice, SearchSpace, Target
from mapper.enumerate import chunk_columns, enumerate_space, point_at
from mapper.keys import cache_key, cost_model_version, problem_hash
from mapper.objective import Evaluator
from mapper.report import Found, package_result
from mapper.result import ParetoPoint, TrialCounts, TuneResult, ViolationCount
from mapper.settings import SearchSettings, StopReason
from mapper.strategies import Encoding, make_sampler, split_params
from workload.errors import ProblemError
from workload.problem import Problem

Progress = Callable[[int, int], None]  # (done, total)


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


def resolve_strategy(settings: SearchSettings, space: SearchSpace, problem: Problem, target: Target) -> str:
    """``auto`` -> exhaustive when the space fits `enumerate_limit` and, at the scorer's measured rate,
    `enumerate_seconds`; else TPE."""
    if settings.strategy != "auto":
        return settings.strategy
    if space.size > settings.enumerate_limit:
        return "tpe"
    probe = min(space.size, 8192)
    if probe == space.size:
        return "exhaustive"
    t0 = time.perf_counter()
    target.score_batch(problem, chunk_columns(space, 0, probe))
    rate = probe / max(time.perf_counter() - t0, 1e-9)
    return "exhaustive" if space.size / rate <= settings.enumerate_seconds else "tpe"


def run_enumeration(
    problem: Problem, target: Target, space: SearchSpace, settings: SearchSettings, deadline: float
) -> Found:
    """Exact enumeration with the vectorised scorer: optimal when it completes within the budget."""
    e = enumerate_space(target, problem, space, settings.objectives, chunk=settings.chunk, deadline=deadline)
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
        stop_reason="enumerated" if e.complete else "seconds",
        trace=e.trace,
        counts=counts,
        front=e.front,
        notes=[] if e.complete else [f"time budget ran out after {e.scored} of {space.size} points"],
    )


def _sample_violations(problem: Problem, target: Target, space: SearchSpace) -> tuple[ViolationCount, ...]:
    """Why an all-infeasible space is infeasible: the violations of its first point."""
    first = point_at(chunk_columns(space, 0, 1), 0)
    found = target.check(problem, target.mapping(problem, first))
    return tuple(ViolationCount(code=v.code, count=space.size, message=v.message) for v in found)


def run_study(
    problem: Problem,
    target: Target,
    space: SearchSpace,
    settings: SearchSettings,
    strategy: str,
    deadline: float,
    progress: Progress | None = None,
) -> Found:
    """One Optuna study in memory: Optuna picks the structure, numpy scores each sub-space."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    n_obj = len(settings.objectives)
    inner_points = 0 if settings.multi_objective else settings.inner_points
    structural, inner = split_params(space, inner_points)
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
    stop: dict[str, Any] = {"reason": None, "lb": None}
    single_latency = settings.objectives == ("latency",)

    def callback(study: optuna.Study, _trial: optuna.trial.FrozenTrial) -> None:
        if progress is not None:
            progress(len(ev.trace), settings.max_trials)
        if ev.structural_exhausted:
            stop["reason"] = "space-exhausted"
            study.stop()
        elif single_latency and ev.best_point is not None and ev.best_values is not None:
            if stop["lb"] is None:
                rep = target.cost(problem, target.mapping(problem, ev.best_point))
                stop["lb"] = rep.lower_bound_cycles / rep.clock_hz
            if ev.best_values[0] <= stop["lb"] * (1 + 1e-9):
                stop["reason"] = "lower-bound"
                study.stop()

    timeout = max(0.0, deadline - time.perf_counter())
    with warnings.catch_warnings():
        # CMA-ES ignores constraints; they are still recorded so the history explains what was ruled out
        warnings.filterwarnings("ignore", message="Constraints have been set, but CmaEsSampler")
        study.optimize(ev, n_trials=settings.max_trials, timeout=timeout, callbacks=[callback])
    n_trials = len(study.trials)
    reason: StopReason = stop["reason"] or ("trials" if n_trials >= settings.max_trials else "seconds")
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
    return Found(strategy, point, values, proven, reason, ev.trace, counts, front, notes)


def _in_space(space: SearchSpace, point: dict[str, Choice]) -> bool:
    return all(p.name in point and point[p.name] in p.choices for p in space.params)


def tune(
    problem: Problem,
    target: Target,
    settings: SearchSettings | None = None,
    *,
    overrides: dict[str, Any] | None = None,
    validate: bool = True,
    progress: Progress | None = None,
) -> TuneResult:
    """Find the best mapping of `problem` on `target` (no caching: see `mapper.cache.tune_cached`).

    Raises:
        ProblemError: the target cannot run the problem or price an objective.
    """
    settings = settings or SearchSettings()
    check_request(problem, target, settings)
    space = target.space(problem)
    strategy = resolve_strategy(settings, space, problem, target)
    t0 = time.perf_counter()
    deadline = t0 + settings.max_seconds
    if strategy == "exhaustive":
        found = run_enumeration(problem, target, space, settings, deadline)
    else:
        found = run_study(problem, target, space, settings, strategy, deadline, progress)
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
