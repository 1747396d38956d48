"""A worker process: take the oldest queued job, run it, record the result; forever.

While a job runs, a pulse thread writes the job's heartbeat and progress every
`heartbeat_seconds` and reads whether its client asked to cancel; the search hears that through
its `Watch` and stops within a trial or an enumeration chunk. A worker told to stop (SIGTERM,
Ctrl-C) stops its search the same way and gives the job back to the queue. A worker that dies
stops heartbeating; after `stale_seconds` the next claim re-queues its job.

A storage outage (the database restarted) kills neither the worker nor the job: claims, the
result's recording and the job itself are tried again with a back-off once the database answers
(`app.jobs.outage`); a job whose run met the outage is run again from its start, and its
searches answer from the result cache what they had already stored.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import traceback
from collections.abc import Callable

from pydantic import ValidationError

from app.jobs.fanout import run_workload
from app.jobs.models import Job, JobProgress, TuningRequest
from app.jobs.outage import call_through_outages, is_storage_outage
from app.jobs.runner import execute, prepare
from app.jobs.shared_study import run_helper, run_shared_search
from app.jobs.store import JobStore, new_worker_id
from app.settings import Settings
from mapper.allocator import keep_freed_memory
from mapper.watch import Watch
from workload.errors import ProblemError

log = logging.getLogger("tensormapper.worker")


class Pulse:
    """The running job's link to its row: progress out, cancellation in, heartbeat on a timer."""

    def __init__(self, store: JobStore, job_id: str, worker: str, every: float, stopping: threading.Event) -> None:
        self.store, self.job_id, self.worker, self.every = store, job_id, worker, every
        self.progress = JobProgress()
        self.cancel = threading.Event()
        self.stopping = stopping  # the worker is shutting down: stop the search, give the job back
        self.watch = Watch(progress=self._progress, cancel=self._should_stop)
        self._done = threading.Event()
        self._failing = False  # the last beat met a storage outage
        self._thread = threading.Thread(target=self._beat, name=f"pulse-{job_id[:8]}", daemon=True)

    def _progress(self, done: int, total: int, best: float | None) -> None:
        self.progress = JobProgress(done=done, total=total, unit=self.watch.unit, best=best)

    def _should_stop(self) -> bool:
        return self.cancel.is_set() or self.stopping.is_set()

    def _beat(self) -> None:
        while not self._done.wait(self.every):
            try:
                if self.store.pulse(self.job_id, self.worker, self.progress):
                    self.cancel.set()
                self.store.worker_seen(self.worker, self.job_id)
                if self._failing:
                    log.info("heartbeat of job %s: the storage answers again", self.job_id)
                self._failing = False
            except Exception as e:  # the database is away for a moment: keep searching, beat again later
                if not is_storage_outage(e):
                    log.warning("heartbeat of job %s failed; retrying", self.job_id, exc_info=True)
                elif not self._failing:  # one line per outage, not one traceback per beat
                    log.warning("heartbeat of job %s: storage unreachable (%s); beating on", self.job_id,
                                type(e).__name__)  # fmt: skip
                self._failing = is_storage_outage(e)

    def __enter__(self) -> Pulse:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(timeout=5)


class Worker:
    """Runs queued jobs of one store."""

    def __init__(self, settings: Settings, store: JobStore | None = None, worker_id: str | None = None) -> None:
        self.settings = settings
        self.store = store or JobStore(settings.storage_url, stale_seconds=settings.stale_seconds)
        self.id = worker_id or new_worker_id()
        self.stopping = threading.Event()

    def run_once(self) -> Job | None:
        """Claim and run one job; the job as it ended (None when the queue was empty)."""
        self.store.worker_seen(self.id)
        job = self.store.claim(self.id)
        if job is None:
            return None
        return self.run_claimed(job)

    def run_claimed(self, job: Job) -> Job | None:
        """Run a job this worker has claimed; the job as it ended."""
        log.info("worker %s runs job %s (%s)", self.id, job.id, job.summary)
        with Pulse(self.store, job.id, self.id, self.settings.heartbeat_seconds, self.stopping) as pulse:
            self._run(job, pulse)
        try:
            return self.store.get(job.id)
        except Exception as e:
            if not is_storage_outage(e):
                raise
            return job  # ended, but the storage went away again before it could be read back

    def _run(self, job: Job, pulse: Pulse) -> None:
        while True:
            try:
                prep = prepare(TuningRequest.model_validate(job.request))
                if job.kind == "trials":  # a helper of a search shared by several workers
                    state, result, reason = run_helper(self, job, prep, pulse)
                elif prep.kind == "tune" and prep.request.study_workers > 1:
                    state, result, reason = run_shared_search(self, job, prep, pulse)
                elif prep.kind == "workload":
                    state, result, reason = run_workload(self, job, prep, pulse)
                else:
                    state, result, reason = execute(prep, self.settings.storage_url, pulse.watch)
                break
            except (ProblemError, ValidationError) as e:
                self._finish(job, pulse, state="failed", error=str(e))
                return
            except Exception as e:
                if is_storage_outage(e) and not self.stopping.is_set():
                    # the database went away mid-job: wait for it, then run the job again (its finished
                    # searches answer from the result cache); the heartbeat keeps the claim meanwhile
                    log.warning("job %s met a storage outage (%s); running it again once the storage answers",
                                job.id, type(e).__name__)  # fmt: skip
                    try:
                        call_through_outages(self.stopping, f"job {job.id}", self.store.ping)
                    except Exception:
                        return  # stopping while the database is away: the claim goes stale, the job is re-queued
                    continue
                if is_storage_outage(e):
                    return  # stopping: as above
                log.error("job %s failed:\n%s", job.id, traceback.format_exc())  # a defect: on the job
                self._finish(job, pulse, state="failed", error=f"{type(e).__name__}: {e}")
                return
        if self.stopping.is_set() and not pulse.cancel.is_set() and state == "cancelled":
            # shutting down, not cancelled: another worker takes it
            self._stored(f"release of job {job.id}", self.store.release, job.id, self.id)
            return
        self._finish(job, pulse, state=state, result=result, stop_reason=reason)

    def _finish(self, job: Job, pulse: Pulse, **outcome: str | None) -> None:
        """Record the job's end, through storage outages (given up only when the worker is stopping: the
        claim then goes stale and the job is re-queued)."""
        self._stored(f"recording job {job.id}", self.store.finish, job.id, self.id, progress=pulse.progress,
                     **outcome)  # fmt: skip

    def _stored(self, what: str, fn: Callable[..., object], *args: object, **kw: object) -> None:
        try:
            call_through_outages(self.stopping, what, fn, *args, **kw)
        except Exception as e:
            if not is_storage_outage(e):
                raise
            log.warning("worker %s stops with %s not done: the storage is unreachable", self.id, what)

    def run(self, parent_pid: int | None = None) -> None:
        """Take jobs until `stopping` is set (or, given `parent_pid`, until that parent is gone: a worker
        `mapper serve` started finishes its job and exits when the server dies, rather than linger)."""
        log.info("worker %s on %s", self.id, _redact(self.settings.storage_url))
        try:
            while not self.stopping.is_set():
                if parent_pid is not None and os.getppid() != parent_pid:
                    log.info("worker %s: its server (pid %d) is gone; exiting", self.id, parent_pid)
                    break
                try:  # through storage outages with a back-off (pool_pre_ping reconnects)
                    job = call_through_outages(self.stopping, f"worker {self.id}", self.run_once)
                except Exception:
                    log.warning("worker %s: claiming a job failed; retrying", self.id, exc_info=True)
                    job = None
                if job is None:
                    self.stopping.wait(self.settings.poll_seconds)
        finally:
            try:
                self.store.worker_gone(self.id)
            except Exception:
                log.warning("could not deregister worker %s", self.id)


def _redact(url: str) -> str:
    """A URL without its password."""
    head, sep, tail = url.partition("@")
    if not sep or "://" not in head:
        return url
    scheme, _, cred = head.partition("://")
    return f"{scheme}://{cred.split(':')[0]}@{tail}"


def run_worker(settings: Settings, parent_pid: int | None = None) -> None:
    """Entry point of `mapper worker`: run jobs until SIGTERM or Ctrl-C (or the death of `parent_pid`)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings.prepare()
    log.info("allocator: %s", keep_freed_memory(settings.keep_freed_memory))
    worker = Worker(settings)

    def _stop(_signum: int, _frame: object) -> None:
        worker.stopping.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    worker.run(parent_pid)
