"""Optuna studies: Optuna picks the structural choices, numpy scores each trial's sub-space.

One in-memory study per request (logging at WARNING, nothing persisted per trial), with the
sampler named by the strategy (`mapper.strategies.samplers.SAMPLERS`), warm starts enqueued
first and a `StopRule` checked after every trial.

No trial is spent scoring a structure twice: a trial whose sampler proposes a structure already
scored or bounded out is pruned unscored (`Evaluator.skip_seen`), and the study then enqueues
structures no trial has covered yet (`Evaluator.unseen`, in the space's numbering, bounding each
on the way): one after the first such proposal, twice as many after each further one in a row
(up to `ENQUEUE_MAX`), none once the sampler proposes a new structure again. So a sampler that has
converged (TPE re-proposing its favourite) costs a few trials, and the search reaches every
structure within ``structures + log2`` trials of the proposals that repeat; when the last one is
scored or bounded out the study stops (``space-exhausted``) with the optimum proven.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import optuna

from costmodels.cancel import Cancelled, cancellable
from costmodels.protocol import Choice, SearchSpace, Target
from mapper.bounds import FrontBounds, StructureBounds
from mapper.certificate import certify
from mapper.planning import DEFAULT_INNER, Probe
from mapper.result import TrialCounts, ViolationCount
from mapper.settings import SearchSettings, StopReason
from mapper.strategies.base import Searched, Strategy, certificate_notes
from mapper.strategies.encoding import Encoding, split_params
from mapper.strategies.objective import CHECKED, Evaluator
from mapper.strategies.samplers import SAMPLERS, make_sampler
from mapper.watch import Watch
from workload.problem import Problem

#: most structures enqueued after one repeated proposal (the batch doubles per repeat in a row)
ENQUEUE_MAX = 64


@dataclass
class StopRule:
    """Why a study should stop now, checked after every trial (None: go on).

    In order: every structural choice scored (``space-exhausted``: each came with its whole
    sub-space, so the best is optimal); the best single-objective latency at the roofline bound
    (``lower-bound``: nothing can be faster), or with several objectives a front that dominates
    the whole space's bound vector (``lower-bound``: the front is exact, `FrontBounds`); with one
    objective, `patience` trials or `patience_seconds` without any improvement of the best
    (``converged``: a heuristic stop, never reported as optimal). The trial and time budgets are
    Optuna's own limits.
    """

    problem: Problem
    target: Target
    settings: SearchSettings
    bound_seconds: float | None = None

    def __call__(self, ev: Evaluator) -> StopReason | None:
        s = self.settings
        if ev.structural_exhausted:
            return "space-exhausted"
        if s.multi_objective:  # the front dominates the whole space's bound vector: every structure is out
            fb = ev.front_bounds
            return "lower-bound" if fb is not None and FrontBounds.dominated(fb.whole(), ev.front_values) else None
        if ev.best_point is None or ev.best_values is None:
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


class OptunaStudy(Strategy):
    """One Optuna study with the sampler `name` (a key of `SAMPLERS`).

    `inner_points`: the sub-space each trial scores (None: the settings' or the default);
    `probe`: the rate probe that ran before, whose points the counts include.
    """

    def __init__(self, name: str, inner_points: int | None = None, probe: Probe | None = None) -> None:
        if name not in SAMPLERS:
            raise ValueError(f"no Optuna sampler for strategy {name!r}")
        self.name = name
        self.inner_points = inner_points
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
        """One Optuna study in memory: Optuna picks the structure, numpy scores each sub-space.

        Stops at the first of: every structural choice scored (``space-exhausted``, optimal), a
        mapping at the roofline bound (``lower-bound``, optimal), `patience` trials or
        `patience_seconds` without improvement (``converged``), the trial or time budget.
        """
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        n_obj = len(settings.objectives)
        inner_points = self.inner_points
        if inner_points is None:
            inner_points = settings.inner_points if settings.inner_points is not None else DEFAULT_INNER
        structural, inner = split_params(space, inner_points)
        encoding = Encoding.of(structural, all_index=self.name == "cmaes")
        study = optuna.create_study(
            storage=optuna.storages.InMemoryStorage(),
            sampler=make_sampler(self.name, settings.seed, n_obj),
            directions=["minimize"] * n_obj,
        )
        notes: list[str] = []
        warms: list[dict[str, Choice]] = []
        try:  # the target's preparation of its warm starts stops at its checkpoints on a cancel
            with cancellable(watch.cancelled if watch is not None else None, deadline):
                warms = target.warm_starts(problem) if settings.warm_start else []
        except Cancelled:
            notes.append("cancelled while the target prepared its warm starts: none enqueued")
        if warms:
            for i, warm in enumerate(warms):
                params = encoding.encode(warm) if _in_space(space, warm) else None
                if params is None:
                    notes.append(f"warm start {i} is not a point of the space: skipped")
                    continue
                study.enqueue_trial(params, user_attrs={"warm_start": i}, skip_if_exists=True)
        bounds = StructureBounds(target, problem, settings.objectives[0])
        front_bounds = FrontBounds(target, problem, settings.objectives) if settings.multi_objective else None
        ev = Evaluator(
            target, problem, space, settings.objectives, encoding, tuple(p.name for p in inner),
            bounds=None if settings.multi_objective else bounds, front_bounds=front_bounds, skip_seen=True,
        )  # fmt: skip
        rule = StopRule(problem, target, settings)
        stopped: list[StopReason] = []
        repeats = [0]  # repeated proposals of the sampler in a row

        def callback(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
            if ev.last_duplicate:  # the sampler proposed a covered structure: hand it uncovered ones
                repeats[0] += 1
                for params in ev.unseen(min(ENQUEUE_MAX, 2 ** (repeats[0] - 1)), deadline):
                    study.enqueue_trial(params, user_attrs={"unseen": True})
            elif "unseen" not in trial.user_attrs and "warm_start" not in trial.user_attrs:
                repeats[0] = 0
            if watch is not None:
                watch.report(len(ev.trace), settings.max_trials, ev.trace[-1] if ev.trace else None)
            reason: StopReason | None = "cancelled" if watch is not None and watch.cancelled() else rule(ev)
            if reason is not None:
                stopped.append(reason)
                study.stop()

        with warnings.catch_warnings():
            # CMA-ES ignores constraints; they are still recorded so the history explains what was ruled out
            warnings.filterwarnings("ignore", message="Constraints have been set, but CmaEsSampler")
            # one trial whatever the clock says (the preparation may have used the budget: a search that
            # scored nothing has no answer), then the rest within the budget; the same sequence either way
            study.optimize(ev, n_trials=1, callbacks=[callback])
            if not stopped and settings.max_trials > 1:
                timeout = max(0.0, deadline - time.perf_counter())
                study.optimize(ev, n_trials=settings.max_trials - 1, timeout=timeout, callbacks=[callback])
        n_trials = len(ev.trace)  # trials run (enqueued warm starts never reached are not trials)
        reason: StopReason = stopped[0] if stopped else ("trials" if n_trials >= settings.max_trials else "seconds")
        front: list[tuple[dict[str, Choice], tuple[float, ...]]] = []
        point, values = ev.best_point, ev.best_values
        if settings.multi_objective:  # the scored structures' fronts merged (Optuna saw their ideal points)
            front = ev.merged_front()
            if front:
                point, values = front[0]
        top = tuple(
            ViolationCount(
                code=c,
                count=n,
                unit="trials",
                examined=min(CHECKED, max(1, ev.inner_size)),
                message=f"{ev.messages.get(c, '')} ({n} trials whose whole sub-space was infeasible; "
                f"up to {CHECKED} points of each checked)",
            )
            for c, n in ev.violations.most_common(5)
        )
        probed = self.probe.state.scored + 1 if self.probe else 0  # the rate probe's points count too
        counts = TrialCounts(
            trials=n_trials,
            complete=n_trials - ev.infeasible - ev.pruned - ev.duplicates,
            infeasible=ev.infeasible,
            duplicates=ev.duplicates,
            pruned_by_bound=ev.pruned,
            points_scored=ev.scored + probed,
            top_violations=top,
        )
        scored, pruned = ev.keys()
        if ev.best_point is not None:
            bounds.learn_clock(ev.best_point)
        # (past the deadline the structures left keep the generic bound: unexplored)
        cert = certify(
            space, bounds, structural, scored=scored, pruned=pruned,
            best=ev.best_values[0] if ev.best_values else None, prune=not settings.multi_objective,
            front=ev.front_values, front_bounds=front_bounds, deadline=deadline,
        )  # fmt: skip
        proven = cert.complete
        if proven and settings.multi_objective:
            notes.append("every structure was scored or bounded out: the front is the exact Pareto front")
        if reason == "converged":
            notes.append(f"no improvement over the last {len(ev.trace) - ev.improved_at} trials: stopped")
        notes.extend(certificate_notes(cert, point is not None))
        return Searched(
            self.name, point, values, proven, reason, ev.trace, counts, front, notes, ev.trace_points, certificate=cert
        )


def _in_space(space: SearchSpace, point: dict[str, Choice]) -> bool:
    return all(p.name in point and point[p.name] in p.choices for p in space.params)
