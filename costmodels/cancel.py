"""A cooperative cancel point inside a target's long per-problem preparations.

A search is cancelled between its steps (`mapper.watch.Watch`); a target's per-problem preparation
(its space's tables, the bounds, the warm starts: up to seconds on RNGD) is one step the mapper
cannot split. So the mapper runs such calls inside `cancellable(stop)`, and a family's long
preparation loop calls `checkpoint()` between its own steps: it raises `Cancelled` once `stop`
says so. Outside `cancellable` (every other caller) `checkpoint` does nothing. Work a search can do
without (the warm starts' extra structures) also asks `past_deadline()` and ends early, keeping what
it has, once the search's deadline given to `cancellable` has passed. A preparation cut
short leaves no partial state behind: `costmodels.problem_memo.ProblemMemo` keeps a build only
when it returns, and the caller that set the stop catches `Cancelled`.

Kept in its own module, like `costmodels.structure_bound`: the cost-model version of a result
digests the shared modules a family imports, and this one prices nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from time import perf_counter

_STOP: ContextVar[Callable[[], bool] | None] = ContextVar("costmodels_cancel_stop", default=None)
_DEADLINE: ContextVar[float | None] = ContextVar("costmodels_cancel_deadline", default=None)


class Cancelled(Exception):
    """The caller of `cancellable` asked the running preparation to stop."""


def checkpoint() -> None:
    """Raise `Cancelled` when the enclosing `cancellable` block's `stop` says so (no block: nothing)."""
    stop = _STOP.get()
    if stop is not None and stop():
        raise Cancelled("cancelled during a target's preparation")


def past_deadline() -> bool:
    """Has the enclosing `cancellable` block's `deadline` passed? (No block or no deadline: never.)"""
    deadline = _DEADLINE.get()
    return deadline is not None and perf_counter() > deadline


@contextmanager
def cancellable(stop: Callable[[], bool] | None, deadline: float | None = None) -> Iterator[None]:
    """Let `checkpoint` calls in this block (this thread or task) raise `Cancelled` once `stop()` is true,
    and `past_deadline` say True after `deadline` (a ``time.perf_counter()`` value)."""
    token, token_d = _STOP.set(stop), _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _STOP.reset(token)
        _DEADLINE.reset(token_d)
