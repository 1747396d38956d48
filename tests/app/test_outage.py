"""Storage outages told apart from defects, and waited out with a back-off until the storage answers."""

from __future__ import annotations

import threading

import pytest
from optuna.exceptions import StorageInternalError
from sqlalchemy.exc import IntegrityError, OperationalError

from app.jobs import outage
from app.jobs.outage import call_through_outages, is_storage_outage


def _refused() -> OperationalError:
    return OperationalError("SELECT 1", {}, ConnectionRefusedError("connection refused"))


def test_outages_are_told_from_defects() -> None:
    assert is_storage_outage(_refused())
    try:  # Optuna's RDB storage wraps the driver's error
        raise StorageInternalError("An exception is raised during the commit") from _refused()
    except StorageInternalError as e:
        assert is_storage_outage(e)
    try:  # found through the chain of a later error
        try:
            raise _refused()
        except OperationalError as inner:
            raise RuntimeError("while storing the result") from inner
    except RuntimeError as e:
        assert is_storage_outage(e)
    assert not is_storage_outage(IntegrityError("INSERT", {}, ValueError("duplicate key")))
    assert not is_storage_outage(ValueError("a defect"))


def test_a_call_is_repeated_until_the_storage_answers() -> None:
    waits: list[float] = []

    class Stopping(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:  # records the back-off instead of sleeping
            waits.append(float(timeout or 0))
            return False

    calls = iter([_refused(), _refused(), _refused(), "done"])

    def flaky() -> str:
        got = next(calls)
        if isinstance(got, Exception):
            raise got
        return got

    assert call_through_outages(Stopping(), "test", flaky) == "done"
    assert len(waits) == 3 and 0 < waits[0] < waits[1] < waits[2] <= outage.MAX_BACKOFF_SECONDS, waits  # backs off


def test_a_defect_is_raised_at_once_and_stopping_ends_the_wait() -> None:
    calls = []

    def broken() -> None:
        calls.append(1)
        raise ValueError("a defect")

    with pytest.raises(ValueError):
        call_through_outages(threading.Event(), "test", broken)
    assert len(calls) == 1

    stopping = threading.Event()
    stopping.set()

    def away() -> None:
        calls.append(2)
        raise _refused()

    with pytest.raises(OperationalError):  # a worker told to stop gives up waiting
        call_through_outages(stopping, "test", away)
    assert calls.count(2) == 1
