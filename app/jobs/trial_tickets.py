"""The trial budget of a search shared by several workers (`app.jobs.shared_study`).

Optuna's `MaxTrialsCallback` stops a study once enough trials exist, but workers racing past it
can overshoot. So every fresh trial first takes a ticket: one conditional UPDATE of the job's row
in `tm_trial_tickets` that succeeds only while tickets remain, atomic on SQLite and PostgreSQL
alike. A retried stale trial keeps the ticket it had.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError

from app.jobs.tables import trial_tickets

if TYPE_CHECKING:
    from app.jobs.store import JobStore


def open_tickets(store: JobStore, job_id: str, budget: int) -> None:
    """Set the trial budget of a shared search (again after a restart of its job: kept as it was)."""
    try:
        with store.transaction(immediate=True) as c:
            c.execute(insert(trial_tickets).values(job_id=job_id, budget=budget, taken=0))
    except IntegrityError:
        pass  # the job runs again (re-claimed): the trials already run keep their tickets


def take_ticket(store: JobStore, job_id: str) -> bool:
    """Take one trial of a shared search's budget; False once the budget is spent."""
    with store.transaction(immediate=True) as c:
        n = c.execute(
            update(trial_tickets)
            .where(trial_tickets.c.job_id == job_id, trial_tickets.c.taken < trial_tickets.c.budget)
            .values(taken=trial_tickets.c.taken + 1)
        ).rowcount
    return n == 1


def tickets_taken(store: JobStore, job_id: str) -> int:
    """Trials of the budget taken so far."""
    with store.transaction() as c:
        return int(c.execute(select(trial_tickets.c.taken).where(trial_tickets.c.job_id == job_id)).scalar() or 0)
