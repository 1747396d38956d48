"""Durable tuning jobs: the request and job models, the SQL store, the code that runs a job, workers."""

from app.jobs.models import Job, JobState, TuningRequest
from app.jobs.store import JobStore

__all__ = ["Job", "JobState", "JobStore", "TuningRequest"]
