"""Telling a storage outage from a defect, and waiting one out (tenacity) instead of dying.

A database restart disconnects every session: SQLAlchemy raises `OperationalError` (or
`InterfaceError`, or a `DBAPIError` flagged ``connection_invalidated``) and Optuna's RDB storage
wraps the same as `StorageInternalError`. None of these says anything about the job: a worker
that meets one waits for the database with an exponential back-off and carries on; the engine's
``pool_pre_ping`` replaces the dead connections once the server is back.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

from optuna.exceptions import StorageInternalError
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from tenacity import RetryCallState, Retrying, retry_if_exception, wait_exponential

log = logging.getLogger("tensormapper.worker")

T = TypeVar("T")

#: back-off between tries while the database is away: 0.2 s doubling up to this many seconds
MAX_BACKOFF_SECONDS = 5.0


def is_storage_outage(exc: BaseException) -> bool:
    """Whether `exc` (or an exception it was raised from) is the database being unreachable."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OperationalError | InterfaceError | StorageInternalError):
            return True
        if isinstance(e, DBAPIError) and e.connection_invalidated:
            return True
        e = e.__cause__ or e.__context__
    return False


def _nap(stopping: threading.Event, seconds: float) -> None:
    stopping.wait(seconds)  # woken early by a stop


def through_outages(stopping: threading.Event, what: str) -> Retrying:
    """A tenacity `Retrying` that repeats a call while it fails with a storage outage, backing off
    exponentially, until it succeeds or `stopping` is set (then the last outage error is raised);
    any other error is raised at once."""

    def _log(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        first = str(exc).splitlines()[0][:200] if exc else ""
        log.warning("%s: storage unreachable (%s: %s); try %d again in %.1f s", what, type(exc).__name__, first,
                    state.attempt_number + 1, wait)  # fmt: skip

    return Retrying(
        retry=retry_if_exception(is_storage_outage),
        wait=wait_exponential(multiplier=0.2, min=0.2, max=MAX_BACKOFF_SECONDS),
        stop=lambda _state: stopping.is_set(),
        sleep=lambda seconds: _nap(stopping, seconds),
        before_sleep=_log,
        reraise=True,
    )


def call_through_outages(stopping: threading.Event, what: str, fn: Callable[..., T], *args: object, **kw: object) -> T:
    """`fn(*args, **kw)`, repeated through storage outages (see `through_outages`)."""
    return through_outages(stopping, what)(fn, *args, **kw)
