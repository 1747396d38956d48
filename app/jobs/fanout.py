"""A workload job fans out: one job per distinct layer, so every worker on the storage takes layers.

The worker that claims the workload job queues one layer job per distinct layer (a layer job's key
is its problem's, so a layer already searched, or queued by another workload, is not searched
again), then works through its own queued layers while other workers take the rest, heartbeating
the workload job all along. When every layer job has ended it assembles the `WorkloadResult` from
the result cache (`tune_layers` finds each layer there; a layer whose job failed is searched
again in place) and records which worker ran each layer. Cancelling the workload job cancels
its layer jobs. No scheduler: the layer jobs are ordinary jobs, claimed like any other.
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
    """One layer job per distinct layer of `prep`'s workload; problem hash -> layer job id."""
    first: dict[str, int] = {}
    for i, p in enumerate(prep.problems):
        first.setdefault(problem_hash(p), i)
    out: dict[str, str] = {}
    for h, i in first.items():
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


def run_workload(worker: Worker, job: Job, prep: Prepared, pulse: Pulse) -> tuple[str, str, str | None]:
    """Fan the workload out, help with its layers, wait for the rest, assemble; (state, result, stop reason)."""
    store = worker.store
    layers = queue_layers(worker, job, prep)
    total = len(layers)
    cancelled = False
    while True:
        if worker.stopping.is_set():  # shutting down: leave the layer jobs queued, give the workload job back
            return "cancelled", "", "cancelled"
        if pulse.cancel.is_set():  # the client cancelled: its layer jobs go too (the API cancels them as well)
            cancelled = True
            for layer_id in layers.values():
                store.cancel(layer_id)
            break
        ended = {h: j for h, i in layers.items() if (j := store.get(i)) is not None and j.state in FINISHED}
        pulse.progress = JobProgress(done=len(ended), total=total, unit="layers")
        if len(ended) == total:
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
    result = _with_partial_layers(result, layers, store).model_copy(update={"layer_workers": ran_on})
    pulse.progress = JobProgress(done=total, total=total, unit="layers")
    state = "cancelled" if cancelled or not result.complete else "succeeded"
    return state, result.model_dump_json(), "cancelled" if state == "cancelled" else None
