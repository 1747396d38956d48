"""Liveness and readiness."""

from __future__ import annotations

import time

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from app.api.deps import StoreDep

router = APIRouter(prefix="/v1", tags=["service"])


class Health(BaseModel):
    status: str = "ok"


class Readiness(BaseModel):
    ready: bool
    storage: str = Field(description="'ok', or why the database cannot be reached")
    workers: int = Field(description="worker processes seen within the stale limit")
    queued: int | None = Field(default=None, description="jobs waiting for a worker")
    checked_at: float


@router.get("/health", response_model=Health, summary="Liveness: the API process answers")
def health() -> Health:
    """Answers without touching the database, so it stays fast while searches run."""
    return Health()


@router.get(
    "/ready",
    response_model=Readiness,
    summary="Readiness: storage reachable and workers alive",
    responses={503: {"model": Readiness, "description": "storage unreachable or no worker seen recently"}},
)
def ready(store: StoreDep) -> JSONResponse:
    """200 when the database answers and at least one worker heartbeated recently, else 503 saying which."""
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
    return JSONResponse(body.model_dump(), status_code=200 if body.ready else 503)
