"""Jobs in a SQL database: submit, claim, heartbeat, cancel, finish, and re-queue the abandoned.

The database is the service's one storage: an embedded SQLite file by default, PostgreSQL when
the settings name one. Claims are atomic: on PostgreSQL the oldest queued row is locked with
``FOR UPDATE SKIP LOCKED``, on SQLite the claim runs in a ``BEGIN IMMEDIATE`` transaction (one
writer at a time); in both the update re-checks ``state = 'queued'``. A job whose worker stopped
heartbeating for `stale_seconds` goes back to the queue (or to ``cancelled`` if a cancel was
asked). There is no scheduler beyond that claim.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, delete, event, func, insert, select, text, update
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from app.jobs.models import FINISHED, Job, JobPage, JobProgress
from app.jobs.tables import jobs, metadata, workers
from mapper.cache import open_storage

#: bytes of finished jobs' results one process keeps in memory (see `JobStore.finished`)
FINISHED_CACHE_BYTES = 64 << 20


def make_engine(url: str) -> Engine:
    """An engine for the store (and pre-ping, so a restarted database is reconnected to)."""
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True, future=True)
    engine = create_engine(url, pool_pre_ping=True, connect_args={"timeout": 30, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # SQLAlchemy emits BEGIN itself (below), as its docs recommend
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")  # readers do not wait for the writer
        cur.execute("PRAGMA busy_timeout=30000")
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("immediate") else "BEGIN")

    return engine


def etag_of(body: bytes) -> str:
    """A strong ETag of a result's bytes (a finished result never changes, so it never goes stale)."""
    return '"' + hashlib.blake2b(body, digest_size=16).hexdigest() + '"'


def _progress_values(progress: JobProgress) -> dict[str, Any]:
    return {"progress_done": progress.done, "progress_total": progress.total, "progress_unit": progress.unit,
            "best": progress.best}  # fmt: skip


def new_worker_id() -> str:
    """host:pid:random, unique per worker process."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class JobStore:
    """The job rows of one database."""

    def __init__(self, url: str, *, stale_seconds: float = 30.0, max_attempts: int = 3) -> None:
        self.url = url
        self.stale_seconds = stale_seconds
        self.max_attempts = max_attempts
        self.engine = make_engine(url)
        self._create_tables()
        # a finished job never changes again (nothing updates a row once it is finished), so this process
        # keeps the most recently read ones: repeated reads of results cost no database round trip
        self._finished: OrderedDict[str, tuple[Job, str | None]] = OrderedDict()
        self._finished_bytes = 0
        self._bodies: dict[str, tuple[bytes, str]] = {}  # job id -> (result as sent, its ETag)
        self._finished_lock = threading.Lock()

    def _create_tables(self, tries: int = 5) -> None:
        """The job tables and the result cache's, created before any job runs (processes starting
        together on a fresh database race for them: a writer's lock on SQLite, a duplicate-table error on
        PostgreSQL; the loser tries again and finds them made)."""
        for attempt in range(tries):
            try:
                with self.transaction(immediate=True) as c:
                    metadata.create_all(c)
                open_storage(self.url)
                return
            except (OperationalError, IntegrityError, ProgrammingError):
                if attempt == tries - 1:
                    raise
                time.sleep(0.2 * (attempt + 1))

    @contextmanager
    def transaction(self, immediate: bool = False) -> Iterator[Connection]:
        """A connection in a transaction (``BEGIN IMMEDIATE`` on SQLite when `immediate`: a writer from the start)."""
        conn = self.engine.connect()
        if immediate and self.engine.dialect.name == "sqlite":
            conn = conn.execution_options(immediate=True)
        try:
            with conn.begin():
                yield conn
        finally:
            conn.close()

    # ---- submit and read -------------------------------------------------------------------

    def submit(
        self,
        *,
        key: str,
        kind: str,
        summary: str,
        targets: list[str],
        request: dict[str, Any],
        result: str | None = None,
        stop_reason: str | None = None,
        client: str | None = None,
        parent_id: str | None = None,
    ) -> tuple[Job, bool]:
        """Queue a job, or return the live job of the same key. With `result`, the job is born finished.

        Returns:
            (job, created): created is False when an existing job answers the request.
        """
        now = time.time()
        row = {
            "id": uuid.uuid4().hex,
            "key": key,
            "active_key": key,
            "kind": kind,
            "summary": summary[:300],
            "targets": json.dumps(targets),
            "request": json.dumps(request, sort_keys=True),
            "state": "queued" if result is None else "succeeded",
            "progress_done": 0 if result is None else 1,
            "progress_total": 0 if result is None else 1,
            "progress_unit": "" if result is None else "cached",
            "result": result,
            "stop_reason": stop_reason,
            "cancel_requested": False,
            "client": client,
            "parent_id": parent_id,
            "attempts": 0,
            "created_at": now,
            "finished_at": None if result is None else now,
        }
        existing = self.find_active(key)
        if existing is not None:
            return existing, False
        try:
            with self.transaction() as c:
                c.execute(insert(jobs).values(**row))
        except IntegrityError:  # an identical request won the race
            found = self.find_active(key)
            if found is None:
                raise
            return found, False
        job = self.get(str(row["id"]))
        assert job is not None
        return job, True

    def find_active(self, key: str) -> Job | None:
        with self.transaction() as c:
            r = c.execute(select(jobs).where(jobs.c.active_key == key)).mappings().first()
        return Job.from_row(r) if r else None

    def get(self, job_id: str) -> Job | None:
        hit = self.finished(job_id)
        if hit is not None:
            return hit[0]
        with self.transaction() as c:
            r = c.execute(select(jobs).where(jobs.c.id == job_id)).mappings().first()
        if r is None:
            return None
        job = Job.from_row(r)
        if job.state in FINISHED:
            self._keep(job, r["result"])
        return job

    def finished(self, job_id: str) -> tuple[Job, str | None] | None:
        """A finished job and its result from this process's memory, without the database (None: not kept)."""
        with self._finished_lock:
            hit = self._finished.get(job_id)
            if hit is not None:
                self._finished.move_to_end(job_id)
            return hit

    def finished_body(self, job_id: str) -> tuple[bytes, str] | None:
        """A finished job's result as the bytes a response sends and their ETag, from memory (None: not kept)."""
        with self._finished_lock:
            return self._bodies.get(job_id)

    def _keep(self, job: Job, result: str | None) -> None:
        size = 2 * len(result or "") + 2048  # the text and its encoded bytes
        with self._finished_lock:
            if job.id in self._finished:
                return
            self._finished[job.id] = (job, result)
            if result is not None:
                body = result.encode()
                self._bodies[job.id] = (body, etag_of(body))
            self._finished_bytes += size
            while self._finished_bytes > FINISHED_CACHE_BYTES and len(self._finished) > 1:
                gone, (_, old) = self._finished.popitem(last=False)
                self._bodies.pop(gone, None)
                self._finished_bytes -= 2 * len(old or "") + 2048

    def active_of(self, client: str) -> int:
        """Jobs of a client that are queued or running."""
        q = (
            select(func.count())
            .select_from(jobs)
            .where(jobs.c.client == client, jobs.c.state.in_(("queued", "running")))
        )
        with self.transaction() as c:
            return int(c.execute(q).scalar() or 0)

    def result(self, job_id: str) -> str | None:
        """The stored result JSON of a job (None until it has one)."""
        hit = self.finished(job_id)
        if hit is not None:
            return hit[1]
        with self.transaction() as c:
            return c.execute(select(jobs.c.result).where(jobs.c.id == job_id)).scalar()

    def page(self, *, state: str | None = None, limit: int = 50, cursor: int | None = None) -> JobPage:
        """Jobs newest first; `cursor` is the `seq` after which to continue (from `next_cursor`)."""
        q = select(jobs).order_by(jobs.c.seq.desc()).limit(limit + 1)
        if state:
            q = q.where(jobs.c.state == state)
        if cursor is not None:
            q = q.where(jobs.c.seq < cursor)
        with self.transaction() as c:
            rows = list(c.execute(q).mappings())
        more = len(rows) > limit
        rows = rows[:limit]
        return JobPage(
            items=[Job.from_row(r) for r in rows], next_cursor=str(rows[-1]["seq"]) if more and rows else None
        )

    def counts(self) -> dict[str, int]:
        """Jobs per state."""
        with self.transaction() as c:
            return {s: int(n) for s, n in c.execute(select(jobs.c.state, func.count()).group_by(jobs.c.state))}

    def search_seconds(self) -> tuple[float, int]:
        """Total seconds finished jobs spent running, and how many there are."""
        q = select(func.sum(jobs.c.finished_at - jobs.c.started_at), func.count()).where(
            jobs.c.started_at.is_not(None), jobs.c.finished_at.is_not(None)
        )
        with self.transaction() as c:
            total, n = c.execute(q).one()
        return float(total or 0.0), int(n)

    def ping(self) -> None:
        """Raise if the database cannot be reached."""
        with self.transaction() as c:
            c.execute(text("SELECT 1"))

    # ---- cancel ----------------------------------------------------------------------------

    def cancel(self, job_id: str) -> Job | None:
        """Cancel a queued job at once, or ask its worker to stop a running one.

        Returns the job after the change (None if unknown). A finished job is returned unchanged:
        the caller tells it by its state.
        """
        now = time.time()
        mine = (jobs.c.id == job_id) | (jobs.c.parent_id == job_id)  # a workload job's layer jobs go with it
        with self.transaction(immediate=True) as c:
            c.execute(
                update(jobs)
                .where(mine, jobs.c.state == "queued")
                .values(state="cancelled", active_key=None, finished_at=now, stop_reason="cancelled")
            )
            c.execute(update(jobs).where(mine, jobs.c.state == "running").values(cancel_requested=True))
        return self.get(job_id)

    def cancel_requested(self, job_id: str) -> bool:
        with self.transaction() as c:
            return bool(c.execute(select(jobs.c.cancel_requested).where(jobs.c.id == job_id)).scalar())

    # ---- workers ---------------------------------------------------------------------------

    def claim(self, worker: str, parent_id: str | None = None) -> Job | None:
        """Take the oldest queued job for `worker` (after re-queueing abandoned ones), or None; with
        `parent_id`, only a queued layer job of that workload job."""
        self.requeue_stale()
        now = time.time()
        # never a layer job of a workload job whose cancel was asked (its layers queued after the cancel arrived)
        parent = jobs.alias("parent")
        stopped = select(parent.c.id).where(parent.c.id == jobs.c.parent_id, parent.c.cancel_requested.is_(True))
        pick = select(jobs.c.id).where(jobs.c.state == "queued", ~stopped.exists()).order_by(jobs.c.seq).limit(1)
        if parent_id is not None:
            pick = pick.where(jobs.c.parent_id == parent_id)
        if self.engine.dialect.name == "postgresql":
            pick = pick.with_for_update(skip_locked=True)
        with self.transaction(immediate=True) as c:
            job_id = c.execute(pick).scalar()
            if job_id is None:
                return None
            done = c.execute(
                update(jobs)
                .where(jobs.c.id == job_id, jobs.c.state == "queued")
                .values(
                    state="running",
                    worker=worker,
                    started_at=now,
                    heartbeat_at=now,
                    attempts=jobs.c.attempts + 1,
                )
            ).rowcount
            # read back in the same transaction: a storage outage after the commit would otherwise leave the
            # job running under this worker, which never heard of it, until its claim went stale
            row = c.execute(select(jobs).where(jobs.c.id == job_id)).mappings().first() if done == 1 else None
        return None if row is None else Job.from_row(row)

    def pulse(self, job_id: str, worker: str, progress: JobProgress | None = None) -> bool:
        """Heartbeat a claimed job (with its progress); True if its client asked it to stop.

        Only a running job is touched: a beat that read the progress before the job's last report and
        lands after `finish` must not write the older progress over the finished row's."""
        values: dict[str, Any] = {"heartbeat_at": time.time()}
        if progress is not None:
            values |= _progress_values(progress)
        with self.transaction() as c:
            c.execute(
                update(jobs)
                .where(jobs.c.id == job_id, jobs.c.worker == worker, jobs.c.state == "running")
                .values(**values)
            )
            return bool(c.execute(select(jobs.c.cancel_requested).where(jobs.c.id == job_id)).scalar())

    def finish(
        self,
        job_id: str,
        worker: str,
        *,
        state: str,
        result: str | None = None,
        stop_reason: str | None = None,
        error: str | None = None,
        progress: JobProgress | None = None,
    ) -> bool:
        """Record the end of a job this worker holds; False if it lost the claim meanwhile."""
        assert state in FINISHED
        values: dict[str, Any] = {
            "state": state,
            "result": result,
            "stop_reason": stop_reason,
            "error": error,
            "finished_at": time.time(),
        }
        if state != "succeeded":
            values["active_key"] = None  # a new identical request searches again
        if progress is not None:
            values |= _progress_values(progress)
        with self.transaction(immediate=True) as c:
            n = c.execute(
                update(jobs)
                .where(jobs.c.id == job_id, jobs.c.worker == worker, jobs.c.state == "running")
                .values(**values)
            ).rowcount
        return n == 1

    def release(self, job_id: str, worker: str) -> None:
        """Give a job this worker holds back to the queue (the worker is shutting down)."""
        with self.transaction(immediate=True) as c:
            c.execute(
                update(jobs)
                .where(jobs.c.id == job_id, jobs.c.worker == worker, jobs.c.state == "running")
                .values(state="queued", worker=None, heartbeat_at=None, started_at=None)
            )

    def requeue_stale(self) -> int:
        """Give jobs whose worker stopped heartbeating back to the queue.

        A job whose cancel was asked ends ``cancelled`` instead; one that has already worn out
        `max_attempts` workers (a crash or out-of-memory it causes every time) ends ``failed``.
        """
        limit = time.time() - self.stale_seconds
        stale = (jobs.c.state == "running", jobs.c.heartbeat_at < limit)
        with self.transaction(immediate=True) as c:
            gone = list(c.execute(select(jobs.c.id).where(*stale, jobs.c.cancel_requested.is_(True))).scalars())
            # with their queued layer jobs: a cancelled workload's are never claimed, so they would wait forever
            c.execute(
                update(jobs)
                .where(jobs.c.id.in_(gone) | (jobs.c.parent_id.in_(gone) & (jobs.c.state == "queued")))
                .values(state="cancelled", active_key=None, finished_at=time.time(), stop_reason="cancelled")
            )
            c.execute(
                update(jobs)
                .where(*stale, jobs.c.attempts >= self.max_attempts)
                .values(
                    state="failed",
                    active_key=None,
                    finished_at=time.time(),
                    error=f"its worker stopped responding {self.max_attempts} times (crashed or ran out of memory?)",
                )
            )
            return int(
                c.execute(
                    update(jobs).where(*stale).values(state="queued", worker=None, heartbeat_at=None, started_at=None)
                ).rowcount
            )

    def worker_seen(self, worker: str, job_id: str | None = None) -> None:
        """Record that a worker is alive (and what it holds)."""
        host, _, rest = worker.partition(":")
        pid = int(rest.split(":")[0]) if rest.split(":")[0].isdigit() else 0
        now = time.time()
        with self.transaction() as c:
            n = c.execute(update(workers).where(workers.c.id == worker).values(seen_at=now, job_id=job_id)).rowcount
            if n == 0:
                c.execute(
                    insert(workers).values(id=worker, host=host, pid=pid, started_at=now, seen_at=now, job_id=job_id)
                )

    def worker_gone(self, worker: str) -> None:
        with self.transaction() as c:
            c.execute(delete(workers).where(workers.c.id == worker))

    def live_workers(self, within: float | None = None) -> list[dict[str, Any]]:
        """Workers seen within `within` seconds (default `stale_seconds`)."""
        limit = time.time() - (self.stale_seconds if within is None else within)
        with self.transaction() as c:
            rows = c.execute(select(workers).where(workers.c.seen_at >= limit).order_by(workers.c.id)).mappings()
            return [dict(r) for r in rows]

    def queue_depth(self) -> int:
        with self.transaction() as c:
            return int(c.execute(select(func.count()).select_from(jobs).where(jobs.c.state == "queued")).scalar() or 0)

    def close(self) -> None:
        self.engine.dispose()
