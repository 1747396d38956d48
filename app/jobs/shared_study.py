"""One large search shared by several workers: one Optuna study in the job database, `study.optimize` in each.

A tuning request with ``study_workers`` N > 1 (one problem, one target, TPE or random search) runs
on an Optuna `RDBStorage` study named after its job. The worker that claims the job queues N - 1
helper jobs (kind ``trials``, ``parent_id`` the job), so idle workers join like they take a
workload's layers; each runs `study.optimize` on the same study with its own sampler seed.

- Budget: every fresh trial first takes a ticket (`app.jobs.trial_tickets`, one conditional UPDATE),
  so the workers together run exactly ``trials`` trials whichever of them reaches the end; a worker
  refused a ticket stops its study (the refused trial ends PRUNED without scoring anything).
  Optuna's `MaxTrialsCallback` stops a worker too once the study holds the budget's COMPLETE trials.
- Crashes: the storage has Optuna's trial heartbeat (``heartbeat_interval``, ``grace_period``); a
  trial whose worker died is failed as stale and `RetryFailedTrialCallback` re-queues it (same
  parameters) for the next worker's `optimize`. A retried trial keeps its ticket. Nothing else runs
  twice: structures a worker repeats are answered from its memo, like in a single study.
- Result: when the budget is spent and no trial is running or waiting, the claiming worker reads
  the study: the best trial's point, priced and validated as `mapper.tune` would, and how many
  trials each worker ran (`TuneResult.trial_workers`).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import optuna
from optuna.storages import RDBStorage, RetryFailedTrialCallback, fail_stale_trials
from optuna.study import MaxTrialsCallback
from optuna.trial import TrialState

from app.jobs.models import FINISHED, JobProgress
from app.jobs.runner import Prepared, request_json
from app.jobs.trial_tickets import open_tickets, take_ticket, tickets_taken
from costmodels.protocol import Choice
from costmodels.registry import get_target
from mapper.bounds import StructureBounds
from mapper.keys import cache_key, cost_model_version, problem_hash
from mapper.planning import inner_size
from mapper.report import Found, package_result
from mapper.result import TrialCounts
from mapper.settings import StopReason
from mapper.strategies.encoding import Encoding, split_params
from mapper.strategies.objective import Evaluator
from mapper.strategies.samplers import make_sampler

if TYPE_CHECKING:
    from app.jobs.models import Job
    from app.jobs.store import JobStore
    from app.jobs.worker import Pulse, Worker

STUDY_PREFIX = "tensormapper-shared:"
#: how often a stale trial may be retried (a trial that kills every worker it meets is not retried forever)
MAX_RETRY = 2


@cache
def shared_storage(url: str, heartbeat_interval: int, grace_period: int) -> RDBStorage:
    """The job database as an Optuna RDB storage with trial heartbeats and the retry of stale trials."""
    kwargs: dict[str, Any] = {"pool_pre_ping": True}
    if url.startswith("sqlite"):
        kwargs["connect_args"] = {"timeout": 30}
    return RDBStorage(
        url,
        engine_kwargs=kwargs,
        heartbeat_interval=heartbeat_interval,
        grace_period=grace_period,
        failed_trial_callback=RetryFailedTrialCallback(max_retry=MAX_RETRY),
    )


def storage_of(worker: Worker) -> RDBStorage:
    """Heartbeat every `heartbeat_seconds` (at least 1 s, Optuna counts whole seconds); a trial is stale after
    `stale_seconds` without one, as a job is."""
    s = worker.settings
    beat = max(1, round(s.heartbeat_seconds))
    return shared_storage(s.storage_url, beat, max(2 * beat, round(s.stale_seconds)))


@dataclass
class Objective:
    """The single study's objective (an `Evaluator`: one structure per trial, its sub-space scored by numpy),
    behind the budget's tickets, recording which worker ran each trial and the points it scored."""

    store: JobStore
    job_id: str
    worker_id: str
    ev: Evaluator
    cancelled: Callable[[], bool]
    ran: int = 0

    def __call__(self, trial: optuna.Trial) -> float:
        # a stale trial's retry inherits its user attributes (RetryFailedTrialCallback), so its ticket too
        retry = "ticket" in trial.user_attrs
        if self.cancelled() or (not retry and not take_ticket(self.store, self.job_id)):
            trial.study.stop()
            trial.set_user_attr("skipped", "cancelled" if self.cancelled() else "budget spent")
            raise optuna.TrialPruned()
        trial.set_user_attr("ticket", True)
        trial.set_user_attr("worker", self.worker_id)
        before = self.ev.scored
        value = self.ev(trial)
        trial.set_user_attr("points", self.ev.scored - before)
        self.ran += 1
        return float(value if not isinstance(value, tuple) else value[0])


def _evaluator(prep: Prepared) -> Evaluator:
    problem, settings = prep.problems[0], prep.settings
    target = get_target(prep.request.target_list[0], prep.overrides)
    space = target.space(problem)
    structural, inner = split_params(space, inner_size(settings))
    encoding = Encoding.of(structural)
    bounds = StructureBounds(target, problem, settings.objectives[0])
    ev = Evaluator(target, problem, space, settings.objectives, encoding, tuple(p.name for p in inner), bounds=bounds)
    return ev


def run_trials(worker: Worker, study_job_id: str, prep: Prepared, seat: int, pulse: Pulse) -> int:
    """This worker's part of a shared search: `study.optimize` until the budget is spent, the time budget ends or
    the job is cancelled; the trials it ran. `seat` varies the sampler's seed between workers."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    settings = prep.settings
    ev = _evaluator(prep)
    study = optuna.load_study(
        study_name=STUDY_PREFIX + study_job_id,
        storage=storage_of(worker),
        sampler=make_sampler(prep.request.strategy, settings.seed + seat, 1),
    )
    objective = Objective(worker.store, study_job_id, worker.id, ev, pulse.watch.cancelled)
    budget = settings.max_trials

    def report(_study: optuna.Study, _trial: optuna.trial.FrozenTrial) -> None:
        pulse.progress = JobProgress(done=objective.ran, total=budget, unit="trials", best=None)

    study.optimize(
        objective,
        timeout=settings.max_seconds,
        callbacks=[MaxTrialsCallback(budget, states=(TrialState.COMPLETE,)), report],
    )
    return objective.ran


def run_helper(worker: Worker, job: Job, prep: Prepared, pulse: Pulse) -> tuple[str, str, str | None]:
    """A helper job (kind ``trials``): join the parent's study; (state, result, stop reason)."""
    assert job.parent_id is not None
    seat = int(job.key.rsplit(":", 1)[-1])
    ran = run_trials(worker, job.parent_id, prep, seat, pulse)
    state = "cancelled" if pulse.watch.cancelled() else "succeeded"
    return state, json.dumps({"worker": worker.id, "trials": ran}), "cancelled" if state == "cancelled" else None


def _queue_helpers(worker: Worker, job: Job, prep: Prepared) -> list[str]:
    ids = []
    for seat in range(1, prep.request.study_workers):
        helper, _ = worker.store.submit(
            key=f"{job.id}:trials:{seat}", kind="trials", summary=f"trials of {prep.summary}"[:300],
            targets=prep.request.target_list, request=request_json(prep.request), parent_id=job.id,
        )  # fmt: skip
        ids.append(helper.id)
    return ids


def run_shared_search(worker: Worker, job: Job, prep: Prepared, pulse: Pulse) -> tuple[str, str, str | None]:
    """Create the study, queue the helpers, run trials here too, wait for the rest, assemble the result."""
    store, settings = worker.store, prep.settings
    t0 = time.perf_counter()
    storage = storage_of(worker)
    optuna.create_study(
        study_name=STUDY_PREFIX + job.id, storage=storage, direction="minimize", load_if_exists=True
    )  # fmt: skip
    open_tickets(store, job.id, settings.max_trials)
    helpers = _queue_helpers(worker, job, prep)
    run_trials(worker, job.id, prep, 0, pulse)
    study = optuna.load_study(study_name=STUDY_PREFIX + job.id, storage=storage)
    while True:  # until no trial of the study runs or waits: stale ones are failed and their retries run here
        store.requeue_stale()  # a helper whose worker died goes back to the queue...
        for h in helpers:  # ...and is not needed: its stale trial is retried here
            if (j := store.get(h)) is not None and j.state == "queued":
                store.cancel(h)
        fail_stale_trials(study)
        trials = study.get_trials(deepcopy=False, states=(TrialState.RUNNING, TrialState.WAITING))
        helpers_done = all((j := store.get(h)) is None or j.state in FINISHED for h in helpers)
        if not trials and helpers_done:
            break
        if any(t.state == TrialState.WAITING for t in trials) and not pulse.watch.cancelled():
            run_trials(worker, job.id, prep, 0, pulse)  # a stale trial's retry: it holds its ticket
        else:
            time.sleep(worker.settings.poll_seconds)
    result = assemble(study, job, prep, worker, time.perf_counter() - t0)
    state = "cancelled" if pulse.watch.cancelled() else "succeeded"
    return state, result, result_reason(state, store, job.id, settings.max_trials)


def result_reason(state: str, store: JobStore, job_id: str, budget: int) -> StopReason:
    """cancelled, or trials when the budget was spent, else seconds (the time budget ended the search)."""
    if state == "cancelled":
        return "cancelled"
    return "trials" if tickets_taken(store, job_id) >= budget else "seconds"


def assemble(study: optuna.Study, job: Job, prep: Prepared, worker: Worker, seconds: float) -> str:
    """The `TuneResult` of the study: its best scored point, priced and validated; trials per worker."""
    problem, settings = prep.problems[0], prep.settings
    target = get_target(prep.request.target_list[0], prep.overrides)
    done = sorted(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)), key=lambda t: t.number)
    best: tuple[float, dict[str, Choice]] | None = None
    trace: list[float | None] = []
    points: list[int] = []
    scored = 0
    for t in done:
        point = t.user_attrs.get("point")
        if point is not None and t.value is not None and (best is None or t.value < best[0]):
            best = (t.value, point)
        scored += int(t.user_attrs.get("points", 0))
        trace.append(None if best is None else best[0])
        points.append(scored)
    by_worker = Counter(str(t.user_attrs.get("worker", "")) for t in done)
    retried = sum(1 for t in done if "failed_trial" in t.system_attrs)
    counts = TrialCounts(
        trials=len(done),
        complete=sum(1 for t in done if "point" in t.user_attrs),
        infeasible=sum(1 for t in done if "violations" in t.user_attrs),
        pruned_by_bound=sum(1 for t in done if "pruned_by_bound" in t.user_attrs),
        points_scored=scored,
    )
    reason = result_reason("cancelled" if job.cancel_requested else "succeeded", worker.store, job.id,
                           settings.max_trials)  # fmt: skip
    notes = [
        f"{len(done)} trials on one shared Optuna study by {len(by_worker)} workers"
        + (f"; {retried} retried after their worker stopped heartbeating" if retried else "")
    ]
    found = Found(
        strategy=prep.request.strategy, point=None if best is None else best[1],
        values=None if best is None else (best[0],), proven_optimal=False, stop_reason=reason,
        trace=trace, counts=counts, notes=notes, trace_points=points, inner_points=inner_size(settings),
    )  # fmt: skip
    version = cost_model_version(target)
    result = package_result(
        problem, target, settings, found, key=cache_key(problem, target.name, prep.overrides, version, settings),
        problem_hash=problem_hash(problem), version=version, overrides=prep.overrides, seconds=seconds,
        validate=prep.request.validate_result, pareto=[],
    )  # fmt: skip
    return result.model_copy(update={"trial_workers": dict(by_worker)}).model_dump_json()
