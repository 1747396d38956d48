"""The job store on both storages: one live job per request, atomic claims, heartbeats, cancel, re-queue."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy.exc import OperationalError

from app.jobs.models import JobProgress
from app.jobs.store import JobStore
from app.settings import Settings


def _store(s: Settings, stale: float = 30.0) -> JobStore:
    s.prepare()
    return JobStore(s.storage_url, stale_seconds=stale)


def _submit(store: JobStore, key: str = "k1") -> tuple[str, bool]:
    job, created = store.submit(key=key, kind="tune", summary="s", targets=["trn2"], request={"target": "trn2"})
    return job.id, created


def test_identical_requests_share_one_live_job(any_settings: Settings) -> None:
    store = _store(any_settings)
    a, created_a = _submit(store)
    b, created_b = _submit(store)
    assert created_a and not created_b and a == b
    c, created_c = _submit(store, "k2")
    assert created_c and c != a


def test_concurrent_identical_submissions_create_one_job(any_settings: Settings) -> None:
    store = _store(any_settings)
    ids: list[str] = []
    barrier = threading.Barrier(8)

    def go() -> None:
        barrier.wait()
        ids.append(_submit(store, "same")[0])

    threads = [threading.Thread(target=go) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 1 and store.counts() == {"queued": 1}


def test_each_job_is_claimed_by_exactly_one_of_many_workers(any_settings: Settings) -> None:
    store = _store(any_settings)
    submitted = {_submit(store, f"k{i}")[0] for i in range(12)}
    claimed: list[str] = []
    lock = threading.Lock()

    def worker(name: str) -> None:
        other = JobStore(store.url)  # a connection pool of its own, like another process
        while (job := other.claim(name)) is not None:
            with lock:
                claimed.append(job.id)

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(claimed) == sorted(submitted)  # none twice, none lost
    assert store.counts() == {"running": 12}


def test_a_finished_failed_job_frees_its_key_for_a_new_search(any_settings: Settings) -> None:
    store = _store(any_settings)
    a, _ = _submit(store)
    assert store.claim("w") is not None
    assert store.finish(a, "w", state="failed", error="boom")
    b, created = _submit(store)
    assert created and b != a


def test_a_succeeded_job_keeps_answering_its_request(any_settings: Settings) -> None:
    store = _store(any_settings)
    a, _ = _submit(store)
    store.claim("w")
    store.finish(a, "w", state="succeeded", result='{"x": 1}', progress=JobProgress(done=3, total=3, unit="trials"))
    b, created = _submit(store)
    assert not created and b == a and store.result(a) == '{"x": 1}'
    job = store.get(a)
    assert job is not None and job.progress.done == 3 and job.finished_at is not None


def test_only_the_claiming_worker_may_finish_a_job(any_settings: Settings) -> None:
    store = _store(any_settings)
    a, _ = _submit(store)
    store.claim("w1")
    assert not store.finish(a, "w2", state="succeeded", result="{}")
    assert store.get(a).state == "running"  # type: ignore[union-attr]


def test_cancel_queued_at_once_running_by_request(any_settings: Settings) -> None:
    store = _store(any_settings)
    q, _ = _submit(store, "q")
    assert store.cancel(q).state == "cancelled"  # type: ignore[union-attr]
    r, _ = _submit(store, "r")
    store.claim("w")
    after = store.cancel(r)
    assert after is not None and after.state == "running" and after.cancel_requested
    assert store.pulse(r, "w", JobProgress(done=1, total=9, unit="trials"))  # the worker hears it


def test_a_claim_returns_its_job_from_the_claiming_transaction(
    any_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a second read after the commit could meet a storage outage: the job would be running under a worker
    # that never heard of it until its claim went stale
    store = _store(any_settings)
    a, _ = _submit(store)

    def unreachable(job_id: str) -> None:
        raise OperationalError("SELECT", {}, Exception("server closed the connection"))

    monkeypatch.setattr(store, "get", unreachable)
    job = store.claim("w")
    assert job is not None and job.id == a and job.state == "running" and job.worker == "w" and job.attempts == 1


def test_a_late_heartbeat_leaves_a_finished_job_as_it_ended(any_settings: Settings) -> None:
    # the beat thread read the progress before the job's last report and lands after `finish`
    store = _store(any_settings)
    a, _ = _submit(store)
    store.claim("w")
    assert store.finish(a, "w", state="succeeded", result="{}", progress=JobProgress(done=3, total=3, unit="targets"))
    store.pulse(a, "w", JobProgress(done=2, total=3, unit="targets"))
    job = JobStore(store.url).get(a)  # another process's view: from the database, not this one's memory
    assert job is not None and job.state == "succeeded"
    assert (job.progress.done, job.progress.total) == (3, 3)


def test_a_job_whose_worker_stopped_heartbeating_is_requeued(any_settings: Settings) -> None:
    store = _store(any_settings, stale=0.3)
    a, _ = _submit(store)
    assert store.claim("dead") is not None
    time.sleep(0.5)
    job = store.claim("alive")  # re-queues the stale job, then claims it
    assert job is not None and job.id == a and job.worker == "alive" and job.attempts == 2


def test_a_job_that_kills_every_worker_fails_after_max_attempts(any_settings: Settings) -> None:
    any_settings.prepare()
    store = JobStore(any_settings.storage_url, stale_seconds=0.2, max_attempts=2)
    a, _ = _submit(store)
    assert store.claim("w1") is not None
    time.sleep(0.3)
    assert store.claim("w2") is not None  # second attempt
    time.sleep(0.3)
    assert store.claim("w3") is None
    job = store.get(a)
    assert job is not None and job.state == "failed" and "2 times" in (job.error or "")
    assert _submit(store)[1]  # the key is free: a new request may try again


def test_a_heartbeating_job_is_not_requeued(any_settings: Settings) -> None:
    # beats 0.25 s apart against a 1 s limit (room for a loaded machine's late wake-ups), 1.25 s in all: without
    # them the claim would have gone stale
    store = _store(any_settings, stale=1.0)
    a, _ = _submit(store)
    store.claim("w")
    for _ in range(5):
        time.sleep(0.25)
        store.pulse(a, "w")
    assert store.requeue_stale() == 0 and store.get(a).state == "running"  # type: ignore[union-attr]


def test_pages_are_newest_first_and_complete(any_settings: Settings) -> None:
    store = _store(any_settings)
    ids = [_submit(store, f"k{i}")[0] for i in range(7)]
    seen: list[str] = []
    cursor = None
    while True:
        page = store.page(limit=3, cursor=cursor)
        seen += [j.id for j in page.items]
        if page.next_cursor is None:
            break
        cursor = int(page.next_cursor)
    assert seen == ids[::-1]
    assert [j.id for j in store.page(state="queued", limit=50).items] == ids[::-1]


@pytest.mark.parametrize("n", [1, 3])
def test_live_workers_are_the_recently_seen(settings: Settings, n: int) -> None:
    store = _store(settings, stale=1.0)  # (room for a loaded machine between the registrations and the count)
    for i in range(n):
        store.worker_seen(f"host:{100 + i}:x")
    assert len(store.live_workers()) == n
    time.sleep(1.1)
    assert store.live_workers() == []
