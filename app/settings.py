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
    max_model_bytes: int = Field(
        default=64 << 20, ge=1024, le=1 << 30, description="largest model upload on /v1/models/ (ONNX or layer list)"
    )
    heartbeat_seconds: float = Field(default=1.0, gt=0, le=60, description="how often a worker reports a running job")
    stale_seconds: float = Field(default=30.0, gt=0, description="a job not heartbeated for this long is re-queued")
    access_log: bool = Field(default=True, description="uvicorn's access log, one line per request (costs CPU)")
    fast_reads: bool = Field(
        default=True, description="answer reads of finished results held in memory before routing (with ETags)"
    )
    keep_freed_memory: bool = Field(
        default=True,
        description="keep freed memory in the process for the next search's arrays (glibc; `mapper.allocator`)",
    )
    poll_seconds: float = Field(default=0.5, gt=0, le=10, description="how often idle workers and event streams look")

    # limits: exceeding one is a 4xx naming the limit and the setting that raises it
    max_axes: int = Field(default=16, ge=1, le=16, description="axes per problem (the engine's hard limit is 16)")
    max_axis_size: int = Field(default=1 << 24, ge=1, le=1 << 24, description="size of one axis")
    max_macs: float = Field(default=1e15, gt=0, description="total MACs of a request (every layer of a workload)")
    max_trials: int = Field(default=100_000, ge=1, le=1_000_000, description="trials a request may ask for")
    max_search_seconds: float = Field(default=3600.0, gt=0, description="search seconds a request may ask for")
    max_validations: int = Field(
        default=2,
        ge=1,
        le=64,
        description="executor runs `POST /v1/mappings/validate` may do at once (429 with Retry-After beyond)",
    )
    validation_seconds: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="longest a `POST /v1/mappings/validate` run may take (503 past it; `mapper validate` has no limit)",
    )
    max_validation_points: int = Field(
        default=1 << 31,
        ge=1,
        description="iteration points (padding included) one `POST /v1/mappings/validate` run may compute (422 above)",
    )
    max_active_per_client: int = Field(
        default=200, ge=1, description="queued or running jobs one client (token or address) may have at once"
    )
    api_tokens: str = Field(
        default="", description="comma-separated bearer tokens; when set, creating or cancelling work needs one"
    )
    auth_reads: bool = Field(default=False, description="with api_tokens, require a token on read routes too")

    @property
    def tokens(self) -> tuple[str, ...]:
        return tuple(t.strip() for t in self.api_tokens.split(",") if t.strip())

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
