"""Builds the FastAPI application."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from app.settings import Settings


def create_app(settings: Settings | None = None) -> FastAPI:
    """The service: OpenAPI console at /docs, served without any CDN."""
    settings = settings or Settings()
    app = FastAPIOffline(
        title="tensormapper",
        version="0.1.0",
        description="Mapping search and autotuning for AI accelerators.",
    )
    app.state.settings = settings

    @app.get("/health", tags=["service"])
    def health() -> dict[str, str]:
        """Liveness: the service answers."""
        return {"status": "ok"}

    return app


app = create_app()
