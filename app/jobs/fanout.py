"""A workload job fans out: one job per distinct layer, so every worker on the storage takes layers.

The worker that claims the workload job queues one layer job per distinct layer (a layer job's key
is its problem's, so a layer already searched, or queued by another workload, is not searched
again), then works through its own queued layers while other workers take the rest, heartbeating
the workload job all along. When every layer job has ended it assembles the `WorkloadResult` from
the result cache (`tune_layers` finds each layer there; a layer whose job failed is searched
again in place) and records which worker ran each layer. Cancelling the workload job cancels
its layer jobs: it queues no more, its queued ones are cancelled at once (and never claimed, even one
queued as the cancel arrived), its running ones are asked to stop, and its progress counts only the
layers done. No scheduler: the layer jobs are ordinary jobs, claimed like any other.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from app.jobs.models import FINISHED, JobProgress
from app.jobs.runner import Prepared, prepare, request_json
from mapper.keys import problem_hash
from mapper.result import TuneResult
from mapper.watch import Watch
from mapper.workloads import WorkloadResult, tune_layers

if TYPE_CHECKING:
    from app.jobs.models import Job
    from app.jobs.store import JobStore
    from app.jobs.worker import Pulse, Worker


def queue_layers(worker: Worker, job: Job, prep: Prepared) -> dict[str, str]:
    """One layer job per distinct layer of `prep`'s workload; problem hash -> layer job id (fewer when the
    workload job's cancel was asked meanwhile)."""
    first: dict[str, int] = {}
    for i, p in enumerate(prep.problems):
        first.setdefault(problem_hash(p), i)
    out: dict[str, str] = {}
    for h, i in first.items():
        if worker.store.cancel_requested(job.id):  # cancelled meanwhile: queue no more (preparing each takes time)
            break
        child = prep.request.model_copy(update={"layer": i})
        if child.layers is not None:  # a layer of one's own network is its problem (no copy of every layer)
            child = child.model_copy(update={"layers": None, "name": None, "layer": None, "problem": child.layers[i]})
        cprep = prepare(child)
        layer_job, _ = worker.store.submit(
            key=cprep.key, kind="tune", summary=cprep.summary, targets=child.target_list,
            request=request_json(child), parent_id=job.id,
        )  # fmt: skip
        out[h] = layer_job.id
    return out


def _with_partial_layers(result: WorkloadResult, layers: dict[str, str], store: JobStore) -> WorkloadResult:
    """Put in the best-so-far of layers whose job was cancelled mid-search (never cached, so the assembly
    from the cache lacks them)."""
    results = dict(result.results)
    summaries = list(result.layers)
    for h, layer_id in layers.items():
        raw = None if h in results else store.result(layer_id)
        if raw is None:
            continue
        r = TuneResult.model_validate_json(raw)
        results[h] = r
        for n, lay in enumerate(summaries):
            if lay.problem_hash == h:
                summaries[n] = lay.model_copy(
                    update={
                        "key": r.key, "feasible": r.feasible, "value": r.best_value(), "gap": r.gap,
                        "proven_optimal": r.proven_optimal, "stop_reason": r.stop_reason,
                        "seconds": r.seconds if lay.duplicate_of is None else 0.0,
                    }
                )  # fmt: skip
    return result.model_copy(update={"results": results, "layers": summaries})


def _searched_by_layer_jobs(
    result: WorkloadResult, job: Job, layers: dict[str, str], store: JobStore
) -> WorkloadResult:
    """Layers this workload's own layer jobs searched count as searched, as in-process: the assembly finds
    them in the result cache (so it calls them cached), but they were searched for this job."""
    fresh: set[str] = set()
    for h, layer_id in layers.items():
        lj = store.get(layer_id)
        raw = store.result(layer_id) if lj is not None and lj.parent_id == job.id else None
        if raw is not None and not TuneResult.model_validate_json(raw).cached:
            fresh.add(h)
    if not fresh:
        return result
    results = {h: (r.model_copy(update={"cached": False}) if h in fresh else r) for h, r in result.results.items()}
    summaries = [
        lay.model_copy(update={"cached": False}) if lay.problem_hash in fresh and lay.cached else lay
        for lay in result.layers
    ]
    searched = result.searched + sum(1 for h in fresh if h in result.results and result.results[h].cached)
    return result.model_copy(update={"results": results, "layers": summaries, "searched": searched})


def _cancel_layers(worker: Worker, job: Job, layers: dict[str, str]) -> None:
    """Cancel the workload's layer jobs (queued ones at once, running ones asked to stop), then give the running
    ones a few heartbeats to stop and store their best so far."""
    store = worker.store
    # one transaction: every queued layer job of this workload cancelled, the running ones asked to stop (a layer
    # job another workload queued first is that workload's, left to it)
    store.cancel(job.id)
    until = time.monotonic() + 2 * worker.settings.heartbeat_seconds + 1.0
    while time.monotonic() < until:
        states = [j.state for i in layers.values() if (j := store.get(i)) is not None and j.parent_id == job.id]
        if "running" not in states:
            return
        time.sleep(worker.settings.poll_seconds)


def run_workload(worker: Worker, job: Job, prep: Prepared, pulse: Pulse) -> tuple[str, str, str | None]:
    """Fan the workload out, help with its layers, wait for the rest, assemble; (state, result, stop reason)."""
    t0 = time.perf_counter()
    store = worker.store
    layers = queue_layers(worker, job, prep)
    total = len({problem_hash(p) for p in prep.problems})
    cancelled = False
    while True:
        if worker.stopping.is_set():  # shutting down: leave the layer jobs queued, give the workload job back
            return "cancelled", "", "cancelled"
        # the row itself, not only the heartbeat's copy: a cancel is heard before the next layer starts
        if pulse.cancel.is_set() or store.cancel_requested(job.id):
            cancelled = True
            _cancel_layers(worker, job, layers)
            break
        ended = {h: j for h, i in layers.items() if (j := store.get(i)) is not None and j.state in FINISHED}
        # (a failed layer is searched again below)
        done = sum(1 for j in ended.values() if j.state == "succeeded")
        pulse.progress = JobProgress(done=done, total=total, unit="layers")
        if len(ended) == len(layers):
            break
        mine = store.claim(worker.id, parent_id=job.id)
        if mine is not None:
            worker.run_claimed(mine)
        else:
            time.sleep(worker.settings.poll_seconds)
    # a cancel may have ended the layer jobs before this job's heartbeat heard of it: ask the row itself
    cancelled = cancelled or pulse.cancel.is_set() or store.cancel_requested(job.id)
    req = prep.request
    target = req.target_list[0]
    result = tune_layers(
        prep.problems, target, prep.settings, name=str(req.network), overrides=prep.overrides,
        storage=worker.settings.storage_url, workers=1, validate=req.validate_result,
        watch=Watch(cancel=lambda: cancelled),
    )  # fmt: skip
    ran_on = {h: (j.worker or "") for h, i in layers.items() if (j := store.get(i)) is not None}
    result = _with_partial_layers(result, layers, store)
    result = _searched_by_layer_jobs(result, job, layers, store)
    result = result.model_copy(update={"layer_workers": ran_on, "seconds": time.perf_counter() - t0})
    # the layers actually done: a cancelled layer's best so far is no answer
    done = sum(1 for r in result.results.values() if r.stop_reason != "cancelled")
    pulse.progress = JobProgress(done=done, total=total, unit="layers")
    state = "cancelled" if cancelled or not result.complete else "succeeded"
    return state, result.model_dump_json(), "cancelled" if state == "cancelled" else None
