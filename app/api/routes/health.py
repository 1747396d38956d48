"""Liveness and readiness."""

from __future__ import annotations

import time

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy.engine import make_url

from app.api.deps import SettingsDep, StoreDep
from app.api.errors import NotReady
from app.api.schemas_engine import problem_responses

router = APIRouter(prefix="/v1", tags=["service"])


class Health(BaseModel):
    status: str = "ok"


class Readiness(BaseModel):
    ready: bool
    storage: str = Field(description="'ok', or why the database cannot be reached")
    workers: int = Field(description="worker processes seen within the stale limit")
    queued: int | None = Field(default=None, description="jobs waiting for a worker")
    checked_at: float


def storage_name(url: str) -> str:
    """The job database in words, without credentials: which database on which host, or which file."""
    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        return f"the embedded SQLite database {u.database}"
    return f"the {u.get_backend_name()} database {u.database!r} at {u.host}:{u.port or 5432}"


@router.get("/health", response_model=Health, summary="Liveness: the API process answers")
def health() -> Health:
    """Answers without touching the database, so it stays fast while searches run."""
    return Health()


@router.get(
    "/ready",
    response_model=Readiness,
    summary="Readiness: storage reachable and workers alive",
    responses=problem_responses(
        {503: "a problem detail: the storage is unreachable or no worker was seen recently (members as in 200)"}
    ),
)
def ready(store: StoreDep, settings: SettingsDep) -> Readiness | JSONResponse:
    """200 when the database answers and at least one worker heartbeated recently, else a 503 problem detail
    saying which (with the same members as the 200 body)."""
    try:
        store.ping()
        live = len(store.live_workers())
        queued: int | None = store.queue_depth()
        storage = "ok"
    except Exception as e:  # any database failure is an outage to report, not a crash
        storage, live, queued = f"unreachable: {type(e).__name__}", 0, None
    body = Readiness(
        ready=storage == "ok" and live > 0, storage=storage, workers=live, queued=queued, checked_at=time.time()
    )
    if body.ready:
        return body
    where = storage_name(settings.storage_url)
    if storage != "ok":
        detail = f"{where} is unreachable ({storage.removeprefix('unreachable: ')})"
        hint = "start the database server or fix TM_STORAGE; jobs resume when it answers"
    else:
        detail = f"no worker has reported within {settings.stale_seconds:g} s (storage: {where})"
        hint = "start one with `mapper worker` on the same TM_STORAGE, or `mapper serve --workers N`"
    # answered, not raised: a 503 here is a state to report, not an error for the log
    problem = {"type": "not-ready", "title": NotReady.title, "status": 503, "detail": detail, "hint": hint}
    return JSONResponse(problem | body.model_dump(), status_code=503, media_type="application/problem+json")
