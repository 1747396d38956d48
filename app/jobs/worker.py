"""A worker process: take the oldest queued job, run it, record the result; forever.

While a job runs, a pulse thread writes the job's heartbeat and progress every
`heartbeat_seconds` and reads whether its client asked to cancel; the search hears that through
its `Watch` and stops within a trial or an enumeration chunk. A worker told to stop (SIGTERM,
Ctrl-C) stops its search the same way and gives the job back to the queue. A worker that dies
stops heartbeating; after `stale_seconds` the next claim re-queues its job.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import traceback

from pydantic import ValidationError

from app.jobs.fanout import run_workload
from app.jobs.models import Job, JobProgress, TuningRequest
from app.jobs.runner import execute, prepare
from app.jobs.store import JobStore, new_worker_id
from app.settings import Settings
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
            except Exception:  # the database is away for a moment: keep searching, beat again later
                log.warning("heartbeat of job %s failed; retrying", self.job_id, exc_info=True)

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
        return self.store.get(job.id)

    def _run(self, job: Job, pulse: Pulse) -> None:
        try:
            prep = prepare(TuningRequest.model_validate(job.request))
            if prep.kind == "workload":
                state, result, reason = run_workload(self, job, prep, pulse)
            else:
                state, result, reason = execute(prep, self.settings.storage_url, pulse.watch)
        except (ProblemError, ValidationError) as e:
            self.store.finish(job.id, self.id, state="failed", error=str(e), progress=pulse.progress)
            return
        except Exception as e:  # a defect: record it on the job, keep the worker alive
            log.error("job %s failed:\n%s", job.id, traceback.format_exc())
            self.store.finish(
                job.id, self.id, state="failed", error=f"{type(e).__name__}: {e}", progress=pulse.progress
            )
            return
        if self.stopping.is_set() and not pulse.cancel.is_set() and state == "cancelled":
            self.store.release(job.id, self.id)  # shutting down, not cancelled: another worker takes it
            return
        self.store.finish(job.id, self.id, state=state, result=result, stop_reason=reason, progress=pulse.progress)

    def run(self, parent_pid: int | None = None) -> None:
        """Take jobs until `stopping` is set (or, given `parent_pid`, until that parent is gone: a worker
        `mapper serve` started finishes its job and exits when the server dies, rather than linger)."""
        log.info("worker %s on %s", self.id, _redact(self.settings.storage_url))
        try:
            while not self.stopping.is_set():
                if parent_pid is not None and os.getppid() != parent_pid:
                    log.info("worker %s: its server (pid %d) is gone; exiting", self.id, parent_pid)
                    break
                try:
                    job = self.run_once()
                except Exception:  # database outage: wait and try again (pool_pre_ping reconnects)
                    log.warning("worker %s cannot reach the storage; retrying", self.id, exc_info=True)
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
    worker = Worker(settings)

    def _stop(_signum: int, _frame: object) -> None:
        worker.stopping.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    worker.run(parent_pid)
