"""Builds the FastAPI application: routers, problem-detail errors, metrics, the offline console."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from app.api import body_limit, errors, examples_engine, fast_reads, openapi_security, openapi_statuses
from app.api.deps import Reader
from app.api.routes import health, mappings, metrics, models, problems, targets, tunings, workloads
from app.jobs.store import JobStore
from app.settings import Settings

DESCRIPTION = """Mapping search and autotuning for AI accelerators.

Send a tensor problem (an einsum or a conv2d) and a target chip; get back the mapping that runs
fastest there, why (a cost report against the roofline bound), and proof that the mapping
computes the right thing (a tile-by-tile execution in the declared number formats).

Start with **POST /v1/tunings** ("Try it out", pick an example, "Execute"), then follow the job
at the `Location` it returns. Errors are RFC 9457 problem details.
"""


def create_app(settings: Settings | None = None, on_shutdown: Callable[[], None] | None = None) -> FastAPI:
    """The service on `settings` (default: from the environment); `on_shutdown` runs when it stops."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        settings.prepare()
        app.state.store = JobStore(settings.storage_url, stale_seconds=settings.stale_seconds)
        try:
            yield
        finally:
            app.state.store.close()
            if on_shutdown is not None:
                on_shutdown()

    app = FastAPIOffline(
        title="tensormapper",
        version="0.2.0",
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.validation_slots = threading.BoundedSemaphore(settings.max_validations)  # /v1/mappings/validate
    errors.install(app)
    openapi_security.document_security(app, settings)  # the token each route needs, as the settings say
    openapi_statuses.document_statuses(app)  # every status a route answers, in the document
    examples_engine.document_examples(app)  # the engine routes' examples, found when the document is built
    app.include_router(health.router)
    for module in (targets, workloads, problems, mappings, tunings, models):
        app.include_router(module.router, dependencies=[Reader])
    app.include_router(metrics.router)
    # reads of finished results from memory, unless reads need a token (then every read goes through the routes)
    fast_reads.install(app, settings.fast_reads and not (settings.tokens and settings.auth_reads))
    metrics.install(app)
    body_limit.install(app, settings.max_body_bytes, settings.max_model_bytes)
    return app


app = create_app()
