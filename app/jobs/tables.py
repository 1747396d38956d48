"""The job tables, in the same database as the Optuna result cache (SQLAlchemy Core)."""

from __future__ import annotations

from sqlalchemy import Boolean, Column, Float, Index, Integer, MetaData, String, Table, Text

metadata = MetaData()

#: one row per tuning job; `active_key` is the request key while the job can still answer it
#: (queued, running, succeeded) and NULL once it failed or was cancelled, so a unique index makes
#: "one live job per request" hold even when two identical requests arrive at once
jobs = Table(
    "tm_jobs",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("id", String(32), nullable=False, unique=True),
    Column("key", String(64), nullable=False, index=True),
    Column("active_key", String(64), nullable=True, unique=True),
    Column("kind", String(16), nullable=False),
    Column("summary", String(300), nullable=False),
    Column("targets", Text, nullable=False),
    Column("request", Text, nullable=False),
    Column("state", String(16), nullable=False),
    Column("progress_done", Integer, nullable=False, default=0),
    Column("progress_total", Integer, nullable=False, default=0),
    Column("progress_unit", String(16), nullable=False, default=""),
    Column("best", Float, nullable=True),
    Column("result", Text, nullable=True),
    Column("stop_reason", String(32), nullable=True),
    Column("error", Text, nullable=True),
    Column("cancel_requested", Boolean, nullable=False, default=False),
    Column("worker", String(200), nullable=True),
    Column("client", String(80), nullable=True),
    Column("parent_id", String(32), nullable=True, index=True),
    Column("attempts", Integer, nullable=False, default=0),
    Column("created_at", Float, nullable=False),
    Column("started_at", Float, nullable=True),
    Column("finished_at", Float, nullable=True),
    Column("heartbeat_at", Float, nullable=True),
)
Index("tm_jobs_state_seq", jobs.c.state, jobs.c.seq)
Index("tm_jobs_client_state", jobs.c.client, jobs.c.state)

#: worker processes, so /v1/ready can tell whether anything will run the queue
workers = Table(
    "tm_workers",
    metadata,
    Column("id", String(200), primary_key=True),
    Column("host", String(200), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("started_at", Float, nullable=False),
    Column("seen_at", Float, nullable=False),
    Column("job_id", String(32), nullable=True),
)

#: the trial budget of a search shared by several workers (`app.jobs.shared_study`): each fresh trial takes a
#: ticket with one conditional UPDATE (``taken < budget``), so the workers together run exactly the budget
trial_tickets = Table(
    "tm_trial_tickets",
    metadata,
    Column("job_id", String(32), primary_key=True),
    Column("budget", Integer, nullable=False),
    Column("taken", Integer, nullable=False, default=0),
)
