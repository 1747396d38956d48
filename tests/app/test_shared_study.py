"""A large search shared by several worker processes on PostgreSQL: one Optuna study, one trial budget.

Worker processes (`mapper worker`) run on the local PostgreSQL (a schema per test); the job is
submitted to the store directly, as the API would.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState

from app.jobs.models import Job, TuningRequest
from app.jobs.runner import prepare, request_json
from app.jobs.shared_study import STUDY_PREFIX
from app.jobs.store import JobStore
from app.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
WORKER = "from app.cli import main; main(['worker'])"
# a worker whose trials hang after scoring, before Optuna records them: killed there, its trial is RUNNING
SLOW_WORKER = (
    "import time\n"
    "import app.jobs.shared_study as s\n"
    "scored = s.Objective.__call__\n"
    "def hang(self, trial):\n"
    "    value = scored(self, trial)\n"
    "    print('TRIAL-RUNNING', trial.number, flush=True)\n"
    "    time.sleep(600)\n"
    "    return value\n"
    "s.Objective.__call__ = hang\n" + WORKER
)

pytestmark = pytest.mark.slow

# a 1.7 M-point space on trn2 searched by TPE (each trial one structure's 65,536-point sub-space)
REQUEST: dict[str, Any] = {
    "problem": {"kind": "einsum", "expr": "mk,kn->mn", "sizes": {"m": 4096, "k": 4096, "n": 4096}, "dtype": "bf16"},
    "target": "trn2",
    "strategy": "tpe",
    "seconds": 300,
    "patience": 0,
    "validate": False,
    "study_workers": 2,
}


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for p in started:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
    for p in started:
        try:
            p.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)


def _spawn(procs: list[subprocess.Popen[str]], settings: Settings, code: str = WORKER) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TM_")} | {
        "TM_STORAGE": str(settings.storage), "TM_HEARTBEAT_SECONDS": str(settings.heartbeat_seconds),
        "TM_POLL_SECONDS": str(settings.poll_seconds), "TM_STALE_SECONDS": str(settings.stale_seconds),
    }  # fmt: skip
    p = subprocess.Popen(
        [sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip
    procs.append(p)
    return p


def _until(what: str, check: Callable[[], bool], timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.1)
    pytest.fail(f"{what}: not within {timeout} s")


def _submit(store: JobStore, body: dict[str, Any]) -> Job:
    req = TuningRequest.model_validate(body)
    prep = prepare(req)
    job, created = store.submit(
        key=prep.key, kind=prep.kind, summary=prep.summary, targets=req.target_list, request=request_json(req)
    )
    assert created
    return job


def _finished(store: JobStore, job_id: str) -> Callable[[], bool]:
    return lambda: (j := store.get(job_id)) is not None and j.state in ("succeeded", "failed", "cancelled")


def _study(settings: Settings, job_id: str) -> optuna.Study:
    return optuna.load_study(study_name=STUDY_PREFIX + job_id, storage=str(settings.storage))


def test_a_shared_study_runs_exactly_its_budget_over_two_workers(
    pg_settings: Settings, procs: list[subprocess.Popen[str]]
) -> None:
    store = JobStore(pg_settings.storage_url, stale_seconds=pg_settings.stale_seconds)
    budget = 30
    for _ in range(2):
        _spawn(procs, pg_settings)
    _until("two workers registered", lambda: len(store.live_workers()) == 2, 60)
    job = _submit(store, REQUEST | {"trials": budget, "seed": 7})
    _until("the shared search ended", _finished(store, job.id), 240)
    final = store.get(job.id)
    assert final is not None and final.state == "succeeded", final
    result = json.loads(store.result(job.id) or "{}")
    workers = result["trial_workers"]
    assert len(workers) == 2 and all(n > 0 for n in workers.values()), workers  # both took part
    assert sum(workers.values()) == budget == result["counts"]["trials"], workers
    assert result["stop_reason"] == "trials" and result["mapping"] is not None

    trials = _study(pg_settings, job.id).get_trials(deepcopy=False)
    done = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(done) == budget
    # every other trial is a refused one (at most one per worker, scoring nothing): none ran twice or failed
    rest = [t for t in trials if t.state != TrialState.COMPLETE]
    assert all(t.state == TrialState.PRUNED and "point" not in t.user_attrs for t in rest), rest
    assert len(rest) <= 2 * 2  # each worker's study.optimize (the claiming worker may run it twice)
    # the result's best is the study's best scored trial
    best = min(t.value for t in done if "point" in t.user_attrs and t.value is not None)
    assert result["values"]["latency"] == pytest.approx(best, rel=1e-9)
    store.close()


def test_a_killed_workers_running_trial_is_failed_by_heartbeat_and_retried(
    pg_settings: Settings, procs: list[subprocess.Popen[str]]
) -> None:
    store = JobStore(pg_settings.storage_url, stale_seconds=pg_settings.stale_seconds)
    budget = 20
    slow = _spawn(procs, pg_settings, SLOW_WORKER)
    _until("the slow worker registered", lambda: len(store.live_workers()) == 1, 60)
    job = _submit(store, REQUEST | {"trials": budget, "seed": 11})
    assert slow.stdout is not None
    for line in slow.stdout:  # its first trial is scored and hangs, RUNNING in the study
        if line.startswith("TRIAL-RUNNING"):
            break
    running = _study(pg_settings, job.id).get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    assert len(running) == 1
    killed = running[0]
    os.kill(slow.pid, signal.SIGKILL)
    t_kill = time.monotonic()
    _spawn(procs, pg_settings)
    _until("the shared search ended", _finished(store, job.id), 240)
    final = store.get(job.id)
    assert final is not None and final.state == "succeeded", final
    result = json.loads(store.result(job.id) or "{}")
    trials = _study(pg_settings, job.id).get_trials(deepcopy=False)
    failed = [t for t in trials if t.state == TrialState.FAIL]
    assert [t.number for t in failed] == [killed.number]  # failed by its stale heartbeat, nothing else
    retries = [t for t in trials if t.system_attrs.get("failed_trial") == killed.number]
    assert len(retries) == 1 and retries[0].state == TrialState.COMPLETE
    assert retries[0].params == killed.params  # the same structure, run again once
    assert retries[0].user_attrs["worker"] != killed.user_attrs["worker"]
    done = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(done) == budget == sum(result["trial_workers"].values())
    assert killed.user_attrs["worker"] not in result["trial_workers"]  # the dead worker completed nothing
    assert any("1 retried" in n for n in result["notes"]), result["notes"]
    print(f"SIGKILL in a trial: search done {time.monotonic() - t_kill:.1f} s after the kill")
    store.close()


@pytest.mark.parametrize(
    "change",
    [
        {"strategy": "auto"},  # enumeration cannot be shared trial by trial
        {"objectives": ["latency", "offchip_bytes"]},
        {"target": None, "targets": ["trn2", "trn1"]},
        {"problem": None, "workload": "bert-base"},  # a workload fans out by layer instead
    ],
)
def test_a_shared_search_is_refused_where_it_does_not_apply(client: Any, change: dict[str, Any]) -> None:
    body = {k: v for k, v in (REQUEST | change).items() if v is not None}
    r = client.post("/v1/tunings", json=body)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert "study_workers > 1 needs one problem, one target, one objective" in r.json()["detail"]
