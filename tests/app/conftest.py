"""Fixtures of the service tests: settings on a fresh embedded database, an in-process client,
and settings on this machine's PostgreSQL (`pg_url`, tests/conftest.py)."""

from __future__ import annotations

import shutil
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.jobs.store import JobStore
from app.jobs.worker import Worker
from app.main import create_app
from app.settings import Settings


@pytest.fixture(scope="session")
def empty_database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory whose embedded database the store has created (its tables, the result cache's), no job
    in it: built once per session, since creating the tables takes about a quarter of a second per test."""
    data = tmp_path_factory.mktemp("empty-db") / "data"
    s = Settings(data_dir=data)
    s.prepare()
    store = JobStore(s.storage_url)
    store.close()  # no connection left open: the files are copied whole
    return data


@pytest.fixture
def settings(tmp_path: Path, empty_database: Path) -> Settings:
    """Embedded SQLite under a fresh data directory (a copy of the empty database), fast heartbeats."""
    shutil.copytree(empty_database, tmp_path / "data")
    return Settings(data_dir=tmp_path / "data", heartbeat_seconds=0.2, poll_seconds=0.05, stale_seconds=5)


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    """The app in-process on `settings` (lifespan run, so the store exists)."""
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c


@pytest.fixture
def running_worker(client: TestClient, settings: Settings) -> Iterator[Worker]:
    """A worker thread on the in-process app's store, stopped after the test."""
    w = Worker(settings, store=client.app.state.store)  # type: ignore[attr-defined]
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    yield w
    w.stopping.set()
    t.join(10)


@pytest.fixture
def pg_settings(tmp_path: Path, pg_url: str) -> Settings:
    """Settings on the local PostgreSQL, in a schema of its own so tests do not see each other's jobs."""
    import psycopg

    schema = f"tm_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    url = f"postgresql+psycopg://postgres@127.0.0.1:5432/test?options=-csearch_path%3D{schema}"
    return Settings(storage=url, data_dir=tmp_path / "data", heartbeat_seconds=0.2, poll_seconds=0.05, stale_seconds=5)


@pytest.fixture(params=["sqlite", "postgresql"])
def any_settings(request: pytest.FixtureRequest) -> Settings:
    """Each test that takes this runs on the embedded default and on PostgreSQL."""
    name = "settings" if request.param == "sqlite" else "pg_settings"
    s: Settings = request.getfixturevalue(name)
    return s
