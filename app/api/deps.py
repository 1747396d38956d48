"""Dependencies of the routes, as `Annotated` aliases (the FastAPI full-stack template's way)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.jobs.store import JobStore
from app.settings import Settings


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_store(request: Request) -> JobStore:
    store: JobStore = request.app.state.store
    return store


SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[JobStore, Depends(get_store)]
