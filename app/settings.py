"""Service settings, from ``TM_*`` environment variables (or a ``.env`` file), the CLI's flags on top.

The default storage is an embedded SQLite file under `data_dir` (``./data``): no server to
start. ``TM_STORAGE=postgresql://user@host:5432/db`` puts jobs and results in PostgreSQL, shared by
API processes and workers on any host.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Settings of the service and its workers."""

    model_config = SettingsConfigDict(env_prefix="TM_", env_file=".env", extra="ignore")

    host: str = Field(default="127.0.0.1", description="interface the API binds")
    port: int = Field(default=8000, ge=0, le=65535, description="port the API binds")
    data_dir: Path = Field(default=Path("data"), description="directory of the embedded database")
    storage: str | None = Field(
        default=None, description="database URL (sqlite:///..., postgresql://...); default: SQLite in data_dir"
    )
    workers: int = Field(default=1, ge=0, le=64, description="worker processes `mapper serve` starts beside the API")
    max_body_bytes: int = Field(default=1 << 20, ge=1024, description="largest request body accepted (413 above)")
    heartbeat_seconds: float = Field(default=1.0, gt=0, le=60, description="how often a worker reports a running job")
    stale_seconds: float = Field(default=30.0, gt=0, description="a job not heartbeated for this long is re-queued")
    poll_seconds: float = Field(default=0.5, gt=0, le=10, description="how often idle workers and event streams look")

    @property
    def storage_url(self) -> str:
        """The database URL jobs and results live in."""
        if self.storage:
            return self.storage
        return f"sqlite:///{(self.data_dir / 'tensormapper.db').as_posix()}"

    def prepare(self) -> None:
        """Create the data directory of the embedded default (raises OSError if it cannot)."""
        if not self.storage:
            self.data_dir.mkdir(parents=True, exist_ok=True)
