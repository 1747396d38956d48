"""A workload job fans out into one job per distinct layer, and every worker on the storage takes layers."""

from __future__ import annotations

import threading
import time

from app.jobs.models import Job, TuningRequest
from app.jobs.runner import prepare, request_json
from app.jobs.store import JobStore
from app.jobs.worker import Worker
from app.settings import Settings
from mapper.settings import SearchSettings
from mapper.workloads import tune_workload

BODY = {"workload": "bert-base", "params": {"batch": 1, "seq_len": 64}, "target": "trn2", "validate": False}


def _submit(store: JobStore, body: dict) -> str:
    prep = prepare(TuningRequest.model_validate(body))
    job, _ = store.submit(
        key=prep.key, kind=prep.kind, summary=prep.summary, targets=prep.request.target_list,
        request=request_json(prep.request),
    )  # fmt: skip
    return job.id


def _running_workload(settings: Settings) -> tuple[JobStore, str, Job]:
    """A fresh store with the workload job of `BODY` submitted and claimed by worker "solo": (store, its id, it)."""
    settings.prepare()
    store = JobStore(settings.storage_url)
    job_id = _submit(store, BODY)
    parent = store.claim("solo")
    assert parent is not None
    return store, job_id, parent


def _workers(settings: Settings, n: int) -> tuple[list[Worker], list[threading.Thread]]:
    ws = [Worker(settings, store=JobStore(settings.storage_url), worker_id=f"w{i}") for i in range(n)]
    ts = [threading.Thread(target=w.run, daemon=True) for w in ws]
    for t in ts:
        t.start()
    return ws, ts


def _stop(ws: list[Worker], ts: list[threading.Thread]) -> None:
    for w in ws:
        w.stopping.set()
    for t in ts:
        t.join(30)


def _wait(store: JobStore, job_id: str, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        job = store.get(job_id)
        if job is not None and job.state in ("succeeded", "failed", "cancelled"):
            return
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish")


def test_layers_spread_over_workers_each_searched_once(any_settings: Settings) -> None:
    any_settings.prepare()
    store = JobStore(any_settings.storage_url)
    job_id = _submit(store, BODY)
    ws, ts = _workers(any_settings, 3)
    try:
        _wait(store, job_id)
    finally:
        _stop(ws, ts)
    job = store.get(job_id)
    assert job is not None and job.state == "succeeded", job
    result = store.result(job_id)
    assert result is not None
    from mapper.workloads import WorkloadResult

    w = WorkloadResult.model_validate_json(result)
    layer_jobs = [j for j in store.page(limit=500).items if j.parent_id == job_id]
    assert len(layer_jobs) == w.distinct and all(j.state == "succeeded" and j.attempts == 1 for j in layer_jobs)
    # the assembly found every layer in the result cache (nothing searched twice), but this job's layer jobs
    # searched them: searched and not cached, as in-process, and the total is the job's time, not the assembly's
    assert w.searched == w.distinct and not any(lay.cached for lay in w.layers)
    assert not any(r.cached for r in w.results.values()) and w.seconds >= max(r.seconds for r in w.results.values())
    assert set(w.layer_workers) == set(w.results) and len(set(w.layer_workers.values())) >= 2
    alone = tune_workload("bert-base", "trn2", SearchSettings(), params={"batch": 1, "seq_len": 64}, validate=False)
    assert [lay.value for lay in w.layers] == [lay.value for lay in alone.layers]


def test_a_layer_already_asked_for_is_not_queued_again(settings: Settings) -> None:
    settings.prepare()
    store = JobStore(settings.storage_url)
    direct = _submit(store, {**BODY, "layer": 0})  # the same layer, asked for on its own first
    job_id = _submit(store, BODY)
    ws, ts = _workers(settings, 1)
    try:
        _wait(store, job_id)
    finally:
        _stop(ws, ts)
    children = [j for j in store.page(limit=500).items if j.parent_id == job_id]
    w_result = store.result(job_id)
    assert w_result is not None and store.get(direct).state == "succeeded"  # type: ignore[union-attr]
    assert all(j.id != direct for j in children) and len(children) == len(set(_hashes())) - 1


def _hashes() -> list[str]:
    from mapper.keys import problem_hash
    from workload.named import load

    return [problem_hash(p) for p in load("bert-base", batch=1, seq_len=64)]


def test_cancelling_a_workload_cancels_its_queued_layers(settings: Settings) -> None:
    settings.prepare()
    store = JobStore(settings.storage_url)
    job_id = _submit(store, BODY)
    w = Worker(settings, store=store, worker_id="solo")
    parent = store.claim("solo")
    assert parent is not None
    from app.jobs.fanout import queue_layers

    layers = queue_layers(w, parent, prepare(TuningRequest.model_validate(BODY)))
    store.cancel(job_id)
    states = {store.get(i).state for i in layers.values()}  # type: ignore[union-attr]
    assert states == {"cancelled"} and store.get(job_id).cancel_requested  # type: ignore[union-attr]


def test_layers_queued_after_the_cancel_are_never_claimed(settings: Settings) -> None:
    """A cancel that arrives while the workload job is queueing its layers: one queued after it is never started."""
    store, job_id, parent = _running_workload(settings)
    store.cancel(job_id)  # the parent is running: only asked to stop, and it has no layer job yet
    prep = prepare(TuningRequest.model_validate({**BODY, "layer": 0}))
    late, _ = store.submit(key=prep.key, kind="tune", summary=prep.summary, targets=["trn2"],
                           request=request_json(prep.request), parent_id=job_id)  # fmt: skip
    assert late.state == "queued"
    assert store.claim("other") is None and store.claim("solo", parent_id=job_id) is None
    from app.jobs.fanout import queue_layers

    assert (
        queue_layers(
            Worker(settings, store=store, worker_id="solo"), parent, prepare(TuningRequest.model_validate(BODY))
        )
        == {}
    )


def test_a_cancelled_workload_starts_no_layer_and_counts_only_layers_done(settings: Settings) -> None:
    store, job_id, parent = _running_workload(settings)
    store.cancel(job_id)  # heard by the workload job before its first layer
    w = Worker(settings, store=store, worker_id="solo")
    w.run_claimed(parent)
    job = store.get(job_id)
    children = [j for j in store.page(limit=500).items if j.parent_id == job_id]
    assert job is not None and job.state == "cancelled"
    assert all(j.state == "cancelled" and j.started_at is None for j in children)
    assert job.progress.done == 0 and job.progress.total == len(set(_hashes()))
