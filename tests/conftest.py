"""Fixtures every test package may use: the local PostgreSQL (skipped, with the reason, where none answers)."""

from __future__ import annotations

import pytest

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


@pytest.fixture(scope="session")
def pg_url() -> str:
    """This machine's PostgreSQL (trust auth, database `test`); the test skips and says why where it is absent."""
    try:
        import psycopg
    except ImportError:
        pytest.skip("psycopg is not installed (dependency psycopg[binary])")
    try:
        psycopg.connect(PG_URL, connect_timeout=2).close()
    except psycopg.OperationalError as e:
        pytest.skip(f"PostgreSQL not reachable at {PG_URL}: {str(e).strip()}")
    return PG_URL
